"""The dashboard's boundary (issue #13): confinement after following links, the Host allow-list,
quiet 4xx answers to malformed requests, long names and the server banner.

Every case is a concrete hostile input: real symlink trees in tmp_path pointing at files that hold
a marker, hand-made callback bodies, a 5,000-character kernel name, a real HTTP server.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dash
import pytest

from tilescope.dashboard import views as V
from tilescope.dashboard.app import create_app, store_of
from tilescope.dashboard.guard import (
    MAX_JSON_DEPTH,
    QuietRequestHandler,
    host_name,
    json_depth,
    make_http_server,
)
from tilescope.dashboard.ir_view import load_stages
from tilescope.dashboard.paths import MAX_TREE_ENTRIES, PathRejected, RootSet
from tilescope.io.load import load_profile

from support import REPO_ROOT
from support.dash_calls import callback_body, post_callback
from support.synthetic import synthetic_profile, synthetic_report, write_ir_bundle

REPO = REPO_ROOT
MARKER = "MARKER-OUTSIDE-THE-ROOT"
CSV_HEADER = "Name,Type,Accelerator Core,Start Time(us),Duration(us)\n"
LONG = "fused_" + "x" * 4994  # a 5,000-character kernel name, as generated code can produce


# --- symlink trees --------------------------------------------------------------------------


def _valid_ir(kernel_file: str, name: str) -> dict[str, object]:
    """The sample bundle's ir.json (bundles are held to the ir.json schema on load), naming
    `kernel_file` and one kernel `name` whose one stage is ir/final.py."""
    ir = json.loads((REPO / "sample_traces" / "tilelang_fa_bundle" / "ir" / "ir.json").read_text())
    ir["kernel_file"] = kernel_file
    ir["kernels"] = [
        {
            **ir["kernels"][0],
            "name": name,
            "stages": [{"name": "final", "file": "final.py", "pass": None, "lines": 1}],
        }
    ]
    return dict(ir)


def _ir_bundle(bundle: Path, kernel_file: str = "passwd") -> None:
    """A minimal IR-only bundle: manifest.json + ir/ir.json naming one stage and a kernel source."""
    (bundle / "ir").mkdir(parents=True)
    (bundle / "manifest.json").write_text("{}", encoding="utf-8")
    ir = _valid_ir(kernel_file=kernel_file, name="k")
    (bundle / "ir" / "ir.json").write_text(json.dumps(ir), encoding="utf-8")
    (bundle / "ir" / "final.py").write_text("x = 1\n", encoding="utf-8")


@pytest.fixture()
def tree(tmp_path: Path) -> dict[str, Path]:
    """root/ holds profiles whose links lead to outside/ (files holding MARKER) and one good one."""
    outside = tmp_path / "outside"
    (outside / "ir").mkdir(parents=True)
    (outside / "passwd").write_text(f"root:{MARKER}\n", encoding="utf-8")
    (outside / "kernel_details.csv").write_text(f"{CSV_HEADER}{MARKER},Add,AI_VECTOR_CORE,1.0,2.0\n")
    (outside / "ir" / "ir.json").write_text(json.dumps(_valid_ir("x.py", MARKER)), encoding="utf-8")
    (outside / "ir" / "final.py").write_text(f"# {MARKER}\n", encoding="utf-8")
    root = tmp_path / "root"
    # kernel/ -> a directory outside, and ir.json names `passwd` inside it
    _ir_bundle(root / "kernel_link")
    (root / "kernel_link" / "kernel").symlink_to(outside, target_is_directory=True)
    # ir/ itself -> outside
    (root / "ir_link").mkdir(parents=True)
    (root / "ir_link" / "manifest.json").write_text("{}", encoding="utf-8")
    (root / "ir_link" / "ir").symlink_to(outside / "ir", target_is_directory=True)
    # the kernel table -> a file outside
    (root / "csv_link").mkdir()
    (root / "csv_link" / "kernel_details.csv").symlink_to(outside / "kernel_details.csv")
    # a good profile, and one whose link stays inside the root (allowed)
    (root / "good").mkdir()
    (root / "good" / "kernel_details.csv").write_text(f"{CSV_HEADER}good_kernel,Add,AI_VECTOR_CORE,1.0,2.0\n")
    (root / "inner_link").mkdir()
    (root / "inner_link" / "kernel_details.csv").symlink_to(root / "good" / "kernel_details.csv")
    return {"root": root, "outside": outside}


@pytest.mark.parametrize(
    ("key", "link"),
    [
        ("0:kernel_link", "kernel_link/kernel"),
        ("0:ir_link", "ir_link/ir"),
        ("0:csv_link", "csv_link/kernel_details.csv"),
    ],
)
def test_a_profile_with_a_link_out_of_the_root_is_refused_before_anything_is_read(
    tree: dict[str, Path], key: str, link: str
) -> None:
    app = create_app([], roots=[tree["root"]])
    with pytest.raises(PathRejected, match=f"^{link}: leads outside the directories being served$"):
        store_of(app).get(key)
    # through the picker: one line in the page, nothing from outside
    out, _ = post_callback(app, "chip-info.children", {"profile.value": key})
    assert out["load-error"]["children"] == (
        f"Cannot open this profile: {link}: leads outside the directories being served"
    )
    assert MARKER not in json.dumps(out)


def test_views_of_a_refused_profile_answer_400_without_its_data(tree: dict[str, Path]) -> None:
    app = create_app([], roots=[tree["root"]])
    for prefix, values in (
        ("k-grid.getRowsResponse", {"k-grid.getRowsRequest": {"startRow": 0, "endRow": 100}}),
        ("ir-data.data", {"shown-ir.data": "ir"}),
    ):
        for key in ("0:csv_link", "0:kernel_link", "0:ir_link"):
            body = callback_body(app, prefix, {**values, "profile.value": key})
            resp = app.server.test_client().post("/_dash-update-component", json=body)
            assert resp.status_code == 400
            assert MARKER not in resp.get_data(as_text=True)


def test_links_that_stay_inside_the_root_still_load(tree: dict[str, Path]) -> None:
    store = store_of(create_app([], roots=[tree["root"]]))
    entry = store.get("0:inner_link")
    assert entry is not None and entry.kernels["name"].tolist() == ["good_kernel"]


def test_the_cli_still_reads_what_the_user_names(tree: dict[str, Path]) -> None:
    """Confinement is the dashboard's boundary: `analyze` on the same folder follows the link."""
    profile = load_profile(tree["root"] / "csv_link")
    assert profile.kernels["name"].tolist() == [MARKER]


