"""TS510 low-precision-running-state: online-softmax state summed across loop iterations in fp16/bf16."""

from __future__ import annotations

import math
from typing import Any

from tilescope.engine import RuleContext
from tilescope.findings import Finding, Severity
from tilescope.ir.rulekit import alloc, locations, loop_by_id, lowered_kernels, ops_in_loop
from tilescope.profile import Profile
from tilescope.rules._findings import make_finding
from tilescope.rules.ts503_low_precision_accumulation import THRESHOLDS as TS503_THRESHOLDS

CODE = "TS510"
SLUG = "low-precision-running-state"
NEEDS = ("ir",)
KIND = "static"
# The same reduction lengths as the GEMM-accumulator rule: the rounding compounds the same way.
THRESHOLDS: dict[str, Any] = dict(TS503_THRESHOLDS)


def _writers(k: dict[str, Any], loop_id: str, name: str, before: int) -> list[tuple[str, dict[str, Any]]]:
    """Ops inside the loop, earlier in program order, that write `name` (kind, record)."""
    found: list[tuple[str, dict[str, Any]]] = []
    for kind, field in (("copies", "dst"), ("reduces", "dst"), ("fills", "dst"), ("gemms", "c")):
        for r in ops_in_loop(k, kind, loop_id):
            if r.get(field) == name and r.get("seq", math.inf) < before:
                found.append((kind, r))
    for e in ops_in_loop(k, "elementwise", loop_id):
        if name in e.get("writes", []) and e.get("seq", math.inf) < before:
            found.append(("elementwise", e))
    return found


def _overwritten(k: dict[str, Any], loop_id: str, name: str, before: int) -> bool:
    """Written earlier in the same iteration without reading its old value: not carried across it."""
    for kind, r in _writers(k, loop_id, name, before):
        if kind == "elementwise" and name in r.get("reads", []):
            continue
        if kind == "gemms" and r.get("accumulates_over_loop"):
            continue
        return True
    return False


def _terms(k: dict[str, Any], loop_id: str, name: str, before: int, depth: int = 0) -> int:
    """How many values one iteration sums into `name`: a sum reduce's fan-in, a GEMM's K, passed
    through copies; an element-wise result is one value per element."""
    if depth > 6:
        return 1
    best = 1
    for kind, r in _writers(k, loop_id, name, before):
        if kind == "reduces" and r.get("kind") == "sum":
            src, dst = alloc(k, r.get("src") or ""), alloc(k, name)
            if src and dst and all(isinstance(d, int) for d in (*src["shape"], *dst["shape"])):
                best = max(best, math.prod(src["shape"]) // max(1, math.prod(dst["shape"])))
        elif kind == "gemms" and isinstance(r.get("k"), int):
            best = max(best, int(r["k"]))
        elif kind == "copies":
            best = max(best, _terms(k, loop_id, r["src"], r.get("seq", before), depth + 1))
    return best


def _carrying_loop(k: dict[str, Any], e: dict[str, Any]) -> dict[str, Any] | None:
    """The innermost serial loop of more than one trip around an element-wise loop."""
    for loop_id in reversed(e.get("enclosing_loops", [])):
        lp = loop_by_id(k, loop_id)
        if lp and lp["kind"] == "serial" and isinstance(lp["extent"], int) and lp["extent"] > 1:
            return lp
    return None


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Finds fp16/bf16 running state summed across loop iterations. That is the online-softmax row
    sum and output accumulator (`row_sum = row_sum * rescale + l_new`, `o = o * rescale + pv`) in
    UB or registers: each iteration adds to the old value (an element-wise store that reads the
    same buffer and adds) and nothing earlier in the iteration overwrote it. TS503 covers
    GEMM accumulators in L0C; this is the vector-side state.

    ## Why is this bad?
    Every iteration rounds the running value to 11 (fp16) or 8 (bf16) mantissa bits, so the
    error grows with the number of values summed: a row sum over 2048 keys in fp16 reaches the
    range where one ulp is 2 and adding a probability below 1 changes nothing; fp16 overflows at
    65504.

    ## Example
    `row_sum = T.alloc_shared((64,), "float16")` updated in a 16-iteration KV loop, each adding the
    sum of a 128-wide score row: 2048 values summed in fp16.

    ## What to do instead
    Keep running state in float32 (as the GEMM accumulators are) and cast once when storing the
    output.

    ## Thresholds
    The reduction length is iterations × values added per iteration (a sum reduce's fan-in or a
    GEMM's K feeding the update, else 1). `min_reduction_length` (1024): medium;
    `high_reduction_length` (8192): high; `low_precision_dtypes` ("float16,bfloat16") — the
    defaults of TS503. Static: est. saving 0 µs.

    ## Known limits
    Reads element-wise `T.Parallel` loops only: state updated through SIMD intrinsics
    (`vsts`/`vld` in `T.SimdVF`) or across Python-unrolled steps is not seen. Values added per
    iteration are traced through copies only; a value computed element-wise counts as one.
    """
    ir = profile.ir or {}
    th = ctx.thresholds
    low = {d.strip() for d in str(th["low_precision_dtypes"]).split(",")}
    lo_len, hi_len = int(th["min_reduction_length"]), int(th["high_reduction_length"])
    out: list[Finding] = []
    for k in lowered_kernels(ir):
        reported: set[str] = set()
        for e in k.get("elementwise", []):
            lp = _carrying_loop(k, e)
            if lp is None or "seq" not in e:
                continue
            for name in e.get("accumulates", []):
                a = alloc(k, name)
                if name in reported or not a or a["dtype"] not in low or a["hardware"] not in ("UB", "REG"):
                    continue
                if _overwritten(k, lp["id"], name, e["seq"]):
                    continue
                per_iter = max(
                    [1] + [_terms(k, lp["id"], r, e["seq"]) for r in e.get("reads", []) if r != name]
                )
                total = per_iter * int(lp["extent"])
                if total < lo_len:
                    continue
                reported.add(name)
                sev = Severity.HIGH if total >= hi_len else Severity.MEDIUM
                msg = (
                    f"{a['dtype']} running state {name} ({a['hardware']}) is added to on each of the "
                    f"{lp['extent']} iterations of loop {lp['var']}, {per_iter} values per iteration: "
                    f"a sum of {total} values rounded in {a['dtype']}; keep it in float32"
                )
                out.append(
                    make_finding(
                        ctx,
                        code=CODE,
                        slug=SLUG,
                        severity=sev,
                        kernels=(k["name"],),
                        message=msg,
                        evidence={
                            "buffer": name,
                            "dtype": a["dtype"],
                            "hardware": a["hardware"],
                            "loop": lp["var"],
                            "iterations": lp["extent"],
                            "values_per_iteration": per_iter,
                            "reduction_length": total,
                            "min_reduction_length": lo_len,
                            "high_reduction_length": hi_len,
                        },
                        recommendation=f'allocate {name} as float32 and cast once when storing the result',
                        saving_us=0.0,
                        locations=locations(ir, k, a, "running state") + locations(ir, k, e, "update")[:1],
                    )
                )
    return out
