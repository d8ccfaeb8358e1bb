"""HTML report: self-contained, escaped, charts, rule docs, highlighted excerpts.

The structural checks parse the page with the standard library's HTMLParser: every element and
attribute the page really has is listed, so an injected tag or handler cannot hide in a string
search. The browser test (tests/browser/) checks the same page in Chromium.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from plotly.offline import get_plotlyjs

from tilescope.report import render_html
from tilescope.report.palette import CUBE, MTE2, SCALAR, SEVERITY_COLOURS, VECTOR

from support.report_data import HOSTILE, hostile_report, make_bundle, sample_report

ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h4", "p", "b",
                "span", "section", "script", "div", "table", "thead", "tbody", "tr", "th", "td", "code",
                "details", "summary", "a", "ul", "li", "pre", "footer"}



@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return make_bundle(tmp_path / "bundle")

class Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        if tag == "script":
            self._in_script = dict(attrs)

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            self.scripts.append((self._in_script, data))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = None


def _parse(page: str) -> Collector:
    c = Collector()
    c.feed(page)
    return c


@pytest.fixture(scope="module")
def report_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    b = make_bundle(tmp_path_factory.mktemp("html") / "bundle")
    return render_html.render(sample_report(b))


def test_self_contained_with_inlined_plotly_and_no_network(report_page: str) -> None:
    page = report_page
    parsed = _parse(page)
    assert get_plotlyjs() in page
    for tag, attrs in parsed.tags:
        names = dict(attrs)
        assert "src" not in names, (tag, attrs)
        assert (names.get("href") or "#").startswith("#"), (tag, attrs)  # in-page anchors only
        assert tag != "link" and tag != "iframe"
    csp = next(dict(a)["content"] for t, a in parsed.tags if t == "meta" and dict(a).get("http-equiv"))
    assert "default-src 'none'" in (csp or "") and "connect-src 'none'" in (csp or "")


def test_charts_findings_colours_and_rule_docs(report_page: str) -> None:
    page = report_page
    for chart in ("chart-shares", "chart-pipes", "chart-roofline", "chart-timeline"):
        assert f'id="{chart}"' in page
    figures = [json.loads(body) for attrs, body in _parse(page).scripts
               if attrs.get("class") == "tilescope-figure"]
    assert len(figures) == 4
    pipes = next(f for f in figures if f["layout"]["title"]["text"].startswith("Pipe busy"))
    colours = {t["name"]: t["marker"]["color"] for t in pipes["data"]}
    assert colours["Cube"] == CUBE and colours["Vector"] == VECTOR and colours["MTE2 (AIC)"] == MTE2
    assert colours["Scalar (AIC)"] == SCALAR
    for sev, colour in SEVERITY_COLOURS.items():
        assert f".sev-{sev} {{ background: {colour};" in page
    codes = re.findall(r'<details class="finding \w+" id="finding-\d+" data-code="(TS\d+)"', page)
    assert codes == ["TS101", "TS201", "TS402", "TS402"]
    assert 'id="rule-TS101"' in page and 'id="rule-TS402"' in page


def test_rule_documentation_comes_from_the_rule_docstring() -> None:
    from tilescope.engine import get_rule

    info = get_rule("TS102")
    if info is None:
        pytest.skip("rule TS102 is not installed")
    report = sample_report(None)
    report["findings"][0]["code"] = "TS102"
    page = render_html.render(report)
    section = page.split('id="rule-TS102"')[1].split("</details>")[0]
    assert "<h4>What it does</h4>" in section and "<h4>Known limits</h4>" in section
    first_para = info.doc.split("## What it does", 1)[1].split("##", 1)[0].split("\n\n")[0].strip()
    assert " ".join(first_para.split())[:40].replace("`", "") in " ".join(
        re.sub(r"<[^>]+>", "", section).split()).replace("&#x27;", "'")


def test_excerpts_are_highlighted_with_referenced_lines_marked(report_page: str) -> None:
    page = report_page
    excerpt = page.split('data-stage="source" data-marked="12,13"')[1].split("</pre>")[0]
    lines = excerpt.split('<span class="linenos">')[1:]
    numbers = [int(x.split("</span>")[0]) for x in lines]
    assert numbers == list(range(9, 17))  # 3 lines of context around 12-13
    highlighted = [n for n, x in zip(numbers, lines, strict=True) if 'class="hll"' in x]
    # Pygments opens the highlight span before the line-number span: look one line back
    hll_before = [numbers[i] for i, x in enumerate(lines[:-1]) if x.rstrip().endswith('<span class="hll">')]
    assert hll_before == [11, 12] or highlighted == [12, 13], excerpt
    assert 'data-stage="ascendc" data-marked="20"' in page


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_names_never_become_markup(bundle: Path, hostile: str) -> None:
    page = render_html.render(hostile_report(bundle, hostile))
    parsed = _parse(page)
    assert {t for t, _ in parsed.tags} <= ALLOWED_TAGS
    assert not any(t == "img" for t, _ in parsed.tags)
    for tag, attrs in parsed.tags:
        for name, _value in attrs:
            assert not name.startswith("on"), (tag, attrs)
    for script_attrs, body in parsed.scripts:
        if script_attrs.get("type") == "application/json":
            assert "</" not in body and "<!--" not in body
            json.loads(body)
    report_json = next(b for a, b in parsed.scripts if a.get("id") == "tilescope-report")
    assert json.loads(report_json)["top_kernels"][0]["name"] == hostile
    # the visible kernel cell holds exactly the hostile text
    cell = re.search(r'<code class="kernel-name">(.*?)</code>', page, re.DOTALL)
    assert cell is not None
    import html as _html

    assert _html.unescape(cell.group(1)) == hostile