def test_a_path_given_to_serve_is_confined_to_itself(tree: dict[str, Path]) -> None:
    with pytest.raises(PathRejected, match="kernel_link/kernel: leads outside"):
        create_app([tree["root"] / "kernel_link"])
    # ... unless its link target is served too (a --root)
    app = create_app([tree["root"] / "csv_link"], roots=[tree["outside"]])
    assert store_of(app).get("p0") is not None


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_serve_check_refuses_a_bundle_linking_out_with_one_line(tree: dict[str, Path]) -> None:
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "tilescope.cli", "serve", str(tree["root"] / "ir_link"), "--check"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        f"tilescope: error: {tree['root'] / 'ir_link'}/ir: leads outside the directories being served"
    )


def test_ir_view_judges_a_linked_kernel_folder_by_where_it_leads(tree: dict[str, Path]) -> None:
    """Second layer: a bundle handed over in-process (not tree-checked) still cannot show /etc/passwd
    through `kernel/` -> outside; its own final.py is shown."""
    bundle = tree["root"] / "kernel_link"
    profile = load_profile(bundle)
    stages = load_stages(profile.ir_dir, profile.ir, "k", RootSet.of([bundle]))
    assert [(s.stage, s.text) for s in stages] == [("final", "x = 1\n")]
    app = create_app([profile])
    out, _ = post_callback(app, "ir-data.data", {"profile.value": "p0", "shown-ir.data": "ir"})
    assert MARKER not in json.dumps(out)
    assert [pane["id"] for pane in out["ir-data"]["data"]["panes"]] == ["ir-final"]


def test_ir_view_refuses_a_linked_ir_folder(tree: dict[str, Path]) -> None:
    bundle = tree["root"] / "ir_link"
    ir = {
        "kernels": [
            {"name": "k", "stages": [{"name": "final", "file": "final.py", "pass": None, "lines": 1}]}
        ]
    }
    assert load_stages(bundle / "ir", ir, "k", RootSet.of([bundle])) == []
    # the same tree is fine when its target is served
    stages = load_stages(bundle / "ir", ir, "k", RootSet.of([bundle, tree["outside"]]))
    assert [s.text for s in stages] == [f"# {MARKER}\n"]


