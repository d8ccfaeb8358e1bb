"""Each PMU counter under the `aic_metrics` group that writes it, with its unit (tilescope.columns
`counter_group` / `counter_unit`, the Kernel detail's and Compare's counter tables, #28 item 6).

The headers are the op_summary / kernel_details metric blocks as the formats doc lists them (§3.2,
../shared/docs/ascend-profiler-formats.md), written here: each block's own columns must land in its
group, the side's time and cycles (which every group writes) in the core-time group.
"""

from __future__ import annotations

import pytest

from tilescope.columns import CORE_TIME_GROUP, canonical_name, counter_group, counter_unit

CORE = "aicore_time(us),aic_total_cycles,aiv_time(us),aiv_total_cycles"
BLOCKS = {
    "PipeUtilization": "aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),aic_scalar_ratio,"
    "aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,aic_fixpipe_time(us),aic_fixpipe_ratio,aic_icache_miss_rate,"
    "aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),aiv_mte2_ratio,"
    "aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate",
    "ArithmeticUtilization": "aic_mac_fp16_ratio,aic_mac_int8_ratio,aic_cube_fops,aiv_vec_fp32_ratio,"
    "aiv_vec_fp16_ratio,aiv_vec_int32_ratio,aiv_vec_misc_ratio,aiv_vector_fops",
    "Memory": "aic_l1_read_bw(GB/s),aic_l1_write_bw(GB/s),aic_main_mem_read_bw(GB/s),"
    "aic_main_mem_write_bw(GB/s),aic_l2_read_bw(GB/s),aic_l2_write_bw(GB/s),aiv_ub_read_bw(GB/s),aiv_ub_write_bw(GB/s),"
    "aiv_main_mem_read_bw(GB/s),aiv_main_mem_write_bw(GB/s),aiv_l2_read_bw(GB/s),aiv_l2_write_bw(GB/s)",
    "MemoryL0": "aic_l0a_read_bw(GB/s),aic_l0a_write_bw(GB/s),aic_l0b_read_bw(GB/s),aic_l0b_write_bw(GB/s),"
    "aic_l0c_read_bw_cube(GB/s),aic_l0c_write_bw_cube(GB/s),aiv_l0c_read_bw(GB/s),aiv_l0c_write_bw(GB/s)",
    "MemoryUB": "aic_ub_read_bw_scalar(GB/s),aic_ub_write_bw_scalar(GB/s),aiv_ub_read_bw_vector(GB/s),"
    "aiv_ub_write_bw_vector(GB/s),aiv_ub_read_bw_scalar(GB/s),aiv_ub_write_bw_scalar(GB/s)",
    "ResourceConflictRatio": "aiv_vec_bankgroup_cflt_ratio,aiv_vec_bank_cflt_ratio,aiv_vec_resc_cflt_ratio",
    "L2Cache": "aic_write_cache_hit,aic_write_cache_miss_allocate,aic_r0_read_cache_hit,"
    "aic_r0_read_cache_miss_allocate,aic_r1_read_cache_hit,aic_r1_read_cache_miss_allocate,aiv_write_cache_hit,"
    "aiv_write_cache_miss_allocate,aiv_r0_read_cache_hit,aiv_r0_read_cache_miss_allocate,aiv_r1_read_cache_hit,"
    "aiv_r1_read_cache_miss_allocate",
}


@pytest.mark.parametrize("group", sorted(BLOCKS))
def test_each_groups_columns_land_in_it(group: str) -> None:
    for source in BLOCKS[group].split(","):
        assert counter_group(canonical_name(source)) == group, source
    for source in CORE.split(","):
        assert counter_group(canonical_name(source)) == CORE_TIME_GROUP


def test_units_and_what_is_no_counter() -> None:
    units = {source: counter_unit(canonical_name(source)) for source in (
        "aic_l0a_read_bw(GB/s)", "aicore_time(us)", "aiv_total_cycles", "aic_write_cache_hit",
        "aiv_vec_bank_cflt_ratio", "aic_cube_fops", "aic_write_hit_rate(%)")}
    assert units == {"aic_l0a_read_bw(GB/s)": "GB/s", "aicore_time(us)": "µs", "aiv_total_cycles": "cycles",
                     "aic_write_cache_hit": "count", "aiv_vec_bank_cflt_ratio": "ratio (0–1)",
                     "aic_cube_fops": "FLOP", "aic_write_hit_rate(%)": "%"}
    # identity, launch and tilescope's derived columns are no counters
    for name in ("name", "duration_us", "block_dim", "aic_cube_share", "aic_busy_share", "cube_share",
                 "sol_pct", "cube_utilization_calc_pct"):
        assert counter_group(name) is None, name
