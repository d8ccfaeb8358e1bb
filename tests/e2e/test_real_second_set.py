"""The second set of real profiles (../shared/traces/real/README.md): each loads with the device its
raw numbers imply, shows the README's values, and gets no finding its raw numbers contradict.

Every expectation is arithmetic on the raw file, written out in the comments.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tilescope.analysis import analyze
from tilescope.engine import AnalysisResult
from tilescope.io.bad_rows import STRICT_ENV
from tilescope.io.load import load_profiles
from tilescope.profile import Profile
from tilescope.summary import device_time


def _one(path: Path) -> tuple[Profile, AnalysisResult]:
    profiles = load_profiles(path)
    assert len(profiles) == 1
    return profiles[0], analyze(profiles[0])


def _codes(r: AnalysisResult) -> list[str]:
    return [f.code for f in r.findings]


def test_triton_1024_block_grid_uses_its_cores(real_traces: Path) -> None:
    p, r = _one(real_traces / "triton_matmul_bd1024_opsum")
    assert (p.chip.aic_count, p.chip.clock_mhz) == (28, 1650.0)  # test_device_inference shows why
    # 1024 blocks on 28 cores: 37 waves, the last one 16 of 28 busy: 1024 / (37 x 28) = 98.8 % of the
    # core time used, no wasted-cores finding (the old "1155 AIC @ 40 MHz" gave a high TS401)
    assert "TS401" not in _codes(r)
    mm = p.kernels[p.kernels["name"] == "matmul_kernel"]
    # the recomputed utilisation equals the profiler's on every row (same clock x cores)
    assert (mm["cube_utilization_calc_pct"] - mm["cube_utilization_pct"]).abs().max() < 0.01
    # two findings: the kernel far below its speed of light (TS206, #26 item 6: 0.75 % of it, MTE2
    # the busiest pipe) and a host stall, an idle-time share of the wall time (the 502 ms gap before
    # the first matmul is over max_gap_us and named, not counted)
    assert sorted(_codes(r)) == ["TS206", "TS404"]
    (stall,) = [f for f in r.findings if f.code == "TS404"]
    assert stall.code == "TS404" and stall.saving_kind == "idle" and stall.share_of_total < 0.01
    assert "502362.391" not in stall.message and "not counted" in stall.message


def test_gpt3_rank1_vector_kernels_typed_ai_core(real_traces: Path) -> None:
    p, r = _one(real_traces / "gpt3_2rank_memoryl0" / "test_rank_1")
    assert (p.chip.aic_count, p.chip.aiv_count, p.chip.clock_mhz) == (24, 48, 1850.0)
    # GatherV2, ZerosLike, Less, OnesLike: 48 blocks on 48 Vector cores is full use
    assert "TS401" not in _codes(r)
    assert set(p.kernels.loc[p.kernels["name"] == "GatherV2", "unit"]) == {"vector"}
    # README: device busy 11514.600 µs, the union of every task's interval (two kernels overlap)
    assert device_time(p.kernels).with_communication_us == pytest.approx(11514.6, abs=1e-3)


def test_gpt3_parent_leaves_the_broken_rank_out_under_strict(
    real_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # by default the short row is skipped and both ranks load (tests/io/test_bad_rows.py)
    monkeypatch.setenv(STRICT_ENV, "1")
    profiles = load_profiles(real_traces / "gpt3_2rank_memoryl0")
    assert [pr.rank for pr in profiles] == [1]
    (failure,) = profiles.failures
    assert "row 16 (line 17)" in str(failure.error)


def test_tilelang_mix_kernel_on_1650_mhz(real_traces: Path) -> None:
    p, r = _one(real_traces / "tilelang_sigmoid_app")
    assert p.source.format == "folder"
    assert (p.chip.name, p.chip.aic_count, p.chip.clock_mhz) == ("910B4", 20, 1650.0)
    assert p.device.rated_frequency_mhz == 1650.0 and p.device.timeline_max_frequency_mhz == 1650.0
    assert len(p.kernels) == 11 and p.kernels["duration_us"].sum() == pytest.approx(2635.28)
    # the Cube side of the MIX kernel works 1.4-4.5 µs of each 224-300 µs launch: its Scalar ratio
    # of 0.87 is 0.6-1.5 % of the launch, no scalar bottleneck (the old high false TS204)
    assert "TS204" not in _codes(r)
    assert p.kernels["aic_scalar_share"].max() < 0.02
    # the AI Core Freq counter reads 800 MHz under the first two launches only: TS403 counts those
    # two of the 11 kernels (runtime tasks are not kernels) against the rated 1650 MHz, losing
    # 300.0 x (1 - 800/1650) + 264.36 x (1 - 800/1650) = 290.7 µs
    freq = next(f for f in r.findings if f.code == "TS403")
    assert freq.occurrences == 2 and freq.evidence["rated_mhz"] == 1650.0
    assert freq.est_saving_us == pytest.approx((300.0 + 264.36) * (1 - 800 / 1650), abs=0.01)
    assert "18 % of kernels" in freq.message  # 2 of 11


def test_tilelang_timeline_alone(real_traces: Path) -> None:
    p, _ = _one(real_traces / "tilelang_sigmoid_app" / "trace_data" / "trace.json")
    # 14 hardware tasks, of which TASK_TIMEOUT_SET, PROFILING_ENABLE, PROFILING_DISABLE are not kernels
    assert len(p.kernels) == 11 and p.kernels["duration_us"].sum() == pytest.approx(2635.28, abs=0.01)


def test_msprof_db_2023(real_traces: Path) -> None:
    p, r = _one(real_traces / "msprof_db_2023")
    # 11 compute tasks, and the one collective of COMMUNICATION_TASK_INFO as an HCCL row (#26)
    assert len(p.kernels) == 12 and (p.kernels["core_type"] == "HCCL").sum() == 1
    assert device_time(p.kernels).kernel_sum_us == pytest.approx(663.872, abs=1e-3)
    # NPU_INFO names the family (Ascend910B), not the variant: defaults said so
    assert any("variant not recorded" in w for w in p.warnings)
    for f in r.findings:
        assert f.share_of_total <= 1.0


def test_kernel_details_without_pmu_columns(real_traces: Path) -> None:
    p, r = _one(real_traces / "kernel_details_na_8")
    assert device_time(p.kernels).device_us == pytest.approx(1000.79, abs=1e-3)
    assert r.findings == []  # nothing the table can support
