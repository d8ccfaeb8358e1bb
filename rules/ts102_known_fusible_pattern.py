"""TS102 known-fusible-pattern: operator sequences that one fused kernel replaces."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.profile import Profile, Timeline
from tilescope.rules._columns import HELPER_COLUMNS, num, op_types, strings, text
from tilescope.rules._findings import locate, make_finding
from tilescope.rules._intervals import end_ns, start_ns, stream_key
from tilescope.rules._numbers import r3
from tilescope.rules._patterns import (
    Pattern,
    PatternMatch,
    forget_matches,
    load_patterns,
    match_host_patterns,
    match_patterns,
)
from tilescope.text.words import fmt_us

CODE = "TS102"
SLUG = "known-fusible-pattern"
KIND = "runtime"
NEEDS = ("kernels", "duration_us")
USES = ("timeline",)  # optional: host op sequences are matched too when a timeline exists
# the fix removes kernels (or moves work off the AI CPU): bounded by their time, not their speed of light
SAVING_KIND = "work"
THRESHOLDS: dict[str, Any] = {
    "min_occurrences": 1,  # report a pattern seen at least this often
    "min_saving_us": 0.0,  # drop groups whose estimated saving is below this
    "max_listed_occurrences": 100,  # occurrences listed one by one in the evidence (all are counted)
    "pattern_files": [],  # extra pattern files (set from [tool.tilescope] patterns = [...])
}

# Kernel columns check() reads besides NEEDS (`analyze` loads only what the rules and the report read)
READS = (*HELPER_COLUMNS, "input_shapes", "output_shapes")


def _columns(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """The columns an occurrence lists, as arrays computed once (not per listed kernel)."""
    return {
        "name": strings(text(df, "name")),
        "op_type": strings(op_types(df)),
        "core_type": strings(text(df, "core_type")),
        "stream_id": stream_key(df).to_numpy(),
        "start_ns": start_ns(df).to_numpy(),
        "end_ns": end_ns(df).to_numpy(),
        "duration_us": num(df, "duration_us").fillna(0).to_numpy(),
    }


def _kernel_entry(c: dict[str, np.ndarray], row: int, role: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": str(c["name"][row]),
        "op_type": str(c["op_type"][row]),
        "core_type": str(c["core_type"][row]) or None,
        "stream_id": int(c["stream_id"][row]),
        "start_ns": int(c["start_ns"][row]),
        "duration_us": r3(c["duration_us"][row]),
    }
    if role is not None:
        entry["role"] = role
    return entry


def _times(c: dict[str, np.ndarray], m: PatternMatch) -> tuple[float, float, float]:
    """(device µs, removable µs, estimated saving µs) of one occurrence."""
    d = c["duration_us"][m.rows]
    kept = m.kept_offsets()
    total = float(d.sum())
    removable = total - float(d[kept].sum()) if kept else total
    # With no kept step the fused kernel still makes one pass over the data: assume it costs the
    # longest member; with kept steps (the matmuls) the rest is hidden under them.
    saving = removable if kept else removable - float(d.max())
    return total, removable, max(saving, 0.0)


def _group_times(c: dict[str, np.ndarray], ms: list[PatternMatch]) -> np.ndarray:
    """`_times` of every occurrence of one op sequence (all of one length), as rows of an array.

    Row-wise reductions of one 2-D array sum each row exactly as `_times` sums its 1-D slice;
    occurrences are split by their kept offsets, which are the same for all of them in practice.
    """
    rows = np.array([m.rows for m in ms], dtype=np.int64)
    d = c["duration_us"][rows]
    total = d.sum(axis=1)
    spans = ms[0].spans
    by_kept: dict[tuple[int, ...], list[int]] = {}
    if all(m.spans == spans for m in ms):
        by_kept[tuple(ms[0].kept_offsets())] = list(range(len(ms)))
    else:
        for i, m in enumerate(ms):
            by_kept.setdefault(tuple(m.kept_offsets()), []).append(i)
    removable = total.copy()
    saving = np.empty_like(total)
    for kept, members in by_kept.items():
        idx = np.array(members, dtype=np.int64)
        if kept:
            removable[idx] = total[idx] - d[np.ix_(idx, np.array(kept, dtype=np.int64))].sum(axis=1)
            saving[idx] = removable[idx]
        else:
            saving[idx] = total[idx] - d[idx].max(axis=1)
    saving = np.where(saving < 0.0, 0.0, saving)  # max(saving, 0.0); NaN stays, as in _times
    return np.column_stack([total, removable, saving])


def _occurrence(
    c: dict[str, np.ndarray], m: PatternMatch, times: tuple[float, float, float]
) -> dict[str, Any]:
    starts, ends = c["start_ns"], c["end_ns"]
    return {
        "stream_id": int(c["stream_id"][m.rows[0]]),
        "start_ns": int(starts[m.rows[0]]),
        "span_us": r3((ends[m.rows[-1]] - starts[m.rows[0]]) / 1000.0),
        "device_us": r3(times[0]),
        "removable_us": r3(times[1]),
        "saving_us": r3(times[2]),
        "kernels": [_kernel_entry(c, r, role) for r, role in zip(m.rows, m.roles, strict=True)],
        "interleaved": [_kernel_entry(c, r, None) for r in m.interleaved],
    }


def _recommendation(p: Pattern) -> str:
    rec = f"Replace the sequence with {p.replacement}"
    return rec + (f", {p.tilelang}." if p.tilelang else ".")


def _kernel_findings(profile: Profile, ctx: RuleContext, patterns: list[Pattern]) -> list[Finding]:
    df = profile.kernels
    matches = match_patterns(df, patterns)
    forget_matches(df)  # TS101 has read them: the cache would hold them through the report
    cols = _columns(df)
    ops = cols["op_type"].tolist()
    groups: dict[tuple[str, tuple[str, ...]], list[PatternMatch]] = {}
    for m in matches:
        groups.setdefault((m.pattern.id, tuple([ops[r] for r in m.rows])), []).append(m)
    findings = []
    for (_pid, signature), ms in groups.items():
        if len(ms) < int(ctx.thresholds["min_occurrences"]):
            continue
        pat = ms[0].pattern
        times = _group_times(cols, ms)
        saving = float(times[:, 2].sum())
        if saving < float(ctx.thresholds["min_saving_us"]):
            continue
        # Every occurrence is listed up to max_listed_occurrences; beyond that only counted.
        limit = int(ctx.thresholds["max_listed_occurrences"])
        occ = [_occurrence(cols, m, tuple(t)) for m, t in zip(ms[:limit], times[:limit], strict=True)]
        for i, o in enumerate(occ, start=1):
            o["index"] = i
        device = float(times[:, 0].sum())
        names = [k["name"] for o in occ for k in o["kernels"]]
        evidence = {
            "pattern": {"id": pat.id, "title": pat.title, "source": pat.source, "keep": list(pat.keep)},
            "op_sequence": list(signature),
            "occurrences": occ,
            "occurrences_not_listed": max(0, len(ms) - limit),
            "total_device_us": r3(device),
            "median_device_us": r3(float(np.median(times[:, 0]))),
            "saving_model": (
                "time of the non-kept steps (hidden under the kept matmuls)"
                if pat.keep
                else "sum of the members minus the longest (one fused pass remains)"
            ),
            "thresholds": {
                k: ctx.thresholds[k] for k in ("min_occurrences", "min_saving_us", "max_listed_occurrences")
            },
        }
        n = len(ms)
        msg = (
            f"{pat.title}: {n} occurrence{'s' if n != 1 else ''} of {len(signature)} kernels "
            f"({' → '.join(signature)}), {fmt_us(device)} on the device; "
            f"{pat.replacement} does it in one kernel"
        )
        findings.append(
            make_finding(
                ctx,
                code=CODE,
                slug=SLUG,
                kernels=names,
                message=msg,
                evidence=evidence,
                recommendation=_recommendation(pat),
                saving_us=saving,
                occurrences=n,
                locations=locate(profile, names[0], "vector"),
            )
        )
    return findings


# Links gathered per block of windows: bounds the (windows x links) index array of wide windows.
_GATHER_BLOCK = 1 << 22


def _flow_links(tl: Timeline) -> tuple[np.ndarray, np.ndarray]:
    """(start of the host op, device µs of the kernel) of every flow linking a host op to a kernel
    (async_npu / HostToDevice), in flow order."""
    fl = tl.flows
    if fl is None or fl.empty or "kernel_index" not in fl or "host_index" not in fl:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    k = fl["kernel_index"].to_numpy().astype("int64")
    h = fl["host_index"].to_numpy().astype("int64")
    both = (k >= 0) & (h >= 0)
    kd = num(tl.kernels, "duration_us").to_numpy()
    return start_ns(tl.host_ops).to_numpy()[h[both]], kd[k[both]]


def _window_links(
    link_start: np.ndarray, link_dur: np.ndarray, w0: np.ndarray, w1: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per window [w0, w1] (ns): how many links start in it, the sum and the max of their device µs.

    One sort of the links and a binary search per window, instead of a scan of every link per
    window (that scan was ~90 % of `analyze` on a 2 GB timeline). The sum adds each window's links
    in flow order, as numpy sums the selection `link_dur[(link_start >= w0) & (link_start <= w1)]`:
    windows of k links are summed as the rows of one (n, k) array, which numpy sums row by row
    exactly as it sums a 1-D array of k values (a running, prefix or reduceat sum rounds differently).
    """
    n = len(w0)
    count = np.zeros(n, np.int64)
    total = np.zeros(n, np.float64)
    longest = np.zeros(n, np.float64)
    if not n or not len(link_start):
        return count, total, longest
    order = np.argsort(link_start, kind="stable")
    lo = np.searchsorted(link_start[order], w0, "left")
    count = np.maximum(np.searchsorted(link_start[order], w1, "right") - lo, 0)
    for k in np.unique(count[count > 0]).tolist():
        sel = np.flatnonzero(count == k)
        for part in np.array_split(sel, max(1, len(sel) * k // _GATHER_BLOCK)):
            members = order[lo[part][:, None] + np.arange(k)]
            members.sort(axis=1)  # back to flow order
            d = link_dur[members]
            total[part] = d.sum(axis=1)
            longest[part] = d.max(axis=1)
    return count, total, longest


def _host_findings(profile: Profile, ctx: RuleContext, patterns: list[Pattern]) -> list[Finding]:
    tl = profile.timeline
    if tl is None or tl.host_ops is None or tl.host_ops.empty:
        return []
    found = match_host_patterns(tl.host_ops, patterns)
    if not found.patterns:
        return []
    # Device time per occurrence: the kernels linked (by flow) to a host op starting in its window.
    w0, w1 = found.windows()
    count, device, longest = _window_links(*_flow_links(tl), w0, w1)
    savings = np.where(count > 0, device - longest, 0.0).tolist()
    names = found.op_names()
    w0_l, w1_l, count_l, device_l = w0.tolist(), w1.tolist(), count.tolist(), device.tolist()
    groups: dict[str, list[int]] = {}
    pats = {p.id: p for p in patterns}
    for i, pat in enumerate(found.patterns):
        groups.setdefault(pat.id, []).append(i)
    findings = []
    for pid, occs in groups.items():
        pat = pats[pid]
        occ_ev: list[dict[str, Any]] = []
        saving = 0.0
        for n, i in enumerate(occs, start=1):
            saving += savings[i]  # in occurrence order, as the total has always been added up
            occ_ev.append(
                {
                    "index": n,
                    "host_ops": names[i],
                    "start_ns": w0_l[i],
                    "host_span_us": r3((w1_l[i] - w0_l[i]) / 1000),
                    "linked_kernels": count_l[i],
                    "device_us": r3(device_l[i]),
                    "saving_us": r3(savings[i]),
                }
            )
        msg = (
            f"{pat.title}: {len(occs)} occurrence{'s' if len(occs) != 1 else ''} in the torch ops "
            f"of the timeline; {pat.replacement} replaces them"
        )
        findings.append(
            make_finding(
                ctx,
                code=CODE,
                slug=SLUG,
                kernels=list(occ_ev[0]["host_ops"]),
                message=msg,
                recommendation=_recommendation(pat),
                saving_us=saving,
                occurrences=len(occs),
                evidence={
                    "pattern": {"id": pat.id, "title": pat.title, "source": pat.source},
                    "matched_on": "host ops (timeline)",
                    "occurrences": occ_ev,
                    "saving_model": "device time of the linked kernels minus the longest",
                },
            )
        )
    return findings


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Finds operator sequences with a known fused replacement: unfused attention (MatMul/BatchMatMul →
    scale/mask → softmax → dropout/cast → BatchMatMul), RMSNorm, RoPE, SwiGLU, Add+LayerNorm,
    Add+RmsNorm, MatMul + bias/activation epilogue and per-tensor Adam updates. It matches the op
    types of consecutive AI Core kernels on each stream (and, for timeline-only input, the torch
    ops of the timeline). Every occurrence is listed with its kernels and time; identical
    occurrences are grouped into one finding.

    ## Why is this bad?
    Each kernel of the sequence writes its result to global memory (HBM) and the next one reads
    it back; in unfused attention that is the whole S = QK^T and P = softmax(S) matrix, per head.
    A fused kernel keeps those tiles in L0C/UB, overlaps the Vector work with the Cube, and saves
    the launches.

    ## Example
    `gpt_step_arith_591`: `BatchMatMul96, Mul97, ScaledMaskedSoftmax98, DropOutDoMask100,
    AsStrided93, BatchMatMul101` on stream 16 (with `Cast` on AI_CPU and
    `DSAStatelessGenBitMask` on DSA_SQE interleaved on stream 17), twice per step.

    ## What to do instead
    Call the fused operator named in the finding (`torch_npu.npu_fusion_attention`,
    `npu_rms_norm`, `npu_rotary_mul`, `npu_swiglu`, `npu_add_layer_norm`, ...) or write one
    TileLang kernel that keeps the intermediate tiles on chip.

    ## Thresholds
    `min_occurrences` (1), `min_saving_us` (0), `max_listed_occurrences` (100: occurrences
    listed one by one; all are counted and timed). Patterns live in `rules/patterns.toml`; add your
    own with `[tool.tilescope] patterns = ["my.toml"]`.

    ## Known limits
    Matching is by op type and order, plus tensor sizes for patterns marked `linked`; a sequence
    interrupted by an unrelated kernel on the same stream is not matched. The saving assumes the
    fused kernel hides the non-matmul steps entirely (attention, epilogues) or costs as much as
    the longest member (norms): an upper bound, not a measurement.
    """
    patterns = load_patterns(list(ctx.thresholds.get("pattern_files") or ()))
    findings = _kernel_findings(profile, ctx, patterns)
    if not findings and not profile.has("op_type"):
        findings = _host_findings(profile, ctx, patterns)
    return findings
