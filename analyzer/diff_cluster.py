"""Compare two multi-rank runs (issue #16): each rank's step time and its split, the slowest rank,
the cross-rank (TS6xx) findings, and each rank's kernels matched as in a single-run diff.

It reads only the reports' stable parts: `cluster` (the rank rows, the per-step rows, `slow_rank`),
`profiles` (each rank's summary and top kernels) and `findings`. A folder is analysed as
`tilescope analyze` does and its report goes through the same JSON encoding as `analyze -f json`,
so a folder and the JSON report written of it give the same diff.

Kernels are compared per rank, not aggregated across ranks: a straggler is one rank's problem, and
a median or a sum over eight ranks hides exactly the rank that changed. Each rank pair goes through
`compare_runs` (one matching and verdict logic); the renderers group the ranks that agree.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilescope.config import load_config
from tilescope.diff import (
    DIFF_SCHEMA_VERSION,
    SEVERITY_RANK,
    DiffResult,
    RunData,
    Spread,
    compare_runs,
    load_report_json,
    normalise_kernel_name,
    profile_report,
    run_from_report,
    run_from_summary,
    spread_verdict,
    top_kernel_regressions,
)
from tilescope.diff_links import LinkDelta, compare_links
from tilescope.errors import UsageError
from tilescope.report.ranks import rank_findings

if TYPE_CHECKING:
    from tilescope.io.failures import LoadFailure

SCOPE_CLUSTER = "cluster"
# Rules about the ranks together: the rank in their evidence is the worst one, which may move
# between runs without the problem changing, so they are matched by code alone.
JOB_WIDE_CODES = frozenset({"TS602", "TS605"})
STEP_KIND = "steps (mean, min-max)"  # a cluster step time: the mean per step, its min-max over steps


# ---------------------------------------------------------------- loading

def cluster_ranks(report: Mapping[str, Any]) -> int:
    """How many ranks a report covers: its cluster section's count, else its profiles'."""
    section = report.get("cluster")
    if isinstance(section, Mapping):
        return int(section.get("ranks_total") or 0)
    profiles = report.get("profiles")
    return len(profiles) if isinstance(profiles, list) else 1


def is_cluster_report(report: Mapping[str, Any]) -> bool:
    return cluster_ranks(report) >= 2


def _holds_several(path: Path) -> bool:
    """Whether a directory holds several profiles (ranks), from detection alone (no table read)."""
    # deferred: `tilescope --help` imports this module (through commands.diff); io.detect only when used
    from tilescope.io.detect import detect

    try:
        return len(detect(path)) > 1
    except Exception:  # a path detection rejects is the loader's to report, with its message
        return False


# How a folder of several ranks becomes a report: `tilescope analyze`'s build (path, config, chip,
# with_advisor, failures) -> report dict, handed in by the command (analyzer/commands/diff.py):
# the CLI layer is the one that knows every other part.
BuildReport = Callable[[Path, Any, str | None, bool, list[Any] | None], dict[str, Any]]


def cluster_report(path: Path, chip: str | None, config_path: str | None,
                   failures: list[LoadFailure] | None, build: BuildReport) -> dict[str, Any]:
    """The report `tilescope analyze PATH -f json` writes, as a dict (the same bytes, decoded)."""
    # deferred: `tilescope --help` imports this module (through commands.diff); report.render_json only when
    #   used
    from tilescope.report.render_json import render

    report = build(path, load_config(config_path), chip, False, failures)
    return dict(json.loads(render(report)))


def load_any(path: str | Path, chip: str | None, config_path: str | None,
             failures: list[LoadFailure] | None, build: BuildReport) -> dict[str, Any]:
    """A saved JSON report as is; a multi-rank folder's cluster report; else the one profile's
    report with its per-launch data (tilescope.diff.profile_report)."""
    # deferred: `tilescope --help` imports this module (through commands.diff); io.load only when used
    from tilescope.io.load import load_profiles

    p = Path(path)
    if p.is_file() and p.suffix.lower() == ".json":
        return load_report_json(p)
    if p.is_dir() and _holds_several(p):  # several rank folders: not loaded twice
        return cluster_report(p, chip, config_path, failures, build)
    profiles = load_profiles(p, chip)
    if len(profiles) == 1 and not profiles.failures:
        return profile_report(profiles[0], config_path)
    # one msprof run of several devices: one rank per device, as analyze reads it
    return cluster_report(p, chip, config_path, failures, build)


# ---------------------------------------------------------------- per-rank step time

@dataclass(frozen=True)
class RankStep:
    """One rank's step: mean per profiled step (the rank table's sums / steps, so the split adds
    up to the step time), with the step time's min-max over steps for the noise-aware verdict."""

    rank: int
    steps: int
    step: Spread | None  # center = mean per step (kind STEP_KIND); None: no step time
    computing_us: float | None
    communication_not_overlapped_us: float | None
    free_us: float | None
    source: str
    kernels_loaded: bool


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if f != f else f


