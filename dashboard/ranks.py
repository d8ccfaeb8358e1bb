"""The Ranks tab: a multi-rank run side by side (issue #16). ClusterEntry in, components out.

Every number comes from the report's `cluster` section (tilescope.report.ranks.cluster_section),
computed once per served path in the store: the rank table is the report's own rows, the heatmap
its per-step rows, the communication matrix its per-link totals. Nothing here recomputes a split.
Pure functions over the entry, so tests call them directly; profile text (paths, errors, kernel
names in findings) only ever becomes component children or escaped plot text.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from dash import html

from tilescope.cluster import MAX_STEP_COLUMNS, bin_steps
from tilescope.dashboard import figures as F
from tilescope.dashboard import figures_ranks as FR
from tilescope.dashboard.data import ClusterEntry
from tilescope.dashboard.views import MESSAGE_LIMIT, evidence_value, names_span, severity_badge, shortened
from tilescope.report.ranks import RANK_COLUMNS, rank_rows
from tilescope.text.words import saving_phrase

# The heatmap's quantities: the report's per-step columns and their labels.
STEP_METRICS = {
    "computing_us": "Computing",
    "communication_not_overlapped_us": "Communication (not overlapped)",
    "free_us": "Free",
    "step_us": "Step time",
}
DEFAULT_METRIC = "computing_us"  # torch_npu's step time is the same on every rank (they wait
# for each other in collectives): the slow rank shows in its Computing, not its step time
LINK_VALUES = {
    "bandwidth_gbps": "Bandwidth (GB/s)",
    "size_mb": "Transit size (MB)",
    "transit_us": "Transit time (µs)",
}
DEFAULT_LINK_VALUE = "bandwidth_gbps"
SLOW_LINK_CODE = "TS604"
ROW_TYPE = "rank-row"


# --- rank table -----------------------------------------------------------------------------------


def rank_table(entry: ClusterEntry, shown_key: str | None = None) -> html.Table:
    """The report's rank table (`rank_rows`: the text renderers' cells); a rank whose profile
    loaded is a clickable row (its id carries the rank) that opens it in the picker, the row of
    the profile shown now is marked, the slow rank's row is highlighted and a left-out rank's row
    says why it was left out."""
    section = entry.section
    head = html.Tr([html.Th(c or "") for c in RANK_COLUMNS])
    body = []
    for raw, cells in zip(section.get("ranks") or [], rank_rows({"cluster": section}, grouped=False),
                          strict=True):
        rank = int(raw["rank"])
        key = entry.rank_keys.get(rank)
        tds: list[Any] = [html.Td(c) for c in cells[:-1]]
        last: list[Any] = [cells[-1]] if cells[-1] else []
        if raw.get("error"):
            last.append(html.Div(shortened(raw["error"], MESSAGE_LIMIT), className="rank-error"))
        tds.append(html.Td(last))
        classes = ["rank-row"]
        if raw.get("slow"):
            classes.append("slow")
        if key is None:
            classes.append("left-out")
        if key is not None and key == shown_key:
            classes.append("shown")
        props: dict[str, Any] = {"className": " ".join(classes)}
        if key is not None:
            props.update(id={"type": ROW_TYPE, "index": rank}, n_clicks=0, role="button", tabIndex="0",
                         title=f"open rank {rank} in Overview / Kernels / Findings")
        body.append(html.Tr(tds, **props))
    return html.Table([html.Thead(head), html.Tbody(body)], className="rank-table")


def rank_info(entry: ClusterEntry) -> list[Any]:
    """One line over the table: how many ranks, how many loaded, the slow rank, notes on files left out."""
    s = entry.section
    loaded, total = int(s.get("ranks_loaded") or 0), int(s.get("ranks_total") or 0)
    line = f"{total} ranks, {loaded} with a readable kernel table; step split summed over the profiled steps."
    if entry.slow_rank is not None:
        line += f" Slow rank: {entry.slow_rank} (TS601)."
    line += " Click a rank to open its kernels."
    out: list[Any] = [html.Div(line)]
    out += [html.Div(shortened(n, MESSAGE_LIMIT), className="muted small") for n in s.get("notes") or []]
    return out


# --- cross-rank findings ----------------------------------------------------------------------------


def cluster_findings(entry: ClusterEntry) -> list[Any]:
    """The TS6xx findings, each a <details>: severity, code, slug, saving and message; opened,
    the recommendation and the evidence table. No ids: the Findings tab's controls stay unique."""
    if not entry.findings:
        rules = ", ".join(c for c in entry.section.get("rules_run") or [] if c.startswith("TS6"))
        return [html.Div(f"No cross-rank findings ({rules or 'no TS6xx rule ran'}).", className="muted")]
    out: list[Any] = [html.H4(f"Cross-rank findings ({len(entry.findings)})")]
    for f in entry.findings:
        evidence = f.get("evidence") or {}
        rows = [html.Tr([html.Th(str(k)), html.Td(evidence_value(v))]) for k, v in evidence.items()]
        summary = html.Summary([
            severity_badge(str(f.get("severity", "info"))), " ",
            html.Span(str(f.get("code", "")), className="code"), " ",
            html.Span(str(f.get("slug", "")), className="slug"), " ",
            names_span((f.get("kernels") or [])[:3]), " ",
            html.Span(saving_phrase(f), className="saving"),
            html.Div(shortened(f.get("message", ""), MESSAGE_LIMIT), className="message"),
        ])
        out.append(html.Details([
            summary,
            html.P(str(f.get("recommendation") or "—"), className="recommendation"),
            html.Table(html.Tbody(rows), className="evidence") if rows else html.Div("—"),
        ], className="cluster-finding"))
    return out


