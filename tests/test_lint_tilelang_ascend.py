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
