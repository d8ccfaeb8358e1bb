"""Large timelines (issue #13, item 8): TS102's host-op matching without a scan of every flow per
occurrence, and the `{"traceEvents": [...]}` object form read as a stream like the bare array.

TS102's findings are held to the values of the run before the change (read from `tilescope analyze
-f json` on each input) and to `_scan_reference` below, the rule's former per-occurrence scan,
on hostile synthetic timelines (overlapping threads, shuffled flows, tied starts, wide windows).
"""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd
import pytest

from tilescope.analysis import analyze
from tilescope.chips import get_chip
from tilescope.cli import main
from tilescope.engine import RuleContext
from tilescope.errors import ProfileFormatError
from tilescope.io import timeline as timeline_io
from tilescope.io import trace_window
from tilescope.io.load import load_profile
from tilescope.io.timeline import read_timeline
from tilescope.profile import Profile, SourceInfo, Timeline
from tilescope.rules import ts102_known_fusible_pattern as ts102
from tilescope.rules._columns import num, text
from tilescope.rules._intervals import end_ns, start_ns
from tilescope.rules._patterns import (
    _BASE,
    _HOST_IGNORE,
    _SEP,
    _run_matches,
    load_patterns,
    match_host_patterns,
)

from support import REPO_ROOT

REPO = REPO_ROOT
SAMPLES = REPO / "sample_traces"
REAL = REPO.parent / "shared" / "traces" / "real"
_PT = "localhost_12345_20261130000000000_ascend_pt"


def _sample_trace(name: str) -> Path:
    return SAMPLES / name / _PT / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"


# ---- TS102: the findings of the run before the change ---------------------------------------------

# (pattern id, occurrences, est_saving_us) of every TS102 finding, as `analyze -f json` printed them
# before the change (commit da91718).
_KERNEL_PATH = {
    "attention_unfused": [
        ("unfused-attention", 8, 66254.487),
        ("unfused-rms-norm", 16, 8398.104),
        ("unfused-rope", 8, 5883.808),
        ("matmul-epilogue", 16, 2086.48),
        ("unfused-swiglu", 8, 1904.592),
    ],
    "attention_fused": [
        ("unfused-rope", 8, 5915.291),
        ("unfused-swiglu", 8, 1898.097),
        ("unfused-add-rms-norm", 15, 1311.479),
        ("matmul-epilogue", 1, 130.519),
    ],
}
# timeline-only input: the host-op path, with every occurrence's (linked kernels, device µs, saving µs)
_HOST_PATH: dict[str, list[tuple[str, float, list[tuple[int, float, float]]]]] = {
    "torch_timeline_3670": [
        (
            "unfused-adam",
            300.598,
            [
                (8, 18.55, 14.14),
                (8, 16.15, 12.28),
                (15, 98.128, 83.059),
                (8, 15.38, 11.83),
                (8, 54.559, 44.51),
                (8, 17.52, 13.5),
                (10, 54.52, 35.2),
                (8, 15.66, 12.01),
                (17, 86.509, 61.77),
                (8, 15.92, 12.3),
            ],
        ),
    ],
    "attention_fused": [
        (
            "unfused-swiglu",
            6620.768,
            [
                (4, 1172.826, 822.801),
                (4, 1190.942, 835.354),
                (4, 1170.266, 821.582),
                (4, 1172.922, 824.021),
                (4, 1175.426, 823.206),
                (4, 1187.294, 830.696),
                (4, 1186.932, 832.365),
                (4, 1188.734, 830.743),
            ],
        ),
    ],
    "attention_unfused": [
        (
            "unfused-attention",
            140617.266,
            [
                (14, 19651.014, 17582.505),
                (14, 19636.186, 17561.494),
                (14, 19747.162, 17655.944),
                (14, 19521.946, 17504.363),
                (14, 19475.678, 17420.949),
                (14, 19729.968, 17661.434),
                (14, 19784.894, 17697.942),
                (14, 19619.846, 17532.635),
            ],
        ),
        (
            "unfused-rms-norm",
            15417.367,
            [
                (12, 1138.106, 963.026),
                (12, 1137.124, 962.809),
                (12, 1149.038, 973.515),
                (12, 1136.402, 959.89),
                (12, 1144.784, 969.087),
                (12, 1133.83, 960.657),
                (12, 1135.268, 959.689),
                (12, 1133.82, 961.329),
                (12, 1141.274, 967.291),
                (12, 1124.66, 953.908),
                (12, 1135.09, 962.594),
                (12, 1142.026, 966.685),
                (12, 1142.16, 967.178),
                (12, 1134.296, 960.155),
                (12, 1141.686, 968.679),
                (12, 1132.698, 960.875),
            ],
        ),
        (
            "unfused-swiglu",
            6659.964,
            [
                (4, 1192.388, 833.882),
                (4, 1187.066, 834.887),
                (4, 1195.384, 836.404),
                (4, 1194.482, 836.697),
                (4, 1192.216, 837.972),
                (4, 1182.46, 829.242),
                (4, 1180.952, 824.045),
                (4, 1185.796, 826.835),
            ],
        ),
    ],
}


