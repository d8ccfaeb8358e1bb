"""What the tabs' callbacks (dashboard/cb_*.py) share: the request's profile, run and finding, each
checked before use, and the check that the callback's tab is the one shown."""

from __future__ import annotations

from typing import Any

from dash.exceptions import PreventUpdate

from tilescope.dashboard import inputs
from tilescope.dashboard.data import ClusterEntry, DataStore, ProfileEntry
from tilescope.errors import TilescopeError, UsageError


def entry_of(store: DataStore, key: str | None) -> ProfileEntry:
    entry = store.get(key)
    if entry is None:
        raise PreventUpdate
    return entry


def active(tab: str, wanted: str) -> None:
    if tab != wanted:
        raise PreventUpdate


def finding_of(entry: ProfileEntry, sel: object) -> dict[str, Any] | None:
    """The selected finding; None when nothing (or an index past this profile's list) is selected,
    as after switching to a profile with fewer findings."""
    i = inputs.index(sel, "selected finding")
    return entry.findings[i] if i is not None and i < len(entry.findings) else None


def run_of(store: DataStore, key: object) -> ClusterEntry:
    """The Ranks tab's run; an unknown key (any JSON a request sends) is a UsageError (a 400), and
    a root run that escapes the roots or cannot be loaded raises the store's typed error."""
    if key is None:
        raise PreventUpdate
    entry = store.cluster(key)
    if entry is None:
        raise UsageError("run: expected one of the served multi-rank paths")
    return entry


def run_or_message(store: DataStore, key: object) -> ClusterEntry | str:
    """The run, or the one line the tab shows instead (as the picker's "Cannot open this
    profile"): a root run is loaded on first pick and may fail as a profile does."""
    try:
        return run_of(store, key)
    except TilescopeError as exc:
        return f"Cannot open this run: {exc.one_line()}"
