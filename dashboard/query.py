"""Server-side paging and windowing: what the browser asks for, answered from the DuckDB copy.

The Kernels grid uses AG Grid's infinite row model: the browser sends `{startRow, endRow,
sortModel, filterModel}` and receives only that block plus the total row count, so a million-row
profile never crosses the wire. Column names from the request are checked against the table's own
columns and every value is a bound parameter: a request cannot inject SQL.

The timeline is windowed the same way: given the visible x range it returns at most a few thousand
segments per view, merging neighbouring kernels of a lane into one "N kernels" bar when there are
more than fit on screen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tilescope.dashboard import inputs
from tilescope.dashboard.data import ProfileEntry
from tilescope.errors import UsageError

MAX_PAGE_ROWS = 1000  # one infinite-model block; the grid asks for 100 at a time
MAX_ROW = 2**53 - 1  # the largest row index JavaScript counts exactly
MAX_CONDITIONS = 8  # conditions of one column filter (the grid allows one here, AG Grid's max is 2)
MAX_SORT_KEYS = 16
MAX_LINKS = 150  # host-to-kernel launch lines drawn in one window (more is a hairball)
_TEXT_OPS = {
    "contains": "contains(lower(CAST({c} AS VARCHAR)), lower(?))",
    "notContains": "NOT contains(lower(CAST({c} AS VARCHAR)), lower(?))",
    "equals": "lower(CAST({c} AS VARCHAR)) = lower(?)",
    "notEqual": "lower(CAST({c} AS VARCHAR)) <> lower(?)",
    "startsWith": "starts_with(lower(CAST({c} AS VARCHAR)), lower(?))",
    "endsWith": "ends_with(lower(CAST({c} AS VARCHAR)), lower(?))",
}
_NUMBER_OPS = {
    "equals": "{c} = ?",
    "notEqual": "{c} <> ?",
    "lessThan": "{c} < ?",
    "lessThanOrEqual": "{c} <= ?",
    "greaterThan": "{c} > ?",
    "greaterThanOrEqual": "{c} >= ?",
}


def _quote(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'


def _condition(column: str, model: dict[str, Any], params: list[Any], nested: bool = False) -> str | None:
    """One AG Grid filter condition as SQL; unknown filter types are ignored, not trusted.

    Malformed values (a text where a number belongs, conditions nested deeper than AG Grid nests
    them) raise UsageError: they come from a hand-made request, not from the grid.
    """
    what = f"grid filter on {column}"
    if "conditions" in model:  # combined: {"operator": "AND"|"OR", "conditions": [...]}
        conditions = model["conditions"]
        if nested or not isinstance(conditions, list) or len(conditions) > MAX_CONDITIONS:
            raise UsageError(f"{what}: expected at most {MAX_CONDITIONS} plain conditions")
        operator = inputs.choice(model.get("operator"), ("AND", "OR", "and", "or"), f"{what}, operator")
        subs = [_condition(column, _model(m, column), params, nested=True) for m in conditions]
        parts = [p for p in subs if p]
        joiner = " OR " if (operator or "AND").upper() == "OR" else " AND "
        return "(" + joiner.join(parts) + ")" if parts else None
    kind = model.get("type", "contains")
    if not isinstance(kind, str):
        raise UsageError(f"{what}: expected a filter type name")
    c = _quote(column)
    if kind == "blank":
        return f"{c} IS NULL"
    if kind == "notBlank":
        return f"{c} IS NOT NULL"
    value = model.get("filter")
    if model.get("filterType") == "number":
        if kind == "inRange":
            high = model.get("filterTo")
            if value is None or high is None:  # the grid sends an incomplete range while typing
                return None
            params.extend([inputs.number(value, what), inputs.number(high, what)])
            return f"{c} BETWEEN ? AND ?"
        template = _NUMBER_OPS.get(kind)
        if template is None or value is None:
            return None
        params.append(inputs.number(value, what))
        return template.format(c=c)
    template = _TEXT_OPS.get(kind)
    if template is None or value in (None, ""):
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)  # a text filter typed as digits may arrive as a number
    params.append(inputs.text(value, what))
    return template.format(c=c)


def _model(value: Any, column: str) -> dict[str, Any]:
    model = inputs.mapping(value, f"grid filter on {column}")
    if model is None:
        raise UsageError(f"grid filter on {column}: expected an object")
    return model


def where_clause(filter_model: Any, search: str | None, columns: list[str], params: list[Any]) -> str:
    parts: list[str] = []
    for column, model in (inputs.mapping(filter_model, "grid filterModel") or {}).items():
        if column in columns:  # a column the table does not have is ignored, never quoted into SQL
            cond = _condition(column, _model(model, column), params)
            if cond:
                parts.append(cond)
    if search:
        # The search box matches kernel names and op types, the two things a user remembers.
        text_cols = [c for c in ("name", "op_type") if c in columns]
        if text_cols:
            ors = [f"contains(lower(CAST({_quote(c)} AS VARCHAR)), lower(?))" for c in text_cols]
            params.extend([search] * len(text_cols))
            parts.append("(" + " OR ".join(ors) + ")")
    return " WHERE " + " AND ".join(parts) if parts else ""


def order_clause(sort_model: Any, columns: list[str], default: str) -> str:
    if sort_model is not None and (not isinstance(sort_model, list) or len(sort_model) > MAX_SORT_KEYS):
        raise UsageError(f"grid sortModel: expected a list of at most {MAX_SORT_KEYS} sort keys")
    keys = []
    for item in sort_model or []:
        sort = _model(item, "sort")
        col = sort.get("colId")
        direction = inputs.choice(sort.get("sort"), ("asc", "desc"), "grid sort direction")
        if col in columns:
            keys.append(f"{_quote(col)} {'DESC' if direction == 'desc' else 'ASC'} NULLS LAST")
    return " ORDER BY " + ", ".join(keys or [default])


def _json_safe(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as plain JSON values (NaN/NA → None; floats rounded so payloads stay small)."""
    out = frame.astype(object).where(frame.notna(), None)
    for col in out.columns:
        if pd.api.types.is_float_dtype(frame[col].dtype):
            out[col] = [None if v is None else round(float(v), 4) for v in out[col]]
    return [{str(k): v for k, v in row.items()} for row in out.to_dict("records")]


