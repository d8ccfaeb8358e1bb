"""The Compare tab's callbacks: the base and head pickers (kept when still served), the
comparison of the two (tilescope.dashboard.compare), and one kernel's counters, base beside head
(tilescope.dashboard.detail). A profile is never compared with itself: with one profile served
(or the head set to the base) the tab says there is nothing to compare with and offers the pair
pickers, which compare two kernels of that one run; a cleared picker clears the tab."""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, State, ctx, html

from tilescope.dashboard import compare as C
from tilescope.dashboard import detail as D
from tilescope.dashboard import figures as F
from tilescope.dashboard import inputs
from tilescope.dashboard import views as V
from tilescope.dashboard.cb_common import active, entry_of
from tilescope.dashboard.data import DataStore, ProfileEntry
from tilescope.dashboard.layout import shown_id
from tilescope.errors import TilescopeError


def register(app: dash.Dash, store: DataStore) -> None:
    @app.callback(
        Output("c-base", "options"),
        Output("c-head", "options"),
        Output("c-base", "value"),
        Output("c-head", "value"),
        Input(shown_id("compare"), "data"),
        State("c-base", "value"),
        State("c-head", "value"),
    )
    def on_compare_options(tab: str, base: str | None, head: str | None) -> tuple[Any, ...]:
        active(tab, "compare")
        opts = store.options()
        keys = [o["value"] for o in opts]
        base = base if base in keys else (keys[0] if keys else None)
        # never the base again by default: one profile alone has nothing to compare with (on_compare)
        head = head if head in keys else next((k for k in keys if k != base), None)
        return opts, opts, base, head

    @app.callback(
        Output("c-match-base", "options"),
        Output("c-match-head", "options"),
        Output("c-match-base", "value"),
        Output("c-match-head", "value"),
        Input("c-base", "value"),
        Input("c-head", "value"),
        Input(shown_id("compare"), "data"),
        State("c-match-base", "value"),
        State("c-match-head", "value"),
    )
    def on_match_options(
        base_key: str | None, head_key: str | None, tab: str, b: str | None, h: str | None
    ) -> tuple[Any, ...]:
        """Each side's kernels; a picked kernel is kept while its run still holds it."""
        active(tab, "compare")
        if not base_key:
            return [], [], None, None
        try:  # without a head, two kernels of the base (a run compared with nothing else)
            names = [C.kernel_names(entry_of(store, k)) for k in (base_key, head_key or base_key)]
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
        Input(shown_id("compare"), "data"),
        Input("c-match-base", "value"),
        Input("c-match-head", "value"),
    )
    def on_compare(
        base_key: str | None, head_key: str | None, tab: str, pair_base: str | None, pair_head: str | None
    ) -> tuple[Any, ...]:
        active(tab, "compare")

        def cleared(message: str, tone: str = "muted") -> tuple[Any, ...]:
            # every output emptied: a cleared picker never leaves the last comparison's numbers
            empty = F.empty_figure("Nothing to compare")
            return [html.Div(message, className=tone)], empty, [], [], C.grid_columns()

        if not base_key:
            return cleared("Pick a base profile: the run the head is compared with.")
        base, head = entry_of(store, base_key), entry_of(store, head_key or base_key)
        picked = inputs.text(pair_base, "paired kernel"), inputs.text(pair_head, "paired kernel")
        try:
            pair = _pair(base, head, *picked)
            if head.key == base.key and not pair:
                return cleared(C.nothing_to_compare(base, len(store.options())))
            result = C.compare_entries(base, head, pair)
        except TilescopeError as exc:  # e.g. an IR-only bundle has no kernel times to compare
            return cleared(f"Cannot compare: {exc.one_line()}", "error")
        return (
            C.compare_kpis(result),
            F.delta_figure(result.deltas),
            C.findings_changes(result),
            C.grid_rows(result),
            C.grid_columns(),
        )

    @app.callback(
        Output("c-counter-kernel", "options"),
        Output("c-counter-kernel", "value"),
        Input("c-base", "value"),
        Input("c-head", "value"),
        Input(shown_id("compare"), "data"),
        Input("c-grid", "cellClicked"),
        State("c-counter-kernel", "value"),
    )
    def on_counter_options(
        base_key: str | None, head_key: str | None, tab: str, cell: dict[str, Any] | None, picked: str | None
    ) -> tuple[Any, ...]:
        """The kernels both runs ran (by the head's time); a click on a name in the grid picks it."""
        active(tab, "compare")
        if not base_key:
            return [], None
        names = C.common_kernels(entry_of(store, base_key), entry_of(store, head_key or base_key))
        keep = V.name_from_value(inputs.text(picked, "counter kernel"), names)
        if ctx.triggered_id == "c-grid":
            clicked = inputs.mapping(cell, "grid cell") or {}
            if clicked.get("colId") == "name" and (value := inputs.text(clicked.get("value"), "kernel name")):
                keep = value if value in names else keep
        keep = keep or (names[0] if names else None)
        options = [V.name_option(n) for n in names[: V.MAX_KERNEL_OPTIONS]]
        if keep and keep not in names[: V.MAX_KERNEL_OPTIONS]:
            options.insert(0, V.name_option(keep))
        return options, V.name_value(keep) if keep else None

    @app.callback(
        Output("c-counters", "children"),
        Input("c-base", "value"),
        Input("c-head", "value"),
        Input(shown_id("compare"), "data"),
        Input("c-counter-kernel", "value"),
        Input("c-match-base", "value"),
        Input("c-match-head", "value"),
    )
    def on_compare_counters(
        base_key: str | None, head_key: str | None, tab: str, kernel: str | None, *pair_picks: str | None
    ) -> list[Any]:
        active(tab, "compare")
        if not base_key:
            return []
        base, head = entry_of(store, base_key), entry_of(store, head_key or base_key)
        b, h = (inputs.text(p, "paired kernel") for p in pair_picks)
        try:
            pair = _pair(base, head, b, h)
        except TilescopeError:  # no kernel times (the comparison above says why)
            pair = ()
        if pair:
            b_name, h_name = pair[0]
        else:
            common = C.common_kernels(base, head)
            name = V.name_from_value(inputs.text(kernel, "counter kernel"), common)
            if not name:
                message = ("Pick a kernel both runs ran to see its counters side by side." if common else
                           "No kernel of one name ran in both: pick a Pair above to compare two kernels' "
                           "counters.")
                return [html.Div(message, className="muted")]
            b_name = h_name = name
        if head.key == base.key and b_name == h_name:
            return [html.Div(C.nothing_to_compare(base, len(store.options())), className="muted")]
        title = (f"Counters — base {V.short(base.label)}: {V.short(b_name)} · "
                 f"head {V.short(head.label)}: {V.short(h_name)}")
        return D.compare_counters_table(V.kernel_rows(base, b_name), V.kernel_rows(head, h_name), title)


def _pair(
    base: ProfileEntry, head: ProfileEntry, b: str | None, h: str | None
) -> tuple[tuple[str, str], ...]:
    """The `--match` pair the two pickers name (both set, each a kernel of its run), else none."""
    b_name = V.name_from_value(b, C.kernel_names(base))
    h_name = V.name_from_value(h, C.kernel_names(head))
    return ((b_name, h_name),) if b_name and h_name else ()
