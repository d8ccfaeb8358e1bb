"""Thin callbacks: read the request, ask the store / views, return components. No logic of their own.

A view's callback runs only when its tab is visible (`_active`), so switching profiles on a large
run computes one view, not eight. Every value a callback receives is checked (tilescope.dashboard.inputs,
the store's key check, the grid request parser) before use: a malformed one raises UsageError,
which the app answers with a quiet 400 (tilescope.dashboard.guard), never a 500.
"""

from __future__ import annotations

from typing import Any

import dash
from dash import ALL, ClientsideFunction, Input, Output, State, ctx, html, no_update
from dash.exceptions import PreventUpdate

from tilescope.dashboard import compare as C
from tilescope.dashboard import figures as F
from tilescope.dashboard import inputs
from tilescope.dashboard import ranks as R
from tilescope.dashboard import views as V
from tilescope.dashboard.data import ClusterEntry, DataStore, ProfileEntry
from tilescope.dashboard.figures_roofline import roofline_figure
from tilescope.dashboard.figures_timeline import timeline_figure
from tilescope.dashboard.ir_view import (
    ir_kernels,
    kernel_of_locations,
    load_stages,
    mark_locations,
    stage_data,
)
from tilescope.dashboard.layout import kernel_grid
from tilescope.dashboard.query import build_lanes, kernel_page, timeline_gap, timeline_window
from tilescope.errors import TilescopeError, UsageError


def _entry(store: DataStore, key: str | None) -> ProfileEntry:
    entry = store.get(key)
    if entry is None:
        raise PreventUpdate
    return entry


def _active(tab: str, wanted: str) -> None:
    if tab != wanted:
        raise PreventUpdate


def _finding(entry: ProfileEntry, sel: object) -> dict[str, Any] | None:
    """The selected finding; None when nothing (or an index past this profile's list) is selected,
    as after switching to a profile with fewer findings."""
    i = inputs.index(sel, "selected finding")
    return entry.findings[i] if i is not None and i < len(entry.findings) else None


def _run(store: DataStore, key: object) -> ClusterEntry:
    """The Ranks tab's run; an unknown key (any JSON a request sends) is a UsageError (a 400), and
    a root run that escapes the roots or cannot be loaded raises the store's typed error."""
    if key is None:
        raise PreventUpdate
    entry = store.cluster(key)
    if entry is None:
        raise UsageError("run: expected one of the served multi-rank paths")
    return entry


def _run_or_message(store: DataStore, key: object) -> ClusterEntry | str:
    """The run, or the one line the tab shows instead (as the picker's "Cannot open this
    profile"): a root run is loaded on first pick and may fail as a profile does."""
    try:
        return _run(store, key)
    except TilescopeError as exc:
        return f"Cannot open this run: {exc.one_line()}"