def test_special_files_and_link_loops_are_refused_without_reading(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "fifo").mkdir(parents=True)
    (root / "fifo" / "kernel_details.csv").write_text(f"{CSV_HEADER}k,Add,AI_VECTOR_CORE,1.0,2.0\n")
    os.mkfifo(root / "fifo" / "trace_view.json")  # a reader opening it would block forever
    (root / "loop").mkdir()
    (root / "loop" / "kernel_details.csv").symlink_to(root / "loop" / "kernel_details.csv")
    store = store_of(create_app([], roots=[root]))
    with pytest.raises(PathRejected, match=r"^fifo/trace_view.json: not a regular file or directory$"):
        store.get("0:fifo")
    with pytest.raises(PathRejected, match=r"^loop/kernel_details.csv: link loop$"):
        store.get("0:loop")


def test_a_directory_link_back_up_is_walked_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "p").mkdir(parents=True)
    (root / "p" / "kernel_details.csv").write_text(f"{CSV_HEADER}k,Add,AI_VECTOR_CORE,1.0,2.0\n")
    (root / "p" / "again").symlink_to(root / "p", target_is_directory=True)  # a cycle inside the root
    RootSet.of([root]).check_tree(root / "p", "p")  # terminates, accepts


def test_a_huge_tree_is_refused_not_walked_forever(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tilescope.dashboard.paths.MAX_TREE_ENTRIES", 5)
    root = tmp_path / "root"
    (root / "p").mkdir(parents=True)
    for i in range(6):
        (root / "p" / f"f{i}.csv").write_text("x")
    with pytest.raises(PathRejected, match="holds more than 5 files"):
        RootSet.of([root]).check_tree(root / "p", "p")
    assert MAX_TREE_ENTRIES == 100_000


@pytest.mark.parametrize("key", [["0:good"], {"k": 1}, 7, "²:good", "0:good/../../outside", "9:good"])
def test_unknown_profile_keys_are_an_in_page_message(tree: dict[str, Path], key: Any) -> None:
    app = create_app([], roots=[tree["root"]])
    out, _ = post_callback(app, "chip-info.children", {"profile.value": key})
    assert out["load-error"]["children"].startswith("Cannot open this profile: ")


# --- Host and Origin ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> dash.Dash:
    """A synthetic profile whose second kernel has a 5,000-character name (finding TS201 names it)."""
    p = synthetic_profile(400, names=10)
    p.kernels["name"] = p.kernels["name"].where(p.kernels["name"] != "kernel_001", LONG)
    ir_dir = tmp_path_factory.mktemp("bundle") / "ir"
    p.ir, p.ir_dir = write_ir_bundle(ir_dir), ir_dir
    p.ir["kernels"][0]["name"] = LONG
    return create_app([p], reports=[synthetic_report(p)], hosts=["dash.internal"])


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost:8050", "localhost"),
        ("LOCALHOST", "localhost"),
        ("127.0.0.1:8050", "127.0.0.1"),
        ("[::1]:8050", "::1"),
        ("[::1]", "::1"),
        ("evil.example:8050", "evil.example"),
        ("localhost:80x", None),
        ("[::1", None),
        ("[::1]x", None),
        (":8050", None),
        ("", None),
    ],
)
def test_host_name(header: str, name: str | None) -> None:
    assert host_name(header) == name


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("localhost:8050", 200),
        ("localhost", 200),
        ("127.0.0.1:8050", 200),
        ("[::1]:8050", 200),
        ("dash.internal:8050", 200),  # the --host name
        ("evil.example", 400),
        ("evil.example:8050", 400),
        ("localhost.evil.example:8050", 400),
        ("127.0.0.1.nip.io", 400),
        ("localhost:8050x", 400),
    ],
)
def test_only_allowed_host_names_are_answered(app: dash.Dash, host: str, status: int) -> None:
    client = app.server.test_client()
    for url in ("/", "/_dash-layout", "/assets/tilescope.css"):
        resp = client.get(url, headers={"Host": host})
        assert resp.status_code == status, (url, host)
    if status == 400:
        body = callback_body(app, "f-rule.options", {"profile.value": "p0"})
        resp = client.post("/_dash-update-component", json=body, headers={"Host": host})
        assert resp.status_code == 400 and b"TS201" not in resp.data


