"""The HTML report at a laptop's 1366 px (#28 item 11): the page never scrolls sideways (the
TileLang bundle's report was 2,278 px wide: its header facts had no break between them), the
headline is whole and on screen, the slanted kernel names of the pipe chart stay clear of its
legend. Reports of three kinds of input: an msprof op bundle with every metric group, a torch_npu
run, a multi-rank run. Recipe: ../shared/docs/browser-testing.md."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support import SAMPLES, cli
from support.browser import needs_chromium, record_events, serve_folder

WIDTH = 1366
INPUTS = ("tilelang_fa_bundle", "attention_unfused", "cluster_8rank")

pytestmark = [pytest.mark.browser, needs_chromium]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("wide")
    with serve_folder(root) as url:
        yield url, root


@pytest.mark.parametrize("sample", INPUTS)
def test_the_report_fits_1366_px(site: tuple[str, Path], browser: Any, sample: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    from playwright.sync_api import expect

    base, root = site
    out = root / f"{sample}.html"
    code, _, err = cli(capsys, "analyze", str(SAMPLES / sample), "-f", "html", "-o", str(out))
    assert code in (0, 1), err  # 1: a finding at or above the gate's severity
    page = browser.new_page(viewport={"width": WIDTH, "height": 768})
    events = record_events(page, base)
    page.goto(f"{base}/{sample}.html")
    expect(page.locator(".js-plotly-plot").first).to_be_visible()
    page.wait_for_timeout(500)  # plotly's automargin redraw
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    # nothing in the header reaches past the window, and the headline is whole
    past = page.evaluate(f"""() => [...document.querySelectorAll('header, header *')]
        .filter(e => e.getBoundingClientRect().right > {WIDTH} || e.scrollWidth > e.clientWidth + 1)
        .map(e => e.tagName + ' ' + e.textContent.slice(0, 60))""")
    assert past == []
    headline = page.locator("#headline")
    text = headline.inner_text()
    assert "finding" in text and "…" not in text
    box = headline.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= WIDTH
    # the pipe chart's kernel names clear of its legend (the legend sat over them)
    if page.locator("#chart-pipes").count():
        legend = page.locator("#chart-pipes .legend").bounding_box()
        ticks = page.evaluate("""() => [...document.querySelectorAll('#chart-pipes .xtick text')]
            .map(e => { const r = e.getBoundingClientRect(); return [r.top, r.bottom]; })""")
        assert legend is not None and ticks
        assert all(bottom <= legend["y"] or top >= legend["y"] + legend["height"] for top, bottom in ticks)
    events.assert_clean()
    page.close()
