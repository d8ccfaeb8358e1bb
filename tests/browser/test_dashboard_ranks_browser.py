"""The Ranks tab in headless Chromium on the generated 8-rank run (slow rank 3, slow link 5->6),
given on the command line and found under a --root: it opens with the rank table, the heatmap and
the matrix drawn, and a click on a rank row opens that rank's profile in the Overview, with no
console error, dialog or outside request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tilescope.dashboard.app import create_app, store_of

from support.browser import needs_chromium, new_page, record_events, serve_wsgi

ROOT = Path(__file__).resolve().parents[2]
ARTIFACT_SHOTS = ROOT / "test-artifacts" / "screenshots"
TIMEOUT_MS = 20_000

pytestmark = [pytest.mark.browser, needs_chromium]


@pytest.fixture(scope="module")
def ranks_app(
    tmp_path_factory: pytest.TempPathFactory, sample_generator: ModuleType
) -> Iterator[tuple[str, Any]]:
    from generator.cluster import write_cluster_run

    out = tmp_path_factory.mktemp("ranks8")
    write_cluster_run(out)  # the run `generate.py --ranks 8` writes
    app = create_app([out])
    with serve_wsgi(app.server) as url:
        yield url, app


# the drawn plot's data, read from plotly's graph div (what the user sees, not what was sent)
_PLOT = """(id) => { const gd = document.querySelector('#' + id + ' .js-plotly-plot');
    return gd ? {title: gd.layout.title.text, y: gd.data[0].y, z: gd.data[0].z} : null; }"""


def _open(dashboard_browser: Any, url: str) -> tuple[Any, Any]:
    """A page of the app at `url` (a page of its own, the suite's timeout) and its recorded events."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    page = new_page(dashboard_browser, TIMEOUT_MS, {"width": 1366, "height": 900})
    events = record_events(page, url)
    page.goto(url + "/")
    return page, events


def test_ranks_tab_opens_and_a_rank_opens_its_kernels(
    dashboard_browser: Any, ranks_app: tuple[str, Any]
) -> None:
    from playwright.sync_api import expect

    url, app = ranks_app
    (run,) = store_of(app).clusters()
    page, events = _open(dashboard_browser, url)
    expect(page.locator("#ov-kpis .kpi")).to_have_count(6)
    page.locator(".tab").get_by_text("Ranks", exact=True).click()
    expect(page.locator(".tab--selected")).to_have_text("Ranks")

    rows = page.locator("#r-table tbody tr")
    expect(rows).to_have_count(8)
    expect(page.locator("#r-table tr.slow")).to_have_count(1)
    expect(page.locator("#r-table tr.slow td").first).to_have_text("3")
    expect(page.locator("#r-table tr.slow")).to_contain_text("slow rank")
    expect(page.locator("#r-info")).to_contain_text("Slow rank: 3 (TS601)")
    expect(page.locator("#r-findings details")).to_have_count(len(run.findings))
    expect(page.locator("#r-heatmap .js-plotly-plot")).to_be_visible()
    expect(page.locator("#r-matrix .js-plotly-plot")).to_be_visible()
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2")
    heat = page.evaluate(_PLOT, "r-heatmap")
    matrix = page.evaluate(_PLOT, "r-matrix")
    assert heat["y"] == [str(r) for r in range(8)] and "slow rank 3" in heat["title"]
    computing = [row[0] for row in heat["z"]]
    assert max(computing) == computing[3] > computing[0]
    assert "slow link 5→6 (TS604)" in matrix["title"]
    assert matrix["z"][5][6] == pytest.approx(5.0)
    ARTIFACT_SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACT_SHOTS / "ranks-tab.png"), full_page=True)

    # one click on rank 3's row: the picker shows rank 3 and the Overview its own kernels
    page.locator("#r-table tr.slow").click()
    expect(page.locator(".tab--selected")).to_have_text("Overview")
    expect(page.locator("#profile")).to_contain_text("(rank 3)")
    expect(page.locator("#ov-kpis .kpi")).to_have_count(6)
    launches = len(store_of(app).get(run.rank_keys[3]).kernels)  # type: ignore[union-attr]
    expect(page.locator("#ov-kpis")).to_contain_text(f"{launches:,}")
    page.locator(".tab").get_by_text("Ranks", exact=True).click()
    expect(page.locator("#r-table tr.shown td").first).to_have_text("3")
    page.close()
    events.assert_clean()


def test_a_run_under_a_root_opens_in_the_ranks_tab_and_its_rank_in_the_picker(
    dashboard_browser: Any, tmp_path: Path
) -> None:
    """Served with --root only: the Ranks tab lists the sample run found there, builds it when the
    tab opens, and a click on rank 3's row shows "(rank 3)" in the picker and its kernels."""
    import shutil

    from playwright.sync_api import expect

    shutil.copytree(ROOT / "sample_traces" / "cluster_8rank", tmp_path / "cluster_8rank")
    app = create_app([], roots=[tmp_path])
    with serve_wsgi(app.server) as url:
        page, events = _open(dashboard_browser, url)
        page.locator(".tab").get_by_text("Ranks", exact=True).click()
        expect(page.locator("#r-run")).to_contain_text("cluster_8rank (8 ranks, root)")
        expect(page.locator("#r-table tbody tr")).to_have_count(8)
        expect(page.locator("#r-table tr.slow td").first).to_have_text("3")
        page.locator("#r-table tr.slow").click()
        expect(page.locator(".tab--selected")).to_have_text("Overview")
        expect(page.locator("#profile")).to_contain_text("cluster_8rank (rank 3) (root)")
        entry = store_of(app).get("0:cluster_8rank#3")
        assert entry is not None and entry.profile.rank == 3
        expect(page.locator("#ov-kpis")).to_contain_text(f"{len(entry.kernels):,}")
        expect(page.locator("#load-error")).to_have_text("")
        page.close()
        events.assert_clean()
