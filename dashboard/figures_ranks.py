"""The Ranks tab's figures: the rank x step heatmap and the communication matrix (pure: arrays in,
Plotly figures out). dashboard/ranks.py builds the grids from the report's cluster section; the
colours and the house layout are tilescope.dashboard.figures'.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import plotly.graph_objects as go

from tilescope.dashboard.figures import SEVERITY_COLOURS, apply_layout, plot_text


def json_grid(values: np.ndarray) -> list[Any]:
    """A 2-D float array as nested lists with None for NaN (JSON has no NaN: a gap in a heatmap)."""
    out = values.astype(object)
    out[np.isnan(values)] = None
    return list(out.tolist())


def rank_step_heatmap_figure(
    values: np.ndarray, ranks: list[int], labels: list[str], width: int, slow: int | None, name: str
) -> go.Figure:
    """Rank x step heatmap (µs): one row per rank id (its y value, so a click says which rank),
    the slow rank's tick labelled; `width` > 1 says each column is the mean of that many steps."""
    z = np.round(values, 1)
    ys = [str(r) for r in ranks]
    fig = go.Figure(
        go.Heatmap(
            z=json_grid(z),
            x=labels,
            y=ys,
            colorscale="Blues",
            colorbar=dict(title="µs"),
            hovertemplate="rank %{y}, step %{x}: %{z:,.1f} µs<extra></extra>",
            hoverongaps=False,
        )
    )
    fig.update_xaxes(title_text="step" + (f" (mean of {width} per column)" if width > 1 else ""),
                     type="category")
    fig.update_yaxes(
        title_text="rank", type="category", autorange="reversed", tickvals=ys,
        ticktext=[f"{r} (slow)" if r == slow else str(r) for r in ranks],
    )
    title = f"{name} per rank and step"
    finite = z[np.isfinite(z)]
    if finite.size and finite.min() > 0:
        # the colours stretch over whatever spread there is: the ratio says whether it matters
        title += f" — max/min = {finite.max() / finite.min():.2f}"
    title += f" — slow rank {slow}" if slow is not None else ""
    return apply_layout(fig, plot_text(title), max(260, min(900, 80 + 18 * len(ranks))))


def link_matrix_figure(
    grid: np.ndarray,
    srcs: list[int],
    dsts: list[int],
    unit: str,
    slow: list[tuple[int, int]],
    low_is_bad: bool,
) -> go.Figure:
    """Source rank (`srcs`, rows) x destination rank (`dsts`), one cell per pair (NaN: nothing
    exchanged); a bandwidth from red (half the median link or less) to green (the median or
    more), a size or time in blues; the `slow` links
    outlined and named in the title. Values are written in the cells up to 16 ranks (past that
    they would not fit)."""
    scale: dict[str, Any] = {}
    finite = grid[np.isfinite(grid)]
    if low_is_bad and finite.size:
        # red at half the median link or less (TS604's threshold), green at the median or more: a
        # 5 % spread between healthy links is not painted as red and green
        median = float(np.median(finite))
        scale = dict(zmin=0.5 * median, zmax=median) if median > 0 else {}
    cells: dict[str, Any] = {}
    if max(len(srcs), len(dsts)) <= 16:
        cells = dict(text=[[("" if math.isnan(v) else f"{v:,.1f}") for v in row] for row in grid],
                     texttemplate="%{text}")
    fig = go.Figure(
        go.Heatmap(
            z=json_grid(np.round(grid, 3)),
            x=[str(r) for r in dsts],
            y=[str(r) for r in srcs],
            colorscale="RdYlGn" if low_is_bad else "Blues",
            **scale,
            colorbar=dict(title=plot_text(unit.rsplit("(", 1)[-1].rstrip(")"))),
            hovertemplate="rank %{y} → rank %{x}: %{z:,.3f} " + plot_text(unit) + "<extra></extra>",
            hoverongaps=False,
            **cells,
        )
    )
    row, col = {r: i for i, r in enumerate(srcs)}, {r: i for i, r in enumerate(dsts)}
    for src, dst in slow:
        if src in row and dst in col:
            fig.add_shape(type="rect", x0=col[dst] - 0.5, x1=col[dst] + 0.5, y0=row[src] - 0.5,
                          y1=row[src] + 0.5, line=dict(color=SEVERITY_COLOURS["high"], width=3))
    fig.update_xaxes(title_text="destination rank", type="category", side="top")
    fig.update_yaxes(title_text="source rank", type="category", autorange="reversed")
    title = f"Communication matrix — {unit}, summed over steps and collectives (each once)"
    if slow:
        title += " — slow link " + ", ".join(f"{s}→{d}" for s, d in slow) + " (TS604)"
    # room for the top axis under the title
    return apply_layout(fig, plot_text(title), max(300, min(900, 160 + 28 * len(srcs))),
                        margin=dict(l=60, r=20, t=110, b=20))
