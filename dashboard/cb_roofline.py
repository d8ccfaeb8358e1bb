"""The Roofline tab's callback: the figure and the note on the chip's assumed ceilings (a click
on a point opens the kernel: cb_detail.on_open_kernel)."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output

from tilescope.dashboard import views as V
from tilescope.dashboard.cb_common import active, entry_of
from tilescope.dashboard.data import DataStore
from tilescope.dashboard.figures_roofline import roofline_figure
from tilescope.dashboard.layout import shown_id


def register(app: dash.Dash, store: DataStore) -> None:
    @app.callback(
        Output("roofline", "figure"),
        Output("roofline-note", "children"),
        Input("profile", "value"),
        Input(shown_id("roofline"), "data"),
    )
    def on_roofline(key: str | None, tab: str) -> tuple[Any, str]:
        active(tab, "roofline")
        entry = entry_of(store, key)
        chip = entry.profile.chip
        note = "Click a point to open that kernel. " + (
            "Dashed/dotted ceilings are configured assumptions: " + "; ".join(chip.assumptions)
            if chip.assumptions
            else ""
        )
        return roofline_figure(V.roofline_points(entry), chip), note
