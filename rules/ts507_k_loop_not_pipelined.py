"""TS507 k-loop-not-pipelined: a GEMM's K loop is T.serial while L1 has room for two versions of its tiles."""

from __future__ import annotations

from typing import Any

from tilescope.engine import RuleContext
from tilescope.findings import Finding, Severity
from tilescope.ir.rulekit import alloc, fmt_kib, locations, loop_by_id, lowered_kernels, ops_in_loop
from tilescope.profile import Profile
from tilescope.rules._findings import make_finding

CODE = "TS507"
SLUG = "k-loop-not-pipelined"
NEEDS = ("ir",)
KIND = "static"
THRESHOLDS: dict[str, Any] = {"min_iterations": 2}


def _l1_tiles(k: dict[str, Any], g: dict[str, Any], loop_id: str) -> list[str]:
    """L1 tiles loaded from GM inside the loop that feed the GEMM (directly, or through an
    L1 -> L0A/L0B copy in the same loop)."""
    copies = ops_in_loop(k, "copies", loop_id)
    feeds = {g["a"], g["b"]} | {cp["src"] for cp in copies if cp["dst"] in (g["a"], g["b"])}
    names: list[str] = []
    for cp in copies:
        loads = cp["src_level"] == "GM" and cp["dst_level"] == "L1"
        if loads and cp["dst"] in feeds and cp["dst"] not in names:
            names.append(cp["dst"])
    return names


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Finds GEMMs whose K loop is `T.serial` while L1 has room for a second version of the tiles it
    loads. The accumulator must be carried across the loop (not `T.Pipelined`), the loop must load
    the GEMM's operand tiles from GM into L1 on every iteration, and the kernel's L1 footprint
    plus one more version of those tiles must fit the chip's L1.

    ## Why is this bad?
    In a serial loop the GM -> L1 load of step k+1 (MTE2) waits for the Cube to finish step k: the
    load and compute pipes take turns instead of overlapping. Double buffering needs two versions
    of the loaded tiles, and when L1 has room for them nothing but the loop kind stands in the way.
    The usual tilelang-ascend idiom (`for k in T.serial(loop_k)` around `T.gemm_v0`) is written so.

    ## Example
    `for k in T.serial(K // block_K)` around `T.copy(A[...], a_l1)`, `T.copy(B[...], b_l1)` and
    `T.gemm(...)` with 128×64 and 64×128 fp16 tiles (sample_traces/kernels/matmul_serial_k.py):
    a second version of both needs 32768 B more of L1, 65536 of 524288 B in all.

    ## What to do instead
    Write the loop as `T.Pipelined(n, num_stages=2)`; the scheduler then keeps two versions of the
    tiles loaded in it (TS504 reports it if it does not).

    ## Thresholds
    `min_iterations` (2): a loop of fewer trips has nothing to overlap. Fires only when L1 (the
    lowered size when the kernel lowered, else tilescope's padded estimate) plus one more version
    of each loaded tile fits the chip's L1. Severity medium. Static: est. saving 0 µs.

    ## Known limits
    Only the GEMM's innermost serial loop is looked at, and only GM -> L1 loads count as the work
    to overlap; L0A/L0B room for two versions is reported as evidence, not required. Kernels the
    scheduler already multi-buffers (`T.annotate_buffer_versions`) are quiet.
    """
    ir = profile.ir or {}
    min_trips = int(ctx.thresholds["min_iterations"])
    cap = ctx.chip.capacity("L1")
    out: list[Finding] = []
    for k in lowered_kernels(ir):
        seen: set[str] = set()
        for g in k.get("gemms", []):
            lp = loop_by_id(k, g.get("k_loop"))
            if lp is None or lp["id"] in seen or not g.get("accumulates_over_loop"):
                continue
            trips = lp["extent"]
            if lp["kind"] != "serial" or lp.get("num_stages") is not None:
                continue
            if not isinstance(trips, int) or trips < min_trips:
                continue
            tiles = _l1_tiles(k, g, lp["id"])
            records = {t: alloc(k, t) or {} for t in tiles}
            single = {t: a.get("padded_bytes") for t, a in records.items() if a.get("versions", 1) < 2}
            if not single or not all(isinstance(b, int) for b in single.values()):
                continue
            extra = sum(int(b) for b in single.values() if b)
            l1_now = (k.get("footprint", {}).get("L1") or {}).get("bytes")
            if not isinstance(l1_now, int) or l1_now + extra > cap:
                continue
            seen.add(lp["id"])
            l0_room = {}
            for hw, name in (("L0A", g["a"]), ("L0B", g["b"])):
                a = alloc(k, name)
                used = (k.get("footprint", {}).get(hw) or {}).get("bytes")
                if a and a.get("hardware") == hw and isinstance(used, int) and a.get("padded_bytes"):
                    need = used + int(a["padded_bytes"]) * max(0, 2 - int(a.get("versions", 1)))
                    l0_room[hw] = {"needed_bytes": need, "capacity_bytes": ctx.chip.capacity(hw)}
            msg = (
                f"K loop {lp['var']} of GEMM {g['a']}×{g['b']}→{g['c']} is T.serial over {trips} iterations: "
                f"the GM→L1 loads of {', '.join(single)} for step k+1 wait for step k; a second version "
                f"needs {fmt_kib(extra)} more of L1 ({l1_now + extra} of {cap} B): "
                f"use T.Pipelined({trips}, num_stages=2)"
            )
            out.append(
                make_finding(
                    ctx,
                    code=CODE,
                    slug=SLUG,
                    severity=Severity.MEDIUM,
                    kernels=(k["name"],),
                    message=msg,
                    evidence={
                        "loop": lp["var"],
                        "iterations": trips,
                        "gemm": [g["a"], g["b"], g["c"]],
                        "l1_tiles": single,
                        "l1_bytes": l1_now,
                        "l1_extra_bytes": extra,
                        "l1_needed_bytes": l1_now + extra,
                        "l1_capacity_bytes": cap,
                        "l0_two_versions": l0_room,
                        "chip": ctx.chip.name,
                        "min_iterations": min_trips,
                    },
                    recommendation=f"write the loop as T.Pipelined({trips}, num_stages=2)",
                    saving_us=0.0,
                    locations=locations(ir, k, lp, "serial K loop"),
                )
            )
    return out
