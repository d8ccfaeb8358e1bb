"""Derived per-kernel metrics and the profile summary (vectorised; design.md §3, formats doc §10).

Conventions chosen here (the reports and rules rely on them):

- `cube_utilization_calc_pct` = aic_total_cycles / (clock_MHz × chip AIC count × duration_us) × 100,
  always when the inputs exist; `cube_utilization_pct` keeps the file's value and is filled from the
  calculation only where the file had none.
- `cube_busy_us` = `aic_cube_time_us` (the Cube pipe's busy time per core, PipeUtilization) when
  present, else aic_time_us × aic_cube_ratio, else aic_time_us × (sum of `aic_cube_*_ratio` per data
  type, ArithmeticUtilization). `vector_busy_us` likewise from `aiv_vec_time_us` / aiv_vec_ratio /
  the `aiv_vec_*_ratio` sum. `cube_share` / `vector_share` = busy / duration_us (0–1; the pipe's
  fraction of the kernel's wall time).
- `flops` from shapes, per unique (op_type, shapes, dtypes): MatMul*/BatchMatMul* = 2·batch·M·N·K,
  with M, N from the output and K found by matching the input dims (handles transposed operands);
  FlashAttentionScore = 4·B·S_q·S_kv·H_q (= 4·B·N·S_q·S_kv·D; causal masking ignored), the Grad ×2.5.
  Null when the shapes do not resolve consistently.
- `bytes_moved`: measured main-memory traffic when the Memory group is present (read+write GB/s ×
  that side's time), else the sizes of all input and output tensors (shape × dtype size).
- `bound_pipe`: the pipe with the largest ratio among cube, vector, mte1, mte2, mte3, fixpipe, scalar
  (both sides, max); "none" when every ratio is below 0.8 (msprof-analyze's `operator_bound_ratio`);
  null when the kernel has no ratios.
"""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from analyzer.chips import ChipSpec
from analyzer.profile import Profile

BOUND_THRESHOLD = 0.8
PIPE_RATIOS: dict[str, tuple[str, ...]] = {
    "cube": ("aic_cube_ratio",),
    "vector": ("aiv_vec_ratio",),
    "mte1": ("aic_mte1_ratio",),
    "mte2": ("aic_mte2_ratio", "aiv_mte2_ratio"),
    "mte3": ("aic_mte3_ratio", "aiv_mte3_ratio"),
    "fixpipe": ("aic_fixpipe_ratio",),
    "scalar": ("aic_scalar_ratio", "aiv_scalar_ratio"),
}
DTYPE_BYTES = {
    "FLOAT16": 2,
    "FP16": 2,
    "HALF": 2,
    "BF16": 2,
    "BFLOAT16": 2,
    "INT16": 2,
    "UINT16": 2,
    "FLOAT": 4,
    "FLOAT32": 4,
    "FP32": 4,
    "INT32": 4,
    "UINT32": 4,
    "INT64": 8,
    "UINT64": 8,
    "DOUBLE": 8,
    "FLOAT64": 8,
    "INT8": 1,
    "UINT8": 1,
    "BOOL": 1,
    "FP8": 1,
    "HIFLOAT8": 1,
}
_FLOP_KEYS = ("op_type", "input_shapes", "output_shapes", "input_dtypes", "output_dtypes")


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    if name in df:
        return pd.to_numeric(df[name], errors="coerce").astype("float64")
    return pd.Series(np.nan, index=df.index, dtype="float64")


def _ratio_sum(df: pd.DataFrame, prefix: str) -> pd.Series:
    cols = [c for c in df.columns if c.startswith(prefix) and c.endswith("_ratio")]
    if not cols:
        return pd.Series(np.nan, index=df.index, dtype="float64")
    return df[cols].astype("float64").sum(axis=1, min_count=1)


