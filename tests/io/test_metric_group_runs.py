"""One device profiled once per `--aic-metrics` group is one profile, not ranks (#26 item 4).

Asserted on the real `vllm_moe_lora_5groups` (five msprof runs of one vLLM-Ascend unit test,
each under another group), with the values read here from its raw CSVs."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tilescope.io.detect import detect
from tilescope.io.load import load_profile

from support import REAL_TRACES

VLLM = REAL_TRACES / "vllm_moe_lora_5groups"
pytestmark = pytest.mark.skipif(not VLLM.is_dir(), reason=f"real traces not found at {VLLM}")
GROUPS = ("PipeUtilization", "ArithmeticUtilization", "L2Cache", "Memory", "ResourceConflictRatio")


def _rows(group: str) -> list[dict[str, str]]:
    (path,) = (VLLM / f"PROF_{group}").glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv")
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_five_groups_are_one_device() -> None:
    (found,) = detect(VLLM)
    assert found.format == "msprof_groups"
    # the PipeUtilization run first: its durations and pipe times are the table's
    assert [c.path.parent.name for c in found.children] == [f"PROF_{g}" for g in GROUPS]
    p = load_profile(VLLM)
    assert set(p.source.metric_groups) == set(GROUPS)
    assert p.rank is None
    pipe = _rows("PipeUtilization")
    k = p.kernels
    assert list(k["name"].astype(str)) == [r["Op Name"] for r in pipe]
    assert list(k["duration_us"]) == pytest.approx([float(r["Task Duration(us)"]) for r in pipe])
    assert float(k["duration_us"].sum()) == pytest.approx(39.322)  # README: 4.601 + 8.060 + 26.661
    # the device: info.json of the PipeUtilization run, 20 AIC / 40 AIV @ 1800, nothing assumed
    assert (p.chip.aic_count, p.chip.aiv_count, p.chip.clock_mhz) == (20, 40, 1800)
    assert not {"aic_count", "aiv_count", "clock_mhz"} & set(p.chip.assumed_figures)
    assert any("5 msprof runs of one device" in w and "not ranks" in w for w in p.warnings)
    # each group's own columns on the one table: UB bank conflicts, L2 cache hits, Memory rates
    conflict = _rows("ResourceConflictRatio")
    assert list(k["aiv_vec_bank_cflt_ratio"].astype(float).fillna(-1)) == pytest.approx(
        [
            float(r["aiv_vec_bank_cflt_ratio"]) if r["aiv_vec_bank_cflt_ratio"] not in ("N/A", "") else -1
            for r in conflict
        ]
    )
    memory = _rows("Memory")[2]  # GroupedMatmul, MIX_AIC: the Cube side reads GM
    assert memory["Op Name"].startswith("aclnnGroupedMatmul")
    rate, own_time = float(memory["aic_main_mem_read_bw(GB/s)"]), float(memory["aicore_time(us)"])
    base_time = float(pipe[2]["aicore_time(us)"])
    # rescaled so that rate x the table's side time is the bytes the Memory run measured
    got = float(k["aic_main_mem_read_gbps"].iloc[2])
    assert got == pytest.approx(rate * own_time / base_time, rel=1e-9)
    assert got * base_time == pytest.approx(rate * own_time, rel=1e-9)


def test_same_group_twice_stays_ranks(tmp_path: Path) -> None:
    """Two runs under one group (a distributed job's ranks collect the same group) are not merged."""
    import shutil

    for i in (0, 1):
        shutil.copytree(VLLM / "PROF_PipeUtilization", tmp_path / f"PROF_rank{i}")
    found = detect(tmp_path)
    assert len(found) == 2 and {f.format for f in found} == {"msprof"}
