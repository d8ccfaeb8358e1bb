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
