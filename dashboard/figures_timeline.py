"""The Timeline tab's figure: segments of streams and host threads, drawn in WebGL (pure: the
windowed segments of tilescope.dashboard.query in, a Plotly figure out), in the colours of
tilescope.dashboard.figures.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import plotly.graph_objects as go

from tilescope.dashboard.figures import COLOURS, OTHER, apply_layout, plot_text
from tilescope.report.palette import LAUNCH
from tilescope.text.escape import plotly_text


def timeline_figure(
    lanes: Sequence[str],
    starts: Sequence[float],
    ends: Sequence[float],
    texts: Sequence[str],
    categories: Sequence[str],
    lane_order: Iterable[str],
    merged: bool,
    x_range: tuple[float, float] | None = None,
    links: Sequence[tuple[float, str, float, str]] = (),
    title: str = "Host threads, streams per engine, HCCL",
) -> go.Figure:
    """Segments as WebGL lines, one trace per category; NaN breaks keep it one draw call each.

    Lane labels carry profile text (thread and process names, a kernel table's core types): each is
    escaped for plotly's label renderer, whole (no shortening: two lanes must stay two)."""
    lane_order = list(lane_order)
    safe = {label: plotly_text(label, None) for label in dict.fromkeys([*lane_order, *lanes])}
    order = [safe[label] for label in lane_order]
    fig = go.Figure()
    cats = np.asarray(categories, dtype=object)
    s_all, e_all = np.asarray(starts, dtype=float), np.asarray(ends, dtype=float)
    lane_arr = np.asarray([safe[label] for label in lanes], dtype=object)
    text_arr = np.asarray([plot_text(t, 120) for t in texts], dtype=object)
    for cat in dict.fromkeys(cats.tolist()):
        m = cats == cat
        s, e, ln, tx = s_all[m], e_all[m], lane_arr[m], text_arr[m]
        xs = np.column_stack([s, e, np.full(len(s), np.nan)]).ravel()
        ys = np.column_stack([ln, ln, np.full(len(s), None, dtype=object)]).ravel()
        hover = np.column_stack([tx, tx, np.full(len(s), "", dtype=object)]).ravel()
        fig.add_trace(
            go.Scattergl(
                x=xs,
                y=ys,
                mode="lines",
                name=str(cat),
                hovertext=hover,
                hovertemplate="%{hovertext}<br>%{x:,.1f} µs<extra></extra>",
                line=dict(color=COLOURS.get(str(cat), COLOURS[OTHER]), width=12),
                connectgaps=False,
            )
        )
    if links:
        # One thin line per launch, host op start → kernel start: who launched what, and how late;
        # an arrowhead on the kernel (host lanes are drawn above the device's: it points down).
        xs = np.array([[hs, ks, np.nan] for hs, _, ks, _ in links], dtype=float).ravel()
        ys = np.array([[safe.get(hl, plotly_text(hl, None)), safe[kl], None] for _, hl, _, kl in links],
                      dtype=object).ravel()
        fig.add_trace(
            go.Scattergl(
                x=xs,
                y=ys,
                mode="lines",
                name="launch (host → kernel)",
                legendgroup="launch",
                hoverinfo="skip",
                line=dict(color=LAUNCH, width=1),
                connectgaps=False,
            )
        )
        fig.add_trace(
            go.Scattergl(
                x=[ks for _, _, ks, _ in links],
                y=[safe[kl] for _, _, _, kl in links],
                mode="markers",
                name="launch (host → kernel)",
                legendgroup="launch",
                showlegend=False,
                hoverinfo="skip",
                marker=dict(symbol="triangle-down", size=9, color=LAUNCH),
            )
        )
    # every lane on the axis, also one with nothing in this window (plotly draws only the ticks in
    # its y range, which it otherwise fits to the data)
    fig.update_yaxes(
        categoryorder="array", categoryarray=order[::-1], type="category", title_text="",
        range=[-0.5, len(order) - 0.5],
    )
    fig.update_xaxes(title_text="time since first event (µs)")
    if x_range:
        fig.update_xaxes(range=list(x_range))
    if merged:
        title += " (neighbours merged: zoom in)"  # short: the legend shares the title's line
    return apply_layout(fig, title, max(260, 60 + 34 * len(order)), dragmode="zoom", uirevision="timeline")
