"""The page: a header with the profile picker, then one tab per view. Static structure only.

Ids are the contract with the callbacks (callbacks.py and its cb_<tab>.py modules). Every view's
content is filled by a callback that runs when its tab is shown, so opening the app on a large
profile does not compute eight views at once.
"""

from __future__ import annotations

from typing import Any

import dash_ag_grid as dag
from dash import dcc, html

from tilescope.dashboard.ranks import DEFAULT_LINK_VALUE, DEFAULT_METRIC, LINK_VALUES, STEP_METRICS
from tilescope.dashboard.views import SCOPES
from tilescope.findings import SEVERITIES

TABS = (
    ("overview", "Overview"),
    ("kernels", "Kernels"),
    ("detail", "Kernel detail"),
    ("roofline", "Roofline"),
    ("timeline", "Timeline"),
    ("findings", "Findings"),
    ("ir", "IR"),
    ("compare", "Compare"),
)
# Shown after Overview only when a served path holds several ranks (build_layout's `runs`).
RANKS_TAB = ("ranks", "Ranks")
# Every view that has a tab. A view's callbacks take "my tab is shown" from a store of its own
# (`shown_id`), which one clientside callback (cb_tabs) sets when the tab is picked and clears when
# another is: a tab switch then sends the server the shown view's callbacks, not every view's.
VIEW_NAMES = (*(value for value, _ in TABS), RANKS_TAB[0])


def shown_id(view: str) -> str:
    """The store holding `view` while its tab is shown, None otherwise."""
    return f"shown-{view}"

GRAPH_CONFIG: dict[str, Any] = {
    "displaylogo": False,
    "responsive": True,
    "showTips": False,  # the "double-click to zoom back out" toast covers the tabs
    "toImageButtonOptions": {"format": "png", "scale": 2},
}


def graph(graph_id: str, **kw: Any) -> dcc.Graph:
    return dcc.Graph(id=graph_id, config=GRAPH_CONFIG, **kw)  # type: ignore[arg-type]


def _overview() -> html.Div:
    return html.Div(
        [
            html.Div(id="ov-kpis", className="kpis"),
            html.Div(
                [
                    html.Div([graph("ov-core"), graph("ov-shares")], className="col"),
                    html.Div(
                        [graph("ov-sev"), html.Div(id="ov-findings", className="finding-list compact")],
                        className="col",
                    ),
                ],
                className="row",
            ),
            html.Div(graph("ov-top"), className="card"),
        ],
        className="view",
    )


def _kernels() -> html.Div:
    return html.Div(
        [
            html.Div(
                [
                    dcc.RadioItems(
                        id="k-mode",
                        value="launches",
                        inline=True,
                        className="radio",
                        options=[
                            {"label": "every launch", "value": "launches"},
                            {"label": "grouped by kernel name", "value": "grouped"},
                        ],
                    ),
                    dcc.Input(
                        id="k-search",
                        type="search",
                        placeholder="search kernel name or op type…",
                        debounce=0.3,
                        className="search",
                    ),
                    html.Span(id="k-count", className="muted"),
                ],
                className="toolbar",
            ),
            html.Div(id="k-grid-box", children=kernel_grid([], "launches")),
            html.Div(
                "Click a kernel name to open its detail. Sorting, filtering and paging run on the server.",
                className="muted small",
            ),
        ],
        className="view",
    )


def kernel_grid(column_defs: list[dict[str, Any]], mode: str) -> dag.AgGrid:
    """The Kernels grid in infinite row model: the server sends only the rows in view."""
    return dag.AgGrid(
        id="k-grid",
        rowModelType="infinite",
        columnDefs=column_defs,
        defaultColDef={
            "sortable": True,
            "filter": True,
            "resizable": True,
            "floatingFilter": True,
            "minWidth": 90,
        },
        dashGridOptions={
            "cacheBlockSize": 100,
            "maxBlocksInCache": 20,
            "rowBuffer": 10,
            "infiniteInitialRowCount": 100,
            "suppressCellFocus": False,
            "tooltipShowDelay": 300,
        },
        style={"height": "560px", "width": "100%"},
        className="ag-theme-alpine",
    )


