"""`create_app(profiles, roots, ...)`: the Dash app over a DataStore, usable by `serve` and by tests.

Everything is served from this process (`serve_locally=True`): Dash's and AG Grid's JavaScript come
from the installed packages and the CSS from dashboard/assets, so the dashboard works offline.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import dash
from dash.exceptions import DependencyException

from tilescope.dashboard import callbacks, guard
from tilescope.dashboard.data import DataStore
from tilescope.dashboard.layout import build_layout
from tilescope.dashboard.paths import RootSet
from tilescope.profile import Profile

ASSETS = Path(__file__).with_name("assets")


def create_app(
    profiles: Sequence[Profile | Path | str] = (),
    roots: Iterable[str | Path] = (),
    chip: str | None = None,
    reports: Sequence[dict[str, Any] | None] | None = None,
    labels: Sequence[str | None] | None = None,
    hosts: Iterable[str] = (),
) -> dash.Dash:
    """Build the app. `profiles` are Profile objects or paths (loaded now, trusted like the command
    line, and confined to themselves); `roots` are the only directories a browser request can open
    profiles from. `reports` optionally supplies prebuilt report dicts (tests), otherwise each
    profile is analysed once. `hosts` are the names, besides localhost, that requests may carry in
    their Host header (the `--host` address).
    """
    store = DataStore(RootSet.of(roots), chip=chip)
    store.on_load = callbacks.warm
    for i, item in enumerate(profiles):
        report = reports[i] if reports and i < len(reports) else None
        label = labels[i] if labels and i < len(labels) else None
        if isinstance(item, Profile):
            store.add_profile(item, label=label, report=report)
        else:
            store.add_path(Path(item))
    app = dash.Dash(
        __name__,
        title="tilescope",
        assets_folder=str(ASSETS),
        serve_locally=True,
        suppress_callback_exceptions=True,
        update_title="",
    )
    app.layout = lambda: _layout(store)
    callbacks.register(app, store)
    # Dash answers an unknown component-suite path (e.g. `/_dash-component-suites/../x`) with an
    # exception, i.e. a 500 and a traceback in the log; it is a request for a missing file.
    app.server.register_error_handler(DependencyException, lambda _exc: ("not found", 404))
    guard.install(app, hosts)
    app.server.config["TILESCOPE_STORE"] = store
    return app


def _layout(store: DataStore) -> Any:
    """Built per page load, so profiles added under a root since start-up are listed."""
    options = store.options()
    # With only --root, open the first profile found rather than an empty page.
    initial = store.first_key() or (options[0]["value"] if options else None)
    return build_layout(options, initial, store.runs())


def store_of(app: dash.Dash) -> DataStore:
    store: DataStore = app.server.config["TILESCOPE_STORE"]
    return store
