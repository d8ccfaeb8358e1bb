"""The rows of the Timeline tab's lanes, before they are cut into lanes (timeline_lanes.build_lanes):
which lane each host event, hardware task and collective belongs to, its colour's category, and
the host op that launched it.

Everything per row is a numpy array; a lane is an integer code into a short list of labels, worked
out once per distinct (stream, engine) or (pid, tid). Nothing per row goes back into a DataFrame:
pandas 3 turns an assigned object array of strings into an Arrow string column, which cost more than
the rest of the build on a 140,000-event trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from tilescope.columns import AI_CORE, AI_CPU, AI_VECTOR_CORE, MIX_AIC, MIX_AIV
from tilescope.dashboard import figures as F
from tilescope.io.timeline_facts import kernel_tasks
from tilescope.summary import COMMUNICATION_TYPES

if TYPE_CHECKING:
    from tilescope.dashboard.data import ProfileEntry

HCCL_PROCESS = "HCCL"
LAUNCH_PROCESS = "CANN"  # the runtime: its launches are the arrows to the device
PLANE_THREAD = "Plane "  # an HCCL process's per-plane threads: the hardware stream's tasks again
RUNTIME = "runtime tasks"
UNTYPED = ("kernels", F.OTHER)  # a kernel that neither a table nor its Task Type names
# core type -> (engine: the lane, category: the colour)
ENGINES = {
    AI_CORE: ("Cube", F.CUBE),
    AI_VECTOR_CORE: ("Vector", F.VECTOR),
    MIX_AIC: ("Mix", F.MIX_CUBE),
    MIX_AIV: ("Mix", F.MIX_VECTOR),
    AI_CPU: ("AI_CPU", F.AI_CPU),
    **{t: ("HCCL", F.COMMUNICATION) for t in COMMUNICATION_TYPES},
}
_ENGINE_ORDER = {"Cube": 0, "Vector": 1, "Mix": 2, "AI_CPU": 3, "HCCL": 4, RUNTIME: 9}
NO_STREAM = 10**9  # the place of lanes without a stream: after every stream


@dataclass
class Rows:
    """Rows of one part of the timeline (host, device or communication)."""

    lane: np.ndarray  # int: index into labels
    labels: list[str]
    kinds: list[str]  # per label: "host" | "kernel" | "comm" | "task"
    order: list[int]  # per label: lanes are drawn in this order within the part
    start_ns: np.ndarray  # int64
    duration_us: np.ndarray  # float64, NaN as 0
    name: np.ndarray  # object
    category: np.ndarray  # object: the colour's category
    link_host: np.ndarray | None = None  # int64 index into Hosts, -1: no launch known

    def take(self, keep: np.ndarray) -> Rows:
        link = None if self.link_host is None else self.link_host[keep]
        return Rows(
            self.lane[keep],
            self.labels,
            self.kinds,
            self.order,
            self.start_ns[keep],
            self.duration_us[keep],
            self.name[keep],
            self.category[keep],
            link,
        )


@dataclass
class Hosts:
    """What a launch link points at: per host op, its start, lane label and name."""

    start_ns: np.ndarray
    lane: np.ndarray  # object
    name: np.ndarray  # object


def rows(entry: ProfileEntry) -> tuple[list[Rows], Hosts | None]:
    """Host, device and communication rows (those with a start), and the host ops links name."""
    tl = entry.profile.timeline
    table = _timed(entry.kernels)
    if tl is None or not len(tl.kernels):
        if table is None or not len(table):
            return [], None
        return [_stream_rows(table, _core(table), np.ones(len(table), bool))], None
    host = tl.host_ops
    on_hccl = _in_process(host, tl.lanes, HCCL_PROCESS)
    codes, labels, place = _threads(host, tl.threads, tl.lanes)
    launchers = ~on_hccl
    hosts = Hosts(
        host["start_ns"].to_numpy(dtype=np.int64), np.array(labels, dtype=object)[codes], _names(host)
    )
    device = _device_rows(tl.kernels.reset_index(drop=True), entry.kernels)
    device.link_host = _launches(tl.kernels, host, tl.flows, launchers)
    comm = _comm_rows(host, codes, labels, on_hccl, hosts, launchers)
    if not len(comm.start_ns) and table is not None and "comm" not in device.kinds:
        table_rows = _stream_rows(table, _core(table), np.ones(len(table), bool))
        comm = table_rows.take(np.array([k == "comm" for k in table_rows.kinds], dtype=bool)[table_rows.lane])
    at = np.flatnonzero(launchers)
    host_rows = Rows(
        codes[at],
        labels,
        ["host"] * len(labels),
        place,
        hosts.start_ns[at],
        _durations(host)[at],
        hosts.name[at],
        np.full(len(at), F.HOST, dtype=object),
    )
    return [r for r in (host_rows, device, comm) if len(r.start_ns)], hosts


def _timed(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """The rows that can be placed in time: a start and a duration. An `msprof op` profile, a run
    bundle of one, or an IR-only bundle have none (their start_ns is all null), a table can lack
    a few; None when the table lacks the columns."""
    if frame is None or "start_ns" not in frame or "duration_us" not in frame:
        return None
    timed = frame["start_ns"].notna()
    return frame if bool(timed.all()) else frame[timed]


def _names(frame: pd.DataFrame) -> np.ndarray:
    if "name" not in frame:
        return np.full(len(frame), "?", dtype=object)
    return frame["name"].astype("object").to_numpy()


def _durations(frame: pd.DataFrame) -> np.ndarray:
    return np.nan_to_num(frame["duration_us"].to_numpy(dtype=np.float64, na_value=np.nan))


def _core(table: pd.DataFrame) -> pd.Series:
    if "core_type" in table:
        return table["core_type"]
    return pd.Series(None, index=table.index, dtype="object")


def _stream_rows(frame: pd.DataFrame, core: pd.Series, is_kernel: np.ndarray) -> Rows:
    """Device rows: lane `stream N · engine` (a row without a stream: its engine), category by
    core type; a non-kernel task is its stream's `runtime tasks`."""
    codes, uniques = pd.factorize(core.astype("object"), use_na_sentinel=True)
    pairs = [
        UNTYPED if str(u) in ("nan", "None", "") else ENGINES.get(str(u), (str(u), F.OTHER)) for u in uniques
    ]
    pairs += [UNTYPED, (RUNTIME, F.OTHER)]
    engine = np.where(codes < 0, len(pairs) - 2, codes)
    engine[~is_kernel] = len(pairs) - 1
    stream = pd.to_numeric(frame["stream_id"], errors="coerce") if "stream_id" in frame else None
    sid = (
        np.full(len(frame), -1, dtype=np.int64)
        if stream is None
        else stream.fillna(-1).to_numpy(dtype=np.int64)
    )
    keys, distinct = pd.factorize((sid + 1) * len(pairs) + engine)
    labels: list[str] = []
    kinds: list[str] = []
    order: list[int] = []
    lane_of_key = np.empty(len(distinct), dtype=np.int64)
    for i, key in enumerate(distinct.tolist()):
        s, (name, _) = key // len(pairs) - 1, pairs[key % len(pairs)]
        label = f"stream {s} · {name}" if s >= 0 else name
        if label not in labels:  # MIX_AIC and MIX_AIV share the Mix lane
            labels.append(label)
            kinds.append("task" if name == RUNTIME else "comm" if name == "HCCL" else "kernel")
            # streams in number order, engines in _ENGINE_ORDER, stream-less rows after every stream
            order.append((s if s >= 0 else NO_STREAM) * 10 + _ENGINE_ORDER.get(name, 5))
        lane_of_key[i] = labels.index(label)
    category = np.array([c for _, c in pairs], dtype=object)[engine]
    return Rows(
        lane_of_key[keys],
        labels,
        kinds,
        order,
        frame["start_ns"].to_numpy(dtype=np.int64),
        _durations(frame),
        _names(frame),
        category,
    )


