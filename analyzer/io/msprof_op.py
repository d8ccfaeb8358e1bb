"""`msprof op` output (formats doc §2.3, §4): per-block metric CSVs plus OpBasicInfo.csv.

Layouts:
  single      OPPROF_*/OpBasicInfo.csv + {Metric}.csv
  multi       OPPROF_*/{OpName}/{launch}/OpBasicInfo*.csv + {Metric}_{ts}.csv
  multi-dev   OPPROF_*/device{N}/{OpName}/{launch}/...

Three tables come out: `blocks` (one row per op, launch, block_id, sub_block_id), `launches` (one
row per OpBasicInfo row) and `kernels` (one row per launch, aggregated from the blocks).

Kernel-level aggregation of the block metrics, per side (aic_* over `cube*` rows, aiv_* over
`vector*` rows, where the other side is NA anyway), so that a launch row means what an op_summary
row means (analyzer/metrics.py):
  *_total_cycles, counts (*_instructions, *_fops, cache hits/misses, *_kb): summed over blocks
  *_ratio, *_rate, *_pct: cycle-weighted mean (weight = that side's total cycles per block), so a
                    block that ran longer counts more, matching op_summary's whole-kernel ratios
  *_us (times):     mean over blocks; `per_core_times` turns it into the time per core once the
                    core count is known (blocks beyond the cores run in waves on the same cores)
  *_active_gbps:    bytes / active time over all blocks (the transfer rate while the pipe moved data)
  other *_gbps:     bytes over all blocks / the side's time per core: with the per-core time it gives
                    the bytes back, and bytes / duration is the launch's bandwidth. Never a sum of
                    per-block rates, which counts each block's rate as if it ran for the whole launch.
`cube_block_rows` / `vector_block_rows` count the block rows of each side.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tilescope.columns import AI_CORE, AI_VECTOR_CORE, KERNEL_CONTRACT, MIX_AIC, MIX_AIV
from tilescope.errors import ProfileFormatError
from tilescope.io.msprof_op_layout import (
    METRIC_FILES,
    find_launch_dirs,
    metric_files,
)
from tilescope.io.tables import read_small_table
from tilescope.io.validate import csv_row
from tilescope.metrics import VOLUME_COLUMNS

BLOCK_KEYS = ["op_name", "launch", "block_id", "sub_block_id"]


@dataclass
class MsprofOpData:
    kernels: pd.DataFrame
    blocks: pd.DataFrame
    launches: pd.DataFrame
    files: list[Path] = field(default_factory=list)
    metric_groups: list[str] = field(default_factory=list)
    layout: str = "single"  # "single" | "multi"
    # what the reads left out, merged over the files (io.kernel_csv.merged_skips): {count, first, note}
    rows_skipped: dict[str, Any] | None = None
    values_out_of_range: dict[str, Any] | None = None


def _read_small_csv(path: Path, left_out: list[tuple[str, dict[str, Any]]]) -> pd.DataFrame:
    # consolidated: columns are inserted into it below; bad rows and values as a kernel table's
    return read_small_table(path, left_out).copy()


def _read_launch(
    launch_dir: Path, device: int | None, op_name: str | None, launch: int,
    left_out: list[tuple[str, dict[str, Any]]],
) -> tuple[pd.DataFrame, pd.DataFrame, list[Path], list[str]]:
    files = metric_files(launch_dir)
    basic_path = files.pop("OpBasicInfo")
    basic = _read_small_csv(basic_path, left_out)
    if "name" not in basic:
        raise ProfileFormatError(basic_path, "line 1", "missing required column 'Op Name'")
    name = op_name or (str(basic["name"].iloc[0]) if len(basic) else launch_dir.name)
    basic.insert(0, "launch", launch)
    basic.insert(0, "op_name", name)
    if device is not None:
        basic["device_id"] = device
    blocks: pd.DataFrame | None = None
    groups: list[str] = []
    for metric in METRIC_FILES:
        if metric not in files:
            continue
        part = _read_small_csv(files[metric], left_out)
        groups.append(metric)
        if "block_id" not in part:  # coupled-chip files (310P) have one row per core, no block ids
            part.insert(0, "block_id", pd.Series(np.arange(len(part)), index=part.index, dtype="Int64"))
        if "sub_block_id" not in part:
            part.insert(1, "sub_block_id", pd.Series(["core"] * len(part), dtype="str"))
        _check_unique_blocks(part, files[metric])
        if blocks is None:
            blocks = part
        else:
            # columns present in several files (aic_time_us, aic_total_cycles, ...) are taken once
            new = [c for c in part.columns if c not in blocks.columns]
            blocks = blocks.merge(
                part[["block_id", "sub_block_id", *new]],
                on=["block_id", "sub_block_id"],
                how="outer",
                sort=False,
            )
    if blocks is None:
        blocks = pd.DataFrame(
            {"block_id": pd.array([], dtype="Int64"), "sub_block_id": pd.Series([], dtype="str")}
        )
    blocks.insert(0, "launch", launch)
    blocks.insert(0, "op_name", name)
    if device is not None:
        blocks.insert(0, "device_id", device)
    return basic, blocks, [basic_path, *files.values()], groups


def _check_unique_blocks(part: pd.DataFrame, path: Path) -> None:
    """One row per (block, sub-block): a repeated row would be merged and summed twice (a
    duplicated block row gave 145 % utilisation)."""
    repeated = part.duplicated(["block_id", "sub_block_id"], keep="first")
    if repeated.any():
        i = int(np.argmax(repeated.to_numpy()))
        block, sub = part["block_id"].iloc[i], part["sub_block_id"].iloc[i]
        raise ProfileFormatError(
            path,
            csv_row(path, i),
            f"block_id {block} / sub_block_id {sub} repeats an earlier row; expected one row per block",
        )


def _check_unique_launches(launch_dirs: list[tuple[Path, int | None, str | None, int]]) -> None:
    """Each (device, operator, launch index) once: two folders read as the same launch would have
    their block rows merged and summed together."""
    seen: dict[tuple[int | None, str | None, int], Path] = {}
    for launch_dir, device, op_name, launch in launch_dirs:
        key = (device, op_name, launch)
        if key in seen:
            raise ProfileFormatError(
                launch_dir,
                None,
                f"read as launch {launch} of {op_name or 'the operator'}, as {seen[key]} is; expected one "
                "folder per launch, named by its index (0, 1, ...)",
            )
        seen[key] = launch_dir


SIDE_BLOCK_ROWS = {"aic_": "cube_block_rows", "aiv_": "vector_block_rows"}


def _side_aggregate(blocks: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per-launch aggregates of the per-block metrics (rules in the module docstring).

    Each side's launches are found once (`ngroup`) and every sum and mean is one grouped call over
    a frame of the terms: grouping each column by the key columns again factorised the keys once
    per metric, half of reading an `msprof op` profile (0.17 s of 0.36)."""
    side = blocks["sub_block_id"].astype("str").str[:4]
    frames: list[pd.DataFrame] = []
    for prefix, rows in (("aic_", side != "vect"), ("aiv_", side != "cube")):
        sub = blocks.loc[rows.to_numpy()]
        cols = [c for c in sub.columns if c.startswith(prefix) and pd.api.types.is_float_dtype(sub[c])]
        if not cols:
            continue
        frames.append(_one_side(sub, keys, prefix, cols))
    if not frames:
        return pd.DataFrame(index=blocks.groupby(keys, sort=False).size().index)
    return pd.concat(frames, axis=1)


