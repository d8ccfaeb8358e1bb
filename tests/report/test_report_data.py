"""build_report's per-kernel figures, launch timeline and chip figures, on the generated
attention_unfused sample: the HTML report draws the pipe-ratio, roofline and timeline charts from
them instead of the "no data" notes, and the numbers are those of the loaded kernel table."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tilescope.analysis import analyze
from tilescope.profile import Profile
from tilescope.report.data import build_report, validate_report

from support import REPO_ROOT

SAMPLE = REPO_ROOT / "sample_traces" / "attention_unfused"
MATMUL = "aclnnMatmul_MatMulV3Common_MatMulV3"
PIPES = ("aic_cube_ratio", "aic_mte1_ratio", "aic_mte2_ratio", "aic_fixpipe_ratio", "aic_scalar_ratio",
         "aiv_vec_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio", "aiv_scalar_ratio")
NEW_KEYS = ("op_type", "input_shapes", "core_type", *PIPES, "cube_share", "vector_share",
            "arithmetic_intensity", "achieved_tflops", "bytes_moved", "median_us", "p25_us", "p75_us",
            "min_us", "max_us", "launches")


@pytest.fixture(scope="module")
def loaded() -> tuple[Profile, dict[str, Any]]:
    if not SAMPLE.is_dir():
        pytest.skip("sample attention_unfused not generated")
    from tilescope.io.load import load_profile

    prof = load_profile(SAMPLE)
    return prof, build_report(prof, analyze(prof), generated_at="2026-11-30T00:00:00+00:00")


def _weighted(values: Any, dur: Any) -> float:
    ok = ~np.isnan(values) & ~np.isnan(dur)
    return float((values[ok] * dur[ok]).sum() / dur[ok].sum())


def test_report_validates_and_top_kernels_carry_every_new_key(loaded: tuple[Profile, dict[str, Any]]) -> None:
    _prof, report = loaded
    validate_report(report)
    assert report["top_kernels"] == report["summary"]["top_kernels"]
    for row in report["top_kernels"]:
        assert set(NEW_KEYS) <= set(row), row["name"]


def test_matmul_kernel_figures_equal_the_kernel_table(loaded: tuple[Profile, dict[str, Any]]) -> None:
    prof, report = loaded
    row = next(r for r in report["top_kernels"] if r["name"] == MATMUL)
    k = prof.kernels[prof.kernels["name"] == MATMUL]
    dur = k["duration_us"].to_numpy(dtype="float64")
    assert row["launches"] == row["count"] == len(k) == 40
    assert row["op_type"] == "MatMulV3" and row["core_type"] == "AI_CORE"
    assert row["input_shapes"] == k["input_shapes"].iloc[0]
    assert row["median_us"] == round(float(np.median(dur)), 3)
    assert row["p25_us"] == round(float(np.percentile(dur, 25)), 3)
    assert row["p75_us"] == round(float(np.percentile(dur, 75)), 3)
    assert (row["min_us"], row["max_us"]) == (round(dur.min(), 3), round(dur.max(), 3))
    for col in ("aic_cube_ratio", "aic_mte1_ratio", "aic_mte2_ratio", "aic_fixpipe_ratio",
                "aic_scalar_ratio", "cube_share"):
        assert row[col] == round(_weighted(k[col].to_numpy(dtype="float64"), dur), 4), col
    for col in ("aiv_vec_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio", "aiv_scalar_ratio", "vector_share"):
        assert row[col] is None, col  # a Cube-only kernel: the Vector side was not measured
    flops = k["flops"].to_numpy(dtype="float64")
    moved = k["bytes_moved"].to_numpy(dtype="float64")
    assert row["arithmetic_intensity"] == pytest.approx(flops.sum() / moved.sum(), rel=1e-12)
    assert row["achieved_tflops"] == pytest.approx(flops.sum() / dur.sum() / 1e6, rel=1e-12)
    assert row["bytes_moved"] == pytest.approx(moved.mean(), rel=1e-12)
    assert row["achieved_tflops"] < report["inputs"]["chip"]["peak_fp16_tflops"]


def test_chip_figures_for_the_roofline(loaded: tuple[Profile, dict[str, Any]]) -> None:
    _prof, report = loaded
    chip = report["inputs"]["chip"]
    assert chip["peak_fp16_flops"] == 24 * 1800e6 * 8192
    # the vendor's GM figure for a 910B2, default memory type (chips.md §2a)
    assert chip["hbm_bandwidth_gbps"] == 1750.0 and chip["hbm_bandwidth_assumed"] is False
    assert chip["memory_type"] == "default" and "vendor figure for 910B2" in chip["hbm_bandwidth_source"]
    assert chip["ridge_point_flop_per_byte"] == pytest.approx(24 * 1800e6 * 8192 / 1750e9)


def test_timeline_has_every_launch_in_start_order(loaded: tuple[Profile, dict[str, Any]]) -> None:
    prof, report = loaded
    tl = report["timeline"]
    assert report["timeline_info"] == {"launches": 290, "kept": 290, "cap": 5000}
    assert len(tl) == len(prof.kernels) == 290
    assert [r["start_ns"] for r in tl] == sorted(int(s) for s in prof.kernels["start_ns"])
    first = tl[0]
    assert set(first) == {"name", "start_ns", "duration_us", "core_type", "stream_id"}
    assert isinstance(first["start_ns"], int) and first["stream_id"] == 2


def test_timeline_over_the_cap_keeps_the_longest(loaded: tuple[Profile, dict[str, Any]]) -> None:
    prof, _ = loaded
    report = build_report(prof, analyze(prof), timeline_cap=10)
    validate_report(report)
    tl = report["timeline"]
    assert report["timeline_info"] == {"launches": 290, "kept": 10, "cap": 10}
    longest = sorted(prof.kernels["duration_us"].tolist(), reverse=True)[:10]
    assert sorted((r["duration_us"] for r in tl), reverse=True) == longest
    assert [r["start_ns"] for r in tl] == sorted(r["start_ns"] for r in tl)
    assert "timeline" not in build_report(prof, analyze(prof), timeline_cap=0)


def test_html_draws_pipe_ratio_roofline_and_timeline_charts(loaded: tuple[Profile, dict[str, Any]]) -> None:
    from tilescope.report.render_html import render

    html = render(loaded[1])
    for chart in ("pipes", "roofline", "timeline"):
        assert f'id="chart-{chart}"' in html and f'data-target="chart-{chart}"' in html
        assert f'id="chart-{chart}-absent"' not in html
    assert "MatMulV3" in html  # the op type column of the top-kernels table


def test_markdown_table_shows_op_type_and_cube_share(loaded: tuple[Profile, dict[str, Any]]) -> None:
    from tilescope.report.render_md import render

    row = next(r for r in loaded[1]["top_kernels"] if r["name"] == MATMUL)
    lines = render(loaded[1]).replace("\xa0", " ").splitlines()  # cells keep numbers with their units
    line = next(ln for ln in lines if MATMUL in ln and ln.startswith("| "))
    assert "| MatMulV3 |" in line and f"{row['cube_share'] * 100:.1f} %" in line


def test_combined_saving_never_exceeds_a_kernels_time() -> None:
    """Overlapping findings on one kernel combine as fractions, never past its speed-of-light gap;
    idle-gap savings stay apart."""
    import pandas as pd

    from tilescope.findings import Finding, Severity
    from tilescope.summary import combined_saving, device_time

    kernels = pd.DataFrame(
        {"name": ["fa", "fa", "mm"], "duration_us": [40.0, 60.0, 50.0], "sol_us": [np.nan, np.nan, 45.0]}
    )
    dt = device_time(kernels)

    def f(saving: float, *names: str, kind: str = "device") -> Finding:
        return Finding("TS000", "x", Severity.HIGH, tuple(names), "m", est_saving_us=saving, saving_kind=kind)

    # fa (100 µs, no speed of light) loses 50 % then 50 % of the rest then 20 %: 100 x (1 - 0.5 x 0.5
    # x 0.8) = 80 µs; mm gets 10 µs of a chain saving of 30 µs spread over fa and mm by time (100:50),
    # but its speed of light (45 of 50 µs) leaves a gap of 5 µs
    device, idle = combined_saving(
        [f(50.0, "fa"), f(50.0, "fa"), f(30.0, "fa", "mm"), f(7.0, kind="idle")], kernels, dt
    )
    assert device == pytest.approx(100.0 * (1 - 0.5 * 0.5 * 0.8) + 5.0)
    assert idle == pytest.approx(7.0)
    # work-removing findings (fusion) are bounded by the kernels' time, not their speed of light
    device, _ = combined_saving([f(30.0, "fa", "mm", kind="work")], kernels, dt)
    assert device == pytest.approx(30.0)
    # a new grid (TS401) by the speed of light with every core: mm's 45 µs at its grid, 20 µs with all
    kernels["sol_device_us"] = [np.nan, np.nan, 20.0]
    device, _ = combined_saving([f(40.0, "mm", kind="grid"), f(40.0, "mm")], kernels, device_time(kernels))
    assert device == pytest.approx(50.0 - 20.0)


def test_json_output_is_byte_identical_to_the_standard_encoder() -> None:
    """render_json uses msgspec for speed; it must write exactly what json.dumps writes."""
    import json as _json

    from tilescope.analysis import analyze
    from tilescope.io.load import load_profile
    from tilescope.report.data import build_report
    from tilescope.report.render_json import render

    root = REPO_ROOT / "sample_traces"
    for sample in ("attention_unfused", "tilelang_fa_bundle"):
        profile = load_profile(root / sample)
        report = build_report([(profile, analyze(profile))])
        clean = {k: v for k, v in report.items() if not k.startswith("_")}
        assert render(report) == _json.dumps(clean, indent=2, ensure_ascii=False) + "\n"
