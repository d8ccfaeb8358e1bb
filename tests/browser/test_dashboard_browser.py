"""The Dash dashboard in real headless Chromium, clicked through like a person would.

The unfused-attention sample is wrapped in a run bundle whose ir/ comes from the lint API
(`tilescope.ir.capture`), so findings carry IR locations. Every test records dialogs, page errors,
console errors and requests leaving 127.0.0.1 and asserts none happened. Screenshots go to
test-artifacts/screenshots/; `test_every_view_of_the_tilelang_bundle` takes one per view of
sample_traces/tilelang_fa_bundle, and with TILESCOPE_UPDATE_SCREENSHOTS=1 also writes those to
docs/screenshots/ (the README shows them) — a test run never rewrites tracked files on its own.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tilescope.analysis import analyze
from tilescope.chips import get_chip
from tilescope.dashboard.app import create_app, store_of
from tilescope.errors import TilescopeError
from tilescope.findings import Finding, Location, Severity
from tilescope.io.load import load_profile
from tilescope.report.data import build_report
from tilescope.text.words import saving_phrase

from support.browser import VIEWPORT, PageEvents, needs_chromium, new_page, record_events, serve_wsgi
from support.synthetic import HOSTILE, synthetic_profile, synthetic_report, write_ir_bundle

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
ARTIFACT_SHOTS = ROOT / "test-artifacts" / "screenshots"
DOC_SHOTS = ROOT / "docs" / "screenshots"  # written only with TILESCOPE_UPDATE_SCREENSHOTS=1
UPDATE_DOC_SHOTS = os.environ.get("TILESCOPE_UPDATE_SCREENSHOTS") == "1"
HOSTILE_COUNTER = f"aic_{HOSTILE}"  # "Other counters": any aic_/aiv_ column the profile carries
TIMEOUT_MS = 15_000

pytestmark = [pytest.mark.browser, needs_chromium]


@pytest.fixture(scope="module", autouse=True)
def _expect_timeout() -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)  # Dash chains several callbacks per click


def build_bundle(tmp: Path) -> tuple[Any, dict[str, Any]]:
    """attention_unfused as a run bundle (manifest.json + profile/ + ir/) and its report."""
    bundle = tmp / "attention_unfused_bundle"
    src = next((SAMPLES / "attention_unfused").glob("*_ascend_pt"))
    shutil.copytree(src, bundle / "profile" / src.name)
    fallback = False
    try:
        from tilescope.ir.capture import capture_ir, write_ir_dir

        capture = capture_ir(str(SAMPLES / "kernels" / "attention_unfused.py"), {}, get_chip("910B2"))
        write_ir_dir(capture, bundle / "ir")
    except (ImportError, TilescopeError):  # no TileLang here: static IR files, one located finding
        fallback = True
        (bundle / "ir").mkdir(parents=True, exist_ok=True)
        (bundle / "ir" / "ir.json").write_text(json.dumps(write_ir_bundle(bundle / "ir")), encoding="utf-8")
    (bundle / "manifest.json").write_text(
        json.dumps({"kind": "tilescope-bundle", "function": "attention_unfused"}), encoding="utf-8"
    )
    profile = load_profile(bundle)
    result = analyze(profile)
    if fallback:
        result.findings.append(
            Finding(
                "TS505",
                "intermediate-through-global-memory",
                Severity.MEDIUM,
                ("main",),
                "S goes through GM",
                locations=(Location("ir/tvmscript.py", 5, None, "tvmscript", "store S"),),
            )
        )
    return profile, build_report(profile, result)


@pytest.fixture(scope="module")
def sample_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    profile, report = build_bundle(tmp_path_factory.mktemp("bundle"))
    app = create_app(
        [profile, SAMPLES / "attention_fused", SAMPLES / "tilelang_fa_msprof_op"],
        reports=[report],
        labels=["attention_unfused"],
    )
    with serve_wsgi(app.server) as url:
        yield url, app


@pytest.fixture(scope="module")
def hostile_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    ir_dir = tmp_path_factory.mktemp("hostile") / "ir"
    p = synthetic_profile(400, hostile=True)
    p.ir, p.ir_dir = write_ir_bundle(ir_dir, hostile=True), ir_dir
    p.kernels[HOSTILE_COUNTER] = 1.0  # a PMU column of its own name: the counters table lists it
    app = create_app([p], reports=[synthetic_report(p, hostile=True)], labels=[HOSTILE])
    with serve_wsgi(app.server) as url:
        yield url


@pytest.fixture()
def page(dashboard_browser: Any) -> Iterator[Any]:
    """A page of its own for each test, in the module's dashboard Chromium: the pages share the
    HTTP cache and V8's code cache, so the dashboard's scripts (Plotly, the AG Grid, dash-renderer:
    megabytes) are fetched once and compiled from the cache."""
    pg = new_page(dashboard_browser, TIMEOUT_MS)
    yield pg
    pg.close()


def open_app(page: Any, url: str) -> PageEvents:
    from playwright.sync_api import expect

    events = record_events(page, url)
    page.goto(url + "/")
    expect(page.locator("#ov-kpis .kpi")).to_have_count(6)
    return events


def show_tab(page: Any, label: str) -> None:
    page.locator(".tab").get_by_text(label, exact=True).click()


def pick(page: Any, dropdown_id: str, label: str) -> None:
    """Dash 4 dropdown: a button that opens a listbox of options."""
    page.locator(f"#{dropdown_id}").click()
    page.get_by_role("option", name=label, exact=True).click()
    page.keyboard.press("Escape")


# resolves after two animation frames: the page has painted what it held when called
_PAINTED = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"


def screenshot(page: Any, name: str, docs: bool = False) -> None:
    """test-artifacts/screenshots/NAME.png; with docs=True and TILESCOPE_UPDATE_SCREENSHOTS=1 also
    docs/screenshots/NAME.png (only the TileLang-bundle views are the documentation's)."""
    page.mouse.move(5, VIEWPORT["height"] - 5)  # no hover label or mode bar over the plots
    page.evaluate("() => document.activeElement && document.activeElement.blur()")  # no focus ring
    if docs and UPDATE_DOC_SHOTS:
        page.wait_for_timeout(400)  # the documentation's pixels: whatever plotly still draws, drawn
    else:  # the tests' own shots, to look at: what the page has painted (400 ms each was 8 s a run)
        page.evaluate(_PAINTED)
    for d in (ARTIFACT_SHOTS, *((DOC_SHOTS,) if docs and UPDATE_DOC_SHOTS else ())):
        d.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(d / f"{name}.png"))