def test_cross_origin_callbacks_are_refused(app: dash.Dash) -> None:
    client = app.server.test_client()
    body = callback_body(app, "f-rule.options", {"profile.value": "p0"})
    for origin in ("http://evil.example", "http://localhost:3000", "null"):
        resp = client.post("/_dash-update-component", json=body, headers={"Origin": origin})
        assert resp.status_code == 403, origin
    resp = client.post("/_dash-update-component", json=body, headers={"Origin": "http://localhost"})
    assert resp.status_code == 200 and b"TS201" in resp.data


# --- malformed callback requests: a quiet 400 -----------------------------------------------


def _grid(request: Any) -> dict[str, Any]:
    return {"k-grid.getRowsRequest": request, "profile.value": "p0", "k-mode.value": "launches"}


def _timeline(relayout: Any, last: Any = None) -> dict[str, Any]:
    return {
        "profile.value": "p0",
        "shown-timeline.data": "timeline",
        "timeline.relayoutData": relayout,
        "tl-window.data": last,
    }


MALFORMED_VALUES: list[tuple[str, dict[str, Any], str | None]] = [
    # (output prefix, values, triggering input)
    ("ov-kpis.children", {"profile.value": ["p0"], "shown-overview.data": "overview"}, None),
    ("ov-kpis.children", {"profile.value": {"a": 1}, "shown-overview.data": "overview"}, None),
    ("ov-kpis.children", {"profile.value": "0:../etc", "shown-overview.data": "overview"}, None),
    ("ov-kpis.children", {"profile.value": "²:x", "shown-overview.data": "overview"}, None),
    ("k-grid.getRowsResponse", _grid({"startRow": "abc", "endRow": 100}), None),
    ("k-grid.getRowsResponse", _grid({"startRow": -1, "endRow": 100}), None),
    ("k-grid.getRowsResponse", _grid({"startRow": 10**30, "endRow": 10**30 + 100}), None),
    ("k-grid.getRowsResponse", _grid({"startRow": 200, "endRow": 100}), None),
    ("k-grid.getRowsResponse", _grid([1, 2]), None),
    ("k-grid.getRowsResponse", _grid({"filterModel": ["name"]}), None),
    ("k-grid.getRowsResponse", _grid({"filterModel": {"name": "kernel"}}), None),
    (
        "k-grid.getRowsResponse",
        _grid(
            {"filterModel": {"duration_us": {"filterType": "number", "type": "greaterThan", "filter": "abc"}}}
        ),
        None,
    ),
    (
        "k-grid.getRowsResponse",
        _grid(
            {
                "filterModel": {
                    "duration_us": {"filterType": "number", "type": "inRange", "filter": {}, "filterTo": 1}
                }
            }
        ),
        None,
    ),
    (
        "k-grid.getRowsResponse",
        _grid({"filterModel": {"name": {"filterType": "text", "type": "contains", "filter": {"$ne": 1}}}}),
        None,
    ),
    ("k-grid.getRowsResponse", _grid({"filterModel": {"name": {"type": ["contains"]}}}), None),
    (
        "k-grid.getRowsResponse",
        _grid({"filterModel": {"name": {"conditions": [{"conditions": [{"type": "blank"}]}]}}}),
        None,
    ),
    ("k-grid.getRowsResponse", _grid({"filterModel": {"name": {"conditions": "all"}}}), None),
    ("k-grid.getRowsResponse", _grid({"sortModel": {"colId": "name"}}), None),
    ("k-grid.getRowsResponse", _grid({"sortModel": ["name"]}), None),
    ("k-grid.getRowsResponse", _grid({"sortModel": [{"colId": "name", "sort": "sideways"}]}), None),
    ("k-grid.getRowsResponse", {**_grid({"startRow": 0}), "k-search.value": {"x": 1}}, None),
    ("timeline.figure", _timeline({"xaxis.range[0]": "abc", "xaxis.range[1]": 5}), "timeline.relayoutData"),
    ("timeline.figure", _timeline({"xaxis.range": [1]}), "timeline.relayoutData"),
    ("timeline.figure", _timeline({"xaxis.range": "0-5"}), "timeline.relayoutData"),
    ("timeline.figure", _timeline([0, 5]), "timeline.relayoutData"),
    ("timeline.figure", _timeline({"autosize": True}, ["a", "b"]), "timeline.relayoutData"),
    ("timeline.figure", _timeline({"xaxis.range[1]": 5.0}, {"x0": 0}), "timeline.relayoutData"),
    ("d-info.children",
     {"profile.value": "p0", "shown-detail.data": "detail", "d-scope.value": "bogus"}, None),
    ("d-info.children",
     {"profile.value": "p0", "shown-detail.data": "detail", "d-kernel.value": ["a"]}, None),
    ("f-list.children", {"profile.value": "p0", "shown-findings.data": "findings", "f-sev.value": 3}, None),
    ("f-list.children",
     {"profile.value": "p0", "shown-findings.data": "findings", "finding-sel.data": "a"}, None),
    ("f-detail.children", {"profile.value": "p0", "finding-sel.data": -1}, None),
    ("f-detail.children", {"profile.value": "p0", "finding-sel.data": True}, None),
    ("ir-data.data", {"profile.value": "p0", "shown-ir.data": "ir", "ir-kernel.value": {"a": 1}}, None),
    ("ir-data.data", {"profile.value": "p0", "shown-ir.data": "ir", "ir-finding.value": "x"}, None),
    ("d-kernel.options", {"k-grid.cellClicked": "name", "profile.value": "p0"}, "k-grid.cellClicked"),
    (
        "d-kernel.options",
        {"roofline.clickData": {"points": {"0": 1}}, "profile.value": "p0"},
        "roofline.clickData",
    ),
    (
        "d-kernel.options",
        {"roofline.clickData": {"points": [7]}, "profile.value": "p0"},
        "roofline.clickData",
    ),
]


