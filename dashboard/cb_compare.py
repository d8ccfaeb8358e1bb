"""The Compare tab's callbacks: the base and head pickers (kept when still served), and the
comparison of the two (tilescope.dashboard.compare)."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, html
from dash.exceptions import PreventUpdate

from tilescope.dashboard import compare as C
from tilescope.dashboard import figures as F
from tilescope.dashboard import inputs
from tilescope.dashboard import views as V
from tilescope.dashboard.cb_common import active, entry_of
from tilescope.dashboard.data import DataStore, ProfileEntry
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
        Output("c-match-base", "options"),
        Output("c-match-head", "options"),
        Output("c-match-base", "value"),
        Output("c-match-head", "value"),
        Input("c-base", "value"),
        Input("c-head", "value"),
        Input("tabs", "value"),
        State("c-match-base", "value"),
        State("c-match-head", "value"),
    )
    def on_match_options(
        base_key: str | None, head_key: str | None, tab: str, b: str | None, h: str | None
    ) -> tuple[Any, ...]:
        """Each side's kernels; a picked kernel is kept while its run still holds it."""
        active(tab, "compare")
        if not base_key or not head_key:
            raise PreventUpdate
        try:
            names = [C.kernel_names(entry_of(store, k)) for k in (base_key, head_key)]
        except TilescopeError:  # the comparison itself says why (on_compare)
            return [], [], None, None
        kept = [
            V.name_value(n) if (n := V.name_from_value(inputs.text(v, "paired kernel"), side)) else None
            for v, side in zip((b, h), names, strict=True)
        ]
        return [V.name_option(n) for n in names[0]], [V.name_option(n) for n in names[1]], *kept

    @app.callback(
        Output("c-kpis", "children"),
        Output("c-delta", "figure"),
        Output("c-findings", "children"),
        Output("c-grid", "rowData"),
        Output("c-grid", "columnDefs"),
        Input("c-base", "value"),
        Input("c-head", "value"),
        Input("tabs", "value"),
        Input("c-match-base", "value"),
        Input("c-match-head", "value"),
    )
    def on_compare(
        base_key: str | None, head_key: str | None, tab: str, pair_base: str | None, pair_head: str | None
    ) -> tuple[Any, ...]:
        active(tab, "compare")
        if not base_key or not head_key:
            raise PreventUpdate
        base, head = entry_of(store, base_key), entry_of(store, head_key)
        picked = inputs.text(pair_base, "paired kernel"), inputs.text(pair_head, "paired kernel")
        try:
            result = C.compare_entries(base, head, _pair(base, head, *picked))
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


def _pair(
    base: ProfileEntry, head: ProfileEntry, b: str | None, h: str | None
) -> tuple[tuple[str, str], ...]:
    """The `--match` pair the two pickers name (both set, each a kernel of its run), else none."""
    b_name = V.name_from_value(b, C.kernel_names(base))
    h_name = V.name_from_value(h, C.kernel_names(head))
    return ((b_name, h_name),) if b_name and h_name else ()
