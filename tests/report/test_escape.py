"""Neutralisation helpers: each hostile string is inert in the context its helper targets.

Markdown is checked by parsing it with markdown-it (CommonMark + GFM tables, raw HTML allowed as
GitHub allows a subset), so the assertions are about what a renderer produces, not about which
backslashes were inserted.
"""

from __future__ import annotations

import html
import json
import re

import pytest
from markdown_it import MarkdownIt

from tilescope.text.escape import (
    html_text,
    json_for_script,
    md_code_block,
    md_code_span,
    md_html_text,
    md_text,
    one_line,
    plotly_text,
    sarif_text,
)

from support.report_data import HOSTILE

MD = MarkdownIt("commonmark", {"html": True}).enable("table")


def _visible_text(rendered_html: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", rendered_html))


def _flat(s: str) -> str:
    return one_line(s, None)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_md_text_renders_as_the_literal_text(hostile: str) -> None:
    out = MD.render(f"before {md_text(hostile, None)} after")
    assert "<img" not in out and "<script" not in out and "<a " not in out
    assert _visible_text(out).strip().replace("\u200b", "") == f"before {_flat(hostile)} after"


@pytest.mark.parametrize("hostile", HOSTILE)
def test_md_table_cells_stay_in_their_column(hostile: str) -> None:
    table = f"| a | b | c |\n|---|---|---|\n| {md_text(hostile)} | {md_code_span(hostile)} | end |\n"
    out = MD.render(table)
    body = out.split("<tbody>")[1]
    assert body.count("<td>") == 3, out
    assert "<td>end</td>" in body
    assert "<img" not in out and "<a " not in out


def test_mentions_and_references_are_broken() -> None:
    assert md_text("@org/team") == "@\u200borg/team"
    assert md_html_text("cc @alice #12") == "cc @\u200balice #\u200b12"
    assert "\u200b" not in md_text("a@")  # a lone @ is not a mention


def test_line_breaks_cannot_start_new_blocks() -> None:
    out = md_text("x\n# heading\n- item\n<script>")
    assert "\n" not in out
    assert "<h1>" not in MD.render(out) and "<li>" not in MD.render(out)
    assert md_text("-x").startswith("\\-") and md_text("=x").startswith("\\=")


def test_code_span_and_fence_outlast_backtick_runs() -> None:
    assert md_code_span("a``b") == "```a``b```"
    assert md_code_span("`x`") == "`` `x` ``"
    block = md_code_block("````\n</details>\n@team [x](javascript:alert(1))", "python")
    fence = block.split("\n", 1)[0]
    assert fence == "`````python"
    out = MD.render(block)
    assert out.startswith('<pre><code class="language-python">')
    assert "&lt;/details&gt;" in out and "<a " not in out
    assert md_code_block("x", "py onclick=1").startswith("```\n")  # unsafe info string dropped


def test_html_text_escapes_tags_and_both_quotes() -> None:
    out = html_text("<img src=x onerror=alert(1)> \"a\" 'b' &")
    assert "<" not in out and '"' not in out and "'" not in out
    assert html.unescape(out) == "<img src=x onerror=alert(1)> \"a\" 'b' &"


@pytest.mark.parametrize("hostile", HOSTILE)
def test_json_for_script_cannot_close_the_script(hostile: str) -> None:
    value = {"name": hostile, "nested": [hostile, float("nan")]}
    out = json_for_script(value)
    assert "</" not in out and "<!--" not in out and "<" not in out
    assert json.loads(out) == {"name": hostile, "nested": [hostile, None]}


def test_plotly_text_and_sarif_text() -> None:
    assert plotly_text("<b>x</b> & y") == "&lt;b&gt;x&lt;/b&gt; &amp; y"
    assert sarif_text("[x](javascript:alert(1)) a\\b") == "\\[x\\](javascript:alert(1)) a\\\\b"


def test_one_line_strips_terminal_control_sequences() -> None:
    assert one_line("a\x1b]0;pwned\x07b") == "a ]0;pwned b"
    assert one_line("x" * 300, 10) == "x" * 9 + "…"