@pytest.mark.parametrize(("prefix", "values", "triggered"), MALFORMED_VALUES)
def test_malformed_callback_values_are_a_quiet_400(
    app: dash.Dash,
    caplog: pytest.LogCaptureFixture,
    prefix: str,
    values: dict[str, Any],
    triggered: str | None,
) -> None:
    body = callback_body(app, prefix, values, triggered)
    with caplog.at_level(logging.INFO):
        resp = app.server.test_client().post("/_dash-update-component", json=body)
    assert resp.status_code == 400, resp.get_data(as_text=True)[:500]
    assert len(resp.get_data(as_text=True).splitlines()) == 1  # one line, no traceback
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


def _raw(app: dash.Dash, data: str | dict[str, Any] | list[Any]) -> int:
    client = app.server.test_client()
    if isinstance(data, str):
        return client.post("/_dash-update-component", data=data, content_type="application/json").status_code
    return client.post("/_dash-update-component", json=data).status_code


def test_malformed_callback_envelopes_are_a_quiet_400(
    app: dash.Dash, caplog: pytest.LogCaptureFixture
) -> None:
    good = callback_body(app, "f-rule.options", {"profile.value": "p0"})
    pattern = callback_body(app, "finding-sel.data", {}, None)
    bad: list[str | dict[str, Any] | list[Any]] = [
        {},
        [],
        "not json",
        '{"output": NaN}',
        {"output": "no-such.children"},
        {"output": 5},
        {**good, "output": "ir-panes.title"},  # a clientside callback: no server function
        {**good, "inputs": []},
        {**good, "inputs": "profile.value"},
        {**good, "inputs": [{"id": "other", "property": "value", "value": "p0"}]},
        {**good, "inputs": [["p0"]]},
        {**good, "state": [{"id": "x", "property": "y"}]},
        {**good, "outputs": [{"id": "f-rule", "property": "options"}]},
        {**good, "outputs": None},
        {**good, "changedPropIds": "profile.value"},
        {**good, "changedPropIds": ['{"index": .n_clicks']},
        {**good, "changedPropIds": [7]},
        {**pattern, "inputs": [{"id": "x", "property": "n_clicks"}, []]},
        {**pattern, "inputs": [[{"id": "not-a-dict", "property": "n_clicks", "value": 1}], []]},
        # a pattern item whose index is not a number
        {
            **pattern,
            "inputs": [[{"id": {"type": "f-item", "index": "abc"}, "property": "n_clicks", "value": 1}], []],
            "changedPropIds": ['{"index":"abc","type":"f-item"}.n_clicks'],
        },
    ]
    with caplog.at_level(logging.INFO):
        statuses = [_raw(app, b) for b in bad]
    assert statuses == [400] * len(bad)
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert _raw(app, good) == 200


