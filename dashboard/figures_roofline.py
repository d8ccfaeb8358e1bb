"""The Roofline tab's figure: per-kernel points under the chip's ceilings, log-log (pure: a table
of points and a ChipSpec in, a Plotly figure out), in the colours of tilescope.dashboard.figures.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from tilescope.chips import ChipSpec
from tilescope.dashboard.figures import (
    COLOURS,
    CUBE,
    MIX_CUBE,
    MIX_VECTOR,
    OTHER,
    VECTOR,
    apply_layout,
    core_categories,
    empty_figure,
    plot_text,
)

# Mix kernels use their side's colour with a different marker, so the palette stays the product's.
SYMBOLS = {CUBE: "circle", VECTOR: "circle", MIX_CUBE: "diamond", MIX_VECTOR: "diamond", OTHER: "square"}
# Up to this many points the markers are SVG, beyond it WebGL. A WebGL plot pays for its context and
# shaders on every draw: the Roofline tab took 0.73-0.91 s of page CPU to show 1 kernel, 0.23-0.28 s
# in SVG (headless Chromium without a GPU, where WebGL is drawn in software; docs/benchmarks.md,
# session 19). SVG stays smooth to a few thousand markers; WebGL only pays off past that.
SVG_MAX_POINTS = 1000
# (label, peak FLOP/s, colour key, is an assumption) of one compute ceiling
Ceiling = tuple[str, float, str, bool]


def roofline_figure(points: pd.DataFrame, chip: ChipSpec, max_points: int = 2000) -> go.Figure:
    """Log-log roofline of per-kernel points (`name, core_type, flops, bytes_moved, total_us`).

    Chip ceilings are drawn from the ChipSpec; those that are assumptions say so in their label.
    Points carry the kernel name in customdata so a click can open the kernel's detail.
    """
    need = {"flops", "bytes_moved", "total_us"}
    if points.empty or not need <= set(points.columns):
        return empty_figure("No FLOP / byte counts: collect ArithmeticUtilization and Memory for a roofline")
    measured = points[(points["flops"] > 0) & (points["bytes_moved"] > 0) & (points["total_us"] > 0)]
    pts = measured.nlargest(max_points, "total_us")
    if pts.empty:
        return empty_figure("No kernel has both FLOPs and bytes moved")
    ai = pts["flops"] / pts["bytes_moved"]
    tflops = pts["flops"] / (pts["total_us"] * 1e-6) / 1e12
    fig = go.Figure()
    x_lo = max(float(ai.min()) / 4, 1e-3)
    x_hi = max(float(ai.max()) * 4, (chip.ridge_point() or 1) * 4)
    ceilings, top = _add_ceilings(fig, chip, x_lo, x_hi, float(tflops.max()))
    _add_points(fig, pts, ai, tflops)
    # Whole decades on both axes, the y range reaching down past the lowest ceiling and point so
    # that at least two decade labels show.
    y_lo = min(float(tflops.min()), *(p / 1e12 for _, p, _, _ in ceilings)) / 3
    y_hi = max(float(tflops.max()), top / 1e12) * 2
    fig.update_xaxes(
        type="log",
        dtick=1,
        title_text="arithmetic intensity (FLOP/byte)",
        range=[math.log10(x_lo), math.log10(x_hi)],
    )
    fig.update_yaxes(
        type="log",
        dtick=1,
        title_text="achieved TFLOP/s",
        range=[math.log10(max(y_lo, 1e-6)), math.log10(y_hi)],
    )
    title = f"Roofline — {plot_text(chip.name)}"
    if len(measured) < len(points):
        title += f" ({len(measured)} of {len(points)} kernels have FLOP and byte counts)"
    if len(pts) < len(measured):
        title += f" — top {len(pts)} by time shown"
    # six ceilings with their sources: below the plot, where the title cannot be covered
    return apply_layout(
        fig, title, 560, clickmode="event",
        legend=dict(orientation="h", yanchor="top", y=-0.16, xanchor="left", x=0.0),
        margin=dict(l=60, r=20, t=44, b=110),
    )


def _add_ceilings(
    fig: go.Figure, chip: ChipSpec, x_lo: float, x_hi: float, max_tflops: float
) -> tuple[list[Ceiling], float]:
    """The compute peaks as flat lines, then the GM and L2 roofs up to the highest peak; returns
    the peaks and that height in FLOP/s (twice the fastest point's when the chip has no peak)."""
    xs = np.logspace(math.log10(x_lo), math.log10(x_hi), 64)
    ceilings: list[Ceiling] = []
    if chip.peak_flops("float16"):
        ceilings.append(("Cube FP16/BF16 peak", chip.peak_flops("float16") or 0.0, CUBE, False))
    if chip.peak_vector_flops():
        # vector FLOP/cycle is a default of ChipSpec, not a vendor figure
        ceilings.append(("Vector peak", chip.peak_vector_flops() or 0.0, VECTOR, True))
    for label, peak, colour, is_assumed in ceilings:
        fig.add_trace(
            go.Scatter(
                x=[x_lo, x_hi],
                y=[peak / 1e12] * 2,
                mode="lines",
                hoverinfo="skip",
                name=f"{label} {peak / 1e12:,.0f} TFLOP/s" + (" (assumption)" if is_assumed else ""),
                line=dict(color=COLOURS[colour], width=1.5, dash="dot" if is_assumed else "solid"),
            )
        )
    top = max((p for _, p, _, _ in ceilings), default=max_tflops * 1e12 * 2)
    for label, bw, note in (
        ("GM", chip.hbm_bandwidth_gbps, chip.hbm_note),
        ("L2", chip.l2_bandwidth_gbps, chip.hbm_note),
    ):
        if not bw:
            continue
        ys = np.minimum(xs * bw * 1e9, top) / 1e12
        configured = note == "configured"
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                hoverinfo="skip",
                name=f"{label} {bw:,.0f} GB/s ({note})",
                line=dict(color="#555" if label == "GM" else "#999", dash="dash" if configured else "solid"),
            )
        )
    return ceilings, top


def _add_points(fig: go.Figure, pts: pd.DataFrame, ai: pd.Series, tflops: pd.Series) -> None:
    """One marker trace per core-type category (SVG, WebGL past SVG_MAX_POINTS), the kernel name in
    customdata."""
    trace = go.Scatter if len(pts) <= SVG_MAX_POINTS else go.Scattergl
    cats = core_categories(pts)
    for cat in dict.fromkeys(cats):
        mask = cats == cat
        sub = pts[mask]
        fig.add_trace(
            trace(
                x=ai[mask],
                y=tflops[mask],
                mode="markers",
                name=cat,
                marker=dict(
                    color=COLOURS[cat],
                    symbol=SYMBOLS.get(cat, "circle"),
                    size=_sizes(sub["total_us"]),
                    line=dict(color="#222", width=0.5),
                    opacity=0.85,
                ),
                customdata=np.array(sub["name"].astype(str), dtype=object),
                hovertext=[plot_text(n) for n in sub["name"]],
                hovertemplate="%{hovertext}<br>%{x:.2f} FLOP/B, %{y:.2f} TFLOP/s<extra>" + cat + "</extra>",
            )
        )


def _sizes(total_us: pd.Series) -> list[float]:
    """Marker area grows with time so the kernels worth fixing stand out."""
    t = total_us.to_numpy(dtype=float)
    top = float(t.max()) if len(t) else 1.0
    return list(8 + 22 * np.sqrt(t / top if top > 0 else t))
