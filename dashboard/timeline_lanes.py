"""The Timeline tab's lanes and the window of them a view draws.

Lanes (`build_lanes`), top to bottom:
- host: one per process and thread of the timeline (Python, CANN, ...), named by the thread's name;
- device: one per stream and engine — Cube, Vector, Mix (MIX_AIC / MIX_AIV, coloured apart),
  AI_CPU, HCCL, any other kernel type by its name, then the stream's runtime tasks (event records,
  SQE tasks, PROFILING_ENABLE, ...: `timeline_facts.kernel_tasks` says which tasks are kernels);
- communication: the timeline's HCCL groups (torch_npu writes them in an `HCCL` process: one
  thread per group, plus one per plane whose tasks are the hardware stream's own, left out), or,
  when the timeline has none, the kernel table's HCCL rows (they carry no stream).
Without a timeline the kernel table alone gives the device and communication lanes.

The engine of a timeline task is the kernel table's core type for its name when the profile has a
kernel table (torch_npu's timeline says AI_CORE for vector kernels too), else its `Task Type`.

Launch links (host op → kernel) come from the timeline's flows (a kernel with two prefers the CANN
`HostToDevice` one: that is the launch) and, for kernels no flow reaches, from an equal
`connection_id` on a host op (msprof timelines write the flow ends only).

`timeline_window` cuts every lane to the visible x range within a budget of segments, merging
neighbouring ones into "N kernels" bars when more than fit; `fit_window` is the first view's range:
the kernels and collectives, not the host's whole capture (a sparse run's 11 kernels sit in 2.6 ms
of a 5.5 s capture).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tilescope.columns import AI_CORE, AI_CPU, AI_VECTOR_CORE, MIX_AIC, MIX_AIV
from tilescope.dashboard import figures as F
from tilescope.dashboard.data import ProfileEntry
from tilescope.io.timeline_facts import kernel_tasks
from tilescope.summary import COMMUNICATION_TYPES

MAX_LINKS = 150  # host-to-kernel launch lines drawn in one window (more is a hairball)
FIT_MARGIN = 0.02  # of the kernels' span, each side of the first view
HCCL_PROCESS = "HCCL"
PLANE_THREAD = "Plane "  # an HCCL process's per-plane threads: the hardware stream's tasks again
RUNTIME = "runtime tasks"
# core type -> (engine: the lane, category: the colour)
_ENGINES = {
    AI_CORE: ("Cube", F.CUBE),
    AI_VECTOR_CORE: ("Vector", F.VECTOR),
    MIX_AIC: ("Mix", F.MIX_CUBE),
    MIX_AIV: ("Mix", F.MIX_VECTOR),
    AI_CPU: ("AI_CPU", F.AI_CPU),
    **{t: ("HCCL", F.COMMUNICATION) for t in COMMUNICATION_TYPES},
}
_ENGINE_ORDER = {"Cube": 0, "Vector": 1, "Mix": 2, "AI_CPU": 3, "HCCL": 4, RUNTIME: 9}


@dataclass
class Lane:
    """One timeline row, sorted by start (µs since the profile's first event)."""

    label: str
    kind: str  # "host" | "kernel" | "comm" (collectives) | "task" (runtime tasks)
    start: np.ndarray
    end: np.ndarray
    names: np.ndarray  # object array of str
    category: np.ndarray  # the colour's category per segment ("Cube", "Mix (Cube)", "HCCL", "Host", ...)
    # For kernel lanes with launch links: start (µs), lane label and name of the launching host op.
    link_start: np.ndarray | None = None
    link_lane: np.ndarray | None = None
    launcher: np.ndarray | None = None

    @property
    def fits(self) -> bool:
        """Whether the first view is fitted to this lane (kernels and collectives)."""
        return self.kind in ("kernel", "comm")


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
        if lane.launcher is None:
            return s, e, [str(n) for n in names], cats, False, lo + np.flatnonzero(keep)
        by = lane.launcher[lo:hi][keep]
        text = [str(n) if b is None else f"{n} ← launched by {b}" for n, b in zip(names, by, strict=True)]
        return s, e, text, cats, False, lo + np.flatnonzero(keep)
    width = (x1 - x0) / bins if x1 > x0 else 1.0
    bucket = np.clip(((s - x0) // width).astype(np.int64), 0, bins - 1)
    edges = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    ms = np.minimum.reduceat(s, edges)
    me = np.maximum.reduceat(e, edges)
    counts = np.diff(np.r_[edges, len(s)])
    busy = np.add.reduceat(e - s, edges)
    what = "host ops" if lane.kind == "host" else "tasks" if lane.kind == "task" else "kernels"
    text = [
        f"{n} {what}, {b:,.1f} µs busy" if n > 1 else str(names[i])
        for n, b, i in zip(counts, busy, edges, strict=True)
    ]
    return ms, me, text, cats[edges], True, None


def whole_window(lanes: list[Lane]) -> tuple[float, float]:
    """From the first start to the last end of every lane."""
    starts = [ln.start[0] for ln in lanes if len(ln.start)]
    ends = [ln.end.max() for ln in lanes if len(ln.end)]
    return (float(min(starts)) if starts else 0.0, float(max(ends)) if ends else 1.0)


def fit_window(lanes: list[Lane]) -> tuple[float, float]:
    """The first view: the span of the kernels and collectives with a small margin; the whole
    run when there are none."""
    fitted = [ln for ln in lanes if ln.fits and len(ln.start)]
    if not fitted:
        return whole_window(lanes)
    x0, x1 = whole_window(fitted)
    pad = max((x1 - x0) * FIT_MARGIN, 1.0)
    return x0 - pad, x1 + pad


def timeline_window(
    lanes: list[Lane], x0: float | None = None, x1: float | None = None, budget: int = 6000
) -> Segments:
    """All lanes cut to the window (None: the whole run), within `budget` segments in total."""
    if x0 is None or x1 is None:
        x0, x1 = whole_window(lanes)
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


# --- building the lanes -----------------------------------------------------------------------


def build_lanes(entry: ProfileEntry) -> list[Lane]:
    """The profile's lanes (see the module's docstring); [] when nothing has a start."""
    tl = entry.profile.timeline
    table = _timed(entry.kernels)
    if tl is not None and len(tl.kernels):
        device = _device_rows(tl, entry.kernels)
        host_all = tl.host_ops
        on_hccl = _in_process(host_all, tl.lanes, HCCL_PROCESS)
        comm = _comm_rows(host_all[on_hccl], tl.threads, tl.lanes)
        host = _host_rows(host_all, tl.threads, tl.lanes)
        device = _with_launcher(device, host, tl.flows)
        host = host[~on_hccl.to_numpy()] if len(host) else host
        if not len(comm) and table is not None and not (device["kind"] == "comm").any():
            comm = _table_comm(table)
    elif table is not None:
        device, host, comm = _table_rows(table), None, None
    else:
        return []  # `timeline_gap` says why
    device, host, comm = _timed(device), _timed(host), _timed(comm)
    parts = [p for p in (host, device, comm) if p is not None and len(p)]
    if not parts:
        return []
    origin = min(int(p["start_ns"].min()) for p in parts)
    lanes: list[Lane] = []
    for part in parts:
        order = part.groupby("lane", sort=False, observed=True)["order"].first().sort_values(kind="stable")
        groups = dict(tuple(part.groupby("lane", sort=False, observed=True)))
        lanes += [_lane(str(label), groups[label], origin) for label in order.index]
    return lanes


def _timed(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """The rows that can be placed in time: a start and a duration. An `msprof op` profile, a run
    bundle of one, or an IR-only bundle have none (their start_ns is all null), a table can lack
    a few; None when the table lacks the columns."""
    if frame is None or "start_ns" not in frame or "duration_us" not in frame:
        return None
    timed = frame["start_ns"].notna()
    return frame if bool(timed.all()) else frame[timed]


def _engines(core_type: pd.Series, is_kernel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(engine, category) per row, factorising the few distinct core types once."""
    codes, uniques = pd.factorize(core_type.astype("object"), use_na_sentinel=True)
    untyped = ("kernels", F.OTHER)  # a kernel no table or Task Type names ("nan": a text NaN)
    pairs = [
        untyped if str(u) in ("nan", "None", "") else _ENGINES.get(str(u), (str(u), F.OTHER)) for u in uniques
    ]
    pairs.append(untyped)
    engine = np.array([p[0] for p in pairs], dtype=object)[codes]
    category = np.array([p[1] for p in pairs], dtype=object)[codes]
    engine[~is_kernel], category[~is_kernel] = RUNTIME, F.OTHER
    return engine, category


def _stream_lanes(
    frame: pd.DataFrame, engine: np.ndarray, category: np.ndarray, kind: np.ndarray
) -> pd.DataFrame:
    """Label and order device rows: `stream N · engine`; a row without a stream is its engine."""
    stream = pd.to_numeric(frame["stream_id"], errors="coerce") if "stream_id" in frame else None
    has = stream.notna().to_numpy() if stream is not None else np.zeros(len(frame), bool)
    sid = stream.fillna(-1).to_numpy(dtype=np.int64) if stream is not None else np.full(len(frame), -1)
    rank = pd.Series(engine).map(_ENGINE_ORDER).fillna(5).to_numpy(dtype=np.int64)
    named = ("stream " + pd.Series(sid).astype(str) + " · " + pd.Series(engine).astype(str)).to_numpy(
        dtype=object
    )
    label = np.where(has, named, engine.astype(object))
    # streams in number order, engines in _ENGINE_ORDER, stream-less rows after every stream
    order = 1_000_000 + np.where(has, sid, 10**9) * 10 + rank
    return frame.assign(lane=label, category=category, kind=kind, order=order)


def _device_rows(tl: Any, table: pd.DataFrame) -> pd.DataFrame:
    """The timeline's hardware tasks with their engine (the kernel table's core type by name)."""
    tasks = tl.kernels.reset_index(drop=True)
    is_kernel, core = kernel_tasks(tasks)
    if "core_type" in table and "name" in table and len(table):
        by_name = table.drop_duplicates("name").set_index("name")["core_type"].astype("object")
        core = tasks["name"].map(by_name).astype("object").where(lambda c: c.notna(), core.astype("object"))
    engine, category = _engines(pd.Series(core), is_kernel)
    kind = np.where(is_kernel, "kernel", "task").astype(object)
    kind[engine == "HCCL"] = "comm"
    return _stream_lanes(tasks, engine, category, kind)


def _table_rows(table: pd.DataFrame) -> pd.DataFrame:
    """A kernel table alone: every launch is a kernel, its engine its core type."""
    core = table["core_type"] if "core_type" in table else pd.Series(None, index=table.index, dtype="object")
    engine, category = _engines(core, np.ones(len(table), dtype=bool))
    kind = np.where(engine == "HCCL", "comm", "kernel").astype(object)
    return _stream_lanes(table, engine, category, kind)


def _table_comm(table: pd.DataFrame) -> pd.DataFrame:
    """The kernel table's communication rows, for a timeline that has none of its own."""
    rows = _table_rows(table)
    return rows[(rows["kind"] == "comm").to_numpy()]


def _in_process(host: pd.DataFrame, processes: dict[int, str], name: str) -> pd.Series:
    pids = [p for p, n in processes.items() if n == name]
    return host["pid"].isin(pids) if "pid" in host else pd.Series(False, index=host.index)


def _thread_label(
    host: pd.DataFrame, threads: dict[tuple[int, int], str], processes: dict[int, str]
) -> tuple[np.ndarray, np.ndarray]:
    """`process · thread name` per row (a thread without a name: its tid) and the lane's place
    (by process name, then thread id), worked out once per distinct (pid, tid)."""
    if not len(host):
        return np.array([], dtype=object), np.array([], dtype=np.int64)
    codes = host.groupby(["pid", "tid"], sort=False).ngroup().to_numpy()
    pairs = host[["pid", "tid"]].drop_duplicates()  # in the order ngroup numbers them
    labels, keys = [], []
    for pid, tid in pairs.itertuples(index=False):
        process = processes.get(int(pid), f"pid {pid}")
        labels.append(f"{process} · {threads.get((int(pid), int(tid)), f'thread {tid}')}")
        keys.append((process, int(tid)))
    place = np.empty(len(keys), dtype=np.int64)
    place[sorted(range(len(keys)), key=keys.__getitem__)] = np.arange(len(keys))
    return np.array(labels, dtype=object)[codes], place[codes]


def _host_rows(
    host: pd.DataFrame, threads: dict[tuple[int, int], str], processes: dict[int, str]
) -> pd.DataFrame:
    """Every host event with its lane label and place."""
    label, order = _thread_label(host, threads, processes)
    return host.assign(lane=label, category=F.HOST, kind="host", order=order)


def _comm_rows(
    events: pd.DataFrame, threads: dict[tuple[int, int], str], processes: dict[int, str]
) -> pd.DataFrame:
    """An HCCL process's group threads (the collectives); its plane threads are left out."""
    label, order = _thread_label(events, threads, processes)
    planes = np.array([str(lb).split(" · ", 1)[-1].startswith(PLANE_THREAD) for lb in label], dtype=bool)
    return events[~planes].assign(
        lane=label[~planes], category=F.COMMUNICATION, kind="comm", order=order[~planes]
    )


def _with_launcher(device: pd.DataFrame, host: pd.DataFrame, flows: pd.DataFrame | None) -> pd.DataFrame:
    """Device rows with the host op that launched them: its name, start and lane (the hover's
    "← launched by …" and the launch arrow); flows first, then an equal connection_id."""
    if not len(host):
        return device
    host_idx = np.full(len(device), -1, dtype=np.int64)
    if flows is not None and len(flows) and {"host_index", "kernel_index"} <= set(flows.columns):
        linked = flows[(flows["host_index"] >= 0) & (flows["kernel_index"] >= 0)]
        linked = linked[(linked["host_index"] < len(host)) & (linked["kernel_index"] < len(device))]
        if "cat" in linked:  # the CANN launch wins over the framework op's flow: written last
            linked = linked.assign(_l=(linked["cat"].astype("object") == "HostToDevice")).sort_values(
                "_l", kind="stable"
            )
        host_idx[linked["kernel_index"].to_numpy(dtype=np.int64)] = linked["host_index"].to_numpy(
            dtype=np.int64
        )
    if "connection_id" in device and "connection_id" in host:
        missing = (host_idx < 0) & device["connection_id"].notna().to_numpy()
        if missing.any():
            ids = host["connection_id"]
            first = pd.Series(np.arange(len(host)), index=ids).loc[ids.notna().to_numpy()]
            first = first[~first.index.duplicated()]
            want = device["connection_id"].to_numpy()[missing]
            host_idx[np.flatnonzero(missing)] = first.reindex(want).fillna(-1).to_numpy(dtype=np.int64)
    has = host_idx >= 0
    if not has.any():
        return device
    src = host_idx[has]
    link_start = np.full(len(device), np.nan)
    link_start[has] = host["start_ns"].to_numpy(dtype=np.float64)[src]
    link_lane = np.full(len(device), None, dtype=object)
    link_lane[has] = host["lane"].to_numpy(dtype=object)[src]
    launcher = np.full(len(device), None, dtype=object)
    launcher[has] = host["name"].astype("object").to_numpy()[src]
    return device.assign(link_start_ns=link_start, link_lane=link_lane, launcher=launcher)


def _lane(label: str, part: pd.DataFrame, origin: int) -> Lane:
    part = part.sort_values("start_ns", kind="stable")
    start = (part["start_ns"].astype("int64").to_numpy() - origin) / 1000.0
    end = start + part["duration_us"].astype("float64").fillna(0).to_numpy()
    names = (
        part["name"].astype(str).to_numpy(dtype=object) if "name" in part else np.full(len(part), "?", object)
    )
    kind = str(part["kind"].iloc[0])
    lane = Lane(label, kind, start, end, names, part["category"].to_numpy(dtype=object))
    if "link_start_ns" in part and part["link_start_ns"].notna().any():
        lane.link_start = (part["link_start_ns"].to_numpy(dtype="float64") - origin) / 1000.0
        lane.link_lane = part["link_lane"].to_numpy(dtype=object)
        lane.launcher = part["launcher"].to_numpy(dtype=object)
    return lane


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