def _detail() -> html.Div:
    return html.Div(
        [
            html.Div(
                [
                    html.Label("Kernel", htmlFor="d-kernel"),
                    dcc.Dropdown(id="d-kernel", clearable=False, searchable=True, className="wide-dd"),
                    dcc.RadioItems(
                        id="d-scope",
                        value="all",
                        inline=True,
                        className="radio",
                        options=[{"label": v, "value": k} for k, v in SCOPES.items()],
                    ),
                ],
                className="toolbar",
            ),
            html.Div(id="d-info", className="kpis"),
            html.Div(
                [
                    html.Div(graph("d-pipes"), className="col"),
                    html.Div([graph("d-split"), graph("d-bw")], className="col"),
                ],
                className="row",
            ),
            html.Div(graph("d-blocks"), className="card"),
            # every PMU counter the profile has for the kernel, by metric group (detail.counters_table)
            html.Div(id="d-counters", className="card"),
        ],
        className="view",
    )


def _findings() -> html.Div:
    return html.Div(
        [
            html.Div(
                [
                    html.Label("Severity"),
                    dcc.Dropdown(
                        id="f-sev",
                        multi=True,
                        placeholder="all",
                        className="dd",
                        options=[{"label": s, "value": s} for s in SEVERITIES],
                    ),
                    html.Label("Rule"),
                    dcc.Dropdown(id="f-rule", multi=True, placeholder="all", className="dd"),
                    html.Span(id="f-count", className="muted"),
                ],
                className="toolbar",
            ),
            html.Div(
                [
                    html.Div(id="f-list", className="finding-list col-narrow"),
                    html.Div(id="f-detail", className="finding-detail col-wide"),
                ],
                className="row",
            ),
        ],
        className="view",
    )


def _ir() -> html.Div:
    return html.Div(
        [
            html.Div(
                [
                    html.Label("Finding", htmlFor="ir-finding"),
                    dcc.Dropdown(
                        id="ir-finding",
                        clearable=True,
                        placeholder="pick a finding to mark its lines",
                        className="wide-dd",
                    ),
                    html.Label("Kernel", htmlFor="ir-kernel"),
                    dcc.Dropdown(id="ir-kernel", clearable=False, className="dd"),
                ],
                className="toolbar",
            ),
            # both filled by dashboard/assets/ir_view.js from the ir-data store
            html.Div(id="ir-info", className="muted", role="status"),
            html.Div(id="ir-panes", className="ir-panes"),
        ],
        className="view",
    )


def _compare() -> html.Div:
    return html.Div(
        [
            html.Div(
                [
                    html.Label("Base"),
                    dcc.Dropdown(id="c-base", className="dd wide"),
                    html.Label("Head"),
                    dcc.Dropdown(id="c-head", className="dd wide"),
                ],
                className="toolbar",
            ),
            # `diff --match`: two different kernels compared with each other (a TileLang kernel and
            # the vendor's operator on the same shapes); only that pair is compared then
            html.Div(
                [
                    html.Label("Pair", htmlFor="c-match-base"),
                    dcc.Dropdown(id="c-match-base", placeholder="a base kernel", className="dd wide"),
                    html.Span("with", className="muted"),
                    dcc.Dropdown(id="c-match-head", placeholder="a head kernel", className="dd wide"),
                    html.Span(
                        "(both set: only this pair is compared, as diff --match)", className="muted small"
                    ),
                ],
                className="toolbar",
            ),
            html.Div(id="c-kpis", className="kpis"),
            html.Div(
                [html.Div(graph("c-delta"), className="col"), html.Div(id="c-findings", className="col")],
                className="row",
            ),
            dag.AgGrid(
                id="c-grid",
                rowData=[],
                columnDefs=[],
                className="ag-theme-alpine",
                defaultColDef={"sortable": True, "filter": True, "resizable": True},
                dashGridOptions={"pagination": True, "paginationPageSize": 50},
                style={"height": "360px", "width": "100%"},
            ),
            # one kernel's PMU counters, base beside head (cb_compare.on_compare_counters)
            html.Div(
                [
                    html.Div(
                        [
                            html.Label("Counters of", htmlFor="c-counter-kernel"),
                            dcc.Dropdown(
                                id="c-counter-kernel",
                                placeholder="a kernel of both runs",
                                className="dd wide",
                            ),
                            html.Span("(a Pair above, when set, is the one shown)", className="muted small"),
                        ],
                        className="toolbar",
                    ),
                    html.Div(id="c-counters"),
                ],
                className="card",
            ),
        ],
        className="view",
    )