def _ts102(profile: Profile) -> list[Any]:
    return [f for f in analyze(profile).findings if f.code == "TS102"]


@pytest.mark.parametrize("sample", sorted(_KERNEL_PATH))
def test_ts102_kernel_findings_unchanged_on_samples(sample: str) -> None:
    got = [
        (f.evidence["pattern"]["id"], f.occurrences, f.est_saving_us)
        for f in _ts102(load_profile(SAMPLES / sample))
    ]
    assert [(p, n) for p, n, _s in got] == [(p, n) for p, n, _s in _KERNEL_PATH[sample]]
    assert [s for _p, _n, s in got] == pytest.approx([s for _p, _n, s in _KERNEL_PATH[sample]], abs=5e-4)


def _host_case(name: str) -> Path:
    if name in _KERNEL_PATH:
        return _sample_trace(name)
    if not (REAL / name).is_dir():
        pytest.skip(f"real traces not available at {REAL}")
    return REAL / name / "trace_view.json"


@pytest.mark.parametrize("name", sorted(_HOST_PATH))
def test_ts102_host_findings_unchanged(name: str) -> None:
    profile = load_profile(_host_case(name))
    found = _ts102(profile)
    assert all(f.evidence["matched_on"] == "host ops (timeline)" for f in found)
    want = _HOST_PATH[name]
    assert [f.evidence["pattern"]["id"] for f in found] == [p for p, _s, _o in want]
    for f, (_pid, saving, occ) in zip(found, want, strict=True):
        assert f.occurrences == len(occ)
        assert f.est_saving_us == pytest.approx(saving, abs=5e-4)
        ev = f.evidence["occurrences"]
        assert [(o["linked_kernels"], o["device_us"], o["saving_us"]) for o in ev] == occ
        assert [o["index"] for o in ev] == list(range(1, len(occ) + 1))
    # and every value, unrounded, as the former scan computes it on the same timeline
    assert profile.timeline is not None
    _assert_as_scanned(profile, profile.timeline)


# ---- TS102 against the former per-occurrence scan ------------------------------------------------------


def _scan_reference(tl: Timeline) -> list[tuple[str, list[str], int, int, int, float, float]]:
    """TS102's host occurrences as the rule computed them before #13: a DataFrame per occurrence and
    a scan of every link per occurrence. (pattern id, op names, window start, window end, linked
    kernels, device µs, saving µs). Nesting is compared in exact ns (the former code compared a
    float64 copy of the ns, see test_ts102_host_nesting_in_exact_ns)."""
    patterns = load_patterns()
    names = text(tl.host_ops, "name")
    keep = names.str.startswith("aten::") | names.str.startswith("npu_")
    low = names.str.lower()
    for g in _HOST_IGNORE:
        keep &= ~low.map(lambda n, g=g: fnmatch.fnmatchcase(n, g)) if "*" in g else (low != g)
    ops = tl.host_ops[keep.to_numpy()].copy()
    ops["_tid"] = num(ops, "tid").fillna(-1).astype("int64")
    ops["_start"] = start_ns(ops)
    ops["_end"] = end_ns(ops)
    ops = ops.sort_values(["_tid", "_start"], kind="stable")
    run_end = ops.groupby("_tid")["_end"].cummax().shift(1, fill_value=0)
    nested = ops["_tid"].eq(ops["_tid"].shift(1)) & (ops["_end"] <= run_end)
    ops = ops[~nested.to_numpy()].reset_index()
    vocab = {op: _BASE + i for i, op in enumerate(pd.unique(text(ops, "name")))}
    seq = text(ops, "name").map(vocab).to_numpy(dtype="int64")
    boundaries = np.flatnonzero(np.diff(ops["_tid"].to_numpy()) != 0) + 1
    pos = np.insert(np.arange(len(ops)), boundaries, -1)
    found = _run_matches(np.insert(seq, boundaries, _SEP), patterns, vocab, host=True)
    fl = tl.flows[(tl.flows["kernel_index"] >= 0) & (tl.flows["host_index"] >= 0)]
    link_start = start_ns(tl.host_ops).to_numpy()[fl["host_index"].to_numpy()]
    link_dur = num(tl.kernels, "duration_us").to_numpy()[fl["kernel_index"].to_numpy()]
    out = []
    for pat, a, b, _spans in found:
        o = ops.iloc[pos[a:b]]
        w0, w1 = int(o["_start"].min()), int(o["_end"].max())
        sel = link_dur[(link_start >= w0) & (link_start <= w1)]
        dev = float(sel.sum())
        out.append(
            (
                pat.id,
                text(o, "name").tolist(),
                w0,
                w1,
                len(sel),
                dev,
                dev - float(sel.max()) if len(sel) else 0.0,
            )
        )
    return out


