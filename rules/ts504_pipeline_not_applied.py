"""TS504 pipeline-not-applied: T.Pipelined asked for num_stages > 1 but buffers kept one version."""

from __future__ import annotations

from typing import Any

from analyzer.engine import RuleContext
from analyzer.findings import Finding, Severity
from analyzer.ir.rulekit import alloc, locations, lowered_kernels
from analyzer.profile import Profile

CODE = "TS504"
SLUG = "pipeline-not-applied"
NEEDS = ("ir",)
KIND = "static"
THRESHOLDS: dict[str, Any] = {"max_versions": 2}


def _loop_buffers(k: dict[str, Any], loop_id: str) -> list[str]:
    """On-chip buffers written by copies inside the loop: the ones multi-buffering would duplicate."""
    names = []
    for cp in k.get("copies", []):
        in_loop = loop_id in cp.get("enclosing_loops", [])
        if in_loop and cp["dst_level"] in ("L1", "L0A", "L0B", "UB") and cp["dst"] not in names:
            names.append(cp["dst"])
    return names


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Compares the `num_stages` requested on each `T.Pipelined` loop with the versions the Ascend
    scheduler gave the buffers loaded inside it (`tl.buffer_versions_map` after tl.AutoSchedule),
    and says why when it can: the bytes double buffering would need per scope versus capacity.

    ## Why is this bad?
    With one version, loading tile k+1 (MTE2/MTE1) cannot overlap computing tile k (Cube/Vector):
    the pipes serialise. The scheduler reduces the depth silently.

    ## Example
    A flash-attention loop with `num_stages=2` where every buffer keeps 1 version; a GEMM whose one
    L0A version is the whole 64 KiB.

    ## What to do instead
    If a scope is the limit, shrink its tiles until two versions fit. If capacity is not the
    limit, the loop-carried state (running max/sum, an accumulator read and written in the loop)
    is the likely cause: move that state out of the pipelined buffers or split the loop.

    ## Thresholds
    `max_versions` (2): the Ascend scheduler never makes more than 2 versions, so num_stages=3 with
    2 versions is reported at low severity; fewer than min(num_stages, 2) is medium.

    ## Known limits
    Needs a successful lowering (the versions come from the lowered IR). The capacity reasoning
    uses tilescope's padded estimates, not the scheduler's Z3 model.
    """
    ir = profile.ir or {}
    cap_versions = int(ctx.thresholds.get("max_versions", 2))
    out: list[Finding] = []
    for k in lowered_kernels(ir):
        if k.get("failure") or (not k.get("versions") and not k.get("lowered_allocations")):
            continue
        versions = k.get("versions", {})
        for lp in k.get("loops", []):
            req = lp.get("num_stages")
            if not req or req <= 1:
                continue
            bufs = _loop_buffers(k, lp["id"])
            if not bufs:
                continue
            got = {b: int(versions.get(b, 1)) for b in bufs}
            want = min(req, cap_versions)
            short = {b: v for b, v in got.items() if v < want}
            if not short and req <= cap_versions:
                continue
            # What `want` versions of the loop's buffers would need, per scope.
            need: dict[str, int] = {}
            for name in bufs:
                a = alloc(k, name)
                if a and a.get("padded_bytes"):
                    need[a["hardware"]] = need.get(a["hardware"], 0)
            reasons = []
            for hw, fp in k.get("footprint", {}).items():
                if hw not in need:
                    continue
                extra = sum(
                    (want - got[b]) * (alloc(k, b) or {}).get("padded_bytes", 0)
                    for b in short
                    if (alloc(k, b) or {}).get("hardware") == hw
                )
                needed = fp["bytes"] + extra
                need[hw] = needed
                cap = ctx.chip.capacity(hw)
                if needed > cap:
                    reasons.append(f"{want}-deep buffering would need {needed} B of {hw}, capacity {cap}")
            if short:
                sev = Severity.MEDIUM
                reason = (
                    "; ".join(reasons)
                    if reasons
                    else (
                        f"capacity does not explain it: every scope fits {want} versions (the scheduler's "
                        "cost model chose fewer; loop-carried state is one known cause)"
                    )
                )
                msg = (
                    f"loop {lp['var']}: num_stages={req} requested but "
                    f"{', '.join(f'{b}={v}' for b, v in short.items())} version(s) chosen — {reason}"
                )
            else:
                sev = Severity.LOW
                reason = f"the Ascend scheduler makes at most {cap_versions} versions"
                msg = (
                    f"loop {lp['var']}: num_stages={req} requested, {cap_versions} versions applied "
                    f"({reason})"
                )
            out.append(
                Finding(
                    code=CODE,
                    slug=SLUG,
                    severity=sev,
                    kernels=(k["name"],),
                    message=msg,
                    evidence={
                        "loop": lp["var"],
                        "num_stages": req,
                        "versions": got,
                        "needed_bytes": need,
                        "capacity_bytes": {hw: ctx.chip.capacity(hw) for hw in need},
                        "chip": ctx.chip.name,
                        "max_versions": cap_versions,
                        "reason": reason,
                    },
                    recommendation=(
                        "shrink the tiles of the limiting scope so two versions fit"
                        if reasons
                        else "keep loop-carried state out of the pipelined buffers, or set num_stages "
                        "to what is applied so the source says what runs"
                    ),
                    locations=locations(ir, k, lp, "pipelined loop"),
                )
            )
    return out
