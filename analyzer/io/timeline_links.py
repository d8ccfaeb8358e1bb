"""Vectorised interval lookups for the timeline reader (`analyzer.io.timeline`).

`innermost_enclosing` finds, for many query timestamps, the host X event on the same lane
(pid, tid) that encloses each one. Millions of events and flows make the obvious per-flow scan
quadratic, so this works on sorted arrays only (O(n log n), no per-row Python).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

I64 = npt.NDArray[np.int64]

_END, _START, _QUERY = 0, 1, 2  # order of boundaries that share a lane and a time


def lane_codes(pid: I64, tid: I64) -> I64:
    """Dense int64 code per (pid, tid) pair, equal codes for equal pairs."""
    # Hash factorisation of each column (O(n)); np.unique(axis=0) sorts rows and is ~10x slower.
    pid_codes, _ = pd.factorize(pid)
    tid_codes, tid_uniques = pd.factorize(tid)
    return pid_codes.astype(np.int64) * max(len(tid_uniques), 1) + tid_codes.astype(np.int64)


def innermost_enclosing(
    lane_h: I64, start_h: I64, end_h: I64, lane_q: I64, t_q: I64
) -> I64:
    """Index of the innermost interval [start_h, end_h] (inclusive) on lane_q that contains t_q.

    Returns -1 where no interval contains the query.

    Method: one sweep over the sorted boundaries of every lane. The running sum of +1 (start) and
    -1 (end) is the nesting depth; a start's level is the depth just after it. For properly nested
    intervals the innermost interval containing t is the latest start *at level depth(t)* before t
    (a later start at that level would have to sit inside the containing one, so deeper). Ends are
    moved to end+1 so the inclusive end still covers a query at exactly `end`; at equal times ends
    sort before starts before queries, and longer intervals start before shorter ones.
    Overlapping but not nested intervals (clock rounding, async events on one thread) can break
    the level bookkeeping, so every answer is checked for containment, and a failed one falls back
    to the latest-starting interval on the lane if that one contains the query.
    """
    n_h, n_q = len(start_h), len(t_q)
    result = np.full(n_q, -1, dtype=np.int64)
    if n_h == 0 or n_q == 0:
        return result
    lane = np.concatenate([lane_h, lane_h, lane_q])
    time = np.concatenate([start_h, end_h + 1, t_q])
    kind = np.concatenate(
        [np.full(n_h, _START, np.int8), np.full(n_h, _END, np.int8), np.full(n_q, _QUERY, np.int8)]
    )
    # Longer intervals first among equal starts, so a parent opens before its child.
    tiebreak = np.concatenate([-end_h, np.zeros(n_h, np.int64), np.zeros(n_q, np.int64)])
    order = np.lexsort((tiebreak, kind, time, lane))
    k_sorted = kind[order]
    delta = np.where(k_sorted == _START, 1, np.where(k_sorted == _END, -1, 0)).astype(np.int64)
    depth = np.cumsum(delta)
    pos = np.arange(len(order), dtype=np.int64)

    is_start = k_sorted == _START
    start_pos = pos[is_start]
    start_level = depth[is_start]
    start_host = order[is_start]  # original host index (starts are the first n_h entries)

    is_query = k_sorted == _QUERY
    q_pos = pos[is_query]
    q_depth = depth[is_query]
    q_orig = order[is_query] - 2 * n_h

    # Latest start at level == depth(query), before the query: one searchsorted on (level, pos).
    span = np.int64(len(order) + 1)
    start_key = start_level * span + start_pos
    key_order = np.argsort(start_key, kind="stable")
    sorted_keys = start_key[key_order]
    at = np.searchsorted(sorted_keys, q_depth * span + q_pos, side="left") - 1
    cand = np.where(at >= 0, start_host[key_order[np.maximum(at, 0)]], -1)
    ok = (at >= 0) & (q_depth > 0)
    cand_level = np.where(at >= 0, sorted_keys[np.maximum(at, 0)] // span, -1)
    ok &= cand_level == q_depth
    ok &= _contains(cand, lane_h, start_h, end_h, lane_q[q_orig], t_q[q_orig])

    # Fallback: the latest start on the lane before the query, whatever its level.
    last_start = np.maximum.accumulate(np.where(is_start, pos, -1))[is_query]
    back = np.where(last_start >= 0, order[np.maximum(last_start, 0)], -1)
    back_ok = (last_start >= 0) & _contains(back, lane_h, start_h, end_h, lane_q[q_orig], t_q[q_orig])

    result[q_orig] = np.where(ok, cand, np.where(back_ok, back, -1))
    return result


def _contains(
    idx: I64, lane_h: I64, start_h: I64, end_h: I64, lane_q: I64, t_q: I64
) -> npt.NDArray[np.bool_]:
    safe = np.maximum(idx, 0)
    return (idx >= 0) & (lane_h[safe] == lane_q) & (start_h[safe] <= t_q) & (t_q <= end_h[safe])
