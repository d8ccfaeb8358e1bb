"""`tilescope analyze`, `rules` and `rule`: formats, selection, gates, skipped rules, crash isolation."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from tilescope.engine import discover_rules
from tilescope.report.data import validate_report

from support import REPO_ROOT, cli

REAL = REPO_ROOT.parent / "shared" / "traces" / "real"
GPT, FA = REAL / "gpt_step_arith_591", REAL / "fa_pipeutil_29"
needs_real = pytest.mark.skipif(not REAL.is_dir(), reason=f"real traces not found at {REAL}")




def test_rules_lists_every_rule(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "rules")
    assert code == 0
    for info in discover_rules():
        assert info.code in out and info.slug in out
    assert "TS501" in out and "static" in out  # the static IR rules too


def test_rule_prints_doc_and_thresholds(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "rule", "TS102")
    assert code == 0
    assert "## What it does" in out and "## Known limits" in out and "## Default thresholds" in out
    assert "`min_occurrences` = `1`" in out
    code, out2, _ = cli(capsys, "rule", "host-bound-gaps")
    assert code == 0 and "TS404" in out2
    code, _, err = cli(capsys, "rule", "TS999")
    assert code == 2 and "unknown rule" in err


@needs_real
def test_json_report_validates(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "analyze", str(GPT), "--format", "json")
    assert code == 0
    report = json.loads(out)
    validate_report(report)
    assert report["schema_version"] == "1.1"
    assert report["inputs"]["chip"]["assumptions"]
    savings = [f["est_saving_us"] for f in report["findings"]]
    assert savings == sorted(savings, reverse=True)


@needs_real
def test_select_and_ignore(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = cli(capsys, "analyze", str(GPT), "-f", "json", "--select", "TS102")
    assert {f["code"] for f in json.loads(out)["findings"]} == {"TS102"}
    _, out, _ = cli(capsys, "analyze", str(GPT), "-f", "json", "--ignore", "TS4,TS101")
    codes = {f["code"] for f in json.loads(out)["findings"]}
    assert codes == {"TS102"}


@needs_real
def test_fail_on_writes_report_then_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / "r.json"
    code, _, err = cli(capsys, "analyze", str(GPT), "-f", "json", "-o", str(out_file), "--fail-on", "high")
    assert code == 1 and "at or above high" in err
    assert json.loads(out_file.read_text())["findings"]  # written before the gate
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp file left behind
    code, _, _ = cli(capsys, "analyze", str(GPT), "-f", "json", "--select", "TS102", "--fail-on", "medium")
    assert code == 0  # TS102 findings here are low/info
    code, _, err = cli(capsys, "analyze", str(GPT), "--fail-on", "info")
    assert code == 2


@needs_real
@pytest.mark.slow  # five analyses of a real run: ~1.5 s (#23: the quick loop keeps tests under ~1 s)
def test_also_writes_each_format_from_one_analysis(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--also FORMAT=FILE`: the reports one run per format writes, from one analysis; the gate
    decides once, after every report is written."""
    one, apart = tmp_path / "one", tmp_path / "apart"
    one.mkdir()
    apart.mkdir()
    formats = ("md", "sarif", "json", "text")
    also = [a for fmt in formats for a in ("--also", f"{fmt}={one / ('r.' + fmt)}")]
    code, out, err = cli(capsys, "analyze", str(GPT), *also, "--fail-on", "high")
    assert code == 1 and "at or above high" in err
    assert "TS102" in out  # the -f text report on stdout too
    for fmt in formats:
        assert cli(capsys, "analyze", str(GPT), "-f", fmt, "-o", str(apart / f"r.{fmt}"))[0] == 0
    assert sorted(p.name for p in one.iterdir()) == ["r.json", "r.md", "r.sarif", "r.text"]
    for fmt in ("md", "sarif", "text"):
        assert (one / f"r.{fmt}").read_bytes() == (apart / f"r.{fmt}").read_bytes(), fmt
    together, alone = (json.loads((d / "r.json").read_text()) for d in (one, apart))
    assert together["findings"] and {**together, "generated_at": 0} == {**alone, "generated_at": 0}


@pytest.mark.parametrize(("args", "said"), [
    (["--also", "pdf=r.pdf"], "--also 'pdf=r.pdf': expected FORMAT=FILE with FORMAT one of text, json, md"),
    (["--also", "md"], "--also 'md': expected FORMAT=FILE"),
    (["--also", "md="], "--also 'md=': expected FORMAT=FILE"),
    (["-o", "r.md", "--also", "json=./r.md"], "r.md: two reports would be written to this one file"),
])
def test_also_refuses_before_the_analysis(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str],
    said: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(capsys, "analyze", str(REPO_ROOT / "sample_traces" / "attention_unfused"), *args)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []  # nothing written


