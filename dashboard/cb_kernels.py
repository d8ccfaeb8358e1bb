"""The Kernels tab's callbacks: the grid's shape for the mode and search, and its rows, paged on
the server (tilescope.dashboard.query.kernel_page)."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State
from dash.exceptions import PreventUpdate

from tilescope.dashboard import views as V
from tilescope.dashboard.cb_common import active, entry_of
from tilescope.dashboard.data import DataStore
from tilescope.dashboard.layout import kernel_grid, shown_id
from tilescope.dashboard.query import kernel_page


def register(app: dash.Dash, store: DataStore) -> None:
    @app.callback(
        Output("k-grid-box", "children"),
        Input("profile", "value"),
        Input("k-mode", "value"),
        Input("k-search", "value"),
        Input(shown_id("kernels"), "data"),
    )
    def on_grid_shape(key: str | None, mode: str, _search: str | None, tab: str) -> Any:
        # The grid is rebuilt (not just re-fed) so the infinite cache restarts for the new query.
        active(tab, "kernels")
        entry = entry_of(store, key)
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
        entry = entry_of(store, key)
        response = kernel_page(entry, request, search, grouped=mode == "grouped")  # validates both
        unit = "kernels" if mode == "grouped" else "launches"
        total = len(entry.by_name) if mode == "grouped" else len(entry.kernels)
        return response, f"{response['rowCount']:,} of {total:,} {unit} match"
