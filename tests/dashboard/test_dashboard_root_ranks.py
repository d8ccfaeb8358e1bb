"""The Ranks tab for runs of several ranks found under `--root` (not named on the command line):
listed without loading, built on first pick inside the roots, their rank rows opening that rank.

A root holding a copy of the bundled 8-rank sample (slow rank 3, slow link 5->6) and a two-device
msprof PROF_; the real 2-rank gpt3 capture (rank 0's kernel table truncated) from its own folder.
The callbacks are driven through Dash's endpoint, as the browser sends them."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import dash
import pytest
from dash import dcc

from tilescope.cli import main
from tilescope.dashboard import data as D
from tilescope.dashboard import ranks as R
from tilescope.dashboard.app import create_app, store_of
from tilescope.dashboard.paths import MAX_SCAN_DEPTH, RootSet, discover_runs
from tilescope.io.bad_rows import STRICT_ENV

from support import REPO_ROOT
from support.dash_calls import callback_body, post_callback

REPO = REPO_ROOT
SAMPLE = REPO / "sample_traces" / "cluster_8rank"
RUN8 = "0:cluster_8rank"
SLOW_RANK = 3


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cluster_8rank/ (copied), msprof/PROF_.../ (devices 0 and 1), a single-rank folder, and a
    link to a run of 8 ranks outside the root (the repository's sample)."""
    from support.profiles import write_two_device_prof

    top = tmp_path_factory.mktemp("served")
    shutil.copytree(SAMPLE, top / "cluster_8rank")
    write_two_device_prof(top / "msprof")
    shutil.copytree(SAMPLE / "node0_1000_20260101000000000_ascend_pt", top / "one" / "r0_ascend_pt")
    (top / "linked").symlink_to(SAMPLE, target_is_directory=True)
    return top


@pytest.fixture(scope="module")
def app(root: Path) -> dash.Dash:
    return create_app([], roots=[root])


def _find(component: Any, wanted: str) -> Any:
    """The component of id `wanted` in a layout tree."""
    if getattr(component, "id", None) == wanted:
        return component
    children = getattr(component, "children", None)
    for child in children if isinstance(children, list) else [children]:
        if child is not None and not isinstance(child, str | int | float):
            found = _find(child, wanted)
            if found is not None:
                return found
    return None


def _pick_row(app: dash.Dash, run: object, rank: int) -> dict[str, Any]:
    """What the browser sends when rank `rank`'s row of run `run` is clicked."""
    body = callback_body(app, "profile.value", {"r-run.value": run}, "r-heatmap.clickData")
    row_id = {"type": R.ROW_TYPE, "index": rank}
    body["inputs"][0] = [{"id": row_id, "property": "n_clicks", "value": 1}]
    body["changedPropIds"] = [json.dumps(row_id, separators=(",", ":"), sort_keys=True) + ".n_clicks"]
    return body


def _ranks_view(app: dash.Dash, run: object) -> dict[str, Any]:
    out, _size = post_callback(app, "r-info.children", {"r-run.value": run, "shown-ranks.data": "ranks"})
    return out


def test_discovery_lists_runs_of_several_ranks_and_no_link_out(root: Path) -> None:
    found = discover_runs(RootSet.of([root]))
    prof = next((root / "msprof").glob("PROF_*")).name
    # the 8 rank folders; the PROF_'s two devices (not again as its parent msprof/, one PROF_);
    # not one/ (a single rank), not linked/ (a link: the scan follows none)
    assert found == [
        (RUN8, f"{root.name}/cluster_8rank", 8),
        (f"0:msprof/{prof}", f"{root.name}/msprof/{prof}", 2),
    ]


def test_discovery_is_bounded(tmp_path: Path, sample_generator: ModuleType) -> None:
    from generator.cluster import ClusterSpec, write_cluster_run

    deep = tmp_path.joinpath(*["d"] * (MAX_SCAN_DEPTH + 1))
    write_cluster_run(deep, ClusterSpec(ranks=2, slow_rank=None, slow_link=None))
    for i in range(3):
        write_cluster_run(tmp_path / f"run{i}", ClusterSpec(ranks=2, slow_rank=None, slow_link=None))
    roots = RootSet.of([tmp_path])
    assert [key for key, _label, _n in discover_runs(roots)] == ["0:run0", "0:run1", "0:run2"]
    assert len(discover_runs(roots, limit=2)) == 2


