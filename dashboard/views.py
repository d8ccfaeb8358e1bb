"""View content builders: ProfileEntry in, Dash components and figures out (no callbacks here).

Each function is pure over the entry so that tests can call it directly and measure its payload.
All profile strings become component children (React escapes them), never HTML.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from dash import dcc, html

from tilescope.dashboard import figures as F
from tilescope.dashboard.data import ProfileEntry
from tilescope.engine import get_rule
from tilescope.text.escape import one_line
from tilescope.text.words import NO_ESTIMATE, fmt_us, num, recoverable_text, saving_phrase

# the summary's unit keys (tilescope.summary) and the label each bar gets
SHARE_LABELS = (
    ("cube", F.CUBE),
    ("vector", F.VECTOR),
    ("mte", "Data movement"),
    ("scalar", "Scalar"),
)
GRID_HEADERS = {
    "name": "Kernel",
    "op_type": "Op type",
    "core_type": "Core type",
    "stream_id": "Stream",
    "start_us": "Start (µs)",
    "duration_us": "Duration (µs)",
    "wait_us": "Wait (µs)",
    "block_dim": "Blocks",
    "mix_block_dim": "Mix blocks",
    "bound_pipe": "Bound by",
    "cube_utilization_pct": "AIC util, profiler (%)",
    "cube_share": "Cube busy",
    "vector_share": "Vector busy",
    "aic_mte1_share": "MTE1 (AIC)",
    "aic_mte2_share": "MTE2 (AIC)",
    "aic_fixpipe_share": "FixPipe",
    "aic_scalar_share": "Scalar (AIC)",
    "aiv_mte2_share": "MTE2 (AIV)",
    "aiv_mte3_share": "MTE3 (AIV)",
    "aiv_scalar_share": "Scalar (AIV)",
    "sol_pct": "Speed of light (%)",
    "sol_bound": "SOL bound",
    "achieved_gbps": "GB/s",
    "achieved_tflops": "TFLOP/s",
    "arithmetic_intensity": "FLOP/B",
    "bytes_moved": "Bytes moved",
    "launches": "Launches",
    "total_us": "Total (µs)",
    "mean_us": "Mean (µs)",
    "min_us": "Min (µs)",
    "max_us": "Max (µs)",
    "input_shapes": "Input shapes",
    "input_dtypes": "Input dtypes",
}
TEXT_COLUMNS = {"name", "op_type", "core_type", "bound_pipe", "sol_bound", "input_shapes", "input_dtypes"}
# Characters of a kernel name (or another profile string) shown in a list, a dropdown or a pane
# header; the full text is in the element's tooltip. Generated kernels can carry names thousands
# of characters long, which would otherwise push everything else off the page.
NAME_LIMIT = 120
MESSAGE_LIMIT = 600  # a finding's message, which quotes kernel names, in a one-line list item


def short(text: object, limit: int = NAME_LIMIT) -> str:
    """One line of at most `limit` characters, shortened with an ellipsis (the report's helper)."""
    return one_line(text, limit)


def shortened(text: object, limit: int = NAME_LIMIT, className: str | None = None) -> html.Span:
    """A span showing `short(text)`, with the full text as its title (tooltip) when cut."""
    full = str(text)
    shown = short(full, limit)
    extra: dict[str, Any] = {"title": full} if shown != full else {}
    if className:
        extra["className"] = className
    return html.Span(shown, **extra)


def names_span(names: Iterable[object], className: str = "kernel-name") -> html.Span:
    """Kernel names, each shortened, comma-separated; the full list as the title when one was cut."""
    full = [str(n) for n in names]
    shown = ", ".join(short(n) for n in full)
    extra: dict[str, Any] = {"title": ", ".join(full)} if any(len(n) > NAME_LIMIT for n in full) else {}
    return html.Span(shown, className=className, **extra)


def name_value(name: str) -> str:
    """The dropdown value standing for `name`: the name itself, or for a name longer than
    NAME_LIMIT its start and a digest. Dash's dropdown indexes every substring of every value for
    its search box (n²/2 strings), so a 5,000-character value freezes the browser tab."""
    if len(name) <= NAME_LIMIT:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{name[: NAME_LIMIT - 18]}…#{digest}"


def name_from_value(value: str | None, names: Iterable[str]) -> str | None:
    """The name a dropdown value stands for (inverse of `name_value`); None when none does."""
    if value is None:
        return None
    for name in names:
        if name == value or (len(name) > NAME_LIMIT and name_value(name) == value):
            return name
    return None


def name_option(name: str) -> dict[str, str]:
    """A dropdown option for a kernel name: shortened label and value, full name as its tooltip."""
    option = {"label": short(name), "value": name_value(name)}
    if len(name) > NAME_LIMIT:
        option["title"] = name
    return option


def summary_of(entry: ProfileEntry) -> dict[str, Any]:
    """The report's summary (tilescope.summary): the same numbers as every other view."""
    return dict(entry.report.get("summary") or {})


def kpi(label: str, value: str, tone: str = "") -> html.Div:
    return html.Div(
        [html.Div(value, className="kpi-value"), html.Div(label, className="kpi-label")],
        className=f"kpi {tone}".strip(),
    )


def overview_kpis(entry: ProfileEntry) -> list[html.Div]:
    s = summary_of(entry)
    busy = num(s.get("total_device_us")) or 0.0
    findings = entry.findings
    high = sum(1 for f in findings if f.get("severity") == "high")
    # The report's own combined, bounded totals (tilescope.summary), as every other view shows them
    raw_totals = s.get("findings")
    totals: dict[str, Any] = raw_totals if isinstance(raw_totals, dict) else {}
    # kernel time and idle gaps each in its own unit, as the headlines say them (words.recoverable_text)
    saving = recoverable_text(totals.get("est_recoverable_us"), totals.get("est_idle_recoverable_us"),
                              device_total=busy, wall_us=(s.get("device_time") or {}).get("wall_us"))
    return [
        kpi("device time", fmt_us(busy)),
        kpi("kernel launches", f"{len(entry.kernels):,}"),
        kpi("distinct kernels", f"{len(entry.by_name):,}"),
        kpi("findings", f"{len(findings)} ({high} high)", "warn" if high else ""),
        kpi("est. recoverable", saving or NO_ESTIMATE, "good" if saving else ""),
        kpi("chip", entry.profile.chip.name),
    ]


def busy_by_category(entry: ProfileEntry) -> dict[str, float]:
    """Busy µs per core-type category (Cube / Vector / Mix / Other), from the summary."""
    raw = summary_of(entry).get("time_by_core_type_us") or {}
    out: dict[str, float] = {}
    for core_type, us in raw.items():
        cat = F.core_category(core_type)
        label = cat if cat != F.OTHER else f"Other ({core_type})"
        out[label] = out.get(label, 0.0) + (num(us) or 0.0)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def overview_figures(entry: ProfileEntry) -> tuple[go.Figure, go.Figure, go.Figure, go.Figure]:
    shares_raw = summary_of(entry).get("shares") or {}
    shares = {label: v for key, label in SHARE_LABELS if (v := num(shares_raw.get(key))) is not None}
    return (
        F.busy_by_core_type_figure(busy_by_category(entry)),
        F.pipe_share_figure(shares),
        F.findings_by_severity_figure(entry.findings, summary_of(entry).get("findings")),
        F.top_kernels_figure(entry.by_name),
    )


def severity_badge(severity: str) -> html.Span:
    return html.Span(severity, className=f"sev sev-{severity if severity in F.SEVERITY_COLOURS else 'info'}")


def finding_item(index: int, f: dict[str, Any], kind: str, selected: bool = False) -> html.Div:
    """A clickable one-line finding, like linter output: severity, code, slug, kernel, saving."""
    return html.Div(
        [
            severity_badge(str(f.get("severity", "info"))),
            html.Span(str(f.get("code", "")), className="code"),
            html.Span(str(f.get("slug", "")), className="slug"),
            names_span(f.get("kernels", [])[:3]),
            html.Span(saving_phrase(f), className="saving"),
            html.Div(shortened(f.get("message", ""), MESSAGE_LIMIT), className="message"),
        ],
        id={"type": kind, "index": index},
        n_clicks=0,
        role="button",
        tabIndex="0",
        className="finding-item selected" if selected else "finding-item",
    )


def filter_findings(
    findings: list[dict[str, Any]], severities: list[str] | None, rules: list[str] | None
) -> list[tuple[int, dict[str, Any]]]:
    return [
        (i, f)
        for i, f in enumerate(findings)
        if (not severities or f.get("severity") in severities) and (not rules or f.get("code") in rules)
    ]


def rule_doc(code: str) -> str | None:
    try:
        info = get_rule(code)
    except Exception:  # a broken rules package must not take the findings view down
        return None
    return info.doc if info else None


MAX_EVIDENCE_ROWS = 8  # rows of a list-of-records evidence value shown before "… N more"


def _value_text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_value_text(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_value_text(v) for v in value)
    return str(value)


def evidence_value(value: Any) -> Any:
    """A scalar as text; a list of records (occurrences, kernels of a chain) as a small table."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        cols = list(
            dict.fromkeys(
                k for v in value[:MAX_EVIDENCE_ROWS] for k in v if not isinstance(v[k], dict | list)
            )
        )
        head = html.Tr([html.Th(c) for c in cols])
        body = [
            html.Tr([html.Td(_value_text(v.get(c, ""))) for c in cols]) for v in value[:MAX_EVIDENCE_ROWS]
        ]
        more = len(value) - MAX_EVIDENCE_ROWS
        table = html.Table([html.Thead(head), html.Tbody(body)], className="evidence-sub")
        return [table, html.Div(f"… {more} more", className="muted")] if more > 0 else table
    return _value_text(value)


def finding_detail(f: dict[str, Any] | None) -> list[Any]:
    """What, how much, what to do, then the evidence, locations and the rule's documentation."""
    if not f:
        return [
            html.Div(
                "Select a finding to see its evidence, recommendation and rule documentation.",
                className="muted",
            )
        ]
    evidence = f.get("evidence") or {}
    rows = [html.Tr([html.Th(str(k)), html.Td(evidence_value(v))]) for k, v in evidence.items()]
    locs = [
        html.Li(
            f"{loc.get('stage', '')}: {loc.get('file', '')}:{loc.get('line', '')}"
            + (f" — {loc['label']}" if loc.get("label") else "")
        )
        for loc in f.get("locations", [])
    ]
    doc = rule_doc(str(f.get("code", "")))
    saving = f"Saving: {saving_phrase(f)}"  # "Saving: est. 29.2 µs (66.7 %)", or static: no estimate
    buttons = html.Div(
        [
            html.Button(
                "Show in IR",
                id="f-to-ir",
                n_clicks=0,
                disabled=not locs,
                className="btn",
                title="" if locs else "this finding has no IR location (needs a bundle with ir/)",
            ),
            html.Button(
                "Open kernel", id="f-to-kernel", n_clicks=0, disabled=not f.get("kernels"), className="btn"
            ),
        ],
        className="toolbar",
    )
    out: list[Any] = [
        html.H3(
            [
                severity_badge(str(f.get("severity", "info"))),
                " ",
                str(f.get("code", "")),
                " ",
                str(f.get("slug", "")),
            ]
        ),
        html.P(str(f.get("message", "")), className="message"),
        html.Div(["Kernels: ", names_span(f.get("kernels", []))]),
        html.Div(saving, className="saving"),
        html.H4("Recommendation"),
        html.P(str(f.get("recommendation", "")) or "—", className="recommendation"),
        buttons,
        html.H4("Evidence"),
        html.Table(html.Tbody(rows), className="evidence") if rows else html.Div("—"),
    ]
    if locs:
        out += [html.H4("Locations"), html.Ul(locs)]
    if doc:
        # Rule docstrings are ours (rules/*.py), Markdown without raw HTML.
        out += [html.H4("Rule documentation"), dcc.Markdown(doc, className="rule-doc")]
    return out


def column_defs(entry: ProfileEntry, grouped: bool) -> list[dict[str, Any]]:
    cols = entry.group_columns if grouped else entry.grid_columns
    defs = []
    for c in cols:
        d: dict[str, Any] = {"field": c, "headerName": GRID_HEADERS.get(c, c), "headerTooltip": c}
        if c in TEXT_COLUMNS:
            d["filter"] = "agTextColumnFilter"
            d["filterParams"] = {
                "filterOptions": ["contains", "notContains", "equals", "startsWith", "endsWith"],
                "maxNumConditions": 1,
            }
        else:
            d["filter"] = "agNumberColumnFilter"
            d["filterParams"] = {
                "filterOptions": ["greaterThan", "lessThan", "inRange", "equals"],
                "maxNumConditions": 1,
            }
            d["type"] = "rightAligned"
        if c.endswith("_share"):
            # shares are 0-1 of the launch (tilescope.metrics); shown as % with the report's rounding
            d["valueFormatter"] = {
                "function": "params.value == null ? '' : (100 * params.value).toFixed(1) + ' %'"
            }
            d["headerTooltip"] = f"{c}: busy time per core as a share of the launch"
        if c == "name":
            d.update(pinned="left", width=300, cellClass="kernel-link", tooltipField="name")
        defs.append(d)
    return defs


MAX_KERNEL_OPTIONS = 300  # the detail picker lists the kernels worth time; the grid reaches the rest


def kernel_options(entry: ProfileEntry, selected: str | None) -> list[dict[str, str]]:
    names = [str(n) for n in entry.by_name["name"].head(MAX_KERNEL_OPTIONS)]
    if selected and selected not in names:
        names.insert(0, selected)
    return [name_option(n) for n in names]


def kernel_of_value(entry: ProfileEntry, value: str | None) -> str | None:
    """The kernel name a Kernel-detail dropdown value stands for (see `name_value`); None when it
    stands for none of this profile's kernels (the view then asks to pick one)."""
    if value is None:
        return None
    names = entry.by_name["name"].astype(str)
    if (names == value).any():
        return value
    return name_from_value(value, names[names.str.len() > NAME_LIMIT])


def kernel_rows(entry: ProfileEntry, name: str | None) -> pd.DataFrame:
    if not name:
        return entry.kernels.iloc[0:0]
    return entry.kernels[entry.kernels["name"] == name]


SCOPES = {
    "all": "all launches",
    "slowest": "slowest launch",
    "median": "median launch",
    "fastest": "fastest launch",
}


def scoped_rows(entry: ProfileEntry, name: str | None, scope: str = "all") -> tuple[pd.DataFrame, str]:
    """The launches of a kernel the detail view shows: all of them, or one picked by duration."""
    rows = kernel_rows(entry, name)
    if scope == "all" or rows.empty or "duration_us" not in rows:
        return rows, name or ""
    ordered = rows.sort_values("duration_us", kind="stable")
    pick = {"fastest": 0, "median": (len(ordered) - 1) // 2, "slowest": len(ordered) - 1}[scope]
    one = ordered.iloc[[pick]]
    return one, f"{name} — {SCOPES[scope]} ({float(one['duration_us'].iloc[0]):,.1f} µs)"


def kernel_blocks(entry: ProfileEntry, name: str | None) -> pd.DataFrame:
    """msprof op per-block rows of this kernel (empty when the profile has none for it)."""
    blocks = entry.profile.blocks
    if blocks is None or name is None:
        return pd.DataFrame()
    col = next((c for c in ("name", "op_name") if c in blocks), None)
    if col is None:
        return blocks  # a single-operator run: every block row is this kernel's
    return blocks[blocks[col].astype(str) == name]


def detail_figures(entry: ProfileEntry, name: str | None, scope: str = "all") -> tuple[go.Figure, ...]:
    rows, title = scoped_rows(entry, name, scope)
    return (
        F.pipe_ratio_figure(rows, title),
        F.cube_vector_split_figure(rows),
        F.bandwidth_figure(rows, entry.profile.chip),
        F.block_heatmap_figure(kernel_blocks(entry, name), rows),
    )


def roofline_points(entry: ProfileEntry) -> pd.DataFrame:
    """Per kernel: FLOPs, bytes and time over its launches that have both (one roofline point)."""
    pts = entry.by_name
    if "roof_flops" not in pts:
        return pts
    return pts.assign(flops=pts["roof_flops"], bytes_moved=pts["roof_bytes"], total_us=pts["roof_us"])


def finding_label(f: dict[str, Any]) -> str:
    kernels = ", ".join(short(k) for k in f.get("kernels", [])[:2])
    return short(f"{f.get('code', '')} {f.get('slug', '')} — {kernels}", 2 * NAME_LIMIT)


def chip_info(entry: ProfileEntry) -> list[Any]:
    chip = entry.profile.chip
    peak = chip.peak_flops("float16")
    parts = [html.Span(chip.name, className="chip-name")]
    if peak:
        parts.append(
            html.Span(
                f"{chip.aic_count} Cube / {chip.aiv_count} Vector cores · {peak / 1e12:,.0f} TFLOP/s FP16"
            )
        )
    if chip.assumptions:
        parts.append(html.Span("assumptions", title="\n".join(chip.assumptions), className="assume"))
    return parts
