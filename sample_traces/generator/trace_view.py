"""torch_npu trace_view.json: lanes, host ops, kernels, flows, overlap slices and the frequency counter."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .layer import host_parts
from .model import (
    CANN_PID,
    COMPUTE_STREAM,
    FREQ_MHZ,
    FREQ_PID,
    HCCL_STREAM,
    HOST_PID,
    HW_PID,
    MODEL_ID_NONE,
    OVERLAP_PID,
    Launch,
)


def _ts(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def _dur(ns: int) -> str:
    return repr(ns / 1000)


def metadata_events() -> list[str]:
    ev: list[dict[str, Any]] = []

    def lane(pid: int, name: str, label: str, sort: int, threads: list[tuple[int, str]]) -> None:
        ev.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
        ev.append({"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": label}})
        ev.append(
            {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}}
        )
        for tid, tname in threads:
            ev.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": tname}})
            ev.append(
                {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}}
            )

    lane(HOST_PID, "Python", "CPU", 0, [(HOST_PID, f"Thread {HOST_PID}")])
    lane(CANN_PID, "CANN", "CPU", 2, [(HOST_PID, f"Thread {HOST_PID}")])
    lane(
        HW_PID,
        "Ascend Hardware",
        "NPU",
        8,
        [(COMPUTE_STREAM, f"Stream {COMPUTE_STREAM}"), (HCCL_STREAM, f"Stream {HCCL_STREAM}")],
    )
    lane(FREQ_PID, "AI Core Freq", "NPU", 9, [])
    lane(
        OVERLAP_PID,
        "Overlap Analysis",
        "NPU",
        11,
        [(0, "Computing"), (1, "Communication"), (2, "Communication(Not Overlapped)"), (3, "Free")],
    )
    return [json.dumps(e) for e in ev]


@dataclass(frozen=True)
class Shift:
    """Offsets applied when a scheduled template is replayed (large benchmark traces)."""

    ns: int = 0
    conn: int = 0
    task: int = 0
    seq: int = 0
    step: int = 0


def launch_events(la: Launch, prev_end_ns: int | None, sh: Shift = Shift()) -> list[str]:
    """Host op, AscendCL@/Node@launch, device kernel, both flow pairs and overlap slices of one launch."""
    s = la.spec
    start, host = la.start_ns + sh.ns, la.host_start_ns + sh.ns
    acl_start, acl_dur, node_start, node_dur = host_parts(host, la.host_dur_ns)
    conn = la.conn_id + sh.conn
    kts = _ts(start)
    tid = la.stream
    ev = [
        f'{{"ph": "X", "name": "{s.torch_op}", "pid": {HOST_PID}, "tid": {HOST_PID}, "ts": "{_ts(host)}", '
        f'"dur": {_dur(la.host_dur_ns)}, "cat": "cpu_op", "args": {{"Sequence number": {la.seq + sh.seq}, '
        f'"Fwd thread id": 0}}}}',
        f'{{"name": "AscendCL@{s.acl_api}", "pid": {CANN_PID}, "tid": {HOST_PID}, "ts": "{_ts(acl_start)}", '
        f'"dur": {_dur(acl_dur)}, "args": {{"Thread Id": {HOST_PID}, "Mode": "ACL_NN", "level": "acl", '
        f'"id": "{s.acl_api}", "item_id": "0", "connection_id": {conn + 1}}}, "ph": "X"}}',
        f'{{"name": "Node@launch", "pid": {CANN_PID}, "tid": {HOST_PID}, "ts": "{_ts(node_start)}", '
        f'"dur": {_dur(node_dur)}, "args": {{"Thread Id": {HOST_PID}, "Mode": "ACL_NN", "level": "node", '
        f'"id": "launch", "item_id": "{s.name}", "connection_id": {conn}}}, "ph": "X"}}',
    ]
    task_type = s.core
    task_id = 0 if s.core == "HCCL" else la.task_id + sh.task
    ev.append(
        f'{{"name": "{s.name}", "pid": {HW_PID}, "tid": {tid}, "ts": "{kts}", "dur": {_dur(la.dur_ns)}, '
        f'"args": {{"Model Id": {MODEL_ID_NONE}, "Task Type": "{task_type}", "Stream Id": {tid}, '
        f'"Task Id": {task_id}, "Batch Id": 0, "Subtask Id": 4294967295, '
        f'"connection_id": {-1 if s.core == "HCCL" else conn}}}, "ph": "X"}}'
    )
    if s.core != "HCCL":  # communication tasks are not linked by these flows
        h2d = str((conn << 32) | 0xFFFFFFFF)
        ev += [
            f'{{"ph": "s", "bp": "e", "name": "torch_to_npu", "id": {start}, "pid": {HOST_PID}, '
            f'"tid": {HOST_PID}, "ts": "{_ts(host + 2000)}", "cat": "async_npu"}}',
            f'{{"ph": "f", "bp": "e", "name": "torch_to_npu", "id": {start}, "pid": {HW_PID}, "tid": {tid}, '
            f'"ts": "{kts}", "cat": "async_npu"}}',
            f'{{"name": "HostToDevice{h2d}", "ph": "s", "cat": "HostToDevice", "id": "{h2d}", '
            f'"pid": {CANN_PID}, "tid": {HOST_PID}, "ts": "{_ts(node_start)}"}}',
            f'{{"name": "HostToDevice{h2d}", "ph": "f", "id": "{h2d}", "ts": "{kts}", "cat": "HostToDevice", '
            f'"pid": {HW_PID}, "tid": {tid}, "bp": "e"}}',
            f'{{"name": "Computing", "pid": {OVERLAP_PID}, "tid": 0, "ts": "{kts}", '
            f'"dur": {_dur(la.dur_ns)}, '
            f'"ph": "X"}}',
        ]
    else:
        for otid, oname in ((1, "Communication"), (2, "Communication(Not Overlapped)")):
            ev.append(
                f'{{"name": "{oname}", "pid": {OVERLAP_PID}, "tid": {otid}, "ts": "{kts}", '
                f'"dur": {_dur(la.dur_ns)}, "ph": "X"}}'
            )
    if prev_end_ns is not None and start > prev_end_ns + sh.ns:
        gap = start - prev_end_ns - sh.ns
        ev.append(
            f'{{"name": "Free", "pid": {OVERLAP_PID}, "tid": 3, "ts": "{_ts(prev_end_ns + sh.ns)}", '
            f'"dur": {_dur(gap)}, "ph": "X"}}'
        )
    return ev


def extra_events(extra: list[dict[str, Any]], sh: Shift = Shift()) -> list[str]:
    """Host syncs (aten::item + aclrtSynchronizeStream) and ProfilerStep#N spans."""
    ev = []
    for x in extra:
        start, end = x["start"] + sh.ns, max(x["end"], x["start"] + 2000) + sh.ns
        if x["kind"] == "step":
            ev.append(
                f'{{"ph": "X", "name": "ProfilerStep#{x["step"] + sh.step}", "pid": {HOST_PID}, '
                f'"tid": {HOST_PID}, "ts": "{_ts(start)}", "dur": {_dur(end - start)}, "cat": "cpu_op", '
                f'"args": {{"Sequence number": -1, "Fwd thread id": 0}}}}'
            )
        else:
            ev.append(
                f'{{"ph": "X", "name": "aten::item", "pid": {HOST_PID}, "tid": {HOST_PID}, '
                f'"ts": "{_ts(start)}", "dur": {_dur(end - start)}, "cat": "cpu_op", '
                f'"args": {{"Sequence number": -1, "Fwd thread id": 0}}}}'
            )
            ev.append(
                f'{{"name": "AscendCL@aclrtSynchronizeStream", "pid": {CANN_PID}, "tid": {HOST_PID}, '
                f'"ts": "{_ts(start + 1000)}", "dur": {_dur(end - start - 1000)}, "args": {{"Thread Id": '
                f'{HOST_PID}, "Mode": "ACL_RTS", "level": "acl", "id": "aclrtSynchronizeStream", '
                f'"item_id": "0", "connection_id": 0}}, "ph": "X"}}'
            )
    return ev


