"""Callbacks through Dash's own HTTP endpoint: right slices, right counts, small payloads.

`post_callback` sends exactly what the browser sends to /_dash-update-component, so these tests
cover the callback wiring and measure what crosses the wire.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dash
import pandas as pd
import pytest

from tilescope.dashboard.app import create_app, store_of
from tilescope.diff import compare_runs, run_from_report

from support import REPO_ROOT
from support.dash_calls import post_callback
from support.synthetic import HOSTILE, synthetic_profile, synthetic_report, write_ir_bundle

MAX_CALLBACK_BYTES = 3 * 1024 * 1024  # "no callback sends more than a few MB"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> dash.Dash:
    ir_dir = tmp_path_factory.mktemp("bundle") / "ir"
    p = synthetic_profile(3000, names=40, hostile=True)
    p.ir, p.ir_dir = write_ir_bundle(ir_dir, hostile=True), ir_dir
    q = synthetic_profile(500, names=40, seed=3, path="v2")
    return create_app(
        [p, q], reports=[synthetic_report(p, hostile=True), synthetic_report(q)], labels=["run-a", "run-b"]
    )


def rows_request(
    start: int, end: int, sort: list[dict[str, str]] | None = None, filters: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {"startRow": start, "endRow": end, "sortModel": sort or [], "filterModel": filters or {}}


def test_paging_returns_the_requested_slice_and_total(app: dash.Dash) -> None:
    entry = store_of(app).get("p0")
    assert entry is not None
    expected = entry.kernels.sort_values("duration_us", ascending=False, kind="stable")
    out, size = post_callback(
        app,
        "k-grid.getRowsResponse",
        {"k-grid.getRowsRequest": rows_request(100, 200), "profile.value": "p0", "k-mode.value": "launches"},
    )
    rows = out["k-grid"]["getRowsResponse"]["rowData"]
    assert out["k-grid"]["getRowsResponse"]["rowCount"] == 3000
    assert len(rows) == 100
    assert [r["duration_us"] for r in rows] == pytest.approx(
        list(expected["duration_us"].iloc[100:200]), abs=1e-4
    )
    assert out["k-count"]["children"] == "3,000 of 3,000 launches match"
    assert size < 200_000


def test_paging_sorts_filters_and_searches_on_the_server(app: dash.Dash) -> None:
    k = store_of(app).get("p0").kernels  # type: ignore[union-attr]
    want = k[(k["name"].str.contains("kernel_01")) & (k["duration_us"] > 40)].sort_values("start_us")
    out, _ = post_callback(
        app,
        "k-grid.getRowsResponse",
        {
            "k-grid.getRowsRequest": rows_request(
                0,
                50,
                [{"colId": "start_us", "sort": "asc"}],
                {
                    "name": {"filterType": "text", "type": "contains", "filter": "KERNEL_01"},
                    "duration_us": {"filterType": "number", "type": "greaterThan", "filter": 40},
                },
            ),
            "profile.value": "p0",
            "k-mode.value": "launches",
        },
    )
    resp = out["k-grid"]["getRowsResponse"]
    assert resp["rowCount"] == len(want)
    assert [r["_row"] for r in resp["rowData"]] == list(want["_row"].iloc[:50])

    out, _ = post_callback(
        app,
        "k-grid.getRowsResponse",
        {
            "k-grid.getRowsRequest": rows_request(0, 10),
            "profile.value": "p0",
            "k-mode.value": "launches",
            "k-search.value": "<img",
        },
    )
    assert out["k-grid"]["getRowsResponse"]["rowCount"] == int((k["name"] == HOSTILE).sum())
    assert {r["name"] for r in out["k-grid"]["getRowsResponse"]["rowData"]} == {HOSTILE}


def test_paging_ignores_unknown_columns_and_injection(app: dash.Dash) -> None:
    out, _ = post_callback(
        app,
        "k-grid.getRowsResponse",
        {
            "k-grid.getRowsRequest": rows_request(
                0,
                5,
                [{"colId": "name; DROP TABLE k", "sort": "asc"}],
                {
                    "nope": {"filterType": "text", "type": "contains", "filter": "x"},
                    "name": {"filterType": "text", "type": "contains", "filter": "'); DROP TABLE k; --"},
                },
            ),
            "profile.value": "p0",
            "k-mode.value": "launches",
        },
    )
    assert out["k-grid"]["getRowsResponse"]["rowCount"] == 0
    out, _ = post_callback(
        app,
        "k-grid.getRowsResponse",
        {"k-grid.getRowsRequest": rows_request(0, 5), "profile.value": "p0", "k-mode.value": "launches"},
    )
    assert out["k-grid"]["getRowsResponse"]["rowCount"] == 3000  # the table is still there


def test_grouped_mode_aggregates_per_kernel_name(app: dash.Dash) -> None:
    k = store_of(app).get("p0").kernels  # type: ignore[union-attr]
    totals = k.groupby("name")["duration_us"].sum().sort_values(ascending=False)
    out, _ = post_callback(
        app,
        "k-grid.getRowsResponse",
        {"k-grid.getRowsRequest": rows_request(0, 100), "profile.value": "p0", "k-mode.value": "grouped"},
    )
    resp = out["k-grid"]["getRowsResponse"]
    assert resp["rowCount"] == 40
    assert [r["name"] for r in resp["rowData"][:5]] == list(totals.index[:5])
    assert resp["rowData"][0]["total_us"] == pytest.approx(totals.iloc[0], rel=1e-6)
    assert resp["rowData"][0]["launches"] == int((k["name"] == totals.index[0]).sum())


def test_overview_callback_payload_and_colours(app: dash.Dash) -> None:
    out, size = post_callback(app, "ov-kpis.children",
        {"profile.value": "p0", "shown-overview.data": "overview"})
    core = out["ov-core"]["figure"]["data"][0]
    colours = dict(zip(core["y"], core["marker"]["color"], strict=True))
    assert colours["Cube"] == "#1f77b4" and colours["Vector"] == "#ff7f0e"
    sev = out["ov-sev"]["figure"]["data"][0]
    assert sev["marker"]["color"] == ["#c0392b", "#e67e22", "#f1c40f", "#7f8c8d"]
    assert size < MAX_CALLBACK_BYTES
    # a hidden tab computes nothing
    assert post_callback(app, "ov-kpis.children",
        {"profile.value": "p0", "shown-kernels.data": "kernels"}) == ({}, 0)


def test_roofline_click_opens_the_kernel_detail(app: dash.Dash) -> None:
    click = {"points": [{"customdata": HOSTILE, "x": 1.0, "y": 2.0}]}
    out, _ = post_callback(
        app,
        "d-kernel.options@",
        {"roofline.clickData": click, "profile.value": "p0"},
        triggered="roofline.clickData",
    )
    assert out["d-kernel"]["value"] == HOSTILE and out["tabs"]["value"] == "detail"
    assert {"label": HOSTILE, "value": HOSTILE} in out["d-kernel"]["options"]
    cell = {"colId": "name", "value": "kernel_002", "rowIndex": 3}
    out, _ = post_callback(
        app,
        "d-kernel.options@",
        {"k-grid.cellClicked": cell, "profile.value": "p0"},
        triggered="k-grid.cellClicked",
    )
    assert out["d-kernel"]["value"] == "kernel_002"


def test_detail_callback_renders_the_block_heatmap(app: dash.Dash) -> None:
    out, size = post_callback(
        app, "d-info.children",
            {"profile.value": "p0", "d-kernel.value": HOSTILE, "shown-detail.data": "detail"}
    )
    heat = out["d-blocks"]["figure"]["data"][0]
    assert heat["type"] == "heatmap" and heat["y"] == ["cube0", "vector0", "vector1"]
    assert "max/mean" in out["d-blocks"]["figure"]["layout"]["title"]["text"]
    assert size < MAX_CALLBACK_BYTES


def test_timeline_window_and_zoom(app: dash.Dash) -> None:
    out, size = post_callback(app, "timeline.figure",
        {"profile.value": "p0", "shown-timeline.data": "timeline"})
    fig = out["timeline"]["figure"]
    assert {t["type"] for t in fig["data"]} == {"scattergl"}
    assert fig["layout"]["xaxis"]["title"]["text"] == "time since first event (µs)"
    out, zsize = post_callback(
        app,
        "timeline.figure",
        {
            "profile.value": "p0",
            "shown-timeline.data": "timeline",
            "timeline.relayoutData": {"xaxis.range[0]": 1000.0, "xaxis.range[1]": 2000.0},
        },
        triggered="timeline.relayoutData",
    )
    assert out["timeline"]["figure"]["layout"]["xaxis"]["range"] == [1000.0, 2000.0]
    assert zsize < size
    assert out["tl-window"]["data"] == [1000.0, 2000.0]


def test_timeline_autosize_redraws_the_last_window(app: dash.Dash) -> None:
    """Plotly's `autosize` relayout (the graph shown or resized) must answer with a drawing: it can
    supersede the tab's own request still in flight, whose answer Dash then drops (a PreventUpdate
    here left the timeline blank on a loaded machine)."""
    autosize = {"profile.value": "p0", "shown-timeline.data": "timeline",
                "timeline.relayoutData": {"autosize": True}}
    whole, _ = post_callback(app, "timeline.figure",
        {"profile.value": "p0", "shown-timeline.data": "timeline"})
    out, _ = post_callback(app, "timeline.figure", autosize, triggered="timeline.relayoutData")
    assert "segments drawn" in out["tl-info"]["children"]
    # with nothing drawn yet it is the first view: the kernels' span
    assert out["tl-info"]["children"] == whole["tl-info"]["children"]
    assert out["tl-window"]["data"] == whole["tl-window"]["data"] is not None
    zoomed = {**autosize, "tl-window.data": [1000.0, 2000.0]}
    out, _ = post_callback(app, "timeline.figure", zoomed, triggered="timeline.relayoutData")
    assert out["timeline"]["figure"]["layout"]["xaxis"]["range"] == [1000.0, 2000.0]
    # a y-only zoom still re-queries nothing
    yonly = {**autosize, "timeline.relayoutData": {"yaxis.range[0]": 0, "yaxis.range[1]": 2}}
    assert post_callback(app, "timeline.figure", yonly, triggered="timeline.relayoutData") == ({}, 0)


def test_findings_filter_and_detail(app: dash.Dash) -> None:
    out, _ = post_callback(
        app, "f-list.children",
            {"profile.value": "p0", "f-sev.value": ["medium"], "shown-findings.data": "findings"}
    )
    assert out["f-count"]["children"] == "1 of 3 findings"
    out, _ = post_callback(app, "f-detail.children", {"finding-sel.data": 0, "profile.value": "p0"})
    text = json.dumps(out)
    assert "Evidence" in text and "Recommendation" in text and "aic_mte2_ratio" in text


def test_ir_callback_marks_the_finding_lines(app: dash.Dash) -> None:
    out, _ = post_callback(app, "ir-kernel.options", {"profile.value": "p0", "ir-finding.value": 0})
    assert out["ir-kernel"]["value"] == "main"
    values = {"profile.value": "p0", "ir-finding.value": 0, "ir-kernel.value": "main", "shown-ir.data": "ir"}
    out, size = post_callback(app, "ir-data.data", values)
    data = out["ir-data"]["data"]
    assert data["for"] == out["ir-shown"]["data"] == {"profile": "p0", "finding": 0, "kernel": "main"}
    panes = data["panes"]
    assert [p["id"] for p in panes] == ["ir-tvmscript", "ir-final", "ir-ascendc"]
    assert panes[0]["marked"] == [5, 6]  # tvmscript.py lines 5-6 from the location
    assert panes[2]["marked"] == [9]  # kernel.cpp line 9
    assert data["info"].startswith("Marked: ")
    assert size < MAX_CALLBACK_BYTES


def test_ir_callback_sends_nothing_when_the_tab_is_shown_again(app: dash.Dash) -> None:
    # back on the IR tab with the same profile, finding and kernel: the page redraws what it holds
    shown = {"profile": "p0", "finding": 0, "kernel": "main"}
    values = {"profile.value": "p0", "ir-finding.value": 0, "ir-kernel.value": "main", "shown-ir.data": "ir"}
    out, size = post_callback(app, "ir-data.data", {**values, "ir-shown.data": shown}, "shown-ir.data")
    assert (out, size) == ({}, 0)
    # another finding (or a first visit) is sent
    out, _ = post_callback(app, "ir-data.data", {**values, "ir-shown.data": {**shown, "finding": 1}})
    assert out["ir-data"]["data"]["for"] == shown


def test_compare_callback(app: dash.Dash) -> None:
    out, size = post_callback(
        app, "c-kpis.children", {"c-base.value": "p0", "c-head.value": "p1", "shown-compare.data": "compare"}
    )
    rows = out["c-grid"]["rowData"]
    # The rows are tilescope.diff's own matching and verdicts, largest change first.
    store = store_of(app)
    base, head = store.get("p0"), store.get("p1")
    assert base is not None and head is not None
    base_run, head_run = (run_from_report({**e.report, "_profile": e.profile}, e.label) for e in (base, head))
    diff = compare_runs(base_run, head_run)
    assert len(rows) == len(diff.kernels)
    assert {(r["name"], r["verdict"]) for r in rows} == {(d.name, d.verdict) for d in diff.kernels}
    # each row says why it changed in diff's words (tilescope.diff_explain)
    why = {d.name: "; ".join(c.text for c in d.causes) for d in diff.kernels}
    assert {r["name"]: r["why"] for r in rows} == why
    assert any(r["why"] for r in rows)
    assert abs(rows[0]["delta_us"]) >= abs(rows[-1]["delta_us"])
    assert "New in head" in json.dumps(out["c-findings"]["children"])
    assert size < MAX_CALLBACK_BYTES


def test_ir_only_bundle_serves_every_view(tmp_path: Path) -> None:
    bundle = REPO_ROOT / "sample_traces" / "bundle_ir_only_fa"
    if not bundle.is_dir():
        pytest.skip("sample_traces/bundle_ir_only_fa not present")
    app = create_app([bundle])
    out, _ = post_callback(
        app,
        "ir-data.data",
        {"profile.value": "p0", "ir-finding.value": None, "ir-kernel.value": None, "shown-ir.data": "ir"},
    )
    # kernel source (the bundle's kernel/ copy), TVMScript before and after lowering, Ascend C
    assert len(out["ir-data"]["data"]["panes"]) == 4
    out, _ = post_callback(
        app, "c-kpis.children", {"c-base.value": "p0", "c-head.value": "p0", "shown-compare.data": "compare"}
    )
    assert "Cannot compare" in json.dumps(out["c-kpis"]["children"])
    for prefix, vals in (
        ("ov-kpis.children", {"shown-overview.data": "overview"}),
        ("roofline.figure", {"shown-roofline.data": "roofline"}),
        ("timeline.figure", {"shown-timeline.data": "timeline"}),
        ("f-list.children", {"shown-findings.data": "findings"}),
    ):
        post_callback(app, prefix, {"profile.value": "p0", **vals})


def test_layout_is_served_locally_without_cdn(app: dash.Dash) -> None:
    client = app.server.test_client()
    page = client.get("/").get_data(as_text=True)
    assert "unpkg.com" not in page and "cdn" not in page.lower()
    assert client.get("/_dash-layout").status_code == 200


def test_profile_from_root_loads_on_pick(tmp_path: Path) -> None:
    sample = REPO_ROOT / "sample_traces" / "attention_fused"
    if not sample.is_dir():
        pytest.skip("sample_traces/attention_fused not present")
    app = create_app([], roots=[sample.parent])
    key = next(o["value"] for o in store_of(app).options() if "attention_fused" in o["label"])
    out, _ = post_callback(app, "chip-info.children", {"profile.value": key})
    assert out["load-error"]["children"] == ""
    assert store_of(app).get(key) is not None


SAMPLES = REPO_ROOT / "sample_traces"


@pytest.mark.parametrize(
    "sample", ["tilelang_fa_bundle", "tilelang_fa_msprof_op", "tilelang_fa_msprof_op_multi"]
)
def test_timeline_of_an_msprof_op_profile_says_why_it_is_empty(sample: str) -> None:
    # msprof op (and a run bundle of one) has start_ns all null: the view said HTTP 500 (issue #15)
    app = create_app([SAMPLES / sample])
    out, _ = post_callback(app, "timeline.figure", {"profile.value": "p0", "shown-timeline.data": "timeline"})
    assert out["tl-info"]["children"].startswith("No start times in this profile: `msprof op` measures")
    assert out["tl-window"]["data"] is None
    # no empty Start column in the Kernels grid either
    out, _ = post_callback(app, "k-grid-box.children",
        {"profile.value": "p0", "shown-kernels.data": "kernels"})
    fields = [c["field"] for c in out["k-grid-box"]["children"]["props"]["columnDefs"]]
    assert "start_us" not in fields and "duration_us" in fields


def test_timeline_places_the_launches_that_have_a_start() -> None:
    # a table where some launches lack a start: those are left out, the rest are drawn
    from tilescope.dashboard.data import make_entry
    from tilescope.dashboard.timeline_lanes import build_lanes

    p = synthetic_profile(50, names=5)
    p.timeline = None
    p.kernels = p.kernels.assign(start_ns=p.kernels["start_ns"].astype("Int64"))
    p.kernels.loc[[3, 7, 11], "start_ns"] = pd.NA
    entry = make_entry("p0", "partial", p, synthetic_report(p))
    lanes = build_lanes(entry)
    assert sum(len(ln.start) for ln in lanes if ln.kind == "kernel") == 47


def test_profiles_from_files_of_the_same_name_get_different_labels(tmp_path: Path) -> None:
    # two runs' kernel_details.csv were both labelled "kernel_details.csv" in the picker
    paths = []
    for run in ("run-a", "run-b"):
        (tmp_path / run).mkdir()
        path = tmp_path / run / "kernel_details.csv"
        path.write_text(
            "Name,Type,Accelerator Core,Start Time(us),Duration(us)\nk,Add,AI_VECTOR_CORE,1.0,2.0\n",
            encoding="utf-8",
        )
        paths.append(path)
    labels = [o["label"] for o in store_of(create_app(paths)).options()]
    assert labels == ["run-a/kernel_details.csv", "run-b/kernel_details.csv"]