def rank_steps(report: Mapping[str, Any]) -> dict[int, RankStep]:
    section = report.get("cluster") or {}
    per_step: dict[int, list[float]] = {}
    if any("step_min_us" not in row for row in section.get("ranks") or []):  # an older report
        for row in section.get("steps") or []:
            v = _num(row.get("step_us"))
            if v is not None and row.get("rank") is not None:
                per_step.setdefault(int(row["rank"]), []).append(v)
    out: dict[int, RankStep] = {}
    for row in section.get("ranks") or []:
        if row.get("rank") is None:
            continue
        rank = int(row["rank"])
        n = int(row.get("steps") or 0)

        def mean(key: str, n: int = n, row: Mapping[str, Any] = row) -> float | None:
            v = _num(row.get(key))
            return None if v is None or n <= 0 else v / n

        step_mean = mean("step_us")
        # the step time's min-max over steps: the rank table's own (reports since the per-step rows
        # may be binned), else from the per-step rows (older reports)
        lo_hi = (_num(row.get("step_min_us")), _num(row.get("step_max_us")))
        values = [v for v in lo_hi if v is not None] or per_step.get(rank, [])
        step = None
        if step_mean is not None:
            lo, hi = (min(values), max(values)) if values else (step_mean, step_mean)
            step = Spread(step_mean, min(lo, step_mean), max(hi, step_mean), n, STEP_KIND)
        out[rank] = RankStep(rank, n, step, mean("computing_us"), mean("communication_not_overlapped_us"),
                             mean("free_us"), str(row.get("source") or ""), bool(row.get("kernels_loaded")))
    return out


def slowest_rank(steps: Mapping[int, RankStep]) -> RankStep | None:
    """The rank with the longest step. Ranks that meet in collectives end their steps together, so
    ties are common: the one computing longest (the one the others wait for), then the lowest id."""
    timed = [s for s in steps.values() if s.step is not None]
    if not timed:
        return None
    return max(timed, key=lambda s: (s.step.median, s.computing_us or 0.0, -s.rank))  # type: ignore[union-attr]


@dataclass(frozen=True)
class RankDelta:
    rank: int
    base: RankStep | None
    head: RankStep | None
    verdict: str  # regressed / improved / within noise / within threshold / only in base|head / no step time

    def delta(self, attr: str) -> float | None:
        b, h = (step_value(s, attr) for s in (self.base, self.head))
        return None if b is None or h is None else h - b


def step_value(s: RankStep | None, attr: str) -> float | None:
    if s is None:
        return None
    if attr == "step_us":
        return s.step.median if s.step is not None else None
    v = getattr(s, attr)
    return None if v is None else float(v)


# ---------------------------------------------------------------- findings

def is_cluster_finding(f: Mapping[str, Any]) -> bool:
    return f.get("scope") == SCOPE_CLUSTER


def cluster_identity(f: Mapping[str, Any]) -> tuple[str, str, tuple[str, ...]]:
    """What makes two cross-rank findings the same problem: code, what it names (a link, a rank,
    or all ranks), and its normalised kernels."""
    code = str(f.get("code", ""))
    ev = f.get("evidence") or {}
    if ev.get("src_rank") is not None and ev.get("dst_rank") is not None:
        transport = f" {ev['transport']}" if ev.get("transport") else ""
        subject = f"link {ev['src_rank']}-{ev['dst_rank']}{transport}"
    elif code in JOB_WIDE_CODES:
        subject = "all ranks"
    elif ev.get("rank") is not None:
        subject = f"rank {ev['rank']}"
    else:
        subject = ""
    kernels = tuple(sorted({normalise_kernel_name(str(k)) for k in f.get("kernels") or []}))
    return code, subject, kernels


@dataclass(frozen=True)
class ClusterFindingChange:
    status: str  # new / gone / still there
    subject: str
    base: dict[str, Any] | None
    head: dict[str, Any] | None

    @property
    def finding(self) -> dict[str, Any]:
        return self.head or self.base or {}


