"""The HTML report in headless Chromium: hostile names render as text, nothing fires, nothing
leaves the machine, the charts draw. Recipe and pitfalls: ../shared/docs/browser-testing.md
(Playwright dismisses dialogs silently, so every test records them and asserts none fired; a
positive control proves the recorder can see an injection)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tilescope.report import render_html

from support.browser import needs_chromium, record_events, serve_folder
from support.report_data import hostile_report, make_bundle

HOSTILE_NAMES = ["<img src=x onerror=alert(1)>", "</script><script>alert(2)</script>",
                 "[x](javascript:alert(1)) @org/team a|b `x`", "\" onmouseover=\"alert(3)"]

pytestmark = [pytest.mark.browser, needs_chromium]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("site")
    with serve_folder(root) as url:
        yield url, root


def _screenshot(page: Any, name: str) -> None:
    # beside the dashboard's (tests/browser/test_dashboard_browser.py), never in docs/
    target = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target / name), full_page=False)


@pytest.mark.parametrize("hostile", HOSTILE_NAMES)
def test_hostile_names_render_as_text(site: tuple[str, Path], browser: Any, hostile: str) -> None:
    from playwright.sync_api import expect

    base, root = site
    bundle = make_bundle(root / f"bundle{HOSTILE_NAMES.index(hostile)}")
    name = f"report{HOSTILE_NAMES.index(hostile)}.html"
    (root / name).write_text(render_html.render(hostile_report(bundle, hostile)), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1280, "height": 1600})
    events = record_events(page, base)
    page.goto(f"{base}/{name}")
    expect(page.locator("#chart-pipes .xtick text").first).to_have_text(hostile.replace("\n", " "))
    cell = page.locator("code.kernel-name").first
    expect(cell).to_have_text(hostile)
    assert cell.evaluate("el => el.children.length") == 0
    assert page.evaluate("document.images.length") == 0
    assert page.evaluate("document.querySelectorAll('.js-plotly-plot').length") == 4
    # the finding summary and the evidence show the literal text too
    assert hostile in page.locator("#finding-1 summary .message").inner_text()
    assert page.locator("#finding-1 table.evidence td").first.text_content() == hostile
    # the embedded report JSON round-trips
    data = page.evaluate("JSON.parse(document.getElementById('tilescope-report').textContent)")
    assert data["top_kernels"][0]["name"] == hostile
    page.wait_for_timeout(300)  # give any injected handler a chance to fire
    _screenshot(page, f"report-hostile-{HOSTILE_NAMES.index(hostile)}.png")
    page.close()
    events.assert_clean()


def test_positive_control_unsafe_sink_is_detected(site: tuple[str, Path], browser: Any) -> None:
    base, root = site
    (root / "control.html").write_text(
        "<!doctype html><body><div id=t></div><script>"
        "document.getElementById('t').innerHTML = '<img src=x onerror=alert(1)>';</script></body>")
    page = browser.new_page()
    events = record_events(page, base)
    page.goto(f"{base}/control.html")
    page.wait_for_timeout(500)
    page.close()
    assert events.dialogs == ["1"], "the dialog recorder must catch a real injection"
