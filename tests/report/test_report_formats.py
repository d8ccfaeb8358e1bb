"""Every format renders the same findings (same codes, same counts), and output files are atomic."""

from __future__ import annotations

import contextlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from tilescope.cli import main
from tilescope.report import render_html, render_md, render_sarif

from support import REPO_ROOT
from support.report_data import make_bundle, real_report, sample_report

ROOT = REPO_ROOT
SAMPLES = ROOT / "sample_traces"


def _codes_per_format(report: dict) -> dict[str, Counter[str]]:
    md = render_md.render(report)
    html = render_html.render(report)
    sarif = json.loads(render_sarif.render(report))
    out = {
        "report": Counter(f["code"] for f in report["findings"]),
        # a finding's block (<summary>) or, past the Markdown budget, its line (- ...)
        "md": Counter(re.findall(r"^(?:<summary>|- ).*?<code>(TS\d+)</code>", md, re.MULTILINE)),
        "html": Counter(re.findall(r'<details class="finding \w+" id="finding-\d+" data-code="(TS\d+)"',
                                   html)),
        "sarif": Counter(r["ruleId"] for r in sarif["runs"][0]["results"]),
    }
    try:
        from tilescope.report import render_json
    except ImportError:
        return out
    out["json"] = Counter(f["code"] for f in json.loads(render_json.render(report))["findings"])
    return out


def test_same_findings_in_every_format_fixture(tmp_path: Path) -> None:
    counts = _codes_per_format(sample_report(make_bundle(tmp_path / "b")))
    assert counts["report"] == Counter({"TS101": 1, "TS201": 1, "TS402": 2})
    assert all(c == counts["report"] for c in counts.values()), counts


def test_same_findings_in_every_format_real_pipeline() -> None:
    report = real_report()
    if report is None:
        pytest.skip("build_report or the attention sample is not available")
    counts = _codes_per_format(report)
    assert sum(counts["report"].values()) > 5
    assert all(c == counts["report"] for c in counts.values()), counts


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_failed_render_leaves_the_old_file_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tilescope.commands import diff as diff_cmd

    out = tmp_path / "diff.md"
    out.write_text("previous report\n")

    def boom(_result: object) -> str:
        raise RuntimeError("renderer crashed half-way")

    monkeypatch.setitem(diff_cmd.RENDERERS, "md", boom)
    with pytest.raises(RuntimeError):
        main(["diff", str(SAMPLES / "attention_unfused"), str(SAMPLES / "attention_fused"), "--format", "md",
              "-o", str(out)])
    assert out.read_text() == "previous report\n"
    assert [p.name for p in tmp_path.iterdir()] == ["diff.md"]  # no temp file left behind
    monkeypatch.undo()
    args = ["diff", str(SAMPLES / "attention_unfused"), str(SAMPLES / "attention_fused"),
            "-f", "md", "-o", str(out)]
    assert main(args) == 0
    assert out.read_text().startswith("## tilescope diff")


def test_analyze_writes_atomically_when_available(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    if importlib.util.find_spec("tilescope.commands.analyze") is None:
        pytest.skip("analyze command not installed yet")
    out = tmp_path / "report.html"
    out.write_text("previous\n")

    def boom(report: dict, **_opts: object) -> str:
        raise RuntimeError("renderer crashed")

    monkeypatch.setattr(render_html, "render", boom)
    with contextlib.suppress(RuntimeError):  # raising or exiting non-zero are both fine
        main(["analyze", str(SAMPLES / "attention_fused"), "--format", "html", "-o", str(out)])
    assert out.read_text() == "previous\n"
