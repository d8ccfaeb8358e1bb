"""Terminal output says which lines a finding points at, not only what it found."""

from __future__ import annotations

from typing import Any

from tilescope.analysis import analyze
from tilescope.io.load import load_profile
from tilescope.report.data import build_report
from tilescope.report.render_text import render, where_text

from support import REPO_ROOT

BUNDLE = REPO_ROOT / "sample_traces" / "tilelang_fa_bundle"


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
    from tilescope.text.words import speed_of_light_text

    def said(pct: float) -> str:
        return speed_of_light_text({"speed_of_light": {"achieved_pct": pct, "coverage": 0.4}})

    assert said(0.0312) == "kernels ran at 0.03 % of their speed of light (over 40 % of kernel time)"
    shown = [said(p).split(" %")[0].rsplit(" ", 1)[1] for p in (0.0, 0.46, 0.96, 13.4)]
    assert shown == ["0", "0.5", "1", "13"]


def test_a_grouped_saving_says_it_is_one_ranks_and_the_spread() -> None:
    """A problem found on several ranks shows its shown rank's saving; the words say it is per
    rank, and give the range when the ranks differ (the headline sums every rank's)."""
    from tilescope.report.ranks import group_across_ranks
    from tilescope.text.words import saving_text

    def on(rank: int, us: float) -> dict[str, Any]:
        return {"code": "TS102", "slug": "known-fusible-pattern", "kernels": ["MatMulV2", "Gelu"],
                "severity": "medium", "est_saving_us": us, "share_of_total": us / 2000, "rank": rank,
                "input": rank, "occurrences": 2, "message": f"rank {rank}", "saving_kind": "work"}

    differ = group_across_ranks([on(0, 40.0), on(1, 60.0), on(2, 50.0)], 3)
    assert len(differ) == 1 and differ[0]["rank"] == 1
    assert saving_text(differ[0]) == "60.0 µs (3.0 %) on rank 1 (40.0 µs to 60.0 µs per rank)"
    same = group_across_ranks([on(0, 40.0), on(1, 40.0)], 4)
    assert saving_text(same[0]) == "40.0 µs (2.0 %) per rank"
    alone = group_across_ranks([on(3, 40.0)], 4)  # found on one rank only: nothing to add
    assert saving_text(alone[0]) == "40.0 µs (2.0 %)"


def test_words_say_what_counts_and_large_times_in_seconds(real_traces: Any) -> None:
    """Issue #28 item 12: "[x565]" after a message was never explained, and a wall time printed
    as "102,401.47 ms". gpt_step_arith_591 (real): a finding that matched many times says how
    many in words; times from 10 s on are seconds."""
    from tilescope.text.words import fmt_us

    assert [fmt_us(v) for v in (102_401_470.0, 9_999_990.0, 43.7)] == ["102.40 s", "9,999.99 ms", "43.7 µs"]
    profile = load_profile(real_traces / "gpt_step_arith_591")
    report = build_report([(profile, analyze(profile))])
    text = render(report, width=None)
    many = max(report["findings"], key=lambda f: f.get("occurrences") or 1)
    assert many["occurrences"] > 1 and f"({many['occurrences']:,} occurrences)" in text
    assert "[x" not in text