# --- rank x step heatmap ----------------------------------------------------------------------------


def step_grid(entry: ClusterEntry, metric: str, max_columns: int = MAX_STEP_COLUMNS
              ) -> tuple[np.ndarray, list[int], list[str], int]:
    """The heatmap's values: ranks (rows, sorted) x steps (columns) of `metric` (µs) from the
    section's per-step rows; a step without an id (one unnamed step) is labelled "all". Past
    `max_columns` steps, consecutive steps are averaged in equal bins ("12–18") by the function
    that bins the report's own rows past its cap (`tilescope.cluster.bin_steps`); rows the report
    already binned (`steps_bin_width` > 1) are shown as they are. Returns the grid, the rank
    ids, the column labels and how many steps a bin holds (1: none binned)."""
    steps = pd.DataFrame(entry.section.get("steps") or [])
    if steps.empty or metric not in steps.columns or "rank" not in steps.columns:
        return np.empty((0, 0)), [], [], 1
    if "step" not in steps.columns:
        steps["step"] = None
    width = int(entry.section.get("steps_bin_width") or 1)
    if width == 1:
        steps, width = bin_steps(steps, max_columns)
    # -1: a step without an id
    step = pd.to_numeric(steps["step"], errors="coerce").fillna(-1).astype("int64")
    value = pd.to_numeric(steps[metric], errors="coerce")
    grid = value.groupby([steps["rank"].astype("int64"), step]).sum(min_count=1).unstack().sort_index(axis=1)
    ranks = [int(r) for r in grid.index]
    labels = ["all" if int(c) < 0 else str(int(c)) for c in grid.columns]
    if width > 1 and "step_last" in steps.columns:
        last = pd.to_numeric(steps["step_last"], errors="coerce").groupby(step).max()
        labels = [lab if pd.isna(last.get(int(c))) or int(last[int(c)]) == int(c)
                  else f"{lab}–{int(last[int(c)])}" for lab, c in zip(labels, grid.columns, strict=True)]
    return grid.to_numpy(dtype=float, na_value=np.nan), ranks, labels, width


def step_heatmap_figure(entry: ClusterEntry, metric: str = DEFAULT_METRIC) -> go.Figure:
    """Rank x step heatmap of one split component (or the step time), the slow rank labelled."""
    values, ranks, labels, width = step_grid(entry, metric)
    if not ranks:
        return F.empty_figure("No per-step data: the ranks have no step_trace_time.csv and no kernel table")
    name = STEP_METRICS.get(metric, metric)
    return FR.rank_step_heatmap_figure(values, ranks, labels, width, entry.slow_rank, name)


# --- communication matrix ----------------------------------------------------------------------------


def link_grid(entry: ClusterEntry, value: str) -> tuple[np.ndarray, list[int], list[int]]:
    """Source rank (rows) x destination rank (columns) of `value` from the section's per-link
    totals; NaN where two ranks exchanged nothing (and on the diagonal: LOCAL is left out). Rows
    are the ranks some link starts from, columns the ranks one ends at: a run captured on 2 of 16
    ranks (the real gpt3 one) has 2 rows, not 14 empty ones."""
    links = entry.section.get("links") or []
    srcs = sorted({int(x["src_rank"]) for x in links})
    dsts = sorted({int(x["dst_rank"]) for x in links})
    row, col = {r: i for i, r in enumerate(srcs)}, {r: i for i, r in enumerate(dsts)}
    grid = np.full((len(srcs), len(dsts)), np.nan)
    for x in links:  # one per rank pair: at most ranks² entries, from the report section
        v = x.get(value)
        if v is not None:
            grid[row[int(x["src_rank"])], col[int(x["dst_rank"])]] = float(v)
    return grid, srcs, dsts


def slow_links(entry: ClusterEntry) -> list[tuple[int, int]]:
    """(src, dst) of the links TS604 named."""
    return [(int(f["evidence"]["src_rank"]), int(f["evidence"]["dst_rank"])) for f in entry.findings
            if f.get("code") == SLOW_LINK_CODE and "src_rank" in (f.get("evidence") or {})]


def link_matrix_figure(entry: ClusterEntry, value: str = DEFAULT_LINK_VALUE) -> go.Figure:
    """The communication matrix of `value` (LINK_VALUES), TS604's slow links outlined."""
    grid, srcs, dsts = link_grid(entry, value)
    if not srcs:
        return F.empty_figure("No communication matrix: the ranks have no communication_matrix.json")
    return FR.link_matrix_figure(grid, srcs, dsts, LINK_VALUES.get(value, value), slow_links(entry),
                                 low_is_bad=value == "bandwidth_gbps")


def clicked_rank(click: dict[str, Any] | None) -> int | None:
    """The rank a heatmap/matrix click points at (its y: a rank id as text), None otherwise."""
    points = (click or {}).get("points")
    if not isinstance(points, list) or not points or not isinstance(points[0], dict):
        return None
    y = points[0].get("y")
    text = str(y) if isinstance(y, int | str) and not isinstance(y, bool) else ""
    return int(text) if text.isascii() and text.isdigit() else None
