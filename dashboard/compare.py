"""Compare view data: two runs side by side, from `tilescope.diff` (the same data as `tilescope diff`).

Kernels are matched and judged by the diff module (name/op/shapes matching, per-step time, noise-
aware verdict); findings are new/resolved by the diff's identity. This module only turns the
`DiffResult` into a table, KPIs and lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from dash import html

from tilescope.dashboard import figures as F
from tilescope.dashboard.data import ProfileEntry
from tilescope.dashboard.views import finding_item, kpi
from tilescope.diff import CROSSED, DiffResult, RunData, compare_runs, run_from_report
from tilescope.summary import communication_mask

MAX_GRID_ROWS = 2000  # per-kernel rows sent to the client-side grid (largest |delta| first)


@dataclass
class CompareResult:
    base_label: str
    head_label: str
    base_total_us: float
    head_total_us: float
    total_verdict: str
    deltas: pd.DataFrame  # name, op_type, base_us, head_us, delta_us, delta_pct, verdict, launches
    new_findings: list[dict[str, Any]]
    resolved_findings: list[dict[str, Any]]
    crossed_findings: list[dict[str, Any]] = field(default_factory=list)  # below a time floor before


def compare_entries(
    base: ProfileEntry, head: ProfileEntry, match: tuple[tuple[str, str], ...] = ()
) -> CompareResult:
    """The diff of two loaded entries (cached on the base entry per head and pairing); `match`:
    the kernel pairs of `diff --match`, compared with each other and alone."""
    result: CompareResult = base.cached(
        f"compare:{head.key}:{match!r}",
        lambda: to_compare_result(compare_runs(run_data(base), run_data(head), match=match)),
    )
    return result


def kernel_names(entry: ProfileEntry) -> list[str]:
    """The kernels of a run as diff pairs them (one per name, op type and shapes), by name."""
    return sorted({s.name for s in run_data(entry).kernels.values()})


def common_kernels(base: ProfileEntry, head: ProfileEntry) -> list[str]:
    """The kernel names both runs ran, in the order of the head's total time, communication tasks
    (which have no counters) last."""
    if "name" not in base.by_name or "name" not in head.by_name:
        return []
    names = set(base.by_name["name"].astype(str))
    common = head.by_name[head.by_name["name"].astype(str).isin(names)]
    comm = communication_mask(common)
    return [str(n) for n in (*common["name"][~comm], *common["name"][comm])]


def nothing_to_compare(entry: ProfileEntry, served: int) -> str:
    """What the tab says instead of comparing a profile with itself."""
    why = (f"{entry.label} is the only profile served (`tilescope serve BASE HEAD` serves two)" if served < 2
           else f"the head is the base, {entry.label}; pick another head")
    return (f"Nothing to compare with: {why}. Or pick two of its kernels under Pair to compare them "
            "with each other.")


def run_data(entry: ProfileEntry) -> RunData:
    """The diff module's per-kernel statistics of one run (computed once per entry)."""
    data: RunData = entry.cached(
        "run", lambda: run_from_report({**entry.report, "_profile": entry.profile}, entry.label)
    )
    return data


def to_compare_result(diff: DiffResult) -> CompareResult:
    rows = [
        {
            # a pair of two kernels (--match) under both names, as `diff` labels it
            "name": f"{d.base.name} → {d.head.name}"
            if d.matched_by == "--match" and d.base and d.head and d.base.name != d.head.name
            else d.name,
            "op_type": stats.op_type if (stats := d.head or d.base) is not None else "",
            "base_us": round(d.base_per_step_us, 3),
            "head_us": round(d.head_per_step_us, 3),
            "delta_us": round(d.delta_us, 3),
            "delta_pct": None if d.median_delta_pct is None else round(d.median_delta_pct, 2),
            "verdict": d.verdict,
            "base_launches": d.base.launches if d.base else 0,
            "head_launches": d.head.launches if d.head else 0,
            # what changed with it, as `tilescope diff` says it (tilescope.diff_explain)
            "why": "; ".join(c.text for c in d.causes),
        }
        for d in diff.kernels
    ]
    deltas = pd.DataFrame(
        rows,
        columns=[
            "name",
            "op_type",
            "base_us",
            "head_us",
            "delta_us",
            "delta_pct",
            "verdict",
            "base_launches",
            "head_launches",
            "why",
        ],
    )
    deltas = deltas.reindex(deltas["delta_us"].abs().sort_values(ascending=False, kind="stable").index)
    return CompareResult(
        diff.base_label,
        diff.head_label,
        diff.base_total.median,
        diff.head_total.median,
        diff.total_verdict,
        deltas.reset_index(drop=True),
        list(diff.new),
        list(diff.resolved),
        list(diff.crossed),
    )


def compare_kpis(r: CompareResult) -> list[html.Div]:
    delta = r.head_total_us - r.base_total_us
    pct = delta / r.base_total_us * 100 if r.base_total_us else 0.0
    return [
        kpi("base device time / step", F.format_us(r.base_total_us)),
        kpi("head device time / step", F.format_us(r.head_total_us)),
        kpi(
            f"change per step — {r.total_verdict}",
            f"{'+' if delta >= 0 else '−'}{F.format_us(abs(delta))} ({pct:+.1f} %)",
            "warn" if r.total_verdict == "regressed" else ("good" if r.total_verdict == "improved" else ""),
        ),
        kpi("new findings", str(len(r.new_findings)), "warn" if r.new_findings else ""),
        kpi("resolved findings", str(len(r.resolved_findings)), "good" if r.resolved_findings else ""),
    ]


def findings_changes(r: CompareResult) -> list[Any]:
    def block(title: str, items: list[dict[str, Any]], kind: str) -> list[Any]:
        body = [finding_item(i, f, kind) for i, f in enumerate(items[:20])] or [
            html.Div("none", className="muted")
        ]
        return [html.H4(f"{title} ({len(items)})"), html.Div(body, className="finding-list compact")]

    return [
        *block("New in head", r.new_findings, "c-new"),
        *block("Resolved in head", r.resolved_findings, "c-res"),
        *(block(f"Crossed a threshold ({CROSSED})", r.crossed_findings, "c-crossed")
          if r.crossed_findings else []),
    ]


def grid_rows(r: CompareResult) -> list[dict[str, Any]]:
    d = r.deltas.head(MAX_GRID_ROWS)
    cols = list(d.columns)
    out = d[cols].astype(object).where(d[cols].notna(), None)
    return [{str(k): v for k, v in row.items()} for row in out.to_dict("records")]


def grid_columns() -> list[dict[str, Any]]:
    num = {"type": "rightAligned", "filter": "agNumberColumnFilter"}
    return [
        {
            "field": "name",
            "headerName": "Kernel",
            "pinned": "left",
            "width": 320,
            "filter": "agTextColumnFilter",
        },
        {"field": "verdict", "headerName": "Verdict", "filter": "agTextColumnFilter", "width": 140},
        {"field": "base_us", "headerName": "Base (µs/step)", **num},
        {"field": "head_us", "headerName": "Head (µs/step)", **num},
        {"field": "delta_us", "headerName": "Δ (µs/step)", **num},
        {"field": "delta_pct", "headerName": "Δ median (%)", **num},
        {"field": "base_launches", "headerName": "Base launches", **num},
        {"field": "head_launches", "headerName": "Head launches", **num},
        {"field": "op_type", "headerName": "Op type", "filter": "agTextColumnFilter"},
        {"field": "why", "headerName": "Why (what changed with it)", "filter": "agTextColumnFilter",
         "width": 520, "tooltipField": "why"},
    ]