def compare_cluster_findings(base: Sequence[Mapping[str, Any]],
                             head: Sequence[Mapping[str, Any]]) -> list[ClusterFindingChange]:
    b = {cluster_identity(f): dict(f) for f in base if is_cluster_finding(f)}
    h = {cluster_identity(f): dict(f) for f in head if is_cluster_finding(f)}
    out = [ClusterFindingChange("gone", k[1], f, None) for k, f in b.items() if k not in h]
    out += [ClusterFindingChange("new", k[1], None, f) for k, f in h.items() if k not in b]
    out += [ClusterFindingChange("still there", k[1], b[k], h[k]) for k in b if k in h]
    return out


def cluster_findings_over_gate(base: Iterable[Mapping[str, Any]], head: Iterable[Mapping[str, Any]],
                               severity: str) -> list[dict[str, Any]]:
    """As tilescope.diff.findings_over_gate, for cross-rank findings matched by cluster_identity."""
    cut = SEVERITY_RANK[severity]

    def rank(f: Mapping[str, Any]) -> int:
        return SEVERITY_RANK.get(str(f.get("severity", "")).lower(), -1)

    before = {cluster_identity(f) for f in base if is_cluster_finding(f) and rank(f) >= cut}
    return [dict(f) for f in head
            if is_cluster_finding(f) and rank(f) >= cut and cluster_identity(f) not in before]


# ---------------------------------------------------------------- per-rank kernels

def rank_run(report: Mapping[str, Any], rank: int, steps: int, label: str) -> RunData | None:
    """One rank's kernels and per-rank findings as a RunData (the report's per-rank summary: its
    top kernels with median and IQR per launch), per step; None when the rank has no kernel table."""
    prof = next((p for p in report.get("profiles") or [] if p.get("rank") == rank), None)
    summary = (prof or {}).get("summary")
    if not isinstance(summary, Mapping) or summary.get("total_device_us") is None:
        return None
    # the rank's own findings, from a grouped report (`by_rank`) or one written per rank
    findings = rank_findings(report.get("findings") or [], rank)
    run = run_from_summary({"summary": summary, "top_kernels": summary.get("top_kernels") or [],
                             "findings": findings}, f"{label} rank {rank}")
    n = max(1, steps)
    per_step = run.total.median / n
    return replace(run, steps=n, total=Spread(per_step, per_step, per_step, 1, "unknown"))


# ---------------------------------------------------------------- the comparison

@dataclass
class ClusterDiff:
    base_label: str
    head_label: str
    threshold_pct: float
    base_ranks: list[int]
    head_ranks: list[int]
    ranks: list[RankDelta]
    base_slowest: RankStep | None
    head_slowest: RankStep | None
    slowest_verdict: str
    base_straggler: int | None  # the rank TS601 named
    head_straggler: int | None
    findings: list[ClusterFindingChange]
    kernels: dict[int, DiffResult]  # per rank both runs have a kernel table for
    notes: list[str]  # rank sets that differ, ranks without a kernel table
    regressions: list[str]
    fail_on_new: str | None = None
    new_over_gate: list[dict[str, Any]] = field(default_factory=list)
    links: list[LinkDelta] = field(default_factory=list)  # every rank pair of either run (diff_links)

    @property
    def tripped(self) -> bool:
        return bool(self.regressions or self.new_over_gate)

    @property
    def common_ranks(self) -> list[int]:
        return sorted(set(self.base_ranks) & set(self.head_ranks))

    def to_dict(self) -> dict[str, Any]:
        def step(s: RankStep | None) -> dict[str, Any] | None:
            if s is None:
                return None
            return {"rank": s.rank, "steps": s.steps, "step_us": _r(step_value(s, "step_us")),
                    "step_min_us": _r(s.step.lo if s.step else None),
                    "step_max_us": _r(s.step.hi if s.step else None),
                    "computing_us": _r(s.computing_us),
                    "communication_not_overlapped_us": _r(s.communication_not_overlapped_us),
                    "free_us": _r(s.free_us), "source": s.source, "kernels_loaded": s.kernels_loaded}

        def change(c: ClusterFindingChange) -> dict[str, Any]:
            f = c.finding
            return {"status": c.status, "code": f.get("code"), "slug": f.get("slug"), "subject": c.subject,
                    "severity": {"base": (c.base or {}).get("severity"),
                                 "head": (c.head or {}).get("severity")},
                    "est_saving_us": {"base": (c.base or {}).get("est_saving_us"),
                                      "head": (c.head or {}).get("est_saving_us")},
                    "message": {"base": (c.base or {}).get("message"), "head": (c.head or {}).get("message")}}

        return {
            "diff_schema_version": DIFF_SCHEMA_VERSION, "kind": "cluster",
            "base": self.base_label, "head": self.head_label, "threshold_pct": self.threshold_pct,
            "ranks": {"base": self.base_ranks, "head": self.head_ranks, "compared": self.common_ranks,
                      "only_in_base": sorted(set(self.base_ranks) - set(self.head_ranks)),
                      "only_in_head": sorted(set(self.head_ranks) - set(self.base_ranks))},
            "step_time": [{"rank": d.rank, "verdict": d.verdict, "base": step(d.base), "head": step(d.head),
                           "delta_us": {a: _r(d.delta(a)) for a in SPLIT}} for d in self.ranks],
            "slowest_rank": {"base": step(self.base_slowest), "head": step(self.head_slowest),
                             "verdict": self.slowest_verdict},
            "straggler": {"base": self.base_straggler, "head": self.head_straggler},
            "cluster_findings": [change(c) for c in self.findings],
            "kernels_by_rank": {str(r): {k: v for k, v in d.to_dict().items()
                                         if k in ("total", "kernels", "findings")}
                                for r, d in self.kernels.items()},
            "links": [d.to_dict() for d in self.links],
            "notes": self.notes,
            "gate": {"regressions": self.regressions, "fail_on_new": self.fail_on_new,
                     "new_findings": self.new_over_gate, "tripped": self.tripped},
        }


