"""Upstream tilelang 950 kernels (../shared/kernels/real/tilelang_950, read-only, never copied here)
lint by default on their own target, the 950: no capacity finding on a kernel that fits it, and
the hand-counted flash-attention footprint of that folder's README.

Two files are newer than tilelang 0.1.15 (README): `flash_attention_core.py` imports `simd` from
`tilelang.language` and passes a fourth argument to `vexpdif`; `example_gemm_l0.py` takes
`alloc_l0a` & co. from `tilelang.language`. They are linted with those two renames bridged for the
duration of the test (the footprints do not depend on them). `readme_matmul_relu.py` runs NPU code at
module level (torch_npu, `device="npu"`), so it cannot be imported here at all.
"""

from __future__ import annotations

import json
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tilescope.chips import get_chip
from tilescope.cli import main
from tilescope.engine import run_rules
from tilescope.profile import Profile, SourceInfo

from support import REPO_ROOT

REAL_950 = REPO_ROOT.parent / "shared" / "kernels" / "real" / "tilelang_950"
CAPACITY = {"TS500", "TS501"}

pytestmark = pytest.mark.tilelang


def _kernel(name: str) -> Path:
    path = REAL_950 / name
    if not path.is_file():
        pytest.skip(f"real 950 kernels not available at {REAL_950}")
    pytest.importorskip("tilelang")
    return path


@pytest.fixture
def newer_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """tilelang.language as the upstream examples' newer tilelang has it: the Ascend dialect's names
    it lacks (allocators, dual_copy, ...) and `simd` (the fourth `vexpdif` argument dropped)."""
    import tilelang.ascend.language as ascend
    import tilelang.language as language

    simd = types.ModuleType("simd")
    simd.__dict__.update(ascend.simd.__dict__)
    vexpdif = ascend.simd.vexpdif

    def vexpdif4(src0: Any, src1: Any, mask: Any = None, *_: Any) -> Any:
        return vexpdif(src0, src1, mask)

    simd.vexpdif = vexpdif4  # type: ignore[attr-defined]
    monkeypatch.setattr(language, "simd", simd, raising=False)
    for name in dir(ascend):  # alloc_l0a, alloc_l1, dual_copy, ...: only names tilelang.language lacks
        if not name.startswith("_") and not hasattr(language, name):
            monkeypatch.setattr(language, name, getattr(ascend, name), raising=False)
    yield


def _lint_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["lint", *args, "--format", "json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_vecadd_lints_clean_on_its_target(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _lint_json(capsys, str(_kernel("example_vecadd.py")), "-p", "N=1048576")
    assert doc["chip"] == "950" and doc["lowered"] is True
    assert doc["kernels"][0]["footprint"]["UB"]["bytes"] == 3 * 2 * 8192 * 4  # a, b, c x 2 versions
    assert doc["findings"] == []


@pytest.mark.usefixtures("newer_api")
def test_gemm_l0_lints_clean_on_its_target(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _lint_json(capsys, f"{_kernel('example_gemm_l0.py')}:gemm")
    assert doc["chip"] == "950" and doc["lowered"] is True
    fp = doc["kernels"][0]["footprint"]
    assert fp["L0C"]["bytes"] == 256 * 256 * 4 == fp["L0C"]["capacity_bytes"]
    assert not CAPACITY & {f["code"] for f in doc["findings"]}
    assert doc["findings"] == []


@pytest.mark.usefixtures("newer_api")
def test_flash_attention_core_footprint_and_findings(capsys: pytest.CaptureFixture[str]) -> None:
    path = _kernel("flash_attention_core.py")
    doc = _lint_json(capsys, f"{path}:flash_attention_fwd", "-p", "q_len=1024", "-p", "kv_len=1024")
    assert doc["chip"] == "950" and doc["lowered"] is True
    fp = {hw: v["bytes"] for hw, v in doc["kernels"][0]["footprint"].items()}
    # the README's hand count: UB 231680, L0A 65536, L0B 65536, L0C 262144
    assert (fp["UB"], fp["L0A"], fp["L0B"], fp["L0C"]) == (231680, 65536, 65536, 262144)
    assert not CAPACITY & {f["code"] for f in doc["findings"]}
    # the L0 operands left to the scheduler keep one version (two would not fit L0A/L0B); the
    # buffers the author versioned (K_shared 3, S_ub 3, ...) are not named, nor is UB
    ts504 = [f for f in doc["findings"] if f["code"] == "TS504"]
    assert len(ts504) == 1
    msg = ts504[0]["message"]
    assert "of L0A" in msg and "of L0B" in msg and "of UB" not in msg and "K_shared" not in msg


@pytest.mark.usefixtures("newer_api")
def test_flash_attention_core_on_a_910b_names_only_short_scopes() -> None:
    from tilescope.ir.capture import capture_ir

    path = _kernel("flash_attention_core.py")
    ir = capture_ir(f"{path}:flash_attention_fwd", {"q_len": 1024, "kv_len": 1024}, get_chip("950")).ir
    chip = get_chip("910B2")
    prof = Profile(source=SourceInfo(path=path, format="ir"), kernels=pd.DataFrame(), chip=chip, ir=ir)
    found = run_rules(prof, kinds=("static",)).findings
    # on a 910B the capacity findings are real (UB 231680 > 196608, L0C 262144 > 131072) ...
    assert sorted(f.evidence["hardware"] for f in found if f.code == "TS501") == ["L0C", "UB"]
    # ... but UB holds no buffer short of its versions, so TS504 does not blame it
    ts504 = next(f for f in found if f.code == "TS504")
    assert "of UB" not in ts504.message and "UB" not in ts504.evidence["needed_bytes"]
    assert "of L0A" in ts504.message and "of L0B" in ts504.message
