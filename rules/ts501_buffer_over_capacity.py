"""TS501 buffer-over-capacity: a scope's tiles (padded, all versions) exceed the chip's buffer."""

from __future__ import annotations

from typing import Any

from tilescope.engine import RuleContext
from tilescope.findings import Finding, Severity
from tilescope.ir.rulekit import alloc, fmt_kib, locations, lowered_kernels
from tilescope.profile import Profile
from tilescope.rules._findings import make_finding

CODE = "TS501"
SLUG = "buffer-over-capacity"
NEEDS = ("ir",)
KIND = "static"
THRESHOLDS: dict[str, Any] = {"max_fill_ratio": 1.0}


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Adds up, per hardware buffer (UB, L1, L0A, L0B, L0C), the bytes the kernel's tiles occupy —
    rounded up to the Cube fractal (M, N to 16, K to C0 = 32 B / dtype size) and multiplied by the
    multi-buffer versions the scheduler chose — and compares that with the chosen chip's capacity.

    ## Why is this bad?
    TileLang 0.1.15 does not check L0C at all (1 MiB accumulators lower silently) and checks UB
    against the 950's 221184 B; on a 910B such a kernel overwrites neighbouring data or fails at
    bisheng/run time.

    ## Example
    A 256×256 fp32 accumulator needs 262144 B of L0C; a 910B2 has 131072 B.

    ## What to do instead
    Shrink the tile of that scope (block_M/block_N for L0C, block_K too for L0A/L0B/L1), use a
    narrower accumulator only if the precision allows, or split the tile over two passes.

    ## Thresholds
    `max_fill_ratio` (1.0): fire when bytes > capacity × max_fill_ratio. Severity high.

    ## Known limits
    When the lowering succeeded the lowered `buf_dyn_*` sizes are used (authoritative); otherwise
    tilescope's own padded estimate. CUDA-dialect scopes (shared.dyn, local.fragment) are not Ascend
    buffers and are not checked.
    """
    ir = profile.ir or {}
    ratio = float(ctx.thresholds.get("max_fill_ratio", 1.0))
    out: list[Finding] = []
    for k in lowered_kernels(ir):
        if k.get("dialect") == "tilelang-cuda":
            continue
        for hw, fp in k.get("footprint", {}).items():
            cap = ctx.chip.capacity(hw)
            used = int(fp["bytes"])
            if used <= cap * ratio:
                continue
            bufs = [alloc(k, n) for n in fp["buffers"]]
            detail = [
                {
                    "name": a["name"],
                    "shape": a["shape"],
                    "padded_shape": a["padded_shape"],
                    "dtype": a["dtype"],
                    "padded_bytes": a["padded_bytes"],
                    "versions": a["versions"],
                    "total_bytes": a["total_bytes"],
                }
                for a in bufs
                if a
            ]
            top = detail[0] if detail else None
            what = _occupies(top) if top else ""
            msg = f"{hw} over capacity: {used} B ({fmt_kib(used)}) > {cap} B on {ctx.chip.name}" + (
                f"; {what}" if what else ""
            )
            out.append(
                make_finding(
                    ctx,
                    code=CODE,
                    slug=SLUG,
                    severity=Severity.HIGH,
                    kernels=(k["name"],),
                    message=msg,
                    evidence={
                        "hardware": hw,
                        "bytes": used,
                        "estimated_bytes": fp["estimated_bytes"],
                        "lowered_bytes": fp["lowered_bytes"],
                        "capacity_bytes": cap,
                        "chip": ctx.chip.name,
                        "max_fill_ratio": ratio,
                        "over_by_bytes": used - cap,
                        "buffers": detail,
                        "checked_by_tilelang": hw != "L0C",
                    },
                    recommendation=f"reduce the {hw} tiles by at least {used - cap} B "
                    f"(e.g. halve block_N or block_M of {top['name'] if top else 'the largest tile'})",
                    saving_us=0.0,
                    locations=locations(ir, k, alloc(k, top["name"]) if top else None, f"{hw} allocation"),
                )
            )
    return out


def _occupies(buf: dict[str, Any]) -> str:
    """`s_acc 128×256 float32 occupies 128×256 × 4 B = 131,072 B`: the product that gives the
    bytes, with the bytes per element (the padded bytes over the padded element count)."""
    elements = 1
    for n in buf["padded_shape"]:
        elements *= int(n)
    whole = elements and buf["padded_bytes"] % elements == 0
    size = f" × {buf['padded_bytes'] // elements} B" if whole else ""
    return (
        f"{buf['name']} {'×'.join(map(str, buf['shape']))} {buf['dtype']} occupies "
        f"{'×'.join(map(str, buf['padded_shape']))}{size} = {buf['padded_bytes']:,} B"
        + (f" × {buf['versions']} versions" if buf["versions"] > 1 else "")
    )