def test_oversized_requests_are_refused(app: dash.Dash) -> None:
    body = callback_body(app, "k-grid.getRowsResponse", _grid({"startRow": 0}))
    body["inputs"][0]["value"]["filterModel"] = {"name": {"type": "contains", "filter": "x" * 2_000_000}}
    assert _raw(app, body) == 413


def test_deeply_nested_bodies_are_a_quiet_400(app: dash.Dash, caplog: pytest.LogCaptureFixture) -> None:
    good = callback_body(app, "f-rule.options", {"profile.value": "p0"})
    pattern = callback_body(app, "finding-sel.data", {}, None)
    nested = json.loads("[" * 99 + "]" * 99)
    deep_id = '{"index":' + "[" * 5_000 + "1" + "]" * 5_000 + ',"type":"f-item"}.n_clicks'
    bodies: list[str | dict[str, Any]] = [
        "[" * 50_000,  # 50 KB of `[`: a RecursionError, answered 500, before
        '{"a":' * 20_000,
        {**good, "inputs": [{"id": "profile", "property": "value", "value": nested}]},
        {**pattern, "changedPropIds": [deep_id]},  # nesting inside a string Dash parses again
    ]
    with caplog.at_level(logging.INFO):
        statuses = [_raw(app, b) for b in bodies]
    assert statuses == [400, 400, 400, 400]
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert json_depth(json.dumps(good).encode()) < MAX_JSON_DEPTH
    assert _raw(app, good) == 200


def test_wellformed_edge_values_still_work(app: dash.Dash) -> None:
    """What the grid and plotly really send is not caught by the checks."""
    # an out-of-range finding index after switching profiles: nothing selected, not an error
    out, _ = post_callback(app, "f-detail.children", {"profile.value": "p0", "finding-sel.data": 99})
    assert "Select a finding" in json.dumps(out)
    # dragging one end of the time axis sends only that end: the other comes from the drawn window
    out, _ = post_callback(
        app, "timeline.figure", _timeline({"xaxis.range[1]": 50.0}, [10.0, 900.0]), "timeline.relayoutData"
    )
    assert out["tl-window"]["data"] == [10.0, 50.0]
    assert post_callback(
        app, "timeline.figure", _timeline({"xaxis.range[0]": 5.0}), "timeline.relayoutData"
    ) == ({}, 0)
    # floats for row indexes (JavaScript numbers) and an incomplete range filter while typing
    filt = {"duration_us": {"filterType": "number", "type": "inRange", "filter": 5}}
    out, _ = post_callback(
        app, "k-grid.getRowsResponse", _grid({"startRow": 0.0, "endRow": 10.0, "filterModel": filt})
    )
    assert out["k-grid"]["getRowsResponse"]["rowCount"] == 400
    # a pattern click on a finding item
    body = callback_body(app, "finding-sel.data", {}, None)
    body["inputs"] = [[{"id": {"type": "f-item", "index": 1}, "property": "n_clicks", "value": 1}], []]
    body["changedPropIds"] = ['{"index":1,"type":"f-item"}.n_clicks']
    resp = app.server.test_client().post("/_dash-update-component", json=body)
    assert resp.status_code == 200 and json.loads(resp.data)["response"]["finding-sel"]["data"] == 1


# --- long names -----------------------------------------------------------------------------


def test_a_5000_character_kernel_name_is_shortened_with_the_full_name_as_tooltip(app: dash.Dash) -> None:
    out, _ = post_callback(app, "chip-info.children", {"profile.value": "p0"})
    options = out["d-kernel"]["options"]
    long_opt = next(o for o in options if o.get("title") == LONG)
    assert len(long_opt["label"]) == V.NAME_LIMIT and long_opt["label"].endswith("…")
    # the value, too, is short: Dash's dropdown indexes every substring of every value
    assert all(len(o["value"]) <= V.NAME_LIMIT and len(o["label"]) <= V.NAME_LIMIT for o in options)
    # picking it opens that kernel's detail
    detail, _ = post_callback(
        app,
        "d-info.children",
        {"profile.value": "p0", "shown-detail.data": "detail", "d-kernel.value": long_opt["value"]},
    )
    launches = store_of(app).get("p0").kernels["name"].eq(LONG).sum()  # type: ignore[union-attr]
    assert f'"{launches:,}"' in json.dumps(detail) and "Pick a kernel" not in json.dumps(detail)


