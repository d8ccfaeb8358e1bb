"""What the other findings say: the rules' `refine` (tilescope.engine._refine). A CANN built-in
kernel gets advice its user can follow; advice of more pipeline stages defers to TS504 when the
stages asked for were not applied."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from tilescope.findings import Finding
from tilescope.ir.model import find_kernel
from tilescope.profile import Profile
from tilescope.rules._columns import text


def ir_kernel_name(profile: Profile, kernel: str) -> str | None:
    """The ir.json kernel (PrimFunc name) a profiler kernel name belongs to; None without IR."""
    if profile.ir is None:
        return None

    k = find_kernel(profile.ir, kernel)
    return str(k["name"]) if k is not None else None


def findings_on(others: Sequence[Finding], code: str, kernel: str, profile: Profile) -> list[Finding]:
    """The findings of rule `code` about `kernel`, matched by profiler name or by the IR kernel the
    name belongs to (static rules name the PrimFunc `flash_fwd`, runtime rules the launch
    `flash_fwd_kernel_mix_aic`)."""
    names = {kernel, ir_kernel_name(profile, kernel)} - {None}
    return [f for f in others if f.code == code and names & set(f.kernels)]


def library_kernel(profile: Profile, kernel: str) -> bool:
    """A CANN built-in kernel, not the author's: the bundle's IR does not know it, and its name is
    an ACLNN kernel's (`aclnnMatmul_MatMulV3Common_MatMulV3`) or its op type plus a task number
    (graph mode: `MatMul104` of op type `MatMul`). Its tiling is CANN's: a user changes the
    operator called, the shapes it is called with, or reports it upstream."""
    if ir_kernel_name(profile, kernel) is not None:
        return False
    if kernel.startswith("aclnn"):
        return True
    k = profile.kernels
    if "name" not in k.columns or "op_type" not in k.columns:
        return False
    # the one column taken, not the whole table's (an Arrow take of every column, per finding,
    # was a tenth of loading the real corpus into the dashboard)
    ops = set(text(k.loc[k["name"] == kernel, ["op_type"]], "op_type"))
    return any(op and op != kernel and kernel.startswith(op) and kernel[len(op):].isdigit() for op in ops)


def library_recommendation(
    kernel: str, others: Sequence[Finding], profile: Profile
) -> tuple[str, str | None]:
    """What a user can do about a library kernel's pipe-bound finding, and the fusion finding
    (TS102, else TS101) that already covers the kernel, if any."""
    for code in ("TS102", "TS101"):
        fusion = [f for f in others if f.code == code and kernel in f.kernels]
        if fusion:
            title = str((fusion[0].evidence.get("pattern") or {}).get("title") or "an unfused chain")
            return (
                f"{kernel} is a CANN built-in kernel inside {title}, which {code} already reports: "
                f"fusing that sequence ({code}'s recommendation) removes this launch; its tiling is "
                "not yours to change.",
                code,
            )
    return (
        f"{kernel} is a CANN built-in kernel: its tiling is CANN's, not yours. Choose a fused "
        "operator that covers it (if it is not one already), call it with larger or contiguous "
        "inputs (fewer, bigger launches), or report it to CANN with this evidence.",
        None,
    )


def refine_stages(
    finding: Finding, others: Sequence[Finding], profile: Profile, then: str
) -> Finding | None:
    """A rule advising (more) pipeline stages, for a kernel whose requested stages TS504 says were
    not applied: that is the first thing to fix, with TS504's reason, then `then`; None otherwise."""
    kernel = finding.kernels[0] if finding.kernels else ""
    refused = findings_on(others, "TS504", kernel, profile)
    if not refused:
        return None
    ev = refused[0].evidence
    rec = (
        f"The kernel already asks for num_stages={ev.get('num_stages')} on loop {ev.get('loop')}, but "
        f"the stages were not applied (TS504: {ev.get('reason') or refused[0].message}). Make them fit "
        f"first ({refused[0].recommendation}); then {then}"
    )
    evidence = {**finding.evidence, "explained_by": "TS504"}
    return dataclasses.replace(finding, recommendation=rec, evidence=evidence)


def refine_stages_or_library(then: str) -> Callable[[Finding, Sequence[Finding], Profile], Finding]:
    """The `refine` of a rule whose advice is more stages, then `then`: stages the kernel asks for
    that TS504 says were not applied come first (refine_stages); a CANN built-in kernel cannot be
    re-tiled by its user, so it gets what they can do (refine_library)."""

    def refine(finding: Finding, others: Sequence[Finding], profile: Profile) -> Finding:
        refused = refine_stages(finding, others, profile, then)
        return refused if refused is not None else refine_library(finding, others, profile)

    return refine


def refine_library(finding: Finding, others: Sequence[Finding], profile: Profile) -> Finding:
    """`refine` of a rule whose advice changes the kernel itself (tiles, stages, loops): for a CANN
    built-in kernel, the advice a user can follow instead, naming the fusion finding that already
    covers it (evidence `library_kernel`, `explained_by`)."""
    kernel = finding.kernels[0] if finding.kernels else ""
    if not kernel or not library_kernel(profile, kernel):
        return finding
    recommendation, by = library_recommendation(kernel, others, profile)
    evidence = {**finding.evidence, "library_kernel": True}
    if by is not None:
        evidence["explained_by"] = by
    return dataclasses.replace(finding, recommendation=recommendation, evidence=evidence)
