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

L0 = ("L0A", "L0B")


def _carried(k: dict[str, Any], g: dict[str, Any]) -> list[dict[str, Any]]:
    """The serial loops whose trips the GEMM's accumulator is carried across, innermost first
    (ir.json before `carried_loops`: the innermost serial loop, when it carries the accumulator)."""
    ids = g.get("carried_loops")
    if ids is None:
        ids = [g.get("k_loop")] if g.get("accumulates_over_loop") else []
    loops = (loop_by_id(k, i) for i in reversed(ids))
    return [lp for lp in loops if lp is not None]


def _feeders(copies: list[dict[str, Any]], operands: set[str]) -> set[str]:
    """The operands and every on-chip buffer copied into them, transitively (GM -> L1 -> L0A)."""
    fed = set(operands)
    for _ in range(3):
        fed |= {cp["src"] for cp in copies if cp["dst"] in fed and cp["src_level"] != "GM"}
    return fed


def _staged(cp: dict[str, Any], lp: dict[str, Any]) -> bool:
    """Does the copy pick its slot of the destination by the loop's index (`A_L1[k % 2, ...]`)? Then
    the author keeps the versions by hand, as tilelang-ascend's hand-pipelined GEMMs do."""
    region = cp.get("dst_region") or {}
    return lp["id"] in (region.get("loops") or [])