def _device_rows(tasks: pd.DataFrame, table: pd.DataFrame) -> Rows:
    """The timeline's hardware tasks; the engine is the kernel table's core type for the task's
    name (torch_npu's timeline says AI_CORE for vector kernels too), else its Task Type."""
    is_kernel, core = kernel_tasks(tasks)
    if "core_type" in table and "name" in table and len(table):
        by_name = table.drop_duplicates("name").set_index("name")["core_type"].astype("object")
        core = tasks["name"].map(by_name).astype("object").where(lambda c: c.notna(), core.astype("object"))
    return _stream_rows(tasks, pd.Series(core), is_kernel)


def _in_process(host: pd.DataFrame, processes: dict[int, str], name: str) -> np.ndarray:
    pids = [p for p, n in processes.items() if n == name]
    return host["pid"].isin(pids).to_numpy(dtype=bool) if "pid" in host else np.zeros(len(host), bool)


def _threads(
    host: pd.DataFrame, threads: dict[tuple[int, int], str], processes: dict[int, str]
) -> tuple[np.ndarray, list[str], list[int]]:
    """Per row the code of its (pid, tid); per code the label `process · thread name` (a thread
    without a name: its tid) and its place: by process name, then thread id, but CANN last, next to
    the device lanes its launch arrows point to (they cross no framework lane)."""
    if not len(host):
        return np.array([], dtype=np.int64), [], []
    codes = host.groupby(["pid", "tid"], sort=False).ngroup().to_numpy(dtype=np.int64)
    pairs = host[["pid", "tid"]].drop_duplicates()  # in the order ngroup numbers them
    labels: list[str] = []
    keys = []
    for pid, tid in pairs.itertuples(index=False):
        process = processes.get(int(pid), f"pid {pid}")
        label = f"{process} · {threads.get((int(pid), int(tid)), f'thread {tid}')}"
        labels.append(label if label not in labels else f"{label} (pid {pid})")
        keys.append((process == LAUNCH_PROCESS, process, int(tid)))
    place = [0] * len(keys)
    for rank, i in enumerate(sorted(range(len(keys)), key=keys.__getitem__)):
        place[i] = rank
    return codes, labels, place


