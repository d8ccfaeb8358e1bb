"""Compare two runs (profiles, bundles or saved JSON reports): time, pipes and findings.

Kernels are matched across runs by a normalised name, op type and input shapes, loosening the
key step by step when generated names changed. Times are MEDIANS over launches (or over steps,
for the total) with their spread, and a change counts as a regression only when it is beyond the
threshold AND the two spreads do not overlap: launch-to-launch noise is not a regression.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tilescope.columns import VECTOR_TYPES
from tilescope.config import load_config
from tilescope.diff_explain import FACT_COLUMNS, Cause, KernelFacts, explain, lowering_causes, lowering_facts
from tilescope.diff_lines import line_causes, line_facts
from tilescope.engine import TIME_FLOORS
from tilescope.errors import UsageError
from tilescope.findings import SEVERITY_RANK
from tilescope.report.access import report_findings, report_kernels, report_summary
from tilescope.report.palette import PIPE_SERIES
from tilescope.summary import device_time
from tilescope.text.words import num

if TYPE_CHECKING:
    from tilescope.profile import Profile

DIFF_SCHEMA_VERSION = "1"
TOP_KERNELS = 10  # the gate watches the base run's top kernels by device time
# why a finding new in the head is not new (compare_runs: `crossed`), in every view's words
CROSSED = "the base had it below the rule's time floor"
PIPE_CHANGE_MIN = 0.05  # pipe-share changes smaller than 5 points of the launch are not reported

# Example: "flash_attn_fwd_kernel_mix_aic_3f2a9c1b" -> "flash_attn_fwd"; "hcom_allReduce__123_0_1" ->
# "hcom_allReduce"; "MatMul_17" -> "MatMul". Hash suffixes need a digit so words like "_facade"
# survive.
_SUFFIXES = (
    re.compile(r"_(?=[0-9a-f]*\d)[0-9a-f]{6,}$", re.IGNORECASE),  # build hash
    re.compile(r"_mix_ai[cv]$", re.IGNORECASE),  # the Cube / Vector halves of a MIX kernel
    re.compile(r"_\d+$"),  # instance / launch counter
    re.compile(r"_kernel$"),  # TileLang's generated entry name
    re.compile(r"_+$"),
)


def normalise_kernel_name(name: str) -> str:
    """A kernel name without the generated suffixes that change between builds."""
    prev = None
    out = str(name).strip()
    while prev != out:
        prev = out
        for pat in _SUFFIXES:
            stripped = pat.sub("", out)
            out = stripped or out  # never reduce a name to nothing
    return out


@dataclass(frozen=True)
class Spread:
    """A median with its spread: IQR over launches, or min-max over steps."""

    median: float
    lo: float
    hi: float
    n: int
    kind: str  # "launches (IQR)", "steps (min-max)", "one value", "unknown"

    def overlaps(self, other: Spread) -> bool:
        return self.lo <= other.hi and other.lo <= self.hi


@dataclass
class KernelStats:
    key: tuple[str, str, str]  # normalised name, op type, input shapes
    name: str  # as the run spells it
    op_type: str
    shapes: str
    launches: int
    total_us: float
    per_launch: Spread
    ratios: dict[str, float] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)  # tilescope.diff_explain.KernelFacts


@dataclass
class RunData:
    label: str
    total: Spread  # device time per step
    steps: int
    kernels: dict[tuple[str, str, str], KernelStats]
    shares: dict[str, float | None]
    findings: list[dict[str, Any]]
    # the device's core counts ({"aic": n, "aiv": n}) the grid explanation divides by, and whether
    # they are the chip's defaults rather than the device's own
    cores: dict[str, int | None] = field(default_factory=dict)
    cores_assumed: bool = False
    profile: Profile | None = None  # the run's profile, when diff loaded one (not a saved report)
    config_path: str | None = None
    lowering: dict[str, dict[str, Any]] = field(default_factory=dict)  # a bundle's, per kernel entry
    lines: dict[str, Any] | None = None  # a bundle's measured cost per line (tilescope.diff_lines)

    def lowering_of(self, name: str) -> dict[str, Any] | None:
        """The lowering facts of the kernel a profile names `name` ("flash_fwd_kernel_mix_aic" is
        entry "flash_fwd_kernel"); a bundle of one kernel has only that one."""
        if len(self.lowering) == 1:
            return next(iter(self.lowering.values()))
        norm = normalise_kernel_name(name)
        return next((v for k, v in self.lowering.items() if normalise_kernel_name(k) == norm), None)


# ---------------------------------------------------------------- loading a run

def analyze_path(path: str | Path, chip: str | None = None, config_path: str | None = None) -> dict[str, Any]:
    """The report dict for a profile/bundle path (or a saved JSON report, read as is)."""
    p = Path(path)
    if p.is_file() and p.suffix.lower() == ".json":
        return load_report_json(p)
    # deferred: `tilescope --help` imports this module (through commands.diff); io.load only when used
    from tilescope.io.load import load_profile

    return profile_report(load_profile(p, chip=chip), config_path)


def profile_report(profile: Profile, config_path: str | None = None) -> dict[str, Any]:
    """The report dict of one loaded profile, carrying the profile itself (diff prefers its
    per-launch data; keys starting with "_" are stripped before any output)."""
    # deferred: `tilescope --help` imports this module (through commands.diff); analysis and report.data only
    #   when used
    from tilescope.analysis import analyze
    from tilescope.report.data import build_report

    report = build_report(profile, analyze(profile, load_config(config_path)))
    report["_profile"] = profile
    report["_config_path"] = config_path
    return report


def load_report_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a readable JSON report ({exc})") from exc
    if not isinstance(data, dict) or "findings" not in data:
        raise UsageError(f"{path}: not a tilescope JSON report (no 'findings')")
    return data


def run_from_report(report: Mapping[str, Any], label: str) -> RunData:
    """Per-kernel stats from the profile when the report carries it, else from the report's table."""
    profile = report.get("_profile")
    if profile is not None:
        run = _run_from_kernels(profile.kernels, report_findings(report), label, report_summary(report))
        run.profile, run.config_path = profile, report.get("_config_path")
        run.lowering = lowering_facts(profile.ir, profile.ir_dir)
        run.lines = line_facts(profile)
    else:
        run = run_from_summary(report, label)
    chip = (report.get("profiles") or [{}])[0].get("chip") or {}
    run.cores = {"aic": chip.get("aic_count"), "aiv": chip.get("aiv_count")}
    run.cores_assumed = bool({"aic_count", "aiv_count"} & set(chip.get("assumed_figures") or ()))
    return run


