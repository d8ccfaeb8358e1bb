"""The Timeline tab's callback: the segments in the x window the user zoomed to, re-queried on the
server (tilescope.dashboard.timeline_lanes.timeline_window) so a zoom shows single kernels again.
The first view is fitted to the kernels (`fit_window`); a double-click shows the whole capture."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, ctx
from dash.exceptions import PreventUpdate

from tilescope.dashboard import figures as F
from tilescope.dashboard import inputs, timeline_export
from tilescope.dashboard.cb_common import active, entry_of
from tilescope.dashboard.data import DataStore, ProfileEntry
from tilescope.dashboard.figures_timeline import timeline_figure
from tilescope.dashboard.layout import shown_id
from tilescope.dashboard.pipeline_view import pipeline_of, pipeline_view
from tilescope.dashboard.timeline_lanes import Lane, build_lanes, fit_window, timeline_gap, timeline_window
from tilescope.errors import UsageError


def register(app: dash.Dash, store: DataStore) -> None:
    @app.callback(
        Output("timeline", "figure"),
        Output("tl-info", "children"),
        Output("tl-window", "data"),
        Input("profile", "value"),
        Input(shown_id("timeline"), "data"),
        Input("timeline", "relayoutData"),
        State("tl-window", "data"),
    )
    def on_timeline(
        key: str | None, tab: str, relayout: dict[str, Any] | None, last: list[float] | None
    ) -> tuple[Any, str, list[float] | None]:
        active(tab, "timeline")
        entry = entry_of(store, key)
        lanes = lanes_of(entry)
        if not lanes:
            inside = pipeline_of(entry)  # a bundle's simulator run: the kernel's own pipeline
            if isinstance(inside, str):
                return F.empty_figure("Nothing to place on a timeline: see the note above"), inside, None
            if inside is not None and len(inside):
                # answered again on the graph's own relayout (its first, `autosize`, supersedes the
                # tab's request in the renderer); uirevision keeps the user's zoom
                fig, info = pipeline_view(entry, inside)
                return fig, info, None
            # the reason in words above the plot (an annotation does not wrap), a pointer in it
            empty = F.empty_figure("Nothing to place on a timeline: see the note above")
            return empty, timeline_gap(entry), None
        # a profile or the tab picked: the kernels' span, not the host's whole capture
        fit = fit_window(lanes)
        x0, x1 = _x_window(relayout, last, fit) if ctx.triggered_id == "timeline" else fit
        seg = timeline_window(lanes, x0, x1)
        fig = timeline_figure(
            seg.lane,
            seg.start,
            seg.end,
            seg.text,
            seg.category,
            [ln.label for ln in lanes],
            seg.merged,
            (x0, x1) if x0 is not None and x1 is not None else None,
            seg.links,
        )
        info = (
            f"{seg.total_in_window:,} segments drawn"
            + (" (merged to fit; zoom in for single kernels)" if seg.merged else "")
            + f" in {len(lanes)} lanes"
            + (f", {len(seg.links)} host→kernel launches linked" if seg.links else "")
            + ". Drag to zoom; double-click for the whole capture."
        )
        return fig, info, [x0, x1] if x0 is not None and x1 is not None else None

    @app.callback(Output("tl-export", "href"), Output("tl-export", "style"), Input("profile", "value"))
    def on_export_link(key: str | None) -> tuple[str, dict[str, str]]:
        entry = entry_of(store, key)  # an unknown profile: no link
        # a profile with nothing on a timeline (an `msprof op` run) offers no empty trace to export
        shown = {} if lanes_of(entry) else {"display": "none"}
        return timeline_export.export_url(str(key)), shown

    timeline_export.register(app.server, store, lanes_of)


def lanes_of(entry: ProfileEntry) -> list[Lane]:
    """The profile's timeline lanes, built once per entry (callbacks.warm builds them ahead)."""
    return list(entry.cached("lanes", lambda: build_lanes(entry)))


def _x_window(relayout: Any, last: Any, first: tuple[float, float]) -> tuple[float | None, float | None]:
    """The x window a relayout asks for (None, None: the whole run, a double-click's); `last` is
    the window drawn last, `first` the first view's.

    Both come from the browser: anything but finite numbers is a UsageError (a 400).
    """
    layout = inputs.mapping(relayout, "timeline relayout")
    if not layout or layout.get("xaxis.autorange"):
        return None, None
    drawn = _pair(last, "timeline window")
    if "xaxis.range[0]" in layout or "xaxis.range[1]" in layout:
        # dragging one end of the axis moves only that end: the other is the window drawn last
        if drawn is None and not ("xaxis.range[0]" in layout and "xaxis.range[1]" in layout):
            raise PreventUpdate  # the whole run is drawn: plotly zooms it on its own
        low = layout.get("xaxis.range[0]", drawn[0] if drawn else None)
        high = layout.get("xaxis.range[1]", drawn[1] if drawn else None)
        return _pair([low, high], "timeline range") or (None, None)
    if "xaxis.range" in layout:
        return _pair(layout["xaxis.range"], "timeline range") or (None, None)
    if layout.get("autosize"):
        # plotly laid the graph out anew (shown, resized): redraw the same window. Not a
        # PreventUpdate: this request can supersede the tab's first one still in flight, whose
        # answer Dash then drops, and the timeline stayed blank (seen on a loaded machine); with
        # nothing drawn yet it is the first view
        return drawn or first
    raise PreventUpdate  # y-only zoom or hover: nothing to re-query


def _pair(value: Any, what: str) -> tuple[float, float] | None:
    """`[x0, x1]` as two finite numbers in order; None for None."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise UsageError(f"{what}: expected two numbers")
    x0, x1 = inputs.number(value[0], what), inputs.number(value[1], what)
    return (x0, x1) if x0 <= x1 else (x1, x0)
