"""The Timeline tab in headless Chromium (issue #28 item 5): the first view of a sparse run is its
kernels, not the capture; host, stream-per-engine and HCCL lanes are on the axis; the export link
downloads a Chrome trace. Inputs: the real TileLang sigmoid msprof run (11 kernels in ~3 ms of a
5.5 s capture, ../shared/traces/real/) and rank 0 of the generated 8-rank sample.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tilescope.dashboard.app import create_app

from support import REAL_TRACES, REPO_ROOT, SAMPLES
from support.browser import needs_chromium, new_page, record_events, serve_wsgi

SIGMOID = REAL_TRACES / "tilelang_sigmoid_app"
CLUSTER_RANK0 = SAMPLES / "cluster_8rank" / "node0_1000_20260101000000000_ascend_pt"
TIMEOUT_MS = 20_000

pytestmark = [
    pytest.mark.browser,
    needs_chromium,
    pytest.mark.skipif(not SIGMOID.is_dir(), reason="../shared/traces/real/ is not present"),
]


@pytest.fixture(scope="module")
def app_url() -> Iterator[str]:
    app = create_app([SIGMOID, CLUSTER_RANK0])
    with serve_wsgi(app.server) as url:
        yield url


def _axis(page: Any) -> dict[str, Any]:
    """What Plotly drew: the x range and the lanes on the y axis, top first."""
    result: dict[str, Any] = page.evaluate(
        "() => { const gd = document.querySelector('#timeline .js-plotly-plot');"
        " const fl = gd._fullLayout;"
        " return {x: fl.xaxis.range, lanes: [...fl.yaxis._categories].reverse(),"
        "         ticks: [...document.querySelectorAll('#timeline .ytick text')].map(t => t.textContent)}; }"
    )
    return result


def test_first_view_fits_the_kernels_and_lanes_are_drawn(dashboard_browser: Any, app_url: str) -> None:
    from playwright.sync_api import expect

    page = new_page(dashboard_browser, TIMEOUT_MS)  # the context accepts downloads
    expect.set_options(timeout=TIMEOUT_MS)
    events = record_events(page, app_url)
    page.goto(app_url + "/")
    page.locator(".tab").get_by_text("Timeline", exact=True).click()
    info = page.locator("#tl-info")
    expect(info).to_contain_text("11 host→kernel launches linked")
    page.wait_for_function(
        "() => { const gd = document.querySelector('#timeline .js-plotly-plot');"
        " return gd && gd._fullLayout && gd._fullLayout.yaxis._categories.length === 4; }"
    )
    drawn = _axis(page)
    x0, x1 = drawn["x"]
    # the 11 launches run from 4,587.1 ms to 4,590.35 ms after the first event (the raw trace.json)
    assert 4_580_000 < x0 < 4_587_099 and 4_590_350 < x1 < 4_600_000, drawn["x"]
    assert drawn["lanes"] == [
        "CANN · Thread 1429478",
        "CANN · Thread 1429701",
        "stream 47 · Mix",
        "stream 48 · runtime tasks",
    ]
    assert set(drawn["ticks"]) == set(drawn["lanes"])
    expect(page.locator("#timeline .legendtext").filter(has_text="Mix (Cube)")).to_have_count(1)
    expect(page.locator("#timeline .legendtext").filter(has_text="launch")).to_have_count(1)
    page.screenshot(path=str(_shots() / "timeline-sparse-fit.png"))

    # the export link downloads the whole timeline as a Chrome trace
    with page.expect_download() as got:
        page.locator("#tl-export").click()
    download = got.value
    assert download.suggested_filename.endswith(".trace.json")
    trace = json.loads(Path(download.path()).read_text(encoding="utf-8"))
    kernels = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "Mix (Cube)"]
    assert len(kernels) == 11 and {e["name"] for e in kernels} == {"main_kernel"}
    assert sum(1 for e in trace["traceEvents"] if e["ph"] == "f") == 12  # 11 kernels + TASK_TIMEOUT_SET

    # rank 0 of the 8-rank sample: the HCCL lane with its two all-reduces beside the engines
    page.locator("#profile").click()
    page.get_by_role("option", name="cluster_8rank (rank 0)", exact=True).click()
    page.keyboard.press("Escape")
    page.wait_for_function(
        "() => { const gd = document.querySelector('#timeline .js-plotly-plot');"
        " return gd && [...gd._fullLayout.yaxis._categories].includes('HCCL'); }"
    )
    drawn = _axis(page)
    assert drawn["lanes"] == ["stream 2 · Cube", "stream 2 · Vector", "stream 2 · Mix", "HCCL"]
    expect(info).to_contain_text("14 segments drawn")
    expect(page.locator("#timeline .legendtext").filter(has_text="HCCL")).to_have_count(1)
    page.screenshot(path=str(_shots() / "timeline-cluster-rank0.png"))
    page.close()
    events.assert_clean()


def _shots() -> Path:
    shots = REPO_ROOT / "test-artifacts" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    return shots
