"""One self-contained HTML report: charts, findings, rule documentation and IR excerpts.

plotly.js is inlined from the installed plotly package, so the file opens offline and makes no
request at all; a Content-Security-Policy forbids network access as a second line of defence.
Every untrusted value is HTML-escaped; data for scripts travels as JSON in
`<script type="application/json">` with `<`, `>` and `&` \\u-escaped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import plotly.io as pio
from plotly.offline import get_plotlyjs
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from tilescope.engine import get_rule
from tilescope.report import lines_view
from tilescope.report.access import (
    data_warnings,
    profile_summaries,
    report_chip,
    report_findings,
    report_input_path,
    report_kernels,
    report_summary,
)
from tilescope.report.charts import figures_from_report
from tilescope.report.evidence import EvidenceTable, evidence_tables
from tilescope.report.palette import CUBE, IDLE, MTE2, SCALAR, SEVERITY_COLOURS, VECTOR
from tilescope.report.ranks import (
    RANK_COLUMNS,
    SCOPE_CLUSTER,
    group_across_ranks,
    rank_rows,
    ranks_total,
    unique_skipped,
)
from tilescope.report.render_md import (
    Excerpt,
    excerpt_roots,
    finding_excerpts,
    kernels_text,
)
from tilescope.report.run import PER_RANK_COLUMNS, per_rank_rows, ranks_phrase, run_lines, run_of
from tilescope.text.escape import html_text, json_for_script, script_safe
from tilescope.text.words import (
    KERNEL_COLUMNS_NOTE,
    chip_text,
    coverage_text,
    fmt_pct,
    fmt_us,
    headline,
    launches_text,
    saving_phrase,
    sol_text,
    speed_of_light_text,
    unit_share_parts,
)

# No network at all; inline scripts and styles only (plotly.js builds its styles at run time).
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data: blob:; font-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'")
PLOT_CONFIG = {"displaylogo": False, "responsive": True, "showLink": False}

CSS = f"""
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1200px; padding: 1em 2em;
       color: #222; }}