def kernel_page(
    entry: ProfileEntry, request: Any, search: Any = None, grouped: bool = False
) -> dict[str, Any]:
    """`getRowsResponse` for one `getRowsRequest`: the rows of the block and the total count.

    The request and the search text come straight from the browser: a malformed one raises
    UsageError (a 400), never a database error.
    """
    request = inputs.mapping(request, "grid request") or {}
    search = inputs.text(search, "kernel search")
    start = inputs.whole(request.get("startRow"), "grid startRow", 0, MAX_ROW)
    end = inputs.whole(request.get("endRow"), "grid endRow", min(start + 100, MAX_ROW), MAX_ROW)
    if end < start:
        raise UsageError("grid request: endRow is before startRow")
    limit = min(end - start, MAX_PAGE_ROWS)
    table, columns = ("g", entry.group_columns) if grouped else ("k", [*entry.grid_columns, "_row"])
    default = (
        '"total_us" DESC' if grouped else ('"duration_us" DESC' if "duration_us" in columns else '"_row"')
    )
    params: list[Any] = []
    where = where_clause(request.get("filterModel"), search, columns, params)
    order = order_clause(request.get("sortModel"), columns, default)
    # One cursor per statement, each result read to the end: a DuckDB connection refuses a new
    # query while an earlier result is still open.
    count = int(entry.cursor().execute(f"SELECT count(*) FROM {table}{where}", params).fetchall()[0][0])
    select = ", ".join(_quote(c) for c in columns)
    page = (
        entry.cursor()
        .execute(f"SELECT {select} FROM {table}{where}{order} LIMIT ? OFFSET ?", [*params, limit, start])
        .df()
    )
    return {"rowData": _json_safe(page), "rowCount": count}


# --- timeline ---------------------------------------------------------------------------------


@dataclass
class Lane:
    """One timeline row: kernels of a stream, or host ops of a thread; sorted by start (µs)."""

    label: str
    kind: str  # "kernel" | "host"
    start: np.ndarray  # float64 µs since the profile's first event
    end: np.ndarray
    names: np.ndarray  # object array of str
    category: np.ndarray  # core-type category per segment ("Cube", "Vector", ...) or "Host"
    # For kernel lanes with flow events: start (µs) and lane label of the launching host op.
    link_start: np.ndarray | None = None
    link_lane: np.ndarray | None = None


