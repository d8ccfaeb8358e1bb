"""`msprof op --aic-metrics=Default` per-block CSVs of a TileLang flash-attention forward kernel."""

from __future__ import annotations

import random
from dataclasses import dataclass

from .model import (
    AIC_CORES,
    CUBE_FLOP_PER_CYCLE,
    FREQ_MHZ,
    HBM_BANDWIDTH_GBPS_ASSUMED,
    SEED,
)

MSOP_KERNEL = "flash_attn_fwd_kernel_mix_aic"  # TileLang `{prim_func}_kernel` + msprof op's `_mix_aic`
MSOP_HEADERS: dict[str, str] = {
    "PipeUtilization": (
        ""
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_cube_time(us),aic_cube_ratio,aic_scalar_time(us),"
        ""
        "aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,aic_mte3_time(us),"
        "aic_mte3_ratio,aic_mte3_active_bw(GB/s),aic_fixpipe_time(us),aic_fixpipe_ratio,"
        "aic_fixpipe_active_bw(GB/s),aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),"
        "aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),aiv_mte2_ratio,"
        "aiv_mte2_active_bw(GB/s),aiv_mte3_time(us),aiv_mte3_ratio,aiv_mte3_active_bw(GB/s),"
        "aiv_icache_miss_rate,aic_mte1_active_bw(GB/s),aic_mte2_active_bw(GB/s),"
    ),
    "Memory": (
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_l1_read_bw(GB/s),aic_l1_write_bw(GB/s),"
        "aic_main_mem_read_bw(GB/s),aic_main_mem_write_bw(GB/s),aic_mte1_instructions,aic_mte1_ratio,"
        ""
        "aic_mte2_instructions,aic_mte2_ratio,aic_mte3_instructions,aic_mte3_ratio,aiv_time(us),aiv_total_cycles,"
        "aiv_ub_to_gm_bw(GB/s),aiv_gm_to_ub_bw(GB/s),aiv_main_mem_read_bw(GB/s),aiv_main_mem_write_bw(GB/s),"
        ""
        "aiv_mte2_instructions,aiv_mte2_ratio,aiv_mte3_instructions,aiv_mte3_ratio,read_main_memory_datas(KB),"
        ""
        "write_main_memory_datas(KB),GM_to_L1_datas(KB),GM_to_L1_bw_usage_rate(%),L1_to_GM_datas(KB)(estimate),"
        ""
        "L1_to_GM_bw_usage_rate(%)(estimate),L0C_to_L1_datas(KB),L0C_to_L1_bw_usage_rate(%),L0C_to_GM_datas(KB),"
        "L0C_to_GM_bw_usage_rate(%),GM_to_UB_datas(KB),GM_to_UB_bw_usage_rate(%),UB_to_GM_datas(KB),"
        "UB_to_GM_bw_usage_rate(%),"
    ),
    "MemoryL0": (
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_l0a_read_bw(GB/s),aic_l0a_write_bw(GB/s),"
        "aic_l0b_read_bw(GB/s),aic_l0b_write_bw(GB/s),aic_l0c_read_bw_cube(GB/s),aic_l0c_write_bw_cube(GB/s),"
        "aiv_time(us),aiv_total_cycles,"
    ),
    "MemoryUB": (
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aiv_time(us),aiv_total_cycles,"
        "aiv_ub_read_bw_vector(GB/s),aiv_ub_write_bw_vector(GB/s),aiv_ub_read_bw_scalar(GB/s),"
        "aiv_ub_write_bw_scalar(GB/s),"
    ),
    "ResourceConflictRatio": (
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_cube_wait_ratio,aic_mte1_wait_ratio,"
        "aic_mte2_wait_ratio,aic_mte3_wait_ratio,aiv_time(us),aiv_total_cycles,aiv_vec_total_cflt_ratio,"
        "aiv_vec_bankgroup_cflt_ratio,aiv_vec_bank_cflt_ratio,aiv_vec_resc_cflt_ratio,aiv_vec_mte_cflt_ratio,"
        "aiv_vec_wait_ratio,aiv_mte1_wait_ratio,aiv_mte2_wait_ratio,aiv_mte3_wait_ratio,"
    ),
    "L2Cache": (
        ""
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_write_cache_hit,aic_write_cache_miss_allocate,"
        "aic_r0_read_cache_hit,aic_r0_read_cache_miss_allocate,aic_r1_read_cache_hit,"
        "aic_r1_read_cache_miss_allocate,aic_write_hit_rate(%),aic_read_hit_rate(%),aic_total_hit_rate(%),"
        ""
        "aiv_time(us),aiv_total_cycles,aiv_write_cache_hit,aiv_write_cache_miss_allocate,aiv_r0_read_cache_hit,"
        "aiv_r0_read_cache_miss_allocate,aiv_r1_read_cache_hit,aiv_r1_read_cache_miss_allocate,"
        "aiv_write_hit_rate(%),aiv_read_hit_rate(%),aiv_total_hit_rate(%),"
    ),
    "ArithmeticUtilization": (
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_cube_ratio,aic_cube_fp16_ratio,"
        "aic_cube_int8_ratio,aic_cube_fops,aic_cube_total_instr_number,aic_cube_fp_instr_number,"
        "aic_cube_int_instr_number,aiv_time(us),aiv_total_cycles,aiv_vec_ratio,aiv_vec_fp32_ratio,"
        "aiv_vec_fp16_ratio,aiv_vec_int32_ratio,aiv_vec_int16_ratio,aiv_vec_misc_ratio,aiv_vec_fops,"
    ),
}
OPBASIC_HEADER = (
    "Op Name,Op Type,Task Duration(us),Block Dim,Mix Block Dim,Device Id,Pid,Current Freq,Rated Freq,"
)
MSOP_PID = 2659001