def test_overview_top_finding_and_ir_lines(page: Any, sample_app: tuple[str, Any]) -> None:
    from playwright.sync_api import expect

    url, app = sample_app
    entry = store_of(app).get(store_of(app).first_key())
    assert entry is not None
    events = open_app(page, url)
    top = entry.findings[0]
    expect(page.locator("#ov-findings .finding-item").first).to_contain_text(top["code"])
    expect(page.locator("#ov-core .ytick")).not_to_have_count(0)
    screenshot(page, "unfused-overview")

    # The top finding of the overview opens in the Findings view with its evidence and rule doc.
    page.locator("#ov-findings .finding-item").first.click()
    expect(page.locator("#f-detail h3")).to_contain_text(top["code"])
    expect(page.locator("#f-detail")).to_contain_text("Evidence")
    expect(page.locator("#f-detail .rule-doc")).to_contain_text("What it does")
    screenshot(page, "unfused-findings")

    # The top finding that points into the IR: Show in IR marks its lines in each stage.
    located = next(f for f in entry.findings if f.get("locations"))
    label = f"{located['code']} {located['slug']}"
    pick(page, "f-rule", label)
    expect(page.locator("#f-count")).to_contain_text(
        f"{sum(1 for f in entry.findings if f['code'] == located['code'])} of {len(entry.findings)}"
    )
    page.locator("#f-list .finding-item").first.click()
    page.locator("#f-to-ir").click()
    expect(page.locator(".tab--selected")).to_have_text("IR")
    marked = page.locator("#ir-tvmscript .ir-line.hl")
    expect(marked.first).to_be_visible()
    kernel = page.locator("#ir-kernel").inner_text().strip()
    want = sorted(
        {
            loc["line"]
            for loc in located["locations"]
            if loc["stage"] == "tvmscript" and loc["file"].endswith(f"{kernel}/tvmscript.py")
        }
    )
    assert want, (kernel, located["locations"])
    got = sorted(int(x) for x in marked.evaluate_all("els => els.map(e => e.dataset.line)"))
    assert got == want
    expect(page.locator("#ir-ascendc .ir-line.hl").first).to_be_in_viewport()
    expect(marked.first).to_be_in_viewport()
    screenshot(page, "unfused-ir")
    events.assert_clean()


