"""Plotly figure builders shared by the HTML report and the dashboard.

Pure functions: they take rows (mappings or a DataFrame) or the report dict and return a
`plotly.graph_objects.Figure`; they never read files. Colours are those of docs/product.md.
Every label that can come from a trace goes through `plotly_text`, because plotly interprets a
subset of HTML in labels.

The colours are tilescope.report.palette's; the report's keys are read through
tilescope.report.access.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from tilescope.report.access import report_chip, report_kernels, report_summary, report_timeline
from tilescope.report.palette import (
    CORE_COLOURS,
    CUBE,
    IDLE,
    PIPE_SERIES,
    SHARE_SERIES,
    VECTOR,
)
from tilescope.text.escape import plotly_text
from tilescope.text.words import num

Rows = Sequence[Mapping[str, Any]]


def _rows(data: Rows | Any) -> list[Mapping[str, Any]]:
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # a DataFrame
        return list(data.to_dict("records"))
    return list(data)


# ---------------------------------------------------------------- figures

# The trace types the report's and the dashboard's figures draw: the house template carries
# plotly_white's defaults for these only (a figure of another type fails the every-view test).
TRACE_TYPES = ("bar", "heatmap", "scatter", "scattergl")


# Held while the template is made: plotly makes plotly_white's objects on their first read, and two
# dashboard threads drawing their first figures at once broke that (ValueError: Invalid value, a
# view answered 500 when two browsers opened the page together).
_TEMPLATE_LOCK = threading.Lock()


def house_template() -> go.layout.Template:
    """plotly_white's layout, and its per-trace defaults for TRACE_TYPES only: the whole template
    (defaults for 24 trace types, 7 KB) was copied and validated into every figure, ~10-20 ms each
    — a third of the time of a dashboard view's callbacks — and sent with every figure. Made once."""
    with _TEMPLATE_LOCK:
        return _made_template()


@functools.cache
def _made_template() -> go.layout.Template:
    white = pio.templates["plotly_white"]
    return go.layout.Template(layout=white.layout, data={t: white.data[t] for t in TRACE_TYPES})


def _layout(fig: go.Figure, title: str, height: int = 420, **extra: Any) -> go.Figure:
    # An explicit height: a responsive plot otherwise takes its container's (empty) height.
    fig.update_layout(title={"text": plotly_text(title)}, template=house_template(), height=height,
                      margin={"l": 60, "r": 20, "t": 50, "b": 60}, legend={"orientation": "h", "y": -0.25},
                      **extra)
    return fig


def unit_share_bar(report: Mapping[str, Any]) -> go.Figure:
    """One bar per unit (Cube, Vector, MTE, Scalar): the share of device time it was busy.

    Pipes run concurrently, so the shares overlap and do not add up to 100 %: bars side by side, never
    stacked into one total.
    """
    shares = report_summary(report)["shares"]
    series = [(label, shares[key], colour) for key, label, colour in SHARE_SERIES
              if shares.get(key) is not None]
    fig = go.Figure()
    fig.add_bar(y=[label for label, _, _ in series], x=[v * 100 for _, v, _ in series], orientation="h",
                marker_color=[colour for _, _, colour in series], showlegend=False,
                text=[f"{v * 100:.0f} %" for _, v, _ in series], textposition="outside",
                hovertemplate="%{y}: busy %{x:.1f} % of device time<extra></extra>")
    return _layout(fig, "Share of device time each unit is busy (units overlap)", height=240,
                   xaxis={"title": "% of device time", "range": [0, 105]},
                   yaxis={"autorange": "reversed"})


def pipe_ratio_bars(kernels: Rows | Any, max_kernels: int = 15) -> go.Figure:
    """Grouped bars of each pipe's busy ratio (0-1 shown as %) for the top kernels."""
    rows = _rows(kernels)[:max_kernels]
    labels = [plotly_text(r.get("name", "?"), 60) for r in rows]
    labels = _dedupe_labels(labels)
    fig = go.Figure()
    for col, label, colour in PIPE_SERIES:
        values = [num(r.get(col)) for r in rows]
        if all(v is None for v in values):
            continue
        fig.add_bar(x=labels, y=[None if v is None else v * 100 for v in values], name=label,
                    marker_color=colour, hovertemplate=f"%{{x}}<br>{label}: %{{y:.1f}} %<extra></extra>")
    # the legend above the plot and the names' margin grown to fit them: at the bottom the legend
    # covered the slanted kernel names (#28 item 11)
    fig = _layout(fig, "Pipe busy ratio per kernel", height=500, barmode="group",
                  yaxis={"title": "% of kernel time", "range": [0, 100]},
                  xaxis={"tickangle": -30, "automargin": True})
    fig.update_layout(legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "left", "x": 0},
                      margin={"t": 90})
    return fig


def _dedupe_labels(labels: list[str]) -> list[str]:
    # Plotly merges bars that share a category label; two kernels shortened to the same text must
    # stay two bars.
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        n = seen.get(lab, 0)
        seen[lab] = n + 1
        out.append(lab if n == 0 else f"{lab} ({n + 1})")
    return out