def add_derived_metrics(kernels: pd.DataFrame, chip: ChipSpec) -> pd.DataFrame:
    """Return a new frame: `kernels` plus the derived columns of the module docstring."""
    k = kernels
    new: dict[str, pd.Series] = {}
    dur = _col(k, "duration_us")
    cycles = _col(k, "aic_total_cycles")
    util = _col(k, "cube_utilization_pct")
    if chip.clock_mhz and chip.aic_count and "aic_total_cycles" in k:
        calc = cycles / (chip.clock_mhz * chip.aic_count * dur.where(dur > 0)) * 100.0
        new["cube_utilization_calc_pct"] = calc
        util = util.fillna(calc)

    cube = _col(k, "aic_cube_time_us")
    cube = cube.fillna(_col(k, "aic_time_us") * _col(k, "aic_cube_ratio"))
    cube = cube.fillna(_col(k, "aic_time_us") * _ratio_sum(k, "aic_cube_"))
    vec = _col(k, "aiv_vec_time_us")
    vec = vec.fillna(_col(k, "aiv_time_us") * _col(k, "aiv_vec_ratio"))
    vec = vec.fillna(_col(k, "aiv_time_us") * _ratio_sum(k, "aiv_vec_"))
    safe = dur.where(dur > 0)
    new["cube_busy_us"] = cube
    new["vector_busy_us"] = vec
    new["cube_share"] = cube / safe
    new["vector_share"] = vec / safe

    flops, shape_bytes = _shape_metrics(k)
    moved = _measured_bytes(k).fillna(shape_bytes)
    new["flops"] = flops
    new["achieved_tflops"] = flops / safe / 1e6  # FLOP / µs = 1e6 FLOP/s; / 1e12 -> TFLOP/s
    new["bytes_moved"] = moved
    new["arithmetic_intensity"] = flops / moved.where(moved > 0)
    new["bound_pipe"] = bound_pipe(k)
    # one concat instead of a dozen inserts: wide tables stay unfragmented
    keep = k.drop(columns=[c for c in new if c in k.columns])
    out = pd.concat([keep, pd.DataFrame(new, index=k.index)], axis=1)
    out["cube_utilization_pct"] = util
    return out


def _measured_bytes(k: pd.DataFrame) -> pd.Series:
    total = pd.Series(np.nan, index=k.index, dtype="float64")
    for side in ("aic", "aiv"):
        gbps = _col(k, f"{side}_main_mem_read_gbps").add(
            _col(k, f"{side}_main_mem_write_gbps"), fill_value=0.0
        )
        part = gbps * _col(k, f"{side}_time_us") * 1e3  # GB/s × µs = 1e3 bytes
        total = total.add(part, fill_value=0.0)
    return total


def bound_pipe(k: pd.DataFrame) -> pd.Series:
    names = list(PIPE_RATIOS)
    mat = (
        np.column_stack(
            [
                np.fmax.reduce([_col(k, c).to_numpy() for c in PIPE_RATIOS[p]])
                if len(PIPE_RATIOS[p]) > 1
                else _col(k, PIPE_RATIOS[p][0]).to_numpy()
                for p in names
            ]
        )
        if len(k)
        else np.empty((0, len(names)))
    )
    has = ~np.isnan(mat).all(axis=1) if len(k) else np.zeros(0, dtype=bool)
    filled = np.where(np.isnan(mat), -1.0, mat)
    idx = filled.argmax(axis=1) if len(k) else np.zeros(0, dtype=int)
    top = filled.max(axis=1) if len(k) else np.zeros(0)
    # label = the argmax pipe, "none" below the threshold, null without ratios; gathered from a
    # small label array by Arrow (a million Python strings would cost more than the argmax)
    code = np.where(top < BOUND_THRESHOLD, len(names), idx).astype("int64")
    label_array = pa.array([*names, "none"])
    taken = pc.take(label_array, pa.array(code, mask=~has))
    out = taken.to_pandas().astype("str")
    out.index = k.index  # positional: the labels were computed row by row
    return out


# ---- shapes -> FLOPs and bytes (computed once per unique shape/dtype combination) -----------------


def _split_shapes(text: Any) -> list[list[int]] | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return [[int(d) for d in t.split(",") if d.strip()] for t in text.split(";")]
    except ValueError:
        return None


