"""The Kernel detail tab's callbacks: opening a kernel from a click elsewhere (a name in the
Kernels grid, a Roofline point, an Overview top-kernel bar), and drawing the kernel picked: its
KPIs, figures and raw counters (tilescope.dashboard.detail)."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, ctx
from dash.exceptions import PreventUpdate

from tilescope.dashboard import detail as D
from tilescope.dashboard import inputs
from tilescope.dashboard import views as V
from tilescope.dashboard.cb_common import active, entry_of
from tilescope.dashboard.data import DataStore
from tilescope.dashboard.layout import shown_id
from tilescope.errors import UsageError


def register(app: dash.Dash, store: DataStore) -> None:
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
        return V.kernel_options(entry_of(store, key), name), V.name_value(name), "detail"

    @app.callback(
        Output("d-info", "children"),
        Output("d-pipes", "figure"),
        Output("d-split", "figure"),
        Output("d-bw", "figure"),
        Output("d-blocks", "figure"),
        Output("d-counters", "children"),
        Input("profile", "value"),
        Input("d-kernel", "value"),
        Input("d-scope", "value"),
        Input(shown_id("detail"), "data"),
    )
    def on_detail(key: str | None, name: str | None, scope: str | None, tab: str) -> tuple[Any, ...]:
        active(tab, "detail")
        entry = entry_of(store, key)
        name = V.kernel_of_value(entry, inputs.text(name, "kernel name"))
        scope = inputs.choice(scope, V.SCOPES, "launch scope")
        rows, title = V.scoped_rows(entry, name, scope or "all")
        counters = D.counters_table(rows, title) if name else []
        return (D.detail_kpis(entry, name), *V.detail_figures(entry, name, scope or "all"), counters)
