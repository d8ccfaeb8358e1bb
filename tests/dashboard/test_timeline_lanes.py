"""The Timeline tab's lanes, first view and Chrome-trace export (issue #28 item 5), in process.

Expected values are read from the input files themselves in each test (csv / json of the standard
library), not from tilescope: the real torch_npu 2-rank text export and the real TileLang sigmoid
msprof run in ../shared/traces/real/, and the generated 8-rank sample in sample_traces/. The page
is driven through Dash's own callback endpoint (support.dash_session), the export through the
served URL.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tilescope.dashboard.app import create_app, store_of
from tilescope.dashboard.cb_timeline import lanes_of
from tilescope.dashboard.figures import COLOURS
from tilescope.dashboard.timeline_export import export_url, file_name
from tilescope.report import palette as P

from support import REAL_TRACES, SAMPLES
from support.dash_session import DashSession
from support.synthetic import HOSTILE, synthetic_profile, synthetic_report

TORCH = REAL_TRACES / "torch_2rank_pipeutil_text"
TORCH_RANK0 = TORCH / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
SIGMOID = REAL_TRACES / "tilelang_sigmoid_app"
CLUSTER_RANK0 = SAMPLES / "cluster_8rank" / "node0_1000_20260101000000000_ascend_pt"
needs_real = pytest.mark.skipif(not SIGMOID.is_dir(), reason="../shared/traces/real/ is not present")
# the engine lanes a core type lands in (the dashboard's words), for counting the csv's rows
ENGINE = {"AI_CORE": "Cube", "AI_VECTOR_CORE": "Vector", "MIX_AIC": "Mix", "MIX_AIV": "Mix"}
_MERGED = re.compile(r"^(\d+) (kernels|host ops|tasks), ")


@pytest.fixture(scope="module")
def torch_app() -> Any:
    if not TORCH.is_dir():
        pytest.skip("../shared/traces/real/ is not present")
    return create_app([TORCH])  # both ranks, analysed once for the module


def timeline_page(app: Any) -> DashSession:
    page = DashSession(app)
    page.set("tabs.value", "timeline")
    assert page.bad == []
    return page


def drawn(figure: dict[str, Any]) -> Counter[str]:
    """Launches per lane in a drawn figure: a merged bar counts the kernels its hover names."""
    counts: Counter[str] = Counter()
    for trace in figure["data"]:
        if trace.get("mode") != "lines" or trace["name"].startswith("launch"):
            continue
        ys, texts = trace["y"], trace["hovertext"]
        for i in range(0, len(ys), 3):  # start, end, gap per segment
            merged = _MERGED.match(str(texts[i]))
            counts[ys[i]] += int(merged.group(1)) if merged else 1
    return counts


def colour_of(figure: dict[str, Any]) -> dict[str, str]:
    return {t["name"]: t["line"]["color"] for t in figure["data"] if t.get("mode") == "lines"}


def csv_rows(folder: Path) -> list[dict[str, str]]:
    with open(folder / "kernel_details.csv", encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def trace_events(path: Path) -> tuple[list[dict[str, Any]], dict[int, str], dict[tuple[int, int], str]]:
    events = json.loads(path.read_text(encoding="utf-8"))
    events = events["traceEvents"] if isinstance(events, dict) else events
    meta = [e for e in events if e.get("ph") == "M"]
    processes = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    return events, processes, threads


@pytest.mark.slow
def test_torch_2rank_lanes_per_engine_host_thread_and_hccl_group(torch_app: Any) -> None:
    page = timeline_page(torch_app)
    # a double-click shows the whole capture: every lane's every event
    page.set("timeline.relayoutData", {"xaxis.autorange": True})
    fig = page.value("timeline.figure")
    counts = drawn(fig)
    rows = csv_rows(TORCH_RANK0)
    by_engine = Counter(ENGINE[r["Accelerator Core"]] for r in rows if r["Accelerator Core"] in ENGINE)
    assert by_engine == {"Vector": 149, "Cube": 23, "Mix": 13}  # the README's counts
    for engine, n in by_engine.items():
        assert counts[f"stream 2 · {engine}"] == n
    # the 4 all-reduces: kernel_details' HCCL rows, drawn from the timeline's HCCL group thread
    events, processes, threads = trace_events(TORCH_RANK0 / "trace_view.json")
    hccl = [r for r in rows if r["Accelerator Core"] == "HCCL"]
    group = next(n for (p, _), n in threads.items() if processes[p] == "HCCL" and not n.startswith("Plane"))
    assert counts[f"HCCL · {group}"] == len(hccl) == 4
    # one lane per host thread of the Python and CANN processes, each with all its events
    host = Counter(
        f"{processes[e['pid']]} · {threads[(e['pid'], e['tid'])]}"
        for e in events
        if e.get("ph") == "X" and processes.get(e["pid"]) in ("Python", "CANN")
    )
    assert len(host) == 7
    assert {lane: counts[lane] for lane in host} == host
    # colours: the one palette, Mix and HCCL apart from Cube and Vector
    colours = colour_of(fig)
    assert colours["Cube"] == P.CUBE and colours["Vector"] == P.VECTOR
    assert colours["Mix (Vector)"] == P.MIX_VECTOR != P.VECTOR and colours["HCCL"] == P.COMMUNICATION
    assert len(set(colours.values())) == len(colours)
    assert "16 lanes" in page.value("tl-info.children")


@pytest.mark.slow
def test_torch_2rank_kernels_are_linked_to_their_cann_launch(torch_app: Any) -> None:
    """Each kernel's launcher is the CANN event with its connection_id (the HostToDevice flow's
    id in this file): checked against the raw events, then drawn as arrows in a narrow window."""
    page = timeline_page(torch_app)
    store = store_of(page.app)
    lanes = lanes_of(store.get(store.options()[0]["value"]))
    events, processes, _ = trace_events(TORCH_RANK0 / "trace_view.json")
    cann = {
        e["args"]["connection_id"]: e["name"]
        for e in events
        if e.get("ph") == "X" and processes.get(e["pid"]) == "CANN" and "connection_id" in e["args"]
    }
    kernels = [
        e
        for e in events
        if e.get("ph") == "X"
        and processes.get(e["pid"]) == "Ascend Hardware"
        and e["args"].get("Task Type") in ("AI_CORE", "MIX_AIV")
    ]
    expected = Counter((e["name"], cann[e["args"]["connection_id"]]) for e in kernels)
    engines = [ln for ln in lanes if ln.label in ("stream 2 · Cube", "stream 2 · Vector", "stream 2 · Mix")]
    assert len(engines) == 3 and all(ln.launcher is not None for ln in engines)
    got = Counter((str(n), str(b)) for ln in engines for n, b in zip(ln.names, ln.launcher, strict=True))
    assert got == expected and sum(got.values()) == 185
    # the all-reduces too: each by its own connection_id
    hcom = [
        e
        for e in events
        if e.get("ph") == "X" and processes.get(e["pid"]) == "HCCL" and "connection_id" in e["args"]
    ]
    group = next(ln for ln in lanes if ln.kind == "comm")
    assert group.launcher is not None and len(hcom) == 4
    assert sorted(zip(group.names, group.launcher, strict=True)) == sorted(
        (e["name"], cann[e["args"]["connection_id"]]) for e in hcom
    )
    # a window around the first Vector kernel: its launch arrow from the CANN thread is drawn
    vector = next(ln for ln in lanes if ln.label == "stream 2 · Vector")
    x = float(vector.start[0])
    page.set("timeline.relayoutData", {"xaxis.range[0]": x - 200.0, "xaxis.range[1]": x + 50.0})
    fig = page.value("timeline.figure")
    arrows = [t for t in fig["data"] if t["name"] == "launch (host → kernel)" and t["mode"] == "markers"]
    assert len(arrows) == 1 and x in arrows[0]["x"]
    line = next(t for t in fig["data"] if t["name"] == "launch (host → kernel)" and t["mode"] == "lines")
    assert str(vector.link_lane[0]).startswith("CANN · ") and vector.link_lane[0] in line["y"]
    assert "host→kernel launches linked" in page.value("tl-info.children")


@pytest.mark.slow
def test_cluster_rank_draws_every_launch_hccl_included() -> None:
    page = timeline_page(create_app([CLUSTER_RANK0]))  # rank 0 of the 8-rank sample
    fig = page.value("timeline.figure")
    counts = drawn(fig)
    rows = csv_rows(CLUSTER_RANK0 / "ASCEND_PROFILER_OUTPUT")
    assert len(rows) == 14
    expected = Counter(
        "HCCL" if (core := r["Accelerator Core"]) == "HCCL" else f"stream {r['Stream ID']} · {ENGINE[core]}"
        for r in rows
    )
    assert expected["HCCL"] == 2  # no stream: these were the launches never drawn
    assert counts == expected  # the first view fits every launch
    colours = colour_of(fig)
    assert colours["Mix (Cube)"] == P.MIX_CUBE != colours["Cube"] == P.CUBE
    assert colours["HCCL"] == COLOURS["HCCL"] == P.COMMUNICATION


@pytest.mark.slow
@needs_real
def test_sparse_run_first_view_fits_its_kernels() -> None:
    """11 kernels in ~3 ms of a 5.5 s capture: the first view is theirs; a double-click the whole."""
    events, processes, _ = trace_events(SIGMOID / "trace_data" / "trace.json")
    timed = [e for e in events if e.get("ph") == "X" and processes[e["pid"]] != "Overlap Analysis"]
    origin = min(float(e["ts"]) for e in timed)
    kernels = [e for e in timed if e["args"].get("Task Type") == "MIX_AIC"]
    assert len(kernels) == 11
    first = min(float(e["ts"]) for e in kernels) - origin
    last = max(float(e["ts"]) + float(e["dur"]) for e in kernels) - origin
    whole = max(float(e["ts"]) + float(e.get("dur", 0)) for e in timed) - origin
    assert whole > 1000 * (last - first)

    page = timeline_page(create_app([SIGMOID]))
    fig = page.value("timeline.figure")
    x0, x1 = fig["layout"]["xaxis"]["range"]
    assert x0 < first and last < x1 and (x1 - x0) < 1.1 * (last - first)
    assert drawn(fig)["stream 47 · Mix"] == 11
    # each launched by the CANN call of its connection_id (the file has flow ends only)
    texts = {str(t) for tr in fig["data"] if tr["name"] == "Mix (Cube)" for t in tr["hovertext"] if t}
    assert texts == {"main_kernel ← launched by AscendCL@aclrtLaunchKernelWithHostArgs"}
    assert "11 host→kernel launches linked" in page.value("tl-info.children")
    page.set("timeline.relayoutData", {"xaxis.autorange": True})
    assert page.value("tl-window.data") is None
    assert "range" not in page.value("timeline.figure")["layout"]["xaxis"]


@pytest.mark.slow
def test_export_is_a_chrome_trace_of_every_lane_with_launch_flows(torch_app: Any) -> None:
    app = torch_app
    store = store_of(app)
    entry = store.get(store.options()[0]["value"])
    lanes = lanes_of(entry)
    answer = app.server.test_client().get(export_url(entry.key), headers={"Host": "127.0.0.1"})
    assert answer.status_code == 200
    assert answer.headers["Content-Disposition"] == f'attachment; filename="{file_name(entry.label)}"'
    trace = json.loads(answer.get_data())
    events = trace["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert list(names.values()) == [ln.label for ln in lanes]
    slices = [e for e in events if e["ph"] == "X"]
    per_lane = Counter(names[(e["pid"], e["tid"])] for e in slices)
    assert per_lane == {ln.label: len(ln.start) for ln in lanes}
    # the raw file's counts: every Python / CANN event, the 185 AI Core kernels, the 4 all-reduces
    raw, processes, _ = trace_events(TORCH_RANK0 / "trace_view.json")
    host_raw = sum(1 for e in raw if e.get("ph") == "X" and processes.get(e["pid"]) in ("Python", "CANN"))
    assert sum(n for lane, n in per_lane.items() if lane.startswith(("Python", "CANN"))) == host_raw
    assert sum(per_lane[f"stream 2 · {e}"] for e in ("Cube", "Vector", "Mix")) == 185
    hcom = [e for e in slices if e["cat"] == "HCCL"]
    table = sorted(float(r["Duration(us)"]) for r in csv_rows(TORCH_RANK0) if r["Accelerator Core"] == "HCCL")
    # the timeline's and the table's durations differ in the last ns
    assert sorted(e["dur"] for e in hcom) == pytest.approx(table, abs=0.002)
    # flows: each start on a host lane, its end on a kernel's start on a device lane
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts.keys() == ends.keys() and len(starts) == sum(
        int((ln.link_start == ln.link_start).sum()) for ln in lanes if ln.link_start is not None
    )
    begins = {(e["pid"], e["tid"], e["ts"]) for e in slices}
    for i, f in ends.items():
        assert f["bp"] == "e" and (f["pid"], f["tid"], f["ts"]) in begins
        assert names[(starts[i]["pid"], starts[i]["tid"])].startswith(("CANN", "Python"))


def test_export_keeps_hostile_names_inert() -> None:
    # generated: a synthetic profile whose first kernel is named like an HTML injection
    p = synthetic_profile(200, hostile=True)
    app = create_app([p], reports=[synthetic_report(p, hostile=True)], labels=[HOSTILE])
    store = store_of(app)
    entry = store.get(store.options()[0]["value"])
    client = app.server.test_client()
    body = client.get(export_url(entry.key), headers={"Host": "127.0.0.1"}).get_data()
    assert b"<" not in body and b">" not in body and b"&" not in body
    events = json.loads(body)["traceEvents"]
    assert HOSTILE in {e["name"] for e in events if e["ph"] == "X"}
    assert json.loads(body)["otherData"]["profile"] == HOSTILE
    assert file_name(HOSTILE) == "img_src_x_onerror_alert_1.trace.json"
    assert client.get(export_url("no-such-profile"), headers={"Host": "127.0.0.1"}).status_code in (400, 404)
    assert client.get(export_url(entry.key), headers={"Host": "evil.example"}).status_code == 400


@needs_real
def test_kernel_table_alone_gives_ai_cpu_dsa_and_hccl_lanes() -> None:
    """gpt_step_arith_591 (a real kernel_details.csv, no timeline): every launch in its lane."""
    from tilescope.dashboard.data import make_entry
    from tilescope.dashboard.timeline_lanes import build_lanes
    from tilescope.io.load import load_profile

    folder = REAL_TRACES / "gpt_step_arith_591"
    lanes = build_lanes(make_entry("p0", "gpt", load_profile(folder / "kernel_details.csv"), report={}))
    words = {**ENGINE, "AI_CPU": "AI_CPU", "DSA_SQE": "DSA_SQE"}
    expected = Counter(
        "HCCL" if (core := r["Accelerator Core"]) == "HCCL" else f"stream {r['Stream ID']} · {words[core]}"
        for r in csv_rows(folder)
    )
    assert expected["stream 17 · AI_CPU"] == 7 and expected["HCCL"] == 19  # the README's counts
    assert {ln.label: len(ln.start) for ln in lanes} == expected
    colour = {ln.label: {COLOURS[c] for c in ln.category} for ln in lanes}
    assert colour["stream 17 · AI_CPU"] == {P.AI_CPU} and colour["HCCL"] == {P.COMMUNICATION}
    assert [ln.label for ln in lanes][-1] == "HCCL"  # after every stream


def test_lane_labels_from_the_profile_are_inert_in_the_figure() -> None:
    # generated: a synthetic profile whose kernel table names an unknown core type like an injection
    from tilescope.dashboard.data import make_entry
    from tilescope.dashboard.figures_timeline import timeline_figure
    from tilescope.dashboard.timeline_lanes import build_lanes, fit_window, timeline_window
    from tilescope.text.escape import plotly_text

    p = synthetic_profile(60, names=3)
    p.timeline = None
    p.kernels = p.kernels.assign(core_type=HOSTILE)
    lanes = build_lanes(make_entry("p0", "hostile", p, report={}))
    assert lanes and all(ln.label.endswith(f" · {HOSTILE}") for ln in lanes)
    seg = timeline_window(lanes, *fit_window(lanes))
    fig = timeline_figure(
        seg.lane, seg.start, seg.end, seg.text, seg.category, [ln.label for ln in lanes], seg.merged
    ).to_dict()
    drawn = {y for t in fig["data"] for y in t["y"] if y}
    assert drawn == {plotly_text(ln.label, None) for ln in lanes}
    assert not any("<" in y for y in [*drawn, *fig["layout"]["yaxis"]["categoryarray"]])


@pytest.mark.slow
def test_the_export_link_shows_only_where_there_is_a_timeline(torch_app: Any) -> None:
    # the bundled FA run is `msprof op` output: launches with no shared clock, nothing to export
    page = timeline_page(create_app([SAMPLES / "tilelang_fa_bundle"]))
    assert page.value("tl-export.style") == {"display": "none"}
    page = timeline_page(torch_app)
    assert page.value("tl-export.style") == {}
    assert page.value("tl-export.href")