def _matmul_flops(ins: list[list[int]], outs: list[list[int]]) -> float | None:
    tensors = [s for s in ins if s]
    if len(tensors) < 2 or not outs or len(outs[0]) < 2:
        return None
    a, b, c = tensors[0], tensors[1], outs[0]
    if len(a) < 2 or len(b) < 2:
        return None
    m, n = c[-2], c[-1]
    batch = prod(c[:-2]) if len(c) > 2 else 1
    a0, a1 = a[-2], a[-1]
    b0, b1 = b[-2], b[-1]
    for k_a, other_a in ((a1, a0), (a0, a1)):  # A = [M, K] or transposed [K, M]
        if other_a != m:
            continue
        if (b0 == k_a and b1 == n) or (b1 == k_a and b0 == n):
            return 2.0 * batch * m * n * k_a
    return None


def _fa_flops(ins: list[list[int]], outs: list[list[int]], backward: bool) -> float | None:
    if len(ins) < 2 or not ins[0] or not ins[1]:
        return None
    q, kk = ins[0], ins[1]
    seq: int | None = None
    for s in ins[2:]:
        if len(s) == 2 and s[0] in q and s[1] in kk:  # atten_mask [S_q, S_kv]
            seq = s[0]
            break
    if len(q) == 4:  # BNSD (default) or BSND; softmax_max output is [B, N, S_q, 8]
        sm = outs[0] if outs and len(outs[0]) == 4 else None
        if sm and q[1] == sm[2] and q[2] == sm[1]:
            b, sq, h, skv = q[0], q[1], q[2] * q[3], kk[1]
        else:
            b, sq, h, skv = q[0], q[2], q[1] * q[3], kk[2]
    elif len(q) == 3:  # BSH (default) or SBH, told apart by the mask's sequence length
        if seq is not None and q[0] == seq and q[1] != seq:
            b, sq, h, skv = q[1], q[0], q[2], kk[0]
        else:
            b, sq, h, skv = q[0], q[1], q[2], kk[1]
    else:
        return None
    flops = 4.0 * b * sq * skv * h
    return flops * 2.5 if backward else flops


def _tensor_bytes(shapes: list[list[int]] | None, dtypes: Any) -> float | None:
    if not shapes or not isinstance(dtypes, str):
        return None
    types = dtypes.split(";")
    total = 0
    for i, shp in enumerate(shapes):
        if not shp:
            continue  # empty slot = optional input not given
        name = types[i].strip().upper().removeprefix("DT_") if i < len(types) else ""
        size = DTYPE_BYTES.get(name)
        if size is None:
            return None
        total += prod(shp) * size
    return float(total)


def _one_combo(op_type: Any, ins_s: Any, outs_s: Any, in_dt: Any, out_dt: Any) -> tuple[float, float]:
    ins, outs = _split_shapes(ins_s), _split_shapes(outs_s)
    flops: float | None = None
    t = op_type if isinstance(op_type, str) else ""
    if ins is not None and outs is not None:
        if t.startswith(("MatMul", "BatchMatMul")):
            flops = _matmul_flops(ins, outs)
        elif t.startswith("FlashAttentionScore"):
            flops = _fa_flops(ins, outs, backward="Grad" in t)
    bi, bo = _tensor_bytes(ins, in_dt), _tensor_bytes(outs, out_dt)
    nbytes = bi + bo if bi is not None and bo is not None else None
    return (flops if flops is not None else np.nan, nbytes if nbytes is not None else np.nan)


