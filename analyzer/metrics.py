"""Derived per-kernel metrics (vectorised; design.md §3, formats doc §10; docs/metrics.md defines each).

Conventions chosen here (the reports and rules rely on them):

- Times of a side (`aic_time_us`, `aic_<pipe>_time_us`, `aiv_...`) are per core: the time one core
  of that side spent, averaged over the cores the launch used (op_summary's `aicore_time(us)` is
  that; `msprof op` block rows are converted when they are read).
- `*_ratio` columns are the profiler's: a pipe's time over its side's time (`aic_mte2_ratio` =
  `aic_mte2_time` / `aicore_time`). On a mixed kernel whose Cube side works 1.8 µs of a 225 µs
  launch a ratio of 0.87 is 1.6 µs.
- `*_share` columns (derived here) are relative to the launch: a pipe's busy time per core over
  `duration_us`, 0-1, the same meaning for every source: `aic_<pipe>_share` = pipe time (or ratio x
  side time) / duration; `aic_busy_share` = `aic_time_us` / duration. `cube_share` = Cube pipe,
  `vector_share` = Vector pipe; `cube_busy_us` / `vector_busy_us` the same as times. Rules that ask
  "how much of the kernel does this pipe take" read shares; ratios say how a side spends its own
  time.
- `cube_utilization_calc_pct` = aic_total_cycles / (clock x chip AIC count x duration) x 100 (the
  profiler's formula) where the inputs exist, not on coupled-chip tables (their total cycles include
  the Vector unit's); `cube_utilization_pct` keeps the file's value and is filled from the
  calculation only where the file had none.
- Work: `cube_flops` = measured Cube FLOPs (ArithmeticUtilization `aic_cube_fops`, plus the older
  `aiv_cube_fops`) when present, else from shapes (tilescope.flops: MatMul*/BatchMatMul* =
  2·batch·M·N·K with K matched in the input dims; FlashAttentionScore = 4·B·S_q·S_kv·H_q, causal
  masking ignored, the Grad x2.5); `vector_flops` = measured Vector FLOPs (`aiv_vector_fops`, the
  older `aic_vector_fops`, `msprof op`'s `aiv_vec_fops`); `flops` = their sum.
- `bytes_moved`: measured GM traffic when the Memory group is present (read+write GB/s x that side's
  time), else the sizes of all input and output tensors (tilescope.flops; each read or written
  once: a lower bound).
  `achieved_gbps` = bytes_moved / duration (the launch's bandwidth; never a sum of per-block rates).
- Speed of light (`sol_us`): the time the launch would take if its busiest resource ran at the
  chip's ceiling for the cores it used (its grid, at most the chip's cores): max(cube_flops / the
  Cube peak of those cores, vector_flops / their Vector peak, bytes_moved / min(GM bandwidth,
  their single-core GM->L1 / GM->UB path rates)); `sol_bound` names the resource ("cube",
  "vector", "memory"), `sol_pct` = sol_us / duration x 100 (achieved % of speed of light). Null
  when the launch carries neither work nor traffic. Never clamped: a launch faster than its ceiling
  (sol_us > duration, sol_pct > 100) means the chip figure or the work/traffic model is wrong for
  it; the summary flags it and leaves it out of the speed-of-light total (`summary.speed_of_light`)
  and savings are bounded by `bounded_sol` (at most the duration; unknown beyond 5 % over it).
  `sol_device_us`: the same with every core of the chip (GM bytes at the GM bandwidth), at most
  the bounded speed of light, the bound of a fix that changes the grid (TS401).
- `bound_pipe`: the pipe with the largest share of the launch among cube, vector, mte1, mte2, mte3,
  fixpipe, scalar (both sides, max); "none" when every share is below 0.8 (msprof-analyze's
  `operator_bound_ratio`); null when the kernel has no pipe data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tilescope.chips import CHIPS, ChipSpec
from tilescope.columns import AI_CORE, AI_VECTOR_CORE, MIX_AIC, MIX_AIV
from tilescope.flops import shape_metrics

# pandas is imported inside the DataFrame code paths: the Arrow-only file output of `tilescope
# kernels` computes the same derived metrics without paying its ~0.2 s import
if TYPE_CHECKING:
    import pandas as pd


BOUND_THRESHOLD = 0.8
# The pipes of each side, as the profiler names them (`aic_cube_*`, `aiv_vec_*`, ...).
SIDE_PIPES: dict[str, tuple[str, ...]] = {
    "aic": ("cube", "scalar", "mte1", "mte2", "mte3", "fixpipe"),
    "aiv": ("vec", "scalar", "mte2", "mte3"),
}
# bound_pipe label -> the share columns it takes the largest of
PIPE_SHARES: dict[str, tuple[str, ...]] = {
    "cube": ("aic_cube_share",),
    "vector": ("aiv_vec_share",),
    "mte1": ("aic_mte1_share",),
    "mte2": ("aic_mte2_share", "aiv_mte2_share"),
    "mte3": ("aic_mte3_share", "aiv_mte3_share"),
    "fixpipe": ("aic_fixpipe_share",),
    "scalar": ("aic_scalar_share", "aiv_scalar_share"),
}
# Columns that carry a coupled-chip table's un-prefixed metrics; their total cycles count the Vector
# unit too, so no Cube utilisation is computed from them.
COUPLED_MARKER = "memory_bound"


def float_column(df: pd.DataFrame, name: str) -> pd.Series:
    """A column as float64: NaN where absent, missing or not a number.

    A float64 column is returned as it is, not through `pd.to_numeric`, which copies it: the derived
    metrics, the summary, the report and the rules read their columns here, and those copies came
    to ~30 columns (8 bytes per launch each) at a time. Copy-on-write keeps the table safe: writing
    to the Series copies it, and its `to_numpy()` is a read-only view.
    """
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    if name not in df:
        return pd.Series(np.nan, index=df.index, dtype="float64")
    col = df[name]
    if col.dtype == np.float64:
        return col
    return pd.to_numeric(col, errors="coerce").astype("float64")


def text_column(df: pd.DataFrame, name: str) -> pd.Series:
    """A text column as `str` (missing values NaN), also when the table holds it as a Categorical
    (`analyze` and `info` load text so: `io.tables.to_frame(categories=True)`). A grouping or a
    `value_counts` of a Categorical lists every category, seen in the group or not, and its `.str`
    results are not `str`: readers that need the values take the column here."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    col = df[name]
    if isinstance(col.dtype, pd.CategoricalDtype):
        return as_str(col)
    return col


