"""The rule engine: discover rules, run those whose inputs exist, isolate crashes.

A rule is a module in the `rules` package (one per file) with:
  CODE: str, SLUG: str, NEEDS: tuple[str, ...] (see Profile.has; "a|b" = either),
  KIND: "runtime" | "static" | "cluster" (cross-rank: check(cluster, ctx), needs are Cluster.has),
  optionally missing_inputs(profile) -> tuple[str, ...] for needs Profile.has cannot express,
  READS: tuple[str, ...] (optional) every kernel-table column check() reads besides those in NEEDS
  (`analyze` loads only the columns the rules and the report read: `kernel_columns_read`),
  THRESHOLDS: dict[str, float | int | str] (defaults; users override them in config),
  optionally SAVING_KIND ("work": the saving removes or moves work, bounded by the kernels' time;
  "grid": it changes the grid, bounded by the speed of light with every core; tilescope.findings),
  check(profile, ctx) -> list[Finding], and a docstring on check() with the sections of DOC_SECTIONS,
  optionally refine(finding, others, profile) -> Finding: called once every rule has run, with all
  of the run's findings, so a recommendation can follow what the other findings say (#15).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import pkgutil
import traceback
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, cast

from tilescope.chips import ChipSpec
from tilescope.config import Config
from tilescope.errors import TilescopeError
from tilescope.findings import (
    SAVING_CLUSTER,
    SAVING_DEVICE,
    SAVING_NONE,
    Finding,
    Severity,
    severity_for_share,
)
from tilescope.profile import Profile
from tilescope.text.words import fmt_us

if TYPE_CHECKING:
    import pandas as pd

    from tilescope.cluster import Cluster
    from tilescope.summary import DeviceTime, KernelTime

RULES_PACKAGE = "tilescope.rules"  # one rule per module (docs/internals.md)
CLUSTER_KIND = "cluster"  # cross-rank rules: check(cluster, ctx), run by run_cluster_rules

DOC_SECTIONS = (
    "What it does",
    "Why is this bad?",
    "Example",
    "What to do instead",
    "Thresholds",
    "Known limits",
)


class RuleModule(Protocol):
    CODE: str
    SLUG: str
    NEEDS: tuple[str, ...]
    KIND: str
    THRESHOLDS: dict[str, Any]

    def check(self, profile: Profile, ctx: RuleContext) -> list[Finding]: ...


@dataclass
class RuleContext:
    """What a rule may read besides the profile."""

    chip: ChipSpec
    thresholds: dict[str, Any]
    total_device_us: float
    severity_cuts: dict[str, float] = field(
        default_factory=lambda: {"high": 0.05, "medium": 0.03, "low": 0.005}
    )
    # the rule's SAVING_KIND: what bounds its savings (tilescope.summary.KernelTime.cap)
    saving_kind: str = SAVING_DEVICE
    # one run's values every rule's context shares: the per-kernel times that bound savings,
    # computed once; kernels each rule found at their speed of light (`at_speed_of_light`)
    shared: dict[str, Any] = field(default_factory=dict)

    def kernel_times(self, kernels: pd.DataFrame) -> dict[str, KernelTime]:
        """`summary.kernel_time` of the run's whole kernel table (the engine's, with its speed of
        light; a rule's lean working frame lacks those columns), computed on first use; `kernels`
        is used only outside an engine run (a context built by hand)."""
        if "kernel_time" not in self.shared:
            # deferred: summary (numpy) only where used
            from tilescope.summary import kernel_time

            self.shared["kernel_time"] = kernel_time(self.shared.get("kernels", kernels))
        times: dict[str, KernelTime] = self.shared["kernel_time"]
        return times

    def at_speed_of_light(self, code: str, kernels: list[str]) -> None:
        """Record kernels a rule flagged whose saving the speed of light bounds to zero: they are
        not findings (nothing to recover); the run says how many in one note (`at_sol_notes`)."""
        if kernels:
            self.shared.setdefault("at_sol", {}).setdefault(code, []).extend(kernels)

    def share(self, saving_us: float) -> float:
        return saving_us / self.total_device_us if self.total_device_us > 0 else 0.0

    def severity(self, saving_us: float) -> Severity:
        c = self.severity_cuts
        return severity_for_share(self.share(saving_us), c["high"], c["medium"], c.get("low", 0.005))


@dataclass(frozen=True)
class RuleInfo:
    code: str
    slug: str
    kind: str
    needs: tuple[str, ...]
    thresholds: dict[str, Any]
    doc: str
    module: ModuleType

    @property
    def summary(self) -> str:
        """First sentence under '## What it does'."""
        text = self.doc.split("## What it does", 1)[-1].split("##", 1)[0].strip()
        return " ".join(text.split()).split(". ")[0].rstrip(".")


@dataclass(frozen=True)
class SkippedRule:
    code: str
    slug: str
    missing: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "slug": self.slug, "missing": list(self.missing)}


@dataclass
class AnalysisResult:
    findings: list[Finding]
    skipped: list[SkippedRule]
    errors: list[Finding]
    total_device_us: float
    rules_run: list[str]
    device_time: DeviceTime | None = None  # the summary's reuses it (tilescope.summary)
    notes: list[str] = field(default_factory=list)  # what the run did that the reader should know


# The rules' absolute time floors (20 µs launches, 1 µs savings, ...) keep a whole-model profile's
# report on what matters in it. In a profile of one or a few kernels — an `msprof op` run, a short
# micro-benchmark — the kernel is all that matters, even at 3 µs: a default floor never exceeds
# FLOOR_SHARE of the profile's device time. A floor set in the configuration is used as set.
TIME_FLOORS = ("min_duration_us", "min_saving_us", "min_block_us", "min_total_us")
FLOOR_SHARE = 0.01
FLOOR_DEFAULT_US = 20.0  # the largest default launch floor: below 100x it a floor may be scaled


def relative_floors(defaults: dict[str, Any], total_device_us: float) -> dict[str, Any]:
    """A rule's default thresholds with each time floor capped at FLOOR_SHARE of the device time."""
    cap = FLOOR_SHARE * total_device_us
    return {k: min(float(v), cap) if k in TIME_FLOORS and total_device_us > 0 else v
            for k, v in defaults.items()}


