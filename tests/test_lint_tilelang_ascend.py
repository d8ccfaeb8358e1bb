"""`tilescope lint` on tilelang-ascend (A2/A3 = 910B) kernels, lowered by tilelang-ascend 0.1.4 in
its own interpreter (issue #14).

The lowering tests need that interpreter — `bash scripts/setup-tilelang-ascend.sh` (an emulated
arm64 root on x86_64, ~10 minutes) — and skip without it; the exit-3 contract is tested always.
Real kernels are read from ../shared/kernels/real (never copied here); the project's own are in
sample_traces/kernels/a2/. Footprints are checked against counts by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analyzer.cli import main
from analyzer.ir.foreign import find_interpreter
from tests.conftest import REPO_ROOT

REAL = REPO_ROOT.parent / "shared" / "kernels" / "real" / "tilelang_ascend"
OWN = REPO_ROOT / "sample_traces" / "kernels" / "a2"

needs_stack = pytest.mark.skipif(
    find_interpreter() is None,
    reason="tilelang-ascend is not set up here (bash scripts/setup-tilelang-ascend.sh)",
)


def _lint_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["lint", *args, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_missing_stack_is_exit_3_naming_the_dialect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TILESCOPE_ASCEND_ROOT", str(tmp_path / "none"))
    code = main(["lint", str(OWN / "gemm.py")])
    err = capsys.readouterr().err
    assert code == 3
    assert "tilelang-ascend (A2/A3, 910B) (line 28: is_npu=" in err
    assert "scripts/setup-tilelang-ascend.sh" in err
    assert "Traceback" not in err


# (kernel reference, -p parameters): the project's own kernels and tile-ai's published examples,
# each lowered as published (module-level NPU code never runs; the file's own call gives defaults)
KERNELS: dict[str, tuple[Path, str, dict[str, Any]]] = {
    "gemm": (OWN / "gemm.py", "", {}),
    "gemm_persistent": (OWN / "gemm_persistent.py", "", {}),
    "batch_gemm": (OWN / "batch_gemm.py", "", {}),
    "vector_add": (OWN / "vector_add.py", "", {}),
    "row_max": (OWN / "row_max.py", "", {}),
    "silu": (REAL / "activation__silu.py", "", {}),
    "layer_norm": (REAL / "normalization__layer_norm.py", "", {}),
    "rms_norm": (REAL / "normalization__rms_norm.py", ":_rms_norm", {}),
    "online_softmax": (REAL / "softmax__example_online_softmax.py", "", {}),
    "fa_bhsd": (REAL / "flash_attention__flash_attn_bhsd.py", "", {}),
    "fa_bshd_pipeline": (REAL / "pipeline__flash_attn_bshd_pipeline.py", "", {}),
    "fa_bshd_developer": (REAL / "developer_mode__flash_attn_bshd_developer.py", "", {}),
    "conv_gemm": (
        REAL / "convolution__example_convolution.py",
        "",
        {"M": 128, "N": 256, "K": 128, "block_M": 128, "block_N": 128, "block_K": 128},
    ),
}


@pytest.fixture(scope="module")
def lowered() -> dict[str, Any]:
    """Every kernel above lowered by one worker (one import of tilelang-ascend: ~20-40 s emulated)."""
    from analyzer.chips import get_chip
    from analyzer.ir.capture import capture_many, worker_runs
    from analyzer.ir.foreign import require_interpreter, run_jobs

    present = {k: v for k, v in KERNELS.items() if v[0].is_file()}
    jobs = [worker_runs(f"{path}{sel}", params) for path, sel, params in present.values()]
    answers = run_jobs(require_interpreter("tests"), jobs)
    chip = get_chip("910B2")
    return {
        key: capture_many(f"{path}{sel}", [params], chip, answer)[0]
        for (key, (path, sel, params)), answer in zip(present.items(), answers, strict=True)
    }


def _footprint(cap: Any) -> dict[str, int]:
    (kernel,) = cap.ir["kernels"]
    return {hw: fp["bytes"] for hw, fp in kernel["footprint"].items()}