def as_str(col: pd.Series) -> pd.Series:
    """`col.astype("str")`; a Categorical (a loaded table's text) converts each category once and
    picks by code (-1, a missing value: NaN) — equal, ~20x faster than converting every launch."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    if not isinstance(col.dtype, pd.CategoricalDtype):
        return col.astype("str")
    cats = col.cat.categories.astype("str")
    picked = cats.take(col.cat.codes.to_numpy(), allow_fill=True, fill_value=np.nan)
    return pd.Series(picked, index=col.index, name=col.name)


class KernelColumns:
    """Read-only column access over a kernel table held as a pandas DataFrame or an Arrow table.

    The derived-metric formulas and the chip inference work on numpy arrays taken from here, so one
    copy of them serves both the pandas canonical table and the Arrow-only file output of `kernels`.
    """

    def __init__(self, table: pd.DataFrame | pa.Table) -> None:
        self.table = table
        self.is_arrow = isinstance(table, pa.Table)
        self.names: list[str] = list(table.column_names if isinstance(table, pa.Table) else table.columns)
        self.n = table.num_rows if isinstance(table, pa.Table) else len(table)
        # the derived metrics read some columns several times (a ratio for its pipe and for its
        # busy time); each is converted once. The arrays are read-only, so sharing them is safe.
        self._floats: dict[str, np.ndarray] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def floats(self, name: str) -> np.ndarray:
        """float64 values, NaN for null/absent/non-numeric (a read-only array)."""
        if (cached := self._floats.get(name)) is None:
            cached = self._floats[name] = self._to_floats(name)
            cached.flags.writeable = False
        return cached

    def _to_floats(self, name: str) -> np.ndarray:
        if name not in self.names:
            return np.full(self.n, np.nan)
        if isinstance(self.table, pa.Table):
            col = self.table.column(name)
            try:
                col = pc.cast(col, pa.float64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # text: pandas' coercion rules
                return float_column(self.table.select([name]).to_pandas(), name).to_numpy()
            return np.asarray(col.to_numpy(), dtype="float64")
        return float_column(self.table, name).to_numpy()

    def text_in(self, name: str, values: list[str]) -> np.ndarray:
        """Boolean mask: the text value is one of `values` (null -> False)."""
        if name not in self.names:
            return np.zeros(self.n, dtype=bool)
        if isinstance(self.table, pa.Table):
            chunked = self.table.column(name)
            wanted = pa.array(values, pa.string())
            if pa.types.is_dictionary(chunked.type):
                # test the few dictionary values, then gather by index (no million-row text cast)
                parts = [
                    pc.take(pc.is_in(pc.cast(c.dictionary, pa.string()), value_set=wanted), c.indices)
                    for c in chunked.chunks
                ]
                hit: pa.ChunkedArray = pa.chunked_array(parts, pa.bool_())
            else:
                hit = pc.is_in(pc.cast(chunked, pa.string()), value_set=wanted)
            return np.asarray(pc.fill_null(hit, False).to_numpy(zero_copy_only=False), dtype=bool)
        return self.table[name].astype("str").isin(values).to_numpy(dtype=bool)

    def codes(self, name: str) -> tuple[np.ndarray, list[Any]]:
        """Factorised column: (int codes, unique values); null is a value of its own."""
        if isinstance(self.table, pa.Table):
            chunked = self.table.column(name)
            if pa.types.is_dictionary(chunked.type) and chunked.num_chunks:
                # already encoded: the indices are the codes (null -> one extra code)
                unified = chunked.unify_dictionaries()
                values = unified.chunk(0).dictionary.to_pylist()
                idx = pa.chunked_array([c.indices for c in unified.chunks]).combine_chunks()
                codes = pc.fill_null(pc.cast(idx, pa.int64()), len(values)).to_numpy()
                return codes, [*values, None]
            col = chunked.combine_chunks()
            if pa.types.is_dictionary(col.type):
                col = col.cast(col.type.value_type)
            enc = pc.dictionary_encode(col, null_encoding="encode")
            return enc.indices.to_numpy(zero_copy_only=False).astype("int64"), enc.dictionary.to_pylist()
        # deferred: pandas (~0.3 s) only when this builds a frame
        import pandas as pd

        col_codes, uniques = pd.factorize(self.table[name], use_na_sentinel=False)
        return col_codes.astype("int64"), [None if u is pd.NA else u for u in uniques]


def _fill(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`a` where present, else `b` (Series.fillna)."""
    return np.where(np.isnan(a), b, a)


