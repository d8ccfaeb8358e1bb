"""TS101 unfused-elementwise-chain: Vector kernels passing intermediates through global memory."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd

from tilescope.columns import VECTOR_TYPES
from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.profile import Profile
from tilescope.rules._columns import HELPER_COLUMNS, core_type_codes, num, op_type_codes, text_codes
from tilescope.rules._findings import chip_figures, locate, make_finding
from tilescope.rules._intervals import stream_ordered
from tilescope.rules._numbers import r3
from tilescope.rules._patterns import load_patterns, match_patterns
from tilescope.rules._shapes import _tensor_elems, shape_bytes
from tilescope.text.words import fmt_bytes, fmt_us

CODE = "TS101"
SLUG = "unfused-elementwise-chain"
KIND = "runtime"
NEEDS = ("kernels", "duration_us", "core_type", "input_shapes", "output_shapes")
# the fix removes kernels (or moves work off the AI CPU): bounded by their time, not their speed of light
SAVING_KIND = "work"
THRESHOLDS: dict[str, Any] = {
    "min_chain_length": 2,  # kernels in a chain
    "min_occurrences": 2,  # a chain must recur this often in the run
    "launch_overhead_us": 3.0,  # device-side cost of one extra launch (assumption, configurable)
    "min_mte_share": 0.3,  # when MTE ratios exist: (mte2 + mte3) of the chain's Vector time at least this
    "min_saving_us": 1.0,
    "max_findings": 20,
    "pattern_files": [],
}
# Fills and memsets are launched by the framework, not written by the user: not worth fusing.
_SKIP_OPS = ("MemSet", "ZerosLike", "OnesLike", "Fill", "atomic_memset")

# Kernel columns check() reads besides NEEDS (`analyze` loads only what the rules and the report read)
READS = (
    *HELPER_COLUMNS,
    "input_shapes",
    "output_shapes",
    "output_dtypes",
    "aiv_mte2_ratio",
    "aiv_mte3_ratio",
)


def _links(
    order: pd.DataFrame,
    vec: np.ndarray,
    op: np.ndarray,
    ins: tuple[np.ndarray, np.ndarray],
    outs: tuple[np.ndarray, np.ndarray],
) -> np.ndarray:
    """link[i] (in stream order): kernel i reads a tensor kernel i-1 wrote, both Vector-only, same stream.

    Tensors are compared by element count so that views (4096x4608 vs 1024x4x4608) still link.
    `op`, `ins` and `outs` are per-row codes (`tilescope.rules._columns.text_codes`): equal codes are equal
    strings, so neighbours are compared by code and shape strings are parsed once per distinct one.
    """
    rows = order["_row"].to_numpy()
    prev_ok = np.zeros(len(rows), dtype=bool)
    stream = order["_stream"].to_numpy()
    prev_ok[1:] = stream[1:] == stream[:-1]
    del stream
    in_codes, in_labels = ins
    out_codes, out_labels = outs
    # The same op on the same shapes back to back is a per-tensor loop (casts or optimizer updates
    # over a parameter list), not a data dependency: a multi-tensor kernel, not fusion, fixes it.
    same = np.ones(len(rows) - 1 if len(rows) else 0, dtype=bool)
    for codes in (op, in_codes):
        c = codes[rows]
        same &= c[1:] == c[:-1]
        del c
    prev_ok[1:] &= ~same
    del same
    vr = vec[rows]
    cand = np.flatnonzero(prev_ok & vr & np.roll(vr, 1))
    del prev_ok, vr
    link = np.zeros(len(rows), dtype=bool)
    if len(cand) == 0:
        return link
    # a link: some tensor of more than one element written by i-1 has the element count of one
    # that i reads. Decided once per distinct (output shapes of i-1, input shapes of i) pair.
    o = out_codes[rows[cand - 1]].astype(np.int64)
    n = in_codes[rows[cand]].astype(np.int64)
    pairs, inverse = np.unique(o * len(in_labels) + n, return_inverse=True)
    out_elems = [_elems(str(x)) for x in out_labels]
    in_elems = [_elems(str(x)) for x in in_labels]
    hit = np.asarray(
        [
            not out_elems[int(k) // len(in_labels)].isdisjoint(in_elems[int(k) % len(in_labels)])
            for k in pairs
        ],
        dtype=bool,
    )
    link[cand[hit[inverse.reshape(-1)]]] = True
    return link


def _elems(shapes: str) -> set[float]:
    """Element counts (> 1) of the tensors of a ';'-separated shape string."""
    return {e for e in (float(_tensor_elems(t)) for t in shapes.split(";")) if e > 1}


def _first_output_bytes(
    df: pd.DataFrame, rows: np.ndarray, outs: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """Bytes of the first output tensor of the kernels at positional `rows` (computed per distinct
    shape/dtype string; only the chains' kernels are asked for)."""
    dt_codes, dt_labels = text_codes(df, "output_dtypes")
    first_out = pd.Series([u.split(";")[0] for u in outs[1]], dtype=object).take(outs[0][rows])
    first_dt = pd.Series([u.split(";")[0] for u in dt_labels], dtype=object).take(dt_codes[rows])
    return shape_bytes(first_out.reset_index(drop=True), first_dt.reset_index(drop=True)).to_numpy()


# long: the rule's steps in order over one set of per-row code arrays: links, chains, their
# recurrence, then a finding per recurring chain (the docstring above is the rule's documentation).
def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Finds chains of two or more consecutive Vector-only kernels (AI_VECTOR_CORE / MIX_AIV) on one
    stream where each kernel reads the tensor the previous one wrote, and which recur in the run.
    Identical chains (same op types and shapes) are grouped into one finding.

    ## Why is this bad?
    Every link writes the intermediate tensor to global memory and reads it back: two HBM passes
    and one launch per link for work that a single kernel would do on its UB tile. Element-wise
    kernels are memory-bound, so the traffic is the time.

    ## Example
    `BroadcastTo21 → Add22 → DropOutDoMask24 → Add22` (1024x4x12288 fp16 each) four times per step.

    ## What to do instead
    Fold the chain into the epilogue of the neighbouring matmul, or write one TileLang kernel
    that loads each tile into UB once and applies all the element-wise steps before writing it
    back. Chains that are a known fused operator are reported by TS102 instead.

    ## Thresholds
    `min_chain_length` (2), `min_occurrences` (2), `launch_overhead_us` (3.0, an assumption),
    `min_mte_share` (0.3, used only when MTE ratios exist), `min_saving_us` (1.0),
    `max_findings` (20).

    ## Known limits
    Links are found by tensor element counts, not by tensor identity: two unrelated tensors of
    the same size on consecutive kernels link too. The saving (intermediate bytes x 2 ÷ HBM
    bandwidth + launch overhead per removed kernel) is capped at the chain's time minus its
    longest kernel. It uses the chip's GM bandwidth: the vendor figure for the 910B variant and the
    default memory type unless `--chip NAME:cj` or a chip file says otherwise (the profile does not
    record the memory type; evidence names the figure used).
    """
    df = profile.kernels
    # Kernels already inside a known fusible pattern belong to TS102. Matched first: the matcher
    # orders the launches by stream itself, and two such orderings need not be alive at once.
    claimed = np.zeros(len(df), dtype=bool)
    matches = match_patterns(df, load_patterns(list(ctx.thresholds.get("pattern_files") or ())))
    if matches:
        claimed[np.fromiter(itertools.chain.from_iterable(m.rows for m in matches), dtype=np.int64)] = True
    del matches
    order = stream_ordered(df)
    rows = order["_row"].to_numpy()
    # op types, core types and shapes as codes into their distinct strings: no per-row string
    op, op_labels = op_type_codes(df)
    core, core_labels = core_type_codes(df)
    vec_core = np.asarray([c in VECTOR_TYPES for c in core_labels], dtype=bool)
    skip_op = np.asarray([str(o).startswith(_SKIP_OPS) for o in op_labels], dtype=bool)
    vec = vec_core[core] & ~skip_op[op] & ~claimed
    del core, claimed
    outs = text_codes(df, "output_shapes")
    link = _links(order, vec, op, text_codes(df, "input_shapes"), outs)
    del vec
    # Chains = runs of links; chain k spans positions [start-1, end].
    starts = np.flatnonzero(link & ~np.concatenate([[False], link[:-1]]))
    if len(starts) == 0:
        return []
    run_id = np.cumsum(link & ~np.concatenate([[False], link[:-1]]))
    ends = pd.Series(np.arange(len(link)))[link].groupby(run_id[link]).max().to_numpy()
    lengths = ends - starts + 2
    keep = lengths >= int(ctx.thresholds["min_chain_length"])
    starts, ends = starts[keep], ends[keep]
    if len(starts) == 0:
        return []
    dur = num(df, "duration_us").fillna(0).to_numpy()
    name_codes, name_labels = text_codes(df, "name")
    out_codes, out_labels = outs
    mte = (num(df, "aiv_mte2_ratio") + num(df, "aiv_mte3_ratio").fillna(0)).to_numpy()
    bw = profile.chip.hbm_bandwidth_gbps or 0.0
    overhead = float(ctx.thresholds["launch_overhead_us"])
    order_start, order_stream = order["_start"].to_numpy(), order["_stream"].to_numpy()
    # out_bytes is read for every chain member but the last: positions start-1 .. end-1
    written = np.concatenate([np.arange(s - 1, e) for s, e in zip(starts, ends, strict=True)])
    chain_rows = np.unique(rows[written])
    out_bytes = np.zeros(len(df), dtype="float64")
    out_bytes[chain_rows] = _first_output_bytes(df, chain_rows, outs)
    chains: dict[str, list[dict[str, Any]]] = {}
    for s, e in zip(starts, ends, strict=True):  # one iteration per chain, not per kernel
        pos = np.arange(s - 1, e + 1)
        krows = rows[pos]
        inter = out_bytes[krows[:-1]]
        moved = float(2 * inter.sum())
        d = dur[krows]
        traffic_us = moved / (bw * 1e3) if bw else 0.0
        saving = min(traffic_us + overhead * (len(krows) - 1), float(d.sum() - d.max()))
        sig = " → ".join(f"{op_labels[op[r]]}[{out_labels[out_codes[r]]}]" for r in krows)
        chains.setdefault(sig, []).append(
            {
                "kernels": [str(name_labels[name_codes[r]]) for r in krows],
                "device_us": float(d.sum()),
                "bytes": moved,
                "saving_us": max(saving, 0.0),
                "mte_share": float(np.nanmean(mte[krows])) if np.isfinite(mte[krows]).any() else None,
                "start_ns": int(order_start[s - 1]),
                "stream_id": int(order_stream[s - 1]),
            }
        )
    findings: list[Finding] = []
    min_mte = float(ctx.thresholds["min_mte_share"])
    for sig, occ in sorted(chains.items(), key=lambda kv: -sum(o["saving_us"] for o in kv[1])):
        if len(occ) < int(ctx.thresholds["min_occurrences"]):
            continue
        mtes = [o["mte_share"] for o in occ if o["mte_share"] is not None]
        if mtes and float(np.mean(mtes)) < min_mte:
            continue
        saving = sum(o["saving_us"] for o in occ)
        if saving < float(ctx.thresholds["min_saving_us"]):
            continue
        first = occ[0]
        device = sum(o["device_us"] for o in occ)
        evidence = {
            "chain": first["kernels"],
            "signature": sig,
            "occurrences": len(occ),
            "total_device_us": r3(device),
            "median_device_us": r3(np.median([o["device_us"] for o in occ])),
            "intermediate_bytes_per_chain": int(first["bytes"]),
            "mean_mte_share": r3(np.mean(mtes)) if mtes else None,
            "instances": [
                {
                    "start_ns": o["start_ns"],
                    "stream_id": o["stream_id"],
                    "device_us": r3(o["device_us"]),
                    "saving_us": r3(o["saving_us"]),
                }
                for o in occ[:50]
            ],
            "saving_model": "2 x intermediate bytes / HBM bandwidth + launch_overhead_us per removed kernel, "
            "capped at chain time minus its longest kernel",
            "thresholds": {
                k: ctx.thresholds[k]
                for k in ("min_chain_length", "min_occurrences", "launch_overhead_us", "min_mte_share")
            },
            "chip_figures": chip_figures(profile.chip, "hbm_bandwidth_gbps"),
        }
        msg = (
            f"{len(first['kernels'])} Vector kernels ({' → '.join(first['kernels'])}) pass "
            f"{fmt_bytes(first['bytes'])} through global memory, {len(occ)} times "
            f"({fmt_us(device)} in total)"
        )
        findings.append(
            make_finding(
                ctx,
                code=CODE,
                slug=SLUG,
                kernels=first["kernels"],
                message=msg,
                evidence=evidence,
                recommendation="Fuse the chain: fold it into the neighbouring matmul's epilogue, or "
                "write one "
                "TileLang kernel that applies every element-wise step to the tile in UB and writes "
                "global memory once.",
                saving_us=saving,
                occurrences=len(occ),
                locations=locate(profile, first["kernels"][0], "memory"),
            )
        )
        if len(findings) >= int(ctx.thresholds["max_findings"]):
            break
    return findings