def test_the_ranks_tab_lists_the_root_runs(app: dash.Dash, root: Path) -> None:
    layout = app.layout()  # built per page load (app._layout)
    tabs = _find(layout, "tabs")
    assert [t.value for t in tabs.children][:2] == ["overview", "ranks"]
    picker = _find(layout, "r-run")
    assert isinstance(picker, dcc.Dropdown) and getattr(picker, "value", None) == RUN8
    assert [o["label"] for o in getattr(picker, "options", [])] == [
        f"{root.name}/cluster_8rank (8 ranks, root)",
        f"{root.name}/msprof/{next((root / 'msprof').glob('PROF_*')).name} (2 ranks, root)",
    ]
    assert store_of(app).clusters() == []  # listed, not loaded: nothing is built before a pick


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_a_root_run_shows_the_reports_cluster_section(app: dash.Dash, root: Path) -> None:
    out = _ranks_view(app, RUN8)
    assert "8 ranks, 8 with a readable kernel table" in json.dumps(out["r-info"])
    assert "Slow rank: 3 (TS601)" in json.dumps(out["r-info"])
    rows = out["r-table"]["children"]["props"]["children"][1]["props"]["children"]
    assert [r["props"]["id"]["index"] for r in rows] == list(range(8))
    slow = [r for r in rows if "slow" in r["props"]["className"].split()]
    assert [r["props"]["id"]["index"] for r in slow] == [SLOW_RANK]
    # the numbers are analyze's and the command line's for the same folder
    run = store_of(app).cluster(RUN8)
    assert run is not None
    (given,) = store_of(create_app([root / "cluster_8rank"])).clusters()
    assert run.section == given.section and run.slow_rank == SLOW_RANK
    assert [f["code"] for f in run.findings] == [f["code"] for f in given.findings]
    computing = {r["rank"]: r["computing_us"] for r in run.section["ranks"]}
    assert max(computing, key=lambda r: computing[r]) == SLOW_RANK
    heat, _ = post_callback(app, "r-heatmap.figure",
                            {"r-run.value": RUN8, "r-metric.value": "computing_us",
                             "shown-ranks.data": "ranks"})
    assert "slow rank 3" in heat["r-heatmap"]["figure"]["layout"]["title"]["text"]
    matrix, _ = post_callback(app, "r-matrix.figure",
                              {"r-run.value": RUN8, "r-link-value.value": None, "shown-ranks.data": "ranks"})
    assert "slow link 5→6 (TS604)" in matrix["r-matrix"]["figure"]["layout"]["title"]["text"]


def test_a_rank_row_of_a_root_run_opens_that_rank(app: dash.Dash) -> None:
    client = app.server.test_client()
    resp = client.post("/_dash-update-component", json=_pick_row(app, RUN8, SLOW_RANK))
    assert resp.status_code == 200, resp.get_data(as_text=True)[:500]
    out = json.loads(resp.get_data())["response"]
    key = f"{RUN8}#{SLOW_RANK}"
    assert out["profile"]["value"] == key and list(out["tabs"].values()) == ["overview"]
    # the picker now lists the run's ranks, so the value it is given shows as a label
    labels = {o["value"]: o["label"] for o in out["profile"]["options"]}
    assert labels[key] == "cluster_8rank (rank 3) (root)"
    assert [k for k in labels if k.startswith(f"{RUN8}#")] == [f"{RUN8}#{r}" for r in range(8)]
    # that key opens rank 3 (not rank 0, the first profile of the folder), loaded as in the run
    overview, _ = post_callback(app, "chip-info.children", {"profile.value": key})
    assert overview["load-error"]["children"] == ""
    entry = store_of(app).get(key)
    assert entry is not None and entry.profile.rank == SLOW_RANK and entry.label == "cluster_8rank (rank 3)"
    slow = entry.kernels[entry.kernels["name"] == "MatMulV2"]["duration_us"]
    fast = store_of(app).get(f"{RUN8}#0")
    assert fast is not None and fast.profile.rank == 0
    fast_mm = fast.kernels[fast.kernels["name"] == "MatMulV2"]["duration_us"]
    assert slow.sum() == pytest.approx(1.5 * fast_mm.sum())  # the planted x1.5 on MatMulV2
    # and the table marks the rank shown
    out, _ = post_callback(app, "r-info.children",
                           {"r-run.value": RUN8, "profile.value": key, "shown-ranks.data": "ranks"})
    rows = out["r-table"]["children"]["props"]["children"][1]["props"]["children"]
    assert [r["props"]["id"]["index"] for r in rows if "shown" in r["props"]["className"].split()] == [3]