def _one_side(sub: pd.DataFrame, keys: list[str], prefix: str, cols: list[str]) -> pd.DataFrame:
    """One side's aggregates (`_side_aggregate`), indexed by the launch keys in order of appearance.

    The terms and the ratios are NumPy arrays, not Series: each Series operation costs ~0.1 ms
    whatever its length, and with ~50 metric columns a side that was most of reading a small
    profile. The sums and means are pandas' grouped ones, as before (the same last bits)."""
    g = sub.groupby(keys, sort=False)
    index = g.size().index
    code = g.ngroup().to_numpy(dtype="float64")  # NaN: a row whose key is missing, as groupby drops it
    keep = ~np.isnan(code)
    rows = len(sub)

    def values(col: str) -> np.ndarray:
        return sub[col].to_numpy(dtype="float64", na_value=np.nan)

    cyc = f"{prefix}total_cycles"
    weight = np.where(np.isnan(w := values(cyc)), 0.0, w) if cyc in sub else np.ones(rows)
    tcol = f"{prefix}time_us"
    side_time = values(tcol) if tcol in sub else np.full(rows, np.nan)
    some: dict[str, np.ndarray] = {}  # summed, NaN where no block had a value (min_count=1)
    total: dict[str, np.ndarray] = {"n_rows": (~np.isnan(side_time)).astype("float64")}  # summed
    mean: dict[str, np.ndarray] = {}
    # NumPy warns where pandas' own arithmetic is silent (inf x 0, overflow): the same values
    with np.errstate(all="ignore"):
        for c in cols:
            x = values(c)
            if c.endswith(("_ratio", "_rate", "_pct")):
                some[f"num {c}"] = x * weight
                total[f"den {c}"] = np.where(np.isnan(x), np.nan, weight)
            elif c.endswith("_us"):
                mean[c] = x
            elif c.endswith("_gbps"):
                # a launch's bandwidth from the blocks' bytes (rate x time), never a sum of their rates;
                # example: aic_mte2_active_gbps -> its pipe's time column aic_mte2_time_us
                time_col = (c.removesuffix("_active_gbps") + "_time_us" if c.endswith("_active_gbps")
                            else tcol)
                time = values(time_col) if time_col in sub else side_time
                some[f"moved {c}"] = x * time  # GB/s x µs = 1e3 bytes
                total[f"spent {c}"] = np.where(np.isnan(x), np.nan, time)
            else:
                some[c] = x

    def grouped(terms: dict[str, np.ndarray], reduce: Callable[[Any], pd.DataFrame]) -> dict[str, np.ndarray]:
        frame = pd.DataFrame(terms, index=range(rows))
        out = reduce(frame[keep].groupby(code[keep].astype("int64"), sort=True)).reindex(range(len(index)))
        return {k: out[k].to_numpy(dtype="float64") for k in terms}

    s = grouped(some, lambda by: by.sum(min_count=1))
    t = grouped(total, lambda by: by.sum())
    m = grouped(mean, lambda by: by.mean())

    def nan_if_zero(a: np.ndarray) -> np.ndarray:
        return np.where(a == 0.0, np.nan, a)

    n_rows = t["n_rows"]
    agg: dict[str, np.ndarray] = {SIDE_BLOCK_ROWS[prefix]: n_rows}
    with np.errstate(all="ignore"):
        for c in cols:
            if c.endswith(("_ratio", "_rate", "_pct")):
                agg[c] = s[f"num {c}"] / nan_if_zero(t[f"den {c}"])
            elif c.endswith("_us"):
                agg[c] = m[c]
            elif c.endswith("_gbps"):
                moved, spent = s[f"moved {c}"], t[f"spent {c}"]
                if c.endswith("_active_gbps"):
                    agg[c] = moved / nan_if_zero(spent)
                else:  # over the mean block time: the device-level rate while the side ran, all blocks
                    agg[c] = moved / nan_if_zero(spent / nan_if_zero(n_rows))
            else:
                agg[c] = s[c]
    return pd.DataFrame(agg, index=index)