SPLIT = ("step_us", "computing_us", "communication_not_overlapped_us", "free_us")


def _r(v: float | None, digits: int = 3) -> float | None:
    return None if v is None else round(v, digits)


def rank_text(ranks: Sequence[int]) -> str:
    # deferred: `tilescope --help` imports this module (through commands.diff); ranksets only when used
    from tilescope.ranksets import rank_set_text

    return rank_set_text(list(ranks)) if ranks else "none"


def _step_verdict(b: RankStep | None, h: RankStep | None, threshold_pct: float) -> str:
    if b is None or h is None:
        return "only in base" if h is None else "only in head"
    if b.step is None or h.step is None:
        return "no step time"
    return spread_verdict(b.step, h.step, threshold_pct)


def rank_set_notes(base: Mapping[int, RankStep], head: Mapping[int, RankStep]) -> list[str]:
    """The rank sets when they differ, and the ranks without a kernel table, said plainly."""
    notes = []
    b, h = sorted(base), sorted(head)
    if b != h:
        common = sorted(set(b) & set(h))
        parts = [f"rank sets differ: base has {len(b)} ranks ({rank_text(b)}), head has {len(h)} "
                 f"({rank_text(h)})"]
        if only := sorted(set(b) - set(h)):
            parts.append(f"only in base: {rank_text(only)}")
        if only := sorted(set(h) - set(b)):
            parts.append(f"only in head: {rank_text(only)}")
        parts.append(f"compared: {rank_text(common)}")
        notes.append("; ".join(parts))
    for side, steps in (("base", base), ("head", head)):
        bad = [r for r, s in steps.items() if not s.kernels_loaded]
        if bad:
            notes.append(f"{side}: rank{'s' if len(bad) > 1 else ''} {rank_text(bad)} without a readable "
                         "kernel table (step time compared, kernels not)")
    return notes


def slowest_verdict(b: RankStep | None, h: RankStep | None, threshold_pct: float) -> tuple[str, str | None]:
    """The verdict on the slowest rank's step time (the job's step), and the gate's reason when it
    regressed: beyond the threshold and outside both runs' min-max over steps."""
    if b is None or h is None or b.step is None or h.step is None:
        return "n/a", None
    verdict = spread_verdict(b.step, h.step, threshold_pct)
    if verdict != "regressed":
        return verdict, None
    bm, hm = b.step.median, h.step.median
    return verdict, (f"slowest rank's step time: rank {b.rank} {bm:,.1f} µs → rank {h.rank} {hm:,.1f} µs "
                     f"({(hm / bm - 1) * 100:+.1f} %, beyond the {threshold_pct:g} % threshold and outside "
                     "the steps' min-max)")


