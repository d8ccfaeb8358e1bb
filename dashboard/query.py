"""Server-side paging and windowing: what the browser asks for, answered from the DuckDB copy.

The Kernels grid uses AG Grid's infinite row model: the browser sends `{startRow, endRow,
sortModel, filterModel}` and receives only that block plus the total row count, so a million-row
profile never crosses the wire. Column names from the request are checked against the table's own
columns and every value is a bound parameter: a request cannot inject SQL.

The timeline is windowed the same way (tilescope.dashboard.timeline_lanes).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from tilescope.dashboard import inputs
from tilescope.dashboard.data import ProfileEntry
from tilescope.errors import UsageError

MAX_PAGE_ROWS = 1000  # one infinite-model block; the grid asks for 100 at a time
MAX_ROW = 2**53 - 1  # the largest row index JavaScript counts exactly
MAX_CONDITIONS = 8  # conditions of one column filter (the grid allows one here, AG Grid's max is 2)
MAX_SORT_KEYS = 16
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