def register(app: dash.Dash, store: DataStore) -> None:
    @app.callback(
        Output("chip-info", "children"),
        Output("load-error", "children"),
        Output("d-kernel", "options", allow_duplicate=True),
        Output("d-kernel", "value", allow_duplicate=True),
        Input("profile", "value"),
        prevent_initial_call="initial_duplicate",
    )
    def on_profile(key: str | None) -> tuple[Any, ...]:
        try:
            entry = store.get(key)
        except TilescopeError as exc:  # a bad pick shows one line; the app keeps serving
            return [], f"Cannot open this profile: {exc.one_line()}", [], None
        if entry is None:
            return [], "No profile loaded: pass a path or --root to `tilescope serve`.", [], None
        top = str(entry.by_name["name"].iloc[0]) if len(entry.by_name) else None
        return V.chip_info(entry), "", V.kernel_options(entry, top), V.name_value(top) if top else None

    @app.callback(
        Output("ov-kpis", "children"),
        Output("ov-core", "figure"),
        Output("ov-shares", "figure"),
        Output("ov-sev", "figure"),
        Output("ov-top", "figure"),
        Output("ov-findings", "children"),
        Input("profile", "value"),
        Input("tabs", "value"),
    )
    def on_overview(key: str | None, tab: str) -> tuple[Any, ...]:
        _active(tab, "overview")
        entry = _entry(store, key)
        core, shares, sev, top = V.overview_figures(entry)
        items = [V.finding_item(i, f, "ov-finding") for i, f in enumerate(entry.findings[:6])]
        if not items:
            items = [html.Div("No findings.", className="muted")]
        return V.overview_kpis(entry), core, shares, sev, top, [html.H4("Top findings"), *items]

    # --- Kernels ----------------------------------------------------------------------------
    @app.callback(
        Output("k-grid-box", "children"),
        Input("profile", "value"),
        Input("k-mode", "value"),
        Input("k-search", "value"),
        Input("tabs", "value"),
    )
    def on_grid_shape(key: str | None, mode: str, _search: str | None, tab: str) -> Any:
        # The grid is rebuilt (not just re-fed) so the infinite cache restarts for the new query.
        _active(tab, "kernels")
        entry = _entry(store, key)
        return kernel_grid(V.column_defs(entry, mode == "grouped"), mode)

    @app.callback(
        Output("k-grid", "getRowsResponse"),
        Output("k-count", "children"),
        Input("k-grid", "getRowsRequest"),
        State("profile", "value"),
        State("k-mode", "value"),
        State("k-search", "value"),
    )
    def on_rows(
        request: dict[str, Any] | None, key: str | None, mode: str, search: str | None
    ) -> tuple[Any, str]:
        if not request:
            raise PreventUpdate
        entry = _entry(store, key)
        response = kernel_page(entry, request, search, grouped=mode == "grouped")  # validates both
        unit = "kernels" if mode == "grouped" else "launches"
        total = len(entry.by_name) if mode == "grouped" else len(entry.kernels)
        return response, f"{response['rowCount']:,} of {total:,} {unit} match"

    # Whoever sets the kernel also sets the options: a Dash 4 dropdown drops a value that is
    # not among its options at the time it arrives.
    @app.callback(
        Output("d-kernel", "options", allow_duplicate=True),
        Output("d-kernel", "value", allow_duplicate=True),
        Output("tabs", "value", allow_duplicate=True),
        Input("k-grid", "cellClicked"),
        Input("roofline", "clickData"),
        Input("ov-top", "clickData"),
        State("profile", "value"),
        prevent_initial_call=True,
    )
    def on_open_kernel(
        cell: dict[str, Any] | None, roof: dict[str, Any] | None, top: dict[str, Any] | None, key: str | None
    ) -> tuple[Any, Any, Any]:
        if ctx.triggered_id == "k-grid":
            clicked = inputs.mapping(cell, "grid cell") or {}
            if clicked.get("colId") != "name" or not clicked.get("value"):
                raise PreventUpdate
            picked = clicked["value"]
        else:
            click = inputs.mapping(roof if ctx.triggered_id == "roofline" else top, "chart click") or {}
            points = click.get("points") or []
            if not isinstance(points, list):
                raise UsageError("chart click: expected a list of points")
            point = inputs.mapping(points[0], "chart point") if points else None
            picked = point.get("customdata") if point else None
            if not picked:
                raise PreventUpdate
        name = inputs.text(picked, "kernel name") or ""
        return V.kernel_options(_entry(store, key), name), V.name_value(name), "detail"

    # --- Kernel detail ----------------------------------------------------------------------
    @app.callback(
        Output("d-info", "children"),
        Output("d-pipes", "figure"),
        Output("d-split", "figure"),
        Output("d-bw", "figure"),
        Output("d-blocks", "figure"),
        Input("profile", "value"),
        Input("d-kernel", "value"),
        Input("d-scope", "value"),
        Input("tabs", "value"),
    )
    def on_detail(key: str | None, name: str | None, scope: str | None, tab: str) -> tuple[Any, ...]:
        _active(tab, "detail")
        entry = _entry(store, key)
        name = V.kernel_of_value(entry, inputs.text(name, "kernel name"))
        scope = inputs.choice(scope, V.SCOPES, "launch scope")
        return (V.detail_kpis(entry, name), *V.detail_figures(entry, name, scope or "all"))

    # --- Roofline and timeline ---------------------------------------------------------------
    @app.callback(
        Output("roofline", "figure"),
        Output("roofline-note", "children"),
        Input("profile", "value"),
        Input("tabs", "value"),
    )
    def on_roofline(key: str | None, tab: str) -> tuple[Any, str]:
        _active(tab, "roofline")
        entry = _entry(store, key)
        chip = entry.profile.chip
        note = "Click a point to open that kernel. " + (
            "Dashed/dotted ceilings are configured assumptions: " + "; ".join(chip.assumptions)
            if chip.assumptions
            else ""
        )
        return roofline_figure(V.roofline_points(entry), chip), note

    @app.callback(
        Output("timeline", "figure"),
        Output("tl-info", "children"),
        Output("tl-window", "data"),
        Input("profile", "value"),
        Input("tabs", "value"),
        Input("timeline", "relayoutData"),
        State("tl-window", "data"),
    )
    def on_timeline(
        key: str | None, tab: str, relayout: dict[str, Any] | None, last: list[float] | None
    ) -> tuple[Any, str, list[float] | None]:
        _active(tab, "timeline")
        entry = _entry(store, key)
        lanes = _lanes(entry)
        if not lanes:
            # the reason in words above the plot (an annotation does not wrap), a pointer in it
            empty = F.empty_figure("Nothing to place on a timeline: see the note above")
            return empty, timeline_gap(entry), None
        x0, x1 = _x_window(relayout, last) if ctx.triggered_id == "timeline" else (None, None)
        seg = timeline_window(lanes, x0, x1)
        fig = timeline_figure(
            seg.lane,
            seg.start,
            seg.end,
            seg.text,
            seg.category,
            [ln.label for ln in lanes],
            seg.merged,
            (x0, x1) if x0 is not None and x1 is not None else None,
            seg.links,
        )
        info = (
            f"{seg.total_in_window:,} segments drawn"
            + (" (merged to fit; zoom in for single kernels)" if seg.merged else "")
            + (f", {len(seg.links)} host→kernel launches linked" if seg.links else "")
            + ". Drag to zoom; double-click to reset."
        )
        return fig, info, [x0, x1] if x0 is not None and x1 is not None else None

    # --- Findings ---------------------------------------------------------------------------
    @app.callback(Output("f-rule", "options"), Input("profile", "value"))
    def on_rule_options(key: str | None) -> list[dict[str, str]]:
        entry = _entry(store, key)
        codes = sorted({f"{f.get('code')}|{f.get('slug')}" for f in entry.findings})
        return [{"label": f"{c.split('|')[0]} {c.split('|')[1]}", "value": c.split("|")[0]} for c in codes]

    @app.callback(
        Output("f-list", "children"),
        Output("f-count", "children"),
        Output("f-list-shown", "data"),
        Input("profile", "value"),
        Input("f-sev", "value"),
        Input("f-rule", "value"),
        Input("finding-sel", "data"),
        Input("tabs", "value"),
        State("f-list-shown", "data"),
    )
    def on_findings(
        key: str | None, sev: list[str] | None, rules: list[str] | None, sel: int | None, tab: str,
        drawn: Any,
    ) -> tuple[Any, str, list[Any]]:
        _active(tab, "findings")
        entry = _entry(store, key)
        sev = inputs.text_list(sev, "severity filter")
        rules = inputs.text_list(rules, "rule filter")
        sel = inputs.index(sel, "selected finding")
        # the tab shown again over the list it already holds: redrawing it would replace the items
        # under a click in flight, and that click would be lost
        now = [key, sev, rules, sel]
        if drawn == now:
            raise PreventUpdate
        shown = V.filter_findings(entry.findings, sev, rules)
        items = [V.finding_item(i, f, "f-item", selected=i == sel) for i, f in shown]
        return items or [
            html.Div("No findings match.", className="muted")
        ], f"{len(shown)} of {len(entry.findings)} findings", now

    @app.callback(
        Output("finding-sel", "data"),
        Output("tabs", "value", allow_duplicate=True),
        Input({"type": "f-item", "index": ALL}, "n_clicks"),
        Input({"type": "ov-finding", "index": ALL}, "n_clicks"),
        prevent_initial_call=True,
    )
    def on_pick_finding(_a: list[int | None], _b: list[int | None]) -> tuple[Any, Any]:
        trig = ctx.triggered_id
        if not isinstance(trig, dict) or not ctx.triggered or not ctx.triggered[0].get("value"):
            raise PreventUpdate
        index = inputs.index(trig.get("index"), "finding item")
        return index, "findings" if trig.get("type") == "ov-finding" else no_update

    @app.callback(Output("f-detail", "children"), Input("finding-sel", "data"), Input("profile", "value"))
    def on_finding_detail(sel: int | None, key: str | None) -> Any:
        return V.finding_detail(_finding(_entry(store, key), sel))

    @app.callback(
        Output("ir-finding", "value"),
        Output("tabs", "value", allow_duplicate=True),
        Input("f-to-ir", "n_clicks"),
        State("finding-sel", "data"),
        prevent_initial_call=True,
    )
    def on_to_ir(clicks: int | None, sel: int | None) -> tuple[Any, str]:
        if not clicks or sel is None:
            raise PreventUpdate
        return sel, "ir"

    @app.callback(
        Output("d-kernel", "options", allow_duplicate=True),
        Output("d-kernel", "value", allow_duplicate=True),
        Output("tabs", "value", allow_duplicate=True),
        Input("f-to-kernel", "n_clicks"),
        State("finding-sel", "data"),
        State("profile", "value"),
        prevent_initial_call=True,
    )
    def on_to_kernel(clicks: int | None, sel: int | None, key: str | None) -> tuple[Any, Any, str]:
        entry = _entry(store, key)
        finding = _finding(entry, sel)
        if not clicks or finding is None or not finding.get("kernels"):
            raise PreventUpdate
        name = str(finding["kernels"][0])
        return V.kernel_options(entry, name), V.name_value(name), "detail"

    # --- IR ---------------------------------------------------------------------------------
    @app.callback(Output("ir-finding", "options"), Input("profile", "value"))
    def on_ir_options(key: str | None) -> list[dict[str, Any]]:
        entry = _entry(store, key)
        return [
            {"label": V.finding_label(f), "value": i}
            for i, f in enumerate(entry.findings)
            if f.get("locations")
        ]

    @app.callback(
        Output("ir-kernel", "options"),
        Output("ir-kernel", "value"),
        Input("profile", "value"),
        Input("ir-finding", "value"),
        State("ir-kernel", "value"),
    )
    def on_ir_kernel(key: str | None, sel: int | None, current: str | None) -> tuple[Any, Any]:
        entry = _entry(store, key)
        names = ir_kernels(entry.profile.ir)
        finding = _finding(entry, sel)
        wanted = kernel_of_locations(entry.profile.ir, (finding or {}).get("locations", []))
        kept = V.name_from_value(inputs.text(current, "IR kernel"), names)
        value = wanted or kept or (names[0] if names else None)
        return [V.name_option(n) for n in names], V.name_value(value) if value else None

    @app.callback(
        Output("ir-data", "data"),
        Output("ir-shown", "data"),
        Input("profile", "value"),
        Input("ir-finding", "value"),
        Input("ir-kernel", "value"),
        Input("tabs", "value"),
        State("ir-shown", "data"),
    )
    def on_ir(
        key: str | None, sel: int | None, kernel: str | None, tab: str, shown: Any
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The panes as data for the page to draw (dashboard/assets/ir_view.js), sent once per
        profile, finding and kernel: back on the tab, the page redraws what it holds."""
        _active(tab, "ir")
        sel = inputs.index(sel, "selected finding")
        kernel = inputs.text(kernel, "IR kernel")
        wanted = {"profile": key, "finding": sel, "kernel": kernel}
        if ctx.triggered_id == "tabs" and shown == wanted:
            raise PreventUpdate
        entry = _entry(store, key)
        profile = entry.profile
        name = V.name_from_value(kernel, ir_kernels(profile.ir))
        stages = load_stages(profile.ir_dir, profile.ir, name, store.roots)
        if not stages:
            info = "No IR here: `tilescope collect` or `tilescope lint --out` writes a bundle with ir/."
            return {"for": wanted, "info": info, "panes": []}, wanted
        finding = _finding(entry, sel)
        line_map = profile.ir.get("line_map") if isinstance(profile.ir, dict) else None
        mark_locations(stages, (finding or {}).get("locations", []), line_map, name)
        info = (
            f"Marked: {V.finding_label(finding)}"
            if finding
            else "Pick a finding (or use “Show in IR” on one) to mark the lines it points at."
        )
        panes = [stage_data(s, f"ir-{s.stage}") for s in stages]
        return {"for": wanted, "info": info, "panes": panes}, wanted

    # Draw the panes the server sent, or redraw them when the tab is shown again (Dash mounts only
    # the visible tab). Until the data for the selected finding and kernel arrives, the page marks
    # the panes stale rather than show another finding's lines as this one's.
    app.clientside_callback(
        ClientsideFunction("tilescope", "renderIr"),
        Output("ir-panes", "title"),
        Input("ir-data", "data"),
        Input("tabs", "value"),
        Input("ir-finding", "value"),
        Input("ir-kernel", "value"),
        Input("profile", "value"),
    )

    # --- Ranks (only in the layout when a served path or a run under a root holds several ranks) -
    @app.callback(
        Output("r-info", "children"),
        Output("r-table", "children"),
        Output("r-findings", "children"),
        Input("r-run", "value"),
        Input("profile", "value"),
        Input("tabs", "value"),
    )
    def on_ranks(run: str | None, key: str | None, tab: str) -> tuple[Any, ...]:
        _active(tab, "ranks")
        entry = _run_or_message(store, run)
        if isinstance(entry, str):
            return html.Div(entry, className="error", role="alert"), [], []
        shown = key if isinstance(key, str) else None
        return R.rank_info(entry), R.rank_table(entry, shown), R.cluster_findings(entry)

    @app.callback(Output("r-heatmap", "figure"), Input("r-run", "value"), Input("r-metric", "value"),
                  Input("tabs", "value"))
    def on_rank_heatmap(run: str | None, metric: str | None, tab: str) -> Any:
        _active(tab, "ranks")
        metric = inputs.choice(metric, R.STEP_METRICS, "heatmap quantity") or R.DEFAULT_METRIC
        entry = _run_or_message(store, run)
        return F.empty_figure(entry) if isinstance(entry, str) else R.step_heatmap_figure(entry, metric)

    @app.callback(Output("r-matrix", "figure"), Input("r-run", "value"), Input("r-link-value", "value"),
                  Input("tabs", "value"))
    def on_rank_matrix(run: str | None, value: str | None, tab: str) -> Any:
        _active(tab, "ranks")
        value = inputs.choice(value, R.LINK_VALUES, "matrix quantity") or R.DEFAULT_LINK_VALUE
        entry = _run_or_message(store, run)
        return F.empty_figure(entry) if isinstance(entry, str) else R.link_matrix_figure(entry, value)

    @app.callback(
        Output("profile", "value"),
        Output("profile", "options"),
        Output("tabs", "value", allow_duplicate=True),
        Input({"type": R.ROW_TYPE, "index": ALL}, "n_clicks"),
        Input("r-heatmap", "clickData"),
        Input("r-matrix", "clickData"),
        State("r-run", "value"),
        prevent_initial_call=True,
    )
    def on_pick_rank(
        _rows: list[int | None], heat: dict[str, Any] | None, matrix: dict[str, Any] | None, run: str | None
    ) -> tuple[str, list[dict[str, str]], str]:
        """A rank clicked in the Ranks tab: its profile in the picker (whose options now list the
        ranks of the root runs opened, which discovery does not), and the Overview shown."""
        trig = ctx.triggered_id
        if isinstance(trig, dict):  # a table row; re-rendered rows come back with n_clicks 0
            if not ctx.triggered or not ctx.triggered[0].get("value"):
                raise PreventUpdate
            rank = inputs.index(trig.get("index"), "rank row")
        else:
            click = inputs.mapping(heat if trig == "r-heatmap" else matrix, "chart click")
            rank = R.clicked_rank(click)
        profile_key = _run(store, run).rank_keys.get(rank) if rank is not None else None
        if profile_key is None:  # a left-out rank, or a rank only seen as a link's far end
            raise PreventUpdate
        return profile_key, store.options(), "overview"

    # --- Compare ----------------------------------------------------------------------------
    @app.callback(
        Output("c-base", "options"),
        Output("c-head", "options"),
        Output("c-base", "value"),
        Output("c-head", "value"),
        Input("tabs", "value"),
        State("c-base", "value"),
        State("c-head", "value"),
    )
    def on_compare_options(tab: str, base: str | None, head: str | None) -> tuple[Any, ...]:
        _active(tab, "compare")
        opts = store.options()
        keys = [o["value"] for o in opts]
        base = base if base in keys else (keys[0] if keys else None)
        head = head if head in keys else (keys[1] if len(keys) > 1 else base)
        return opts, opts, base, head

    @app.callback(
        Output("c-kpis", "children"),
        Output("c-delta", "figure"),
        Output("c-findings", "children"),
        Output("c-grid", "rowData"),
        Output("c-grid", "columnDefs"),
        Input("c-base", "value"),
        Input("c-head", "value"),
        Input("tabs", "value"),
    )
    def on_compare(base_key: str | None, head_key: str | None, tab: str) -> tuple[Any, ...]:
        _active(tab, "compare")
        if not base_key or not head_key:
            raise PreventUpdate
        try:
            result = C.compare_entries(_entry(store, base_key), _entry(store, head_key))
        except TilescopeError as exc:  # e.g. an IR-only bundle has no kernel times to compare
            message = html.Div(f"Cannot compare: {exc.one_line()}", className="error")
            return [message], F.empty_figure("Nothing to compare"), [], [], C.grid_columns()
        return (
            C.compare_kpis(result),
            F.delta_figure(result.deltas),
            C.findings_changes(result),
            C.grid_rows(result),
            C.grid_columns(),
        )


def _lanes(entry: ProfileEntry) -> list[Any]:
    return list(entry.cached("lanes", lambda: build_lanes(entry, F.core_categories)))


def warm(entry: ProfileEntry) -> None:
    """Precompute what the heavier views need (runs in a daemon thread after a profile loads)."""
    try:
        entry.cursor().close()  # builds the DuckDB copy
        V.summary_of(entry)
        _lanes(entry)
        C.run_data(entry)
    except Exception:  # a failure here resurfaces, with its message, when the view asks again
        return


def _x_window(relayout: Any, last: Any) -> tuple[float | None, float | None]:
    """The x window a relayout asks for; `last` is the window drawn last (None: the whole run).

    Both come from the browser: anything but finite numbers is a UsageError (a 400).
    """
    layout = inputs.mapping(relayout, "timeline relayout")
    if not layout or layout.get("xaxis.autorange"):
        return None, None
    drawn = _pair(last, "timeline window")
    if "xaxis.range[0]" in layout or "xaxis.range[1]" in layout:
        # dragging one end of the axis moves only that end: the other is the window drawn last
        if drawn is None and not ("xaxis.range[0]" in layout and "xaxis.range[1]" in layout):
            raise PreventUpdate  # the whole run is drawn: plotly zooms it on its own
        low = layout.get("xaxis.range[0]", drawn[0] if drawn else None)
        high = layout.get("xaxis.range[1]", drawn[1] if drawn else None)
        return _pair([low, high], "timeline range") or (None, None)
    if "xaxis.range" in layout:
        return _pair(layout["xaxis.range"], "timeline range") or (None, None)
    if layout.get("autosize"):
        # plotly laid the graph out anew (shown, resized): redraw the same window. Not a
        # PreventUpdate: this request can supersede the tab's first one still in flight, whose
        # answer Dash then drops, and the timeline stayed blank (seen on a loaded machine)
        return drawn or (None, None)
    raise PreventUpdate  # y-only zoom or hover: nothing to re-query


def _pair(value: Any, what: str) -> tuple[float, float] | None:
    """`[x0, x1]` as two finite numbers in order; None for None."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise UsageError(f"{what}: expected two numbers")
    x0, x1 = inputs.number(value[0], what), inputs.number(value[1], what)
    return (x0, x1) if x0 <= x1 else (x1, x0)