def compare_clusters(base: Mapping[str, Any], head: Mapping[str, Any], base_label: str, head_label: str,
                     threshold_pct: float = 5.0, fail_on_new: str | None = None) -> ClusterDiff:
    b_steps, h_steps = rank_steps(base), rank_steps(head)
    deltas = [RankDelta(r, b_steps.get(r), h_steps.get(r),
                        _step_verdict(b_steps.get(r), h_steps.get(r), threshold_pct))
              for r in sorted(set(b_steps) | set(h_steps))]
    b_slow, h_slow = slowest_rank(b_steps), slowest_rank(h_steps)
    slow_verdict, slow_regression = slowest_verdict(b_slow, h_slow, threshold_pct)
    regressions = [] if slow_regression is None else [slow_regression]
    b_find, h_find = list(base.get("findings") or []), list(head.get("findings") or [])
    kernels: dict[int, DiffResult] = {}
    new_over_gate: list[dict[str, Any]] = []
    if fail_on_new is not None:
        new_over_gate += cluster_findings_over_gate(b_find, h_find, fail_on_new)
    for r in sorted(set(b_steps) & set(h_steps)):
        b_run = rank_run(base, r, b_steps[r].steps, base_label)
        h_run = rank_run(head, r, h_steps[r].steps, head_label)
        if b_run is None or h_run is None:
            continue  # no kernel table on one side: rank_set_notes says so
        result = compare_runs(b_run, h_run, threshold_pct, fail_on_new=fail_on_new)
        kernels[r] = result
        regressions += [f"rank {r}: {x}" for x in top_kernel_regressions(b_run, result.kernels)]
        new_over_gate += result.new_over_gate
    return ClusterDiff(
        base_label, head_label, threshold_pct, sorted(b_steps), sorted(h_steps), deltas, b_slow, h_slow,
        slow_verdict, _straggler(base), _straggler(head), compare_cluster_findings(b_find, h_find), kernels,
        rank_set_notes(b_steps, h_steps), regressions, fail_on_new, new_over_gate,
        compare_links(_links(base), _links(head), threshold_pct))


def _links(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    rows = (report.get("cluster") or {}).get("links")
    return [r for r in rows if isinstance(r, Mapping)] if isinstance(rows, list) else []


def _straggler(report: Mapping[str, Any]) -> int | None:
    v = (report.get("cluster") or {}).get("slow_rank")
    return None if v is None else int(v)


def kind_mismatch(path: str | Path, ranks: int, other: str | Path) -> UsageError:
    """One line for a multi-rank input against a single-rank one: which is which, and what to pass."""
    return UsageError(
        f"{path} holds {ranks} ranks, {other} one: diff compares two single-rank runs or two multi-rank "
        f"runs; pass one rank's folder of {path} to compare it with {other}")


def diff_paths(base: str | Path, head: str | Path, threshold_pct: float = 5.0, chip: str | None = None,
               config_path: str | None = None, fail_on_new: str | None = None,
               failures: list[LoadFailure] | None = None,
               build: BuildReport | None = None,
               match: Sequence[tuple[str, str]] = ()) -> DiffResult | ClusterDiff:
    """The diff of two single-rank runs (tilescope.diff), or of two multi-rank runs; a
    multi-rank run against a single-rank one is a usage error (exit 2): comparing one of its ranks
    silently would be the first-rank-only slip. Ranks a folder could not load go to `failures`.
    `build` makes a multi-rank folder's report (`tilescope analyze`'s; without it, folders of
    several ranks cannot be read, only their saved JSON reports)."""
    reports = [load_any(p, chip, config_path, failures, build or _no_cluster_build) for p in (base, head)]
    return diff_reports(reports[0], reports[1], base, head, threshold_pct, fail_on_new, match)


def diff_reports(base_report: dict[str, Any], head_report: dict[str, Any], base: str | Path,
                 head: str | Path, threshold_pct: float = 5.0, fail_on_new: str | None = None,
                 match: Sequence[tuple[str, str]] = ()) -> DiffResult | ClusterDiff:
    """`diff_paths` on two reports already loaded by `load_any` (the agent keeps them: they name
    the files each side rests on); `base` and `head` label them."""
    reports = [base_report, head_report]
    multi = [is_cluster_report(r) for r in reports]
    for p, r, m in zip((base, head), reports, multi, strict=True):
        if m and not isinstance(r.get("cluster"), Mapping):
            raise UsageError(f"{p}: a report of {cluster_ranks(r)} ranks without a 'cluster' section "
                             "(written by an older tilescope?); "
                             "run tilescope analyze -f json on the run again")
    if all(multi):
        if match:
            raise UsageError("--match pairs kernels of two single-rank runs; these are runs of several ranks")
        return compare_clusters(reports[0], reports[1], str(base), str(head), threshold_pct, fail_on_new)
    if any(multi):
        i = multi.index(True)
        paths = (base, head)
        raise kind_mismatch(paths[i], cluster_ranks(reports[i]), paths[1 - i])
    runs = [run_from_report(r, str(p)) for r, p in zip(reports, (base, head), strict=True)]
    return compare_runs(runs[0], runs[1], threshold_pct, fail_on_new=fail_on_new, match=match)


def _no_cluster_build(path: Path, *_args: Any) -> dict[str, Any]:
    raise UsageError(f"{path}: a run of several ranks; compare the JSON reports `tilescope analyze -f json` "
                     "writes of it")
