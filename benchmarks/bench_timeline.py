"""Benchmark `read_timeline` against `json.load` on a big torch_npu `trace_view.json`.

Usage:
    .venv/bin/python benchmarks/bench_timeline.py --size-mb 200
    .venv/bin/python benchmarks/bench_timeline.py --size-mb 1024
    .venv/bin/python benchmarks/bench_timeline.py --input /path/to/trace_view.json
    .venv/bin/python benchmarks/bench_timeline.py --size-mb 500 --object-form [--code /work/main]

--object-form compares read_timeline on the bare array with read_timeline on the same events in the
`{"traceEvents": [...]}` object form (keys before and after the list, strings holding `]` and
`"traceEvents"`), written next to it; json.load is not run. --code runs the children on another
checkout's code (PYTHONPATH and working directory), e.g. the main branch for a before/after.

Both readers run as separate subprocesses (one after the other, never in parallel) so each reports
its own peak RSS (`ru_maxrss`); the printed ratio is read_timeline time / json.load time, measured
inside each child around the call only (interpreter start-up and imports excluded for both).

The trace comes from `sample_traces.generate.write_large_trace_view(path, target_bytes)` when that
module exists, else from the small column-wise generator below (`write_trace_view`), which writes
the real torch_npu layout: one line, a bare array, string `ts` with 3 decimals, Python `cpu_op`
events (some with `Call stack` strings containing `}, {`), Enqueue/Dequeue with async_task_queue
flows, CANN `AscendCL@`/`Runtime@` events with HostToDevice flows carrying string ids, Ascend
Hardware kernels, `async_npu` flows with integer ids, Overlap Analysis events, an AI Core Freq
counter, and the lane metadata in the middle of the file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import checkout  # benchmarks/checkout.py: how another checkout's code is run
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[1]

PY_PID, PY_TID, DQ_TID = 437675, 437675, 439084
CANN_PID, HW_PID, OV_PID = 43767502, 800, 4376751100
BASE_NS = 1_704_161_511_420_306_491
GROUP_NS = 97_013  # one torch op + its launch + its kernel every ~97 µs
EVENTS_PER_GROUP = 14
BYTES_PER_GROUP = 2_560  # measured on the output of this generator; only used to size the file
CHUNK_GROUPS = 20_000

_CALL_STACK = (
    "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py(1501): _call_impl}, {"
    "/work/model/layers.py(88): forward; /work/model/train.py(41): step"
)


def _s(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def _ts(ns: np.ndarray) -> pa.Array:
    """Microsecond strings with 3 decimals, built column-wise (no per-row formatting)."""
    whole = _s(ns // 1000)
    frac = pc.utf8_lpad(_s(ns % 1000), 3, "0")
    return pc.binary_join_element_wise(whole, ".", frac, "")


def _join(*parts: pa.Array | str) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")


def _group_events(first: int, n: int) -> tuple[list[pa.Array], list[pa.Array]]:
    """Event strings of groups first..first+n, split into the host part and the device part."""
    i = np.arange(first, first + n, dtype=np.int64)
    t0 = BASE_NS + i * GROUP_NS
    corr = _s(i + 148)
    conn = i + 8
    kernel_ns = t0 + 48_088
    kts = _ts(kernel_ns)
    seq = _s(i % 5000)
    stack = pa.array(np.where(i % 4 == 0, f', "Call stack": "{_CALL_STACK}"', ""))
    py = f'"pid": {PY_PID}, "tid": {PY_TID}'
    host = [
        _join('{"ph": "X", "name": "aten::to", ', py, ', "ts": "', _ts(t0), '", "dur": 40.121, '
              '"cat": "cpu_op", "args": {"Sequence number": ', seq, ', "Fwd thread id": 0', stack, "}}"),
        _join('{"ph": "X", "name": "aten::copy_", ', py, ', "ts": "', _ts(t0 + 5_010), '", "dur": 30.05, '
              '"cat": "cpu_op", "args": {"Sequence number": -1, "Fwd thread id": 0}}'),
        _join('{"ph": "X", "name": "Enqueue", ', py, ', "ts": "', _ts(t0 + 10_030), '", "dur": 5.33, '
              '"cat": "enqueue", "args": {"correlation_id": ', corr, "}}"),
        _join('{"ph": "s", "bp": "e", "name": "enqueue_to_dequeue", "id": ', corr, ", ", py,
              ', "ts": "', _ts(t0 + 10_030), '", "cat": "async_task_queue"}'),
        _join('{"ph": "X", "name": "Dequeue@aclnnInplaceZero", "pid": ', str(PY_PID), ', "tid": ',
              str(DQ_TID), ', "ts": "', _ts(t0 + 20_000), '", "dur": 36.27, "cat": "dequeue", '
              '"args": {"correlation_id": ', corr, "}}"),
        _join('{"ph": "f", "bp": "e", "name": "enqueue_to_dequeue", "id": ', corr, ', "pid": ',
              str(PY_PID), ', "tid": ', str(DQ_TID), ', "ts": "', _ts(t0 + 20_000),
              '", "cat": "async_task_queue"}'),
    ]
    h2d = _s((conn << 32) | 0xFFFFFFFF)
    cann = f'"pid": {CANN_PID}, "tid": {DQ_TID}'
    stream = _s(2 + i % 2)
    device = [
        _join('{"name": "AscendCL@aclnnInplaceZero", ', cann, ', "ts": "', _ts(t0 + 22_000),
              '", "dur": 20.77012757357446, "args": {"Thread Id": ', str(DQ_TID), ', "Mode": "ACL_OP", '
              '"level": "acl", "id": "aclnnInplaceZero", "item_id": "0", "connection_id": ',
              _s(conn + 1), '}, "ph": "X"}'),
        _join('{"name": "Runtime@LaunchKernel", ', cann, ', "ts": "', _ts(t0 + 25_000),
              '", "dur": 5.1, "args": {"Thread Id": ', str(DQ_TID), ', "Mode": "ACL_RTS", '
              '"level": "runtime", "id": "LaunchKernel", "item_id": "0", "connection_id": ',
              _s(conn + 1), '}, "ph": "X"}'),
        _join('{"name": "HostToDevice', h2d, '", "ph": "s", "cat": "HostToDevice", "id": "', h2d, '", ',
              cann, ', "ts": "', _ts(t0 + 30_000), '"}'),
        _join('{"name": "aclnnInplaceZero_ZerosLikeAiCore_ZerosLike", "pid": ', str(HW_PID), ', "tid": ',
              stream, ', "ts": "', kts, '", "dur": 1.35, "args": {"Model Id": 4294967295, '
              '"Task Type": "AI_CORE", "Stream Id": ', stream, ', "Task Id": ', _s(i % 65536),
              ', "Batch Id": 0, "Subtask Id": 4294967295, "connection_id": ', _s(conn), '}, "ph": "X"}'),
        _join('{"name": "HostToDevice', h2d, '", "ph": "f", "id": "', h2d, '", "ts": "', kts,
              '", "cat": "HostToDevice", "pid": ', str(HW_PID), ', "tid": ', stream, ', "bp": "e"}'),
        _join('{"name": "Computing", "pid": ', str(OV_PID), ', "tid": 0, "ts": "', kts,
              '", "dur": 1.35, "ph": "X"}'),
        _join('{"ph": "s", "bp": "e", "name": "torch_to_npu", "id": ', _s(kernel_ns), ", ", py,
              ', "ts": "', _ts(t0 + 12_000), '", "cat": "async_npu"}'),
        _join('{"ph": "f", "bp": "e", "name": "torch_to_npu", "id": ', _s(kernel_ns), ', "pid": ',
              str(HW_PID), ', "tid": ', stream, ', "ts": "', kts, '", "cat": "async_npu"}'),
    ]
    freq = i[i % 100 == 0]
    if len(freq):
        device.append(_join('{"name": "AI Core Freq", "pid": ', str(HW_PID), ', "tid": 0, "ts": "',
                            _ts(BASE_NS + freq * GROUP_NS), '", "ph": "C", "args": {"MHz": 1800}}'))
    return host, device


_METADATA = [
    {"ph": "M", "name": "process_name", "pid": PY_PID, "tid": 0, "args": {"name": "Python"}},
    {"ph": "M", "name": "thread_name", "pid": PY_PID, "tid": PY_TID, "args": {"name": f"Thread {PY_TID}"}},
    {"ph": "M", "name": "process_name", "pid": HW_PID, "tid": 0, "args": {"name": "Ascend Hardware"}},
    {"ph": "M", "name": "thread_name", "pid": HW_PID, "tid": 2, "args": {"name": "Stream 2"}},
    {"ph": "M", "name": "thread_name", "pid": HW_PID, "tid": 3, "args": {"name": "Stream 3"}},
    {"ph": "M", "name": "process_labels", "pid": HW_PID, "tid": 0, "args": {"labels": "NPU"}},
    {"ph": "M", "name": "process_name", "pid": CANN_PID, "tid": 0, "args": {"name": "CANN"}},
    {"ph": "M", "name": "process_name", "pid": OV_PID, "tid": 0, "args": {"name": "Overlap Analysis"}},
    {"ph": "M", "name": "thread_name", "pid": OV_PID, "tid": 0, "args": {"name": "Computing"}},
]


def write_trace_view(path: Path, target_bytes: int) -> int:
    """Write a torch_npu-layout trace of about `target_bytes`; return the number of groups."""
    groups = max(1, target_bytes // BYTES_PER_GROUP)
    with open(path, "w", encoding="utf-8") as out:
        out.write("[")
        sep = ""
        # Host lanes first, the lane metadata in the middle, then device lanes and flows, as in
        # the real files (a reader that classifies lanes on the fly would get this wrong).
        for part in (0, 1):
            for first in range(0, groups, CHUNK_GROUPS):
                arrays = _group_events(first, min(CHUNK_GROUPS, groups - first))[part]
                for arr in arrays:
                    out.write(sep + ", ".join(arr.to_pylist()))
                    sep = ", "
            if part == 0:
                out.write(sep + ", ".join(json.dumps(m) for m in _METADATA))
        out.write("]")
    return groups


def _make_trace(path: Path, target_bytes: int) -> None:
    try:
        sys.path.insert(0, str(ROOT))
        from sample_traces.generate import write_large_trace_view
    except ImportError:
        print("sample_traces.generate not available: using this script's generator", file=sys.stderr)
        write_trace_view(path, target_bytes)
    else:
        write_large_trace_view(path, target_bytes)


# Wrapped around the bare array by --object-form: keys before and after the list whose strings hold
# `]` and "traceEvents", as a reader that scans for them naively would trip on.
OBJECT_BEFORE = (
    b'{"displayTimeUnit": "ns", "note": "a ] and \\"traceEvents\\": [1] in a string", '
    b'"meta": {"traceEvents": []}, "traceEvents": '
)
OBJECT_AFTER = b', "otherData": {"traceEvents": [], "x": "]"}}\n'


def write_object_form(src: Path, dst: Path) -> None:
    """`dst`: the events of the bare array `src` as {"traceEvents": [...]} with keys around them."""
    with open(src, "rb") as fh, open(dst, "wb") as out:
        out.write(OBJECT_BEFORE)
        while chunk := fh.read(1 << 24):
            out.write(chunk)
        out.write(OBJECT_AFTER)


_CHILD = {
    "json.load": (
        "import json\n"
        "def run(p):\n"
        "    with open(p, 'rb') as f:\n"
        "        ev = json.load(f)\n"
        "    return f'{len(ev)} events'\n"
    ),
    "read_timeline": (
        "from tilescope.io.timeline import read_timeline\n"
        "def run(p):\n"
        "    t = read_timeline(p)\n"
        "    linked = int((t.flows['kernel_index'] >= 0).sum())\n"
        "    return (f'{len(t.kernels)} kernels, {len(t.host_ops)} host ops, {len(t.flows)} flows '\n"
        "            f'({linked} to kernels), {len(t.counters)} counter rows')\n"
    ),
}
_CHILD["read_timeline (object form)"] = _CHILD["read_timeline"]

_TIMER = (
    "import resource, sys, time\n"
    "t = time.perf_counter()\n"
    "what = run(sys.argv[1])\n"
    "dt = time.perf_counter() - t\n"
    "print(f'{dt:.3f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} {what}')\n"
)


def _measure(label: str, path: Path, code_dir: Path = ROOT) -> tuple[float, float, str] | None:
    """Time and peak RSS of one reader in its own subprocess; None (and its last error line
    printed) when it fails, e.g. the object form on code from before #13."""
    code = checkout.source(code_dir, _CHILD[label]) + _TIMER
    res = subprocess.run([sys.executable, "-P", "-c", code, str(path)], capture_output=True, text=True,
                         env=checkout.env(code_dir), cwd=code_dir)
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"{label:>14}: FAILED: {last[:300]}", flush=True)
        return None
    seconds, rss_mib, what = res.stdout.strip().splitlines()[-1].split(" ", 2)
    return float(seconds), float(rss_mib), what


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=200.0, help="size of the generated trace (MiB)")
    ap.add_argument("--input", type=Path, help="benchmark this trace instead of generating one")
    ap.add_argument("--keep", type=Path, help="write the generated trace here and keep it")
    ap.add_argument("--object-form", action="store_true",
                    help="compare read_timeline on the bare array and on the {\"traceEvents\": [...]} form")
    ap.add_argument("--code", type=Path, default=ROOT, help="checkout whose code the children run")
    args = ap.parse_args(argv)

    tmp: tempfile.TemporaryDirectory[str] | None = None
    if args.input:
        path = args.input
    else:
        if args.keep:
            path = args.keep
        else:
            tmp = tempfile.TemporaryDirectory(prefix="bench_timeline_")
            path = Path(tmp.name) / "trace_view.json"
        _make_trace(path, int(args.size_mb * 2**20))
    size_mib = path.stat().st_size / 2**20
    print(f"trace: {path} ({size_mib:,.0f} MiB), {os.cpu_count()} CPUs, code {args.code}, "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    runs = [("json.load", path), ("read_timeline", path)]
    obj = path.with_name(path.stem + ".object.json")
    if args.object_form:
        write_object_form(path, obj)
        runs = [("read_timeline", path), ("read_timeline (object form)", obj)]
    results: dict[str, tuple[float, float, str] | None] = {}
    for label, file in runs:
        results[label] = found = _measure(label, file, args.code)
        if found is not None:
            sec, rss, what = found
            print(f"{label:>14}: {sec:7.2f} s  peak RSS {rss:7,.0f} MiB  ({what})  "
                  f"load average {os.getloadavg()[0]:.2f}", flush=True)
    base, ours = results[runs[0][0]], results[runs[1][0]]
    if base is not None and ours is not None:
        print(f"time ratio {runs[1][0]} / {runs[0][0]} = {ours[0] / base[0]:.2f}; "
              f"peak RSS ratio = {ours[1] / base[1]:.2f}; load average now {os.getloadavg()[0]:.2f}")
    if args.object_form and not args.keep:
        obj.unlink()
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
