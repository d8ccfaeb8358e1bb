"""The Findings tab's callbacks: the rule filter's options, the filtered list, picking an item
(there or in the Overview's top findings), its detail, and its jumps to the IR and the kernel."""

from __future__ import annotations

from typing import Any

import dash
from dash import ALL, Input, Output, State, ctx, html, no_update
from dash.exceptions import PreventUpdate

from tilescope.dashboard import inputs
from tilescope.dashboard import views as V
from tilescope.dashboard.cb_common import active, entry_of, finding_of
from tilescope.dashboard.data import DataStore
from tilescope.dashboard.layout import shown_id


def register(app: dash.Dash, store: DataStore) -> None:
    _register_list(app, store)
    _register_jumps(app, store)


def _register_list(app: dash.Dash, store: DataStore) -> None:
    @app.callback(Output("f-rule", "options"), Input("profile", "value"))
    def on_rule_options(key: str | None) -> list[dict[str, str]]:
        entry = entry_of(store, key)
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
        Input(shown_id("findings"), "data"),
        State("f-list-shown", "data"),
    )
    def on_findings(
        key: str | None, sev: list[str] | None, rules: list[str] | None, sel: int | None, tab: str,
        drawn: Any,
    ) -> tuple[Any, str, list[Any]]:
        active(tab, "findings")
        entry = entry_of(store, key)
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
        return V.finding_detail(finding_of(entry_of(store, key), sel))


def _register_jumps(app: dash.Dash, store: DataStore) -> None:
    """The selected finding's "Show in IR" and "Open kernel" buttons."""

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
        entry = entry_of(store, key)
        finding = finding_of(entry, sel)
        if not clicks or finding is None or not finding.get("kernels"):
            raise PreventUpdate
        name = str(finding["kernels"][0])
        return V.kernel_options(entry, name), V.name_value(name), "detail"
