"""The Compare tab's callbacks: the base and head pickers (kept when still served), and the
comparison of the two (tilescope.dashboard.compare)."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, html
from dash.exceptions import PreventUpdate

from tilescope.dashboard import compare as C
from tilescope.dashboard import figures as F
from tilescope.dashboard.cb_common import active, entry_of
from tilescope.dashboard.data import DataStore
from tilescope.errors import TilescopeError


def register(app: dash.Dash, store: DataStore) -> None:
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
        active(tab, "compare")
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
        active(tab, "compare")
        if not base_key or not head_key:
            raise PreventUpdate
        try:
            result = C.compare_entries(entry_of(store, base_key), entry_of(store, head_key))
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