def _run_from_kernels(
    k: pd.DataFrame, findings: list[dict[str, Any]], label: str, summary: Mapping[str, Any]
) -> RunData:
    """Per-kernel launch statistics from the table; unit shares are the report summary's
    (tilescope.summary), as in every other view."""
    if len(k) == 0 or "duration_us" not in k:
        raise UsageError(f"{label}: the profile has no kernel durations to compare")
    dur = k["duration_us"].astype("float64").fillna(0.0)
    steps_col = k["step_id"] if "step_id" in k else pd.Series(np.nan, index=k.index)
    step_ids = steps_col.dropna().unique()
    steps = max(1, len(step_ids))
    frame = pd.DataFrame({
        "norm": k["name"].astype("str").map(normalise_kernel_name),
        "name": k["name"].astype("str"),
        "op": k["op_type"].astype("str").fillna("") if "op_type" in k else "",
        "shapes": k["input_shapes"].astype("str").fillna("") if "input_shapes" in k else "",
        "d": dur,
    })
    frame = frame.replace({"op": {"nan": "", "None": ""}, "shapes": {"nan": "", "None": ""}})
    ratio_cols = [c for c, _, _ in PIPE_SERIES if c in k]
    fact_cols = [c for c in k.columns if c in FACT_COLUMNS]
    for c in ratio_cols:
        frame[c] = k[c].astype("float64")
    kernels: dict[tuple[str, str, str], KernelStats] = {}
    # The kernels in order of first launch, each as the positions of its launches in the table: plain
    # arrays, not a DataFrame per kernel (pandas' cost per group was most of a diff's time).
    groups = frame.groupby(["norm", "op", "shapes"], sort=False)
    codes = groups.ngroup().to_numpy()
    order = np.argsort(codes, kind="stable")
    starts = np.searchsorted(codes[order], np.arange(groups.ngroups + 1))  # kernel i: starts[i]:starts[i + 1]
    columns = {c: frame[c].to_numpy() for c in ("norm", "name", "op", "shapes", "d", *ratio_cols)}
    facts = KernelFacts(k[fact_cols])
    for code in range(len(starts) - 1):
        rows = order[starts[code]:starts[code + 1]]  # launches in table order
        d = columns["d"][rows]
        ratios = {}
        for c in ratio_cols:
            values = columns[c][rows]
            ok = ~np.isnan(values)
            if ok.any() and d[ok].sum() > 0:
                ratios[c] = float((values[ok] * d[ok]).sum() / d[ok].sum())
        q1, med, q3 = (float(x) for x in np.percentile(d, [25, 50, 75]))
        first = rows[0]
        key = (str(columns["norm"][first]), str(columns["op"][first]), str(columns["shapes"][first]))
        kernels[key] = KernelStats(
            key=key, name=str(columns["name"][first]), op_type=key[1],
            shapes=key[2], launches=len(d), total_us=float(d.sum()),
            per_launch=Spread(med, q1, q3, len(d), "launches (IQR)" if len(d) > 1 else "one value"),
            ratios=ratios, facts=facts.of(rows))
    if steps > 1:
        # device time per step, as the summary defines it (the union of the step's compute kernels)
        per_step = np.array(
            [device_time(k.loc[steps_col == sid]).device_us for sid in sorted(step_ids)], dtype="float64"
        )
        total = Spread(float(np.median(per_step)), float(per_step.min()), float(per_step.max()),
                       len(per_step), "steps (min-max)")
    else:
        # One step: the device time (unrounded: the summary's is to the ns), bounded by every kernel
        # running at its launches' quartiles.
        device = device_time(k).device_us
        scale = device / max(float(dur.sum()), 1e-9)  # quartile sums are in summed-duration units
        lo = sum(s.per_launch.lo * s.launches for s in kernels.values()) * scale
        hi = sum(s.per_launch.hi * s.launches for s in kernels.values()) * scale
        total = Spread(device, min(lo, device), max(hi, device), 1, "launch IQRs")
    shares = {key: summary["shares"].get(key) for key in ("cube", "vector", "mte")}
    return RunData(label, total, steps, kernels, shares, findings)


