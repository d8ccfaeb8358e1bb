"""View builders, IR rendering, large-profile payloads and the `serve` command."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import plotly.io as pio
import pytest
from dash import html

from tilescope.cli import main
from tilescope.dashboard import ir_view
from tilescope.dashboard import views as V
from tilescope.dashboard.data import make_entry
from tilescope.dashboard.ir_view import Stage, highlight_lines, load_stages, mark_locations, stage_data
from tilescope.dashboard.paths import RootSet
from tilescope.dashboard.query import kernel_page
from tilescope.dashboard.timeline_lanes import build_lanes, timeline_window

from support import REPO_ROOT
from support.synthetic import HOSTILE, synthetic_profile, synthetic_report, write_ir_bundle

ROOT = REPO_ROOT
MB = 1024 * 1024


def _texts(component: Any) -> list[str]:
    """Every string child in a component tree (what React will render as text nodes)."""
    if isinstance(component, str):
        return [component]
    if isinstance(component, list | tuple):
        return [t for c in component for t in _texts(c)]
    children = getattr(component, "children", None)
    return _texts(children) if children is not None else []


def test_highlight_keeps_every_character_and_line() -> None:
    code = 'for i in range(3):\n    s = "<b>x</b>"  # note\n\nint x = 1;'
    lines = highlight_lines(code, "python")
    assert ["".join(t for _, t in ln) for ln in lines] == code.split("\n")
    classes = {c for ln in lines for c, _ in ln}
    assert {"k", "s2", "c1"} <= classes


def test_ir_pane_data_carries_code_as_text_runs(tmp_path: Path) -> None:
    ir = write_ir_bundle(tmp_path / "ir", hostile=True)
    stages = load_stages(tmp_path / "ir", ir, "main", RootSet.of([tmp_path]))
    assert [s.stage for s in stages] == ["tvmscript", "final", "ascendc"]
    mark_locations(
        stages, [{"stage": "tvmscript", "file": "ir/tvmscript.py", "line": 6}], ir["line_map"], "main"
    )
    assert stages[0].marked == {6} and stages[2].marked == {9}  # carried to Ascend C by the line map
    assert stages[1].marked == set()
    pane = stage_data(stages[0], "ir-tvmscript")
    # per line, flat (class, text) runs: the text of every line comes back whole, the hostile
    # comment as literal text for ir_view.js to set with textContent
    texts = ["".join(line[1::2]) for line in pane["lines"]]
    assert texts == stages[0].text.rstrip("\n").split("\n")
    assert any(HOSTILE in t for t in texts)
    assert set(c for line in pane["lines"] for c in line[0::2]) <= ir_view.COLOURED | {""}
    assert pane["first"] == 1 and pane["marked"] == [6]
    assert pane["summary"] == "lines 6–6 marked"


def test_big_stage_sends_a_window_around_the_mark(tmp_path: Path) -> None:
    text = "".join(f"x_{i} = {i}  # line {i + 1}\n" for i in range(20_000))
    stage = Stage("ascendc", "Ascend C", "kernel.cpp", text, "cpp", marked={15_000})
    pane = stage_data(stage, "ir-ascendc")
    assert len(pane["lines"]) == 1000 and pane["first"] < 15_000 < pane["first"] + 999
    assert pane["marked"] == [15_000]
    assert "".join(pane["lines"][15_000 - pane["first"]][1::2]) == "x_14999 = 14999  # line 15000"
    assert "lines 14667–15666 of 20000 shown" in pane["summary"]
    assert len(json.dumps(pane)) < 0.2 * MB


def test_a_stage_file_is_read_and_highlighted_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ir = write_ir_bundle(tmp_path / "ir")
    roots = RootSet.of([tmp_path])
    ir_view._highlighted.cache_clear()  # another test may have highlighted the same text
    calls: list[str] = []
    real = ir_view.highlight_lines

    def counted(text: str, lexer: str) -> list[list[tuple[str, str]]]:
        calls.append(lexer)
        return real(text, lexer)

    monkeypatch.setattr(ir_view, "highlight_lines", counted)
    for marks in ({5}, {6}, set()):  # three findings marking the same file
        stages = load_stages(tmp_path / "ir", ir, "main", roots)
        for s in stages:
            s.marked = set(marks)
            stage_data(s, s.stage)
    assert len(calls) == 3  # one per file, not one per file and finding
    # a rewritten file is read and highlighted again
    path = tmp_path / "ir" / "tvmscript.py"
    path.write_text(path.read_text() + "# appended\n", encoding="utf-8")
    stages = load_stages(tmp_path / "ir", ir, "main", roots)
    assert stages[0].text.endswith("# appended\n")
    stage_data(stages[0], "t")
    assert len(calls) == 4


def plotly_json_encoder() -> Any:
    from plotly.utils import PlotlyJSONEncoder

    return PlotlyJSONEncoder


def test_locations_in_another_kernel_do_not_mark(tmp_path: Path) -> None:
    stage = Stage("tvmscript", "t", "pv/tvmscript.py", "a\nb\nc", "python")
    mark_locations(
        [stage],
        [
            {"stage": "tvmscript", "file": "ir/qk/tvmscript.py", "line": 2},
            {"stage": "tvmscript", "file": "ir/pv/tvmscript.py", "line": 3},
        ],
    )
    assert stage.marked == {3}


def test_finding_item_and_detail_render_hostile_names_as_text() -> None:
    f = {
        "code": "TS201",
        "slug": "memory-bound-kernel",
        "severity": "high",
        "kernels": [HOSTILE],
        "message": f"{HOSTILE} is slow",
        "evidence": {HOSTILE: 1.0},
        "recommendation": HOSTILE,
        "est_saving_us": 12.0,
        "share_of_total": 0.1,
        "locations": [],
    }
    item = V.finding_item(0, f, "f-item")
    assert HOSTILE in _texts(item)
    detail = html.Div(V.finding_detail(f))
    assert _texts(detail).count(HOSTILE) >= 3
    assert "dangerously" not in json.dumps(detail.to_plotly_json(), default=str)


@pytest.fixture(scope="module")
def big_entry() -> Any:
    # 200,000 launches keep the unit suite quick; the 1,000,000 figures are in the final report.
    p = synthetic_profile(200_000, names=2000, streams=4, hostile=True)
    return make_entry("big", "big", p, synthetic_report(p, hostile=True))


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_large_profile_pages_stay_small(big_entry: Any) -> None:
    page = kernel_page(
        big_entry, {"startRow": 150_000, "endRow": 150_100, "sortModel": [{"colId": "name", "sort": "desc"}]}
    )
    assert page["rowCount"] == 200_000 and len(page["rowData"]) == 100
    assert len(json.dumps(page)) < 100_000
    huge = kernel_page(big_entry, {"startRow": 0, "endRow": 10_000_000})
    assert len(huge["rowData"]) == 1000  # one request can never pull the table


def test_large_profile_figures_stay_under_a_few_mb(big_entry: Any) -> None:
    from tilescope.dashboard.figures_roofline import roofline_figure
    from tilescope.dashboard.figures_timeline import timeline_figure

    lanes = build_lanes(big_entry)
    seg = timeline_window(lanes)
    assert seg.merged and seg.total_in_window <= 6000
    fig = timeline_figure(
        seg.lane, seg.start, seg.end, seg.text, seg.category, [ln.label for ln in lanes], seg.merged
    )
    sizes = {
        "timeline": len(pio.to_json(fig)),
        "roofline": len(pio.to_json(roofline_figure(big_entry.by_name, big_entry.profile.chip))),
        "overview": sum(len(pio.to_json(f)) for f in V.overview_figures(big_entry)),
        "detail": sum(len(pio.to_json(f)) for f in V.detail_figures(big_entry, "kernel_001")),
    }
    assert all(size < 3 * MB for size in sizes.values()), sizes


def test_serve_check_prints_the_url(capsys: pytest.CaptureFixture[str]) -> None:
    sample = ROOT / "sample_traces" / "attention_fused"
    if not sample.is_dir():
        pytest.skip("sample_traces/attention_fused not present")
    assert main(["serve", str(sample), "--check", "--port", "8123"]) == 0
    out = capsys.readouterr()
    # --check serves nothing and must not say it does (issue #15 item 9)
    assert out.out == ("tilescope: check passed, 1 profile(s) from 1 path(s) loaded; not serving (--check): "
                       "would listen on http://127.0.0.1:8123/\n")


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_serve_check_counts_the_ranks_of_a_path(capsys: pytest.CaptureFixture[str]) -> None:
    sample = ROOT / "sample_traces" / "cluster_8rank"
    assert main(["serve", str(sample), "--check", "--port", "8123"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("tilescope: check passed, 8 profile(s) from 1 path(s) loaded;")
    assert "cluster_8rank: 8 ranks side by side in the Ranks tab" in out.err


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_serve_check_exits_cleanly_in_a_fresh_process() -> None:
    # The warm-up thread may still be inside DuckDB when the command returns; the process must
    # wait for it rather than abort (exit 134, "terminate called without an active exception").
    sample = ROOT / "sample_traces" / "attention_fused"
    if not sample.is_dir():
        pytest.skip("sample_traces/attention_fused not present")
    done = subprocess.run(
        [sys.executable, "-m", "tilescope.cli", "serve", str(sample), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.endswith("not serving (--check): would listen on http://127.0.0.1:8050/\n")


@pytest.mark.parametrize(
    "argv",
    [
        ["serve"],
        ["serve", "/no/such/dir"],
        ["serve", "--root", "/no/such/dir"],
        ["serve", "--root", ".", "--port", "70000"],
    ],
)
def test_serve_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.startswith("tilescope: error: ")


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_serve_runs_in_the_background_on_localhost(tmp_path: Path) -> None:
    sample = ROOT / "sample_traces" / "attention_fused"
    if not sample.is_dir():
        pytest.skip("sample_traces/attention_fused not present")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tilescope.cli", "serve", str(sample), "--port", "0", "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("tilescope: serving on http://127.0.0.1:")
        url = line.split(" on ", 1)[1].strip()
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(url + "_dash-layout", timeout=5) as resp:
                    assert resp.status == 200 and b"profile" in resp.read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_static_findings_read_static_not_est_static() -> None:
    """#15: the findings list printed `est. {saving_text(f)}`: "est. static: no time estimate"."""
    static = {"code": "TS504", "slug": "pipeline-not-applied", "severity": "medium", "kernels": ["flash_fwd"],
              "message": "m", "saving_kind": "none", "est_saving_us": 0.0, "share_of_total": 0.0}
    timed = {**static, "code": "TS201", "saving_kind": "device", "est_saving_us": 29.159,
             "share_of_total": 0.6667}
    assert "static: no time estimate" in _texts(V.finding_item(0, static, "f-item"))
    assert not [t for t in _texts(V.finding_item(0, static, "f-item")) if "est. static" in t]
    assert "est. 29.2 µs (66.7 %)" in _texts(V.finding_item(1, timed, "f-item"))
    detail = " ".join(_texts(html.Div(V.finding_detail(static))))
    assert "Saving: static: no time estimate" in detail and "est. static" not in detail
