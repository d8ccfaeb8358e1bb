"""Thin callbacks: read the request, ask the store / views, return components. No logic of their own.

A view's callback runs only when its tab is visible (`active`), so switching profiles on a large
run computes one view, not eight. Every value a callback receives is checked (tilescope.dashboard.inputs,
the store's key check, the grid request parser) before use: a malformed one raises UsageError,
which the app answers with a quiet 400 (tilescope.dashboard.guard), never a 500.

Each tab's callbacks are in a module of their own, dashboard/cb_<tab>.py, with what they share
in cb_common.py; `register` adds them all to the app.
"""

from __future__ import annotations

import dash

from tilescope.dashboard import (
    cb_compare,
    cb_detail,
    cb_findings,
    cb_header,
    cb_ir,
    cb_kernels,
    cb_overview,
    cb_ranks,
    cb_roofline,
    cb_tabs,
    cb_timeline,
)
from tilescope.dashboard import compare as C
from tilescope.dashboard import views as V
from tilescope.dashboard.data import DataStore, ProfileEntry


def register(app: dash.Dash, store: DataStore) -> None:
    # The order they have always been registered in (the header's, then the tabs', Ranks after IR):
    # Dash keeps callbacks in that order, so reordering these lines would change behaviour, not layout.
    cb_header.register(app, store)
    cb_overview.register(app, store)
    cb_kernels.register(app, store)
    cb_detail.register(app, store)
    cb_roofline.register(app, store)
    cb_timeline.register(app, store)
    cb_findings.register(app, store)
    cb_ir.register(app, store)
    cb_ranks.register(app, store)
    cb_compare.register(app, store)
    cb_tabs.register(app)  # which view is shown, to that view's callbacks alone


def warm(entry: ProfileEntry) -> None:
    """Precompute what the heavier views need (runs in a daemon thread after a profile loads)."""
    try:
        entry.cursor().close()  # builds the DuckDB copy
        V.summary_of(entry)
        cb_timeline.lanes_of(entry)
        C.run_data(entry)
    except Exception:  # a failure here resurfaces, with its message, when the view asks again
        return