def _shape_metrics(k: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    nan = pd.Series(np.nan, index=k.index, dtype="float64")
    if not len(k) or "input_shapes" not in k:
        return nan, nan.copy()
    # one code per unique combination: factorize each key column, fold the codes pairwise
    codes = np.zeros(len(k), dtype="int64")
    for c in _FLOP_KEYS:
        if c not in k:
            continue
        col_codes, col_uniques = pd.factorize(k[c], use_na_sentinel=False)
        codes, _ = pd.factorize(codes * (len(col_uniques) + 1) + col_codes)
    first = pd.Series(np.arange(len(k))).groupby(codes, sort=True).first().to_numpy()
    rows = k.iloc[first]
    combos = zip(*(rows[c].tolist() if c in rows else [None] * len(rows) for c in _FLOP_KEYS), strict=True)
    vals = np.array(
        [_one_combo(*(None if pd.isna(x) else x for x in u)) for u in combos], dtype="float64"
    ).reshape(-1, 2)
    return (pd.Series(vals[codes, 0], index=k.index), pd.Series(vals[codes, 1], index=k.index))


# ---- profile summary -------------------------------------------------------------------------------


def _busy_union_us(k: pd.DataFrame) -> float | None:
    """Device busy time = union of kernel intervals (overlapping streams counted once)."""
    if "start_ns" not in k or not k["start_ns"].notna().any():
        return None
    ok = k["start_ns"].notna() & k["duration_us"].notna()
    start = k.loc[ok, "start_ns"].astype("int64").to_numpy()
    end = start + np.round(k.loc[ok, "duration_us"].to_numpy() * 1000.0).astype("int64")
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    run_end = np.maximum.accumulate(end)
    new_seg = np.ones(len(start), dtype=bool)
    new_seg[1:] = start[1:] > run_end[:-1]
    seg_id = np.cumsum(new_seg) - 1
    seg_start = start[new_seg]
    seg_end = np.zeros(len(seg_start), dtype="int64")
    np.maximum.at(seg_end, seg_id, end)
    return float((seg_end - seg_start).sum()) / 1000.0


def profile_summary(profile: Profile, top: int = 10) -> dict[str, Any]:
    """JSON-serialisable overview: busy time, time by core type, pipe shares, top kernels.

    Shares are time-weighted over kernels that carry the ratio: Σ ratio × duration / Σ duration.
    Pipes run concurrently, so the shares do not add up to 1. "data_movement" uses the busiest MTE
    pipe of each kernel (mte1/mte2/mte3, both sides); "scalar" the busier side's scalar ratio.
    """
    k = profile.kernels
    dur = _col(k, "duration_us")
    total = float(dur.sum()) if len(k) else 0.0
    by_core: dict[str, float] = {}
    if "core_type" in k and len(k):
        by_core = {
            str(c): round(float(v), 3)
            for c, v in dur.groupby(k["core_type"].astype("str").fillna("UNKNOWN")).sum().items()
        }

    def share(ratio: pd.Series) -> float | None:
        ok = ratio.notna() & dur.notna()
        den = float(dur[ok].sum())
        return round(float((ratio[ok] * dur[ok]).sum()) / den, 4) if den > 0 else None

    def fmax(*cols: str) -> pd.Series:
        arrs = [_col(k, c).to_numpy() for c in cols]
        return pd.Series(np.fmax.reduce(arrs) if len(arrs) > 1 else arrs[0], index=k.index)

    shares = {
        "cube": share(_col(k, "aic_cube_ratio")),
        "vector": share(_col(k, "aiv_vec_ratio")),
        "data_movement": share(
            fmax("aic_mte1_ratio", "aic_mte2_ratio", "aic_mte3_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio")
        ),
        "scalar": share(fmax("aic_scalar_ratio", "aiv_scalar_ratio")),
    }
    tops: list[dict[str, Any]] = []
    if len(k):
        g = pd.DataFrame(
            {
                "name": k["name"].astype("str"),
                "d": dur,
                "core_type": k["core_type"].astype("str") if "core_type" in k else None,
            }
        )
        agg = g.groupby("name", sort=False).agg(
            count=("d", "size"),
            total_us=("d", "sum"),
            mean_us=("d", "mean"),
            core_type=("core_type", "first"),
        )
        agg = agg.sort_values("total_us", ascending=False).head(top)
        for name, row in agg.iterrows():
            tops.append(
                {
                    "name": str(name),
                    "core_type": None if pd.isna(row["core_type"]) else str(row["core_type"]),
                    "count": int(row["count"]),
                    "total_us": round(float(row["total_us"]), 3),
                    "mean_us": round(float(row["mean_us"]), 3),
                    "share": round(float(row["total_us"]) / total, 4) if total > 0 else None,
                }
            )
    busy = _busy_union_us(k)
    return {
        "kernel_count": len(k),
        "total_kernel_us": round(total, 3),
        "device_busy_us": round(busy, 3) if busy is not None else round(total, 3),
        "time_by_core_type_us": by_core,
        "shares": shares,
        "top_kernels": tops,
    }
