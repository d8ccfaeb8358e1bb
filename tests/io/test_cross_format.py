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
    totals = report["summary"]["findings"]
    kpi = f"{fmt_us(totals['est_recoverable_us'])} ({fmt_pct(totals['est_recoverable_share'], 0)})"
    assert kpi in rendered["dashboard"]
    sarif = json.loads(rendered["sarif"])["runs"][0]["results"]
    for f in report["findings"]:
        text = saving_text(f)
        for fmt in ("text", "md", "html"):
            assert text in rendered[fmt], (fmt, f["code"], text)
        assert any(text in r["message"]["text"] for r in sarif), (f["code"], text)


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
