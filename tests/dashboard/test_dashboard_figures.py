"""Pure figure builders: tables in, figure dicts out — traces, colours, units, escaping."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tilescope.chips import get_chip
from tilescope.dashboard import figures as F
from tilescope.dashboard.figures_roofline import SVG_MAX_POINTS, roofline_figure
from tilescope.dashboard.figures_timeline import timeline_figure
from tilescope.dashboard.timeline_lanes import Lane, timeline_window

from support.synthetic import HOSTILE

SAFE = "&lt;img src=x onerror=alert(1)&gt;"


def test_plot_text_escapes_markup() -> None:
    assert F.plot_text(HOSTILE) == SAFE
    assert F.plot_text("a" * 60, 10) == "a" * 9 + "…"


def test_busy_by_core_type_colours_and_units() -> None:
    fig = F.busy_by_core_type_figure({"Cube": 100.0, "Vector": 50.0, "Other (AI_CPU)": 5.0}).to_dict()
    bar = fig["data"][0]
    assert list(bar["marker"]["color"]) == ["#1f77b4", "#ff7f0e", "#c7c7c7"]
    assert fig["layout"]["xaxis"]["title"]["text"] == "device busy time (µs)"


def test_pipe_share_figure_uses_product_colours() -> None:
    fig = F.pipe_share_figure({"Cube": 0.5, "Vector": 0.2, "Data movement": 0.6, "Scalar": 0.1}).to_dict()
    assert list(fig["data"][0]["marker"]["color"]) == ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"]
    assert list(fig["data"][0]["x"]) == pytest.approx([50, 20, 60, 10])
    title = fig["layout"]["xaxis"]["title"]["text"]
    assert title == "busy, % of device time (per core, summed over launches)"
    assert list(fig["data"][0]["text"]) == ["50 %", "20 %", "60 %", "10 %"]  # the headline's rounding
    assert "PipeUtilization" in str(F.pipe_share_figure({}).to_dict()["layout"]["annotations"][0]["text"])


def test_top_kernels_escape_labels_and_keep_raw_names_for_clicks() -> None:
    by_name = pd.DataFrame(
        {
            "name": [HOSTILE, "k2"],
            "total_us": [10.0, 5.0],
            "launches": [2, 1],
            "core_type": ["AI_CORE", "AI_VECTOR_CORE"],
        }
    )
    bar = F.top_kernels_figure(by_name).to_dict()["data"][0]
    assert list(bar["y"]) == [SAFE, "k2"]
    assert list(bar["customdata"]) == [HOSTILE, "k2"]
    assert list(bar["marker"]["color"]) == ["#1f77b4", "#ff7f0e"]
    assert "<img" not in "".join(bar["hovertext"])


def test_findings_by_severity_counts_and_colours() -> None:
    findings = [
        {"severity": "high", "est_saving_us": 100.0},
        {"severity": "high", "est_saving_us": 50.0},
        {"severity": "low", "est_saving_us": 1.0},
    ]
    # the bucket savings are the summary's combined ones (never the plain sum of overlapping findings)
    totals = {"saving_by_severity": {"high": {"device_us": 120.0}, "low": {"device_us": 1.0}}}
    bar = F.findings_by_severity_figure(findings, totals).to_dict()["data"][0]
    assert list(bar["x"]) == ["high", "medium", "low", "info"]
    assert list(bar["y"]) == [2, 0, 1, 0]
    assert list(bar["marker"]["color"]) == ["#c0392b", "#e67e22", "#f1c40f", "#7f8c8d"]
    assert bar["text"][0] == "2 · est. 120.0 µs"


def test_pipe_ratio_figure_mean_and_whiskers() -> None:
    rows = pd.DataFrame(
        {"duration_us": [10.0, 30.0], "aic_cube_share": [0.2, 0.4], "aic_mte2_share": [0.9, 0.7],
         "aiv_vec_share": [np.nan] * 2}
    )
    fig = F.pipe_ratio_figure(rows, HOSTILE).to_dict()
    bar = fig["data"][0]
    assert list(bar["x"]) == ["Cube", "MTE2 (AIC)"]
    # weighted by duration, as the report's per-kernel rows: (0.2 x 10 + 0.4 x 30) / 40 = 35 %
    assert list(bar["y"]) == pytest.approx([35.0, 75.0])
    assert list(bar["marker"]["color"]) == ["#1f77b4", "#2ca02c"]
    assert list(bar["error_y"]["array"]) == pytest.approx([5.0, 15.0])
    assert fig["layout"]["yaxis"]["title"]["text"] == "busy, % of launch"
    assert fig["layout"]["title"]["text"].startswith(SAFE)


def test_bandwidth_figure_marks_assumed_hbm_line() -> None:
    rows = pd.DataFrame(
        {
            "aic_main_mem_read_gbps": [800.0, 1000.0],
            "aiv_ub_to_gm_gbps": [10.0, 30.0],
            "aiv_ub_read_vector_gbps": [9e4, 9e4],
        }
    )  # on-chip: not comparable with HBM
    fig = F.bandwidth_figure(rows, get_chip("910B2")).to_dict()
    assert list(fig["data"][0]["x"]) == ["AIC GM read", "AIV ub to gm"]
    assert list(fig["data"][0]["y"]) == [900.0, 20.0]
    shape = fig["layout"]["shapes"][0]
    assert shape["y0"] == 1750.0  # the vendor's GM figure for a 910B2 (chips.md §2a)
    assert "(vendor, default memory type)" in fig["layout"]["annotations"][0]["text"]
    cj = F.bandwidth_figure(rows, get_chip("910B2:cj")).to_dict()
    assert cj["layout"]["shapes"][0]["y0"] == 1300.0
    assert "(vendor, cj memory type)" in cj["layout"]["annotations"][0]["text"]
    assert fig["layout"]["yaxis"]["title"]["text"] == "bandwidth (GB/s)"


def test_block_heatmap_rows_and_imbalance() -> None:
    blocks = pd.DataFrame(
        {
            "block_id": [0, 0, 0, 1, 1, 1],
            "sub_block_id": ["vector0", "cube0", "vector1"] * 2,
            "aic_time_us": [np.nan, 10.0, np.nan, np.nan, 30.0, np.nan],
            "aiv_time_us": [20.0, np.nan, 20.0, 20.0, np.nan, 20.0],
        }
    )
    fig = F.block_heatmap_figure(blocks).to_dict()
    heat = fig["data"][0]
    assert list(heat["y"]) == ["cube0", "vector0", "vector1"]
    z = F.block_heatmap_figure(blocks).data[0].z  # to_dict() packs arrays as base64
    assert np.asarray(z).tolist() == [[10.0, 30.0], [20.0, 20.0], [20.0, 20.0]]
    assert "max/mean = 1.50" in fig["layout"]["title"]["text"]
    assert fig["layout"]["xaxis"]["title"]["text"] == "block id"


def test_roofline_ceilings_points_and_assumption_labels() -> None:
    chip = get_chip("910B2")
    pts = pd.DataFrame(
        {
            "name": [HOSTILE, "vec"],
            "core_type": ["AI_CORE", "AI_VECTOR_CORE"],
            "flops": [2e12, 1e9],
            "bytes_moved": [1e9, 1e9],
            "total_us": [1e4, 1e3],
        }
    )
    fig = roofline_figure(pts, chip).to_dict()
    names = [t["name"] for t in fig["data"]]
    assert names[0] == "Cube FP16/BF16 peak 354 TFLOP/s"
    assert any(n.startswith("Vector peak") and n.endswith("(assumption)") for n in names)
    assert "GM 1,750 GB/s (vendor, default memory type)" in names
    assert "L2 7,780 GB/s (vendor, default memory type)" in names
    cube = next(t for t in fig["data"] if t["name"] == "Cube")
    assert cube["type"] == "scatter" and cube["marker"]["color"] == "#1f77b4"  # SVG: a few points
    assert list(cube["customdata"]) == [HOSTILE] and list(cube["hovertext"]) == [SAFE]
    trace = next(t for t in roofline_figure(pts, chip).data if t.name == "Cube")
    assert list(trace.x) == [2000.0] and list(trace.y) == pytest.approx([200.0])
    assert fig["layout"]["xaxis"]["type"] == "log" and fig["layout"]["yaxis"]["type"] == "log"
    assert fig["layout"]["xaxis"]["title"]["text"] == "arithmetic intensity (FLOP/byte)"
    assert fig["layout"]["yaxis"]["title"]["text"] == "achieved TFLOP/s"


def test_roofline_caps_points_and_says_so() -> None:
    n = 5000
    pts = pd.DataFrame(
        {
            "name": [f"k{i}" for i in range(n)],
            "core_type": "AI_CORE",
            "flops": 1e10,
            "bytes_moved": 1e8,
            "total_us": np.arange(1, n + 1, dtype=float),
        }
    )
    fig = roofline_figure(pts, get_chip("910B2"), max_points=100).to_dict()
    cube = next(t for t in fig["data"] if t["name"] == "Cube")
    assert len(cube["customdata"]) == 100 and "k4999" in list(cube["customdata"])
    assert "top 100 by time shown" in fig["layout"]["title"]["text"]
    assert cube["type"] == "scatter"
    # past SVG_MAX_POINTS the markers are WebGL (the cap is the 2,000 of the Roofline tab)
    fig = roofline_figure(pts, get_chip("910B2"), max_points=SVG_MAX_POINTS + 1).to_dict()
    cube = next(t for t in fig["data"] if t["name"] == "Cube")
    assert len(cube["customdata"]) == SVG_MAX_POINTS + 1 and cube["type"] == "scattergl"


def _lane(n: int, label: str = "stream 1") -> Lane:
    start = np.arange(n, dtype=float) * 10.0
    return Lane(
        label,
        "kernel",
        start,
        start + 5.0,
        np.array([f"k{i}" for i in range(n)], dtype=object),
        np.array(["Cube"] * n, dtype=object),
    )


def test_timeline_window_keeps_single_kernels_when_they_fit() -> None:
    seg = timeline_window([_lane(100)], 95.0, 300.0, budget=1000)
    assert not seg.merged
    assert seg.start[0] == 90.0 and seg.end[0] == 95.0  # overlaps the window's left edge
    assert seg.text[0] == "k9" and seg.start[-1] == 300.0


def test_timeline_window_merges_to_the_budget() -> None:
    seg = timeline_window([_lane(1_000_000)], budget=500)
    assert seg.merged and seg.total_in_window <= 500
    assert seg.start[0] == 0.0 and seg.end[-1] == pytest.approx(9_999_995.0)
    assert seg.text[0].endswith("µs busy")
    total_busy = sum(float(t.split(", ")[1].split(" ")[0].replace(",", "")) for t in seg.text)
    assert total_busy == pytest.approx(5.0 * 1_000_000)


def test_timeline_figure_is_webgl_with_product_colours() -> None:
    fig = timeline_figure(
        ["stream 1", "host Python"],
        [0.0, 1.0],
        [2.0, 3.0],
        [HOSTILE, "aten::mm"],
        ["Cube", "Host"],
        ["host Python", "stream 1"],
        merged=False,
    ).to_dict()
    assert {t["type"] for t in fig["data"]} == {"scattergl"}
    cube = next(t for t in fig["data"] if t["name"] == "Cube")
    assert cube["line"]["color"] == "#1f77b4"
    assert list(cube["hovertext"])[:2] == [SAFE, SAFE]
    assert fig["layout"]["xaxis"]["title"]["text"] == "time since first event (µs)"


def test_delta_figure_colours_regressions_red() -> None:
    deltas = pd.DataFrame({"name": ["a", "b", HOSTILE], "delta_us": [5.0, -20.0, 1.0]})
    bar = F.delta_figure(deltas).to_dict()["data"][0]
    assert list(bar["y"]) == ["b", "a", SAFE]
    assert list(bar["marker"]["color"]) == ["#2ca02c", "#c0392b", "#c0392b"]