def per_core_times(kernels: pd.DataFrame, aic_count: int | None, aiv_count: int | None) -> pd.DataFrame:
    """`msprof op` launch rows with side times per core instead of per block (module docstring).

    A launch of n blocks on c cores runs its blocks in ceil(n / c) waves: each core spends
    n / min(n, c) mean block times. Bandwidths over the side time are divided by the same factor,
    so bandwidth x time (the bytes) is unchanged. Tables without block counts are returned as is.
    """
    out = kernels
    for prefix, cores in (("aic_", aic_count), ("aiv_", aiv_count)):
        rows = SIDE_BLOCK_ROWS[prefix]
        if rows not in out.columns or not cores:
            continue
        n = pd.to_numeric(out[rows], errors="coerce")
        factor: pd.Series = (n / np.minimum(n, float(cores))).where(n > 0, 1.0).fillna(1.0)
        if not (factor > 1.0).any():
            continue
        out = out.copy() if out is kernels else out
        for c in out.columns:
            if not c.startswith(prefix):
                continue
            if c.endswith("_us"):
                out[c] = out[c] * factor
            elif c.endswith("_gbps") and not c.endswith("_active_gbps"):
                out[c] = out[c] / factor
    return out


def _kernels_from(launches: pd.DataFrame, blocks: pd.DataFrame) -> pd.DataFrame:
    keys = ["op_name", "launch"]
    agg = _side_aggregate(blocks, keys).reset_index() if len(blocks) else pd.DataFrame(columns=keys)
    volume = [c for c in VOLUME_COLUMNS if c in blocks.columns]
    if volume and len(blocks):  # the file's own data volumes, every block's (both sides) summed
        agg = agg.merge(blocks.groupby(keys, sort=False)[volume].sum(min_count=1).reset_index(), on=keys)
    base = launches.rename(columns={"name": "basic_name"})
    k = base.merge(agg, on=keys, how="left") if len(agg.columns) > 2 else base
    k["name"] = k["basic_name"].astype("str") if "basic_name" in k else k["op_name"].astype("str")
    k = k.drop(columns=[c for c in ("basic_name",) if c in k])
    aic = (
        k["aic_total_cycles"].fillna(0.0) > 0 if "aic_total_cycles" in k else pd.Series(False, index=k.index)
    )
    aiv = (
        k["aiv_total_cycles"].fillna(0.0) > 0 if "aiv_total_cycles" in k else pd.Series(False, index=k.index)
    )
    labels = np.full(len(k), None, dtype=object)
    labels[aiv.to_numpy()] = AI_VECTOR_CORE
    labels[aic.to_numpy()] = AI_CORE
    labels[(aic & aiv).to_numpy()] = MIX_AIC
    # OpBasicInfo's `Op Type` is the launch's own type, and the only one when no metric file was
    # asked for (`--aic-metrics` left out gives OpBasicInfo alone). It wins over the cycles: a mix
    # kernel whose Cube side did no work still holds its AIC cores, and its Block Dim counts them.
    k["core_type"] = with_declared_core_types(k, labels)
    k["step_id"] = launch_steps(k)
    for col in KERNEL_CONTRACT:
        if col not in k:
            k[col] = np.nan
    k["start_ns"] = pd.array([pd.NA] * len(k), dtype="Int64")
    return k