def test_kernel_grid_search_sort_and_open_detail(page: Any, sample_app: tuple[str, Any]) -> None:
    from playwright.sync_api import expect

    url, app = sample_app
    entry = store_of(app).get(store_of(app).first_key())
    assert entry is not None
    events = open_app(page, url)
    show_tab(page, "Kernels")
    total = len(entry.kernels)
    expect(page.locator("#k-count")).to_have_text(f"{total:,} of {total:,} launches match")
    k = entry.kernels
    # A column filter (floating filter under "Op type") is applied by the server too.
    matmuls = int((k["op_type"].str.lower().str.contains("matmul")).sum())
    assert 0 < matmuls < total
    page.locator(".ag-floating-filter[aria-colindex='2'] input").first.fill("matmul")
    expect(page.locator("#k-count")).to_have_text(f"{matmuls:,} of {total:,} launches match")
    page.locator(".ag-floating-filter[aria-colindex='2'] input").first.fill("")
    expect(page.locator("#k-count")).to_have_text(f"{total:,} of {total:,} launches match")
    hits = int(
        (
            k["name"].str.lower().str.contains("softmax") | k["op_type"].str.lower().str.contains("softmax")
        ).sum()
    )
    assert 0 < hits < total
    page.locator("#k-search").fill("softmax")
    page.locator("#k-search").press("Enter")
    expect(page.locator("#k-count")).to_have_text(f"{hits:,} of {total:,} launches match")
    rows = page.evaluate(
        "async () => { const api = await dash_ag_grid.getApiAsync('k-grid');"
        " return [api.getDisplayedRowCount(), api.getDisplayedRowAtIndex(0).data.name]; }"
    )
    assert rows[0] == hits and "softmax" in rows[1].lower()
    screenshot(page, "unfused-kernels")

    first = (
        page.locator(
            ".ag-center-cols-container .ag-row[row-index='0'], .ag-pinned-left-cols-container "
            ".ag-row[row-index='0']"
        )
        .locator("[col-id='name']")
        .first
    )
    name = first.inner_text()
    first.click()
    expect(page.locator(".tab--selected")).to_have_text("Kernel detail")
    expect(page.locator("#d-kernel")).to_contain_text(name)
    expect(page.locator("#d-pipes .xtick")).not_to_have_count(0)
    expect(page.locator("#d-pipes .g-ytitle")).to_have_text("busy, % of launch")
    screenshot(page, "unfused-detail")
    events.assert_clean()


