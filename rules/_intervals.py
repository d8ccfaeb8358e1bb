"""Launches in time for the runtime rules: start and end in ns, the (stream, start) order, and how
much of each interval a union of intervals covers."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tilescope.intervals import interval_union
from tilescope.rules._columns import num


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


def intersect_unions(
    a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The intersection of two disjoint sorted interval sets (`interval_union`'s), disjoint and
    sorted. Vectorised: each `a` interval meets the run of `b` intervals between two searchsorted
    positions; the pairs are expanded with repeat, never a Python loop over launches."""
    if len(a_start) == 0 or len(b_start) == 0:
        return np.array([], dtype="int64"), np.array([], dtype="int64")
    lo = np.searchsorted(b_end, a_start, side="right")  # first b ending after a starts
    hi = np.searchsorted(b_start, a_end, side="left")  # b starting before a ends: index < hi
    n = np.maximum(hi - lo, 0)
    ai = np.repeat(np.arange(len(a_start)), n)
    bi = np.repeat(lo, n) + (np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n))
    s, e = np.maximum(a_start[ai], b_start[bi]), np.minimum(a_end[ai], b_end[bi])
    ok = e > s
    return s[ok], e[ok]


def idle_stretches(
    starts: np.ndarray, ends: np.ndarray, window_lo: np.ndarray, window_hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The stretches (disjoint, sorted, ns) that lie inside some window [lo, hi] and outside every
    busy interval [start, end]: device-wide idle, each stretch once however many streams' waits
    cover it. The windows are the profiler's own gaps (`wait_us` before each launch), so a table
    that is an excerpt never counts time outside them."""
    w_start, w_end = interval_union(window_lo, window_hi)
    u_start, u_end = interval_union(starts, ends)
    if len(u_start) == 0:
        return w_start, w_end
    lowest, highest = np.iinfo("int64").min, np.iinfo("int64").max
    # the complement of the busy union: before the first, between each two, after the last
    g_start = np.concatenate([[lowest], u_end])
    g_end = np.concatenate([u_start, [highest]])
    keep = g_end > g_start
    return intersect_unions(w_start, w_end, g_start[keep], g_end[keep])
