"""A page session without a browser: the layout's props, and the callbacks fired through Dash's own
HTTP endpoint in the order dash-renderer fires them.

What it does as the renderer does:
- on load, every server callback whose inputs are all in the layout fires once (unless it says
  `prevent_initial_call=True`); a callback waits while one of its inputs is the output of another
  callback still to fire, so it sees the value that callback sets (the renderer's queue);
- an answer's props are applied; a changed prop fires the callbacks that take it as an input;
  components an answer brings (a `children` prop) join the layout, with their own initial calls;
- `set(prop, value)` is a user's change (picking a profile, clicking a tab).

What it does not do: clientside callbacks but one, pattern-matching (`ALL`) inputs, which only clicks
fire, and anything a component's JavaScript sends on its own, such as the AG Grid's block requests
(`request_rows` sends one as the grid does). Rendering and plotting are the browser tests' job.
The one clientside callback it does is the tabs' (tilescope.dashboard.cb_tabs), which every view
waits on: `_tab_gate` does in Python what its JavaScript does (the browser tests run that).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import dash
from plotly.utils import PlotlyJSONEncoder

from tilescope.dashboard.layout import VIEW_NAMES, shown_id

from support.dash_calls import request_body

MAX_ROUNDS = 40  # a chain longer than this is a loop


def _is_component(node: Any) -> bool:
    return isinstance(node, dict) and "props" in node and "type" in node


class DashSession:
    """One page of `app`: `props["id.prop"]` holds what the page holds; `bad` every answer that
    was not 2xx (status, output, the first line of its body)."""

    def __init__(self, app: dash.Dash) -> None:
        self.app = app
        self.client = app.server.test_client()
        self.props: dict[str, Any] = {}
        self.types: dict[str, str] = {}  # component id -> its type ("Graph", "Div", ...)
        self.bad: list[str] = []
        self.calls = 0
        self.specs = {
            key: spec
            for key, spec in app.callback_map.items()
            if "callback" in spec and not any(str(i["id"]).startswith("{") for i in spec["inputs"])
        }
        layout = app.layout() if callable(app.layout) else app.layout
        self.tree = json.loads(json.dumps(layout, cls=PlotlyJSONEncoder))
        added = self._register(self.tree)
        self._run(self._initial(added), self._tab_gate({"tabs.value"}))

    # -- the page's state -------------------------------------------------------------------

    def _register(self, node: Any) -> set[str]:
        """Record the props of every component with an id under `node`; returns their ids."""
        found: set[str] = set()
        for comp in _components(node):
            props = comp["props"]
            cid = props.get("id")
            if isinstance(cid, str):
                found.add(cid)
                self.types[cid] = comp["type"]
                for prop, value in props.items():
                    if prop != "id":  # a component an answer brings replaces the one it had
                        self.props[f"{cid}.{prop}"] = value
        return found

    def _initial(self, ids: set[str]) -> list[str]:
        """The callbacks the renderer calls when components `ids` appear."""
        out = []
        for key, spec in self.specs.items():
            if spec.get("prevent_initial_call") is True:
                continue
            needed = {i["id"] for i in spec["inputs"]}
            if needed & ids and all(self._present(i["id"]) for i in spec["inputs"]):
                out.append(key)
        return out

    def _present(self, cid: str) -> bool:
        return cid in self.types

    def value(self, prop: str) -> Any:
        return self.props.get(prop)

    def set(self, prop: str, value: Any) -> None:
        """A user's change of one prop, and every callback it sets off."""
        self.props[prop] = value
        self._run([], self._tab_gate({prop}))

    def request_rows(self, grid: str, start: int = 0, end: int = 100) -> None:
        """What an infinite-model AG Grid sends when it is shown: its first block."""
        if self._present(grid):
            self.set(
                f"{grid}.getRowsRequest",
                {"startRow": start, "endRow": end, "sortModel": [], "filterModel": {}},
            )

    # -- firing -----------------------------------------------------------------------------

    def _triggered(self, changed: set[str]) -> list[str]:
        return [
            key
            for key, spec in self.specs.items()
            if any(f"{i['id']}.{i['property']}" in changed for i in spec["inputs"])
            and all(self._present(i["id"]) for i in spec["inputs"])
        ]

    def _run(self, pending: list[str], changed: set[str]) -> None:
        queue = dict.fromkeys([*pending, *self._triggered(changed)])
        for _ in range(MAX_ROUNDS):
            if not queue:
                return
            outputs = {key: set(self._outputs(key)) for key in queue}
            ready = [
                key
                for key in queue
                if not any(
                    f"{i['id']}.{i['property']}" in outputs[other]
                    for other in queue
                    if other != key
                    for i in self.specs[key]["inputs"]
                )
            ] or list(queue)  # a cycle: fire them all, as the renderer would
            new_changed: set[str] = set()
            new_ids: set[str] = set()
            for key in ready:
                del queue[key]
                got, ids = self._fire(key, changed)
                new_changed |= got
                new_ids |= ids
            changed = self._tab_gate(new_changed)
            for key in [*self._initial(new_ids), *self._triggered(changed)]:
                queue.setdefault(key, None)
        raise AssertionError(f"callbacks still firing after {MAX_ROUNDS} rounds: {list(queue)}")

    def _tab_gate(self, changed: set[str]) -> set[str]:
        """`changed` and, when the tabs' value is in it, the `shown-<view>` stores cb_tabs.GATE
        changes: the shown view's set to its name, the view left to None, no other set."""
        if "tabs.value" not in changed or "tabs" not in self.types:
            return changed
        tab = self.props.get("tabs.value")
        gated = set(changed)
        for view in VIEW_NAMES:
            name = f"{shown_id(view)}.data"
            want = view if view == tab else None
            if self.props.get(name) != want:
                self.props[name] = want
                gated.add(name)
        return gated

    def _outputs(self, key: str) -> list[str]:
        return [o.split("@")[0] for o in key.strip(".").split("...")]

    def _fire(self, key: str, changed: set[str]) -> tuple[set[str], set[str]]:
        names = [f"{i['id']}.{i['property']}" for i in self.specs[key]["inputs"]]
        body = request_body(self.app, key, self.props, [n for n in names if n in changed])
        self.calls += 1
        resp = self.client.post("/_dash-update-component", json=body)
        if resp.status_code == 204:
            return set(), set()
        if resp.status_code != 200:
            first = resp.get_data(as_text=True).strip().splitlines()[:1]
            self.bad.append(f"{resp.status_code} {key}: {first[0] if first else ''}")
            return set(), set()
        got: set[str] = set()
        ids: set[str] = set()
        for cid, props in json.loads(resp.get_data())["response"].items():
            for prop, value in props.items():
                name = f"{cid}.{prop}"
                if self.props.get(name) != value:
                    got.add(name)
                self.props[name] = value
                if prop == "children":
                    ids |= self._register(value)
        return got, ids

    # -- what a tab shows ---------------------------------------------------------------------

    def tab_ids(self, tab: str) -> set[str]:
        """The ids of the components in tab `tab`'s content as the page holds it now."""
        for comp in _components(self.tree):
            if comp["type"] == "Tab" and comp["props"].get("value") == tab:
                return {
                    c["props"]["id"]
                    for c in self._live(comp["props"].get("children"))
                    if isinstance(c["props"].get("id"), str)
                }
        raise AssertionError(f"no tab {tab!r}")

    def _live(self, node: Any) -> Iterator[dict[str, Any]]:
        """The components under `node`, each component's children as the last answer set them."""
        for comp in _components(node, descend=False):
            yield comp
            cid = comp["props"].get("id")
            children = (
                self.props.get(f"{cid}.children") if isinstance(cid, str) else comp["props"].get("children")
            )
            yield from self._live(children)
            for prop, value in comp["props"].items():
                if prop != "children" and (_is_component(value) or isinstance(value, list)):
                    yield from self._live(value)

    def texts(self, ids: Iterable[str]) -> list[str]:
        """Every non-blank string the page shows under the components `ids` (their children)."""
        out: list[str] = []
        for cid in ids:
            out += [t for t in _strings(self.props.get(f"{cid}.children")) if t.strip()]
        return out


def blank_figure(figure: Any) -> bool:
    """A figure that would draw empty axes with no words: no trace with data, no annotation text."""
    if not isinstance(figure, dict):
        return True
    drawn = any(
        any(isinstance(t.get(k), list | str | dict) and len(t[k]) for k in ("x", "y", "z", "values", "r"))
        for t in figure.get("data") or []
    )
    said = any(
        str(a.get("text") or "").strip() for a in (figure.get("layout") or {}).get("annotations") or []
    )
    return not drawn and not said


def _components(node: Any, descend: bool = True) -> Iterator[dict[str, Any]]:
    """Components in a plotly-JSON tree (children lists, and components held in other props)."""
    if isinstance(node, list | tuple):
        for item in node:
            yield from _components(item, descend)
    elif _is_component(node):
        yield node
        if descend:
            for value in node["props"].values():
                yield from _components(value, descend)


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, int | float) and not isinstance(node, bool):
        yield str(node)
    elif isinstance(node, list | tuple):
        for item in node:
            yield from _strings(item)
    elif _is_component(node):
        yield from _strings(node["props"].get("children"))
