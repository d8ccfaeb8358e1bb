"""Column access for the runtime rules (TS1xx-TS4xx): numbers and text of a kernel table's columns
(Categoricals read through their codes), per-row codes of text columns, the core-type sets, and
lean frames of the columns a grouped finding reports.

Everything here works on whole columns: a rule flags rows with vectorised masks, then groups the
flagged launches per kernel name, so the only Python loops run over distinct kernels, never rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tilescope.metrics import float_column

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


# Kernel columns the helpers read for any rule that uses them (names, op and core types here;
# stream order, start and duration in tilescope.rules._intervals): part of every kernel rule's
# READS (tilescope.engine).
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