def _assert_as_scanned(profile: Profile, tl: Timeline) -> None:
    ref = _scan_reference(tl)
    # the unrounded quantities, bit for bit
    found = match_host_patterns(tl.host_ops, load_patterns())
    w0, w1 = found.windows()
    count, device, longest = ts102._window_links(*ts102._flow_links(tl), w0, w1)
    assert [p.id for p in found.patterns] == [r[0] for r in ref]
    assert found.op_names() == [r[1] for r in ref]
    assert w0.tolist() == [r[2] for r in ref] and w1.tolist() == [r[3] for r in ref]
    assert count.tolist() == [r[4] for r in ref]
    assert device.tolist() == [r[5] for r in ref]
    assert np.where(count > 0, device - longest, 0.0).tolist() == [r[6] for r in ref]
    # and the findings the rule builds from them (before the engine bounds the savings)
    ctx = RuleContext(chip=profile.chip, thresholds=dict(ts102.THRESHOLDS), total_device_us=1e12)
    findings = ts102.check(profile, ctx)
    by_pattern: dict[str, list[tuple[str, list[str], int, int, int, float, float]]] = {}
    for r in ref:
        by_pattern.setdefault(r[0], []).append(r)
    assert [f.evidence["pattern"]["id"] for f in findings] == list(by_pattern)
    for f, occs in zip(findings, by_pattern.values(), strict=True):
        saving = 0.0
        for r in occs:
            saving += r[6]
        assert f.est_saving_us == max(saving, 0.0)  # added in occurrence order, bit for bit
        assert f.evidence["occurrences"] == [
            {
                "index": i,
                "host_ops": r[1],
                "start_ns": r[2],
                "host_span_us": round((r[3] - r[2]) / 1000, 3),
                "linked_kernels": r[4],
                "device_us": round(r[5], 3),
                "saving_us": round(r[6], 3),
            }
            for i, r in enumerate(occs, start=1)
        ]