h1 {{ font-size: 1.5em; margin-bottom: .2em; overflow-wrap: anywhere; }}
h2 {{ border-bottom: 1px solid #ddd; }}
/* Nothing wider than the window (#28 item 11: 2,278 px at 1366): the facts wrap between items (the
   spans had no break between them) and inside one too long for a line; long names and paths break
   anywhere; a table too wide for the page scrolls on its own. */
.facts {{ display: flex; flex-wrap: wrap; column-gap: 1.2em; }}
.facts span {{ overflow-wrap: anywhere; }}
#headline, #run li, .message, .recommendation {{ overflow-wrap: anywhere; }}
code, .kernel-name {{ overflow-wrap: anywhere; }}
table {{ display: block; max-width: 100%; overflow-x: auto; }}
.chart {{ max-width: 100%; }}
.cube {{ color: {CUBE}; }} .vector {{ color: {VECTOR}; }} .mte {{ color: {MTE2}; }}
.scalar {{ color: {SCALAR}; }}
table {{ border-collapse: collapse; margin: .5em 0 1em; }}
th, td {{ border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
code, pre {{ font-family: ui-monospace, monospace; }}
.sev {{ display: inline-block; border-radius: 3px; padding: 0 6px; color: #fff; font-weight: 600; }}
.sev-high {{ background: {SEVERITY_COLOURS['high']}; }}
tr.slow-rank td {{ color: {SEVERITY_COLOURS['high']}; font-weight: bold; }}
.sev-medium {{ background: {SEVERITY_COLOURS['medium']}; }}
.sev-low {{ background: {SEVERITY_COLOURS['low']}; color: #222; }}
.sev-info {{ background: {SEVERITY_COLOURS['info']}; }}
details.finding {{ border: 1px solid #ddd; border-left-width: 6px; border-radius: 4px; margin: .6em 0;
                   padding: .3em .8em; }}
details.finding.high {{ border-left-color: {SEVERITY_COLOURS['high']}; }}
details.finding.medium {{ border-left-color: {SEVERITY_COLOURS['medium']}; }}
details.finding.low {{ border-left-color: {SEVERITY_COLOURS['low']}; }}
details.finding.info {{ border-left-color: {SEVERITY_COLOURS['info']}; }}
details.finding > summary {{ cursor: pointer; }}
.excerpt .hll {{ background: #fff3b0; display: block; }}
.excerpt pre {{ margin: 0; padding: .4em; background: #f8f8f8; overflow-x: auto; }}
.note {{ color: #666; font-style: italic; }}
.warning {{ color: #c0392b; }}
.chart {{ min-height: 120px; }}
.excerpt, details.finding {{ max-width: 100%; box-sizing: border-box; }}
.ruledoc pre {{ background: #f8f8f8; padding: .4em; }}
"""


def render(report: Mapping[str, Any], *, ir_root: str | Path | None = None,
           source_root: str | Path | None = None, title: str | None = None, **_opts: Any) -> str:
    findings = group_across_ranks(report_findings(report), ranks_total(report))
    run = run_of(report)
    if run is not None:  # the run's own findings first, then the ranks', each by saving
        findings = ([f for f in findings if f.get("scope") == SCOPE_CLUSTER]
                    + [f for f in findings if f.get("scope") != SCOPE_CLUSTER])
    roots = excerpt_roots(report, ir_root, source_root)
    src = run["path"] if run is not None else report_input_path(report)
    page_title = title or ("tilescope report — " + (src or "profile"))
    parts = [
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html_text(page_title, 200)}</title>",
        f"<style>{CSS}{_pygments_css()}</style></head><body>",
        _header(report, findings, page_title),
        _ranks(report),
        _per_rank(report) if run is not None else "",
        _charts(report, run),
        "" if run is not None else _top_kernels(report),
        _measured_lines(report),
        _findings(findings, roots),
        _rule_docs(findings),
        _skipped_and_errors(report),
        f'<script type="application/json" id="tilescope-report">{json_for_script(report)}</script>',
        f"<script>{_plotly_js()}</script>",
        f"<script>{_BOOT}</script>",
        "</body></html>\n",
    ]
    return "\n".join(parts)


# The plot bootstrap reads figures from JSON data blocks; it never builds HTML from strings.
_BOOT = """
(function () {
  var cfg = JSON.parse(document.getElementById('tilescope-plot-config').textContent);
  document.querySelectorAll('script.tilescope-figure').forEach(function (el) {
    var fig = JSON.parse(el.textContent);
    Plotly.newPlot(el.getAttribute('data-target'), fig.data, fig.layout, cfg);
  });
})();
"""


@lru_cache(maxsize=1)
def _plotly_js() -> str:
    # The minified bundle never contains "</script" (plotly's own offline HTML inlines it the
    # same way); checked once so a future bundle that does cannot break out silently.
    js = get_plotlyjs()
    if re.search(r"</script", js, re.IGNORECASE):
        js = re.sub(r"</(script)", r"<\\/\1", js, flags=re.IGNORECASE)
    return js


@lru_cache(maxsize=1)
def _pygments_css() -> str:
    return str(HtmlFormatter(style="default").get_style_defs(".excerpt"))


def _header(report: Mapping[str, Any], findings: Sequence[Mapping[str, Any]], page_title: str) -> str:
    run = run_of(report)
    closing = headline(findings, profile_summaries(report))
    # what was left out of the input (rows skipped, values out of range), in either header
    warnings = "".join(f'<p class="warning">{html_text(w, 400)}</p>' for w in data_warnings(report))
    if run is not None:  # several ranks: the run, never its first rank, leads (issue #28)
        lead = "".join(f"<li>{html_text(line)}</li>" for line in run_lines(run))
        return (f"<header><h1>{html_text(page_title, 200)}</h1>"
                f'<p class="facts"><span><b>{html_text(ranks_phrase(run))}</b></span></p>'
                f'<ul id="run">{lead}</ul>{warnings}'
                f'<p id="headline"><b>{html_text(closing)}</b></p></header>')
    s = report_summary(report)
    chip = report_chip(report).get("name")
    facts = [f'<span><b>Device time {html_text(fmt_us(s["total_device_us"]))}</b></span>']
    busy = [f'<span class="{key}">{html_text(text)}</span>' for key, text in unit_share_parts(s["raw"])]
    if busy:
        # the definition travels with the numbers (tilescope.summary.DEFINITIONS["units"]), and the
        # coverage qualifier the terminal and Markdown print (words.units_text)
        facts.append(f'<span title="{html_text(s["units_definition"])}">busy (of device time): '
                     + " · ".join(busy) + html_text(coverage_text(s["raw"])) + "</span>")
    sol = speed_of_light_text(s["raw"])
    if sol:
        facts.append(f"<span>{html_text(sol)}</span>")
    if chip:
        facts.append(f"<span>chip {html_text(chip_text(report_chip(report)), 200)}</span>")
    if s["kernel_count"] is not None:
        facts.append(f"<span>{html_text(launches_text(s['raw']), 60)}</span>")
    return (f"<header><h1>{html_text(page_title, 200)}</h1>"
            f'<p class="facts">{"".join(facts)}</p>{warnings}'
            f'<p id="headline"><b>{html_text(closing)}</b></p>'
            "</header>")


def _charts(report: Mapping[str, Any], run: Mapping[str, Any] | None = None) -> str:
    # the charts draw the report's first profile: named as such when there are several ranks
    first = (report.get("profiles") or [{}])[0].get("rank")
    heading = "Where the time goes" + (f" — rank {first}" if run is not None else "")
    out = [f'<section id="charts"><h2>{html_text(heading)}</h2><script type="application/json" '
           f'id="tilescope-plot-config">{json_for_script(PLOT_CONFIG)}</script>']
    for key, fig in figures_from_report(report).items():
        if isinstance(fig, str):
            out.append(f'<p class="note" id="chart-{key}-absent">{html_text(fig)}</p>')
            continue
        out.append(f'<div class="chart" id="chart-{key}"></div>')
        out.append(f'<script type="application/json" class="tilescope-figure" data-target="chart-{key}">'
                   f"{script_safe(pio.to_json(fig, validate=False))}</script>")
    out.append("</section>")
    return "\n".join(out)


def _td(value: str, numeric: bool = False) -> str:
    return f'<td class="num">{value}</td>' if numeric else f"<td>{value}</td>"


def _ranks(report: Mapping[str, Any]) -> str:
    """The rank table of a multi-rank report (step time split per rank, the slow rank marked)."""
    rows = rank_rows(report)
    if not rows:
        return ""
    section = report.get("cluster") or {}
    head = "".join(f"<th>{html_text(c)}</th>" for c in (*RANK_COLUMNS[:-1], "note"))
    out = [f'<section id="ranks"><h2>Ranks</h2><p class="note">{section.get("ranks_loaded")} of '
           f'{section.get("ranks_total")} with a readable kernel table; times summed over the profiled '
           "steps.</p>"
           f"<table><thead><tr>{head}</tr></thead><tbody>"]
    for row in rows:
        slow = ' class="slow-rank"' if "slow rank" in row[-1] else ""
        out.append(f"<tr{slow}>" + "".join(_td(html_text(c), 0 < i < 5) for i, c in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    out += [f'<p class="note">{html_text(n)}</p>' for n in section.get("notes") or []]
    out.append("</section>")
    return "\n".join(out)


def _per_rank(report: Mapping[str, Any]) -> str:
    """A multi-rank report's per-rank summaries (tilescope.report.run.per_rank_rows)."""
    head = "".join(f"<th>{html_text(c)}</th>" for c in PER_RANK_COLUMNS)
    out = [f'<section id="per-rank"><h2>Per rank</h2><table><thead><tr>{head}</tr></thead><tbody>']
    for ranks, device, launches, busy, sol, name, share in per_rank_rows(report):
        top = f'<code class="kernel-name">{html_text(name)}</code> {html_text(share)}' if name else "–"
        out.append("<tr>" + "".join([
            _td(html_text(ranks)), _td(html_text(device), True), _td(html_text(launches)),
            _td(html_text(busy)), _td(html_text(sol), True), _td(top),
        ]) + "</tr>")
    out.append("</tbody></table></section>")
    return "\n".join(out)


def _top_kernels(report: Mapping[str, Any]) -> str:
    rows = report_kernels(report)
    if not rows:
        return ""
    out = ['<section id="kernels"><h2>Top kernels</h2><table><thead><tr><th>#</th><th>kernel</th>'
           "<th>op type</th><th>core</th><th>launches</th><th>time</th><th>share</th><th>Cube busy</th>"
           "<th>Vector busy</th><th>speed of light</th></tr></thead><tbody>"]
    for i, r in enumerate(rows, 1):
        out.append("<tr>" + "".join([
            _td(str(i), True), _td(f'<code class="kernel-name">{html_text(r.get("name", "?"))}</code>'),
            _td(html_text(r.get("op_type", ""))), _td(html_text(r.get("core_type", ""))),
            _td(html_text(r.get("launches", r.get("count", ""))), True),
            _td(html_text(fmt_us(r.get("total_us", r.get("duration_us")))), True),
            _td(html_text(fmt_pct(r.get("share"))), True),
            _td(html_text(fmt_pct(r.get("cube_share"))), True),
            _td(html_text(fmt_pct(r.get("vector_share"))), True),
            _td(html_text(sol_text(r)), True),
        ]) + "</tr>")
    out.append(f'</tbody></table><p class="note">{KERNEL_COLUMNS_NOTE}</p></section>')
    return "\n".join(out)


def _measured_lines(report: Mapping[str, Any]) -> str:
    """The hottest measured lines of a bundle with simulator output (docs/lines.md)."""
    section = lines_view.lines_of(report)
    if section is None:
        return ""
    out = [f'<section id="lines"><h2>{lines_view.title(section)}</h2>',
           f'<p class="note">{html_text(lines_view.heading(section), 300)}</p>',
           f"<table><thead><tr><th>share</th><th>{lines_view.quantity(section)}</th><th>per core</th>"
           "<th>TileLang line</th><th>pipes</th><th>Ascend C lines</th></tr></thead><tbody>"]
    for r in lines_view.line_rows(section):
        line = html_text(r.where) + (f" <code>{html_text(r.what)}</code>" if r.what else "")
        out.append("<tr>" + "".join([
            _td(html_text(r.share), True), _td(html_text(r.cycles), True), _td(html_text(r.per_core), True),
            _td(line), _td(html_text(r.pipes)), _td(html_text(r.ascendc)),
        ]) + "</tr>")
    out.append("</tbody></table>")
    sync = lines_view.sync_sentence(section)
    out += [f'<p class="note">{html_text(sync, 600)}</p>'] if sync else []
    more = lines_view.left_out(section)
    if more:
        out.append(f'<p class="note">{more} more line(s): <code>tilescope lines</code> lists them all.</p>')
    out.append("</section>")
    return "\n".join(out)


def _findings(findings: Sequence[Mapping[str, Any]], roots: Sequence[Path]) -> str:
    out = ['<section id="findings"><h2>Findings by estimated saving</h2>']
    if not findings:
        out.append('<p class="note">No findings.</p>')
    for i, f in enumerate(findings, 1):
        out.append(_finding(i, f, roots))
    out.append("</section>")
    return "\n".join(out)


def _finding(index: int, f: Mapping[str, Any], roots: Sequence[Path]) -> str:
    sev = str(f.get("severity", "info"))
    sev_cls = sev if sev in SEVERITY_COLOURS else "info"
    code = html_text(f.get("code", "?"), 20)
    parts = [
        f'<details class="finding {sev_cls}" id="finding-{index}" data-code="{code}" '
        f'data-severity="{html_text(sev, 10)}"' + (" open" if index <= 3 else "") + ">",
        f'<summary><span class="sev sev-{sev_cls}">{html_text(sev.upper(), 10)}</span> '
        f'<code>{code}</code> <span class="slug">{html_text(f.get("slug", ""), 80)}</span>'
        + (f' · <span class="ranks">{html_text(f["rank_text"], 80)}</span>' if f.get("rank_text") else "")
        + f' · {html_text(saving_phrase(f))} — '
        f'<span class="message">{html_text(f.get("message", ""))}</span></summary>',
    ]
    names, more = kernels_text(f.get("kernels", []) or [], shown=20)
    if names:
        parts.append("<p><b>Kernels:</b> " + ", ".join(
            f'<code class="kernel-name">{html_text(n)}</code>' for n in names)
            + (f" and {more} more" if more else "") + "</p>")
    evidence = f.get("evidence") or {}
    if isinstance(evidence, Mapping) and evidence:
        parts += [_evidence_html(t) for t in evidence_tables(evidence, max_rows=50)]
    if f.get("recommendation"):
        parts.append(f'<p class="recommendation"><b>What to do:</b> {html_text(f["recommendation"])}</p>')
    locs = [loc for loc in f.get("locations", []) or [] if isinstance(loc, Mapping)]
    if locs:
        parts.append("<p><b>Where:</b> " + ", ".join(
            f'<code>{html_text(loc.get("file", "?"))}:{html_text(loc.get("line") or "")}</code>'
            + (f' ({html_text(loc.get("stage"))})' if loc.get("stage") else "") for loc in locs) + "</p>")
    for ex in finding_excerpts(f, roots):
        parts.append(_excerpt_html(ex))
    parts.append(f'<p><a href="#rule-{code}">Rule {code} documentation</a></p></details>')
    return "\n".join(parts)


def _evidence_html(table: EvidenceTable) -> str:
    """One evidence table (tilescope.report.evidence): values with their units, every cell escaped."""
    title = ""
    if table.title:
        count = f" (first {len(table.rows)} of {len(table.rows) + table.more})" if table.more else ""
        title = f'<p class="evidence-title"><i>{html_text(table.title)}</i>{count}</p>'
    head = "".join(f"<th>{html_text(c)}</th>" for c in table.columns)
    body = "".join("<tr>" + "".join(f"<td>{html_text(c)}</td>" for c in row) + "</tr>" for row in table.rows)
    return f'{title}<table class="evidence"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _excerpt_html(ex: Excerpt) -> str:
    marked = tuple(sorted(ex.marked))
    body = _highlighted("\n".join(ex.lines) + "\n", ex.language or "text", ex.first_line, marked)
    return (f'<div class="excerpt" data-stage="{html_text(ex.stage)}" '
            f'data-marked="{",".join(map(str, marked))}">'
            f"<p>{html_text(ex.stage or 'source')} · <code>{html_text(ex.display)}</code></p>{body}</div>")


# Findings share their excerpts (the TileLang bundle's report: 124 excerpts, 37 different; each
# highlighting ~2.5 ms): each different one is highlighted once.
@lru_cache(maxsize=512)
def _highlighted(text: str, language: str, first_line: int, marked: tuple[int, ...]) -> str:
    try:
        lexer = get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        lexer = get_lexer_by_name("text", stripnl=False, ensurenl=False)
    hl = [n - first_line + 1 for n in marked]  # Pygments counts from the snippet's line 1
    formatter = HtmlFormatter(linenos="inline", linenostart=first_line, hl_lines=hl, wrapcode=True)
    return str(highlight(text, lexer, formatter))


def _rule_docs(findings: Sequence[Mapping[str, Any]]) -> str:
    codes = sorted({str(f.get("code", "")) for f in findings if f.get("code")})
    if not codes:
        return ""
    out = ['<section id="rules"><h2>Rule documentation</h2>']
    for code in codes:
        out.append(f'<details class="ruledoc" id="rule-{html_text(code)}"><summary><code>'
                   f"{html_text(code)}</code> {html_text(_rule_slug(code))}</summary>"
                   f"{doc_to_html(_rule_doc(code))}</details>")
    out.append("</section>")
    return "\n".join(out)


def _rule_info(code: str) -> Any:
    try:
        return get_rule(code)
    except Exception:  # the rules package is being written or a rule fails to import
        return None


def _rule_slug(code: str) -> str:
    info = _rule_info(code)
    return str(info.slug) if info is not None else ""


def _rule_doc(code: str) -> str:
    info = _rule_info(code)
    if info is None or not info.doc:
        return f"No documentation found for {code} (is the rule installed?)."
    return str(info.doc)


def doc_to_html(doc: str) -> str:
    """The small Markdown subset rule docstrings use: `##` headings, fenced code, paragraphs."""
    out: list[str] = []
    for block in re.split(r"(```.*?```)", doc, flags=re.DOTALL):
        if block.startswith("```"):
            code = block.strip("`").split("\n", 1)[-1]
            out.append(f"<pre><code>{html_text(code)}</code></pre>")
            continue
        for para in re.split(r"\n\s*\n", block):
            para = para.strip()
            if not para:
                continue
            if para.startswith("#"):
                head, _, rest = para.partition("\n")
                out.append(f"<h4>{html_text(head.lstrip('#').strip())}</h4>")
                para = rest.strip()
                if not para:
                    continue
            # Example: "use `T.Pipelined`" -> "use <code>T.Pipelined</code>" (escaped first)
            out.append("<p>" + re.sub(r"`([^`]+)`", r"<code>\1</code>", html_text(para)) + "</p>")
    return "\n".join(out)


def _skipped_and_errors(report: Mapping[str, Any]) -> str:
    out = []
    skipped = unique_skipped(report.get("skipped", []) or [])  # once, not once per rank
    if skipped:
        out.append('<section id="skipped"><h2>Rules not run (missing inputs)</h2><ul>')
        out += [f"<li><code>{html_text(s.get('code', '?'))}</code> {html_text(s.get('slug', ''))}: needs "
                + ", ".join(f"<code>{html_text(m)}</code>" for m in s.get("missing") or []) + "</li>"
                for s in skipped]
        out.append("</ul></section>")
    errors = list(report.get("errors", []) or [])
    if errors:
        out.append('<section id="errors"><h2>Rule errors</h2><ul>')
        out += [f"<li><code>{html_text(e.get('code', '?'))}</code> {html_text(e.get('message', ''))}</li>"
                for e in errors]
        out.append("</ul></section>")
    tool = report.get("tool", {}) or {}
    version = tool.get("version", "") if isinstance(tool, Mapping) else ""
    out.append(f'<footer class="note">tilescope {html_text(version)} · report schema '
               f'{html_text(report.get("schema_version", "?"))} · colours: '
               f'<span class="cube">Cube</span>, <span class="vector">Vector</span>, '
               f'<span class="mte">MTE</span>, <span class="scalar">Scalar</span>, '
               f'<span style="color:{IDLE}">idle</span></footer>')
    return "\n".join(out)
