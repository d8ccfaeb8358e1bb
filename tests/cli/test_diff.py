"""`tilescope diff`: name normalisation, matching, noise-aware gate, and the acceptance run on the
bundled attention samples (unfused -> fused passes and shows the drop; swapped fails)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from tilescope.cli import main
from tilescope.diff import (
    KernelStats,
    RunData,
    Spread,
    compare_runs,
    finding_identity,
    match_kernels,
    normalise_kernel_name,
)

from support import REPO_ROOT

SAMPLES = REPO_ROOT / "sample_traces"
UNFUSED, FUSED = SAMPLES / "attention_unfused", SAMPLES / "attention_fused"


@pytest.mark.parametrize(("raw", "norm"), [
    ("flash_attn_fwd_kernel_mix_aic_3f2a9c1b", "flash_attn_fwd"),
    ("flash_attn_fwd_kernel_mix_aiv", "flash_attn_fwd"),
    ("main_kernel_17", "main"),
    ("hcom_allReduce__123_0_1", "hcom_allReduce"),
    ("aclnnMatmul_MatMulV3Common_MatMulV3", "aclnnMatmul_MatMulV3Common_MatMulV3"),
    ("conv_facade", "conv_facade"),  # hex-looking word without a digit is kept
    ("_123", "_123"),  # never reduced to nothing
])
def test_normalise_kernel_name(raw: str, norm: str) -> None:
    assert normalise_kernel_name(raw) == norm


def _k(name: str, op: str = "", shapes: str = "", med: float = 100.0, lo: float = 95.0, hi: float = 105.0,
       n: int = 10) -> KernelStats:
    key = (normalise_kernel_name(name), op, shapes)
    return KernelStats(key, name, op, shapes, n, med * n, Spread(med, lo, hi, n, "launches (IQR)"))


def _run(kernels: list[KernelStats], total: Spread | None = None, findings: list | None = None) -> RunData:
    t = total or Spread(sum(k.total_us for k in kernels), 0, 0, 1, "one value")
    return RunData("r", t, 1, {k.key: k for k in kernels}, {}, findings or [])


def test_matching_loosens_the_key_only_when_unambiguous() -> None:
    base = {k.key: k for k in [_k("gemm_kernel_1a2b3c4d", "MatMul", "8,8"), _k("add_1", "Add", "4"),
                               _k("mul", "Mul", "2"), _k("mul", "Mul", "3")]}
    head = {k.key: k for k in [_k("gemm_kernel_9f8e7d6c", "MatMul", "8,8"), _k("add_2", "Add", "16"),
                               _k("mul", "Mul", "5"), _k("mul", "Mul", "6")]}
    pairs_list = [(b.name if b else None, h.name if h else None, how)
                  for b, h, how in match_kernels(base, head)]
    pairs = {(b, h): how for b, h, how in pairs_list}
    assert pairs[("gemm_kernel_1a2b3c4d", "gemm_kernel_9f8e7d6c")] == "name+op+shapes"
    assert pairs[("add_1", "add_2")] == "name+op"  # shapes changed, still one Add on each side
    assert sum(1 for b, h, _ in pairs_list if b == "mul" and h is None) == 2  # ambiguous: not guessed
    assert sum(1 for b, h, _ in pairs_list if b is None and h == "mul") == 2


def test_a_change_within_the_spread_is_not_a_regression() -> None:
    base = _run([_k("a", med=100, lo=90, hi=115)], Spread(1000, 900, 1150, 2, "steps (min-max)"))
    noisy = _run([_k("a", med=110, lo=100, hi=120)], Spread(1100, 1000, 1200, 2, "steps (min-max)"))
    r = compare_runs(base, noisy, threshold_pct=5)
    assert r.total_verdict == "within noise" and r.kernels[0].verdict == "within noise"
    assert r.regressions == []
    slow = _run([_k("a", med=130, lo=125, hi=135)], Spread(1300, 1250, 1350, 2, "steps (min-max)"))
    r = compare_runs(base, slow, threshold_pct=5)
    assert r.total_verdict == "regressed" and r.kernels[0].verdict == "regressed"
    assert len(r.regressions) == 2 and "top kernel 'a'" in r.regressions[1]
    assert compare_runs(base, slow, threshold_pct=50).regressions == []  # under the threshold


def test_findings_are_matched_by_code_and_normalised_kernels() -> None:
    f1 = {"code": "TS201", "kernels": ["fa_kernel_mix_aic_0badf00d1"]}
    f2 = {"code": "TS201", "kernels": ["fa_kernel_mix_aiv"]}
    assert finding_identity(f1) == finding_identity(f2)
    r = compare_runs(_run([_k("a")], findings=[f1, {"code": "TS102", "kernels": ["x", "y"]}]),
                     _run([_k("a")], findings=[f2, {"code": "TS301", "kernels": ["a"]}]))
    assert [f["code"] for f in r.resolved] == ["TS102"] and [f["code"] for f in r.new] == ["TS301"]
    assert r.persisting == 1


def test_acceptance_unfused_to_fused_shows_the_drop_and_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(UNFUSED), str(FUSED), "--fail-on-regression", "5"]) == 0
    out = capsys.readouterr().out
    # device time per step: the union of the step's compute kernels, as every view defines it
    assert "device time per step: 75.37 ms → 34.83 ms  −40.55 ms (−53.8 %), improved" in out
    # fusion's main effect: the Cube's share of device time more than doubles (summary model shares)
    assert "busy (of device time): Cube 29 % → 64 %" in out
    assert "aclnnSoftmax_SoftmaxV2AiCore_SoftmaxV2" in out and "removed" in out
    assert "aclnnFlashAttentionScore" in out and "added" in out
    resolved = [line for line in out.splitlines() if line.strip().startswith("resolved")]
    assert any("known-fusible-pattern" in line and "BatchMatMul" in line and "SoftmaxV2" in line
               for line in resolved), resolved
    assert "regression gate (5 %, noise-aware: up to 16 vs 16 launches per kernel): passed" in out


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_acceptance_swapped_fails_the_gate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(FUSED), str(UNFUSED), "--fail-on-regression", "5"]) == 1
    captured = capsys.readouterr()
    assert "+116.4 %" in captured.out and "TRIPPED" in captured.out
    assert captured.err.startswith("tilescope: error: regression gate tripped: device time per step +116.4 %")
    # without the flag the same diff only reports
    assert main(["diff", str(FUSED), str(UNFUSED)]) == 0


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_json_and_md_formats(tmp_path: Path) -> None:
    out = tmp_path / "d.json"
    assert main(["diff", str(UNFUSED), str(FUSED), "-f", "json", "-o", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["total"]["verdict"] == "improved" and d["total"]["delta_pct"] == -53.8
    assert d["total"]["base"]["kind"] == "steps (min-max)" and d["total"]["base"]["n"] == 2
    assert d["gate"] == {"regressions": [], "fail_on_new": None, "new_findings": [], "tripped": False,
                         "samples": {"base": 16, "head": 16}, "single_sample": False}
    fa = next(k for k in d["kernels"] if k["head"] and "FlashAttentionScore" in k["head"]["name"])
    assert fa["verdict"] == "added" and fa["head"]["launches"] == 8
    assert fa["head"]["spread_lo_us"] <= fa["head"]["median_us"] <= fa["head"]["spread_hi_us"]
    assert len(d["findings"]["resolved"]) >= 1
    md = tmp_path / "d.md"
    assert main(["diff", str(UNFUSED), str(FUSED), "-f", "md", "-o", str(md)]) == 0
    text = md.read_text()
    assert text.startswith("## tilescope diff") and "\n\n✅ **regression gate" in text.split("| Cube |")[0]
    assert "**Device time per step" in text
    assert "| Cube |" in text and "- ✅ resolved" in text
    _check_rendered_md(text, d)


def _parse_md_tables(text: str) -> tuple[list[Any], list[list[list[str]]]]:
    """The tokens of GitHub-flavoured Markdown and its tables as rows of cell texts."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark", {"html": True}).enable("table").parse(text)
    tables: list[list[list[str]]] = []
    for prev, t in itertools.pairwise(tokens):
        if t.type == "table_open":
            tables.append([])
        elif t.type == "tr_open":
            tables[-1].append([])
        elif t.type == "inline" and prev.type in ("th_open", "td_open"):  # a cell's text
            tables[-1][-1].append("".join(c.content for c in t.children or []))
    return tokens, tables


