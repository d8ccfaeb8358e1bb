"""Compare view data: two runs side by side (per-kernel deltas, new and resolved findings).

The diff itself belongs to `analyzer.diff`; when that module provides `diff_profiles(base, head,
base_report, head_report)` its result is used. Until then (or when it lacks a piece) the per-name
time deltas are aggregated here from the two kernel tables and findings are matched by code and
kernels — bookkeeping, not diagnosis: both sides' findings come from their own reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
from dash import html

from dashboard import figures as F
from dashboard.data import ProfileEntry
from dashboard.views import finding_item, kpi

MAX_GRID_ROWS = 2000  # per-kernel rows sent to the client-side grid (largest |delta| first)


@dataclass
class CompareResult:
    base_label: str
    head_label: str
    base_total_us: float
    head_total_us: float
    deltas: pd.DataFrame  # name, base_us, head_us, delta_us, delta_pct, base_launches, head_launches
    new_findings: list[dict[str, Any]]
    resolved_findings: list[dict[str, Any]]


def _finding_key(f: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    return str(f.get("code")), tuple(sorted(str(k) for k in f.get("kernels", [])))


def compare_entries(base: ProfileEntry, head: ProfileEntry) -> CompareResult:
    from_diff = _from_analyzer_diff(base, head)
    if from_diff is not None:
        return from_diff
    b = base.by_name[["name", "total_us", "launches"]].rename(
        columns={"total_us": "base_us", "launches": "base_launches"}
    )
    h = head.by_name[["name", "total_us", "launches"]].rename(
        columns={"total_us": "head_us", "launches": "head_launches"}
    )
    d = b.merge(h, on="name", how="outer")
    d[["base_us", "head_us"]] = d[["base_us", "head_us"]].fillna(0.0)
    d["delta_us"] = d["head_us"] - d["base_us"]
    d["delta_pct"] = (d["delta_us"] / d["base_us"].where(d["base_us"] > 0) * 100).round(2)
    d = d.reindex(d["delta_us"].abs().sort_values(ascending=False).index).reset_index(drop=True)
    base_keys = {_finding_key(f) for f in base.findings}
    head_keys = {_finding_key(f) for f in head.findings}
    return CompareResult(
        base.label,
        head.label,
        base.total_device_us,
        head.total_device_us,
        d,
        new_findings=[f for f in head.findings if _finding_key(f) not in base_keys],
        resolved_findings=[f for f in base.findings if _finding_key(f) not in head_keys],
    )


def _from_analyzer_diff(base: ProfileEntry, head: ProfileEntry) -> CompareResult | None:
    try:
        from analyzer import diff as diff_mod
    except ImportError:
        return None
    fn = getattr(diff_mod, "diff_profiles", None)
    if fn is None:
        return None
    data = fn(base.profile, head.profile, base.report, head.report)
    rows = pd.DataFrame(data.get("kernels", []))
    if rows.empty or not {"name", "base_us", "head_us"} <= set(rows.columns):
        return None
    rows["delta_us"] = rows.get("delta_us", rows["head_us"] - rows["base_us"])
    if "delta_pct" not in rows:
        rows["delta_pct"] = (rows["delta_us"] / rows["base_us"].where(rows["base_us"] > 0) * 100).round(2)
    findings = data.get("findings", {})
    return CompareResult(
        base.label,
        head.label,
        base.total_device_us,
        head.total_device_us,
        rows,
        list(findings.get("new", [])),
        list(findings.get("resolved", [])),
    )


def compare_kpis(r: CompareResult) -> list[html.Div]:
    delta = r.head_total_us - r.base_total_us
    pct = delta / r.base_total_us * 100 if r.base_total_us else 0.0
    return [
        kpi("base device time", F.format_us(r.base_total_us)),
        kpi("head device time", F.format_us(r.head_total_us)),
        kpi("change", f"{delta:+,.1f} µs ({pct:+.1f} %)", "warn" if delta > 0 else "good"),
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
    ]


def grid_rows(r: CompareResult) -> list[dict[str, Any]]:
    d = r.deltas.head(MAX_GRID_ROWS)
    cols = [
        c
        for c in ("name", "base_us", "head_us", "delta_us", "delta_pct", "base_launches", "head_launches")
        if c in d
    ]
    out = d[cols].astype(object).where(d[cols].notna(), None)
    return [{str(k): v for k, v in row.items()} for row in out.to_dict("records")]


def grid_columns() -> list[dict[str, Any]]:
    return [
        {
            "field": "name",
            "headerName": "Kernel",
            "pinned": "left",
            "width": 320,
            "filter": "agTextColumnFilter",
        },
        {
            "field": "base_us",
            "headerName": "Base (µs)",
            "type": "rightAligned",
            "filter": "agNumberColumnFilter",
        },
        {
            "field": "head_us",
            "headerName": "Head (µs)",
            "type": "rightAligned",
            "filter": "agNumberColumnFilter",
        },
        {
            "field": "delta_us",
            "headerName": "Δ (µs)",
            "type": "rightAligned",
            "filter": "agNumberColumnFilter",
            "sort": "desc",
        },
        {
            "field": "delta_pct",
            "headerName": "Δ (%)",
            "type": "rightAligned",
            "filter": "agNumberColumnFilter",
        },
        {"field": "base_launches", "headerName": "Base launches", "type": "rightAligned"},
        {"field": "head_launches", "headerName": "Head launches", "type": "rightAligned"},
    ]