def freq_points(launches: list[Launch]) -> list[tuple[int, int]]:
    """AI Core Freq counter samples: 1800 MHz, a dip to 1300 around the low-clock kernels, back to 1800."""
    pts = [(launches[0].host_start_ns - 1_000_000, FREQ_MHZ)]
    ordered = sorted(launches, key=lambda la: la.start_ns)
    for i, la in enumerate(ordered):
        prev_f = ordered[i - 1].freq_mhz if i else FREQ_MHZ
        if la.freq_mhz != prev_f:
            prev_end = ordered[i - 1].start_ns + ordered[i - 1].dur_ns
            pts.append(((prev_end + la.start_ns) // 2, la.freq_mhz))
    last = ordered[-1]
    pts.append((last.start_ns + last.dur_ns + 1_000_000, FREQ_MHZ))
    return pts


def freq_events(points: list[tuple[int, int]], sh: Shift = Shift()) -> list[str]:
    return [
        f'{{"name": "AI Core Freq", "ph": "C", "pid": {FREQ_PID}, "tid": 0, "ts": "{_ts(ns + sh.ns)}", '
        f'"args": {{"MHz": {mhz}}}}}'
        for ns, mhz in points
    ]


def template_events(
    launches: list[Launch], extra: list[dict[str, Any]], sh: Shift = Shift(), prev_end_ns: int | None = None
) -> list[str]:
    """All non-metadata events of one scheduled run, optionally shifted (prev_end_ns is unshifted)."""
    ev: list[str] = []
    prev = prev_end_ns
    for la in sorted(launches, key=lambda la: la.start_ns):
        ev += launch_events(la, prev, sh)
        prev = la.start_ns + la.dur_ns
    ev += extra_events(extra, sh)
    ev += freq_events(freq_points(launches), sh)
    return ev


def write_trace_view(path: Path, launches: list[Launch], extra: list[dict[str, Any]]) -> None:
    events = metadata_events() + template_events(launches, extra)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("[\n" + ",\n".join(events) + "\n]\n")