def test_the_devices_of_a_root_prof_open_each_device(app: dash.Dash, root: Path) -> None:
    prof = next((root / "msprof").glob("PROF_*")).name
    run = store_of(app).cluster(f"0:msprof/{prof}")
    assert run is not None and run.slow_rank == 1
    assert run.rank_keys == {0: f"0:msprof/{prof}#0", 1: f"0:msprof/{prof}#1"}
    out = json.loads(app.server.test_client().post(
        "/_dash-update-component", json=_pick_row(app, run.key, 1)).get_data())["response"]
    assert out["profile"]["value"] == run.rank_keys[1]
    entry = store_of(app).get(run.rank_keys[1])
    assert entry is not None and entry.profile.rank == 1
    # write_two_device_prof: MatMulV2 270 µs on device 1 (180 on device 0), twice each
    assert list(entry.kernels.loc[entry.kernels["name"] == "MatMulV2", "duration_us"]) == [270.0, 270.0]
    first = store_of(app).get(run.rank_keys[0])
    assert first is not None and first.profile.rank == 0
    assert list(first.kernels.loc[first.kernels["name"] == "MatMulV2", "duration_us"]) == [180.0, 180.0]


def test_a_root_run_with_a_rank_that_fails_shows_it(
    tmp_path: Path, sample_generator: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    from generator.cluster import ClusterSpec, write_cluster_run

    monkeypatch.setenv(STRICT_ENV, "1")  # `serve --strict`: the short row refuses its rank's table
    ranks = write_cluster_run(tmp_path / "r4", ClusterSpec(ranks=4, slow_rank=2, slow_link=None))
    kd = ranks[2] / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = kd.read_text().splitlines()
    # every row from row 3 on one field short: more unreadable rows than readable ones refuse
    # the table (one short row alone is skipped with a note: tests/io/test_bad_rows.py)
    lines[3:] = [line.rsplit(",", 1)[0] for line in lines[3:]]
    kd.write_text("\n".join(lines) + "\n")
    app = create_app([], roots=[tmp_path])
    out = _ranks_view(app, "0:r4")
    assert "4 ranks, 3 with a readable kernel table" in json.dumps(out["r-info"])
    rows = out["r-table"]["children"]["props"]["children"][1]["props"]["children"]
    (left,) = [r for r in rows if "left-out" in r["props"]["className"].split()]
    assert "id" not in left["props"]  # nothing to open
    assert left["props"]["children"][0]["props"]["children"] == "2"
    assert "row 3 (line 4)" in json.dumps(left)
    run = store_of(app).cluster("0:r4")
    assert run is not None and sorted(run.rank_keys) == [0, 1, 3]


def test_the_real_two_rank_run_under_a_root(real_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = real_traces / "gpt3_2rank_memoryl0"
    if not path.is_dir():
        pytest.skip("needs ../shared/traces/real/gpt3_2rank_memoryl0")
    monkeypatch.setenv(STRICT_ENV, "1")  # `serve --strict`: rank 0's short row refuses its table
    app = create_app([], roots=[real_traces])
    picker = _find(app.layout(), "r-run")
    # every multi-rank run under the root is offered, in folder order (../shared grows new sets)
    assert {"label": "real/gpt3_2rank_memoryl0 (2 ranks, root)",
            "value": "0:gpt3_2rank_memoryl0"} in picker.options
    values = [o["value"] for o in picker.options]
    assert values == sorted(values) and all((real_traces / v[2:]).is_dir() for v in values)
    out = _ranks_view(app, "0:gpt3_2rank_memoryl0")
    rows = out["r-table"]["children"]["props"]["children"][1]["props"]["children"]
    assert [r["props"]["className"] for r in rows] == ["rank-row left-out", "rank-row"]
    assert "kernel_details.csv: row 16 (line 17): expected 32 fields" in json.dumps(rows[0])
    run = store_of(app).cluster("0:gpt3_2rank_memoryl0")
    assert run is not None and run.rank_keys == {1: "0:gpt3_2rank_memoryl0#1"}
    assert [round(r["step_us"], 3) for r in run.section["ranks"]] == [291698.098, 294586.56]
    resp = app.server.test_client().post("/_dash-update-component",
                                         json=_pick_row(app, "0:gpt3_2rank_memoryl0", 1))
    assert json.loads(resp.get_data())["response"]["profile"]["value"] == "0:gpt3_2rank_memoryl0#1"
    entry = store_of(app).get("0:gpt3_2rank_memoryl0#1")
    assert entry is not None and entry.profile.rank == 1
    # rank 0 left out: its key opens nothing (one line), never another rank
    with pytest.raises(D.PathRejected, match="no rank 0"):
        store_of(app).get("0:gpt3_2rank_memoryl0#0")


def test_a_rank_of_a_built_root_run_loads_its_own_folder_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the run is built, a rank row opens that rank from the folder its row names: one
    kernel table loaded, not the run's eight. The same profile as from the whole run."""
    run = tmp_path / "job"
    shutil.copytree(SAMPLE, run)
    (run / "manifest.json").unlink()  # a real run has none (a sample's is shared by its ranks)
    app = create_app([], roots=[tmp_path])
    store = store_of(app)
    built = store.cluster("0:job")
    assert built is not None and built.slow_rank == SLOW_RANK
    loaded: list[Path] = []
    real_load = D.load_path

    def recording(path: Path, chip: str | None) -> Any:
        loaded.append(path)
        return real_load(path, chip)

    monkeypatch.setattr(D, "load_path", recording)
    entry = store.get(f"0:job#{SLOW_RANK}")
    assert entry is not None and entry.profile.rank == SLOW_RANK
    assert [p.name for p in loaded] == ["node0_1003_20260101000000000_ascend_pt"]
    assert entry.label == "job (rank 3)"
    whole = next(p for p in real_load(run, None) if p.rank == SLOW_RANK)
    assert entry.profile.kernels["duration_us"].tolist() == whole.kernels["duration_us"].tolist()
    # a run not built yet (or a sample sharing its manifest.json) is loaded whole, as before
    loaded.clear()
    other = tmp_path / "job2"
    shutil.copytree(SAMPLE, other)
    assert store.get("0:job2#3") is not None and [p.name for p in loaded] == ["job2"]


# ---- untrusted keys -----------------------------------------------------------------------------


@pytest.fixture
def escape_root(tmp_path: Path, sample_generator: ModuleType) -> Iterator[tuple[Path, list[Path]]]:
    """A root with a link to a 2-rank run outside it, a run whose rank links a file outside, and a
    plain 2-rank run; yields the root and the paths the loader was asked to read."""
    from generator.cluster import ClusterSpec, write_cluster_run

    spec = ClusterSpec(ranks=2, slow_rank=None, slow_link=None)
    outside = tmp_path / "outside"
    write_cluster_run(outside, spec)
    top = tmp_path / "served"
    (top / "escape").parent.mkdir()
    (top / "escape").symlink_to(outside, target_is_directory=True)
    write_cluster_run(top / "ok", spec)  # the positive control: this one is loaded
    ranks = write_cluster_run(top / "sneaky", spec)
    kd = ranks[1] / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    kd.unlink()
    kd.symlink_to(outside / ranks[1].name / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    loaded: list[Path] = []
    real_load = D.load_path

    def recording(path: Path, chip: str | None) -> Any:
        loaded.append(path)
        return real_load(path, chip)

    D.load_path = recording
    try:
        yield top, loaded
    finally:
        D.load_path = real_load


BAD_RUNS: list[object] = [
    "0:escape", "0:../outside", "0:%2e%2e/outside", "0:%252e%252e%252foutside", "0:/etc", "1:sneaky",
    "0:sneaky", "0:sneaky/" + "x" * 300, "9" * 5000 + ":x", "c9", 5, ["0:sneaky"], {"a": 1}, True,
]


def test_an_escaping_run_key_is_one_line_in_the_page(escape_root: tuple[Path, list[Path]]) -> None:
    top, loaded = escape_root
    app = create_app([], roots=[top])
    client = app.server.test_client()
    for bad in BAD_RUNS:
        out = _ranks_view(app, bad)
        message = out["r-info"]["children"]["props"]["children"]
        assert message.startswith("Cannot open this run: ") and "\n" not in message, bad
        assert "Traceback" not in message and out["r-table"]["children"] == []
        heat, _ = post_callback(app, "r-heatmap.figure",
                                {"r-run.value": bad, "r-metric.value": None, "shown-ranks.data": "ranks"})
        note = heat["r-heatmap"]["figure"]["layout"]["annotations"][0]["text"]
        assert note.startswith("Cannot open this run"), bad
        # a click with such a run: a quiet 400 (the page never sends one), no traceback
        resp = client.post("/_dash-update-component", json=_pick_row(app, bad, 0))
        assert resp.status_code == 400 and b"Traceback" not in resp.data, bad
    said = {str(b): _ranks_view(app, b)["r-info"]["children"]["props"]["children"] for b in BAD_RUNS[:2]}
    assert said["0:escape"].endswith("escape: leads outside the directories being served")
    assert said["0:../outside"].endswith("'..' is not accepted")
    sneaky = _ranks_view(app, "0:sneaky")["r-info"]["children"]["props"]["children"]
    assert "kernel_details.csv: leads outside the directories being served" in sneaky
    assert loaded == []  # check_tree refused each before a loader opened anything
    assert "2 ranks, 2 with a readable kernel table" in json.dumps(_ranks_view(app, "0:ok")["r-info"])
    assert loaded == [(top / "ok").resolve()]


def test_an_escaping_rank_key_is_one_line_in_the_page(app: dash.Dash) -> None:
    for bad in (f"{RUN8}#99", f"{RUN8}#-1", f"{RUN8}#x", f"{RUN8}#" + "9" * 5000, "0:linked#3",
                "0:../cluster_8rank#3", f"{RUN8}#3#3"):
        out, _ = post_callback(app, "chip-info.children", {"profile.value": bad})
        message = out["load-error"]["children"]
        assert message.startswith("Cannot open this profile: ") and "\n" not in message, bad
    assert store_of(app).get(f"{RUN8}#1") is not None  # the good key still opens


def test_root_runs_are_built_once_and_kept_bounded(
    tmp_path: Path, sample_generator: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    from generator.cluster import ClusterSpec, write_cluster_run

    for i in range(D.MAX_LAZY_ENTRIES + 1):
        write_cluster_run(tmp_path / f"run{i}", ClusterSpec(ranks=2, slow_rank=None, slow_link=None))
    store = store_of(create_app([], roots=[tmp_path]))
    built: list[str] = []
    real_build = D.build_cluster_entry

    def counting(key: str, *args: Any) -> Any:
        built.append(key)
        return real_build(key, *args)

    monkeypatch.setattr(D, "build_cluster_entry", counting)
    # the tab's three views ask for a run at once: one build, the same entry for all
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(store.cluster("0:run0"))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert built == ["0:run0"] and len({id(r) for r in results}) == 1
    assert store.cluster("0:./run0/") is results[0]  # however the request spells the path
    for i in range(1, D.MAX_LAZY_ENTRIES + 1):
        store.cluster(f"0:run{i}")
    assert store.cluster("0:run0") is not results[0]  # the least recently used was dropped
    assert built.count("0:run0") == 2 and len(built) == D.MAX_LAZY_ENTRIES + 2


def test_serve_check_counts_the_root_runs(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--root", str(root), "--check", "--port", "8123"]) == 0
    out = capsys.readouterr()
    # profiles: the 8-rank sample (its manifest.json), one/r0_ascend_pt, the PROF_
    assert out.out == ("tilescope: check passed, the --root directories can be listed (3 profile(s) and "
                       "2 run(s) of several ranks under --root); not serving (--check): would listen on "
                       "http://127.0.0.1:8123/\n")
    assert f"tilescope: {root.name}/cluster_8rank: 8 ranks under --root, in the Ranks tab" in out.err
