"""The dashboard's Ranks tab (issue #16) on the generated 8-rank run: slow rank 3 (MatMulV2 x1.5)
and slow link 5->6 (5 of 20 GB/s). The view builders are checked against the report that
`tilescope analyze -f json` writes for the same folder, the callbacks through Dash's endpoint."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import dash
import numpy as np
import plotly.graph_objects as go
import pytest
from dash import html

from tilescope.cli import main
from tilescope.dashboard import ranks as R
from tilescope.dashboard.app import create_app, store_of
from tilescope.dashboard.data import ClusterEntry
from tilescope.dashboard.layout import build_layout
from tilescope.report.ranks import rank_rows

from support.dash_calls import callback_body, post_callback

SLOW_RANK, SLOW_LINK = 3, (5, 6)


@pytest.fixture(scope="module")
def run8(tmp_path_factory: pytest.TempPathFactory, sample_generator: ModuleType) -> Path:
    from generator.cluster import write_cluster_run

    out = tmp_path_factory.mktemp("ranks8")
    write_cluster_run(out)  # the run `generate.py --ranks 8` writes
    return out


@pytest.fixture(scope="module")
def report8(run8: Path) -> dict[str, Any]:
    """The JSON report of the same folder, as `tilescope analyze -f json` writes it."""
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["analyze", str(run8), "-f", "json"]) == 0
    report: dict[str, Any] = json.loads(buf.getvalue())
    return report


@pytest.fixture(scope="module")
def app8(run8: Path) -> dash.Dash:
    return create_app([run8])


@pytest.fixture(scope="module")
def run(app8: dash.Dash) -> ClusterEntry:
    (entry,) = store_of(app8).clusters()
    return entry


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_the_store_holds_the_reports_cluster_section(
    run: ClusterEntry, report8: dict[str, Any], app8: dash.Dash
) -> None:
    section = report8["cluster"]
    assert run.section["ranks"] == section["ranks"]
    assert run.section["steps"] == section["steps"]
    assert run.section["links"] == section["links"]
    assert run.slow_rank == section["slow_rank"] == SLOW_RANK
    across = [f for f in report8["findings"] if f.get("scope") == "cluster"]
    assert [(f["code"], f["message"]) for f in run.findings] == [(f["code"], f["message"]) for f in across]
    # every rank opens its own profile: the picker's option for that key names the rank
    labels = {o["value"]: o["label"] for o in store_of(app8).options()}
    assert sorted(run.rank_keys) == list(range(8))
    assert all(labels[k].endswith(f"(rank {r})") for r, k in run.rank_keys.items())


def test_rank_table_is_the_reports_with_the_slow_rank_marked(
    run: ClusterEntry, report8: dict[str, Any]
) -> None:
    table = R.rank_table(run, shown_key=run.rank_keys[5])
    rows = table.children[1].children
    texts = [[td.children for td in tr.children[:-1]] for tr in rows]  # the last cell: marks below
    assert texts == [r[:-1] for r in rank_rows(report8, grouped=False)]  # one clickable row per rank
    slow = [tr for tr in rows if "slow" in tr.className.split()]
    assert [tr.id for tr in slow] == [{"type": R.ROW_TYPE, "index": SLOW_RANK}]
    assert slow[0].children[-1].children == ["slow rank"]
    assert [tr.id["index"] for tr in rows if "shown" in tr.className.split()] == [5]


def test_heatmap_shows_the_slow_rank_with_the_reports_values(
    run: ClusterEntry, report8: dict[str, Any]
) -> None:
    fig = R.step_heatmap_figure(run, "computing_us")
    trace = fig.data[0]
    assert isinstance(trace, go.Heatmap)
    ranks = [int(y) for y in trace.y]
    assert ranks == list(range(8))
    z = np.array(trace.z, dtype=float)
    want = {(s["rank"], str(s["step"])): s["computing_us"] for s in report8["cluster"]["steps"]}
    assert {(r, x): z[i, j] for i, r in enumerate(ranks) for j, x in enumerate(trace.x)} == pytest.approx(
        want
    )
    # the slow rank computes longest in every step, and is named on its axis and in the title
    assert (z.argmax(axis=0) == ranks.index(SLOW_RANK)).all()
    assert list(fig.layout.yaxis.ticktext)[SLOW_RANK] == f"{SLOW_RANK} (slow)"
    assert f"slow rank {SLOW_RANK}" in fig.layout.title.text
    assert f"max/min = {z.max() / z.min():.2f}" in fig.layout.title.text  # 1,260 / 990 µs: 1.27
    # the step time is the same on every rank (they wait for each other): a choice, not the default
    steps = np.array(R.step_heatmap_figure(run, "step_us").data[0].z, dtype=float)
    assert np.allclose(steps, steps[0, 0])


def test_matrix_shows_the_slow_link_with_the_reports_values(
    run: ClusterEntry, report8: dict[str, Any]
) -> None:
    fig = R.link_matrix_figure(run, "bandwidth_gbps")
    trace = fig.data[0]
    rows, cols = [int(v) for v in trace.y], [int(v) for v in trace.x]
    assert rows == cols == list(range(8))  # every rank reports its links here: a square matrix
    z = np.array([[np.nan if v is None else v for v in row] for row in trace.z], dtype=float)
    links = report8["cluster"]["links"]
    assert len(links) == 8
    for x in links:
        assert z[rows.index(x["src_rank"]), cols.index(x["dst_rank"])] == pytest.approx(x["bandwidth_gbps"])
    assert np.isnan(np.diag(z)).all()  # LOCAL copies left out
    i, j = np.unravel_index(np.nanargmin(z), z.shape)
    assert (rows[i], cols[j]) == SLOW_LINK and z[i, j] == pytest.approx(5.0)
    assert np.nanmedian(z) == pytest.approx(20.0)
    (shape,) = fig.layout.shapes  # the TS604 link outlined
    assert (shape.x0 + 0.5, shape.y0 + 0.5) == (cols.index(SLOW_LINK[1]), rows.index(SLOW_LINK[0]))
    assert "slow link 5→6 (TS604)" in fig.layout.title.text
    size = np.array(
        [[np.nan if v is None else v for v in row] for row in R.link_matrix_figure(run, "size_mb").data[0].z]
    )
    assert np.nansum(size) == pytest.approx(sum(x["size_mb"] for x in links))


def test_real_two_rank_matrix_rows_are_the_ranks_that_report(real_traces: Path) -> None:
    """The real gpt3 run was captured on ranks 0 and 1 of a larger job: two rows, one column per
    rank they sent to; rank 0's kernel table has a short row, skipped with a note: both ranks load."""
    path = real_traces / "gpt3_2rank_memoryl0"
    if not path.is_dir():
        pytest.skip("needs ../shared/traces/real/gpt3_2rank_memoryl0")
    (entry,) = store_of(create_app([path])).clusters()
    grid, srcs, dsts = R.link_grid(entry, "bandwidth_gbps")
    assert srcs == [0, 1] and dsts == list(range(10)) and grid.shape == (2, 10)
    links = {(x["src_rank"], x["dst_rank"]): x for x in entry.section["links"]}
    assert sorted(links[(0, 1)]["transports"]) == ["HCCS", "RDMA"]  # one cell, both transports
    assert grid[0, 1] == pytest.approx(links[(0, 1)]["bandwidth_gbps"])
    # healthy links 17.7-24 GB/s: the colours run from half the median (red) to the median (green)
    trace = R.link_matrix_figure(entry, "bandwidth_gbps").data[0]
    median = float(np.nanmedian(grid))
    assert (trace.zmin, trace.zmax) == pytest.approx((0.5 * median, median))
    assert np.nanmin(grid) > 0.9 * median
    assert grid[0, 1] == pytest.approx(
        links[(0, 1)]["size_mb"] / links[(0, 1)]["transit_us"] * 1000, rel=1e-3
    )
    assert list(entry.rank_keys) == [0, 1]
    values, ranks, labels, _width = R.step_grid(entry, "computing_us")
    assert ranks == [0, 1] and labels == ["2"]
    assert list(values[:, 0]) == pytest.approx([s["computing_us"] for s in entry.section["steps"]])


