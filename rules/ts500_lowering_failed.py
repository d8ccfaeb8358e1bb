"""TS500 lowering-failed: TileLang could not build or lower the kernel for Ascend."""

from __future__ import annotations

from typing import Any

from tilescope.engine import RuleContext
from tilescope.findings import Finding, Severity
from tilescope.ir.rulekit import alloc, locations
from tilescope.profile import Profile
from tilescope.rules._findings import make_finding

CODE = "TS500"
SLUG = "lowering-failed"
NEEDS = ("ir",)
KIND = "static"
THRESHOLDS: dict[str, Any] = {}


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Reports a kernel whose build or Ascend lowering raised, with the numbers of the Z3 scheduler's
    capacity message (scope, capacity, required bytes) when that was the cause.

    ## Why is this bad?
    The kernel cannot run at all with these parameters. The capacity error only names a scope; this
    finding adds the hardware buffer, the chip and the largest buffers of that scope.

    ## Example
    `scope "shared.l1" capacity 524288 is insufficient for minimum buffer usage 786432` for a
    512×512 + 256×512 fp16 pair of L1 tiles.

    ## What to do instead
    Shrink the tiles of the named scope (or lower num_stages), or split the kernel.

    ## Thresholds
    None: any failure fires. Severity is always high (no device time exists; est. saving is 0).

    ## Known limits
    Only the first failing pass is seen. tilelang 0.1.15 checks UB against 221184 B, the 950's
    figure; on a 910B the smaller UB is checked by TS501 instead.
    """
    ir = profile.ir or {}
    out: list[Finding] = []
    for k in ir.get("kernels", []):
        f = k.get("failure")
        if not f:
            continue
        ev: dict[str, Any] = {
            "stage": f["stage"],
            "pass": f.get("pass"),
            "exception": f["exception"],
            "error": f["message"],
            "chip": ctx.chip.name,
        }
        rec = None
        if f["kind"] == "capacity":
            hw = f.get("hardware", "?")
            ev.update(
                scope=f["scope"],
                hardware=hw,
                capacity_bytes=f["capacity_bytes"],
                required_bytes=f["required_bytes"],
                over_by_bytes=f["required_bytes"] - f["capacity_bytes"],
            )
            if hw in ("UB", "L1", "L0A", "L0B", "L0C"):
                ev["chip_capacity_bytes"] = ctx.chip.capacity(hw)
            biggest = (k.get("footprint", {}).get(hw) or {}).get("buffers", [])
            ev["largest_buffers"] = biggest[:3]
            rec = alloc(k, biggest[0]) if biggest else None
            msg = (
                f'lowering failed: {hw} (scope "{f["scope"]}") needs at least {f["required_bytes"]} B, '
                f"the scheduler's capacity is {f['capacity_bytes']} B"
            )
            rec_text = (
                f"reduce the {hw} tiles ({', '.join(biggest[:3]) or 'see the kernel'}) by at least "
                f"{f['required_bytes'] - f['capacity_bytes']} B, or lower num_stages"
            )
        else:
            where = f.get("pass") or "the builder"
            msg = f"{f['stage']} failed in {where}: {f['exception']}: {f['message'][:200]}"
            rec_text = "fix the error above; rerun with --debug to see the full TileLang message"
            if k.get("dialect") == "tilelang-cuda":
                # A GPU-style kernel (tilelang.language, T.Kernel(..., threads=N), fragments) has no
                # Ascend lowering: say so instead of leaving the user with a pass's internal error.
                ev["dialect"] = "tilelang-cuda"
                rec_text = (
                    "this kernel is written in TileLang's CUDA dialect (tilelang.language with "
                    "threads= and fragment buffers), which has no Ascend lowering: write it with "
                    "tilelang.ascend.language (T.alloc_l1 / alloc_l0a / alloc_l0b / alloc_l0c / "
                    "alloc_shared = UB, no threads=) — see sample_traces/kernels/matmul.py"
                )
        out.append(
            make_finding(
                ctx,
                code=CODE,
                slug=SLUG,
                severity=Severity.HIGH,
                kernels=(k["name"],),
                message=msg,
                evidence=ev,
                recommendation=rec_text,
                saving_us=0.0,
                locations=locations(ir, k, rec, "lowering failure"),
            )
        )
    return out
