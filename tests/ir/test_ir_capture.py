"""IR capture: ir.json schema, line map, stage files, locate()."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tilescope.chips import get_chip
from tilescope.ir.model import find_kernel, validate_ir

from support import REPO_ROOT

KERNELS = REPO_ROOT / "sample_traces" / "kernels"


@pytest.fixture(scope="module")
def fa() -> Any:
    pytest.importorskip("tilelang")
    from tilescope.ir.capture import capture_ir

    return capture_ir(str(KERNELS / "flash_attention.py"), {"seq_kv": 1024}, get_chip("910B2"))


@pytest.mark.tilelang
def test_ir_json_validates_and_writes_stages(fa: Any, tmp_path: Path) -> None:
    from tilescope.ir.capture import write_ir_dir

    validate_ir(fa.ir)
    d = write_ir_dir(fa, tmp_path / "ir")
    names = sorted(p.name for p in d.iterdir())
    assert names == [
        "auto_schedule.py",
        "final.py",
        "ir.json",
        "kernel.cpp",
        "layout_inference.py",
        "multi_buffer.py",
        "tvmscript.py",
    ]
    validate_ir(json.loads((d / "ir.json").read_text()))
    assert "__mix__" in (d / "kernel.cpp").read_text()


@pytest.mark.tilelang
def test_fa_ir_contents(fa: Any) -> None:
    k = fa.ir["kernels"][0]
    assert k["entry"] == "flash_fwd_kernel" and k["core_type"] == "mix"
    assert k["footprint"]["UB"]["lowered_bytes"] == 115712
    assert k["footprint"]["L0C"]["bytes"] == 131072
    g = k["gemms"][0]
    assert (g["a"], g["b"], g["c"], g["transpose_b"], g["total_k"]) == ("q_l0", "k_l0", "s_acc", True, 128)
    levels = {(c["src_level"], c["dst_level"]) for c in k["copies"]}
    assert {("GM", "L1"), ("L1", "L0A"), ("L0C", "UB"), ("UB", "L1"), ("UB", "GM")} <= levels
    assert any("tirx.exp" in e["intrinsics"] for e in k["elementwise"])


@pytest.mark.tilelang
def test_line_map_points_at_the_right_lines(fa: Any) -> None:
    src = (KERNELS / "flash_attention.py").read_text().splitlines()
    ts = fa.kernels[0].stages["tvmscript"].splitlines()
    cc = fa.kernels[0].stages["ascendc"].splitlines()
    k = fa.ir["kernels"][0]
    kq = next(c for c in k["copies"] if c["src"] == "K")
    assert "T.copy(K[" in src[kq["source_line"] - 1]
    assert "K[" in ts[kq["tvmscript_line"] - 1] and "k_l1" in ts[kq["tvmscript_line"] - 1]
    assert all("gm2l1" in cc[n - 1] and "K[" in cc[n - 1] for n in kq["ascendc_lines"])
    g = k["gemms"][1]
    assert "T.gemm(p_l0, v_l0, pv_acc" in src[g["source_line"] - 1]
    assert "asc_mmad" in cc[g["ascendc_lines"][0] - 1]
    exp = next(e for e in k["elementwise"] if e["writes"] == ["s"])
    assert "T.Parallel(half, block_N)" in src[exp["source_line"] - 1]
    assert any("simt_vf_1" in cc[n - 1] for n in exp["ascendc_lines"])


@pytest.mark.tilelang
def test_locate_topics(fa: Any) -> None:
    from tilescope.ir.locate import locate

    src = (KERNELS / "flash_attention.py").read_text().splitlines()
    kernel = find_kernel(fa.ir, "flash_fwd_kernel_mix_aic")
    assert kernel is not None and kernel["name"] == "flash_fwd"
    cube = locate(fa.ir, "flash_fwd_kernel_mix_aic", "cube")
    assert {c.stage for c in cube} == {"source", "tvmscript", "ascendc"}
    assert cube[0].line is not None and "T.gemm" in src[cube[0].line - 1]
    vec = locate(fa.ir, "flash_fwd_kernel_mix_aiv", "vector")
    assert vec[0].line is not None
    assert "T.Parallel" in src[vec[0].line - 1] or "T.reduce" in src[vec[0].line - 1]
    mem = locate(fa.ir, "flash_fwd_kernel", "memory")
    assert mem[0].line is not None and "T.copy(" in src[mem[0].line - 1]
    buf = locate(fa.ir, "flash_fwd_kernel", "buffer:s_ub")
    assert buf[0].line is not None and "s_ub = T.alloc_shared" in src[buf[0].line - 1]
    assert locate(fa.ir, "other_kernel", "cube") == []
    assert locate(fa.ir, "flash_fwd_kernel", "nonsense") == []


def test_padding_helpers() -> None:
    from tilescope.ir.scopes import c0_elements, padded_shape

    assert c0_elements("int8") == 32 and c0_elements("float16") == 16 and c0_elements("float32") == 8
    assert padded_shape([100, 40], "L0A", "int8", 1) == [112, 64]
    assert padded_shape([40, 120], "L0B", "int8", 0) == [64, 128]
    assert padded_shape([100, 120], "L0C", "float32", None) == [112, 128]
    assert padded_shape([100, 120], "UB", "float32", None) == [100, 120]