@dataclass(frozen=True)
class FAWorkload:
    """The flash-attention forward launch a msprof op sample describes; every byte and FLOP follows from it.

    ``scores_via_gm``: the scores S (fp32) go to GM for the vector side and P comes back (a kernel whose
    Cube->Vector hand-off spills), versus on chip (TileLang 0.1.15's ``T.dual_copy`` L0C -> UB -> L1).
    """

    kernel: str  # msprof op's Op Name: TileLang's `{prim_func}_kernel` + `_mix_aic`
    batch: int
    heads: int
    seq_q: int
    seq_kv: int
    head_dim: int
    block_m: int
    block_n: int
    blocks: int  # Block Dim (one AIC each); Mix Block Dim = 2 x blocks (vector0 / vector1)
    in_bytes: int = 2  # Q, K, V element size
    out_bytes: int = 2  # Out element size
    scores_via_gm: bool = True
    slow_block: int = 13  # gets ~35 % more work than the others: load imbalance
    dtype: str = "fp16"

    @property
    def flops(self) -> float:
        return 4.0 * self.batch * self.heads * self.seq_q * self.seq_kv * self.head_dim

    @property
    def q_tiles(self) -> int:
        return self.batch * self.heads * (self.seq_q // self.block_m)

    def describe(self) -> str:
        return (
            f"batch {self.batch}, {self.heads} head(s), seq_q {self.seq_q}, seq_kv {self.seq_kv}, "
            f"head_dim {self.head_dim}, {self.dtype}, {self.block_m}x{self.block_n} tiles"
        )


# The workload of the tilelang_fa_msprof_op* samples: a multi-head FA whose scores spill to GM.
SAMPLE_WORKLOAD = FAWorkload(
    kernel=MSOP_KERNEL,
    batch=4,
    heads=16,
    seq_q=2048,
    seq_kv=2048,
    head_dim=128,
    block_m=128,
    block_n=128,
    blocks=AIC_CORES,
)
MSOP_FLOPS = SAMPLE_WORKLOAD.flops
MSOP_SLOW_BLOCK = SAMPLE_WORKLOAD.slow_block


def _msop_block_values(
    rng: random.Random, block: int, warm: float, w: FAWorkload = SAMPLE_WORKLOAD
) -> dict[str, dict[str, float]]:
    """Numbers for one block's cube0 / vector0 / vector1 rows (µs, ratios, bytes)."""
    work = (1.35 if block == w.slow_block else 1.0) * (1 + rng.uniform(-0.015, 0.015))
    cube_us = w.flops / w.blocks / (FREQ_MHZ * CUBE_FLOP_PER_CYCLE) * work
    # the softmax side dominates: cube busy ~30 % of the time, vector ~70 %
    t = cube_us / (0.30 * (1 + rng.uniform(-0.03, 0.03))) * warm
    # per block traffic (bytes): K/V re-read per q tile; the scores S (fp32) and probabilities P go
    # Cube -> Vector -> Cube, through GM when scores_via_gm, else on chip
    kv = w.q_tiles * 2 * w.seq_kv * w.head_dim * w.in_bytes / w.blocks * work
    s_bytes = w.batch * w.heads * w.seq_q * w.seq_kv * 4 / w.blocks * work
    p_bytes = s_bytes / 2
    q_bytes = w.q_tiles * w.block_m * w.head_dim * w.in_bytes / w.blocks * work
    o_bytes = w.q_tiles * w.block_m * w.head_dim * w.out_bytes / w.blocks * work
    cube_read = kv + p_bytes if w.scores_via_gm else kv + q_bytes
    vec_read, vec_write = (s_bytes / 2, p_bytes / 2) if w.scores_via_gm else (0.0, o_bytes / 2)
    out: dict[str, dict[str, float]] = {}
    out["cube0"] = {
        "time": t,
        "cube": cube_us,
        "scalar": t * rng.uniform(0.10, 0.14),
        "mte1": cube_us * 0.6,
        "mte2": cube_read / (110e3 * rng.uniform(0.97, 1.03)),
        "mte3": 0.0,
        "fixpipe": s_bytes / (90e3 * rng.uniform(0.97, 1.03)),
        "icache": rng.uniform(0.003, 0.006),
        "gm_read": cube_read,
        "gm_write": s_bytes if w.scores_via_gm else 0.0,
        "fixpipe_bytes": s_bytes,
    }
    for sub in ("vector0", "vector1"):
        vt = t * rng.uniform(0.985, 1.0)
        out[sub] = {  # dict order = draw order of the rng: keep it
            "time": vt,
            "vec": vt * 0.70 * (1 + rng.uniform(-0.02, 0.02)),
            "scalar": vt * rng.uniform(0.12, 0.16),
            "mte2": vec_read / (40e3 * rng.uniform(0.97, 1.03)),
            "mte3": vec_write / (40e3 * rng.uniform(0.97, 1.03)),
            "icache": rng.uniform(0.004, 0.008),
            "gm_read": vec_read,
            "gm_write": vec_write,
        }
    return out


def _hit_pct(hits: int, misses: int) -> float:
    return hits / (hits + misses) * 100 if hits + misses else 0.0


def _f(x: float) -> str:
    return f"{x:.6f}"


def gbps(nbytes: float, us: float) -> str:
    """Bytes moved in ``us`` microseconds as GB/s (msprof op prints 6 decimals)."""
    return _f(nbytes / us / 1e3) if us else "0.000000"


def _msop_rows(
    metric: str,
    block: int,
    sub: str,
    v: dict[str, float],
    rng: random.Random,
    l2_hit: float,
    blocks: int = AIC_CORES,
) -> str:
    """One CSV line of one metric file (ending with the trailing comma of msprof op)."""
    cube = sub == "cube0"
    t = v["time"]
    cyc = round(t * FREQ_MHZ)
    na = "NA"
    aic = [_f(t), str(cyc)] if cube else [na, na]
    aiv = [_f(t), str(cyc)] if not cube else [na, na]
    if metric == "PipeUtilization":
        if cube:
            c = [*aic]
            for p in ("cube", "scalar", "mte1", "mte2", "mte3"):
                c += [_f(v[p]), _f(v[p] / t)]
            c += [
                "0.000000",
                _f(v["fixpipe"]),
                _f(v["fixpipe"] / t),
                gbps(v["fixpipe_bytes"], v["fixpipe"]),
                _f(v["icache"]),
            ]
            c += [na] * 13 + [gbps(v["gm_read"] * 3, v["mte1"]), gbps(v["gm_read"], v["mte2"])]
        else:
            c = [na] * 17 + [*aiv]
            for p in ("vec", "scalar"):
                c += [_f(v[p]), _f(v[p] / t)]
            c += [
                _f(v["mte2"]),
                _f(v["mte2"] / t),
                gbps(v["gm_read"], v["mte2"]),
                _f(v["mte3"]),
                _f(v["mte3"] / t),
                gbps(v["gm_write"], v["mte3"]),
                _f(v["icache"]),
                na,
                na,
            ]
    elif metric == "Memory":
        per_block_bw = HBM_BANDWIDTH_GBPS_ASSUMED / blocks  # usage rates relative to this (assumption)
        rd, wr = v["gm_read"] / 1024, v["gm_write"] / 1024
        if cube:
            c = [
                *aic,
                gbps(v["gm_read"] * 3, t),
                gbps(v["gm_read"], t),
                gbps(v["gm_read"], t),
                gbps(v["gm_write"], t),
                str(int(v["mte1"] * 90)),
                _f(v["mte1"] / t),
                str(int(v["mte2"] * 40)),
                _f(v["mte2"] / t),
                "0",
                "0.000000",
            ] + [na] * 10
            bw_rd, bw_wr = v["gm_read"] / t / 1e3, v["gm_write"] / t / 1e3
            c += [
                _f(rd),
                _f(wr),
                _f(rd),
                _f(bw_rd / per_block_bw * 100),
                "0.000000",
                "0.000000",
                "0.000000",
                "0.000000",
                _f(wr),
                _f(bw_wr / per_block_bw * 100),
                na,
                na,
                na,
                na,
            ]
        else:
            c = [na] * 12 + [
                *aiv,
                gbps(v["gm_write"], t),
                gbps(v["gm_read"], t),
                gbps(v["gm_read"], t),
                gbps(v["gm_write"], t),
                str(int(v["mte2"] * 30)),
                _f(v["mte2"] / t),
                str(int(v["mte3"] * 30)),
                _f(v["mte3"] / t),
            ]
            half = per_block_bw / 2
            c += (
                [_f(rd), _f(wr)]
                + [na] * 8
                + [
                    _f(rd),
                    _f(v["gm_read"] / t / 1e3 / half * 100),
                    _f(wr),
                    _f(v["gm_write"] / t / 1e3 / half * 100),
                ]
            )
    elif metric == "MemoryL0":
        if cube:
            c = [*aic] + [_f(x * rng.uniform(0.97, 1.03)) for x in (310.0, 150.0, 290.0, 140.0, 95.0, 180.0)]
            c += [na, na]
        else:
            c = [na] * 8 + aiv
    elif metric == "MemoryUB":
        c = (
            [*aic, na, na, na, na, na, na]
            if cube
            else [na, na, *aiv] + [_f(x * rng.uniform(0.97, 1.03)) for x in (420.0, 260.0, 12.0, 6.0)]
        )
    elif metric == "ResourceConflictRatio":
        if cube:
            # the cube waits for the softmax side most of the time
            c = [
                *aic,
                _f(0.55 + rng.uniform(-0.03, 0.03)),
                _f(0.05),
                _f(0.09 + rng.uniform(0, 0.02)),
                "0.000000",
            ]
            c += [na] * 11
        else:
            bg, bank, resc, mte = (0.06, 0.20 + rng.uniform(-0.02, 0.02), 0.03, 0.02)
            c = [na] * 6 + [
                *aiv,
                _f(bg + bank + resc + mte),
                _f(bg),
                _f(bank),
                _f(resc),
                _f(mte),
                _f(0.10 + rng.uniform(0, 0.02)),
                "0.000000",
                _f(0.08),
                _f(0.05),
            ]
    elif metric == "L2Cache":

        def hits(nbytes: float, rate: float) -> tuple[int, int]:
            req = int(nbytes / 512)  # requests counted per 512 B line (generator assumption)
            h = int(req * rate)
            return h, req - h

        rate = l2_hit + rng.uniform(-0.02, 0.02)
        wh, wm = hits(v["gm_write"], min(rate + 0.05, 1.0))
        r0h, r0m = hits(v["gm_read"] * 0.7, rate - 0.01)
        r1h, r1m = hits(v["gm_read"] * 0.3, rate - 0.01)
        rh, rm = r0h + r1h, r0m + r1m
        vals = [str(x) for x in (wh, wm, r0h, r0m, r1h, r1m)] + [
            _f(_hit_pct(wh, wm)),
            _f(_hit_pct(rh, rm)),
            _f(_hit_pct(wh + rh, wm + rm)),
        ]
        c = [*aic, *vals] + [na] * 11 if cube else [na] * 11 + [*aiv, *vals]
    else:  # ArithmeticUtilization
        if cube:
            r = v["cube"] / t
            c = [
                *aic,
                _f(r),
                _f(r),
                "0.000000",
                str(round(r * cyc * CUBE_FLOP_PER_CYCLE)),
                str(round(r * cyc / 16)),
                str(round(r * cyc / 16)),
                "0",
            ] + [na] * 9
        else:
            r = v["vec"] / t
            fp32, fp16, i32, misc = r * 0.70, r * 0.20, r * 0.05, r * 0.05
            c = [na] * 9 + [
                *aiv,
                _f(r),
                _f(fp32),
                _f(fp16),
                _f(i32),
                "0.000000",
                _f(misc),
                str(round(cyc * (fp32 * 64 + fp16 * 128))),
            ]
    return ",".join([str(block), sub, *c]) + ","


def msprof_op_launch(
    seed_key: str,
    warm: float = 1.0,
    l2_hit: float = 0.60,
    workload: FAWorkload = SAMPLE_WORKLOAD,
    seed_prefix: str = "msprof_op",
) -> dict[str, str]:
    """File name -> content for one launch (OpBasicInfo plus the seven Default metric files)."""
    w = workload
    rng = random.Random(f"{SEED}/{seed_prefix}/{seed_key}")
    blocks = [_msop_block_values(rng, b, warm, w) for b in range(w.blocks)]
    task_us = max(v[s]["time"] for v in blocks for s in v) + 3.1
    files = {
        "OpBasicInfo": OPBASIC_HEADER
        + "\n"
        + ",".join(
            [
                w.kernel,
                "mix",
                _f(task_us),
                str(w.blocks),
                str(2 * w.blocks),
                "0",
                str(MSOP_PID),
                str(FREQ_MHZ),
                str(FREQ_MHZ),
            ]
        )
        + ",\n"
    }
    for metric, header in MSOP_HEADERS.items():
        mrng = random.Random(f"{SEED}/{seed_prefix}/{seed_key}/{metric}")
        lines = [header]
        for b, v in enumerate(blocks):
            for sub in ("cube0", "vector0", "vector1"):
                lines.append(_msop_rows(metric, b, sub, v[sub], mrng, l2_hit, w.blocks))
        files[metric] = "\n".join(lines) + "\n"
    for name, text in files.items():  # every line, header included, ends with a comma
        n_cols = text.splitlines()[0].count(",")
        assert all(line.count(",") == n_cols for line in text.splitlines()), name
    return files
