"""Device inference on every real profile: the clock and core count their raw numbers imply.

Each expectation is arithmetic on the raw file, checked by hand (the numbers are in the comments);
where the published README of ../shared/traces/real says otherwise, the comment shows why.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tilescope.chips import IDLE_CLOCK_MHZ, MAX_CLOCK_MHZ, get_chip, load_chip_toml
from tilescope.errors import UsageError
from tilescope.io.load import load_profiles


def _one(real_traces: Path, rel: str) -> tuple[str, int | None, int | None, float | None, list[str]]:
    profiles = load_profiles(real_traces / rel)
    assert len(profiles) == 1
    c = profiles[0].chip
    return c.name, c.aic_count, c.aiv_count, c.clock_mhz, profiles[0].warnings


def test_grid_larger_than_the_cores_is_not_a_slow_clock(real_traces: Path) -> None:
    # Block Dim 1024: cycles / (Block Dim x aicore_time) = 15664309 / (1024 x 355.67) = 43 MHz, the
    # old "1155 AIC @ 40 MHz". The profiler's cube_utilization(%) gives clock x cores exactly:
    # 15664309 / (0.9525 x 355.962) = 46,200 on every row (±0.0005 %) = 28 x 1650 MHz. The README's
    # 24 x 1800 would put the row at 15664309 / (1800 x 24 x 355.962) = 101.9 %, not the file's 95.25.
    _name, aic, aiv, mhz, notes = _one(real_traces, "triton_matmul_bd1024_opsum")
    assert (aic, aiv, mhz) == (28, 56, 1650.0)
    assert any("46,200 MHz" in n for n in notes)
    assert not any("fits too" in n for n in notes)  # 25 x 1850 = 46,250 is 0.11 % off: outside the spread


def test_vector_kernels_typed_ai_core_give_the_aiv_clock(real_traces: Path) -> None:
    # older CANN: vector kernels typed AI_CORE with aic_total_cycles 0; aiv_total_cycles / (48 x
    # aiv_time) = 43705518 / (48 x 492.18) = 1850.0 MHz (ZerosLike); Tril's 1639 blocks give 56 MHz
    # and are left out (its grid ran in waves). 48 AIV in one wave -> at least 24 AIC.
    name, aic, aiv, mhz, notes = _one(real_traces, "gpt3_2rank_memoryl0/test_rank_1")
    assert (aic, aiv, mhz) == (24, 48, 1850.0)
    assert name == "910B1"  # the catalogued variant rated at 1850 MHz
    assert not any(" 0 MHz" in n for n in notes)


def test_tilelang_mix_kernel_on_a_1650_mhz_device(real_traces: Path) -> None:
    # op_summary.csv alone (no OpBasicInfo beside it): cube_utilization(%) 1.424 = 140990 / (1650 x 20
    # x 300.0) x 100: clock x cores = 33,000 fits 20 cores at the 910B4's rated 1650 MHz and no whole
    # count at 1800 or 1850 (the README's "1650 x 24" gives 1.187 %); OpBasicInfo, in the folder,
    # records the same 1650 MHz (tests/e2e/test_real_second_set.py)
    name, aic, aiv, mhz, _notes = _one(real_traces, "tilelang_sigmoid_app/trace_data/op_summary.csv")
    assert (name, aic, aiv, mhz) == ("910B4", 20, 40, 1650.0)


def test_pipeutil_kernel_details_20_cores_1800(real_traces: Path) -> None:
    # MatMulV2 5295467 / (1800 x 16 x 183.87) = 1800 MHz; cube_utilization 79.295 -> 36,000 = 20 x 1800
    name, aic, aiv, mhz, _ = _one(real_traces, "fa_pipeutil_29/kernel_details.csv")
    assert (name, aic, aiv, mhz) == ("910B3", 20, 40, 1800.0)


def test_arithmetic_utilization_trace_24_cores_1850(real_traces: Path) -> None:
    # MatMul91 64689637 / (24 x 1456.97) = 1850.0 MHz; no cube_utilization column: the largest grid
    # that ran in one wave (24 Cube blocks, 48 Vector blocks) bounds the cores
    name, aic, aiv, mhz, notes = _one(real_traces, "gpt_step_arith_591/kernel_details.csv")
    assert (name, aic, aiv, mhz) == ("910B1", 24, 48, 1850.0)
    assert any("at least 24 AI Cores" in n for n in notes)


@pytest.mark.parametrize("rel", ["kernel_details_na_8", "msprof_db_2023", "torch_timeline_3670"])
def test_no_evidence_says_what_it_assumed(real_traces: Path, rel: str) -> None:
    name, aic, _aiv, mhz, notes = _one(real_traces, rel)
    assert (name, aic, mhz) == ("910B2", 24, 1800.0)
    assert any("assumed: 910B2 defaults" in n for n in notes)
    if rel == "msprof_db_2023":  # NPU_INFO says "Ascend910B": the family, not the variant
        assert any("device model Ascend910B: variant not recorded" in n for n in notes)


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_every_real_profile_gets_a_possible_device(real_traces: Path) -> None:
    for folder in sorted(p for p in real_traces.iterdir() if p.is_dir()):
        try:
            profiles = load_profiles(folder)
        except Exception:  # a folder that does not load is another test's subject
            continue
        for prof in profiles:
            chip = prof.chip
            assert chip.clock_mhz is None or IDLE_CLOCK_MHZ <= chip.clock_mhz <= MAX_CLOCK_MHZ, folder
            assert chip.aic_count is None or 1 <= chip.aic_count <= 64, folder


def test_vendor_bandwidths_and_memory_types() -> None:
    b2 = get_chip("910B2")
    assert (b2.clock_mhz, b2.hbm_bandwidth_gbps, b2.l2_bandwidth_gbps) == (1800.0, 1750.0, 7780.0)
    assert b2.l2_bytes == 192 * 1024 * 1024 and b2.core_paths is not None
    assert b2.core_paths.gm_to_ub == 214.11
    cj = get_chip("Ascend910B2:cj")
    assert (cj.memory_type, cj.hbm_bandwidth_gbps, cj.l2_bandwidth_gbps) == ("cj", 1300.0, 7200.0)
    assert "cj memory type" in cj.hbm_bandwidth_source
    b4 = get_chip("910B4")
    assert (b4.clock_mhz, b4.hbm_bandwidth_gbps, b4.l2_bytes) == (1650.0, 800.0, 96 * 1024 * 1024)
    assert get_chip("910B1").clock_mhz == 1850.0
    with pytest.raises(UsageError, match="memory type"):
        get_chip("910B2:hbm3")


def test_chip_file_selects_the_memory_type(tmp_path: Path) -> None:
    f = tmp_path / "chip.toml"
    f.write_text('base = "910B3"\nmemory_type = "cj"\n')
    chip = load_chip_toml(f)
    assert (chip.hbm_bandwidth_gbps, chip.aic_count) == (1300.0, 20)
    f.write_text('base = "910B3"\nhbm_bandwidth_gbps = 1500.0\n')
    own = load_chip_toml(f)
    assert own.hbm_bandwidth_gbps == 1500.0 and own.hbm_note == "configured"
