"""The Overview tab's callback: KPIs, the four charts and the top findings."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, html

from tilescope.dashboard import views as V
from tilescope.dashboard.cb_common import active, entry_of
from tilescope.dashboard.data import DataStore
from tilescope.dashboard.layout import shown_id


def register(app: dash.Dash, store: DataStore) -> None:
    @app.callback(
        Output("ov-kpis", "children"),
        Output("ov-core", "figure"),
        Output("ov-shares", "figure"),
        Output("ov-sev", "figure"),
        Output("ov-top", "figure"),
        Output("ov-findings", "children"),
        Input("profile", "value"),
        Input(shown_id("overview"), "data"),
    )
    def on_overview(key: str | None, tab: str) -> tuple[Any, ...]:
        active(tab, "overview")
        entry = entry_of(store, key)
        core, shares, sev, top = V.overview_figures(entry)
        items = [V.finding_item(i, f, "ov-finding") for i, f in enumerate(entry.findings[:6])]
        if not items:
            items = [html.Div("No findings.", className="muted")]
        return V.overview_kpis(entry), core, shares, sev, top, [html.H4("Top findings"), *items]
