"""Terminal output says which lines a finding points at, not only what it found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analyzer.analysis import analyze
from analyzer.io.load import load_profile
from analyzer.report.data import build_report
from analyzer.report.render_text import render, where_text

BUNDLE = Path(__file__).resolve().parents[1] / "sample_traces" / "tilelang_fa_bundle"


def test_where_text_shortens_source_paths_and_caps_the_list() -> None:
    locs: list[dict[str, Any]] = [
        {"file": "sample_traces/kernels/fa.py", "line": 41, "stage": "source"},
        {"file": "ir/tvmscript.py", "line": 46, "stage": "tvmscript"},
        {"file": "ir/tvmscript.py", "line": 46, "stage": "tvmscript"},  # repeat: shown once
        {"file": "ir/kernel.cpp", "line": None, "stage": "ascendc"},  # no line: not shown
        {"file": "ir/kernel.cpp", "line": 130, "stage": "ascendc"},
    ]
    assert where_text(locs) == "fa.py:41 ir/tvmscript.py:46 ir/kernel.cpp:130"
    assert where_text(locs, limit=2) == "fa.py:41 ir/tvmscript.py:46 +1 more"


def test_analyze_text_points_at_the_softmax_lines_of_the_bundle() -> None:
    profile = load_profile(BUNDLE)
    report = build_report([(profile, analyze(profile))])
    text = render(report, width=200)
    ts201 = next(f for f in report["findings"] if f["code"] == "TS201")
    first_source = next(loc for loc in ts201["locations"] if loc["stage"] == "source")
    assert f"at flash_attention.py:{first_source['line']} " in text


def test_ir_only_bundle_says_runtime_metrics_are_absent() -> None:
    profile = load_profile(BUNDLE.parent / "bundle_ir_only_fa")
    text = render(build_report([(profile, analyze(profile))]), width=200)
    assert "note: bundle has no profiler output: runtime metrics are absent" in text
    assert "TS504" in text  # the static findings are still reported


def test_speed_of_light_under_one_percent_keeps_a_digit() -> None:
    """`0 %` would read as "did nothing": under 1 % one significant digit is kept."""
    from analyzer.report.words import speed_of_light_text

    def said(pct: float) -> str:
        return speed_of_light_text({"speed_of_light": {"achieved_pct": pct, "coverage": 0.4}})

    assert said(0.0312) == "kernels ran at 0.03 % of their speed of light (over 40 % of kernel time)"
    shown = [said(p).split(" %")[0].rsplit(" ", 1)[1] for p in (0.0, 0.46, 0.96, 13.4)]
    assert shown == ["0", "0.5", "1", "13"]