_HOST_NAMES = [
    "aten::silu",
    "aten::mul",
    "aten::pow",
    "aten::mean",
    "aten::add",
    "aten::rsqrt",
    "aten::view",
    "aten::empty_like",
    "aten::relu",
    "Enqueue",
    None,
]
_HOST_RUNS: list[list[str | None]] = [
    ["aten::silu", "aten::mul"],
    ["aten::pow", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul", "aten::mul"],
    ["aten::pow", "aten::view", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul", "aten::mul"],
]


def _synthetic(seed: int, threads: int = 4, ops_per_thread: int = 600) -> Profile:
    """Host ops on overlapping threads (silu/mul and RMSNorm runs among other ops, views, ops nested
    in the previous one, unnamed ops), 0-3 kernels per op with durations over six decades, flows in
    shuffled order with some unresolved, and several flows from one host op (tied starts)."""
    rng = np.random.default_rng(seed)
    t0 = 1_704_161_511_429_165_879
    rows: list[dict[str, Any]] = []
    for tid in range(threads):
        t = t0 + int(rng.integers(0, 50_000))  # threads overlap in time
        names: list[str | None] = []
        while len(names) < ops_per_thread:
            pick = int(rng.integers(0, len(_HOST_NAMES) + len(_HOST_RUNS)))
            names += _HOST_RUNS[pick - len(_HOST_NAMES)] if pick >= len(_HOST_NAMES) else [_HOST_NAMES[pick]]
        for name in names:
            dur = float(rng.integers(1, 40_000)) / 1000
            rows.append({"name": name, "tid": tid, "start_ns": t, "duration_us": dur})
            if rng.random() < 0.15:  # a child inside it (aten::add inside aten::mul, ...)
                rows.append({"name": "aten::add", "tid": tid, "start_ns": t + 1, "duration_us": dur / 2})
            t += int(dur * 1000) + int(rng.integers(0, 3_000))
    host = pd.DataFrame(rows).sample(frac=1.0, random_state=seed).reset_index(drop=True)  # file order
    host["pid"] = 1
    host["lane"] = "Python"
    host["name"] = host["name"].astype("category")
    per_op = rng.integers(0, 4, len(host))
    host_index = np.repeat(np.arange(len(host)), per_op)
    n = len(host_index)
    kernels = pd.DataFrame(
        {
            "name": [f"K{i % 17}" for i in range(n)],
            "start_ns": host["start_ns"].to_numpy()[host_index] + 60_000,
            "duration_us": rng.lognormal(0, 1, n) * 10 ** rng.uniform(-2, 4, n),
            "stream_id": 2,
        }
    )
    flows = pd.DataFrame({"host_index": host_index, "kernel_index": np.arange(n)})
    flows.loc[rng.random(n) < 0.05, "kernel_index"] = -1
    flows.loc[rng.random(n) < 0.05, "host_index"] = -1
    flows = flows.sample(frac=1.0, random_state=seed + 1).reset_index(drop=True)
    tl = Timeline(kernels=kernels, host_ops=host, counters=pd.DataFrame(), flows=flows)
    return Profile(
        source=SourceInfo(Path("synthetic.json"), "timeline_json"),
        kernels=kernels[["name", "start_ns", "duration_us", "stream_id"]],
        chip=get_chip("910B2"),
        timeline=tl,
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ts102_host_findings_as_the_former_scan_on_hostile_timelines(seed: int) -> None:
    profile = _synthetic(seed)
    assert profile.timeline is not None
    ref = _scan_reference(profile.timeline)
    assert len(ref) > 50 and len({r[0] for r in ref}) >= 2  # the case has something to compare
    assert max(r[4] for r in ref) > 10  # windows overlapping other threads' links
    _assert_as_scanned(profile, profile.timeline)


def test_ts102_window_sums_in_blocks_as_the_former_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows of one width gathered in several blocks (a small block forces the split)."""
    monkeypatch.setattr(ts102, "_GATHER_BLOCK", 7)
    profile = _synthetic(4, threads=6, ops_per_thread=300)
    assert profile.timeline is not None
    _assert_as_scanned(profile, profile.timeline)


def test_ts102_host_nesting_in_exact_ns() -> None:
    """An op that starts inside the previous one but ends 100 ns after it is not nested in it.

    The former code compared the ends as float64 (a shift() made them float): at epoch ns the
    two ends rounded to the same double, and the first op of this Adam update vanished with it."""
    t = (1_704_161_511_429_165_879 // 256) * 256 - 1000  # t + 1000 is a multiple of 256
    adam = [
        "aten::mul_",
        "aten::add_",
        "aten::mul_",
        "aten::addcmul_",
        "aten::sqrt",
        "aten::div",
        "aten::add_",
        "aten::addcdiv_",
    ]
    rows = [("aten::zero_", t, 1.0)] + [(n, t + 500 + 1000 * i, 0.6) for i, n in enumerate(adam)]
    host = pd.DataFrame(
        {
            "name": [r[0] for r in rows],
            "tid": 7,
            "pid": 1,
            "start_ns": [r[1] for r in rows],
            "duration_us": [r[2] for r in rows],
        }
    )
    assert float(t + 1000) == float(t + 1100)  # the former comparison could not tell them apart
    found = match_host_patterns(host, load_patterns())
    assert [p.id for p in found.patterns] == ["unfused-adam"]
    assert found.op_names() == [adam]
    assert found.windows()[0].tolist() == [t + 500]


# ---- the {"traceEvents": [...]} object form, read like the array form -----------------------------------

# Keys before the array whose strings hold `]`, `"traceEvents"` (escaped quotes) and UTF-8, a nested
# "traceEvents" key, and keys after it: the last `]` of the file then closes `[1, 2]`, which the rest
# of the file closes validly, so the guessed end is wrong and the exact pass must take over.
_BEFORE = (
    b'{"displayTimeUnit": "ns", "note": "a ] and \\"traceEvents\\": [1] inside a string", '
    b'"meta": {"traceEvents": [{"ph": "X"}], "name": "\xe5\x90\x8d\xe5\x89\x8d ]"}, "traceEvents": '
)
_AFTER_GUESSED_WRONG = b', "otherData": {"traceEvents": [], "x": "]"}, "list": [1, 2], "n": 3}\n'
_AFTER_GUESSED_RIGHT = b', "otherData": {"traceEvents": [], "x": "]"}}\n'


def _events_files() -> list[Path]:
    files = [_sample_trace("attention_unfused")]
    real = REAL / "torch_timeline_3670" / "trace_view.json"
    return files + ([real] if real.is_file() else [])


def _same_tables(a: Timeline, b: Timeline) -> None:
    assert len(a.kernels) > 0 and len(a.flows) > 0
    for name in ("kernels", "host_ops", "counters", "flows"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name))
    assert a.lanes == b.lanes


@pytest.fixture
def exact_calls(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Records each call of the exact (whole-file) window pass: the window's own fallback and the
    reader's, when DuckDB rejects the guessed window."""
    calls: list[Path] = []
    exact = trace_window.exact_window

    def counted(path: Path, fh: BinaryIO) -> tuple[int, int]:
        calls.append(path)
        return exact(path, fh)

    monkeypatch.setattr(trace_window, "exact_window", counted)
    monkeypatch.setattr(timeline_io, "exact_window", counted)
    return calls


@pytest.mark.parametrize("events_file", _events_files(), ids=lambda p: p.parent.name)
@pytest.mark.parametrize(
    ("before", "after", "exact_passes"),
    [
        (_BEFORE, _AFTER_GUESSED_RIGHT, 0),
        (_BEFORE, _AFTER_GUESSED_WRONG, 1),  # DuckDB rejects the guessed window; the exact one is read
        (b'\xef\xbb\xbf {\n  "traceEvents" :\n', b"\n}\n", 0),  # BOM, the only key, whitespace
        (b'{"trace\\u0045vents": ', b"}", 0),  # the key spelled with an escape is the same key
    ],
    ids=["keys-around", "guessed-end-wrong", "bom-only-key", "escaped-key"],
)
def test_object_form_reads_the_tables_of_the_array_form(
    tmp_path: Path, events_file: Path, before: bytes, after: bytes, exact_passes: int, exact_calls: list[Path]
) -> None:
    events = events_file.read_bytes()
    obj = tmp_path / "trace.json"
    obj.write_bytes(before + events + after)
    _same_tables(read_timeline(obj), read_timeline(events_file))
    assert len(exact_calls) == exact_passes


@pytest.mark.parametrize(("head", "tail"), [(64, 1 << 20), (1 << 20, 16)], ids=["long-head", "long-tail"])
def test_object_form_with_keys_beyond_the_head_or_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exact_calls: list[Path], head: int, tail: int
) -> None:
    """Keys before or after the array longer than what is parsed at either end: the exact pass."""
    monkeypatch.setattr(trace_window, "_HEAD_BYTES", head)
    monkeypatch.setattr(trace_window, "_TAIL_BYTES", tail)
    events_file = _sample_trace("attention_unfused")
    obj = tmp_path / "trace.json"
    obj.write_bytes(_BEFORE + events_file.read_bytes() + b', "pad": "' + b"x" * 200 + b'"}')
    _same_tables(read_timeline(obj), read_timeline(events_file))
    assert exact_calls == [obj]


def test_object_form_window_is_the_array(tmp_path: Path) -> None:
    """DuckDB is given exactly the bytes of the traceEvents array, through a window, as an array."""
    events = _sample_trace("attention_fused").read_bytes().strip()
    obj = tmp_path / "it's [a] {trace}*.json"  # quote and glob characters stay out of DuckDB's path
    obj.write_bytes(_BEFORE + events + _AFTER_GUESSED_RIGHT)
    with open(obj, "rb") as fh:
        source = timeline_io._source_clause(obj, fh)
    assert "format='array'" in source and "unstructured" not in source
    found = trace_window.WINDOW_URL.search(source)
    assert found is not None
    assert (int(found[1]), int(found[2])) == (len(_BEFORE), len(_BEFORE) + len(events))
    with open(obj, "rb") as fh:
        assert trace_window.exact_window(obj, fh) == (len(_BEFORE), len(_BEFORE) + len(events))
    assert len(read_timeline(obj).kernels) == len(read_timeline(_sample_trace("attention_fused")).kernels)


def _format_error(path: Path) -> ProfileFormatError:
    with pytest.raises(ProfileFormatError) as info:
        read_timeline(path)
    assert "\n" not in str(info.value) and info.value.path == str(path)
    assert "<file>" not in str(info.value) and trace_window.WINDOW_PROTOCOL not in str(info.value)
    return info.value


def test_object_form_truncated_in_the_array(tmp_path: Path) -> None:
    data = _BEFORE + _sample_trace("attention_unfused").read_bytes() + _AFTER_GUESSED_RIGHT
    p = tmp_path / "trace.json"
    cut = len(data) // 2
    p.write_bytes(data[:cut])
    err = _format_error(p)
    assert err.where == f"byte {cut}" and err.expected.endswith("malformed JSON: unexpected end of data")


def test_object_form_broken_event_with_a_valid_end(tmp_path: Path) -> None:
    events = _sample_trace("attention_unfused").read_bytes()
    bad = events.index(b"},", len(events) // 3) + 1  # a comma after an object
    p = tmp_path / "trace.json"
    p.write_bytes(_BEFORE + events[:bad] + b";" + events[bad + 1 :] + _AFTER_GUESSED_RIGHT)
    err = _format_error(p)
    assert err.where == f"byte {len(_BEFORE) + bad}" and "malformed JSON: expected ','" in err.expected


@pytest.mark.parametrize(
    ("content", "where", "reason"),
    [
        (b'{"displayTimeUnit": "ns", "traceEvents": 5}', "byte 41", '"traceEvents" is not a list'),
        (b'{"displayTimeUnit": "ns", "x": [1]}', None, 'an object without a "traceEvents" list'),
        (b'{"traceEvents": []}', None, "found no events"),
        (b'{"traceEvents": [{"ph": "M", "name": "x", "pid": 1, "tid": 1}]} junk', "byte 65", "trailing"),
        (  # nested past any parser's stack, before the list: one line, not a RecursionError
            b'{"a": '
            + b"[" * 100_000
            + b"]" * 100_000
            + b', "traceEvents": [{"ph": "M", "pid": 1, "tid": 1}]}',
            None,
            "nested too deeply",
        ),
    ],
)
def test_object_form_bad_input_is_one_line(
    tmp_path: Path, content: bytes, where: str | None, reason: str
) -> None:
    p = tmp_path / "trace.json"
    p.write_bytes(content)
    err = _format_error(p)
    assert err.where == where and reason in err.expected


def test_object_form_broken_file_exits_2_from_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _BEFORE + _sample_trace("attention_unfused").read_bytes() + _AFTER_GUESSED_WRONG
    p = tmp_path / "trace_view.json"
    p.write_bytes(data[: len(data) - 100])
    assert main(["analyze", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"tilescope: error: {p}: byte {len(data) - 100}: expected a Chrome-trace JSON array of events "
        "(trace_view.json / msprof_*.json); malformed JSON: unexpected end of data"
    )


def test_object_form_without_fsspec_is_a_missing_component(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """fsspec is a declared dependency; an install without it gets exit 3 and one line, no traceback."""
    monkeypatch.setitem(sys.modules, "fsspec.spec", None)  # `import fsspec.spec` raises ImportError
    p = tmp_path / "trace_view.json"
    p.write_bytes(_BEFORE + _sample_trace("attention_fused").read_bytes() + b"}")
    assert main(["analyze", str(p)]) == 3
    assert capsys.readouterr().err.strip() == (
        'tilescope: error: reading a {"traceEvents": [...]} timeline needs fsspec (pip install fsspec)'
    )


def test_object_form_under_a_non_utf8_name(tmp_path: Path) -> None:
    """The window names the open file (/dev/fd), as the array form's scan does: a directory named
    with byte 0xff was a UnicodeEncodeError traceback when the window quoted the path."""
    import os

    folder = os.path.join(os.fsencode(tmp_path), b"bad\xff")
    os.mkdir(folder)
    obj = Path(os.fsdecode(os.path.join(folder, b"trace_view.json")))
    obj.write_bytes(_BEFORE + _sample_trace("attention_fused").read_bytes().strip() + _AFTER_GUESSED_RIGHT)
    assert len(read_timeline(obj).kernels) == len(read_timeline(_sample_trace("attention_fused")).kernels)
