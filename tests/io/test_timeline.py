"""read_timeline on the real torch_npu timeline, a synthetic msprof timeline, and broken files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from tilescope.errors import ProfileFormatError
from tilescope.io.timeline import read_timeline
from tilescope.io.timeline_links import innermost_enclosing, lane_codes
from tilescope.profile import Timeline

from support import REPO_ROOT

REAL = (
    REPO_ROOT.parent
    / "shared"
    / "traces"
    / "real"
    / "torch_timeline_3670"
    / "trace_view.json"
)


@pytest.fixture(scope="module")
def real() -> Timeline:
    if not REAL.is_file():
        pytest.skip(f"real timeline not available at {REAL} (../shared/traces/real is absent)")
    return read_timeline(REAL)


def test_real_counts_and_lanes(real: Timeline) -> None:
    assert real.lanes == {
        437675: "Python",
        800: "Ascend Hardware",
        43767502: "CANN",
        4376751100: "Overlap Analysis",
    }
    assert len(real.kernels) == 276
    assert len(real.host_ops) == 1389  # 1007 Python + 382 CANN; the 547 Overlap Analysis X are out
    assert real.host_ops["lane"].value_counts().to_dict() == {"Python": 1007, "CANN": 382}
    assert real.kernels["task_type"].value_counts().to_dict() == {"Other": 274, "AI_CPU": 2}
    assert set(real.kernels["stream_id"]) == {3}
    assert len(real.counters) == 0
    by_cat = real.flows.groupby("cat", observed=True).size().to_dict()
    assert by_cat == {"HostToDevice": 274, "async_npu": 274, "async_task_queue": 148, "fwdbwd": 17}


def test_every_host_to_kernel_flow_resolves(real: Timeline) -> None:
    flows = real.flows
    for cat, lane in (("async_npu", "Python"), ("HostToDevice", "CANN")):
        f = flows[flows["cat"] == cat]
        assert len(f) == 274
        assert (f["kernel_index"] >= 0).all() and (f["host_index"] >= 0).all()
        assert set(real.host_ops["lane"].iloc[f["host_index"]]) == {lane}
        # the f end sits exactly on the kernel start
        assert (real.kernels["start_ns"].to_numpy()[f["kernel_index"]] == f["end_ns"].to_numpy()).all()
        assert f["kernel_index"].nunique() == 274
    # the other flows are host to host: every start inside a host op, none on a kernel
    other = flows[flows["cat"].isin(["async_task_queue", "fwdbwd"])]
    assert (other["kernel_index"] == -1).all() and (other["host_index"] >= 0).all()


def test_example_kernel_and_its_flows(real: Timeline) -> None:
    k = real.kernels
    row = k[k["name"] == "aclnnInplaceZero_ZerosLikeAiCore_ZerosLike"].iloc[0]
    assert row["start_ns"] == 1704161511422904204  # ts "1704161511422904.204", exact
    assert (row["pid"], row["tid"], row["stream_id"], row["task_id"], row["connection_id"]) == (
        800,
        3,
        3,
        279,
        8,
    )
    assert row["duration_us"] == 1.35
    idx = int(cast(int, row.name))  # the label of a row of the default RangeIndex
    f = real.flows
    npu = f[(f["cat"] == "async_npu") & (f["kernel_index"] == idx)].iloc[0]
    assert npu["flow_id"] == "1704161511422904204"
    host = real.host_ops.iloc[npu["host_index"]]
    assert (host["name"], host["start_ns"]) == ("aclnnInplaceZero", 1704161511422855116)
    h2d = f[(f["cat"] == "HostToDevice") & (f["flow_id"] == "38654705663")].iloc[0]
    assert k.iloc[h2d["kernel_index"]]["connection_id"] == 8
    assert real.host_ops.iloc[h2d["host_index"]]["name"] == "AscendCL@aclnnInplaceZero"


def test_links_match_brute_force(real: Timeline) -> None:
    """Independent quadratic reference (formats doc §7.2) on the raw JSON: same host op, same kernel."""
    events = json.loads(REAL.read_bytes())

    def ns(e: dict) -> int:
        whole, _, frac = str(e["ts"]).partition(".")
        return int(whole) * 1000 + int((frac + "000")[:3])

    h = real.host_ops
    starts = {(e.get("cat"), str(e["id"])): e for e in events if e["ph"] == "s"}
    h_pid, h_tid, h_start = h["pid"].to_numpy(), h["tid"].to_numpy(), h["start_ns"].to_numpy()
    h_end = h_start + np.rint(h["duration_us"].to_numpy() * 1000).astype(np.int64)
    expected = {}
    for (cat, fid), s in starts.items():
        inside = np.flatnonzero(
            (h_pid == s["pid"]) & (h_tid == s["tid"]) & (h_start <= ns(s)) & (ns(s) <= h_end)
        )
        expected[(cat, fid)] = int(inside[np.argmin(h_end[inside] - h_start[inside])]) if len(inside) else -1
    got = {
        (c, i): int(x)
        for c, i, x in zip(real.flows["cat"], real.flows["flow_id"], real.flows["host_index"], strict=True)
    }
    assert got == expected


def _write(path: Path, events: list[dict]) -> Path:
    # json.dumps of a Python float would already round 1780000000000018.716: write the literal.
    path.write_text(json.dumps(events).replace('"NUMERIC_TS"', "1780000000000018.716"))
    return path


MSPROF = [
    {"name": "process_name", "pid": 2, "tid": 0, "args": {"name": "CANN"}, "ph": "M"},
    {"name": "process_name", "pid": 9, "tid": 0, "args": {"name": "Ascend Hardware"}, "ph": "M"},
    {"name": "thread_name", "pid": 9, "tid": 7, "args": {"name": "Stream 5"}, "ph": "M"},
    {"name": "process_name", "pid": 11, "tid": 0, "args": {"name": "AI Core Freq"}, "ph": "M"},
    {
        "name": "Node@launch",
        "pid": 2,
        "tid": 100,
        "ts": "1780000000000010.000",
        "dur": 12.5,
        "ph": "X",
        "args": {"Thread Id": 100, "level": "node", "item_id": "main_kernel", "connection_id": 46},
    },
    {
        "name": "HostToDevice197568495616",
        "ph": "s",
        "cat": "HostToDevice",
        "id": "197568495616",
        "pid": 2,
        "tid": 100,
        "ts": "1780000000000010.000",
    },
    {
        "name": "main_kernel",
        "pid": 9,
        "tid": 7,
        "ts": "NUMERIC_TS",
        "dur": 96.2,
        "ph": "X",
        "args": {"Physic Stream Id": 5, "Task Id": 11, "Task Type": "MIX_AIC", "connection_id": 46},
    },
    {
        "name": "other_kernel",
        "pid": 9,
        "tid": 7,
        "ts": "1780000000000200.001",
        "dur": 3.0,
        "ph": "X",
        "args": {"Task Type": "AI_VECTOR_CORE"},
    },
    {
        "name": "HostToDevice197568495616",
        "ph": "f",
        "cat": "HostToDevice",
        "id": "197568495616",
        "pid": 9,
        "tid": 7,
        "ts": "NUMERIC_TS",
        "bp": "e",
    },
    {
        "name": "AI Core Freq",
        "pid": 11,
        "tid": 0,
        "ts": "1780000000000000.000",
        "ph": "C",
        "args": {"MHz": 800},
    },
    {
        "name": "AI Core Freq",
        "pid": 11,
        "tid": 0,
        "ts": "1780000000000500.000",
        "ph": "C",
        "args": {"MHz": 1800, "note": "x"},
    },
]


def test_msprof_style_timeline(tmp_path: Path) -> None:
    t = read_timeline(_write(tmp_path / "msprof_20260606121514.json", MSPROF))
    assert t.lanes == {2: "CANN", 9: "Ascend Hardware", 11: "AI Core Freq"}
    k = t.kernels
    # numeric ts kept exact (a double would give ...018.716 -> ...018.8 µs)
    assert k["start_ns"].tolist() == [1780000000000018716, 1780000000000200001]
    assert k["stream_id"].tolist() == [5, 5]  # Physic Stream Id, then the "Stream 5" thread name
    assert k["task_type"].tolist() == ["MIX_AIC", "AI_VECTOR_CORE"]
    assert k["connection_id"].isna().tolist() == [False, True]
    assert t.host_ops[["lane", "name"]].values.tolist() == [["CANN", "Node@launch"]]
    f = t.flows.iloc[0]
    assert (f["cat"], f["flow_id"], f["host_index"], f["kernel_index"]) == (
        "HostToDevice",
        "197568495616",
        0,
        0,
    )
    assert (f["start_ns"], f["end_ns"]) == (1780000000000010000, 1780000000000018716)
    c = t.counters
    assert c[["name", "series"]].drop_duplicates().values.tolist() == [
        ["AI Core Freq", "MHz"],
        ["AI Core Freq", "note"],
    ]
    assert c[c["series"] == "MHz"]["value"].tolist() == [800.0, 1800.0]
    assert np.isnan(c[c["series"] == "note"]["value"].iloc[0])


def test_trace_events_object_form(tmp_path: Path) -> None:
    p = tmp_path / "trace.json"
    p.write_text(
        json.dumps({"displayTimeUnit": "ns", "traceEvents": MSPROF}).replace('"NUMERIC_TS"', "18.716")
    )
    t = read_timeline(p)
    assert len(t.kernels) == 2 and len(t.flows) == 1 and t.flows["kernel_index"].iloc[0] == 0


def test_innermost_enclosing_nested_touching_and_missing() -> None:
    # lane 0: parent [0,100] > child [10,50] > grandchild [10,20]; sibling [50,60] touches child's end
    lane_h = np.array([0, 0, 0, 0, 1], dtype=np.int64)
    start = np.array([0, 10, 10, 50, 0], dtype=np.int64)
    end = np.array([100, 50, 20, 60, 5], dtype=np.int64)
    lane_q = np.array([0, 0, 0, 0, 0, 1, 2], dtype=np.int64)
    t_q = np.array([5, 15, 30, 55, 101, 5, 1], dtype=np.int64)
    got = innermost_enclosing(lane_h, start, end, lane_q, t_q)
    assert got.tolist() == [0, 2, 1, 3, -1, 4, -1]
    assert lane_codes(np.array([1, 1, 2], np.int64), np.array([5, 6, 5], np.int64)).tolist() == [0, 1, 2]


@pytest.mark.parametrize(
    ("content", "where", "reason"),
    [
        (b"", None, "empty"),
        (b"  \n ", None, "whitespace"),
        (bytes(range(256)) * 4, "byte 0", "found '\\x00'"),
        (b'{"a": 1}', None, "traceEvents"),
        (b"42", "byte 0", "found '4'"),
        (
            b'[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": "1.0", "dur": 1}, {"ph": "X", "na',
            "byte 85",
            "malformed JSON: unexpected end of data",
        ),
        (b'[{"ph": "X", "ts": "1.0"},\n {"ph": tru}]', "byte 36", "malformed JSON: invalid literal"),
        (b'[{"ph": "X", "ts": "abc"}]', "event 1", "decimal"),
        (b"[1, 2]", "event 1", "OBJECT"),
        (b'[{"a": 1}]', None, 'known "ph"'),
        (b'[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "dur": 1}]', None, "without pid, tid or ts"),
    ],
)
def test_broken_files_raise_format_error(
    tmp_path: Path, content: bytes, where: str | None, reason: str
) -> None:
    p = tmp_path / "trace_view.json"
    p.write_bytes(content)
    with pytest.raises(ProfileFormatError) as info:
        read_timeline(p)
    err = info.value
    assert err.path == str(p) and err.where == where
    assert reason in err.expected and "Chrome-trace JSON array" in err.expected
    assert "\n" not in str(err)


def test_truncated_real_file(tmp_path: Path) -> None:
    if not REAL.is_file():
        pytest.skip(f"real timeline not available at {REAL}")
    data = REAL.read_bytes()
    p = tmp_path / "trace_view.json"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(ProfileFormatError) as info:
        read_timeline(p)
    assert info.value.where is not None and info.value.where.startswith("byte ")
    assert info.value.where == f"byte {len(data) // 2}"  # the data ends there


def test_innermost_enclosing_unpackable_span_uses_lexsort() -> None:
    # a span too wide to pack lane/time/kind into one int64 takes the lexsort path; same answers
    lane_h = np.array([0, 0, 1], dtype=np.int64)
    start = np.array([-(2**61), 10, 2**61], dtype=np.int64)
    end = np.array([2**61, 20, 2**61 + 5], dtype=np.int64)
    got = innermost_enclosing(
        lane_h, start, end, np.array([0, 0, 1, 1], np.int64), np.array([15, 0, 2**61, 0], np.int64)
    )
    assert got.tolist() == [1, 0, 2, -1]


def test_reused_flow_ids_pair_in_time_order(tmp_path: Path) -> None:
    lanes = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "Ascend Hardware"}},
    ]
    events = [*lanes]
    for i, (t_host, t_dev) in enumerate([("10.000", "50.000"), ("100.000", "150.000")]):
        events += [
            {"ph": "X", "name": f"op{i}", "pid": 1, "tid": 1, "ts": t_host, "dur": 5.0},
            {"ph": "X", "name": f"k{i}", "pid": 2, "tid": 7, "ts": t_dev, "dur": 1.0},
            {"ph": "s", "cat": "async_npu", "id": 42, "pid": 1, "tid": 1, "ts": t_host},
            {"ph": "f", "cat": "async_npu", "id": 42, "pid": 2, "tid": 7, "ts": t_dev, "bp": "e"},
        ]
    events[2:] = events[2:][::-1]  # file order must not matter
    t = read_timeline(_write(tmp_path / "trace_view.json", events))
    pairs = [
        (t.host_ops["name"].iloc[h], t.kernels["name"].iloc[k])
        for h, k in zip(t.flows["host_index"], t.flows["kernel_index"], strict=True)
    ]
    assert sorted(pairs) == [("op0", "k0"), ("op1", "k1")]