def run_from_summary(report: Mapping[str, Any], label: str) -> RunData:
    summary = report_summary(report)
    total_us = summary["total_device_us"]
    if total_us is None:
        raise UsageError(f"{label}: the report has no device time to compare")
    kernels: dict[tuple[str, str, str], KernelStats] = {}
    for row in report_kernels(report):
        name = str(row.get("name", "?"))
        key = (normalise_kernel_name(name), str(row.get("op_type") or ""), str(row.get("input_shapes") or ""))
        n = int(num(row.get("launches", row.get("count"))) or 1)
        total = num(row.get("total_us")) or 0.0
        med = num(row.get("median_us")) or num(row.get("mean_us")) or (total / n if n else 0.0)
        lo = num(row.get("p25_us", row.get("q1_us"))) or num(row.get("min_us"))
        hi = num(row.get("p75_us", row.get("q3_us"))) or num(row.get("max_us"))
        spread = Spread(med, lo, hi, n, "report") if lo is not None and hi is not None else \
            Spread(med, med, med, n, "unknown")
        ratios = {c: v for c, _, _ in PIPE_SERIES if (v := num(row.get(c))) is not None}
        kernels[key] = KernelStats(key, name, key[1], key[2], n, total, spread, ratios)
    shares = {k: summary["shares"].get(k) for k in ("cube", "vector", "mte")}
    return RunData(label, Spread(total_us, total_us, total_us, 1, "unknown"), 1, kernels, shares,
                   report_findings(report))


# ---------------------------------------------------------------- matching and comparing

@dataclass
class KernelDelta:
    base: KernelStats | None
    head: KernelStats | None
    matched_by: str  # "name+op+shapes", "name+op", "name", "" (added/removed)
    base_per_step_us: float
    head_per_step_us: float
    verdict: str  # regressed / improved / within noise / within threshold / added / removed
    pipe_changes: dict[str, tuple[float, float]] = field(default_factory=dict)
    causes: list[Cause] = field(default_factory=list)  # why its time changed, largest first

    @property
    def name(self) -> str:
        return (self.head or self.base).name  # type: ignore[union-attr]

    @property
    def delta_us(self) -> float:
        return self.head_per_step_us - self.base_per_step_us

    @property
    def median_delta_pct(self) -> float | None:
        if self.base is None or self.head is None or self.base.per_launch.median <= 0:
            return None
        return (self.head.per_launch.median / self.base.per_launch.median - 1) * 100