def test_roofline_timeline_and_compare(page: Any, sample_app: tuple[str, Any]) -> None:
    from playwright.sync_api import expect

    url, _ = sample_app
    events = open_app(page, url)
    show_tab(page, "Roofline")
    expect(page.locator("#roofline .g-xtitle")).to_have_text("arithmetic intensity (FLOP/byte)")
    expect(page.locator("#roofline .legendtext").filter(has_text="GM")).to_contain_text(
        "(vendor, default memory type)"
    )
    screenshot(page, "unfused-roofline")
    # A click on a point (Plotly's own click event on the points' trace) opens that kernel.
    name = page.evaluate(
        "() => { const gd = document.querySelector('#roofline .js-plotly-plot');"
        " const i = gd.data.findIndex(t => t.mode === 'markers');"
        " const t = gd.data[i]; const pt = {curveNumber: i, pointNumber: 0, pointIndex: 0,"
        " x: t.x[0], y: t.y[0], customdata: t.customdata[0], data: t, fullData: gd._fullData[i]};"
        " gd.emit('plotly_click', {points: [pt], event: {}}); return t.customdata[0]; }"
    )
    expect(page.locator(".tab--selected")).to_have_text("Kernel detail")
    expect(page.locator("#d-kernel")).to_contain_text(name)

    show_tab(page, "Timeline")
    info = page.locator("#tl-info")
    expect(info).to_contain_text("segments drawn")
    expect(page.locator("#timeline .g-xtitle")).to_have_text("time since first event (µs)")
    before = info.inner_text()
    # Drag a box over the first 5 % of the run, as a person zooms: the server re-windows and
    # single kernels with their launch lines appear.
    page.wait_for_timeout(500)  # plotly's autosize relayout comes first
    for attempt in range(3):  # a drag landing during plotly's own redraw is dropped: drag again
        box = page.locator("#timeline .nsewdrag").first.bounding_box()
        assert box is not None
        y = box["y"] + box["height"] / 2
        page.mouse.move(box["x"] + 2, y)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.05, y + 2, steps=5)
        page.mouse.up()
        try:
            expect(info).not_to_have_text(before, timeout=5000)
            break
        except AssertionError:
            if attempt == 2:
                raise
    expect(info).to_contain_text("host→kernel launches linked")
    expect(page.locator("#timeline .legendtext").filter(has_text="launch")).to_have_count(1)
    screenshot(page, "unfused-timeline")

    show_tab(page, "Compare")
    expect(page.locator("#c-kpis .kpi")).to_have_count(5)
    expect(page.locator("#c-findings")).to_contain_text("Resolved in head")
    expect(page.locator("#c-delta .g-xtitle")).to_have_text("time change, head − base (µs)")
    count = page.evaluate("async () => (await dash_ag_grid.getApiAsync('c-grid')).getDisplayedRowCount()")
    assert count > 0
    screenshot(page, "unfused-compare")
    events.assert_clean()


def test_msprof_op_block_heatmap(page: Any, sample_app: tuple[str, Any]) -> None:
    from playwright.sync_api import expect

    url, app = sample_app
    events = open_app(page, url)
    label = next(o["label"] for o in store_of(app).options() if "msprof_op" in o["label"])
    pick(page, "profile", label)
    expect(page.locator("#ov-kpis")).to_contain_text("1")
    show_tab(page, "Kernel detail")
    expect(page.locator("#d-blocks .gtitle")).to_contain_text("max/mean")
    expect(page.locator("#d-blocks .ytick")).to_have_count(3)  # cube0, vector0, vector1
    expect(page.locator("#d-pipes .xtick")).not_to_have_count(0)
    page.locator("#d-blocks").scroll_into_view_if_needed()
    screenshot(page, "msprof_op-detail_blocks")
    events.assert_clean()


def test_hostile_names_render_as_text(page: Any, hostile_app: str) -> None:
    from playwright.sync_api import expect

    events = open_app(page, hostile_app)
    # plot label (top-kernels axis), finding list, header picker
    expect(page.locator("#ov-top .ytick text").filter(has_text="<img")).to_have_text(HOSTILE)
    expect(page.locator("#ov-findings .kernel-name").first).to_have_text(HOSTILE)
    show_tab(page, "Kernels")
    cell = page.locator(".ag-cell[col-id='name']").filter(has_text="<img").first
    expect(cell).to_have_text(HOSTILE)
    assert cell.evaluate(
        "e => e.querySelectorAll('*').length === e.querySelectorAll('span').length "
        "&& e.textContent.trim() === e.innerText.trim()"
    )
    show_tab(page, "Findings")
    item = page.locator("#f-list .kernel-name").first
    expect(item).to_have_text(HOSTILE)
    assert item.evaluate("e => e.childElementCount") == 0
    show_tab(page, "IR")
    expect(page.locator("#ir-tvmscript .ir-line").first).to_contain_text(HOSTILE)
    # the counters table, drawn by the page's script from the data the server sent
    show_tab(page, "Kernel detail")
    name = page.locator("#d-counters td.counter-name").filter(has_text="<img")
    expect(name).to_have_text(HOSTILE_COUNTER)
    assert name.evaluate("e => e.childElementCount") == 0
    assert page.evaluate("() => document.querySelectorAll('img').length") == 0
    events.assert_clean()


