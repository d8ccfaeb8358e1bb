"""Locations point at what the author must change (#15 item 6): the `with T.Kernel(...)` line for
grid findings, the body of the hot loop (not the initialisation before it) for pipe-time findings,
in every format including SARIF. Values are read from sample_traces/kernels/flash_attention.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tilescope.analysis import analyze
from tilescope.engine import AnalysisResult
from tilescope.io.load import load_profile
from tilescope.ir.linemap import launch_sites
from tilescope.ir.locate import add_launch_lines, hot_loop, locate
from tilescope.profile import Profile

from support import REPO_ROOT

REPO = REPO_ROOT
BUNDLE = REPO / "sample_traces" / "tilelang_fa_bundle"
KERNEL = REPO / "sample_traces" / "kernels" / "flash_attention.py"
SOURCE = KERNEL.read_text(encoding="utf-8").splitlines()


def _line_of(text: str) -> int:
    """1-based line of the only source line that contains `text`."""
    hits = [i + 1 for i, line in enumerate(SOURCE) if text in line]
    assert len(hits) == 1, hits
    return hits[0]


KERNEL_LINE = _line_of("with T.Kernel(")  # 20
HOT_LOOP_LINE = _line_of("for j in T.Pipelined(")  # 46
LOOP_END = _line_of("o_ub[r, c] = o_ub[r, c] * rescale[r] + pv_ub[r, c]")  # last line of its body


@pytest.fixture(scope="module")
def fa() -> tuple[Profile, AnalysisResult]:
    p = load_profile(BUNDLE)
    return p, analyze(p)


def _source_lines(result: AnalysisResult, code: str) -> list[int]:
    f = next(f for f in result.findings if f.code == code)
    return [loc.line for loc in f.locations if loc.stage == "source" and loc.line is not None]


def test_grid_findings_point_at_the_kernel_launch_line(fa: tuple[Profile, AnalysisResult]) -> None:
    _p, r = fa
    assert KERNEL_LINE == 20
    assert _source_lines(r, "TS401") == [KERNEL_LINE]
    f = next(f for f in r.findings if f.code == "TS401")
    by_stage = {loc.stage: loc for loc in f.locations}
    line = {stage: loc.line or 0 for stage, loc in by_stage.items()}
    assert by_stage["source"].label == "T.Kernel grid (8 blocks)"
    tvm = (BUNDLE / "ir" / "tvmscript.py").read_text(encoding="utf-8").splitlines()
    tvm_line = tvm[line["tvmscript"] - 1].strip()
    assert tvm_line == 'for bx in T.thread_binding(8, thread="blockIdx.x"):'
    cc = (BUNDLE / "ir" / "kernel.cpp").read_text(encoding="utf-8").splitlines()
    entry = cc[line["ascendc"] - 1]
    assert "__global__" in entry and "flash_fwd_kernel(" in entry


def test_hot_loop_findings_point_into_the_loop_body(fa: tuple[Profile, AnalysisResult]) -> None:
    p, r = fa
    assert p.ir is not None
    loop = hot_loop(p.ir["kernels"][0])
    assert loop is not None and loop["var"] == "j" and loop["source_line"] == HOT_LOOP_LINE
    # TS201 (overlap) starts at the pipelined loop itself, then the vector work of its body
    assert _source_lines(r, "TS201")[0] == HOT_LOOP_LINE
    for code in ("TS201", "TS302", "TS402"):
        first_op = next(x for x in _source_lines(r, code) if x != HOT_LOOP_LINE)
        # `T.reduce_max(s, m_new, dim=1)`: the first vector op of the loop body, not the row_max init
        assert first_op == _line_of("T.reduce_max(s, m_new, dim=1)") == 57, code
        assert HOT_LOOP_LINE < first_op <= LOOP_END
    assert _source_lines(r, "TS203")[0] == HOT_LOOP_LINE


def test_memory_topic_picks_the_load_the_hot_loop_repeats(fa: tuple[Profile, AnalysisResult]) -> None:
    p, _r = fa
    assert p.ir is not None
    locs = locate(p.ir, "flash_fwd_kernel_mix_aic", "memory")
    first = next(loc for loc in locs if loc.stage == "source")
    # K is loaded 16 times per block, Q once: the K load first
    assert first.line == _line_of("T.copy(K[j * block_N:(j + 1) * block_N, 0:head_dim], k_l1)")
    assert first.label == "GM load K -> k_l1"


def test_sarif_annotates_the_kernel_launch_line(tmp_path: Path) -> None:
    from tilescope.cli import main

    out = tmp_path / "r.sarif"
    assert main(["analyze", str(BUNDLE), "--format", "sarif", "-o", str(out)]) == 0
    doc: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    results = doc["runs"][0]["results"]
    ts401 = next(res for res in results if res["ruleId"] == "TS401")
    region = ts401["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == KERNEL_LINE


def test_an_older_ir_json_gets_the_launch_line_from_the_kernel_copy() -> None:
    raw: dict[str, Any] = json.loads((BUNDLE / "ir" / "ir.json").read_text(encoding="utf-8"))
    k = raw["kernels"][0]
    assert k["source_launch_line"] == KERNEL_LINE  # captured since
    grid = next(lp for lp in k["loops"] if lp["kind"] == "thread_binding")
    fresh = dict(grid)
    # as ir.json 1.1 wrote it before: no launch line, the grid loop unmapped
    del k["source_launch_line"]
    grid.update(source_line=None, tvmscript_line=None)
    del grid["ascendc_lines"]
    ir = copy.deepcopy(raw)
    add_launch_lines(ir, BUNDLE / "ir", BUNDLE / "kernel" / "flash_attention.py")
    assert ir["kernels"][0]["source_launch_line"] == KERNEL_LINE
    assert next(lp for lp in ir["kernels"][0]["loops"] if lp["kind"] == "thread_binding") == fresh
    # another file (not the one captured, by sha256) leaves the IR as it was
    other = copy.deepcopy(raw)
    add_launch_lines(other, BUNDLE / "ir", REPO / "sample_traces" / "kernels" / "matmul.py")
    assert "source_launch_line" not in other["kernels"][0]


def test_source_sites_find_the_launch_in_a_fresh_capture() -> None:
    sites = launch_sites(KERNEL.read_text(encoding="utf-8"), "flash_fwd")
    assert [s.line for s in sites if s.kind == "launch"] == [KERNEL_LINE]
