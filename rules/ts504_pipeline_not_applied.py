"""TS504 pipeline-not-applied: T.Pipelined asked for num_stages > 1 but buffers kept one version."""

from __future__ import annotations

from typing import Any

from tilescope.engine import RuleContext
from tilescope.findings import Finding, Severity
from tilescope.ir.rulekit import alloc, locations, lowered_kernels
from tilescope.ir.scopes import TILELANG_ASCEND
from tilescope.profile import Profile
from tilescope.rules._findings import make_finding

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


def _capacity_reasons(
    k: dict[str, Any], short: dict[str, int], got: dict[str, int], want: dict[str, int], chip: Any
) -> tuple[dict[str, int], list[str]]:
    """Per scope holding a buffer short of its versions: the bytes the missing versions would add
    to the scope's footprint, and a reason naming those buffers where that exceeds capacity. Scopes
    whose buffers all got their versions are not blamed, whatever their footprint."""
    need: dict[str, int] = {}
    by_scope: dict[str, list[str]] = {}
    for b in short:
        a = alloc(k, b)
        if a and a.get("padded_bytes"):
            by_scope.setdefault(a["hardware"], []).append(b)
    reasons = []
    for hw, names in by_scope.items():
        fp = k.get("footprint", {}).get(hw)
        if fp is None:
            continue
        extra = sum((want[b] - got[b]) * (alloc(k, b) or {}).get("padded_bytes", 0) for b in names)
        need[hw] = fp["bytes"] + extra
        cap = chip.capacity(hw)
        if need[hw] > cap:
            by_depth: dict[int, list[str]] = {}
            for b in names:
                by_depth.setdefault(want[b], []).append(b)
            what = ", ".join(f"{n} versions of {' and '.join(bs)}" for n, bs in by_depth.items())
            reasons.append(f"{what} would need {need[hw]} B of {hw}, capacity {cap}")
    return need, reasons


def _versions_known(k: dict[str, Any]) -> bool:
    """Did the lowering run and report the buffer versions TS504 compares?"""
    if k.get("failure") or (not k.get("versions") and not k.get("lowered_allocations")):
        return False
    # tilelang-ascend's lowering reports no versions: every buffer would read as one, and both real
    # pipelined flash-attention kernels got a false "1 version chosen". TS507 reads that dialect's
    # loop structure instead (docs/lint.md).
    return bool(k.get("versions")) or k.get("dialect") != TILELANG_ASCEND


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Compares the `num_stages` requested on each `T.Pipelined` loop with the versions the Ascend
    scheduler gave the buffers loaded inside it (`tl.buffer_versions_map` after tl.AutoSchedule),
    and says why when it can: the bytes double buffering would need per scope versus capacity.
    A buffer the author gave a depth with `T.annotate_buffer_versions({buf: n})` is judged against
    n (the author's choice, not num_stages); a loop of one iteration is skipped (nothing to
    overlap). Only scopes holding a buffer short of its versions are named as the limit.

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
    `max_versions` (2): the depth a buffer left to the scheduler is expected to get is
    min(num_stages, max_versions); fewer is medium, as is fewer than an explicit depth. Deeper
    num_stages than the versions applied (num_stages=4, 2 or 3 versions: the scheduler picks its
    own depth) is low, unless every buffer of the loop has an explicit depth.

    ## Known limits
    Needs a successful lowering (the versions come from the lowered IR). Quiet on tilelang-ascend,
    whose lowering reports no versions (TS507 reads its loop structure). The capacity reasoning
    uses tilescope's padded estimates, not the scheduler's Z3 model. Buffers the author left to
    the scheduler beside explicitly versioned ones are still judged against num_stages.
    """
    ir = profile.ir or {}
    cap_versions = int(ctx.thresholds.get("max_versions", 2))
    out: list[Finding] = []
    for k in lowered_kernels(ir):
        if not _versions_known(k):
            continue
        versions = k.get("versions", {})
        explicit = k.get("explicit_versions", {})
        for lp in k.get("loops", []):
            req = lp.get("num_stages")
            if not req or req <= 1 or (isinstance(lp.get("extent"), int) and lp["extent"] <= 1):
                continue  # nothing asked, or one iteration: nothing to overlap
            bufs = _loop_buffers(k, lp["id"])
            if not bufs:
                continue
            got = {b: int(versions.get(b, 1)) for b in bufs}
            # the author's T.annotate_buffer_versions is the depth wanted for those buffers; the
            # scheduler chooses for the others, up to min(num_stages, max_versions)
            want = {b: int(explicit[b]) if b in explicit else min(req, cap_versions) for b in bufs}
            short = {b: v for b, v in got.items() if v < want[b]}
            capped = [b for b in bufs if b not in explicit]
            if not short and (req <= cap_versions or all(got[b] >= req for b in capped)):
                continue
            need, reasons = _capacity_reasons(k, short, got, want, ctx.chip)
            if short:
                sev = Severity.MEDIUM
                reason = (
                    "; ".join(reasons)
                    if reasons
                    else (
                        "capacity does not explain it: every scope fits the versions asked (the "
                        "scheduler's cost model chose fewer; loop-carried state is one known cause)"
                    )
                )
                asked = ", ".join(
                    f"{b}={v}" + (f" of {want[b]} set by T.annotate_buffer_versions" if b in explicit else "")
                    for b, v in short.items()
                )
                msg = f"loop {lp['var']}: num_stages={req} requested but {asked} version(s) chosen — {reason}"
            else:
                sev = Severity.LOW
                reason = "the scheduler picks its own depth below num_stages"
                applied = ", ".join(f"{b}={got[b]}" for b in capped)
                msg = (
                    f"loop {lp['var']}: num_stages={req} requested, {applied} version(s) applied "
                    f"({reason}; T.annotate_buffer_versions fixes one)"
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
                        "loop": lp["var"],
                        "num_stages": req,
                        "versions": got,
                        "wanted": want,
                        "explicit_versions": {b: explicit[b] for b in bufs if b in explicit},
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
                    saving_us=0.0,
                    locations=locations(ir, k, lp, "pipelined loop"),
                )
            )
    return out