def _abs_us(cell: str) -> float:
    """`−8,270.7\u00a0µs` or `+44.88\u00a0ms` as its size in µs."""
    value, unit = cell.split("\u00a0")
    v = abs(float(value.replace(",", "").replace("−", "").replace("+", "").replace("±", "")))
    return v * 1000 if unit == "ms" else v


def _check_rendered_md(text: str, d: dict[str, Any]) -> None:
    """Issue #28 item 9, on the rendered Markdown: the gate's verdict is the first paragraph; the
    kernel table keeps the Δ columns in view (no column no row fills), biggest changes first; no
    finding names an empty kernel."""
    tokens, tables = _parse_md_tables(text)
    paragraphs = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "paragraph_open"]
    assert paragraphs[0].startswith("✅ **regression gate") and paragraphs[0].endswith("passed**")
    kernels = next(t for t in tables if t[0][0] == "kernel")
    header, rows = kernels[0], kernels[1:]
    assert header[:4] == ["kernel", "verdict", "Δ per step", "Δ median"] and "pipe changes" not in header
    assert all(any(row[i].strip() for row in rows) for i in range(len(header)))  # no empty column
    # beyond the threshold first, then within it; each by the size of its change
    deltas = [(row[1].startswith("within"), -_abs_us(row[2])) for row in rows]
    assert deltas == sorted(deltas) and not deltas[0][0]
    biggest = max((k for k in d["kernels"] if not k["verdict"].startswith("within")),
                  key=lambda k: abs(k["delta_us"]))
    assert rows[0][0].startswith((biggest["head"] or biggest["base"])["name"])
    assert _abs_us(rows[0][2]) == pytest.approx(abs(biggest["delta_us"]), abs=0.05)
    assert ": —" not in text  # a finding on no kernel (TS404) names none


