"""The header's callback: the picked profile's chip line, or the one line saying why it cannot be
opened, and the Kernel detail picker's kernels (the profile's slowest one picked)."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output

from tilescope.dashboard import views as V
from tilescope.dashboard.data import DataStore
from tilescope.errors import TilescopeError


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
