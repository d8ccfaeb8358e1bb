"""The union of launch intervals: overlapping (start, end) pairs merged into disjoint ones, for the
device time of the profile summary and the AI Core time TS405 sets AI CPU launches against."""

from __future__ import annotations

import numpy as np


def interval_union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge intervals into disjoint sorted ones (vectorised: sort, running max of ends)."""
    if len(starts) == 0:
        return np.array([], dtype="int64"), np.array([], dtype="int64")
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > run_end[:-1]
    group = np.cumsum(new) - 1
    u_start = s[new]
    u_end = np.zeros(len(u_start), dtype=e.dtype)
    np.maximum.at(u_end, group, e)
    return u_start, u_end


def covered_by_union(u_start: np.ndarray, u_end: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each span [lo, hi], how much of it the disjoint sorted intervals (`interval_union`'s)
    cover, in their unit. Vectorised: the covered length up to x is the whole length of the
    intervals that start at or before x, less what of the last of them lies after x."""
    if len(u_start) == 0:
        return np.zeros(len(lo), dtype="float64")
    lengths = (u_end - u_start).astype("float64")
    before = np.concatenate([[0.0], np.cumsum(lengths)])  # before[i]: the first i intervals' length

    def up_to(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(u_start, x, side="right")  # intervals starting at or before x
        last = np.maximum(i - 1, 0)
        inside = np.clip((x - u_start[last]).astype("float64"), 0.0, lengths[last])
        return np.where(i > 0, before[last] + inside, 0.0)

    return np.clip(up_to(hi) - up_to(lo), 0.0, None)
