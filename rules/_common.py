"""Helpers shared by the runtime rules (TS1xx-TS4xx): column access, launch grouping, interval maths,
byte counts from shapes, and one way to build a Finding (share, severity, chip figures, locations).

Everything here works on whole columns: a rule flags rows with vectorised masks, then groups the
flagged launches per kernel name, so the only Python loops run over distinct kernels, never rows.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tilescope.chips import ChipSpec
from tilescope.engine import RuleContext
from tilescope.findings import SAVING_DEVICE, Finding, Location
from tilescope.metrics import float_column
from tilescope.profile import Profile
from tilescope.text.words import fmt_pct
from tilescope.text.words import fmt_us as words_fmt_us

CUBE_TYPES = frozenset({"AI_CORE", "MIX_AIC"})
VECTOR_TYPES = frozenset({"AI_VECTOR_CORE", "MIX_AIV"})
MIX_TYPES = frozenset({"MIX_AIC", "MIX_AIV"})
AICORE_TYPES = CUBE_TYPES | VECTOR_TYPES
# Tasks that are not AI Core work; they have no PMU metrics and must not break AI Core sequences.
NON_COMPUTE_TYPES = frozenset(
    {
        "HCCL",
        "COMMUNICATION",
        "HCCL_AI_CPU",
        "EVENT_WAIT_SQE",
        "SDMA_SQE",
        "PCIE_DMA_SQE",
        "C_CORE_SQE",
        "FFTS_PLUS",
    }
)

# Byte sizes of the dtype spellings seen in kernel tables (FLOAT16, DT_BF16, float32, ...).
DTYPE_BYTES: dict[str, int] = {
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "bf16": 2,
    "bfloat16": 2,
    "float": 4,
    "float32": 4,
    "fp32": 4,
    "float64": 8,
    "double": 8,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "hifloat8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "complex64": 8,
}
DEFAULT_DTYPE_BYTES = 2  # fp16: the common case when a table has shapes but no dtypes


# ---------------------------------------------------------------------------------------------
# column access
# ---------------------------------------------------------------------------------------------


def num(df: pd.DataFrame, col: str) -> pd.Series:
    """A numeric column as float64 (NaN where missing); an all-NaN series when the column is absent
    (`tilescope.metrics.float_column`: a float64 column is the table's own, not a copy)."""
    return float_column(df, col)


def text(df: pd.DataFrame, col: str) -> pd.Series:
    """A string column with "" for missing values."""
    if col not in df.columns:
        return pd.Series("", index=df.index, dtype="str")
    s = df[col]
    if isinstance(s.dtype, pd.CategoricalDtype):  # a loaded table's text (io.tables.to_frame)
        return _from_categories(df, [s], str)
    if pd.api.types.is_string_dtype(s.dtype) and not pd.api.types.is_object_dtype(s.dtype):
        return s.fillna("")  # already strings (Arrow-backed): no per-value conversion
    return s.astype("object").where(s.notna(), "").astype(str)


def _from_categories(df: pd.DataFrame, cols: Sequence[pd.Series], label: Callable[[str], str]) -> pd.Series:
    """A `str` Series of `df`'s rows: per row the `label` of the first of the Categoricals `cols`
    whose value is present and labels non-empty, else "". Labels are computed once per category
    and the rows are one `take`: no intermediate string column per step (3 M rows: ~100 MB each).
    """
    pick, names = _category_pick(df, cols, label)
    values = pd.array(names, dtype="str")
    return pd.Series(values.take(pick), index=df.index)


def _category_pick(
    df: pd.DataFrame, cols: Sequence[pd.Series], label: Callable[[str], str]
) -> tuple[np.ndarray, list[str]]:
    """(pick, names) for `_from_categories`: row i's text is names[pick[i]]; names ends with ""."""
    names: list[str] = []
    pick = np.full(len(df), -1, dtype=np.int64)
    for s in cols:
        labels = [label(str(c)) for c in s.cat.categories]
        codes = s.cat.codes.to_numpy().astype(np.int64)
        ok = np.asarray([lab != "" for lab in labels], dtype=bool)
        use = (pick < 0) & (codes >= 0)
        use[use] = ok[codes[use]]
        pick[use] = codes[use] + len(names)
        names.extend(labels)
    pick[pick < 0] = len(names)
    return pick, [*names, ""]


def _coded(
    df: pd.DataFrame, cols: Sequence[pd.Series], label: Callable[[str], str], whole: Callable[[], pd.Series]
) -> tuple[np.ndarray, np.ndarray]:
    """(codes, labels) of a text column: row i's text is labels[codes[i]], and two rows have equal
    text if and only if they have equal codes (labels are distinct). From the Categoricals' codes
    when `cols` are all Categorical (no per-row string), else by factorising `whole()`."""
    if cols and all(isinstance(s.dtype, pd.CategoricalDtype) for s in cols):
        pick, names = _category_pick(df, cols, label)
        # two categories may give one label ("" for a missing value and an empty category, or
        # case-folded core types): renumber the labels so that equal text has one code
        canon, uniq = pd.factorize(np.asarray(names, dtype=object))
        return canon.astype(_code_type(len(uniq)))[pick], np.asarray(uniq, dtype=object)
    codes, found = pd.factorize(whole())
    labels = np.asarray(found, dtype=object)
    if (codes < 0).any():  # not expected: the text helpers fill missing values with ""
        codes = np.where(codes < 0, len(labels), codes)
        labels = np.append(labels, np.asarray([""], dtype=object))
    return codes.astype(_code_type(len(labels))), labels


def _code_type(n: int) -> type[np.signedinteger[Any]]:
    """The smallest of int32 and int64 that numbers `n` labels (3 M codes: 12 MB, not 24)."""
    return np.int32 if n < 2**31 else np.int64


def text_codes(df: pd.DataFrame, col: str) -> tuple[np.ndarray, np.ndarray]:
    """`text(df, col)` as (codes, labels): see `_coded`."""
    cols = [df[col]] if col in df.columns else []
    if not cols:
        return np.zeros(len(df), dtype=np.int64), np.asarray([""], dtype=object)
    return _coded(df, cols, str, lambda: text(df, col))


def op_type_codes(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """`op_types(df)` as (codes, labels): see `_coded`."""
    cols = [df[c] for c in ("op_type", "name") if c in df.columns]
    return _coded(df, cols, str, lambda: op_types(df))


def core_type_codes(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """`core_types(df)` as (codes, labels): see `_coded`."""
    cols = [df["core_type"]] if "core_type" in df.columns else []
    return _coded(df, cols, str.upper, lambda: core_types(df))


def strings(s: pd.Series) -> np.ndarray:
    """`s.to_numpy()` of a text Series (`text`, `op_types`), with one Python string per distinct
    value shared by its rows: `to_numpy()` makes a string object per row (~60 bytes each), and a
    kernel table repeats a few hundred names, types and shapes a million times."""
    codes, uniques = pd.factorize(s)
    if (codes < 0).any():  # a missing value: as to_numpy() gives it
        return s.to_numpy()
    return np.asarray(uniques, dtype=object)[codes]


def core_types(df: pd.DataFrame) -> pd.Series:
    s = df["core_type"] if "core_type" in df.columns else None
    if s is not None and isinstance(s.dtype, pd.CategoricalDtype):
        return _from_categories(df, [s], str.upper)
    return text(df, "core_type").str.upper()


def op_types(df: pd.DataFrame) -> pd.Series:
    """op_type, falling back to the kernel name (TileLang kernels have op_type == name or none)."""
    cols = [df[c] for c in ("op_type", "name") if c in df.columns]
    if cols and all(isinstance(s.dtype, pd.CategoricalDtype) for s in cols):
        return _from_categories(df, cols, str)
    op = text(df, "op_type")
    return op.where(op != "", text(df, "name"))


# Kernel columns the helpers below read for any rule that uses them (names, op and core types,
# stream order, start and duration): part of every kernel rule's READS (tilescope.engine).
HELPER_COLUMNS = ("name", "op_type", "core_type", "stream_id", "start_ns", "duration_us")

# Columns a grouped finding may report (name, time, block counts, pipe and conflict ratios).
LEAN_COLUMNS = (
    *("name", "duration_us", "block_dim", "aic_cube_ratio", "aic_scalar_ratio", "aic_mte1_ratio"),
    *("aic_mte2_ratio", "aic_mte3_ratio", "aic_fixpipe_ratio", "aiv_vec_ratio", "aiv_scalar_ratio"),
    *("aiv_mte2_ratio", "aiv_mte3_ratio", "aiv_vec_bank_cflt_ratio", "aiv_vec_bankgroup_cflt_ratio"),
    "aiv_vec_resc_cflt_ratio",
)


def lean(df: pd.DataFrame, **cols: Any) -> pd.DataFrame:
    """The reportable columns of `df` plus `cols`, without copying the rest of a wide kernel table
    (`df.assign` would copy every column of a million-row table), nor these: copy=False shares
    them (copy-on-write copies a column only if it is written), where the constructor's default
    copied them into one new block (~16 columns, 8 bytes per launch each)."""
    data: dict[str, Any] = {c: df[c] for c in LEAN_COLUMNS if c in df.columns}
    data.update(cols)
    return pd.DataFrame(data, index=df.index, copy=False)


def has_values(df: pd.DataFrame, col: str) -> bool:
    return col in df.columns and bool(df[col].notna().any())


def first_present(df: pd.DataFrame, cols: Sequence[str]) -> str | None:
    return next((c for c in cols if has_values(df, c)), None)


def thr(ctx: RuleContext, key: str) -> float:
    return float(ctx.thresholds[key])


def stream_key(df: pd.DataFrame) -> pd.Series:
    """Stream id as a sortable int; rows without one share stream -1."""
    return num(df, "stream_id").fillna(-1).astype("int64")


def start_ns(df: pd.DataFrame) -> pd.Series:
    if "start_ns" not in df.columns:
        return pd.Series(np.arange(len(df), dtype="int64"), index=df.index)
    s = pd.to_numeric(df["start_ns"], errors="coerce")
    return s.fillna(-1).astype("int64")


def end_ns(df: pd.DataFrame) -> pd.Series:
    return start_ns(df) + (num(df, "duration_us").fillna(0) * 1000).round().astype("int64")


def stream_ordered(df: pd.DataFrame) -> pd.DataFrame:
    """Rows sorted by (stream, start), keeping the original positional row in `_row`."""
    out = pd.DataFrame(
        {
            "_row": np.arange(len(df)),
            "_stream": stream_key(df).to_numpy(),
            "_start": start_ns(df).to_numpy(),
        }
    )
    return out.sort_values(["_stream", "_start", "_row"], kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------------------------------------
# grouping launches of one kernel
# ---------------------------------------------------------------------------------------------


def group_launches(
    df: pd.DataFrame, saving: pd.Series, metrics: Sequence[str] = (), key: str = "name"
) -> pd.DataFrame:
    """One row per kernel name: launches, total/median/max duration, summed saving, metric medians.

    Sorted by saving, largest first. `df` holds only the flagged launches.
    """
    if df.empty:
        return pd.DataFrame()
    work = pd.DataFrame(
        {
            "kernel": text(df, key).where(text(df, key) != "", "<unnamed>").to_numpy(),
            "duration_us": num(df, "duration_us").to_numpy(),
            "saving_us": saving.reindex(df.index).fillna(0).to_numpy(),
        }
    )
    for m in metrics:
        work[m] = num(df, m).to_numpy()
    g = work.groupby("kernel", sort=False)
    d = g["duration_us"]
    # The same reductions as a named `g.agg(...)`, without its relabelling machinery (~2.5 ms a call)
    out = pd.DataFrame(
        {
            "launches": d.size(),
            "total_us": d.sum(),
            "median_us": d.median(),
            "max_us": d.max(),
            "saving_us": g["saving_us"].sum(),
        }
    )
    for m in metrics:
        out[m] = g[m].median()
    return out.sort_values("saving_us", ascending=False)


def launch_stats(row: pd.Series) -> dict[str, Any]:
    return {
        "launches": int(row["launches"]),
        "total_us": r3(row["total_us"]),
        "median_us": r3(row["median_us"]),
        "max_us": r3(row["max_us"]),
    }


# ---------------------------------------------------------------------------------------------
# numbers
# ---------------------------------------------------------------------------------------------


def r3(x: Any) -> float | None:
    """Round for evidence; NaN/None become None so JSON stays valid."""
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else round(f, 3)


def r4(x: Any) -> float | None:
    v = r3(x)
    return None if v is None else round(float(x), 4)


def pct(x: float) -> str:
    """A 0-1 share in a rule's message, rounded as every view rounds shares (tilescope.text.words)."""
    return fmt_pct(x, 0)


def fmt_us(us: float) -> str:
    """A time in a rule's message, formatted as every view formats times (tilescope.text.words)."""
    return words_fmt_us(us)


def fmt_bytes(n: float) -> str:
    if n >= 1024**3:
        return f"{n / 1024**3:.2f} GiB"
    if n >= 1024**2:
        return f"{n / 1024**2:.1f} MiB"
    return f"{n / 1024:.1f} KiB"


# ---------------------------------------------------------------------------------------------
# shapes and bytes
# ---------------------------------------------------------------------------------------------


def _tensor_elems(shape: str) -> int:
    dims = [d for d in shape.split(",") if d.strip()]
    if not dims:
        return 0
    try:
        return math.prod(int(float(d)) for d in dims)
    except ValueError:
        return 0


def _shape_string_bytes(shapes: str, dtypes: str) -> float:
    tensors = shapes.split(";")
    types = dtypes.split(";") if dtypes else []
    total = 0
    for i, t in enumerate(tensors):
        dt = types[i].strip().lower().removeprefix("dt_") if i < len(types) else ""
        total += _tensor_elems(t) * DTYPE_BYTES.get(dt, DEFAULT_DTYPE_BYTES)
    return float(total)


def shape_bytes(shapes: pd.Series, dtypes: pd.Series) -> pd.Series:
    """Bytes of all tensors in a ';'-separated shape column, per row.

    Computed once per distinct (shapes, dtypes) pair: a million-launch table has a few thousand.
    """
    key = shapes.astype(str) + "\x00" + dtypes.astype(str)
    uniq = pd.unique(key)
    table = {k: _shape_string_bytes(*k.split("\x00", 1)) for k in uniq}
    return key.map(table).astype("float64")


def tensor_elems(shapes: pd.Series) -> pd.Series:
    uniq = pd.unique(shapes.astype(str))
    table = {k: float(_tensor_elems(k)) for k in uniq}
    return shapes.astype(str).map(table).astype("float64")


def overlap_with_union(
    starts: np.ndarray, ends: np.ndarray, u_start: np.ndarray, u_end: np.ndarray
) -> np.ndarray:
    """Length of [starts, ends) covered by the disjoint sorted union, per interval."""
    if len(u_start) == 0 or len(starts) == 0:
        return np.zeros(len(starts), dtype="float64")
    lengths = (u_end - u_start).astype("float64")
    cum = np.concatenate([[0.0], np.cumsum(lengths)])

    def covered_before(t: np.ndarray) -> np.ndarray:
        # covered length of (-inf, t): full intervals that end before t plus the part of the one holding t
        i = np.searchsorted(u_start, t, side="right")  # intervals starting at or before t
        full = cum[i]
        last = np.clip(i - 1, 0, len(u_start) - 1)
        excess = np.where(i > 0, np.maximum(u_end[last] - t, 0), 0).astype("float64")
        return np.asarray(full - excess, dtype="float64")

    return np.maximum(covered_before(ends) - covered_before(starts), 0.0)


# ---------------------------------------------------------------------------------------------
# findings
# ---------------------------------------------------------------------------------------------


def chip_figures(chip: ChipSpec, *fields: str) -> dict[str, Any]:
    """The chip numbers a verdict used, where the GM bandwidth comes from, and any assumption that
    mentions a figure used."""
    out: dict[str, Any] = {"chip": chip.name}
    for f in fields:
        if f == "ridge_point":
            out[f] = r3(chip.ridge_point())
        elif f == "peak_fp16_tflops":
            peak = chip.peak_flops()
            out[f] = r3(peak / 1e12) if peak else None
        else:
            out[f] = getattr(chip, f, None)
    if any(f in ("hbm_bandwidth_gbps", "ridge_point") for f in fields):
        out["hbm_bandwidth_source"] = chip.hbm_bandwidth_source
    keys = {f.split("_")[0] for f in fields} | {"core count" for f in fields if f.endswith("_count")}
    notes = [a for a in chip.assumptions if any(k in a for k in (*fields, *keys))]
    if notes:
        out["assumptions"] = notes
    return out


def locate(profile: Profile, kernel: str, topic: str) -> tuple[Location, ...]:
    """Source/IR locations for a kernel when the profile carries IR and the locator exists."""
    if profile.ir is None or importlib.util.find_spec("tilescope.ir.locate") is None:
        return ()
    try:
        mod = importlib.import_module("tilescope.ir.locate")
        locs = mod.locate(profile.ir, kernel, topic)
    except Exception:  # a locator failure must not cost the finding itself
        return ()
    out: list[Location] = []
    for loc in locs or ():
        if isinstance(loc, Location):
            out.append(loc)
        elif isinstance(loc, dict):
            out.append(Location(**loc))
    return tuple(out)


def make_finding(
    ctx: RuleContext,
    *,
    code: str,
    slug: str,
    kernels: Iterable[str],
    message: str,
    evidence: dict[str, Any],
    recommendation: str,
    saving_us: float,
    occurrences: int = 1,
    locations: tuple[Location, ...] = (),
    saving_kind: str = SAVING_DEVICE,
) -> Finding:
    """A finding with its share and severity from the saving (the engine bounds both afterwards:
    tilescope.summary.bound_findings). `saving_kind` "idle" for savings of idle time between kernels."""
    saving = max(0.0, float(saving_us)) if not math.isnan(float(saving_us)) else 0.0
    return Finding(
        code=code,
        slug=slug,
        severity=ctx.severity(saving),
        kernels=tuple(dict.fromkeys(kernels)),
        message=message,
        evidence=evidence,
        recommendation=recommendation,
        est_saving_us=saving,
        share_of_total=ctx.share(saving),
        locations=locations,
        occurrences=int(occurrences),
        saving_kind=saving_kind,
    )


def thresholds_used(ctx: RuleContext, *keys: str) -> dict[str, Any]:
    return {k: ctx.thresholds[k] for k in keys if k in ctx.thresholds}


def capped(groups: pd.DataFrame, ctx: RuleContext) -> tuple[pd.DataFrame, int]:
    """The top `max_findings` groups and how many were left out (reported in the last finding)."""
    limit = int(ctx.thresholds.get("max_findings", 20))
    return groups.head(limit), max(0, len(groups) - limit)


def grouped_findings(
    profile: Profile,
    ctx: RuleContext,
    *,
    code: str,
    slug: str,
    flagged: np.ndarray,
    saving: pd.Series,
    metrics: Sequence[str],
    message: Callable[[str, pd.Series], str],
    recommendation: str,
    topic: str,
    chip_fields: Sequence[str] = (),
    extra: Callable[[str, pd.Series], dict[str, Any]] | None = None,
) -> list[Finding]:
    """One finding per kernel name over the flagged launches (every row was evaluated), largest
    saving first, at most `max_findings`; the last one says how many kernels were left out."""
    # only the columns group_launches reads: a row filter of the whole table copies all ~80
    k = profile.kernels
    df = k.loc[flagged, [c for c in dict.fromkeys(("name", "duration_us", *metrics)) if c in k.columns]]
    groups = group_launches(df, saving[flagged], metrics)
    if groups.empty:
        return []
    groups = groups[groups["saving_us"] >= float(ctx.thresholds.get("min_saving_us", 0.0))]
    top, left_out = capped(groups, ctx)
    keys = [k for k in ctx.thresholds if k not in ("max_findings", "pattern_files")]
    findings = []
    for kernel, row in top.iterrows():
        ev: dict[str, Any] = {
            **launch_stats(row),
            "measured": {m: r4(row[m]) for m in metrics},
            "thresholds": thresholds_used(ctx, *keys),
        }
        if chip_fields:
            ev["chip_figures"] = chip_figures(profile.chip, *chip_fields)
        if extra is not None:
            ev.update(extra(str(kernel), row))
        findings.append(
            make_finding(
                ctx,
                code=code,
                slug=slug,
                kernels=[str(kernel)],
                message=message(str(kernel), row),
                evidence=ev,
                recommendation=recommendation,
                saving_us=float(row["saving_us"]),
                occurrences=int(row["launches"]),
                locations=locate(profile, str(kernel), topic),
            )
        )
    if left_out and findings:
        findings[-1].evidence["more_kernels_not_listed"] = left_out
    return findings


# ---------------------------------------------------------------------------------------------
# what the other findings say (the rules' `refine`, tilescope.engine._refine)
# ---------------------------------------------------------------------------------------------


def ir_kernel_name(profile: Profile, kernel: str) -> str | None:
    """The ir.json kernel (PrimFunc name) a profiler kernel name belongs to; None without IR."""
    if profile.ir is None:
        return None
    from tilescope.ir.model import find_kernel

    k = find_kernel(profile.ir, kernel)
    return str(k["name"]) if k is not None else None


def findings_on(others: Sequence[Finding], code: str, kernel: str, profile: Profile) -> list[Finding]:
    """The findings of rule `code` about `kernel`, matched by profiler name or by the IR kernel the
    name belongs to (static rules name the PrimFunc `flash_fwd`, runtime rules the launch
    `flash_fwd_kernel_mix_aic`)."""
    names = {kernel, ir_kernel_name(profile, kernel)} - {None}
    return [f for f in others if f.code == code and names & set(f.kernels)]


def library_kernel(profile: Profile, kernel: str) -> bool:
    """A CANN built-in kernel, not the author's: the bundle's IR does not know it, and its name is
    an ACLNN kernel's (`aclnnMatmul_MatMulV3Common_MatMulV3`) or its op type plus a task number
    (graph mode: `MatMul104` of op type `MatMul`). Its tiling is CANN's: a user changes the
    operator called, the shapes it is called with, or reports it upstream."""
    if ir_kernel_name(profile, kernel) is not None:
        return False
    if kernel.startswith("aclnn"):
        return True
    k = profile.kernels
    if "name" not in k.columns or "op_type" not in k.columns:
        return False
    ops = set(text(k.loc[k["name"] == kernel], "op_type"))
    return any(op and op != kernel and kernel.startswith(op) and kernel[len(op):].isdigit() for op in ops)


def library_recommendation(
    kernel: str, others: Sequence[Finding], profile: Profile
) -> tuple[str, str | None]:
    """What a user can do about a library kernel's pipe-bound finding, and the fusion finding
    (TS102, else TS101) that already covers the kernel, if any."""
    for code in ("TS102", "TS101"):
        fusion = [f for f in others if f.code == code and kernel in f.kernels]
        if fusion:
            title = str((fusion[0].evidence.get("pattern") or {}).get("title") or "an unfused chain")
            return (
                f"{kernel} is a CANN built-in kernel inside {title}, which {code} already reports: "
                f"fusing that sequence ({code}'s recommendation) removes this launch; its tiling is "
                "not yours to change.",
                code,
            )
    return (
        f"{kernel} is a CANN built-in kernel: its tiling is CANN's, not yours. Choose a fused "
        "operator that covers it (if it is not one already), call it with larger or contiguous "
        "inputs (fewer, bigger launches), or report it to CANN with this evidence.",
        None,
    )


def refine_stages(
    finding: Finding, others: Sequence[Finding], profile: Profile, then: str
) -> Finding | None:
    """A rule advising (more) pipeline stages, for a kernel whose requested stages TS504 says were
    not applied: that is the first thing to fix, with TS504's reason, then `then`; None otherwise."""
    kernel = finding.kernels[0] if finding.kernels else ""
    refused = findings_on(others, "TS504", kernel, profile)
    if not refused:
        return None
    ev = refused[0].evidence
    rec = (
        f"The kernel already asks for num_stages={ev.get('num_stages')} on loop {ev.get('loop')}, but "
        f"the stages were not applied (TS504: {ev.get('reason') or refused[0].message}). Make them fit "
        f"first ({refused[0].recommendation}); then {then}"
    )
    evidence = {**finding.evidence, "explained_by": "TS504"}
    return dataclasses.replace(finding, recommendation=rec, evidence=evidence)


def refine_stages_or_library(then: str) -> Callable[[Finding, Sequence[Finding], Profile], Finding]:
    """The `refine` of a rule whose advice is more stages, then `then`: stages the kernel asks for
    that TS504 says were not applied come first (refine_stages); a CANN built-in kernel cannot be
    re-tiled by its user, so it gets what they can do (refine_library)."""

    def refine(finding: Finding, others: Sequence[Finding], profile: Profile) -> Finding:
        refused = refine_stages(finding, others, profile, then)
        return refused if refused is not None else refine_library(finding, others, profile)

    return refine


def refine_library(finding: Finding, others: Sequence[Finding], profile: Profile) -> Finding:
    """`refine` of a rule whose advice changes the kernel itself (tiles, stages, loops): for a CANN
    built-in kernel, the advice a user can follow instead, naming the fusion finding that already
    covers it (evidence `library_kernel`, `explained_by`)."""
    kernel = finding.kernels[0] if finding.kernels else ""
    if not kernel or not library_kernel(profile, kernel):
        return finding
    recommendation, by = library_recommendation(kernel, others, profile)
    evidence = {**finding.evidence, "library_kernel": True}
    if by is not None:
        evidence["explained_by"] = by
    return dataclasses.replace(finding, recommendation=recommendation, evidence=evidence)
