"""TS511 loop-invariant-copy: a tile copy repeated on every iteration although nothing it reads changes."""

from __future__ import annotations

from typing import Any

from tilescope.engine import RuleContext
from tilescope.findings import Finding, Severity
from tilescope.ir.rulekit import fmt_kib, locations, loop_by_id, lowered_kernels, ops_in_loop
from tilescope.profile import Profile
from tilescope.rules._findings import make_finding

CODE = "TS511"
SLUG = "loop-invariant-copy"
NEEDS = ("ir",)
KIND = "static"
THRESHOLDS: dict[str, Any] = {"min_iterations": 2}

# Destinations only tile copies and the Cube write: a vector SIMD store cannot touch them, so the
# copies and GEMMs recorded in ir.json are every writer there is.
_CUBE_SIDE = ("L1", "L0A", "L0B")


def _other_writer(k: dict[str, Any], cp: dict[str, Any], loop_id: str) -> bool:
    """Anything else in the loop writes the copy's destination."""
    if any(o is not cp and o["dst"] == cp["dst"] for o in ops_in_loop(k, "copies", loop_id)):
        return True
    return any(g["c"] == cp["dst"] for g in ops_in_loop(k, "gemms", loop_id))


def _invariant_in(k: dict[str, Any], cp: dict[str, Any], loop_id: str) -> bool:
    lp = loop_by_id(k, loop_id)
    if lp is None or lp["kind"] != "serial":
        return False
    src, dst = cp.get("src_region"), cp.get("dst_region")
    if not src or not dst or src.get("opaque") or dst.get("opaque"):
        return False
    if loop_id in src.get("loops", []) or loop_id in dst.get("loops", []):
        return False
    return cp["src"] not in lp.get("writes", [cp["src"]]) and not _other_writer(k, cp, loop_id)


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Finds tile copies repeated on every iteration of a loop although nothing they read changes.
    Their source and destination regions do not depend on the loop index (their start positions,
    as ir.json records them, name no index of that loop), nothing in the loop writes the source,
    and nothing else in the loop writes the destination (L1, L0A or L0B): the copy moves the same
    bytes to the same place on every iteration.

    ## Why is this bad?
    Each repeat spends the copy's pipe (MTE2 from GM, MTE1 from L1) and a synchronisation with the
    Cube, for data already there. The flash-attention idiom `T.copy(q_l1, q_l0)` inside the KV loop
    reloads the 32 KiB Q tile into L0A once per KV block.

    ## Example
    `for j in T.Pipelined(16, num_stages=2): T.copy(q_l1, q_l0); ...` with q_l1 loaded before the
    loop: 15 redundant L1 → L0A copies of 32 KiB per block.

    ## What to do instead
    Move the copy above the loop (above every loop it does not depend on). The destination keeps
    its space either way, so the footprint does not change.

    ## Thresholds
    `min_iterations` (2): loops of fewer trips repeat nothing. Severity medium for a GM load (MTE2,
    the scarce pipe), low for an on-chip copy. Static: est. saving 0 µs.

    ## Known limits
    Copies whose position is computed from a loaded value (a `T.alloc_var` index) count as
    varying. UB destinations are not judged (a SIMD store inside the loop could write them unseen).
    Whether the scheduler already overlaps the copy with other work is not known statically: the
    saving is the pipe time and bandwidth, not necessarily wall time.
    """
    ir = profile.ir or {}
    min_trips = int(ctx.thresholds["min_iterations"])
    out: list[Finding] = []
    for k in lowered_kernels(ir):
        for cp in k.get("copies", []):
            if cp["dst_level"] not in _CUBE_SIDE:
                continue
            hoist: list[dict[str, Any]] = []  # loops the copy can leave, innermost first
            for loop_id in reversed(cp.get("enclosing_loops", [])):
                if not _invariant_in(k, cp, loop_id):
                    break
                lp = loop_by_id(k, loop_id)
                if lp is not None:
                    hoist.append(lp)
            trips = 1
            for lp in hoist:
                trips *= lp["extent"] if isinstance(lp["extent"], int) else 1
            if not hoist or trips < min_trips:
                continue
            outer = hoist[-1]
            nbytes = cp.get("bytes")
            redundant = nbytes * (trips - 1) if isinstance(nbytes, int) else None
            pipe = cp.get("pipe") or f"{cp['src_level']}→{cp['dst_level']}"
            size = f"{fmt_kib(nbytes)} " if isinstance(nbytes, int) else ""
            path = f"{cp['src_level']}→{cp['dst_level']}"
            msg = (
                f"T.copy({cp['src']} → {cp['dst']}) runs on each of the {trips} iterations of loop "
                f"{' / '.join(lp['var'] for lp in reversed(hoist))} but neither region depends on it and "
                f"{cp['src']} is not written there: {trips - 1} redundant {path} copies of {size}({pipe}) "
                f"per block; hoist it above loop {outer['var']}"
            )
            out.append(
                make_finding(
                    ctx,
                    code=CODE,
                    slug=SLUG,
                    severity=Severity.MEDIUM if cp["src_level"] == "GM" else Severity.LOW,
                    kernels=(k["name"],),
                    message=msg,
                    evidence={
                        "src": cp["src"],
                        "dst": cp["dst"],
                        "pipe": pipe,
                        "bytes_per_copy": nbytes,
                        "loops": [lp["var"] for lp in reversed(hoist)],
                        "iterations": trips,
                        "redundant_copies": trips - 1,
                        "redundant_bytes": redundant,
                        "min_iterations": min_trips,
                    },
                    recommendation=f"move T.copy({cp['src']}, {cp['dst']}) above loop {outer['var']}",
                    saving_us=0.0,
                    locations=(
                        locations(ir, k, cp, "loop-invariant copy") + locations(ir, k, outer, "loop")[:1]
                    ),
                )
            )
    return out
