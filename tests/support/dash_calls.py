"""Callbacks through Dash's own HTTP endpoint, as the browser sends them."""

from __future__ import annotations

import json
from typing import Any

import dash


def post_callback(
    app: dash.Dash, output_prefix: str, values: dict[str, Any], triggered: str | None = None
) -> tuple[dict[str, Any], int]:
    """Call the callback whose output spec starts with `output_prefix`.

    `values` maps "id.property" to the value of each Input/State (missing ones are None).
    Returns (response["response"], payload bytes); a 204 (PreventUpdate) returns ({}, 0).
    """
    body = callback_body(app, output_prefix, values, triggered)
    resp = app.server.test_client().post("/_dash-update-component", json=body)
    if resp.status_code == 204:
        return {}, 0
    assert resp.status_code == 200, resp.get_data(as_text=True)[:2000]
    data = resp.get_data()
    return json.loads(data)["response"], len(data)


def callback_body(
    app: dash.Dash, output_prefix: str, values: dict[str, Any], triggered: str | None = None
) -> dict[str, Any]:
    """The /_dash-update-component body the browser sends for that callback and those values."""
    keys = [k for k in app.callback_map if k.lstrip(".").startswith(output_prefix)]
    if len(keys) > 1 and triggered:  # several callbacks share outputs (allow_duplicate): pick by input
        trig_id, trig_prop = triggered.split(".", 1)
        keys = [k for k in keys if {"id": trig_id, "property": trig_prop} in app.callback_map[k]["inputs"]]
    assert len(keys) == 1, (output_prefix, keys)
    inputs = app.callback_map[keys[0]]["inputs"]
    return request_body(app, keys[0], values, [triggered or f"{inputs[0]['id']}.{inputs[0]['property']}"])


def request_body(app: dash.Dash, key: str, values: dict[str, Any], changed: list[str]) -> dict[str, Any]:
    """The body for callback `key` (its callback_map key), its inputs and state read from `values`
    ("id.property" -> value; missing ones None), `changed` the props that set it off."""
    spec = app.callback_map[key]
    parts = [o.split(".", 1) for o in key.strip(".").split("...")]
    outputs = [{"id": cid, "property": prop} for cid, prop in parts]

    def items(kind: str) -> list[dict[str, Any]]:
        return [
            {"id": i["id"], "property": i["property"], "value": values.get(f"{i['id']}.{i['property']}")}
            for i in spec.get(kind) or []
        ]

    return {
        "output": key,
        "outputs": outputs if key.startswith("..") else outputs[0],
        "inputs": items("inputs"),
        "state": items("state"),
        "changedPropIds": changed,
    }