def test_positive_control_the_recorder_sees_an_injection(page: Any) -> None:
    events = record_events(page, "about:")
    page.set_content("<div id='sink'></div>")
    page.evaluate("() => { document.getElementById('sink').innerHTML = '<img src=x onerror=alert(1)>'; }")
    page.wait_for_timeout(500)
    assert events.dialogs == ["1"]


@pytest.fixture(scope="module")
def fa_app() -> Iterator[tuple[str, Any]]:
    """The TileLang bundle (p0), and the msprof op sample (the FA kernel on 24 blocks) second: the
    Compare view's base in test_every_view_of_the_tilelang_bundle."""
    app = create_app([SAMPLES / "tilelang_fa_bundle", SAMPLES / "tilelang_fa_msprof_op"])
    with serve_wsgi(app.server) as url:
        yield url, app


def _marks_of(app: Any, index: int) -> dict[str, list[int]]:
    """The lines each stage marks for finding `index`, as the server computes them."""
    from tilescope.dashboard.ir_view import ir_kernels, kernel_of_locations, load_stages, mark_locations

    store = store_of(app)
    entry = store.get("p0")
    assert entry is not None and isinstance(entry.profile.ir, dict)
    ir = entry.profile.ir
    locations = entry.findings[index]["locations"]
    kernel = kernel_of_locations(ir, locations) or ir_kernels(ir)[0]
    stages = load_stages(entry.profile.ir_dir, entry.profile.ir, kernel, store.roots)
    mark_locations(stages, locations, ir.get("line_map"), kernel)
    return {s.stage: sorted(s.marked) for s in stages}


def test_showing_the_findings_tab_again_keeps_its_list_and_a_click_lands(
    page: Any, fa_app: tuple[str, Any]
) -> None:
    """Showing the Findings tab again over the list it already holds redraws nothing: a redraw
    replaced the items under a click in flight, and the click was lost (CI once saw the detail
    stay on the previous finding). The list's callback answers 204 (no update) on the return;
    a click right after the tab is shown lands."""
    from playwright.sync_api import expect

    url, app = fa_app
    entry = store_of(app).get("p0")
    assert entry is not None and len(entry.findings) >= 2
    events = open_app(page, url)
    answers: list[int] = []  # the findings list's callback, each time it answers

    def on_response(r: Any) -> None:
        if "_dash-update-component" in r.url and "f-list.children" in (r.request.post_data or ""):
            answers.append(r.status)

    page.on("response", on_response)
    show_tab(page, "Findings")
    items = page.locator("#f-list .finding-item")
    expect(items).to_have_count(len(entry.findings))
    show_tab(page, "Overview")
    expect(page.locator("#ov-kpis .kpi")).to_have_count(6)
    drawn = len(answers)
    show_tab(page, "Findings")
    items.nth(1).click()  # at once, as the tab's callbacks are in flight
    expect(page.locator("#f-detail h3")).to_contain_text(str(entry.findings[1]["code"]))
    page.wait_for_timeout(500)
    # the return answered "nothing to redraw"; the click's new selection redrew the list once
    assert answers[:drawn] and answers[drawn] == 204, answers
    assert 200 in answers[drawn + 1:], answers
    events.assert_clean()