def test_cross_rank_findings_carry_their_evidence(run: ClusterEntry) -> None:
    items = R.cluster_findings(run)
    codes = [d.children[0].children[2].children for d in items if isinstance(d, html.Details)]
    assert codes == [f["code"] for f in run.findings] and "TS604" in codes and "TS601" in codes
    ts604 = items[1 + codes.index("TS604")]
    evidence = {
        tr.children[0].children: tr.children[1].children for tr in ts604.children[2].children.children
    }
    assert evidence["src_rank"] == "5" and evidence["dst_rank"] == "6" and evidence["bandwidth_gbps"] == "5"


def _steps_entry(ranks: int, steps: int) -> ClusterEntry:
    rng = np.random.default_rng(7)
    rows = [
        {
            "rank": r,
            "step": s,
            "computing_us": float(v),
            "communication_not_overlapped_us": 1.0,
            "free_us": 2.0,
            "step_us": 3.0 + float(v),
            "source": "step_trace_time.csv",
        }
        for r in range(ranks)
        for s, v in zip(range(1, steps + 1), rng.uniform(900, 1100, steps), strict=True)
    ]
    return ClusterEntry("c0", "big", {"ranks": [], "steps": rows, "links": []}, [], {})


def test_a_64_rank_1258_step_heatmap_is_binned_small() -> None:
    entry = _steps_entry(64, 1258)
    values, ranks, labels, width = R.step_grid(entry, "computing_us")
    assert ranks == list(range(64)) and width == 7 and values.shape == (64, 180) and len(labels) == 180
    assert labels[0] == "1–7" and labels[-1] == "1254–1258"
    first = [s["computing_us"] for s in entry.section["steps"] if s["rank"] == 1 and s["step"] <= 7]
    assert values[1, 0] == pytest.approx(np.mean(first))
    payload = len(R.step_heatmap_figure(entry, "computing_us").to_json())
    assert payload < 250_000, payload  # 80,512 values unbinned would be ~1 MB


