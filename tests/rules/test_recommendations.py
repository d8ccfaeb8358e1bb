"""Recommendations conditioned on the evidence (#15 item 7): a rule's `refine` runs after every rule
(tilescope.engine), so its advice follows what the author asked for and what other findings say.
Values from sample_traces/tilelang_fa_bundle, sample_traces/attention_fused and the real profiles."""

from __future__ import annotations

from typing import Any

import pytest

from tilescope.analysis import analyze
from tilescope.engine import AnalysisResult
from tilescope.io.load import load_profile
from tilescope.profile import Profile

from support import REPO_ROOT

REPO = REPO_ROOT
BUNDLE = REPO / "sample_traces" / "tilelang_fa_bundle"


@pytest.fixture(scope="module")
def fa() -> tuple[Profile, AnalysisResult]:
    p = load_profile(BUNDLE)
    return p, analyze(p)

def _finding(r: AnalysisResult, code: str, kernel: str | None = None) -> Any:
    return next(f for f in r.findings if f.code == code and (kernel is None or f.kernels[0] == kernel))


def test_ts201_says_the_requested_stages_were_not_applied(fa: tuple[Profile, AnalysisResult]) -> None:
    _p, r = fa
    ts504 = _finding(r, "TS504")
    assert ts504.evidence["num_stages"] == 2 and ts504.evidence["loop"] == "j"
    for code in ("TS201", "TS203"):
        rec = _finding(r, code).recommendation
        assert "num_stages >= 2" not in rec and "more stages" not in rec, code
        assert rec.startswith("The kernel already asks for num_stages=2 on loop j, but the stages were not")
        assert f"TS504: {ts504.evidence['reason']}" in rec
        assert _finding(r, code).evidence["explained_by"] == "TS504"


def test_ts201_without_ts504_keeps_to_what_the_author_asked(fa: tuple[Profile, AnalysisResult]) -> None:
    from tilescope.config import Config
    from tilescope.engine import run_rules

    p, _r = fa
    r = run_rules(p, Config(select=["TS201"]))  # TS504 not run: nothing says the stages failed
    rec = _finding(r, "TS201").recommendation
    assert rec.startswith("The kernel already asks for num_stages=2 on loop j: more stages alone")
    assert "num_stages >= 2" not in rec


def test_ts402_names_block_5_slow_on_every_sub_core(fa: tuple[Profile, AnalysisResult]) -> None:
    p, r = fa
    f = _finding(r, "TS402")
    assert f.evidence["slow_blocks"] == {"5": ["cube0", "vector0", "vector1"]}
    assert f.message.endswith("(slow: block 5)")
    assert f.recommendation.startswith(
        "Block 5 is slow on every sub-core (cube0, vector0, vector1): its work is the problem, not the split"
    )
    assert "split each tile between" not in f.recommendation
    # the blocks table: block 5 is 40.3-40.6 µs on each sub-core, every other block 29.7-31.3 µs
    assert p.blocks is not None
    b5 = p.blocks[p.blocks["block_id"] == 5]
    assert b5["aic_time_us"].max() == pytest.approx(40.639, abs=1e-3)


def test_library_kernels_inside_a_fusion_chain_point_at_ts102() -> None:
    p = load_profile(REPO / "sample_traces" / "attention_fused")
    r = analyze(p)
    chains = [f for f in r.findings if f.code == "TS102"]
    add = _finding(r, "TS203", "aclnnAdd_AddAiCore_Add")
    assert any("aclnnAdd_AddAiCore_Add" in f.kernels for f in chains)
    assert add.evidence["library_kernel"] is True and add.evidence["explained_by"] == "TS102"
    assert add.recommendation.startswith("aclnnAdd_AddAiCore_Add is a CANN built-in kernel inside ")
    assert "which TS102 already reports" in add.recommendation
    assert "T.Pipelined" not in add.recommendation and "tiles" not in add.recommendation.split(":")[0]


def test_a_library_kernels_grid_is_not_its_users_to_change() -> None:
    # before: TS401 told aclnnCat / aclnnMatmul to launch more blocks, as it would the author's kernel
    r = analyze(load_profile(REPO / "sample_traces" / "attention_fused"))
    for kernel in ("aclnnCat_ConcatDAiCore_ConcatD", "aclnnMatmul_MatMulV3Common_MatMulV3"):
        f = _finding(r, "TS401", kernel)
        assert f.evidence["library_kernel"] is True and f.evidence["explained_by"] == "TS102"
        assert f.recommendation.startswith(f"{kernel} is a CANN built-in kernel inside ")


REAL = REPO.parent / "shared" / "traces" / "real"


@pytest.mark.skipif(not (REAL / "fa_pipeutil_29").is_dir(), reason=f"real traces not found at {REAL}")
def test_library_kernel_outside_a_chain_is_not_told_to_retile() -> None:
    r = analyze(load_profile(REAL / "fa_pipeutil_29"))
    mm = _finding(r, "TS202", "aclnnMatmul_MatMulCommon_MatMulV2")
    assert mm.evidence["library_kernel"] is True and "explained_by" not in mm.evidence
    assert mm.recommendation.startswith("aclnnMatmul_MatMulCommon_MatMulV2 is a CANN built-in kernel: its")
    assert "T.Pipelined" not in mm.recommendation


@pytest.mark.skipif(not (REAL / "tilelang_sigmoid_app").is_dir(), reason=f"real traces not found at {REAL}")
def test_the_authors_kernel_keeps_the_tiling_advice() -> None:
    r = analyze(load_profile(REAL / "tilelang_sigmoid_app"))
    f = _finding(r, "TS202", "main_kernel")
    assert "library_kernel" not in f.evidence and "T.Pipelined" in f.recommendation


def test_a_crashing_refine_leaves_the_finding_and_reports_the_error(
    fa: tuple[Profile, AnalysisResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tilescope.rules.ts402_block_load_imbalance as ts402

    def broken(*_a: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(ts402, "refine", broken, raising=False)
    p, _r = fa
    r = analyze(p)
    assert _finding(r, "TS402").recommendation.startswith("Block 5")  # as check made it
    assert [e.message for e in r.errors if e.code == "TS402"] == [
        "rule TS402 (block-load-imbalance) refine crashed and was skipped: RuntimeError: boom"
    ]


def test_ts402_advice_follows_which_sub_blocks_are_slow() -> None:
    from tilescope.rules.ts402_block_load_imbalance import _recommendation

    subs = {"5": {"cube0", "vector0", "vector1"}, "6": {"cube0", "vector0", "vector1"}}
    whole = _recommendation({"5": ["cube0", "vector0", "vector1"]}, subs, idle=False)
    assert whole.startswith("Block 5 is slow on every sub-core") and "split each tile" not in whole
    one_vector = _recommendation({"6": ["vector0"]}, subs, idle=False)
    assert one_vector.startswith("Slow: block 6 (vector0). Balance the work: split each tile between both")
    cube_only = _recommendation({"5": ["cube0"]}, subs, idle=False)
    assert cube_only.startswith("Slow: block 5 (cube0).") and "split each tile" not in cube_only