def test_a_long_name_in_findings_and_ir_lists_is_shortened(app: dash.Dash) -> None:
    out, _ = post_callback(app, "f-list.children", {"profile.value": "p0", "shown-findings.data": "findings"})
    text = json.dumps(out)
    # the full name appears only in title attributes (tooltips), never as shown text
    assert text.count(LONG) == 2  # the kernel-name span and the message, both as titles
    spans = [c for item in out["f-list"]["children"] for c in item["props"]["children"]]
    name_span = next(s for s in spans if s["props"].get("className") == "kernel-name")
    assert name_span["props"]["title"] == LONG and len(name_span["props"]["children"]) <= 3 * V.NAME_LIMIT
    out, _ = post_callback(app, "ir-kernel.options", {"profile.value": "p0"})
    assert out["ir-kernel"]["options"] == [V.name_option(LONG)]
    assert out["ir-kernel"]["value"] == V.name_value(LONG) and len(out["ir-kernel"]["value"]) <= V.NAME_LIMIT
    # and the IR view finds the kernel its short value stands for
    panes, _ = post_callback(
        app,
        "ir-data.data",
        {"profile.value": "p0", "shown-ir.data": "ir", "ir-kernel.value": out["ir-kernel"]["value"]},
    )
    assert [p["id"] for p in panes["ir-data"]["data"]["panes"]] == ["ir-tvmscript", "ir-final", "ir-ascendc"]


def test_name_values_round_trip() -> None:
    names = ["short", LONG, LONG + "y"]
    assert [V.name_from_value(V.name_value(n), names) for n in names] == names
    assert V.name_value(LONG) != V.name_value(LONG + "y")
    assert V.name_from_value("nothing", names) is None


# --- the server banner ----------------------------------------------------------------------


def _serve(app: dash.Dash) -> Iterator[int]:
    """`serve`'s own server on a free port, for the length of a test."""
    server = make_http_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture()
def served(app: dash.Dash) -> Iterator[int]:
    yield from _serve(app)


def _get(port: int, host: str) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/", headers={"Host": host})
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp


def test_the_server_header_names_no_version(served: int) -> None:
    ok = _get(served, f"localhost:{served}")
    assert ok.status == 200 and ok.getheader("Server") == "tilescope"
    refused = _get(served, "evil.example")
    assert refused.status == 400 and refused.getheader("Server") == "tilescope"
    # a request Werkzeug itself rejects (malformed request line) goes through the same banner
    with socket.create_connection(("127.0.0.1", served), timeout=10) as sock:
        # four words: http.server answers it itself; only the request line is sent, so none is left
        # unread when the server closes (which would reset the connection)
        sock.sendall(b"GET / x HTTP/1.1\r\n")
        head = sock.recv(4096).decode("latin-1")
    assert head.startswith("HTTP/1.1 400") and "Server: tilescope\r\n" in head
    assert "Werkzeug" not in head and "Python" not in head


@pytest.fixture()
def served_briefly(app: dash.Dash, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """The server with a 0.5 s read timeout instead of READ_TIMEOUT_S."""
    monkeypatch.setattr(QuietRequestHandler, "timeout", 0.5)
    yield from _serve(app)


def _drained(sock: socket.socket) -> bytes:
    """What the server sends until it closes the connection (a timeout here: it never did)."""
    out = b""
    while chunk := sock.recv(4096):
        out += chunk
    return out


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_silent_and_half_sent_connections_are_dropped(
    served_briefly: int, caplog: pytest.LogCaptureFixture
) -> None:
    port = served_briefly
    before = threading.active_count()
    head = (f"POST /_dash-update-component HTTP/1.1\r\nHost: localhost:{port}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n[1,").encode()
    with caplog.at_level(logging.INFO):
        silent = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(5)]
        half_line = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3)]
        half_body = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3)]
        for s in half_line:
            s.sendall(b"GET / HT")
        for s in half_body:
            s.sendall(head)
        try:
            assert all(_drained(s) == b"" for s in silent + half_line)  # closed, nothing said
            for s in half_body:
                assert _drained(s).startswith(b"HTTP/1.1 400 ")  # the body never came: a 4xx, closed
        finally:
            for s in silent + half_line + half_body:
                s.close()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before  # no thread left holding a connection
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert _get(port, f"localhost:{port}").status == 200
