"""The Finding model shared by rules, reports, the dashboard and diff."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

# What a finding's est_saving_us measures: device time of kernels made faster in place (bounded by
# their speed of light for the cores they used), of kernels given a new grid (bounded by their speed
# of light with every core), of work removed or moved off the AI Cores (fusion, AI CPU ops: bounded
# by the kernels' time, since the work itself changes), idle time between tasks (a share of the wall
# time), or nothing (static findings: no runtime estimate).
SAVING_DEVICE = "device"
SAVING_GRID = "grid"  # a new grid (TS401): bounded by the speed of light with every core
SAVING_WORK = "work"
SAVING_IDLE = "idle"
SAVING_NONE = "none"
# a cross-rank finding: time of the slowest rank's step (what every rank waits for) that evening out
# the ranks would save; a share of that step time, not of one rank's device time
SAVING_CLUSTER = "cluster"


class Severity(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"high": 3, "medium": 2, "low": 1, "info": 0}[self.value]


# The severities, highest first (declaration order): the order every view lists them in.
SEVERITIES: tuple[str, ...] = tuple(s.value for s in Severity)
# severity name -> rank (high 3 ... info 0): what gates and grouping compare
SEVERITY_RANK: dict[str, int] = {s.value: s.rank for s in Severity}


@dataclass(frozen=True)
class Location:
    """A place a finding points at.

    stage: "source" (the kernel .py), "tvmscript" (before lowering), "lowered" (after the passes),
    "ascendc" (generated C) or "trace" (a profiler file).
    """

    file: str
    line: int | None = None
    end_line: int | None = None
    stage: str = "source"
    label: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Finding:
    code: str
    slug: str
    severity: Severity
    kernels: tuple[str, ...]
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    recommendation: str = ""
    est_saving_us: float = 0.0
    share_of_total: float = 0.0  # 0-1 of device time (of the wall time for idle savings)
    locations: tuple[Location, ...] = ()
    source: str = "tilescope"
    occurrences: int = 1  # launches/chains grouped into this finding
    saving_kind: str = SAVING_DEVICE  # SAVING_DEVICE | SAVING_GRID | SAVING_WORK | SAVING_IDLE | SAVING_NONE
    # the assumed values the finding rests on, one phrase each ("40 Vector cores: 910B4 defaults"):
    # such a finding is at most medium (`capped_severity`), whatever its saving
    assumed: tuple[str, ...] = ()

    def capped_severity(self, severity: Severity) -> Severity:
        """`severity`, at most MEDIUM when the finding rests on an assumed value."""
        return Severity.MEDIUM if self.assumed and severity is Severity.HIGH else severity

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "slug": self.slug,
            "severity": self.severity.value,
            "kernels": list(self.kernels),
            "message": self.message,
            "evidence": self.evidence,
            "recommendation": self.recommendation,
            "est_saving_us": round(float(self.est_saving_us), 3),
            "share_of_total": round(float(self.share_of_total), 6),
            "locations": [loc.to_dict() for loc in self.locations],
            "source": self.source,
            "occurrences": self.occurrences,
            "saving_kind": self.saving_kind,
            **({"assumed": list(self.assumed)} if self.assumed else {}),
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Finding:
        return Finding(
            code=d["code"],
            slug=d["slug"],
            severity=Severity(d["severity"]),
            kernels=tuple(d.get("kernels", ())),
            message=d["message"],
            evidence=dict(d.get("evidence", {})),
            recommendation=d.get("recommendation", ""),
            est_saving_us=float(d.get("est_saving_us", 0.0)),
            share_of_total=float(d.get("share_of_total", 0.0)),
            locations=tuple(Location(**loc) for loc in d.get("locations", ())),
            source=d.get("source", "tilescope"),
            occurrences=int(d.get("occurrences", 1)),
            saving_kind=str(d.get("saving_kind", SAVING_DEVICE)),
            assumed=tuple(d.get("assumed", ())),
        )


def severity_for_share(
    share: float, high: float = 0.05, medium: float = 0.03, low: float = 0.005
) -> Severity:
    """Severity follows the share of device time a problem costs (issue #3 defaults)."""
    if share >= high:
        return Severity.HIGH
    if share >= medium:
        return Severity.MEDIUM
    if share >= low:
        return Severity.LOW
    return Severity.INFO