def roofline(kernels: Rows | Any, chip: Mapping[str, Any]) -> go.Figure:
    """Achieved TFLOP/s against arithmetic intensity, under the chip's compute and HBM roofs."""
    rows = [r for r in _rows(kernels)
            if num(r.get("arithmetic_intensity")) and num(r.get("achieved_tflops")) is not None]
    fig = go.Figure()
    peak = num(chip.get("peak_fp16_tflops"))
    bw = num(chip.get("hbm_bandwidth_gbps"))
    xs = [num(r["arithmetic_intensity"]) or 0.0 for r in rows]
    lo = min([*xs, 1.0]) / 4
    hi = max([*xs, (peak * 1e3 / bw) if peak and bw else 100.0]) * 4
    if peak and bw:
        ridge = peak * 1e3 / bw  # TFLOP/s over GB/s: FLOP per byte where the roofs meet
        fig.add_scatter(x=[lo, ridge, hi], y=[bw * lo / 1e3, peak, peak], mode="lines", name="roof",
                        line={"color": IDLE, "dash": "dash"},
                        hovertemplate="roof: %{y:.1f} TFLOP/s<extra></extra>")
    for core, colour in (("Cube", CUBE), ("Vector", VECTOR)):
        sel = [r for r in rows if _is_cube(r) == (core == "Cube")]
        if not sel:
            continue
        fig.add_scatter(
            x=[num(r["arithmetic_intensity"]) for r in sel], y=[num(r["achieved_tflops"]) for r in sel],
            mode="markers", name=core, marker={"color": colour, "size": 10},
            text=[plotly_text(r.get("name", "?"), 80) for r in sel],
            hovertemplate="%{text}<br>%{x:.2f} FLOP/B, %{y:.2f} TFLOP/s<extra></extra>")
    title = "Roofline" + ("" if peak and bw else " (chip peak or HBM bandwidth unknown: no roof drawn)")
    return _layout(fig, title, xaxis={"type": "log", "title": "arithmetic intensity (FLOP/byte)"},
                   yaxis={"type": "log", "title": "achieved TFLOP/s"})


def _is_cube(row: Mapping[str, Any]) -> bool:
    core = str(row.get("core_type", "")).upper()
    if core:
        return CORE_COLOURS.get(core, VECTOR) == CUBE
    return (num(row.get("aic_cube_ratio")) or 0) > 0


def timeline(launches: Rows | Any, max_rows: int = 5000) -> go.Figure:
    """Kernel launches on a time axis (µs from the first launch), one lane per stream."""
    rows = sorted(_rows(launches), key=lambda r: int(r["start_ns"]))[:max_rows]
    fig = go.Figure()
    if rows:
        t0 = int(rows[0]["start_ns"])
        by_colour: dict[str, list[Mapping[str, Any]]] = {}
        for r in rows:
            by_colour.setdefault(CORE_COLOURS.get(str(r.get("core_type", "")).upper(), IDLE), []).append(r)
        names = {CUBE: "Cube", VECTOR: "Vector", IDLE: "other"}
        for colour, sel in by_colour.items():
            fig.add_bar(
                base=[(int(r["start_ns"]) - t0) / 1e3 for r in sel],
                x=[num(r["duration_us"]) or 0.0 for r in sel],
                y=[plotly_text(f"stream {r.get('stream_id', '?')}", 40) for r in sel],
                orientation="h", name=names[colour], marker_color=colour,
                text=[plotly_text(r.get("name", "?"), 80) for r in sel], textposition="none",
                hovertemplate="%{text}<br>start %{base:.1f} µs, %{x:.2f} µs<extra></extra>")
    return _layout(fig, "Timeline of kernel launches", barmode="overlay",
                   xaxis={"title": "µs since first launch"})


def figures_from_report(report: Mapping[str, Any]) -> dict[str, go.Figure | str]:
    """Every chart the report's data allow; a string (why it is absent) in place of the others."""
    kernels = report_kernels(report)
    out: dict[str, go.Figure | str] = {"shares": unit_share_bar(report)}
    has_pipes = any(num(k.get(col)) is not None for k in kernels for col, _, _ in PIPE_SERIES)
    out["pipes"] = pipe_ratio_bars(kernels) if has_pipes else \
        ("The report's kernel rows carry no pipe ratios (they need a profile collected with "
         "aic_metrics=PipeUtilization, and the report must include them per kernel).")
    has_roof = any(num(k.get("arithmetic_intensity")) for k in kernels)
    out["roofline"] = roofline(kernels, report_chip(report)) if has_roof else \
        "No kernel row in the report has arithmetic intensity and achieved TFLOP/s: no roofline."
    launches = report_timeline(report)
    out["timeline"] = timeline(launches) if launches else \
        "The report carries no launch timestamps, so there is no timeline."
    return out