def floors_scaled(total_device_us: float) -> bool:
    return 0 < total_device_us * FLOOR_SHARE < FLOOR_DEFAULT_US


def floor_note(total_device_us: float) -> str:
    """The line the report prints when relative_floors lowered the rules' floors."""
    return (f"a short profile ({fmt_us(total_device_us)} of device time): the rules' time floors are "
            f"{FLOOR_SHARE * 100:g} % of it, not the {FLOOR_DEFAULT_US:g} µs per launch a whole-model "
            "profile uses")


def discover_rules() -> list[RuleInfo]:
    """Every rule module in the `rules` package, sorted by code."""
    # Found by name, not imported here: the rules sit above the engine (they build on RuleContext
    # and Finding), and the engine only lists the modules of their package (docs/internals.md).
    spec = importlib.util.find_spec(RULES_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    infos: list[RuleInfo] = []
    for mod_info in pkgutil.iter_modules(folders):
        if mod_info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{RULES_PACKAGE}.{mod_info.name}")
        if not hasattr(mod, "CODE") or not hasattr(mod, "check"):
            continue
        rule = cast(RuleModule, mod)
        infos.append(
            RuleInfo(
                code=rule.CODE,
                slug=rule.SLUG,
                kind=getattr(mod, "KIND", "runtime"),
                needs=tuple(rule.NEEDS),
                thresholds=dict(getattr(mod, "THRESHOLDS", {})),
                doc=inspect.cleandoc(rule.check.__doc__ or ""),
                module=mod,
            )
        )
    return sorted(infos, key=lambda r: r.code)


def get_rule(code_or_slug: str) -> RuleInfo | None:
    key = code_or_slug.strip()
    for info in discover_rules():
        if key.upper() == info.code or key == info.slug:
            return info
    return None


# Needs that name a capability of the profile, not a kernel-table column (Profile.has).
_CAPABILITIES = frozenset({"kernels", "timeline", "blocks", "launches", "ir"})


def rule_columns(rules: list[RuleInfo]) -> tuple[str, ...]:
    """Every kernel-table column these rules read: the columns among their NEEDS (each
    alternative of "a|b": `Profile.has` looks at all of them) and their READS, in first-seen order.
    """
    cols: dict[str, None] = {}
    for info in rules:
        for need in info.needs:
            for alt in need.split("|"):
                alt = alt.strip()
                if alt not in _CAPABILITIES and not alt.startswith("blocks."):
                    cols[alt] = None
        cols.update(dict.fromkeys(getattr(info.module, "READS", ())))
    return tuple(cols)


def _uses_timeline(info: RuleInfo) -> bool:
    """The rule needs the timeline, or reads it when present (module attribute USES)."""
    uses = tuple(getattr(info.module, "USES", ()))
    return any("timeline" in need.split("|") for need in (*info.needs, *uses))


def _has_any(profile: Profile, need: str) -> bool:
    """A need "a|b" is met when any alternative is (e.g. MTE ratios or measured bandwidth)."""
    return any(profile.has(n.strip()) for n in need.split("|"))


def _crash_finding(code: str, slug: str, exc: Exception, step: str = "") -> Finding:
    """The error finding of a rule (or its `refine` step) that raised: the run goes on without it,
    and the report says which rule and why instead of the result vanishing."""
    tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return Finding(
        code=code,
        slug=slug,
        severity=Severity.INFO,
        kernels=(),
        message=f"rule {code} ({slug}) {step}crashed and was skipped: {tb}",
        evidence={"exception": type(exc).__name__},
        source="tilescope-engine-error",
    )


def _refine(
    findings: list[Finding], infos: dict[str, RuleInfo], profile: Profile, errors: list[Finding]
) -> list[Finding]:
    """Each finding through its rule's `refine(finding, others, profile)`, if it has one.

    `others` is every finding of the run as `check` made them (no refined one), so the result does
    not depend on the order rules run in. A refine that raises leaves the finding as checked and
    adds an error entry, as a crashing check does."""
    others = tuple(findings)
    out: list[Finding] = []
    failed: set[str] = set()
    for f in findings:
        info = infos.get(f.code)
        refine = getattr(info.module, "refine", None) if info is not None else None
        if not callable(refine) or f.code in failed:
            out.append(f)
            continue
        try:
            out.append(refine(f, others, profile))
        except TilescopeError:
            raise
        except Exception as exc:  # the finding stands without its conditioned recommendation
            failed.add(f.code)
            errors.append(_crash_finding(f.code, f.slug, exc, "refine "))
            out.append(f)
    return out


def run_rules(
    profile: Profile,
    config: Config | None = None,
    kinds: tuple[str, ...] = ("runtime", "static"),
) -> AnalysisResult:
    config = config or Config()
    # deferred: metrics (pyarrow) and summary (numpy) only where used
    from tilescope.metrics import with_derived_metrics
    from tilescope.summary import bound_findings, device_time

    derived = with_derived_metrics(profile.kernels, profile.chip)  # the rules read derived columns
    if derived is not profile.kernels:
        profile = profile.with_kernels(derived)

    times = device_time(profile.kernels)
    total = times.device_us
    findings: list[Finding] = []
    skipped: list[SkippedRule] = []
    errors: list[Finding] = []
    ran: list[str] = []
    rules = discover_rules()
    order = {info.code: i for i, info in enumerate(rules)}
    # the run's values every rule's context shares (RuleContext.shared)
    shared: dict[str, Any] = {"kernels": profile.kernels}
    if profile.timeline_pending:
        # the timeline is still being read: rules that look at it go last, so the others overlap
        # with the read instead of waiting for it (stable sort: code order otherwise)
        rules = sorted(rules, key=_uses_timeline)
    for info in rules:
        if info.kind not in kinds or not config.selects(info.code):
            continue
        missing = tuple(n for n in info.needs if not _has_any(profile, n))
        extra = getattr(info.module, "missing_inputs", None)  # a rule's own finer-grained check
        if not missing and callable(extra):
            missing = tuple(extra(profile))
        if missing:
            skipped.append(SkippedRule(info.code, info.slug, missing))
            continue
        configured = config.thresholds_for(info.code, info.slug)
        thresholds = {**relative_floors(info.thresholds, total), **configured}
        ctx = RuleContext(chip=profile.chip, thresholds=thresholds, total_device_us=total,
                          severity_cuts=config.severity,
                          saving_kind=getattr(info.module, "SAVING_KIND", SAVING_DEVICE), shared=shared)
        ran.append(info.code)
        try:
            found = cast(RuleModule, info.module).check(profile, ctx)
            if info.kind == "static":  # read from IR alone: no runtime saving to estimate
                found = [dataclasses.replace(f, saving_kind=SAVING_NONE) if f.est_saving_us <= 0 else f
                         for f in found]
            kind = getattr(info.module, "SAVING_KIND", None)  # e.g. "work": fusion removes kernels
            if kind is not None:
                found = [dataclasses.replace(f, saving_kind=kind) for f in found]
            findings.extend(found)
        except TilescopeError:
            raise  # bad input found while a rule read it (a deferred timeline): exit 2, no report
        except Exception as exc:  # a rule bug must not kill the run, nor vanish
            errors.append(_crash_finding(info.code, info.slug, exc))
    findings = _refine(findings, {info.code: info for info in rules}, profile, errors)
    cuts = config.severity
    findings = bound_findings(
        findings,
        profile.kernels,
        times,
        lambda share: severity_for_share(share, cuts["high"], cuts["medium"], cuts.get("low", 0.005)),
    )
    findings = _say_assumed_cores(findings, profile, {info.code: info for info in rules})
    findings.sort(key=lambda f: (-f.est_saving_us, -f.severity.rank, f.code))
    ran.sort(key=order.__getitem__)
    errors.sort(key=lambda f: order[f.code])
    notes = [floor_note(total)] if ran and floors_scaled(total) else []
    notes += at_sol_notes(shared.get("at_sol", {}))
    return AnalysisResult(findings=findings, skipped=skipped, errors=errors, total_device_us=total,
                          device_time=times, rules_run=ran, notes=notes)


def _say_assumed_cores(
    findings: list[Finding], profile: Profile, infos: dict[str, RuleInfo]
) -> list[Finding]:
    """A finding whose numbers rest on an assumed core count says so and is at most medium (#26).

    Two things divide by the count: an `msprof op` launch's per-core pipe times (its blocks run in
    ceil(blocks / cores) waves, `io.msprof_op.per_core_times`), read by the rules whose READS hold
    pipe shares; and every launch's speed of light (`min(blocks, cores)`), which matters to a
    finding whose saving it capped (`evidence.saving_bound`). Either changes with the count only
    for launches with more blocks on a side than the fewest cores the device may have
    (`_blocks_beyond`): the others' numbers hold whatever the count."""
    chip = profile.chip
    said = {"cube": chip.assumed_value("aic_count"), "vector": chip.assumed_value("aiv_count")}
    if not any(said.values()) or not findings:
        return findings
    sides_of = _blocks_beyond(profile)
    op = profile.source.producer == "msprof_op"
    out = []
    for f in findings:
        info = infos.get(f.code)
        reads = [*(n.strip() for need in info.needs for n in need.split("|")),
                 *getattr(info.module, "READS", ())] if info is not None else []
        shares = op and any(c.endswith(("_share", "_busy_us")) for c in reads)
        capped = "speed of light" in str(f.evidence.get("saving_bound", {}).get("by", ""))
        sides = {s for k in f.kernels for s in sides_of.get(k, ())}
        values = [v for s, v in said.items() if s in sides and v]
        if f.assumed or f.source != "tilescope" or f.saving_kind != SAVING_DEVICE or not values or not (
            shares or capped
        ):
            out.append(f)
            continue
        parts = (("pipe shares per core", shares), ("speed of light", capped))
        what = " and ".join(w for w, on in parts if on)
        out.append(dataclasses.replace(
            f,
            message=f"{f.message}, if the device has {' and '.join(values)} (its {what} rest on that "
            "count; --chip gives the real one)",
            assumed=tuple(f"{v}: assumed for {chip.base_name}, not recorded in the profile" for v in values),
            severity=Severity.MEDIUM if f.severity is Severity.HIGH else f.severity,
        ))
    return out


def _blocks_beyond(profile: Profile) -> dict[str, set[str]]:
    """Per kernel name, the sides ("cube", "vector") on which some launch has more blocks than the
    fewest cores the device may have: the assumed count or the fewest a catalogued chip at the
    clock has, whichever is smaller (`chips.fewest_cores_at_least`)."""
    # deferred: numpy and the rules' column helpers only on a profile with an assumed count
    import numpy as np

    from tilescope.chips import fewest_cores_at_least
    from tilescope.metrics import float_column

    chip, k = profile.chip, profile.kernels
    if "name" not in k.columns or not len(k):
        return {}
    fewest = fewest_cores_at_least(1, chip.clock_mhz, profile.source.coupled)
    aic = min(chip.aic_count or 0, (fewest.aic_count or 0) if fewest else chip.aic_count or 0)
    aiv = min(chip.aiv_count or 0, (fewest.aiv_count or 0) if fewest else chip.aiv_count or 0)
    kind = k["core_type"].astype("str").to_numpy() if "core_type" in k.columns else np.full(len(k), "")
    block = float_column(k, "block_dim").fillna(0).to_numpy()
    mix = float_column(k, "mix_block_dim").fillna(0).to_numpy()
    # the blocks of each side, as the speed of light counts them (metrics._cores_used)
    cube = np.where(np.isin(kind, ["AI_CORE", "MIX_AIC"]), block, np.where(kind == "MIX_AIV", mix, 0))
    on_vector = np.isin(kind, ["AI_VECTOR_CORE", "MIX_AIV"])
    vector = np.where(on_vector, block, np.where(kind == "MIX_AIC", mix, 0))
    names = k["name"].astype("str").to_numpy()
    out: dict[str, set[str]] = {}
    for side, blocks, limit in (("cube", cube, aic), ("vector", vector, aiv)):
        if limit:
            for name in set(names[blocks > limit]):
                out.setdefault(str(name), set()).add(side)
    return out


def at_sol_notes(at_sol: dict[str, list[str]]) -> list[str]:
    """One note per rule that flagged kernels already at their speed of light (nothing to recover,
    so no finding): how many and the first few, so that the rule's silence on them is explained."""
    out = []
    for code, names in sorted(at_sol.items()):
        shown = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
        n = len(names)
        which = f"{n} kernels" if n != 1 else "1 kernel"
        out.append(f"{code}: {which} flagged but already at {'their' if n != 1 else 'its'} speed of "
                   f"light ({shown}): no time to recover, not listed")
    return out


def run_cluster_rules(cluster: Cluster, chip: ChipSpec, config: Config | None = None) -> AnalysisResult:
    """Run the cross-rank rules (KIND "cluster", analyzer/cluster.py) on a multi-rank run.

    Same contract as `run_rules`: selection and thresholds from the configuration, a rule whose
    inputs the cluster lacks (`Cluster.has`) is skipped with what it needs, a crashing rule becomes
    an error finding. Shares and severities are of the slowest rank's step time (what every rank
    waits for), summed over steps."""
    config = config or Config()
    totals = cluster.rank_totals()
    total = float(totals["step_us"].max()) if len(totals) else 0.0
    findings: list[Finding] = []
    skipped: list[SkippedRule] = []
    errors: list[Finding] = []
    ran: list[str] = []
    for info in discover_rules():
        if info.kind != CLUSTER_KIND or not config.selects(info.code):
            continue
        missing = tuple(n for n in info.needs if not any(cluster.has(a.strip()) for a in n.split("|")))
        if missing:
            skipped.append(SkippedRule(info.code, info.slug, missing))
            continue
        thresholds = {**info.thresholds, **config.thresholds_for(info.code, info.slug)}
        ctx = RuleContext(chip=chip, thresholds=thresholds, total_device_us=total,
                          severity_cuts=config.severity)
        ran.append(info.code)
        try:
            found = info.module.check(cluster, ctx)
            for f in found:
                share = ctx.share(f.est_saving_us)
                findings.append(dataclasses.replace(f, share_of_total=share, saving_kind=SAVING_CLUSTER))
        except Exception as exc:  # a rule bug must not kill the run, nor vanish
            errors.append(_crash_finding(info.code, info.slug, exc))
    findings.sort(key=lambda f: (-f.est_saving_us, -f.severity.rank, f.code))
    return AnalysisResult(findings=findings, skipped=skipped, errors=errors, total_device_us=total,
                          rules_run=ran)
