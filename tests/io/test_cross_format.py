"""One profile rendered in every format shows the same numbers with the same rounding.

The JSON report is the reference; the terminal, Markdown, HTML, SARIF, the dashboard's overview and
`diff` must each print its device time, unit busy shares, closing headline and every finding's
saving exactly as `tilescope.text.words` formats them from the JSON values.
"""

from __future__ import annotations

import html as html_lib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tilescope.analysis import analyze
from tilescope.io.load import load_profile
from tilescope.report import render_html, render_json, render_md, render_sarif, render_text
from tilescope.report.data import build_report
from tilescope.text.words import (
    chip_text,
    fmt_pct,
    fmt_us,
    headline,
    launches_text,
    recoverable_text,
    saving_text,
    speed_of_light_text,
    units_text,
)

from support import REPO_ROOT

SAMPLES = REPO_ROOT / "sample_traces"


def _md_visible(text: str) -> str:
    """Markdown as rendered: backslash escapes dropped, HTML entities decoded."""
    return html_lib.unescape(re.sub(r"\\(.)", r"\1", text))


def _visible(page: str) -> str:
    """The HTML page's text as a reader sees it (tags dropped, entities decoded)."""
    return html_lib.unescape(re.sub(r"<[^>]+>", "", page))


@pytest.fixture(scope="module", params=["tilelang_fa_bundle", "attention_unfused"])
def rendered(request: pytest.FixtureRequest) -> dict[str, Any]:
    profile = load_profile(SAMPLES / request.param)
    report = build_report(profile, analyze(profile))
    from tilescope.dashboard.data import make_entry
    from tilescope.dashboard.views import overview_kpis

    entry = make_entry("p0", "sample", profile, report)
    kpis = json.dumps([k.to_plotly_json() for k in overview_kpis(entry)], default=str, ensure_ascii=False)
    # diff of the run against itself: the same summary on both sides
    from tilescope.commands.diff import render_text as diff_text
    from tilescope.diff import compare_runs, run_from_report

    run = run_from_report({**report, "_profile": profile}, "run")
    import numpy as np

    from tilescope.summary import device_time

    k = profile.kernels
    steps = k["step_id"].dropna().unique() if "step_id" in k else np.array([])
    per_step = (
        float(np.median([device_time(k[k["step_id"] == s]).device_us for s in steps]))
        if len(steps) > 1
        else report["summary"]["total_device_us"]
    )
    return {
        "per_step_us": per_step,
        "diff": diff_text(compare_runs(run, run)),
        "report": json.loads(render_json.render(report)),
        "text": render_text.render(report, width=400),
        "md": _md_visible(render_md.render(report)),
        "html": _visible(render_html.render(report)),
        "sarif": render_sarif.render(report),
        "dashboard": kpis,
    }


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_device_time_is_one_value(rendered: dict[str, Any]) -> None:
    summary = rendered["report"]["summary"]
    device = fmt_us(summary["total_device_us"])
    for fmt in ("text", "md", "html", "dashboard"):
        assert device in rendered[fmt], fmt
    # diff compares device time per step: the median over steps of the same union, per step
    assert f"device time per step: {fmt_us(rendered['per_step_us'])}" in rendered["diff"]
    assert summary["device_time"]["device_us"] == summary["total_device_us"]
    chip = chip_text(rendered["report"]["inputs"]["chip"])
    counts = launches_text(summary)  # launches and distinct kernels, worded alike
    for fmt in ("text", "md", "html"):
        assert chip in rendered[fmt], fmt
        assert counts in rendered[fmt], fmt


def test_unit_shares_are_one_value(rendered: dict[str, Any]) -> None:
    summary = rendered["report"]["summary"]
    line = units_text(summary)
    assert line and line in rendered["text"] and line in rendered["md"]
    sol = speed_of_light_text(summary)
    assert sol and all(sol in rendered[fmt] for fmt in ("text", "md", "html"))
    for key, label in (("cube", "Cube"), ("vector", "Vector")):
        share = fmt_pct(summary["shares"][key], 0)
        assert f"{label} {share}" in rendered["html"]
        assert f"{label} {share} → {share}" in rendered["diff"]


