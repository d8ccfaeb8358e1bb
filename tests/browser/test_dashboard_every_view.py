"""Every dashboard view, in headless Chromium, on one profile of each input kind (issue #15).

One server holds the samples and the real folders below, one per kind of input tilescope reads:
torch_npu (text with timelines, ranks; database export), run bundles with and without a profile,
msprof op (several launches), a kernel CSV alone, msprof folders (op_summary; timeline with
OpBasicInfo), an msprof SQLite export and a bare timeline. For each profile the test picks it in
the header and opens each tab, waits until no callback is in flight, and fails on any answer that
is not 2xx, any console or page error, and any view that shows blank plot axes: each plot must
draw data or say in words why there is none, and each view must show some text.

Every other input (all samples, every real folder present) goes through every view's callbacks
without a browser in tests/dashboard/test_every_view_callbacks.py; this test is what only a
browser can check: that what the callbacks send renders (Plotly, the AG Grid, the IR panes'
script) without an error. It took 135 s over all 23 profiles; one per kind is enough for that.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tilescope.dashboard.app import create_app
from tilescope.dashboard.layout import RANKS_TAB, TABS

from support.browser import CHROMIUM, LAUNCH_ARGS, VIEWPORT, needs_chromium, record_events, serve_wsgi
from support.simulator import simulated_fa_bundle

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
REAL = ROOT.parent / "shared" / "traces" / "real"
SAMPLE_NAMES = (
    "attention_unfused",  # torch_npu text export with a timeline
    "tilelang_fa_bundle",  # a run bundle: msprof op profile, IR, per-block rows
    "tilelang_fa_msprof_op_multi",  # msprof op, several launches
    "bundle_ir_only_fa",  # a bundle without a profile
)
REAL_NAMES = (
    "fa_pipeutil_29",  # kernel_details.csv alone
    "msprof_db_2023",  # msprof SQLite export
    "tilelang_sigmoid_app",  # msprof folder: op_summary, timeline, OpBasicInfo
    "torch_timeline_3670",  # a bare torch_npu timeline
    "triton_matmul_bd1024_opsum",  # msprof op_summary
    "torch_2rank_pipeutil_text",  # two torch_npu ranks (the Ranks tab)
    "torch_2rank_pipeutil_db",  # the same kind of run as a database export
)
VIEW_IDS = {  # a tab's root element: the first id of its content
    "overview": "ov-kpis",
    "kernels": "k-grid-box",
    "detail": "d-info",
    "roofline": "roofline",
    "timeline": "tl-info",
    "findings": "f-list",
    "ir": "ir-panes",
    "compare": "c-kpis",
    "ranks": "r-table",  # only with a served path of several ranks (the real 2-rank runs)
}
# Views whose content does not depend on the picked profile: Compare shows the pair its own pickers
# hold, Ranks the served runs (the picked profile only marks its row). Each browser opens them
# with its first profile: opening them again with every other showed the same page (~20 % of the
# test's time).
SAME_FOR_EVERY_PROFILE = {"compare", "ranks"}
# A run of several ranks is one profile per rank, each of the same kind as its first: the browser
# opens the first (rank 0); every rank's views are answered in test_every_view_callbacks.py.
LATER_RANK = re.compile(r" \(rank [1-9][0-9]*\)$")
QUIET_S = 0.05
POLL_MS = 25
TIMEOUT_S = 60.0

pytestmark = [pytest.mark.browser, needs_chromium]


def inputs() -> list[Path]:
    paths = [SAMPLES / n for n in SAMPLE_NAMES if (SAMPLES / n).is_dir()]
    return paths + [REAL / n for n in REAL_NAMES if (REAL / n).is_dir()]


@pytest.fixture(scope="module")
def every_input(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[dict[str, str]]]]:
    # and a bundle with (generated) per-line data: the IR heat map and the in-core pipeline timeline
    app = create_app([*inputs(), simulated_fa_bundle(tmp_path_factory.mktemp("sim") / "fa_simulated")])
    options = app.server.config["TILESCOPE_STORE"].options()
    with serve_wsgi(app.server) as url:
        yield url, options


class Callbacks:
    """Callback requests in flight and every answer that is not 2xx."""

    def __init__(self, page: Any) -> None:
        self.pending = 0
        self.last = time.monotonic()
        self.bad: list[str] = []
        page.on("request", lambda r: self._count(r, 1))
        page.on("requestfinished", lambda r: self._count(r, -1))
        page.on("requestfailed", self._failed)
        page.on("response", self._check)

    def _count(self, request: Any, step: int) -> None:
        if "_dash-update-component" in request.url:
            self.pending += step
            self.last = time.monotonic()

    def _failed(self, request: Any) -> None:
        self._count(request, -1)
        self.bad.append(f"failed {request.url}")

    def _check(self, response: Any) -> None:
        if not 200 <= response.status < 300:
            output = ""
            if "_dash-update-component" in response.url:
                output = (response.request.post_data_json or {}).get("output", "")
            self.bad.append(f"{response.status} {response.url} {output}")

    def settle(self, page: Any) -> None:
        # no request in flight, none for QUIET_S, and the renderer holds no callback still to send
        # (a chain's next callback is queued before the answer to the previous one is done with)
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            page.wait_for_timeout(POLL_MS)
            if self.pending <= 0 and time.monotonic() - self.last > QUIET_S and not page.evaluate(_QUEUED):
                return
        raise AssertionError(f"callbacks still running after {TIMEOUT_S:.0f} s")


# Callbacks dash-renderer has queued, sent or not yet applied (its redux store, as dash.testing reads it)
_QUEUED = """
() => {
    const state = window.store && window.store.getState();
    if (!state) return true;
    const queues = Object.assign({}, state.callbacks);
    delete queues.stored;
    delete queues.completed;
    return Object.values(queues).some(q => q && q.length > 0);
}
"""


# Per plot in the visible tab: does it draw data, or carry a message (an annotation)?
_BLANK_PLOTS = """
() => [...document.querySelectorAll('.tab-content .js-plotly-plot')].filter(gd => {
    const drawn = (gd.data || []).some(t => ['x', 'y', 'z', 'values', 'r']
        .some(k => t[k] && t[k].length));
    const said = ((gd.layout || {}).annotations || []).some(a => (a.text || '').trim());
    return !drawn && !said;
}).map(gd => gd.parentElement.id || gd.id)
"""


def _drawn(page: Any) -> list[str]:
    """The plots of the visible tab that show empty axes and no message, read again for up to a
    second while there are any: Plotly draws after the callback's answer is applied."""
    deadline = time.monotonic() + 1.0
    blank = page.evaluate(_BLANK_PLOTS)
    while blank and time.monotonic() < deadline:
        page.wait_for_timeout(POLL_MS)
        blank = page.evaluate(_BLANK_PLOTS)
    return list(blank)


