"""The Kernel detail view in headless Chromium at a laptop's 1366 px (#28 item 6): no chart's
title, axis titles and tick labels overlap (the pipe chart's y title ran into the chart's title),
and the raw-counter table shows the kernel's counters under their metric groups. Recipe:
../shared/docs/browser-testing.md; every test asserts no dialog, page error, console error or
request leaving 127.0.0.1."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tilescope.dashboard.app import create_app

from support.browser import needs_chromium, new_page, record_events, serve_wsgi

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
TIMEOUT_MS = 15_000
GRAPHS = ("d-pipes", "d-split", "d-bw", "d-blocks")

pytestmark = [pytest.mark.browser, needs_chromium]

# The boxes of one graph's title, axis titles and tick labels, in page pixels.
_BOXES = """(id) => {
  const g = document.querySelector('#' + id + ' .js-plotly-plot');
  const box = (el, kind) => { const r = el.getBoundingClientRect();
    return {kind, text: el.textContent, l: r.left, r: r.right, t: r.top, b: r.bottom}; };
  const all = (sel, kind) => [...g.querySelectorAll(sel)].filter(e => e.textContent.trim())
    .map(e => box(e, kind));
  const outer = g.getBoundingClientRect();
  return {graph: {l: outer.left, r: outer.right, t: outer.top, b: outer.bottom},
          items: [...all('.gtitle', 'title'), ...all('.g-xtitle text', 'x title'),
                  ...all('.g-ytitle text', 'y title'), ...all('.xtick text', 'x tick'),
                  ...all('.ytick text', 'y tick')]};
}"""


def overlaps(a: dict[str, Any], b: dict[str, Any]) -> bool:
    slack = 1.0  # anti-aliased edges touch
    across = a["l"] < b["r"] - slack and b["l"] < a["r"] - slack
    return across and a["t"] < b["b"] - slack and b["t"] < a["b"] - slack


@pytest.fixture(scope="module")
def detail_app() -> Iterator[str]:
    app = create_app([SAMPLES / "tilelang_fa_bundle"])
    with serve_wsgi(app.server) as url:
        yield url


def test_detail_titles_do_not_overlap_and_the_counters_show(dashboard_browser: Any, detail_app: str) -> None:
    from playwright.sync_api import expect

    page = new_page(dashboard_browser, TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    events = record_events(page, detail_app)
    page.goto(detail_app + "/")
    expect(page.locator("#ov-kpis .kpi")).to_have_count(6)
    page.locator(".tab").get_by_text("Kernel detail", exact=True).click()
    expect(page.locator("#d-kernel")).to_contain_text("flash_fwd_kernel_mix_aic")
    expect(page.locator("#d-pipes .g-ytitle")).to_have_text("busy, % of launch")
    for graph in GRAPHS:  # each drawn with its data (an empty graph has axes and no titles)
        expect(page.locator(f"#{graph} .g-xtitle")).to_have_text(re.compile(r"\w"))
    page.wait_for_timeout(800)  # plotly's automargin redraw
    problems = []
    for graph in GRAPHS:
        found = page.evaluate(_BOXES, graph)
        items, outer = found["items"], found["graph"]
        titles = [i for i in items if "title" in i["kind"]]
        assert "x title" in {t["kind"] for t in titles}, graph  # the split chart names its bars, no y title
        for t in titles:
            if t["l"] < outer["l"] or t["r"] > outer["r"] or t["t"] < outer["t"] or t["b"] > outer["b"]:
                problems.append(f"{graph}: {t['kind']} {t['text']!r} leaves the chart")
            for other in items:
                if other is not t and overlaps(t, other):
                    problems.append(f"{graph}: {t['kind']} {t['text']!r} overlaps "
                                    f"{other['kind']} {other['text']!r}")
    assert problems == []
    # the raw counters: every group the bundle's msprof op run collected, MemoryL0 and L2 among them
    groups = page.locator("#d-counters th.counter-group")
    expect(groups.first).to_be_visible()
    shown = groups.all_inner_texts()
    assert {"MemoryL0", "MemoryUB", "L2Cache", "ResourceConflictRatio"} <= set(shown)
    row = page.locator("#d-counters tr", has=page.locator("td", has_text="aic_l0a_read_gbps"))
    expect(row.locator("td").nth(1)).to_have_text("GB/s")
    events.assert_clean()
    page.close()