def test_headline_and_savings_are_one_value(rendered: dict[str, Any]) -> None:
    report = rendered["report"]
    closing = headline(report["findings"], [p["summary"] for p in report["profiles"]])
    for fmt in ("text", "md", "html"):
        assert closing in rendered[fmt], fmt
    totals, summary = report["summary"]["findings"], report["summary"]
    kpi = recoverable_text(totals["est_recoverable_us"], totals["est_idle_recoverable_us"],
                           device_total=summary["total_device_us"], wall_us=summary["device_time"]["wall_us"])
    assert kpi and kpi in rendered["dashboard"] and kpi in closing
    sarif = json.loads(rendered["sarif"])["runs"][0]["results"]
    for f in report["findings"]:
        text = saving_text(f)
        for fmt in ("text", "md", "html"):
            assert text in rendered[fmt], (fmt, f["code"], text)
        assert any(text in r["message"]["text"] for r in sarif), (f["code"], text)


def test_each_kind_of_saving_is_shown_in_its_own_unit(real_traces: Path) -> None:
    """Issue #28 item 3. gpt_step_arith_591 (real): its HIGH finding is an idle gap (TS404, 116 ms
    of wall time) and the kernels' findings save 2,450 µs; the dashboard's severity chart and its
    KPI once said `est. 0.0 µs` and `2,450.1 µs` for them. msprof_db_2023's one finding is idle
    time only: its headline said `est. 0.0 µs (0 % of device time) + 2,408.7 µs of idle gaps`."""
    from tilescope.dashboard import figures as F
    from tilescope.dashboard.data import make_entry
    from tilescope.dashboard.views import overview_kpis

    profile = load_profile(real_traces / "gpt_step_arith_591")
    report = build_report(profile, analyze(profile))
    totals, summary = report["summary"]["findings"], report["summary"]
    high = [f for f in report["findings"] if f["severity"] == "high"]
    assert [(f["code"], f["saving_kind"]) for f in high] == [("TS404", "idle")]
    idle = fmt_us(totals["saving_by_severity"]["high"]["idle_us"])
    assert idle == fmt_us(high[0]["est_saving_us"]) and idle.endswith(" ms")
    bar = F.findings_by_severity_figure(report["findings"], totals).to_dict()["data"][0]
    assert bar["text"][0] == f"1 · est. {idle} of idle gaps"
    assert not any("0.0 µs" in t for t in bar["text"])
    kpis = json.dumps([k.to_plotly_json() for k in overview_kpis(make_entry("p0", "s", profile, report))],
                      default=str, ensure_ascii=False)
    share = fmt_pct(totals["est_recoverable_share"], 0)
    device = f"{fmt_us(totals['est_recoverable_us'])} ({share} of device time)"
    both = f"{device} + {fmt_us(totals['est_idle_recoverable_us'])} of idle gaps"
    assert both in kpis and both in headline(report["findings"], [summary])
    only_idle = load_profile(real_traces / "msprof_db_2023")
    idle_report = build_report(only_idle, analyze(only_idle))
    line = render_text.render(idle_report).splitlines()[-1]
    gaps = fmt_us(idle_report["summary"]["findings"]["est_idle_recoverable_us"])
    assert line == f"1 finding: 1 low — est. {gaps} of idle gaps (2 % of wall time) recoverable"
    assert "0.0 µs" not in line


def test_partial_pmu_coverage_is_said_in_every_format(real_traces: Path) -> None:
    """gpt_step_arith_591 (real, torch_npu): launches with pipe metrics cover 94.12 % of the compute
    kernels' time, so every view qualifies the busy shares alike (the HTML header once left it out)."""
    profile = load_profile(real_traces / "gpt_step_arith_591")
    report = build_report(profile, analyze(profile))
    summary = report["summary"]
    assert summary["units"]["cube"]["coverage"] == pytest.approx(0.9412, abs=1e-4)
    said = " (measured on 94 % of it)"
    assert units_text(summary).endswith(f"of device time{said}")
    assert said in render_text.render(report, width=400)
    assert said in _md_visible(render_md.render(report))
    assert said in _visible(render_html.render(report))