@dataclass
class Segments:
    """What the timeline figure draws for one view window."""

    lane: list[str]
    start: list[float]
    end: list[float]
    text: list[str]
    category: list[str]
    merged: bool  # True when neighbouring kernels were merged to fit the budget
    total_in_window: int
    # host op start, host lane, kernel start, kernel lane: drawn only when few enough to read
    links: list[tuple[float, str, float, str]] = field(default_factory=list)


def window_lane(
    lane: Lane, x0: float, x1: float, bins: int
) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray, bool, np.ndarray | None]:
    """Segments of one lane intersecting [x0, x1], merged into at most `bins` buckets if needed."""
    # Segments are sorted by start; those ending before x0 may still overlap, so search by start
    # from x0 minus the longest segment of the lane.
    longest = float((lane.end - lane.start).max()) if len(lane.start) else 0.0
    lo = int(np.searchsorted(lane.start, x0 - longest, side="left"))
    hi = int(np.searchsorted(lane.start, x1, side="right"))
    s, e = lane.start[lo:hi], lane.end[lo:hi]
    keep = e >= x0
    s, e, names, cats = s[keep], e[keep], lane.names[lo:hi][keep], lane.category[lo:hi][keep]
    if len(s) <= bins:
        return s, e, [str(n) for n in names], cats, False, lo + np.flatnonzero(keep)
    width = (x1 - x0) / bins if x1 > x0 else 1.0
    bucket = np.clip(((s - x0) // width).astype(np.int64), 0, bins - 1)
    edges = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    ms = np.minimum.reduceat(s, edges)
    me = np.maximum.reduceat(e, edges)
    counts = np.diff(np.r_[edges, len(s)])
    busy = np.add.reduceat(e - s, edges)
    text = [
        f"{n} kernels, {b:,.1f} µs busy" if n > 1 else str(names[i])
        for n, b, i in zip(counts, busy, edges, strict=True)
    ]
    return ms, me, text, cats[edges], True, None


def timeline_window(
    lanes: list[Lane], x0: float | None = None, x1: float | None = None, budget: int = 6000
) -> Segments:
    """All lanes cut to the window, within `budget` segments in total."""
    if x0 is None or x1 is None:
        starts = [ln.start[0] for ln in lanes if len(ln.start)]
        ends = [ln.end.max() for ln in lanes if len(ln.end)]
        x0 = float(min(starts)) if starts else 0.0
        x1 = float(max(ends)) if ends else 1.0
    bins = max(budget // max(len(lanes), 1), 50)
    seg = Segments([], [], [], [], [], False, 0)
    for lane in lanes:
        s, e, text, cats, merged, idx = window_lane(lane, x0, x1, bins)
        if idx is not None and lane.link_start is not None and lane.link_lane is not None:
            has = ~np.isnan(lane.link_start[idx])
            for i in idx[has]:
                seg.links.append(
                    (float(lane.link_start[i]), str(lane.link_lane[i]), float(lane.start[i]), lane.label)
                )
        seg.lane += [lane.label] * len(s)
        seg.start += s.tolist()
        seg.end += e.tolist()
        seg.text += text
        seg.category += [str(c) for c in cats]
        seg.merged |= merged
        seg.total_in_window += len(s)
    if len(seg.links) > MAX_LINKS:
        seg.links = []
    return seg


def build_lanes(entry: ProfileEntry, category_of: Any) -> list[Lane]:
    """Lanes from the profile's timeline (host ops + kernels) or, lacking one, its kernel table."""
    tl = entry.profile.timeline
    if tl is not None and len(tl.kernels):
        # flows index the full tables: link first, then keep what has a start
        timed, host = _timed(_with_launcher(tl.kernels, tl.host_ops, tl.flows)), _timed(tl.host_ops)
    else:
        timed, host = _timed(entry.kernels), None
    if timed is None or not len(timed):
        return []  # `timeline_gap` says why
    kernels = timed
    origin = int(kernels["start_ns"].min())
    if host is not None and len(host):
        origin = min(origin, int(host["start_ns"].min()))
    lanes: list[Lane] = []
    if host is not None and len(host):
        key = "lane" if "lane" in host else "tid"
        for label, part in host.groupby(key, sort=True, observed=True):
            lanes.append(
                _lane(f"host {label}", "host", part, origin, lambda p: np.full(len(p), "Host", object))
            )
    if "core_type" not in kernels and "core_type" in entry.kernels and "name" in kernels:
        # Timeline kernels carry no core type: take it from the kernel table by name.
        core_of = entry.kernels.drop_duplicates("name").set_index("name")["core_type"]
        by_name = kernels["kernel_name"] if "kernel_name" in kernels else kernels["name"]
        kernels = kernels.assign(core_type=by_name.map(core_of))
    stream = "stream_id" if "stream_id" in kernels else None
    groups = kernels.groupby(stream, sort=True, observed=True) if stream else [("0", kernels)]
    for label, part in groups:
        lanes.append(_lane(f"stream {label}", "kernel", part, origin, category_of))
    return lanes


def _timed(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """The rows that can be placed in time: a start and a duration. An `msprof op` profile, a run
    bundle of one, or an IR-only bundle have none (their start_ns is all null), a table can lack
    a few; None when the table lacks the columns."""
    if frame is None or "start_ns" not in frame or "duration_us" not in frame:
        return None
    timed = frame["start_ns"].notna()
    return frame if bool(timed.all()) else frame[timed]


def timeline_gap(entry: ProfileEntry) -> str:
    """Why the timeline of `entry` is empty, in the words the view shows."""
    profile = entry.profile
    if not len(entry.kernels):
        return (
            "Nothing to place on a timeline: this input holds no kernel launches "
            "(IR only, nothing was profiled)."
        )
    if profile.source.producer == "msprof_op":
        return (
            "No start times in this profile: `msprof op` measures one kernel in isolation, launch by "
            "launch, with no clock shared between launches. Its per-block numbers are in Kernel detail."
        )
    return (
        f"No start times in this profile ({profile.source.format} input): nothing to place on a "
        "timeline. Profile with torch_npu or msprof to see kernels in time."
    )


def _with_launcher(kernels: pd.DataFrame, host: pd.DataFrame, flows: pd.DataFrame) -> pd.DataFrame:
    """Kernel names suffixed with the host op that launched them (flow host_index → kernel_index)."""
    if flows is None or not len(flows) or not {"host_index", "kernel_index"} <= set(flows.columns):
        return kernels
    linked = flows[(flows["host_index"] >= 0) & (flows["kernel_index"] >= 0)]
    linked = linked[(linked["host_index"] < len(host)) & (linked["kernel_index"] < len(kernels))]
    if not len(linked):
        return kernels
    launcher = pd.Series(pd.NA, index=range(len(kernels)), dtype="string")
    h_idx = linked["host_index"].to_numpy(dtype=np.int64)
    k_idx = linked["kernel_index"].to_numpy(dtype=np.int64)
    launcher.iloc[k_idx] = host["name"].astype("string").to_numpy()[h_idx]
    link_start = np.full(len(kernels), np.nan)
    link_start[k_idx] = host["start_ns"].astype("Float64").to_numpy(dtype="float64", na_value=np.nan)[h_idx]
    link_lane = np.full(len(kernels), None, dtype=object)
    lane_key = "lane" if "lane" in host else "tid"
    link_lane[k_idx] = [f"host {v}" for v in host[lane_key].to_numpy()[h_idx]]
    names = kernels["name"].astype("string").reset_index(drop=True)
    shown = names.where(launcher.isna(), names + " ← launched by " + launcher)
    return kernels.reset_index(drop=True).assign(
        name=shown, kernel_name=names, link_start_ns=link_start, link_lane=link_lane
    )


def _lane(label: str, kind: str, part: pd.DataFrame, origin: int, category_of: Any) -> Lane:
    part = part.sort_values("start_ns", kind="stable")
    start = (part["start_ns"].astype("int64").to_numpy() - origin) / 1000.0
    end = start + part["duration_us"].astype("float64").fillna(0).to_numpy()
    names = (
        part["name"].astype(str).to_numpy(dtype=object) if "name" in part else np.full(len(part), "?", object)
    )
    lane = Lane(label, kind, start, end, names, np.asarray(category_of(part), dtype=object))
    if "link_start_ns" in part:
        lane.link_start = (part["link_start_ns"].to_numpy(dtype="float64") - origin) / 1000.0
        lane.link_lane = part["link_lane"].to_numpy(dtype=object)
    return lane