def match_kernels(base: Mapping[tuple[str, str, str], KernelStats],
                  head: Mapping[tuple[str, str, str], KernelStats],
                  explicit: Iterable[tuple[str, str]] = ()) -> list[tuple[KernelStats | None,
                                                                          KernelStats | None, str]]:
    """Pairs (base, head, how) — the `explicit` pairs of names first (`--match A=B`: two different
    kernels, e.g. a TileLang kernel and the vendor's operator on the same shapes; only those are
    compared), then the exact key, then looser keys where they are unambiguous."""
    left, right = dict(base), dict(head)
    pairs: list[tuple[KernelStats | None, KernelStats | None, str]] = []
    explicit = list(explicit)
    if explicit:
        for a, b in explicit:
            pairs.append((_named(left, a, "base"), _named(right, b, "head"), "--match"))
        return pairs
    for key in [k for k in left if k in right]:
        pairs.append((left.pop(key), right.pop(key), "name+op+shapes"))
    for how, width in (("name+op", 2), ("name", 1)):
        lk = Counter(k[:width] for k in left)
        rk = Counter(k[:width] for k in right)
        for key in [k for k in left if lk[k[:width]] == 1 and rk[k[:width]] == 1]:
            other = next(k for k in right if k[:width] == key[:width])
            pairs.append((left.pop(key), right.pop(other), how))
    pairs += [(s, None, "") for s in left.values()]
    pairs += [(None, s, "") for s in right.values()]
    return pairs


def _named(kernels: dict[tuple[str, str, str], KernelStats], name: str, side: str) -> KernelStats:
    """The one kernel of a run that `name` names: its exact name, its normalised name, or a glob
    (fnmatch) of either; it is taken out of `kernels`. Several or none: a usage error naming them."""
    hits = [k for k, s in kernels.items() if s.name == name] or \
        [k for k in kernels if k[0] == normalise_kernel_name(name)] or \
        [k for k, s in kernels.items() if any(fnmatch.fnmatchcase(n, name) for n in (s.name, k[0]))]
    if len(hits) != 1:
        some = ", ".join(sorted({kernels[k].name for k in kernels})[:8])
        named = ", ".join(kernels[k].name for k in hits[:4])
        found = "no kernel" if not hits else f"{len(hits)} kernels ({named})"
        raise UsageError(f"--match: {found} of the {side} run is named {name!r}; expected one of: {some}")
    return kernels.pop(hits[0])


def spread_verdict(b: Spread, h: Spread, threshold_pct: float) -> str:
    if b.median <= 0:
        return "within threshold"
    pct = (h.median / b.median - 1) * 100
    if abs(pct) < threshold_pct:
        return "within threshold"
    if b.overlaps(h):
        return "within noise"
    return "regressed" if pct > 0 else "improved"


