"""The IR tab's callbacks: the finding and kernel pickers, the panes as data, and the page's own
drawing of them (dashboard/assets/ir_view.js)."""

from __future__ import annotations

from typing import Any

import dash
from dash import ClientsideFunction, Input, Output, State, ctx
from dash.exceptions import PreventUpdate

from tilescope.dashboard import inputs
from tilescope.dashboard import views as V
from tilescope.dashboard.cb_common import active, entry_of, finding_of
from tilescope.dashboard.data import DataStore
from tilescope.dashboard.ir_heat import apply_heat
from tilescope.dashboard.ir_view import (
    ir_kernels,
    kernel_of_locations,
    load_stages,
    mark_locations,
    stage_data,
)
from tilescope.dashboard.layout import shown_id


def register(app: dash.Dash, store: DataStore) -> None:
    @app.callback(Output("ir-finding", "options"), Input("profile", "value"))
    def on_ir_options(key: str | None) -> list[dict[str, Any]]:
        entry = entry_of(store, key)
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
        entry = entry_of(store, key)
        names = ir_kernels(entry.profile.ir)
        finding = finding_of(entry, sel)
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
        Input(shown_id("ir"), "data"),
        State("ir-shown", "data"),
    )
    def on_ir(
        key: str | None, sel: int | None, kernel: str | None, tab: str, shown: Any
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The panes as data for the page to draw (dashboard/assets/ir_view.js), sent once per
        profile, finding and kernel: back on the tab, the page redraws what it holds."""
        active(tab, "ir")
        sel = inputs.index(sel, "selected finding")
        kernel = inputs.text(kernel, "IR kernel")
        wanted = {"profile": key, "finding": sel, "kernel": kernel}
        if ctx.triggered_id == shown_id("ir") and shown == wanted:
            raise PreventUpdate
        entry = entry_of(store, key)
        profile = entry.profile
        name = V.name_from_value(kernel, ir_kernels(profile.ir))
        stages = load_stages(profile.ir_dir, profile.ir, name, store.roots)
        if not stages:
            info = "No IR here: `tilescope collect` or `tilescope lint --out` writes a bundle with ir/."
            return {"for": wanted, "info": info, "panes": []}, wanted
        finding = finding_of(entry, sel)
        line_map = profile.ir.get("line_map") if isinstance(profile.ir, dict) else None
        mark_locations(stages, (finding or {}).get("locations", []), line_map, name)
        measured = apply_heat(stages, profile, name)
        info = (
            f"Marked: {V.finding_label(finding)}"
            if finding
            else "Pick a finding (or use “Show in IR” on one) to mark the lines it points at."
        )
        if measured:
            info += " " + measured
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
