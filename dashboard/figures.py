"""Pure figure builders: tables in, Plotly figures out (no Dash, no I/O), one colour vocabulary.

This module holds the vocabulary every dashboard figure shares (series colours, `plot_text`, the
core-type categories, `apply_layout`, `empty_figure`) and the Overview, Kernel detail and Compare
charts; the larger figures each have their own module on top of it: figures_roofline.py,
figures_timeline.py and figures_ranks.py (the Ranks tab's heatmap and communication matrix).

Colours follow docs/product.md exactly, so the dashboard and the HTML report read the same. Every
string that came from a profile passes through `plot_text()` before reaching Plotly, because
Plotly interprets a subset of HTML in labels and hover text; escaped, a kernel named
`<img src=x onerror=alert(1)>` shows as those characters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from tilescope.chips import ChipSpec
from tilescope.columns import AI_CORE, AI_VECTOR_CORE, AICORE_TYPES, MIX_AIC, MIX_AIV
from tilescope.findings import SEVERITIES
from tilescope.report import palette as P
from tilescope.report.charts import house_template
from tilescope.text.escape import MAX_INLINE, plotly_text
from tilescope.text.words import NO_ESTIMATE, fmt_pct, fmt_us, recoverable_text

CUBE, VECTOR, MIX_CUBE, MIX_VECTOR, OTHER, HOST, COMMUNICATION, AI_CPU = (
    "Cube",
    "Vector",
    "Mix (Cube)",
    "Mix (Vector)",
    "Other",
    "Host",
    "HCCL",
    "AI_CPU",
)
# The dashboard's series by name, in the product's one palette (tilescope.report.palette).
COLOURS = {
    CUBE: P.CUBE,
    VECTOR: P.VECTOR,
    MIX_CUBE: P.MIX_CUBE,
    MIX_VECTOR: P.MIX_VECTOR,
    COMMUNICATION: P.COMMUNICATION,
    AI_CPU: P.AI_CPU,
    "MTE1": P.MTE1,
    "MTE2": P.MTE2,
    "MTE3": P.MTE3,
    "Data movement": P.MTE2,
    "Scalar": P.SCALAR,
    "FixPipe": P.FIXPIPE,
    OTHER: P.IDLE,
    HOST: P.HOST,
    "Idle": P.IDLE,
}
SEVERITY_COLOURS = P.SEVERITY_COLOURS
_CORE_CATEGORY = {AI_CORE: CUBE, AI_VECTOR_CORE: VECTOR, MIX_AIC: MIX_CUBE, MIX_AIV: MIX_VECTOR}
# (column, label, colour) of the pipe bars: the report's series (tilescope.report.palette), AIC
# pipes first, then AIV, as MindStudio lists them, each its own colour. Each is the pipe's share of
# the launch (tilescope.metrics), the same quantity as every other view.
PIPES = P.PIPE_SERIES
FONT = dict(family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=12)
MAX_BAR_LABEL = 48


def plot_text(value: Any, limit: int | None = None) -> str:
    """A profile string made safe for Plotly's label renderer (and shortened for axes).

    The escaping is the report's own (tilescope.text.escape.plotly_text), so the dashboard and
    the HTML report neutralise names the same way.
    """
    return plotly_text(value, limit or MAX_INLINE)


def core_category(core_type: Any) -> str:
    return _CORE_CATEGORY.get(str(core_type), OTHER)


def core_categories(frame: pd.DataFrame) -> np.ndarray:
    """Core-type category per row, vectorised (factorise once, map the few distinct values)."""
    if "core_type" not in frame:
        return np.full(len(frame), OTHER, dtype=object)
    codes, uniques = pd.factorize(frame["core_type"], use_na_sentinel=True)
    mapped = np.array([_CORE_CATEGORY.get(str(u), OTHER) for u in uniques] + [OTHER], dtype=object)
    return mapped[codes]  # code -1 (missing) picks the trailing OTHER


def apply_layout(fig: go.Figure, title: str, height: int = 320, **extra: Any) -> go.Figure:
    """The house look of every dashboard figure: title top left, one font, a horizontal legend.
    `extra` layout properties are merged over the house's (a `margin` or `legend` of its own).

    Returns a new figure of `fig`'s traces, its whole layout given at once: what `fig` holds with
    the house's merged over it, as update_layout merges. Put through update_layout into a figure
    already holding plotly's default template, the house template cost about twice as much: three
    Overview figures took 42 ms to build, then 27 (docs/benchmarks.md, session 19). The template is
    given as plotly gives its own (`_give_template`): a bar figure 5.1 ms, then 1.2 (session 20)."""
    house = {
        "title": dict(text=title, x=0.01, xanchor="left", font=dict(size=14)),
        "font": FONT,
        "height": height,
        "margin": dict(l=60, r=20, t=44, b=48),
        "legend": dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0),
    }
    own = {k: v for k, v in fig.layout.to_plotly_json().items() if k != "template"}  # plotly's default
    out = go.Figure(data=fig.data, layout=_merged(_merged(own, house), extra))
    _give_template(out.layout, house_template())
    return out


def _give_template(layout: go.Layout, template: go.layout.Template) -> None:
    """`template` set on `layout` as plotly sets its default template on every new figure: not
    validated again (BaseFigure._initialize_layout_template turns the layout's `_validate` off for
    it). The house template was validated once, when it was made; validating it into each figure
    was 3.8 of the 4.4 ms a figure took, ~12 CPU s of the test suite. The figure's JSON is the
    same, but for `template` coming last among the layout's keys."""
    layout._validate = False
    try:
        layout.template = template
    finally:
        layout._validate = True


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` merged into a copy of `base`, dictionaries key by key (update_layout's rule)."""
    out = dict(base)
    for key, value in over.items():
        old = out.get(key)
        out[key] = _merged(old, value) if isinstance(value, dict) and isinstance(old, dict) else value
    return out


def empty_figure(message: str, height: int = 150) -> go.Figure:
    """A placeholder that says what is missing and how to get it, instead of blank axes."""
    fig = go.Figure()
    fig.add_annotation(
        text=plot_text(message),
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        showarrow=False,
        font=dict(size=13, color="#555"),
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return apply_layout(fig, "", height)


def format_us(us: float) -> str:
    """µs in tables, ms from 10 ms on: the one formatter of every view (tilescope.text.words)."""
    return fmt_us(us)


# --- Overview -----------------------------------------------------------------------------------


def busy_by_core_type_figure(busy_us: dict[str, float]) -> go.Figure:
    """Horizontal bar of device busy time per core-type category."""
    if not busy_us:
        return empty_figure("No kernel durations in this profile")
    labels = list(busy_us)
    fig = go.Figure(
        go.Bar(
            x=[busy_us[k] for k in labels],
            y=[plot_text(k) for k in labels],
            orientation="h",
            marker_color=[COLOURS.get(k, COLOURS[OTHER]) for k in labels],
            text=[format_us(busy_us[k]) for k in labels],
            textposition="auto",
            hovertemplate="%{y}: %{x:,.1f} µs<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="device busy time (µs)")
    fig.update_yaxes(autorange="reversed")
    return apply_layout(fig, "Device busy time by core type", 240)


def pipe_share_figure(shares: dict[str, float]) -> go.Figure:
    """Each unit's busy share of device time (tilescope.summary; units overlap, so no total)."""
    items = [(k, v) for k, v in shares.items() if v is not None and math.isfinite(v)]
    if not items:
        return empty_figure("No pipe ratios: collect aic_metrics=PipeUtilization")
    fig = go.Figure(
        go.Bar(
            x=[v * 100 for _, v in items],
            y=[plot_text(k) for k, _ in items],
            orientation="h",
            marker_color=[COLOURS.get(k, COLOURS[OTHER]) for k, _ in items],
            # the rounding of every other view (tilescope.text.words: unit shares to whole per cent)
            text=[fmt_pct(v, 0) for _, v in items],
            textposition="auto",
            hovertemplate="%{y}: busy %{x:.1f} % of device time<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="busy, % of device time (per core, summed over launches)", range=[0, 100])
    fig.update_yaxes(autorange="reversed")
    return apply_layout(fig, "Cube / Vector / data movement / Scalar busy", 240)


def top_kernels_figure(by_name: pd.DataFrame, n: int = 12) -> go.Figure:
    """Top kernels by total time, coloured by core type; customdata carries the kernel name."""
    if by_name.empty:
        return empty_figure("No kernels")
    top = by_name.head(n)
    cats = core_categories(top)
    fig = go.Figure(
        go.Bar(
            x=top["total_us"],
            y=[plot_text(s, MAX_BAR_LABEL) for s in top["name"]],
            orientation="h",
            marker_color=[COLOURS[c] for c in cats],
            customdata=np.array(top["name"].astype(str), dtype=object),
            hovertext=[
                f"{plot_text(nm)}<br>{int(lc)} launch(es), {c}"
                for nm, lc, c in zip(top["name"], top["launches"], cats, strict=True)
            ],
            hovertemplate="%{hovertext}<br>%{x:,.1f} µs<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="total time (µs)")
    fig.update_yaxes(autorange="reversed", automargin=True)
    return apply_layout(fig, f"Top {len(top)} kernels by time", 80 + 26 * len(top))


def findings_by_severity_figure(
    findings: Sequence[dict[str, Any]], totals: dict[str, Any] | None = None
) -> go.Figure:
    """Count and estimated saving per severity; the savings are the summary's combined ones
    (tilescope.summary: findings on one kernel never add up past its speed-of-light gap)."""
    counts = {s: 0 for s in SEVERITIES}
    for f in findings:
        sev = str(f.get("severity", "info"))
        counts[sev] = counts.get(sev, 0) + 1
    by_sev = (totals or {}).get("saving_by_severity") or {}
    # each kind of saving in its own unit (an idle-gap finding's is idle time, not 0.0 µs of kernels)
    buckets = {s: by_sev.get(s) or {} for s in SEVERITIES}
    saving = {s: recoverable_text(b.get("device_us"), b.get("idle_us")) for s, b in buckets.items()}
    fig = go.Figure(
        go.Bar(
            x=list(SEVERITIES),
            y=[counts[s] for s in SEVERITIES],
            marker_color=[SEVERITY_COLOURS[s] for s in SEVERITIES],
            text=[(f"{counts[s]} · est. {saving[s]}" if saving[s] else f"{counts[s]} · {NO_ESTIMATE}")
                  if counts[s] else "" for s in SEVERITIES],
            textposition="auto",
            textangle=0,
            hovertemplate="%{x}: %{y} finding(s)<extra></extra>",
        )
    )
    fig.update_yaxes(title_text="findings", rangemode="tozero", tickformat=",d")
    fig.update_xaxes(title_text="severity")
    return apply_layout(fig, "Findings by severity (est. saving)", 240)


# --- Kernel detail ------------------------------------------------------------------------------


def pipe_ratio_figure(rows: pd.DataFrame, title: str) -> go.Figure:
    """Busy % of the launch per pipe over the given launches (duration-weighted, as the report's
    kernel rows), with min-max whiskers when several."""
    present = [(c, label, colour) for c, label, colour in PIPES if c in rows and rows[c].notna().any()]
    if rows.empty or not present:
        return empty_figure(no_counters_message(rows, "pipe ratios", "collect aic_metrics=PipeUtilization"))
    dur = rows["duration_us"] if "duration_us" in rows else pd.Series(1.0, index=rows.index)

    def weighted(col: str) -> float:
        ok = rows[col].notna() & dur.notna()
        total = float(dur[ok].sum())
        return float((rows[col][ok] * dur[ok]).sum() / total) if total > 0 else float(rows[col].mean())

    means = [weighted(c) * 100 for c, _, _ in present]
    lo = [m - float(rows[c].min()) * 100 for m, (c, _, _) in zip(means, present, strict=True)]
    hi = [float(rows[c].max()) * 100 - m for m, (c, _, _) in zip(means, present, strict=True)]
    several = len(rows) > 1
    fig = go.Figure(
        go.Bar(
            x=[label for _, label, _ in present],
            y=means,
            marker_color=[colour for _, _, colour in present],
            error_y=dict(type="data", array=hi, arrayminus=lo, visible=several, color="#555"),
            text=[f"{m:.0f} %" for m in means],
            textposition="outside",
            hovertemplate="%{x}: %{y:.1f} % of the launch busy (per core)<extra></extra>",
        )
    )
    # short titles and automargin: a long y title ran past the plot into the chart's title (#28)
    fig.update_yaxes(title_text="busy, % of launch", range=[0, 110], automargin=True)
    fig.update_xaxes(title_text="pipe (AIC = Cube core, AIV = Vector core)", automargin=True)
    suffix = f" — mean of {len(rows)} launches, whiskers min–max" if several else ""
    return apply_layout(fig, plot_text(title, 60) + suffix, 340)


def no_counters_message(rows: pd.DataFrame | None, what: str, advice: str) -> str:
    """Why a kernel has no `what`: a task that does not run on the AI Core (HCCL, AI_CPU, DSA)
    never has any, so `advice` (how to collect them) would not help and is not given (#28 item 6)."""
    types: list[Any] = list(rows["core_type"].dropna()) if rows is not None and "core_type" in rows else []
    cores = sorted({str(c) for c in types})
    off_core = [c for c in cores if c not in AICORE_TYPES]
    if cores and off_core == cores:
        return f"No {what}: {'/'.join(off_core)} tasks do not run on the AI Core the counters measure"
    return f"No {what} for this kernel: {advice}"


def cube_vector_split_figure(rows: pd.DataFrame) -> go.Figure:
    """Cube-side vs Vector-side busy time against the wall duration of the launches."""
    parts = []
    for label, cols in ((CUBE, ("cube_busy_us", "aic_time_us")), (VECTOR, ("vector_busy_us", "aiv_time_us"))):
        col = next((c for c in cols if c in rows and rows[c].notna().any()), None)
        if col:
            parts.append((label, float(rows[col].fillna(0).sum())))
    if rows.empty or not parts or "duration_us" not in rows:
        return empty_figure(no_counters_message(
            rows, "per-side core times (aicore_time / aiv_time)", "collect any aic_metrics group"
        ))
    wall = float(rows["duration_us"].fillna(0).sum())
    fig = go.Figure()
    for label, value in parts:
        fig.add_trace(
            go.Bar(
                name=label,
                x=[value],
                y=[label],
                orientation="h",
                marker_color=COLOURS[label],
                text=[format_us(value)],
                textposition="auto",
                hovertemplate=f"{label}: %{{x:,.1f}} µs<extra></extra>",
            )
        )
    fig.add_vline(
        x=wall,
        line=dict(color="#333", dash="dash"),
        annotation_text=f"wall time {format_us(wall)}",
        annotation_position="top",
    )
    fig.update_xaxes(title_text="busy time (µs, summed over launches)", automargin=True)
    fig.update_yaxes(automargin=True)
    fig.update_layout(showlegend=False)
    return apply_layout(fig, "Cube / Vector split", 200)


def bandwidth_figure(rows: pd.DataFrame, chip: ChipSpec) -> go.Figure:
    """Measured GM bandwidth per direction against the chip's HBM figure (marked if assumed).

    Only counters of traffic to or from GM are comparable with the HBM line; on-chip buffer
    bandwidths (L0/L1/UB, MTE active rates) are left out of this chart.
    """
    cols = [c for c in rows.columns if c.endswith("_gbps") and _is_gm_counter(c) and rows[c].notna().any()]
    if rows.empty or not cols:
        return empty_figure(no_counters_message(rows, "bandwidth counters", "collect aic_metrics=Memory"))
    values = [float(rows[c].mean()) for c in cols]
    fig = go.Figure(
        go.Bar(
            x=[_bw_label(c) for c in cols],
            y=values,
            # reads and GM-to-UB are MTE2 traffic (data in), the rest MTE3 (data out)
            marker_color=[COLOURS["MTE2"] if "read" in c or "gm_to" in c else COLOURS["MTE3"] for c in cols],
            hovertemplate="%{x}: %{y:,.1f} GB/s<extra></extra>",
        )
    )
    if chip.hbm_bandwidth_gbps:
        fig.add_hline(
            y=chip.hbm_bandwidth_gbps,
            line=dict(color="#c0392b", dash="dash"),
            annotation_text=f"{chip.name} GM {chip.hbm_bandwidth_gbps:,.0f} GB/s ({chip.hbm_note})",
        )
    fig.update_yaxes(title_text="bandwidth (GB/s)", automargin=True)
    fig.update_xaxes(title_text="counter", automargin=True)
    return apply_layout(fig, "GM bandwidth vs the chip's GM bandwidth", 300)


def _is_gm_counter(column: str) -> bool:
    # Example: aic_main_mem_read_gbps, aiv_gm_to_ub_gbps, aiv_ub_to_gm_gbps (not aiv_ub_read_vector_gbps)
    words = column.removesuffix("_gbps").split("_")
    return "gm" in words or "main" in words


def _bw_label(column: str) -> str:
    """`aic_main_mem_read_gbps` → `AIC GM read` (the profiler's 'main memory' is GM/HBM)."""
    words = column.removesuffix("_gbps").split("_")
    side = words[0].upper() if words[0] in ("aic", "aiv") else words[0]
    rest = " ".join(words[1:]).replace("main mem", "GM")
    return f"{side} {rest}".strip()


def block_heatmap_figure(blocks: pd.DataFrame, kernel_rows: pd.DataFrame | None = None) -> go.Figure:
    """Per-block busy time, block × cube0/vector0/vector1 (msprof op), with the imbalance ratio;
    `kernel_rows`: the kernel's launches, which say why there is none."""
    if blocks is None or blocks.empty or "block_id" not in blocks or "sub_block_id" not in blocks:
        return empty_figure(
            no_counters_message(kernel_rows, "per-block data", "run `msprof op` on it for the block heatmap")
        )
    metric = next(
        (
            c
            for c in ("duration_us", "aic_time_us", "aiv_time_us", "aic_total_cycles")
            if c in blocks and blocks[c].notna().any()
        ),
        None,
    )
    value = blocks[metric].astype("float64") if metric else pd.Series(np.nan, index=blocks.index)
    if "aic_time_us" in blocks and "aiv_time_us" in blocks:
        # Each sub-block row carries the time of its own side: cube0 rows the AIC, vector rows the AIV.
        is_cube = blocks["sub_block_id"].astype(str).str.startswith("cube")
        value = blocks["aic_time_us"].where(is_cube, blocks["aiv_time_us"]).astype("float64")
        metric = "core time_us"
    launches = int(blocks["launch"].nunique()) if "launch" in blocks else 1
    table = pd.DataFrame(
        {"block": blocks["block_id"].astype("int64"), "sub": blocks["sub_block_id"].astype(str), "v": value}
    )
    grid = table.pivot_table(index="sub", columns="block", values="v", aggfunc="mean")
    grid = grid.reindex(sorted(grid.index, key=lambda s: (not s.startswith("cube"), s)))
    flat = grid.to_numpy(dtype=float)
    mean = float(np.nanmean(flat)) if np.isfinite(flat).any() else float("nan")
    imbalance = float(np.nanmax(flat)) / mean if mean and math.isfinite(mean) else float("nan")
    unit = "µs" if metric and metric.endswith("us") else "cycles"
    fig = go.Figure(
        go.Heatmap(
            z=flat,
            x=[str(c) for c in grid.columns],
            y=[plot_text(s) for s in grid.index],
            colorscale="Blues",
            colorbar=dict(title=unit),
            hovertemplate="block %{x}, %{y}: %{z:,.2f} " + unit + "<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="block id", type="category", automargin=True)
    # cube0 on top, as msprof lists it
    fig.update_yaxes(title_text="sub-block", autorange="reversed", automargin=True)
    title = f"Per-block time — max/mean = {imbalance:.2f}" if math.isfinite(imbalance) else "Per-block time"
    if launches > 1:
        title += f" (mean of {launches} launches)"
    return apply_layout(fig, title, 260)


# --- Compare ------------------------------------------------------------------------------------


def delta_figure(deltas: pd.DataFrame, n: int = 15) -> go.Figure:
    """Largest per-kernel time changes (head − base), slower in red, faster in green."""
    if deltas.empty or "delta_us" not in deltas:
        return empty_figure("No kernels in common to compare")
    top = deltas.reindex(deltas["delta_us"].abs().sort_values(ascending=False).index).head(n)
    fig = go.Figure(
        go.Bar(
            x=top["delta_us"],
            y=_unique([plot_text(s, MAX_BAR_LABEL) for s in top["name"]]),
            orientation="h",
            marker_color=["#c0392b" if d > 0 else "#2ca02c" for d in top["delta_us"]],
            hovertemplate="%{y}: %{x:+,.1f} µs<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="time change, head − base (µs)")
    fig.update_yaxes(autorange="reversed", automargin=True)
    return apply_layout(fig, "Largest per-kernel changes", 80 + 26 * len(top))


def _unique(labels: list[str]) -> list[str]:
    """Category labels made unique (`name (2)`): the same kernel with other shapes is another bar."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out