BROWSERS = 2  # the views are visited by this many Chromiums at once (see _visit)


def test_every_view_opens_on_every_input(every_input: tuple[str, list[dict[str, str]]]) -> None:
    url, options = every_input
    assert len(options) >= len(inputs()) + 1  # a folder of two ranks is two profiles
    assert len({o["label"] for o in options}) == len(options), "two profiles the picker cannot tell apart"
    # Half the time one browser spends here is neither its CPU nor the server's but waiting (frames,
    # polls, round trips): 125 s for one browser on an idle machine, 56 s of it CPU (#23). Two
    # browsers, each with its own Playwright in its own thread (Playwright's sync API is per
    # thread), take every other profile; the server answers both, as it would two users.
    visited = [i for i, o in enumerate(options) if not LATER_RANK.search(o["label"])]
    assert len(visited) >= len(inputs()), "a kind of input would not be opened"
    shares = [visited[i::BROWSERS] for i in range(BROWSERS)]
    with ThreadPoolExecutor(BROWSERS) as pool:
        results = list(pool.map(lambda share: _visit(url, options, share), shares))
    problems = [p for r in results for p in r]
    assert problems == [], "\n".join(problems)


def _visit(url: str, options: list[dict[str, str]], indexes: list[int]) -> list[str]:
    """Open every view of the profiles at `indexes` of the picker in a Chromium of this thread's
    own; every problem seen, as one line each."""
    from playwright.sync_api import expect, sync_playwright

    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        context = browser.new_context(viewport=VIEWPORT)
        context.set_default_timeout(TIMEOUT_S * 1000)
        page = context.new_page()
        events = record_events(page, url)
        calls = Callbacks(page)
        page.goto(url + "/")
        # the first view waits for the first profile's analysis: on a loaded machine more than expect's 5 s
        expect(page.locator("#ov-kpis .kpi")).to_have_count(6, timeout=TIMEOUT_S * 1000)
        tabs = [TABS[0], RANKS_TAB, *TABS[1:]]  # the Ranks tab when the page has one
        tabs = [(v, t) for v, t in tabs if page.locator(".tab").get_by_text(t, exact=True).count()]
        for n, index in enumerate(indexes):
            shown = tabs if n == 0 else [(v, t) for v, t in tabs if v not in SAME_FOR_EVERY_PROFILE]
            problems += _views_of(page, calls, events, options[index]["label"], index, shown)
        context.close()
        browser.close()
        problems += [f"dialog: {d}" for d in events.dialogs]
        problems += [f"request left the app: {r}" for r in events.outside_requests]
    return problems


def _views_of(
    page: Any, calls: Callbacks, events: Any, label: str, index: int, tabs: list[tuple[str, str]]
) -> list[str]:
    """Pick the profile `index` of the picker and open each tab; the problems seen."""
    from playwright.sync_api import expect

    problems: list[str] = []
    page.locator("#profile").click()
    page.get_by_role("option").nth(index).click()
    page.keyboard.press("Escape")
    expect(page.locator("#profile")).to_contain_text(label, timeout=TIMEOUT_S * 1000)
    calls.settle(page)
    for value, tab in tabs:
        page.locator(".tab").get_by_text(tab, exact=True).click()
        expect(page.locator(".tab--selected")).to_have_text(tab, timeout=TIMEOUT_S * 1000)
        calls.settle(page)
        where = f"{label} / {tab}"
        problems += [f"{where}: {b}" for b in calls.bad]
        calls.bad.clear()
        blank = _drawn(page)
        problems += [f"{where}: plot {b} shows empty axes and no message" for b in blank]
        text = page.locator(".tab-content").inner_text().strip()
        if not text:
            problems.append(f"{where}: the view shows no text at all")
        if value == "timeline" and not page.locator("#tl-info").inner_text().strip():
            problems.append(f"{where}: the timeline says nothing")
        if value == "ir" and not page.locator("#ir-info").inner_text().strip():
            problems.append(f"{where}: the IR view says nothing")
        problems += [f"{where}: console: {e}" for e in events.console_errors + events.page_errors]
        events.console_errors.clear()
        events.page_errors.clear()
    return problems