def test_a_left_out_rank_keeps_its_row_and_says_why(tmp_path: Path, sample_generator: ModuleType) -> None:
    from generator.cluster import ClusterSpec, write_cluster_run

    roots = write_cluster_run(tmp_path, ClusterSpec(ranks=4, slow_rank=2, slow_link=None))
    kd = roots[2] / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = kd.read_text().splitlines()
    # every row from row 3 on one field short: more unreadable rows than readable ones refuse
    # the table (one short row alone is skipped with a note: tests/io/test_bad_rows.py)
    lines[3:] = [line.rsplit(",", 1)[0] for line in lines[3:]]
    kd.write_text("\n".join(lines) + "\n")
    (entry,) = store_of(create_app([tmp_path])).clusters()
    assert sorted(entry.rank_keys) == [0, 1, 3]
    rows = R.rank_table(entry).children[1].children
    (left,) = [tr for tr in rows if "left-out" in tr.className.split()]
    assert getattr(left, "id", None) is None  # nothing to open
    cell = left.children[-1].children
    assert "kernel table unreadable" in cell[0]
    error = cell[1].children.children
    assert "row 3 (line 4)" in error and error == entry.section["ranks"][2]["error"]
    assert "3 with a readable kernel table" in R.rank_info(entry)[0].children


def test_hostile_text_stays_children() -> None:
    evil = "<img src=x onerror=alert(1)>"
    section = {
        "ranks": [
            {
                "rank": 0,
                "path": evil,
                "kernels_loaded": False,
                "error": evil,
                "slow": False,
                "computing_us": None,
                "communication_not_overlapped_us": None,
                "free_us": None,
                "step_us": None,
                "steps": 0,
                "source": None,
            }
        ],
        "notes": [evil],
        "steps": [],
        "links": [],
        "ranks_total": 1,
        "ranks_loaded": 0,
    }
    finding = {
        "code": "TS601",
        "slug": "slow-rank",
        "severity": "low",
        "kernels": [evil],
        "message": evil,
        "recommendation": evil,
        "evidence": {"kernel": evil},
        "est_saving_us": 1.0,
    }
    entry = ClusterEntry("c0", evil, section, [finding], {})
    text = json.dumps(
        [
            R.rank_table(entry).to_plotly_json(),
            [c.to_plotly_json() for c in R.rank_info(entry)],
            [c.to_plotly_json() for c in R.cluster_findings(entry)],
        ],
        default=lambda c: c.to_plotly_json(),
    )
    assert evil in text and "dangerously" not in text  # plain strings: React renders them as text


# ---- callbacks ---------------------------------------------------------------------------------------


def _pick_body(app: dash.Dash, run: str, row: int | None = None, heat_y: str | None = None) -> dict[str, Any]:
    trigger = "r-heatmap.clickData"
    body = callback_body(app, "profile.value", {"r-run.value": run}, trigger)
    if row is not None:
        row_id = {"type": R.ROW_TYPE, "index": row}
        body["inputs"][0] = [{"id": row_id, "property": "n_clicks", "value": 1}]
        body["changedPropIds"] = [json.dumps(row_id, separators=(",", ":"), sort_keys=True) + ".n_clicks"]
    else:
        body["inputs"][0] = []
        body["inputs"][1]["value"] = {"points": [{"x": "1", "y": heat_y, "z": 1.0}]}
    return body


def test_clicking_a_rank_opens_it_in_the_picker(app8: dash.Dash, run: ClusterEntry) -> None:
    client = app8.server.test_client()
    for body, rank in (
        (_pick_body(app8, run.key, row=SLOW_RANK), SLOW_RANK),
        (_pick_body(app8, run.key, heat_y="6"), 6),
    ):
        resp = client.post("/_dash-update-component", json=body)
        assert resp.status_code == 200, resp.get_data(as_text=True)[:500]
        out = json.loads(resp.get_data())["response"]
        assert out["profile"]["value"] == run.rank_keys[rank]
        assert list(out["tabs"].values()) == ["overview"]
    # the picked profile is that rank's: its overview shows its own kernels
    entry = store_of(app8).get(run.rank_keys[SLOW_RANK])
    assert entry is not None and entry.profile.rank == SLOW_RANK
    # a rank that is not there, or a run that is not served: nothing, or a 400
    assert (
        client.post("/_dash-update-component", json=_pick_body(app8, run.key, heat_y="99")).status_code == 204
    )
    assert (
        client.post("/_dash-update-component", json=_pick_body(app8, "../etc", heat_y="1")).status_code == 400
    )