@needs_real
def test_missing_memory_metrics_are_explained(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = cli(capsys, "analyze", str(FA), "-f", "json")
    skipped = {s["code"]: s for s in json.loads(out)["skipped"]}
    assert skipped["TS301"]["needs"] == ["aic_metrics=Memory or aic_metrics=MemoryAccess"]
    assert skipped["TS302"]["needs"] == ["aic_metrics=ResourceConflictRatio"]
    _, text, _ = cli(capsys, "analyze", str(FA))
    assert "TS301 buffer-spill-reload: needs aic_metrics=Memory" in text


@needs_real
def test_format_not_available(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def fake(name: str, *a: Any) -> Any:
        return None if name == "tilescope.report.render_html" else real(name, *a)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    code, _, err = cli(capsys, "analyze", str(GPT), "--format", "html")
    assert code == 2 and "format html not available yet" in err


@needs_real
def test_markdown_renders_from_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "analyze", str(GPT), "--format", "md")
    assert code == 0 and "TS102" in out


@needs_real
def test_crashing_rule_becomes_error_entry(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tilescope.rules.ts405_aicpu_on_hot_path as ts405

    def boom(*_a: Any) -> list[Any]:
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(ts405, "check", boom)
    code, out, _ = cli(capsys, "analyze", str(GPT), "-f", "json")
    assert code == 0
    report = json.loads(out)
    validate_report(report)
    assert [e["code"] for e in report["errors"]] == ["TS405"]
    assert "ZeroDivisionError: planted" in report["errors"][0]["message"]
    assert any(f["code"] == "TS102" for f in report["findings"])  # the run went on


@needs_real
def test_multi_rank_reports_per_rank(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tilescope.commands.analyze as cmd
    from tilescope.io.load import load_profile

    base = load_profile(GPT)
    ranks = [dataclasses.replace(base, rank=0), dataclasses.replace(base, rank=1)]
    monkeypatch.setattr(cmd, "load_profiles", lambda path, chip: ranks)
    _, out, _ = cli(capsys, "analyze", str(GPT), "-f", "json")
    report = json.loads(out)
    validate_report(report)
    assert [p["rank"] for p in report["profiles"]] == [0, 1]
    from tilescope.report.ranks import rank_findings

    ours = [f for f in report["findings"] if f.get("scope") != "cluster"]
    assert len(ours) == 10 and all(f["ranks"] == [0, 1] for f in ours)  # each problem once
    per_rank = {r: rank_findings(report["findings"], r) for r in (0, 1)}
    assert len(per_rank[0]) == len(per_rank[1]) == 10
    assert [f["est_saving_us"] for f in per_rank[0]] == [f["est_saving_us"] for f in per_rank[1]]
    # two identical ranks: no straggler; the step's HCCL tasks never overlap compute (TS605)
    assert [f["code"] for f in report["findings"] if f.get("scope") == "cluster"] == ["TS605"]
    _, text, _ = cli(capsys, "analyze", str(GPT))
    # two identical ranks read alike: one header line and one rank-table row for both
    assert "\n  ranks 0-1: " in text and "rank 0:" not in text
    assert any(line.startswith("0-1 ") for line in text.splitlines())


def test_text_summary_line() -> None:
    from tilescope.report.render_text import summary_line

    # the line reads the summary's combined, bounded totals (tilescope.summary), not the raw savings
    report = {
        "findings": [
            {"severity": "high", "est_saving_us": 1500.0},
            {"severity": "low", "est_saving_us": 340.0},
        ],
        "profiles": [
            {"summary": {"total_device_us": 8000.0, "device_time": {"wall_us": 10000.0},
                         "findings": {"est_recoverable_us": 1700.0, "est_idle_recoverable_us": 500.0}}}
        ],
    }
    assert summary_line(report) == (
        "2 findings: 1 high, 1 low — est. 1,700.0 µs (21 % of device time) + 500.0 µs of idle gaps "
        "(5 % of wall time) recoverable"
    )


@needs_real
def test_user_patterns_and_thresholds_from_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text(
        '[[pattern]]\nid = "transpose-into-bmm"\ntitle = "Transpose feeding BatchMatMul"\n'
        'replacement = "a transposed-operand BatchMatMul (adj_x2=True)"\n'
        'steps = [{ name = "t", ops = ["Transpose"] }, { name = "bmm", ops = ["BatchMatMul"] }]\n'
    )
    (tmp_path / "tilescope.toml").write_text(
        'patterns = ["mine.toml"]\nselect = ["TS102", "TS404"]\n[rules.TS404]\nmin_idle_share = 0.99\n'
    )
    code, out, _ = cli(
        capsys, "analyze", str(GPT), "-f", "json", "--config", str(tmp_path / "tilescope.toml")
    )
    assert code == 0
    report = json.loads(out)
    ids = [f["evidence"]["pattern"]["id"] for f in report["findings"] if f["code"] == "TS102"]
    assert "transpose-into-bmm" in ids
    mine = next(
        f for f in report["findings"] if f["evidence"].get("pattern", {}).get("id") == "transpose-into-bmm"
    )
    assert mine["kernels"] == ["Transpose95", "BatchMatMul96"] and mine["occurrences"] == 2
    # TS404 only reports the stalls now that the host-bound cut is 99 %
    ts404 = [f for f in report["findings"] if f["code"] == "TS404"]
    assert all("launch stall" in f["message"] for f in ts404)


def test_missing_path_is_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = cli(capsys, "analyze", str(tmp_path / "nope"))
    assert code == 2 and "no such file" in err


SAMPLE_UNFUSED = REPO_ROOT / "sample_traces" / "attention_unfused"


def test_github_summary_appends_the_markdown_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out_json = tmp_path / "r.json"
    code, _, _ = cli(
        capsys,
        "analyze",
        str(SAMPLE_UNFUSED),
        "-f",
        "json",
        "-o",
        str(out_json),
        "--github-summary",
        "--fail-on",
        "high",
    )
    assert code == 1  # the gate still trips, after the report and the summary are written
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n")  # appended, never rewritten
    assert "## tilescope performance report" in text and "### Top kernels" in text
    assert "MatMulV3" in text  # the op-type column
    validate_report(json.loads(out_json.read_text(encoding="utf-8")))
    # a second run (a second step) appends again, with --format md reusing its own Markdown
    code, out, _ = cli(capsys, "analyze", str(SAMPLE_UNFUSED), "-f", "md", "--github-summary")
    assert code == 0
    assert summary.read_text(encoding="utf-8") == text + "\n" + out.rstrip("\n") + "\n"


def test_github_summary_without_the_variable_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    out_md = tmp_path / "r.md"
    code, _, err = cli(
        capsys, "analyze", str(SAMPLE_UNFUSED), "-f", "md", "-o", str(out_md), "--github-summary"
    )
    assert code == 2 and "GITHUB_STEP_SUMMARY is not set" in err
    assert not out_md.exists()  # refused before any work


SAMPLES = REPO_ROOT / "sample_traces"


def _torch_copy(tmp_path: Path, trace: bytes | None = None) -> Path:
    """The unfused-attention sample's torch_npu directory, optionally with another trace_view.json."""
    import shutil

    src = next((SAMPLES / "attention_unfused").glob("*_ascend_pt"))
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    if trace is not None:
        (dst / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_bytes(trace)
    return dst


def test_deferred_timeline_same_report_and_rule_order(tmp_path: Path) -> None:
    from tilescope.analysis import analyze
    from tilescope.io.load import load_profile, load_profiles

    root = _torch_copy(tmp_path)
    (lazy,) = load_profiles(root, lazy_timeline=True)
    assert lazy.timeline_pending  # not looked at yet: still deferred, whether or not the read finished
    eager = load_profile(root)
    assert not eager.timeline_pending
    got, want = analyze(lazy), analyze(eager)
    # the rules reading the timeline ran last, yet the result is the eager one, in code order
    assert got.rules_run == want.rules_run == sorted(want.rules_run)
    assert [(f.code, f.kernels, f.est_saving_us) for f in got.findings] == [
        (f.code, f.kernels, f.est_saving_us) for f in want.findings
    ]
    assert lazy.timeline is not None and len(lazy.timeline.kernels) == len(eager.timeline.kernels)  # type: ignore[union-attr]


def test_broken_timeline_is_bad_input_even_when_deferred(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _torch_copy(
        tmp_path, b'[{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": "1.0", "dur": 1}, {"ph'
    )
    out = tmp_path / "report.json"
    for extra in ((), ("--select", "TS101")):  # with and without a rule that reads the timeline
        code, _, err = cli(capsys, "analyze", str(root), "--format", "json", "-o", str(out), *extra)
        assert code == 2 and "trace_view.json" in err and "byte" in err, err
        assert not out.exists()
