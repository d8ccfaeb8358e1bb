"""`tilescope diff` of two multi-rank runs, link by link: each rank pair's bandwidth in the base and
the head (the reports' `cluster.links`, tilescope.report.ranks.link_totals: Σ size / Σ transit time
over the run, as TS604 computes it), matched on (source rank, destination rank).

A link's bandwidth is one ratio over the whole run, without a spread, so its verdict compares
against the diff's threshold alone: "slower" / "faster" when it moved by at least that many per
cent ("no bandwidth" when a row has no usable number). The gates do not read it: a slower link
that costs step time shows as the slowest rank's step-time regression, and a link far under its
peers as a new TS604.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeGuard

from tilescope.text.words import num

SLOWER, FASTER, QUIET = "slower", "faster", "within threshold"
ONLY_BASE, ONLY_HEAD = "only in base", "only in head"
UNKNOWN = "no bandwidth"  # in both runs, but one row has no usable number
_ORDER = {SLOWER: 0, FASTER: 1, ONLY_HEAD: 2, ONLY_BASE: 3, QUIET: 4, UNKNOWN: 5}


@dataclass(frozen=True)
class LinkDelta:
    src_rank: int
    dst_rank: int
    transports: tuple[str, ...]  # both runs' transports of the pair
    base_gbps: float | None
    head_gbps: float | None
    base_mb: float | None  # data moved over the run
    head_mb: float | None
    verdict: str

    @property
    def pct(self) -> float | None:
        b, h = self.base_gbps, self.head_gbps
        return None if b is None or h is None or b <= 0 else (h / b - 1.0) * 100.0

    @property
    def name(self) -> str:
        via = f" {'/'.join(self.transports)}" if self.transports else ""
        return f"{self.src_rank}→{self.dst_rank}{via}"

    def to_dict(self) -> dict[str, Any]:
        pct = self.pct
        return {"src_rank": self.src_rank, "dst_rank": self.dst_rank, "transports": list(self.transports),
                "bandwidth_gbps": {"base": self.base_gbps, "head": self.head_gbps},
                "size_mb": {"base": self.base_mb, "head": self.head_mb},
                "change_pct": None if pct is None else round(pct, 3), "verdict": self.verdict}


def compare_links(base: Iterable[Mapping[str, Any]], head: Iterable[Mapping[str, Any]],
                  threshold_pct: float) -> list[LinkDelta]:
    """Every link of either run: the ones that moved beyond the threshold first (slower, largest
    drop first; then faster), then the links only one run has, then the quiet ones by rank pair."""
    b, h = _by_pair(base), _by_pair(head)
    out = []
    for pair in sorted(set(b) | set(h)):
        rb, rh = b.get(pair), h.get(pair)
        transports = tuple(sorted({str(t) for r in (rb, rh) if r is not None
                                   for t in r.get("transports") or ()}))
        bg, hg = _num(rb, "bandwidth_gbps"), _num(rh, "bandwidth_gbps")
        delta = LinkDelta(pair[0], pair[1], transports, bg, hg, _num(rb, "size_mb"), _num(rh, "size_mb"), "")
        verdict = ONLY_HEAD if rb is None else ONLY_BASE if rh is None else _verdict(delta, threshold_pct)
        out.append(replace(delta, verdict=verdict))
    out.sort(key=lambda d: (_ORDER[d.verdict], _moved(d), d.src_rank, d.dst_rank))
    return out


def changed(links: Sequence[LinkDelta]) -> list[LinkDelta]:
    """The links worth a line: moved beyond the threshold, or in one run only."""
    return [d for d in links if d.verdict not in (QUIET, UNKNOWN)]


def _verdict(d: LinkDelta, threshold_pct: float) -> str:
    """For a link both runs have."""
    pct = d.pct
    if pct is None:
        return UNKNOWN
    if abs(pct) < threshold_pct:
        return QUIET
    return SLOWER if pct < 0 else FASTER


def _moved(d: LinkDelta) -> float:
    """Sort key within a verdict: the largest change first."""
    pct = d.pct
    return 0.0 if pct is None else -abs(pct)


def _by_pair(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[int, int], Mapping[str, Any]]:
    out: dict[tuple[int, int], Mapping[str, Any]] = {}
    for r in rows:
        if not isinstance(r, Mapping):
            continue
        src, dst = r.get("src_rank"), r.get("dst_rank")
        if _rank(src) and _rank(dst):
            out[(src, dst)] = r
    return out


def _rank(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _num(row: Mapping[str, Any] | None, key: str) -> float | None:
    """A JSON number of the row, finite (words.num); text and booleans are no bandwidth."""
    v = None if row is None else row.get(key)
    return num(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