def _comm_rows(
    host: pd.DataFrame,
    codes: np.ndarray,
    labels: list[str],
    on_hccl: np.ndarray,
    hosts: Hosts,
    launchers: np.ndarray,
) -> Rows:
    """An HCCL process's group threads (the collectives), each linked to its launch by its
    connection_id; its plane threads are left out."""
    kept = np.array([not lb.split(" · ", 1)[-1].startswith(PLANE_THREAD) for lb in labels], dtype=bool)
    at = np.flatnonzero(on_hccl & kept[codes]) if len(labels) else np.array([], dtype=np.int64)
    events = host.iloc[at]
    return Rows(
        codes[at],
        labels,
        ["comm"] * len(labels),
        list(range(len(labels))),
        hosts.start_ns[at],
        _durations(events),
        hosts.name[at],
        np.full(len(at), F.COMMUNICATION, dtype=object),
        _launches(events, host, None, launchers),
    )


def _launches(
    targets: pd.DataFrame, host: pd.DataFrame, flows: pd.DataFrame | None, launchers: np.ndarray
) -> np.ndarray:
    """Per target row the host op that launched it (-1: none known): the flows first (the CANN
    HostToDevice one wins over the framework's), then an equal connection_id on one of the host
    ops `launchers` allows (not the HCCL process's own events, which carry the id too)."""
    link = np.full(len(targets), -1, dtype=np.int64)
    if not len(host) or not len(targets):
        return link
    if flows is not None and len(flows) and {"host_index", "kernel_index"} <= set(flows.columns):
        f = flows[(flows["host_index"] >= 0) & (flows["kernel_index"] >= 0)]
        f = f[(f["host_index"] < len(host)) & (f["kernel_index"] < len(targets))]
        if "cat" in f:  # written last, so it wins
            f = f.iloc[np.argsort((f["cat"].astype("object") == "HostToDevice").to_numpy(), kind="stable")]
        link[f["kernel_index"].to_numpy(dtype=np.int64)] = f["host_index"].to_numpy(dtype=np.int64)
    if "connection_id" in targets and "connection_id" in host:
        missing = (link < 0) & targets["connection_id"].notna().to_numpy(dtype=bool)
        if missing.any():
            ids = host["connection_id"]
            first = pd.Series(np.arange(len(host)), index=ids).loc[
                ids.notna().to_numpy(dtype=bool) & launchers
            ]
            first = first[~first.index.duplicated()]
            want = targets["connection_id"].to_numpy()[missing]
            link[np.flatnonzero(missing)] = first.reindex(want).fillna(-1).to_numpy(dtype=np.int64)
    return link