def _ranks(runs: list[dict[str, str]]) -> html.Div:
    """The Ranks tab: which run (a served path of several ranks), its rank table and cross-rank
    findings, the rank x step heatmap and the communication matrix (cb_ranks.on_ranks, on_rank_*)."""
    return html.Div(
        [
            html.Div(
                [
                    html.Label("Run", htmlFor="r-run"),
                    dcc.Dropdown(id="r-run", options=runs, value=runs[0]["value"] if runs else None,
                                 clearable=False, className="dd wide"),
                ],
                className="toolbar",
            ),
            html.Div(id="r-info", className="muted"),
            html.Div(
                [
                    html.Div(id="r-table", className="col rank-table-box"),
                    html.Div(id="r-findings", className="col finding-list compact"),
                ],
                className="row",
            ),
            _chooser_card("r-metric", DEFAULT_METRIC, STEP_METRICS, "r-heatmap"),
            _chooser_card("r-link-value", DEFAULT_LINK_VALUE, LINK_VALUES, "r-matrix"),
            html.Div("Click a rank (a table row, a heatmap row or a matrix row) to open it in the "
                     "other tabs.", className="muted small"),
        ],
        className="view",
    )


VIEWS = {
    "overview": _overview,
    "kernels": _kernels,
    "detail": _detail,
    "roofline": lambda: html.Div(
        [graph("roofline"), html.Div(id="roofline-note", className="muted small")], className="view"
    ),
    "timeline": lambda: html.Div(
        [
            html.Div(
                [
                    html.Span(id="tl-info"),
                    " ",
                    # a plain link: the server streams the file (cb_timeline, timeline_export)
                    html.A("Export as Chrome trace (Perfetto, MindStudio Insight)", id="tl-export", href="",
                           download=""),
                ],
                className="muted small",
            ),
            graph("timeline"),
        ],
        className="view",
    ),
    "findings": _findings,
    "ir": _ir,
    "compare": _compare,
}


def _chooser_card(radio_id: str, value: str, choices: dict[str, str], graph_id: str) -> html.Div:
    """A card of one figure with the quantity it shows chosen above it (the Ranks tab's heatmap
    and communication matrix)."""
    radio = dcc.RadioItems(id=radio_id, value=value, inline=True, className="radio",
                           options=[{"label": v, "value": k} for k, v in choices.items()])
    return html.Div([html.Div(radio, className="toolbar"), graph(graph_id)], className="card")


def build_layout(
    options: list[dict[str, str]], initial: str | None, runs: list[dict[str, str]] | None = None
) -> html.Div:
    """`runs`: the served paths holding several ranks (label, key); with none there is no Ranks tab."""
    tabs = [(value, label, VIEWS[value]) for value, label in TABS]
    if runs:
        tabs.insert(1, (*RANKS_TAB, lambda: _ranks(runs)))
    return html.Div(
        [
            html.Header(
                [
                    html.Div(
                        [
                            html.Span("tilescope", className="brand"),
                            html.Span("TileLang on Ascend — profile diagnosis", className="tagline"),
                        ]
                    ),
                    html.Div(
                        [
                            html.Label("Profile", htmlFor="profile"),
                            dcc.Dropdown(
                                id="profile",
                                options=options,
                                value=initial,
                                clearable=False,
                                className="profile-dd",
                            ),
                        ],
                        className="picker",
                    ),
                    html.Div(id="chip-info", className="chip-info"),
                ],
                className="header",
            ),
            html.Div(id="load-error", className="error", role="alert"),
            dcc.Store(id="finding-sel"),
            dcc.Store(id="tl-window"),  # the timeline's last drawn x window (see cb_timeline.on_timeline)
            # the IR panes as data (cb_ir.on_ir), outside the tabs so they outlive a tab switch,
            # and which profile, finding and kernel they were made for
            dcc.Store(id="ir-data"),
            dcc.Store(id="ir-shown"),
            # what the findings list was last drawn for (cb_findings.on_findings): showing the tab
            # again redraws nothing, so a click on an item is never lost to a redraw of the same list
            dcc.Store(id="f-list-shown"),
            *[dcc.Store(id=shown_id(view)) for view in VIEW_NAMES],
            dcc.Tabs(
                id="tabs",
                value="overview",
                className="tabs",
                children=[
                    dcc.Tab(
                        label=label,
                        value=value,
                        children=make(),
                        className="tab",
                        selected_className="tab--selected",
                    )
                    for value, label, make in tabs
                ],
            ),
        ],
        className="app",
    )