def test_show_in_ir_always_shows_the_selected_finding(page: Any, fa_app: tuple[str, Any]) -> None:
    """Findings -> TS504 -> Show in IR -> Findings -> TS201 -> Show in IR showed TS504's marks
    under a dropdown saying TS201, unscrolled (issue #15 item 2). Then the tab is left and shown
    again: the same finding, marks and scroll, without the panes being sent again."""
    from playwright.sync_api import expect

    url, app = fa_app
    entry = store_of(app).get("p0")
    assert entry is not None
    events = open_app(page, url)
    sent: list[int] = []  # the statuses of the IR callback's answers
    page.on("response", lambda r: sent.append(r.status) if "ir-data" in (r.request.post_data or "") else None)
    for code in ("TS504", "TS201"):
        index = next(i for i, f in enumerate(entry.findings) if f["code"] == code)
        finding = entry.findings[index]
        show_tab(page, "Findings")
        page.locator("#f-list .finding-item").nth(index).click()
        expect(page.locator("#f-detail h3")).to_contain_text(code)
        page.locator("#f-to-ir").click()
        expect(page.locator(".tab--selected")).to_have_text("IR")
        expect(page.locator("#ir-finding")).to_contain_text(f"{code} {finding['slug']}")
        label = f"Marked: {code} {finding['slug']} — " + ", ".join(finding["kernels"][:2])
        expect(page.locator("#ir-info")).to_have_text(label)
        expect(page.locator("#ir-panes")).not_to_have_class("ir-panes ir-stale")
        want = _marks_of(app, index)
        for stage, lines in want.items():
            marked = page.locator(f"#ir-{stage} .ir-line.hl")
            got = [int(x) for x in marked.evaluate_all("els => els.map(e => e.dataset.line)")]
            assert got == lines, (code, stage)
            if lines:
                expect(marked.first).to_be_in_viewport()
    first_visit = len(sent)
    show_tab(page, "Overview")
    expect(page.locator("#ov-kpis .kpi")).to_have_count(6)
    show_tab(page, "IR")
    expect(page.locator("#ir-info")).to_contain_text("Marked: TS201")
    expect(page.locator("#ir-tvmscript .ir-line.hl").first).to_be_in_viewport()
    page.wait_for_timeout(300)
    assert sent[first_visit:] == [204, 204]  # leaving, coming back: no panes sent, the page redrew them
    screenshot(page, "ir_fa_bundle")
    events.assert_clean()


# One PNG per dashboard view of the TileLang bundle: docs/screenshots/<name>.png (README links
# overview.png). The Kernel detail view gives three: its top, its per-block heatmap and its counters;
# the Compare view two: its top and one kernel's counters beside the base's.
DOC_VIEWS = ("overview", "kernels", "detail", "detail_blocks", "detail_counters", "roofline", "timeline",
             "findings", "ir", "compare", "compare_counters")


