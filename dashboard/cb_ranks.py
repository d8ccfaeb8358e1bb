"""The Ranks tab's callbacks (the tab is only in the layout when a served path or a run under a
root holds several ranks): the run's summary, table and findings, the rank x step heatmap, the
communication matrix, and opening a clicked rank's profile."""

from __future__ import annotations

from typing import Any

import dash
from dash import ALL, Input, Output, State, ctx, html
from dash.exceptions import PreventUpdate

from tilescope.dashboard import figures as F
from tilescope.dashboard import inputs
from tilescope.dashboard import ranks as R
from tilescope.dashboard.cb_common import active, run_of, run_or_message
from tilescope.dashboard.data import DataStore
from tilescope.dashboard.layout import shown_id


def register(app: dash.Dash, store: DataStore) -> None:
    @app.callback(
        Output("r-info", "children"),
        Output("r-table", "children"),
        Output("r-findings", "children"),
        Input("r-run", "value"),
        Input("profile", "value"),
        Input(shown_id("ranks"), "data"),
    )
    def on_ranks(run: str | None, key: str | None, tab: str) -> tuple[Any, ...]:
        active(tab, "ranks")
        entry = run_or_message(store, run)
        if isinstance(entry, str):
            return html.Div(entry, className="error", role="alert"), [], []
        shown = key if isinstance(key, str) else None
        return R.rank_info(entry), R.rank_table(entry, shown), R.cluster_findings(entry)

    @app.callback(Output("r-heatmap", "figure"), Input("r-run", "value"), Input("r-metric", "value"),
                  Input(shown_id("ranks"), "data"))
    def on_rank_heatmap(run: str | None, metric: str | None, tab: str) -> Any:
        active(tab, "ranks")
        metric = inputs.choice(metric, R.STEP_METRICS, "heatmap quantity") or R.DEFAULT_METRIC
        entry = run_or_message(store, run)
        return F.empty_figure(entry) if isinstance(entry, str) else R.step_heatmap_figure(entry, metric)

    @app.callback(Output("r-matrix", "figure"), Input("r-run", "value"), Input("r-link-value", "value"),
                  Input(shown_id("ranks"), "data"))
    def on_rank_matrix(run: str | None, value: str | None, tab: str) -> Any:
        active(tab, "ranks")
        value = inputs.choice(value, R.LINK_VALUES, "matrix quantity") or R.DEFAULT_LINK_VALUE
        entry = run_or_message(store, run)
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
        profile_key = run_of(store, run).rank_keys.get(rank) if rank is not None else None
        if profile_key is None:  # a left-out rank, or a rank only seen as a link's far end
            raise PreventUpdate
        return profile_key, store.options(), "overview"