def _loop_tiles(k: dict[str, Any], g: dict[str, Any], lp: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The copies inside the loop that load the GEMM's operand tiles: GM -> L1 (`l1`), and
    L1 -> L0A/L0B out of those tiles (`l0`); hand-staged destinations apart (`staged`)."""
    copies = ops_in_loop(k, "copies", lp["id"])
    fed = _feeders(copies, {g["a"], g["b"]})
    out: dict[str, list[dict[str, Any]]] = {"l1": [], "l0": [], "staged": []}
    for cp in copies:
        if cp["dst"] not in fed:
            continue
        if cp["src_level"] == "GM" and cp["dst_level"] == "L1":
            out["staged" if _staged(cp, lp) else "l1"].append(cp)
    l1 = {cp["dst"] for cp in out["l1"]}
    for cp in copies:
        if cp["dst"] in fed and cp["src"] in l1 and cp["dst_level"] in L0 and not _staged(cp, lp):
            out["l0"].append(cp)
    return out


def _k_loop(k: dict[str, Any], g: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list[Any]]] | None:
    """The innermost carried loop that loads the GEMM's tiles from GM: with L1 K tiles and L0 sub-K
    steps (`for k ... for kk ...`), the outer one, whose loads a second version would overlap."""
    for lp in _carried(k, g):
        tiles = _loop_tiles(k, g, lp)
        if tiles["l1"] or tiles["staged"]:
            return lp, tiles
    return None


def _one_version(k: dict[str, Any], copies: list[dict[str, Any]]) -> dict[str, int | None]:
    """Destination buffer -> its padded bytes, for the ones the scheduler keeps in one version."""
    out: dict[str, int | None] = {}
    for cp in copies:
        a = alloc(k, cp["dst"]) or {}
        if a.get("versions", 1) < 2:
            out[cp["dst"]] = a.get("padded_bytes")
    return out


def _room(k: dict[str, Any], hw: str, extra: int, cap: int | None) -> dict[str, int | None]:
    used = (k.get("footprint", {}).get(hw) or {}).get("bytes")
    need = used + extra if isinstance(used, int) else None
    return {"bytes": used, "extra_bytes": extra, "needed_bytes": need, "capacity_bytes": cap}


def _fits(room: dict[str, int | None]) -> bool:
    need, cap = room["needed_bytes"], room["capacity_bytes"]
    return isinstance(need, int) and isinstance(cap, int) and need <= cap


def _needs(k: dict[str, Any], tiles: dict[str, list[dict[str, Any]]], cap_of: Any) -> dict[str, Any] | None:
    """Per level the loop loads single-version tiles into (L1, and L0A/L0B where the loop itself
    fills them): the tiles, the bytes a second version adds, and whether that fits. None when a
    tile's size is unknown (symbolic)."""
    out: dict[str, Any] = {}
    levels = [("L1", tiles["l1"])] + [(hw, [cp for cp in tiles["l0"] if cp["dst_level"] == hw]) for hw in L0]
    for hw, copies in levels:
        single = _one_version(k, copies)
        if not single:
            continue
        if not all(isinstance(b, int) for b in single.values()):
            return None
        extra = sum(int(b or 0) for b in single.values())
        out[hw] = {"tiles": single, **_room(k, hw, extra, cap_of(hw))}
    return out if "L1" in out else None


def _loop_kind(lp: dict[str, Any]) -> str:
    stages = lp.get("num_stages")
    return "T.serial" if stages is None else f"T.Pipelined with num_stages={stages}"


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Finds GEMMs whose K loop is `T.serial` while L1 has room for a second version of the tiles it
    loads. The accumulator must be carried across the loop, the loop must load the GEMM's operand
    tiles from GM into L1 on every iteration, and the kernel's L1 footprint plus one more version
    of those tiles must fit the chip's L1 — and L0A/L0B too, for the L0 tiles the loop itself
    fills from them. Both Ascend dialects: tilelang 0.1.15's `T.gemm` and tilelang-ascend's
    `T.gemm_v0` (which reads its operands from L1).

    ## Why is this bad?
    In a serial loop the GM -> L1 load of step k+1 (MTE2) waits for the Cube to finish step k: the
    load and compute pipes take turns instead of overlapping. Double buffering needs two versions
    of the loaded tiles, and when L1 has room for them nothing but the loop kind stands in the way.
    The usual tilelang-ascend idiom (`for k in T.serial(loop_k)` around `T.gemm_v0`) is written so.

    ## Example
    `for k in T.serial(K // block_K)` around `T.copy(A[...], a_l1)`, `T.copy(B[...], b_l1)` and
    `T.gemm(...)` with 128×64 and 64×128 fp16 tiles (sample_traces/kernels/matmul_serial_k.py):
    a second version of both needs 32768 B more of L1, 65536 of 524288 B in all. The same loop
    around `T.gemm_v0(A_L1, B_L1, C_L0, init=(k == 0))` (sample_traces/kernels/a2/gemm.py).

    ## What to do instead
    Write the loop as `T.Pipelined(n, num_stages=2)`; the scheduler then keeps two versions of the
    tiles loaded in it (TS504 reports it if it does not, on tilelang 0.1.15).

    ## Thresholds
    `min_iterations` (2): a loop of fewer trips has nothing to overlap. Fires only when L1 (the
    lowered size when the kernel lowered — on tilelang-ascend its Ascend C's placements — else
    tilescope's padded estimate) plus one more version of each loaded tile fits the chip's L1, and
    likewise L0A/L0B for the L0 tiles loaded in the same loop. Severity medium. Static: est. saving
    0 µs.

    ## Known limits
    The loop is read from the IR's structure, not from buffer versions (tilelang-ascend reports
    none): among the loops the accumulator is carried across (`init=(k == 0)`,
    `clear_accum=(k == 0 and kk == 0)`), the innermost that loads the operand tiles from GM. A
    loop with `num_stages >= 2` is quiet, and so are tiles the author versions by hand (a copy
    whose L1 slot follows the loop index, `A_L1[k % 2, ...]`) and tiles the scheduler already
    multi-buffers (`T.annotate_buffer_versions`). Only GM -> L1 loads count as the work to overlap.
    """
    ir = profile.ir or {}
    min_trips = int(ctx.thresholds["min_iterations"])
    out: list[Finding] = []
    for k in lowered_kernels(ir):
        seen: set[str] = set()
        for g in k.get("gemms", []):
            found = _k_loop(k, g)
            if found is None or found[0]["id"] in seen or found[0]["kind"] != "serial":
                continue
            lp, tiles = found
            stages, trips = lp.get("num_stages"), lp["extent"]
            if isinstance(stages, int) and stages >= 2:
                continue
            if not isinstance(trips, int) or trips < min_trips:
                continue
            needs = _needs(k, tiles, ctx.chip.capacity)
            if needs is None or not all(_fits(room) for room in needs.values()):
                continue
            seen.add(lp["id"])
            out.append(_finding(ctx, ir, k, g, lp, needs, min_trips))
    return out


def _finding(
    ctx: RuleContext, ir: dict[str, Any], k: dict[str, Any], g: dict[str, Any], lp: dict[str, Any],
    needs: dict[str, Any], min_trips: int,
) -> Finding:
    trips, l1 = lp["extent"], needs["L1"]
    more = "; ".join(
        f"{fmt_kib(r['extra_bytes'])} more of {hw} ({r['needed_bytes']} of {r['capacity_bytes']} B)"
        for hw, r in needs.items()
    )
    msg = (
        f"K loop {lp['var']} of GEMM {g['a']}×{g['b']}→{g['c']} is {_loop_kind(lp)} over {trips} iterations: "
        f"the GM→L1 loads of {', '.join(l1['tiles'])} for step k+1 wait for step k; a second version "
        f"needs {more}: use T.Pipelined({trips}, num_stages=2)"
    )
    return make_finding(
        ctx,
        code=CODE,
        slug=SLUG,
        severity=Severity.MEDIUM,
        kernels=(k["name"],),
        message=msg,
        evidence={
            "loop": lp["var"],
            "loop_kind": _loop_kind(lp),
            "iterations": trips,
            "gemm": [g["a"], g["b"], g["c"]],
            "l1_tiles": l1["tiles"],
            "l1_bytes": l1["bytes"],
            "l1_extra_bytes": l1["extra_bytes"],
            "l1_needed_bytes": l1["needed_bytes"],
            "l1_capacity_bytes": l1["capacity_bytes"],
            "l0_two_versions": {hw: r for hw, r in needs.items() if hw != "L1"},
            "chip": ctx.chip.name,
            "min_iterations": min_trips,
        },
        recommendation=f"write the loop as T.Pipelined({trips}, num_stages=2)",
        saving_us=0.0,
        locations=locations(ir, k, lp, f"{_loop_kind(lp)} K loop"),
    )