def test_ranks_tab_callbacks_answer_small(app8: dash.Dash, run: ClusterEntry) -> None:
    out, size = post_callback(
        app8, "r-info.children", {"r-run.value": run.key, "profile.value": "p3", "shown-ranks.data": "ranks"}
    )
    assert size < 60_000
    assert "Slow rank: 3 (TS601)" in json.dumps(out["r-info"])
    out, size = post_callback(
        app8, "r-heatmap.figure",
            {"r-run.value": run.key, "r-metric.value": "free_us", "shown-ranks.data": "ranks"}
    )
    assert size < 60_000 and out["r-heatmap"]["figure"]["data"][0]["type"] == "heatmap"
    out, size = post_callback(
        app8,
        "r-matrix.figure",
        {"r-run.value": run.key, "r-link-value.value": "size_mb", "shown-ranks.data": "ranks"},
    )
    assert "Transit size" in out["r-matrix"]["figure"]["layout"]["title"]["text"]
    body = callback_body(
        app8, "r-heatmap.figure",
            {"r-run.value": run.key, "r-metric.value": "<x>", "shown-ranks.data": "ranks"}
    )
    assert app8.server.test_client().post("/_dash-update-component", json=body).status_code == 400


def test_the_ranks_tab_only_for_several_ranks() -> None:
    def tab_values(layout: html.Div) -> list[str]:
        tabs = next(c for c in layout.children if getattr(c, "id", None) == "tabs")
        return [t.value for t in tabs.children]

    assert "ranks" not in tab_values(build_layout([], None))
    assert tab_values(build_layout([], None, [{"label": "r8", "value": "c0"}]))[:2] == ["overview", "ranks"]


def test_serve_says_the_ranks_tab_and_the_left_out_rank(
    tmp_path: Path, sample_generator: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    from generator.cluster import ClusterSpec, write_cluster_run

    roots = write_cluster_run(tmp_path, ClusterSpec(ranks=3, slow_rank=None, slow_link=None))
    kd = roots[1] / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    kd.write_text("\n".join([*kd.read_text().splitlines()[:3], "x,y"]) + "\n")  # a row of two fields
    assert main(["serve", str(tmp_path), "--check", "--strict"]) == 0  # by default: a skipped row
    err = capsys.readouterr().err.splitlines()
    (warning,) = [line for line in err if "left out" in line]
    assert warning.startswith("tilescope: warning: ") and "kernel_details.csv: row 3 (line 4)" in warning
    assert warning.endswith("— rank 1 left out")
    said = f"tilescope: {tmp_path.name}: 3 ranks side by side in the Ranks tab"
    assert f"{said} (1 without a readable kernel table)" in err


def test_an_msprof_run_of_two_devices_without_step_ids(tmp_path: Path) -> None:
    """No step_trace_time.csv, no step ids, no communication_matrix.json: one "all" column
    recomputed from each device's kernels, and a matrix that says why it is empty."""
    from support.profiles import write_two_device_prof

    write_two_device_prof(tmp_path)
    (entry,) = store_of(create_app([tmp_path])).clusters()
    values, ranks, labels, width = R.step_grid(entry, "computing_us")
    assert ranks == [0, 1] and labels == ["all"] and width == 1
    assert list(values[:, 0]) == [s["computing_us"] for s in entry.section["steps"]] == [380.0, 560.0]
    assert entry.slow_rank == 1 and "slow rank 1" in R.step_heatmap_figure(entry).layout.title.text
    matrix = R.link_matrix_figure(entry)
    assert matrix.layout.annotations[0].text.startswith("No communication matrix")


@pytest.mark.slow  # 2.4-5 s of CPU each (#23: the quick loop keeps tests under ~2 s)
def test_two_runs_served_each_open_their_own_ranks(run8: Path) -> None:
    app = create_app([run8, run8])
    first, second = store_of(app).clusters()
    assert (first.key, second.key) == ("c0", "c1") and first.label != second.label == str(run8)
    assert list(first.rank_keys.values()) == [f"p{i}" for i in range(8)]
    assert list(second.rank_keys.values()) == [f"p{i}" for i in range(8, 16)]
    body = callback_body(app, "profile.value", {"r-run.value": "c1"}, "r-heatmap.clickData")
    body["inputs"][0] = []
    body["inputs"][1]["value"] = {"points": [{"x": "1", "y": "3", "z": 1.0}]}
    resp = app.server.test_client().post("/_dash-update-component", json=body)
    assert json.loads(resp.get_data())["response"]["profile"]["value"] == "p11"
