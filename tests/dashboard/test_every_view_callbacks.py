"""Every dashboard view on every input, without a browser (issue #15, kept fast for #23).

One app holds every sample in sample_traces/ and every real folder in ../shared/traces/real/ (those
present). A page session (support.dash_session) picks each profile and opens each tab as the page
does, sending every callback through Dash's own HTTP endpoint in the renderer's order. It fails on
any answer that is not 2xx, any figure that would draw empty axes with no words, and any view
that says nothing. Rendering, plotting and the page's own JavaScript are checked in Chromium on one
profile of each input kind (tests/browser/test_dashboard_every_view.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tilescope.dashboard import views as V
from tilescope.dashboard.app import create_app
from tilescope.dashboard.layout import RANKS_TAB, TABS
from tilescope.report.charts import TRACE_TYPES

from support import REAL_TRACES, REPO_ROOT
from support.dash_session import DashSession, blank_figure
from support.simulator import simulated_fa_bundle

pytestmark = pytest.mark.slow  # 23 profiles loaded, ~30 s: not in the quick loop

SAMPLES = REPO_ROOT / "sample_traces"
SAMPLE_NAMES = (
    "attention_unfused",
    "attention_fused",
    "tilelang_fa_bundle",
    "tilelang_fa_msprof_op",
    "tilelang_fa_msprof_op_multi",
    "bundle_ir_only_fa",
)


def inputs() -> list[Path]:
    paths = [SAMPLES / n for n in SAMPLE_NAMES if (SAMPLES / n).is_dir()]
    if REAL_TRACES.is_dir():
        paths += sorted(p for p in REAL_TRACES.iterdir() if p.is_dir())
    return paths


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> DashSession:
    # and a bundle with (generated) per-line data: the IR heat map and the in-core pipeline timeline
    simulated = simulated_fa_bundle(tmp_path_factory.mktemp("sim") / "fa_simulated")
    return DashSession(create_app([*inputs(), simulated]))


def view_problems(page: DashSession, tab: str) -> list[str]:
    """What is wrong with tab `tab` as the page holds it now."""
    if tab == "kernels":
        page.request_rows("k-grid")
    ids = page.tab_ids(tab)
    problems = list(page.bad)
    page.bad.clear()
    problems += [
        f"plot {i} shows empty axes and no message"
        for i in sorted(ids)
        if page.types.get(i) == "Graph" and blank_figure(page.value(f"{i}.figure"))
    ]
    problems += [  # a trace type the house template has no plotly_white defaults for
        f"plot {i} draws a {t} trace: add it to report.charts.TRACE_TYPES"
        for i in sorted(ids)
        if page.types.get(i) == "Graph"
        for t in {d.get("type", "scatter") for d in (page.value(f"{i}.figure") or {}).get("data") or []}
        if t not in TRACE_TYPES
    ]
    if tab == "ir":  # the panes are drawn by the page's script from ir-data
        ir = page.value("ir-data.data") or {}
        if not str(ir.get("info") or "").strip():
            problems.append("the IR view says nothing")
    elif not page.texts(ids):
        problems.append("the view shows no text at all")
    if tab == "timeline" and not page.texts(["tl-info"]):
        problems.append("the timeline says nothing")
    return problems


def test_every_view_answers_on_every_input(page: DashSession) -> None:
    store = page.app.server.config["TILESCOPE_STORE"]
    options = store.options()
    assert len(options) >= len(inputs()) + 1  # a folder of two ranks is two profiles
    assert len({o["label"] for o in options}) == len(options), "two profiles the picker cannot tell apart"
    tabs = [v for v, _ in TABS]
    if page.types.get("r-table"):  # the Ranks tab: the real runs of several ranks
        tabs.insert(1, RANKS_TAB[0])
    problems: list[str] = []
    for option in options:
        page.set("profile.value", option["value"])
        problems += [f"{option['label']} / header: {b}" for b in page.bad]
        page.bad.clear()
        for tab in tabs:
            page.set("tabs.value", tab)
            problems += [f"{option['label']} / {tab}: {p}" for p in view_problems(page, tab)]
    assert problems == [], "\n".join(problems)
    # each profile really went through every tab's callbacks: at least one per tab shown, and only
    # the shown view's (cb_tabs): 15 callbacks fired on each tab switch before, one per view
    assert len(tabs) * len(options) < page.calls < 8 * len(tabs) * len(options)


def test_the_session_sees_a_failing_view(page: DashSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: a view that raises is a 500, a figure with no data is blank."""
    first = page.app.server.config["TILESCOPE_STORE"].options()[0]["value"]
    page.set("profile.value", first)
    page.set("tabs.value", "findings")

    def broken(*_args: Any, **_kw: Any) -> Any:
        raise RuntimeError("planted")

    monkeypatch.setattr(V, "roofline_points", broken)
    monkeypatch.setattr(V, "overview_figures", lambda _entry: ({"data": [], "layout": {}},) * 4)
    page.set("tabs.value", "roofline")
    assert any(b.startswith("500 ") and "roofline" in b for b in page.bad), page.bad
    page.bad.clear()
    page.set("tabs.value", "overview")
    assert "plot ov-core shows empty axes and no message" in view_problems(page, "overview")
