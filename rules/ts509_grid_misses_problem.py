"""TS509 grid-misses-problem: the grid and loops × tile reach fewer rows of a GM tensor than it has."""

from __future__ import annotations

from typing import Any

from tilescope.engine import RuleContext
from tilescope.findings import Finding, Severity
from tilescope.ir.regions import covered_interval
from tilescope.ir.rulekit import locations, loop_by_id, lowered_kernels
from tilescope.profile import Profile
from tilescope.rules._findings import make_finding

CODE = "TS509"
SLUG = "grid-misses-problem"
NEEDS = ("ir",)
KIND = "static"
THRESHOLDS: dict[str, Any] = {"min_missed": 1}


def _accesses(k: dict[str, Any], tensor: str) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], bool]:
    """(copy, region) for every tile copy of a GM tensor, and whether any access is something else
    (an element load or store in a vector loop) that the copies alone do not describe."""
    out: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for cp in k.get("copies", []):
        for side in ("src", "dst"):
            if cp[side] == tensor:
                out.append((cp, cp.get(f"{side}_region") or {}))
    other = any(tensor in (*e.get("writes", []), *e.get("reads", [])) for e in k.get("elementwise", []))
    return out, other


def _merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(intervals):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def _missed(size: int, covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """[lo, hi) ranges of 0..size that no interval reaches."""
    gaps: list[tuple[int, int]] = []
    at = 0
    for lo, hi in covered:
        if lo > at:
            gaps.append((at, min(lo, size)))
        at = max(at, hi)
        if at >= size:
            break
    if at < size:
        gaps.append((at, size))
    return [g for g in gaps if g[1] > g[0]]


def _ranges(spans: list[tuple[int, int]]) -> str:
    return ", ".join(f"{lo}..{hi - 1}" for lo, hi in spans)


def _reach(k: dict[str, Any], dims: list[dict[str, Any]]) -> str:
    """'grid bx (7) × 128' for the loops that tile one region dimension."""
    parts = []
    for dim in dims:
        for loop_id, coeff, trips in dim.get("terms") or []:
            lp = loop_by_id(k, loop_id) or {}
            kind = "grid" if lp.get("kind") == "thread_binding" else "loop"
            parts.append(f"{kind} {lp.get('var', loop_id)} ({trips}) × {coeff}")
    return ", ".join(dict.fromkeys(parts))


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Finds indices of a GM tensor that no block or loop iteration reaches. For every GM tensor a
    kernel moves with tile copies, it takes each copy's region start as ir.json records it (affine
    in the grid index and loop indices: `base + Σ coeff × i`) and its extent, works out which
    indices of each dimension the grid and loops reach, and compares them with the tensor's size.
    Dimensions no loop tiles are left alone.

    ## Why is this bad?
    Rows no block reaches are never written (the output keeps whatever the memory held) or never
    read (a reduction silently leaves them out). TileLang does not check it: `T.Kernel(seq_q //
    block_M)` with seq_q = 1000 and block_M = 128 launches 7 blocks that cover rows 0..895.

    ## Example
    `Out[qb * 128:(qb + 1) * 128, :]` written by `T.Kernel(1000 // 128)`: rows 896..999 (104 of
    1000) are never written.

    ## What to do instead
    Launch `T.ceildiv(n, block)` blocks and handle the tail tile (a bounds check, or a size padded to
    a multiple of the tile), or pick a tile that divides the size.

    ## Thresholds
    `min_missed` (1): indices left out before the rule fires. Severity high for a tensor the kernel
    writes, medium for one it only reads (an input can be larger than the part a kernel needs,
    e.g. a KV cache). Static: est. saving 0 µs.

    ## Known limits
    Only copies whose start is affine in loop indices (after inlining scalar bindings) are
    understood; a tensor also touched element-wise, or through a start computed from a loaded
    value (`T.alloc_var` tile swizzles) or a non-affine index (`t // n_tiles` of a persistent
    loop), is skipped, as are symbolic sizes. `if` guards are ignored, so reach is an upper bound
    (a miss is certain, full coverage is not proven). Indices beyond the end (a ceil-div grid
    without a bounds check) are not reported: the Ascend lowering pads out-of-bounds tiles.
    """
    ir = profile.ir or {}
    min_missed = int(ctx.thresholds["min_missed"])
    out: list[Finding] = []
    for k in lowered_kernels(ir):
        for t in k.get("gm_tensors", []):
            shape = t["shape"]
            acc, other = _accesses(k, t["name"])
            if other or not acc or not all(isinstance(d, int) for d in shape):
                continue
            regions = [r for _, r in acc]
            if any(not r or r.get("opaque") or len(r.get("dims", [])) != len(shape) for r in regions):
                continue
            written = any(cp["dst"] == t["name"] for cp, _ in acc)
            for d, size in enumerate(shape):
                dims = [r["dims"][d] for r in regions]
                if not any(dim.get("terms") for dim in dims):
                    continue  # no loop walks this dimension: a slice chosen on purpose
                spans = [covered_interval(dim) for dim in dims]
                if any(s is None for s in spans):
                    continue
                gaps = _missed(int(size), _merge([s for s in spans if s is not None]))
                missed = sum(hi - lo for lo, hi in gaps)
                if missed < min_missed:
                    continue
                verb = "written" if written else "read"
                covered = _merge([s for s in spans if s is not None])
                msg = (
                    f"{t['name']} dim {d}: indices {_ranges(gaps)} ({missed} of {size}) are never {verb}; "
                    f"its tile copies reach {_ranges(covered)} ({_reach(k, dims)})"
                )
                first = next(cp for cp, r in acc if r["dims"][d].get("terms"))
                out.append(
                    make_finding(
                        ctx,
                        code=CODE,
                        slug=SLUG,
                        severity=Severity.HIGH if written else Severity.MEDIUM,
                        kernels=(k["name"],),
                        message=msg,
                        evidence={
                            "tensor": t["name"],
                            "shape": shape,
                            "dim": d,
                            "size": size,
                            "missed": missed,
                            "missed_ranges": [list(g) for g in gaps],
                            "covered": [list(s) for s in covered],
                            "grid": k.get("grid"),
                            "tiles": [
                                {"start": dim["start"], "extent": dim["extent"], "terms": dim["terms"]}
                                for dim in dims
                            ],
                            "written": written,
                            "min_missed": min_missed,
                        },
                        recommendation=(
                            "launch T.ceildiv(n, block) blocks and guard the tail tile, or use a tile that "
                            f"divides {size}"
                        ),
                        saving_us=0.0,
                        locations=locations(ir, k, first, f"{t['name']} tile copy"),
                    )
                )
    return out
