"""Issue #26 item 8 (two of its texts): advice in the kernel's own terms, and no request for a
metric group that was collected."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from tilescope.analysis import analyze
from tilescope.io.load import load_profile
from tilescope.report.data import build_report

from support import SAMPLES, cli


def test_ts102_does_not_offer_addmm_to_a_kernel_that_is_addmm(real_traces: Path) -> None:
    # torch_npu text export: aclnnAddmm_MatMulCommon_MatMulV2 (torch.addmm: the bias is already in
    # the matmul) followed by Relu. Only the activation is left to fuse.
    rank0 = real_traces / "torch_2rank_pipeutil_text" / "rank0_ascend_pt"
    if not rank0.is_dir():
        pytest.skip("torch_2rank_pipeutil_text not in the real traces")
    pr = load_profile(rank0)
    found = [f for f in analyze(pr).findings if f.code == "TS102"]
    (f,) = [f for f in found if "Relu" in " ".join(f.kernels)]
    matmuls = {k for k in f.kernels if "MatMul" in k}
    assert matmuls == {"aclnnAddmm_MatMulCommon_MatMulV2"}
    assert f.evidence["pattern"]["id"] == "matmul-activation"
    for text in (f.message, f.recommendation):
        assert "addmm" not in text.lower() and "bias" not in text.lower()
        assert "activation" in text


def test_ts102_still_offers_the_bias_epilogue_where_the_bias_is_a_kernel(real_traces: Path) -> None:
    # gpt_step_arith_591: MatMul -> Add -> FastGelu, MatMul -> Add: the bias add is its own kernel
    pr = load_profile(real_traces / "gpt_step_arith_591" / "kernel_details.csv")
    found = [f for f in analyze(pr).findings if f.code == "TS102"]
    epilogue = [f for f in found if f.evidence["pattern"]["id"] == "matmul-epilogue"]
    assert len(epilogue) == 2 and all("torch.addmm" in f.recommendation for f in epilogue)


def _vector_only_msprof_op(tmp_path: Path) -> Path:
    """The bundled msprof op run with its Cube side taken out: a Vector-only kernel, all seven
    metric groups collected (PipeUtilization.csv without aic_ columns, as msprof op writes it
    for a kernel that runs on AIV only)."""
    src = next((SAMPLES / "tilelang_fa_msprof_op").glob("OPPROF_*"))
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    for f in dst.glob("*.csv"):
        if f.name.startswith("OpBasicInfo"):
            continue
        t = pd.read_csv(f, dtype=str, keep_default_na=False)
        t = t[t["sub_block_id"].str.startswith("vector")]
        t[[c for c in t.columns if not c.startswith("aic_")]].to_csv(f, index=False)
    return dst


def test_msprof_op_with_pipeutilization_is_not_told_to_collect_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _vector_only_msprof_op(tmp_path)
    pr = load_profile(run)
    assert "PipeUtilization" in pr.source.metric_groups
    report = build_report(pr, analyze(pr))
    (ts201,) = [s for s in report["skipped"] if s["code"] == "TS201"]
    assert ts201["needs"] == [
        "Cube-side PipeUtilization data (aic_cube_ratio): PipeUtilization was collected, no kernel ran "
        "on the Cube"
    ]
    assert not any("--aic-metrics=PipeUtilization" in n for s in report["skipped"] for n in s["needs"])
    code, out, _ = cli(capsys, "analyze", str(run), "--width", "300")
    assert code == 0 and "TS201 cube-vector-imbalance: needs Cube-side PipeUtilization data" in out