def finding_identity(f: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """What makes two findings 'the same problem' across runs: code plus normalised kernels."""
    kernels = tuple(sorted({normalise_kernel_name(str(k)) for k in f.get("kernels", []) or []}))
    return (str(f.get("code", "")), kernels)


@dataclass
class DiffResult:
    base_label: str
    head_label: str
    threshold_pct: float
    base_total: Spread
    head_total: Spread
    total_verdict: str
    kernels: list[KernelDelta]
    shares: dict[str, tuple[float | None, float | None]]
    resolved: list[dict[str, Any]]
    new: list[dict[str, Any]]
    persisting: int
    regressions: list[str]  # why the gate trips; empty = passes
    # --fail-on-new: the severity whose new findings trip the gate (None: that gate is off), and
    # the head's findings that trip it (new since the base, or raised to that severity)
    fail_on_new: str | None = None
    new_over_gate: list[dict[str, Any]] = field(default_factory=list)
    # the head's findings the base had below a rule's time floor: there before, not new
    crossed: list[dict[str, Any]] = field(default_factory=list)
    samples: tuple[int, int] = (1, 1)  # launches (or steps) per kernel, at most, on each side
    cores_assumed: bool = False

    @property
    def single_sample(self) -> bool:
        """One launch per side: no spread to test against, the gate is the threshold alone."""
        return max(self.samples) <= 1

    @property
    def tripped(self) -> bool:
        return bool(self.regressions or self.new_over_gate)

    @property
    def total_delta_pct(self) -> float | None:
        b = self.base_total.median
        return (self.head_total.median / b - 1) * 100 if b > 0 else None

    def to_dict(self) -> dict[str, Any]:
        def stats(s: KernelStats | None) -> dict[str, Any] | None:
            if s is None:
                return None
            return {"name": s.name, "op_type": s.op_type, "input_shapes": s.shapes, "launches": s.launches,
                    "total_us": round(s.total_us, 3), "median_us": round(s.per_launch.median, 3),
                    "spread_lo_us": round(s.per_launch.lo, 3), "spread_hi_us": round(s.per_launch.hi, 3),
                    "spread": s.per_launch.kind, "pipe_ratios": {k: round(v, 4) for k, v in s.ratios.items()}}

        return {
            "diff_schema_version": DIFF_SCHEMA_VERSION,
            "base": self.base_label, "head": self.head_label, "threshold_pct": self.threshold_pct,
            "total": {"base": asdict(self.base_total), "head": asdict(self.head_total),
                      "delta_us": round(self.head_total.median - self.base_total.median, 3),
                      "delta_pct": _r(self.total_delta_pct), "verdict": self.total_verdict},
            "shares": {k: {"base": _r(b, 4), "head": _r(h, 4)} for k, (b, h) in self.shares.items()},
            "kernels": [{"key": list((d.base or d.head).key),  # type: ignore[union-attr]
                         "matched_by": d.matched_by, "verdict": d.verdict,
                         "base_per_step_us": round(d.base_per_step_us, 3),
                         "head_per_step_us": round(d.head_per_step_us, 3),
                         "delta_us": round(d.delta_us, 3), "median_delta_pct": _r(d.median_delta_pct),
                         "pipe_changes": {k: [round(a, 4), round(b, 4)]
                                          for k, (a, b) in d.pipe_changes.items()},
                         "causes": [c.to_dict() for c in d.causes],
                         "base": stats(d.base), "head": stats(d.head)} for d in self.kernels],
            "findings": {"resolved": self.resolved, "new": self.new, "persisting": self.persisting,
                         "crossed_threshold": self.crossed},
            "gate": {"regressions": self.regressions, "fail_on_new": self.fail_on_new,
                     "new_findings": self.new_over_gate, "tripped": self.tripped,
                     "samples": {"base": self.samples[0], "head": self.samples[1]},
                     "single_sample": self.single_sample},
        }


def _r(v: float | None, digits: int = 2) -> float | None:
    return None if v is None else round(v, digits)


def _rank(f: Mapping[str, Any]) -> int:
    return SEVERITY_RANK.get(str(f.get("severity", "")).lower(), -1)


def findings_over_gate(base: Iterable[Mapping[str, Any]], head: Iterable[Mapping[str, Any]],
                       severity: str) -> list[dict[str, Any]]:
    """The head's findings at or above `severity` that the base did not have at that severity:
    new problems (by code and normalised kernels) and old ones that got worse. A finding the base
    already had at or above it is the base's debt, not the change's."""
    cut = SEVERITY_RANK[severity]
    before = {finding_identity(f) for f in base if _rank(f) >= cut}
    return [dict(f) for f in head if _rank(f) >= cut and finding_identity(f) not in before]


def compare_runs(base: RunData, head: RunData, threshold_pct: float = 5.0,
                 top: int = TOP_KERNELS, fail_on_new: str | None = None,
                 match: Iterable[tuple[str, str]] = ()) -> DiffResult:
    deltas: list[KernelDelta] = []
    for b, h, how in match_kernels(base.kernels, head.kernels, match):
        b_step = b.total_us / base.steps if b else 0.0
        h_step = h.total_us / head.steps if h else 0.0
        if b is None or h is None:
            verdict = "added" if b is None else "removed"
        else:
            verdict = spread_verdict(b.per_launch, h.per_launch, threshold_pct)
            if "unknown" in (b.per_launch.kind, h.per_launch.kind) and verdict in ("regressed", "improved"):
                # Saved reports aggregate launches by name (mixing ops that share it) and carry no
                # spread: report the change, but it cannot be told from noise, so it never gates.
                verdict = "slower (no spread)" if verdict == "regressed" else "faster (no spread)"
        changes = {}
        causes: list[Cause] = []
        if b and h:
            for c in set(b.ratios) & set(h.ratios):
                if abs(h.ratios[c] - b.ratios[c]) >= PIPE_CHANGE_MIN:
                    changes[c] = (b.ratios[c], h.ratios[c])
            causes = explain(b.facts, h.facts, b.per_launch.median, h.per_launch.median,
                             base.cores or head.cores, (b.shapes, h.shapes), (b.ratios, h.ratios),
                             _cores_label(b, base))
            lowered = base.lowering_of(b.name), head.lowering_of(h.name)
            causes += lowering_causes(*lowered)
            if None not in lowered:
                causes += line_causes(base.lines, head.lines)  # the bundles' measured kernel
        deltas.append(KernelDelta(b, h, how, b_step, h_step, verdict, changes, causes))
    deltas.sort(key=lambda d: -max(d.base_per_step_us, d.head_per_step_us))
    total_verdict = spread_verdict(base.total, head.total, threshold_pct)
    samples = (_samples(base), _samples(head))
    regressions = []
    if total_verdict == "regressed":
        why = ("; 1 launch per side, so the threshold alone decides" if max(samples) <= 1
               else " and outside the spread")
        regressions.append(f"device time per step {_pct(base.total.median, head.total.median)} "
                           f"(beyond the {threshold_pct:g} % threshold{why})")
    regressions += top_kernel_regressions(base, deltas, top)
    base_ids = {finding_identity(f): f for f in base.findings}
    head_ids = {finding_identity(f): f for f in head.findings}
    new = [f for i, f in head_ids.items() if i not in base_ids]
    below = below_floor_identities(base, {str(f.get("code", "")) for f in new}) if new else set()
    crossed = [f for f in new if finding_identity(f) in below]
    over_gate = [] if fail_on_new is None else findings_over_gate(base.findings, head.findings, fail_on_new)
    return DiffResult(
        base.label, head.label, threshold_pct, base.total, head.total, total_verdict, deltas,
        {k: (base.shares.get(k), head.shares.get(k)) for k in ("cube", "vector", "mte")},
        resolved=[f for i, f in base_ids.items() if i not in head_ids],
        new=[f for f in new if finding_identity(f) not in below],
        persisting=len(set(base_ids) & set(head_ids)), regressions=regressions, fail_on_new=fail_on_new,
        new_over_gate=[f for f in over_gate if finding_identity(f) not in below], crossed=crossed,
        samples=samples, cores_assumed=base.cores_assumed or head.cores_assumed)


def _samples(run: RunData) -> int:
    """How many values the spreads rest on: steps, else the most launches of any kernel."""
    return max(run.total.n if run.steps > 1 else 1, *(s.per_launch.n for s in run.kernels.values()), 1)


def _cores_label(stats: KernelStats, run: RunData) -> str:
    vector = stats.facts.get("unit") == "vector" or stats.facts.get("core_type") in VECTOR_TYPES
    label = " Vector cores" if vector else " AI Cores"
    return label + (" (assumed)" if run.cores_assumed else "")


def below_floor_identities(base: RunData, codes: set[str]) -> set[tuple[str, tuple[str, ...]]]:
    """The findings (by identity) the base would have had without the rules' time floors: a finding
    of the head among them crossed a floor, it is not new. Only the rules named in `codes` are
    run again, on the base's profile (a saved report has none: nothing is known below its floors)."""
    if base.profile is None or not codes:
        return set()
    # deferred: `tilescope --help` imports this module (through commands.diff); analysis only when used
    from tilescope.analysis import analyze

    config = load_config(base.config_path)
    config.select = sorted(codes)
    config.ignore = []
    for code in codes:
        config.rules[code] = {**config.rules.get(code, {}), **dict.fromkeys(TIME_FLOORS, 0.0)}
    result = analyze(base.profile, config)
    return {finding_identity(f.to_dict()) for f in result.findings}


def top_kernel_regressions(base: RunData, deltas: Iterable[KernelDelta], top: int = TOP_KERNELS) -> list[str]:
    """Why the gate trips on kernels: one of the base's `top` kernels by device time regressed
    (median per launch beyond the threshold and outside the spread)."""
    top_keys = {s.key for s in sorted(base.kernels.values(), key=lambda s: -s.total_us)[:top]}
    return [f"top kernel {d.name!r}: median per launch "
            f"{_pct(d.base.per_launch.median, d.head.per_launch.median)}"  # type: ignore[union-attr]
            for d in deltas if d.base is not None and d.base.key in top_keys and d.verdict == "regressed"]


def _pct(b: float, h: float) -> str:
    return f"{(h / b - 1) * 100:+.1f} %" if b > 0 else "n/a"