# OpBasicInfo `Op Type` -> the task type op_summary gives the same launch (formats doc §6)
OP_TYPE_CORE = {"vector": AI_VECTOR_CORE, "aiv": AI_VECTOR_CORE, "cube": AI_CORE, "aic": AI_CORE,
                "mix": MIX_AIC}


def with_declared_core_types(k: pd.DataFrame, measured: np.ndarray | None = None) -> pd.Series:
    """Each launch's core type as OpBasicInfo's `Op Type` declares it, else `measured` (the types
    the block cycles give). A mix kernel is MIX_AIC (Block Dim counts AIC blocks, Mix Block Dim the
    AIV ones) unless its name says it is MIX_AIV, as TileLang's and Ascend C's `_mix_aiv` kernels do."""
    fallback = np.full(len(k), None, dtype=object) if measured is None else measured
    if "op_type" not in k:
        return pd.Series(fallback, index=k.index, dtype="str")
    kind = k["op_type"].astype("str").str.strip().str.lower()
    declared = kind.map(OP_TYPE_CORE).astype("object")
    mix_aiv = (kind == "mix") & k["name"].astype("str").str.lower().str.endswith("_mix_aiv")
    declared = declared.mask(mix_aiv, MIX_AIV)
    return pd.Series(np.where(declared.notna(), declared, fallback), index=k.index, dtype="str")


def launch_steps(k: pd.DataFrame) -> pd.Series:
    """A step per launch index: `msprof op --launch-count=N` (or N runs into one folder) repeats the
    application's launches N times, and launch i of every operator is the i-th repetition. diff's
    device time per step is then per repetition, with a spread over them (tilescope.diff)."""
    if "launch" in k:
        index = pd.to_numeric(k["launch"], errors="coerce")
    else:  # one OpBasicInfo file: its rows are the launches, in order, per operator
        index = k.groupby(k["name"].astype("str"), sort=False).cumcount()
    return index.astype("Int64")


def read_msprof_op(root: Path) -> MsprofOpData:
    """Read a single- or multi-operator `msprof op` directory."""
    launch_dirs = find_launch_dirs(root)
    if not launch_dirs:
        raise ProfileFormatError(root, None, "expected OpBasicInfo.csv in an msprof op (OPPROF_*) directory")
    _check_unique_launches(launch_dirs)
    all_launches: list[pd.DataFrame] = []
    all_blocks: list[pd.DataFrame] = []
    files: list[Path] = []
    groups: list[str] = []
    left_out: list[tuple[str, dict[str, Any]]] = []
    for launch_dir, device, op_name, launch in launch_dirs:
        basic, blocks, used, g = _read_launch(launch_dir, device, op_name, launch, left_out)
        all_launches.append(basic)
        all_blocks.append(blocks)
        files.extend(used)
        groups.extend(x for x in g if x not in groups)
    launches = pd.concat(all_launches, ignore_index=True)
    blocks = pd.concat(all_blocks, ignore_index=True)
    kernels = _kernels_from(launches, blocks)
    layout = "single" if launch_dirs[0][0] == root else "multi"
    # deferred: kernel_csv (its readers) only for the merge of the notes
    from tilescope.io.kernel_csv import merged_skips

    skipped = merged_skips([e for k, e in left_out if k == "rows_skipped"])
    flagged = merged_skips([e for k, e in left_out if k == "values_out_of_range"], "values out of range")
    return MsprofOpData(kernels, blocks, launches, files, groups, layout, skipped, flagged)