def test_diff_of_saved_json_reports(tmp_path: Path) -> None:
    from tilescope.diff import analyze_path

    try:
        from tilescope.report import render_json
    except ImportError:
        pytest.skip("render_json not installed")
    paths = []
    for name, src in (("base.json", UNFUSED), ("head.json", FUSED)):
        report = analyze_path(src)
        if "summary" not in report:
            pytest.skip("build_report not installed")
        paths.append(tmp_path / name)
        paths[-1].write_text(render_json.render(report))
    assert main(["diff", str(paths[0]), str(paths[1]), "--fail-on-regression", "5"]) == 0
    assert main(["diff", str(paths[1]), str(paths[0]), "--fail-on-regression", "5"]) == 1  # total +116 %


def test_hostile_names_in_diff_output() -> None:
    from tilescope.commands.diff import render_md, render_text

    evil = "<img src=x onerror=alert(1)>|@org/team\x1b[2J"
    r = compare_runs(_run([_k(evil)]), _run([_k(evil, med=300, lo=290, hi=310)]), 5)
    text = render_text(r)
    assert "\x1b" not in text
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(render_md(r))
    assert "<img" not in rendered and "<a " not in rendered
    assert "@org/team" not in rendered.split("<code>")[0]  # outside code spans the mention is broken


def test_fail_on_new_gates_only_findings_the_base_did_not_have() -> None:
    """Issue #15 item 8: `analyze --fail-on high` fails every PR on findings that already existed
    (the FA bundle has 4 high); `diff --fail-on-new high` trips only on what the change brought:
    a new finding at or above the severity, or an old one raised to it."""
    old = {"code": "TS201", "severity": "high", "kernels": ["fa_kernel_mix_aic_0badf00d1"]}
    same = {**old, "kernels": ["fa_kernel_mix_aiv"]}  # the same problem after a rebuild
    raised = {"code": "TS302", "severity": "high", "kernels": ["fa"]}
    low = {"code": "TS511", "severity": "low", "kernels": ["fa"]}
    base = _run([_k("a")], findings=[old, {**raised, "severity": "medium"}])
    r = compare_runs(base, _run([_k("a")], findings=[same, raised, low]), fail_on_new="high")
    assert [f["code"] for f in r.new_over_gate] == ["TS302"] and r.tripped
    assert compare_runs(base, _run([_k("a")], findings=[same, low]), fail_on_new="high").new_over_gate == []
    r = compare_runs(base, _run([_k("a")], findings=[same, low]), fail_on_new="low")
    assert [f["code"] for f in r.new_over_gate] == ["TS511"]
    assert compare_runs(base, _run([_k("a")], findings=[same, raised])).new_over_gate == []  # gate off


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_fail_on_new_on_the_fa_samples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fa = SAMPLES / "tilelang_fa_bundle"
    # the bundle against itself: its 4 high findings are old, the gate passes
    md = tmp_path / "same.md"
    assert main(["diff", str(fa), str(fa), "--fail-on-new", "high", "-f", "md", "-o", str(md)]) == 0
    # the gates' verdicts lead the comment, each on its own line (Markdown-escaped)
    gates = md.read_text().split("**Device time per step")[0]
    new_gate = "✅ **new-findings gate \\(high and above, new since the base\\)\\: passed**"
    assert gates.rstrip().endswith(new_gate)
    assert "✅ **regression gate" in gates
    # against the msprof-op profile (no IR, fewer rules ran): the bundle's high findings are new
    out = tmp_path / "new.json"
    assert main(["diff", str(SAMPLES / "tilelang_fa_msprof_op"), str(fa), "--fail-on-new", "high",
                 "-f", "json", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    # TS401 is new too, but medium: the bundle's core count is the chip's default (issue #24)
    assert "new-findings gate tripped" in err and "TS203" in err and "TS401" not in err
    gate = json.loads(out.read_text())["gate"]
    assert gate["tripped"] and gate["fail_on_new"] == "high" and gate["regressions"] == []
    assert {f["severity"] for f in gate["new_findings"]} == {"high"}
    assert main(["diff", str(fa), str(fa), "--fail-on-new", "severe"]) == 2


def test_bad_usage_exits_2(tmp_path: Path) -> None:
    assert main(["diff", str(tmp_path / "missing"), str(FUSED)]) == 2
    assert main(["diff", str(UNFUSED), str(FUSED), "--format", "xml"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["diff", str(bad), str(FUSED)]) == 2


def test_markdown_spread_cells_do_not_wrap() -> None:
    """Issue #15 item 5: `median [IQR] (n=…)` cells wrapped over five lines in a PR comment."""
    from tilescope.commands.diff import render_md

    r = compare_runs(_run([_k("k1")]), _run([_k("k1", med=300, lo=290, hi=310)]), 5)
    rows = [ln for ln in render_md(r).splitlines() if ln.startswith("| `k1`")]
    assert rows
    cells = [c.strip() for c in rows[0].strip("|").split(" | ")]
    spreads = [c for c in cells if "(n=" in c]
    assert len(spreads) == 2 and all(" " not in c and "\u00a0µs" in c for c in spreads), spreads
