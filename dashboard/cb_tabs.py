"""Which view is shown, told to that view alone: one clientside callback from the tabs' value to
each view's `shown-<view>` store (layout.shown_id).

Every view's callbacks used to take the tabs' value as an input and refuse (PreventUpdate) unless
their tab was the one shown. The answer was right, but a tab switch still sent one request per
view callback, 15 where one view is drawn, each answered by the server and tracked by the page.
Here the picked view's store is set to its name and the view left is set to None; no other store
changes, so only those two views' callbacks fire (the one left refuses at once, as before). Most
of a switch's time in the browser is drawing the view itself (docs/benchmarks.md, Session 16).
"""

from __future__ import annotations

import json

import dash
from dash import Input, Output, State

from tilescope.dashboard.layout import VIEW_NAMES, shown_id

# `shown` are the stores' values, in VIEW_NAMES order. A store that already says what it would be
# set to is not set again: Dash fires a callback whenever one of its inputs is set, equal or not.
GATE = """
function (tab, ...shown) {
    const keep = window.dash_clientside.no_update;
    return VIEW_NAMES.map(function (view, i) {
        const want = view === tab ? view : null;
        return (shown[i] === undefined ? null : shown[i]) === want ? keep : want;
    });
}
""".replace("VIEW_NAMES", json.dumps(VIEW_NAMES))


def register(app: dash.Dash) -> None:
    app.clientside_callback(
        GATE,
        *[Output(shown_id(view), "data") for view in VIEW_NAMES],
        Input("tabs", "value"),
        *[State(shown_id(view), "data") for view in VIEW_NAMES],
    )