def test_every_view_of_the_tilelang_bundle(page: Any, fa_app: tuple[str, Any]) -> None:
    """Each tab on sample_traces/tilelang_fa_bundle in a state that shows what it is for; the
    screenshots are the documentation's (TILESCOPE_UPDATE_SCREENSHOTS=1 writes docs/screenshots/)."""
    from playwright.sync_api import expect

    from tilescope.dashboard.layout import TABS

    url, app = fa_app
    entry = store_of(app).get("p0")
    assert entry is not None
    events = open_app(page, url)
    taken: list[str] = []

    def shot(name: str) -> None:
        screenshot(page, name, docs=True)
        taken.append(name)

    expect(page.locator("#profile")).to_contain_text("tilelang_fa_bundle")
    expect(page.locator("#ov-findings .finding-item").first).to_contain_text(entry.findings[0]["code"])
    shot("overview")

    show_tab(page, "Kernels")
    expect(page.locator("#k-count")).to_contain_text("of 1 launch")
    shot("kernels")

    page.locator(".ag-row[row-index='0'] [col-id='name']").first.click()
    expect(page.locator(".tab--selected")).to_have_text("Kernel detail")
    expect(page.locator("#d-kernel")).to_contain_text("flash_fwd_kernel_mix_aic")
    expect(page.locator("#d-pipes .xtick")).not_to_have_count(0)
    shot("detail")
    expect(page.locator("#d-blocks .ytick")).to_have_count(3)  # cube0, vector0, vector1
    page.locator("#d-blocks").scroll_into_view_if_needed()
    shot("detail_blocks")
    # the kernel's raw counters, by metric group (#28 item 6)
    expect(page.locator("#d-counters th.counter-group").filter(has_text="MemoryL0")).to_have_count(1)
    page.locator("#d-counters th.counter-group").filter(has_text="MemoryL0").scroll_into_view_if_needed()
    shot("detail_counters")

    show_tab(page, "Roofline")
    expect(page.locator("#roofline .g-xtitle")).to_have_text("arithmetic intensity (FLOP/byte)")
    shot("roofline")

    show_tab(page, "Timeline")
    expect(page.locator("#tl-info")).not_to_be_empty()
    shot("timeline")

    # Findings: the Cube/Vector imbalance (the story's finding), then Show in IR
    index = next(i for i, f in enumerate(entry.findings) if f["code"] == "TS201")
    show_tab(page, "Findings")
    page.locator("#f-list .finding-item").nth(index).click()
    expect(page.locator("#f-detail h3")).to_contain_text("TS201")
    expect(page.locator("#f-detail .rule-doc")).to_contain_text("What it does")
    shot("findings")
    page.locator("#f-to-ir").click()
    expect(page.locator(".tab--selected")).to_have_text("IR")
    expect(page.locator("#ir-info")).to_contain_text("Marked: TS201")
    expect(page.locator("#ir-tvmscript .ir-line.hl").first).to_be_in_viewport()
    shot("ir")

    show_tab(page, "Compare")
    pick(page, "c-base", "tilelang_fa_msprof_op")
    pick(page, "c-head", "tilelang_fa_bundle")
    expect(page.locator("#c-kpis .kpi")).to_have_count(5)
    expect(page.locator("#c-delta .g-xtitle")).to_have_text("time change, head − base (µs)")
    shot("compare")
    # two kernels' counters side by side (#28 item 6): the runs name the kernel apart, so the pair
    expect(page.locator("#c-counters")).to_contain_text("No kernel of one name ran in both")
    pick(page, "c-match-base", "flash_attn_fwd_kernel_mix_aic")
    pick(page, "c-match-head", "flash_fwd_kernel_mix_aic")
    expect(page.locator("#c-counters h4")).to_contain_text("tilelang_fa_bundle: flash_fwd_kernel_mix_aic")
    page.locator("#c-counters").scroll_into_view_if_needed()
    shot("compare_counters")

    assert sorted(taken) == sorted(DOC_VIEWS)
    assert {v for v, _ in TABS} <= {n.split("_")[0] for n in taken}  # every tab has its picture
    events.assert_clean()


def test_a_refused_ir_answer_says_why_and_static_savings_read_right(
    page: Any, fa_app: tuple[str, Any]
) -> None:
    """#15: the IR callback answered 400 and the info line kept saying "Marking…"; static findings
    read "est. static: no time estimate" in the findings list."""
    from playwright.sync_api import expect

    url, app = fa_app
    entry = store_of(app).get("p0")
    assert entry is not None
    open_app(page, url)
    show_tab(page, "Findings")
    ts504 = next(i for i, f in enumerate(entry.findings) if f["code"] == "TS504")
    ts201 = next(i for i, f in enumerate(entry.findings) if f["code"] == "TS201")
    items = page.locator("#f-list .finding-item")
    expect(items.nth(ts504).locator(".saving")).to_have_text("static: no time estimate")
    saving = items.nth(ts201).locator(".saving")
    expect(saving).to_have_text(saving_phrase(entry.findings[ts201]))
    assert saving.inner_text().startswith("est. ") and "µs" in saving.inner_text()

    why = "profile p0: cannot read ir/ir.json (a refusal made by this test)"

    def refuse_ir(route: Any) -> None:
        if "ir-data.data" in (route.request.post_data or ""):
            route.fulfill(status=400, body=why, content_type="text/plain; charset=utf-8")
        else:
            route.continue_()

    page.route(lambda u: "_dash-update-component" in u, refuse_ir)
    items.nth(ts201).click()
    expect(page.locator("#f-detail h3")).to_contain_text("TS201")
    page.locator("#f-to-ir").click()
    expect(page.locator(".tab--selected")).to_have_text("IR")
    expect(page.locator("#ir-info")).to_have_text(f"Could not show the IR (HTTP 400): {why}")
    expect(page.locator("#ir-panes")).not_to_have_class("ir-panes ir-stale")