def _add_fill0(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b treating a missing side as 0; NaN only when both are missing (Series.add(fill_value=0))."""
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a, a + b))


def _sum_present(cols: KernelColumns, *names: str) -> np.ndarray:
    """`_add_fill0` over the columns the table has (an absent one adds nothing: no NaN arrays)."""
    present = [cols.floats(c) for c in names if c in cols]
    if not present:
        return np.full(cols.n, np.nan)
    out = present[0]
    for a in present[1:]:
        out = _add_fill0(out, a)
    return out


def _positive(a: np.ndarray) -> np.ndarray:
    return np.where(a > 0, a, np.nan)


# ArithmeticUtilization splits the Cube and Vector ratios by data type (formats doc §3.2): their sum is
# the pipe's ratio. Only these: other aiv_vec_*_ratio columns (bank conflicts, ...) are not busy time.
DTYPE_RATIOS = {
    "aic": ("aic_cube_fp16_ratio", "aic_cube_int8_ratio"),
    "aiv": ("aiv_vec_fp32_ratio", "aiv_vec_fp16_ratio", "aiv_vec_int32_ratio", "aiv_vec_int16_ratio",
            "aiv_vec_misc_ratio"),
}


def _side_time(cols: KernelColumns, side: str, coupled: bool) -> np.ndarray:
    """A side's time per core; a coupled chip has one AI Core, whose time both sides' ratios share."""
    if side == "aiv" and coupled and "aiv_time_us" not in cols:
        return cols.floats("aic_time_us")
    return cols.floats(f"{side}_time_us")


def _pipe_time(cols: KernelColumns, side: str, pipe: str, coupled: bool = False) -> np.ndarray | None:
    """Busy time per core of one pipe: the profiler's time column, else ratio x side time (for the
    Cube and Vector pipes, the ArithmeticUtilization per-dtype ratios summed); None when the table
    has none of them (its metric group was not collected)."""
    time_col, ratio_col = f"{side}_{pipe}_time_us", f"{side}_{pipe}_ratio"
    by_dtype = pipe in ("cube", "vec") and any(c in cols for c in DTYPE_RATIOS[side])
    if time_col not in cols and ratio_col not in cols and not by_dtype:
        return None
    side_time = _side_time(cols, side, coupled)
    time = _fill(cols.floats(time_col), side_time * cols.floats(ratio_col))
    return _fill(time, side_time * _sum_present(cols, *DTYPE_RATIOS[side])) if by_dtype else time


def _share(time: np.ndarray, safe: np.ndarray) -> np.ndarray:
    """time / duration held to 0-1 (a few % over 1 is the profiler's rounding of short kernels)."""
    return np.clip(time / safe, 0.0, 1.0)


def derived_metrics(
    cols: KernelColumns, chip: ChipSpec, coupled: bool = False
) -> dict[str, np.ndarray | pa.Array]:
    """The derived columns of the module docstring, in output order; `cube_utilization_pct` last.

    float64 numpy arrays (NaN = null) except the labels (`unit`, `bound_pipe`, `sol_bound`: Arrow
    strings). `coupled`: the table is a coupled chip's (SourceInfo.coupled).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        new: dict[str, np.ndarray | pa.Array] = {}
        dur = cols.floats("duration_us")
        safe = _positive(dur)
        util = cols.floats("cube_utilization_pct")
        coupled = coupled or COUPLED_MARKER in cols
        unit = _unit_codes(cols)
        new["unit"] = _unit_labels(unit)
        if chip.clock_mhz and chip.aic_count and "aic_total_cycles" in cols and not coupled:
            calc = cols.floats("aic_total_cycles") / (chip.clock_mhz * chip.aic_count * safe) * 100.0
            new["cube_utilization_calc_pct"] = calc
            util = _fill(util, calc)

        # the Cube and Vector pipes' times are kept for the columns below; the other pipes' are
        # dropped once their share is taken (nine launch-long arrays less at the peak)
        times: dict[str, np.ndarray] = {}
        for side, pipes in SIDE_PIPES.items():
            if f"{side}_time_us" in cols:
                new[f"{side}_busy_share"] = _share(cols.floats(f"{side}_time_us"), safe)
            for pipe in pipes:
                time = _pipe_time(cols, side, pipe, coupled)
                if time is not None:
                    new[f"{side}_{pipe}_share"] = _share(time, safe)
                    if f"{side}_{pipe}" in ("aic_cube", "aiv_vec"):
                        times[f"{side}_{pipe}"] = time
        # the Cube and Vector pipes: the same values as aic_cube_share / aiv_vec_share, by name
        cube = times.get("aic_cube", np.full(cols.n, np.nan))
        vec = times.get("aiv_vec", np.full(cols.n, np.nan))
        new["cube_busy_us"] = np.minimum(cube, dur)
        new["vector_busy_us"] = np.minimum(vec, dur)
        new["cube_share"] = _share(cube, safe)
        new["vector_share"] = _share(vec, safe)

        shape_flops, shape_bytes = shape_metrics(cols)
        measured_cube = _positive(_sum_present(cols, "aic_cube_fops", "aiv_cube_fops"))
        cube_flops = _fill(measured_cube, shape_flops)
        # `aiv_vec_fops` is `msprof op`'s name for the Vector FLOPs (ArithmeticUtilization.csv)
        vector_names = ("aiv_vector_fops", "aic_vector_fops", "aiv_vec_fops")
        vector_flops = _positive(_sum_present(cols, *vector_names))
        has_vector = any(c in cols for c in vector_names)
        flops = _add_fill0(cube_flops, vector_flops) if has_vector else cube_flops
        moved, source = moved_bytes(cols, shape_bytes)
        new["cube_flops"] = cube_flops
        new["vector_flops"] = vector_flops
        new["flops"] = flops
        new["achieved_tflops"] = flops / safe / 1e6  # FLOP / µs = 1e6 FLOP/s; / 1e12 -> TFLOP/s
        new["bytes_moved"] = moved
        new["bytes_source"] = source
        new["achieved_gbps"] = moved / safe / 1e3  # bytes / µs = 1e6 B/s; / 1e9 -> GB/s
        new["arithmetic_intensity"] = flops / _positive(moved)
        sol, bound, device_sol = _speed_of_light(cols, chip, unit, cube_flops, vector_flops, moved)
        # the ceiling time as computed, also above the measured one (the launch ran faster than
        # its ceiling: the chip figure or the work/traffic model is wrong for it): shown as it is,
        # never clamped to 100 % (#26); savings use `bounded_sol`
        new["sol_us"] = sol
        new["sol_pct"] = sol / safe * 100.0
        bounded = bounded_sol(sol, dur)
        new["sol_device_us"] = np.where(np.isnan(bounded), np.nan, np.minimum(device_sol, bounded))
        new["sol_bound"] = bound
        new["bound_pipe"] = _bound_pipe_labels(new, cols.n)
        new["cube_utilization_pct"] = util
    return new


UNIT_LABELS = ("cube", "vector", "mix")
# `_unit_codes` tells the two mixed kinds apart (their grids differ); both are labelled "mix"
_UNIT_CODE_LABELS = (*UNIT_LABELS, "mix")


def _unit_codes(cols: KernelColumns) -> np.ndarray:
    """Which AI Core side a launch ran on: 0 cube, 1 vector, 2 MIX_AIC, 3 MIX_AIV, -1 no AI Core task.

    AI_CORE rows whose work is all in aiv_* (older CANN types vector kernels AI_CORE with
    aic_total_cycles 0) ran on the Vector cores: their grid is measured against the AIV count.
    """
    if "core_type" not in cols or not cols.n:
        return np.full(cols.n, -1, dtype="int64")
    # one code per distinct core type (a handful), gathered per row
    type_codes, types = cols.codes("core_type")
    per_type = {AI_CORE: 0, AI_VECTOR_CORE: 1, MIX_AIC: 2, MIX_AIV: 3}
    code = np.array([per_type.get(str(t), -1) for t in types], dtype="int64")[type_codes]
    if (code == 0).any() and "aiv_total_cycles" in cols:
        vector_only = ~(cols.floats("aic_total_cycles") > 0) & (cols.floats("aiv_total_cycles") > 0)
        code[(code == 0) & vector_only] = 1
    return code


def _unit_labels(code: np.ndarray) -> pa.Array:
    return pc.take(pa.array(_UNIT_CODE_LABELS), pa.array(np.maximum(code, 0), mask=code < 0))


SOL_LABELS = ("cube", "vector", "memory")
# the profiler rounds durations; a ceiling time up to 5 % over the measured one is taken as equal
# when it bounds a saving
SOL_TOLERANCE = 1.05


def bounded_sol(sol: Any, dur: Any) -> np.ndarray:
    """The speed of light a saving is bounded by (`summary.kernel_time`): the ceiling time, at most
    the measured time; unknown (NaN) where the ceiling time exceeds the measured one by more than
    SOL_TOLERANCE — the launch ran well above its ceiling, so the model says nothing about what is
    left to recover. Up to the tolerance the launch is taken to be at its speed of light."""
    sol = np.asarray(sol, dtype="float64")
    dur = np.asarray(dur, dtype="float64")
    with np.errstate(invalid="ignore"):
        return np.where(sol > dur * SOL_TOLERANCE, np.nan, np.minimum(sol, dur))


def _cores_used(cols: KernelColumns, chip: ChipSpec, unit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cube and Vector cores each launch ran on: its grid, at most the chip's cores of that kind.

    A MIX_AIC launch runs Block Dim cube blocks and Mix Block Dim vector blocks, a MIX_AIV the
    reverse; a launch without a Block Dim is taken to use every core of its kind.
    """
    aic = float(chip.aic_count or np.nan)
    aiv = float(chip.aiv_count or np.nan)
    block, mix = cols.floats("block_dim"), cols.floats("mix_block_dim")
    is_cube, is_vector, is_mix, mix_aiv = unit == 0, unit == 1, unit >= 2, unit == 3
    cube_blocks = np.where(is_mix, np.where(mix_aiv, mix, block), np.where(is_cube, block, 0.0))
    vector_blocks = np.where(is_mix, np.where(mix_aiv, block, mix), np.where(is_vector, block, 0.0))
    # a missing or zero Block Dim says nothing about the grid: all cores of the side the launch used
    cube_blocks = np.where(np.isnan(cube_blocks) | ((cube_blocks <= 0) & is_cube), aic, cube_blocks)
    vector_blocks = np.where(np.isnan(vector_blocks) | ((vector_blocks <= 0) & is_vector), aiv, vector_blocks)
    return np.minimum(cube_blocks, aic), np.minimum(vector_blocks, aiv)


def _ceiling_times(
    cube_flops: np.ndarray,
    vector_flops: np.ndarray,
    moved: np.ndarray,
    cube_cores: np.ndarray | float,
    vector_cores: np.ndarray | float,
    gm_ceiling_gbps: np.ndarray | float,
    clock: float,
    per_cycle: np.ndarray,
    vector_per_cycle: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Cube, Vector and memory times (µs) of the work and traffic at these ceilings (NaN where
    the launch has no such work or the ceiling is unknown)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t_cube = cube_flops / (cube_cores * clock * per_cycle)  # FLOP / (FLOP per µs)
        t_vector = vector_flops / (vector_cores * clock * vector_per_cycle)
        t_memory = moved / (gm_ceiling_gbps * 1e3)  # GB/s = 1e3 bytes per µs
    return (np.asarray(t_cube, dtype="float64"), np.asarray(t_vector, dtype="float64"),
            np.asarray(t_memory, dtype="float64"))


def _speed_of_light(
    cols: KernelColumns,
    chip: ChipSpec,
    unit: np.ndarray,
    cube_flops: np.ndarray,
    vector_flops: np.ndarray,
    moved: np.ndarray,
) -> tuple[np.ndarray, pa.Array, np.ndarray]:
    """Per launch: the largest of the three ceiling times (µs), which one it is, and the same
    largest time with every core of the chip.

    Ceilings for the cores the launch used (its grid): Cube FLOP/s = cores x clock x FLOP/cycle,
    Vector likewise, and GM bytes at min(GM bandwidth, the used cores' single-core path rates:
    GM->L1 per Cube core, GM->UB per Vector core; chips.md §2a). With every core (the bound of a
    fix that changes the grid, TS401, whose new grid's own speed of light is not known): the chip's
    core counts and its GM bandwidth.
    """
    n = cols.n
    nan = np.nan
    cube_cores, vector_cores = _cores_used(cols, chip, unit)
    all_aic, all_aiv = float(chip.aic_count or nan), float(chip.aiv_count or nan)
    # a side with work but no cores in the grid: the work says the side ran; all its cores
    cube_cores = np.where((cube_cores > 0) | np.isnan(cube_flops), cube_cores, all_aic)
    vector_cores = np.where((vector_cores > 0) | np.isnan(vector_flops), vector_cores, all_aiv)
    gm = float(chip.hbm_bandwidth_gbps or nan)
    ceiling = np.full(n, gm)
    if chip.core_paths is not None:
        paths = (np.nan_to_num(cube_cores) * chip.core_paths.gm_to_l1
                 + np.nan_to_num(vector_cores) * chip.core_paths.gm_to_ub)
        ceiling = np.where(paths > 0, np.minimum(ceiling, paths), ceiling)
    clock = float(chip.clock_mhz or nan)
    per_cycle = _cube_flop_per_cycle(cols, chip)
    shared = (clock, per_cycle, float(chip.vector_flop_per_cycle_per_aiv))
    t_cube, t_vector, t_memory = _ceiling_times(
        cube_flops, vector_flops, moved, cube_cores, vector_cores, ceiling, *shared
    )
    # fmax skips NaN; the label is the first term equal to the maximum (cube, vector, memory)
    sol = np.fmax(np.fmax(t_cube, t_vector), t_memory)
    which = np.zeros(n, dtype="int64")
    which[(t_vector == sol) & (t_cube != sol)] = 1
    which[(t_memory == sol) & (t_cube != sol) & (which == 0)] = 2
    labels = pc.take(pa.array(SOL_LABELS), pa.array(which, mask=np.isnan(sol)))
    device = np.fmax.reduce(_ceiling_times(cube_flops, vector_flops, moved, all_aic, all_aiv, gm, *shared))
    return sol, labels, device


def _cube_flop_per_cycle(cols: KernelColumns, chip: ChipSpec) -> np.ndarray:
    """Cube FLOP per cycle per core for each launch's first input dtype (fp16 when unknown)."""
    default = float(chip.flop_per_cycle_per_aic["float16"])
    if "input_dtypes" not in cols or not cols.n:
        return np.full(cols.n, default)
    codes, values = cols.codes("input_dtypes")
    table = {"INT8": "int8", "FLOAT": "float32", "FLOAT32": "float32"}
    per = []
    for v in values:
        # Example: "DT_INT8;DT_INT8" -> INT8; "FLOAT16;FLOAT16" -> FLOAT16 (fp16 rate)
        first = str(v).split(";")[0].strip().upper().removeprefix("DT_") if isinstance(v, str) else ""
        per.append(float(chip.flop_per_cycle_per_aic.get(table.get(first, "float16"), default)))
    return np.asarray(per, dtype="float64")[codes]


def add_derived_metrics(kernels: pd.DataFrame, chip: ChipSpec, coupled: bool = False) -> pd.DataFrame:
    """Return a new frame: `kernels` plus the derived columns of the module docstring."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    k = kernels
    derived = derived_metrics(KernelColumns(k), chip, coupled)
    util = derived.pop("cube_utilization_pct")
    new = [
        (
            v.to_pandas().astype("str").set_axis(k.index)
            if isinstance(v, pa.Array)
            else pd.Series(v, index=k.index, dtype="float64", copy=False)
        ).rename(name)
        for name, v in derived.items()
    ]
    # one concat instead of two dozen inserts, of Series rather than one new 2-D block: stacking the
    # derived arrays into a block copies ~200 MB per million rows (page faults, ~0.3 s)
    keep = k.drop(columns=[s.name for s in new if s.name in k.columns])
    out = pd.concat([keep, *new], axis=1)
    out["cube_utilization_pct"] = util
    return out


def with_derived_metrics(kernels: pd.DataFrame, chip: ChipSpec) -> pd.DataFrame:
    """`kernels` itself when it already has the derived columns (a loaded profile), else
    `add_derived_metrics` (a Profile built by hand: tests, API users)."""
    return kernels if "sol_us" in kernels.columns else add_derived_metrics(kernels, chip)


def add_derived_metrics_arrow(table: pa.Table, chip: ChipSpec, coupled: bool = False) -> pa.Table:
    """The Arrow twin of `add_derived_metrics` (same formulas, same column order; NaN -> null)."""
    derived = derived_metrics(KernelColumns(table), chip, coupled)
    util = derived.pop("cube_utilization_pct")
    out = table.drop_columns([c for c in derived if c in table.column_names])
    for name, v in derived.items():
        arr = v if isinstance(v, pa.Array) else pa.array(v, type=pa.float64(), from_pandas=True)
        out = out.append_column(name, arr)
    util_arr = pa.array(util, type=pa.float64(), from_pandas=True)
    if "cube_utilization_pct" in out.column_names:
        at = out.column_names.index("cube_utilization_pct")
        return out.set_column(at, "cube_utilization_pct", util_arr)
    return out.append_column("cube_utilization_pct", util_arr)


def _measured_bytes(cols: KernelColumns) -> np.ndarray:
    total = np.full(cols.n, np.nan)
    for side in ("aic", "aiv"):
        if f"{side}_main_mem_read_gbps" not in cols and f"{side}_main_mem_write_gbps" not in cols:
            continue  # no Memory group on this side: all-NaN, adds nothing
        read, write = cols.floats(f"{side}_main_mem_read_gbps"), cols.floats(f"{side}_main_mem_write_gbps")
        gbps = _add_fill0(read, write)
        part = gbps * cols.floats(f"{side}_time_us") * 1e3  # GB/s × µs = 1e3 bytes
        total = _add_fill0(total, part)
    return total


# `bytes_source` labels, most direct first (docs/metrics.md §3.4)
BYTES_SOURCES = ("data volume", "rate x time", "tensor shapes", "tensor shapes (above the measured)")
# `msprof op` Memory.csv's data-volume columns (KiB), summed over blocks (io.msprof_op)
VOLUME_COLUMNS = ("read_main_memory_datas_kb", "write_main_memory_datas_kb")


def moved_bytes(cols: KernelColumns, shape_bytes: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """`bytes_moved` per launch from the most direct source, and which (`bytes_source`): the
    file's data-volume columns (`msprof op`), else the Memory group's rates x side times, else the
    tensor shapes; the shapes are a floor where both exist — every input read and output written
    at least once: GM counters of data the L2 served read lower (a GroupedMatmul whose tensors hold
    2,637,888 bytes measured at 7,077)."""
    volume = np.full(cols.n, np.nan)
    if any(c in cols for c in VOLUME_COLUMNS):
        volume = _add_fill0(cols.floats(VOLUME_COLUMNS[0]), cols.floats(VOLUME_COLUMNS[1])) * 1024.0
    rated = _measured_bytes(cols)
    measured = _fill(volume, rated)
    code = np.where(~np.isnan(volume), 0, np.where(~np.isnan(rated), 1, 2))
    floor = ~np.isnan(measured) & (shape_bytes > measured)
    code = np.where(floor, 3, code)
    moved = np.where(floor, shape_bytes, _fill(measured, shape_bytes))
    known = ~np.isnan(moved)
    return moved, pc.take(pa.array(BYTES_SOURCES), pa.array(code.astype("int64"), mask=~known))


def _bound_pipe_labels(shares: dict[str, np.ndarray | pa.Array], n: int) -> pa.Array:
    names = list(PIPE_SHARES)
    if not n:
        return pa.array([], pa.string())
    # running argmax over the pipes (first pipe wins ties, as argmax does); NaN = no share
    top = np.full(n, -1.0)
    idx = np.zeros(n, dtype="int64")
    has = np.zeros(n, dtype=bool)
    for j, p in enumerate(names):
        present = [shares[c] for c in PIPE_SHARES[p] if c in shares]
        if not present:
            continue
        v = np.fmax.reduce(present) if len(present) > 1 else present[0]
        assert isinstance(v, np.ndarray)
        ok = ~np.isnan(v)
        has |= ok
        better = ok & (v > top)
        idx[better] = j
        top[better] = v[better]
    # label = the argmax pipe, "none" below the threshold, null without shares; gathered from a
    # small label array by Arrow (a million Python strings would cost more than the argmax)
    code = np.where(top < BOUND_THRESHOLD, len(names), idx).astype("int64")
    label_array = pa.array([*names, "none"])
    return pc.take(label_array, pa.array(code, mask=~has))


def bound_pipe(k: pd.DataFrame) -> pd.Series:
    """The `bound_pipe` label of every launch (derived from the pipe shares)."""
    derived = derived_metrics(KernelColumns(k), CHIPS["910B2"])  # the labels use no chip figure
    out = derived["bound_pipe"].to_pandas().astype("str")  # type: ignore[union-attr]
    out.index = k.index  # positional: the labels were computed row by row
    return out
