"""GitHub-flavoured Markdown report for pull-request comments and job summaries.

Every value that can come from a trace (kernel names, shapes, paths, evidence, messages) goes
through `tilescope.text.escape`; the output stays under GitHub's comment limit by dropping the
least valuable parts first and saying exactly what was dropped.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilescope.errors import UsageError
from tilescope.report import lines_view
from tilescope.report.access import (
    data_warnings,
    profile_summaries,
    report_chip,
    report_findings,
    report_input_path,
    report_kernels,
    report_summary,
    where_text,
)
from tilescope.report.evidence import evidence_tables
from tilescope.report.ranks import (
    RANK_COLUMNS,
    SCOPE_CLUSTER,
    group_across_ranks,
    rank_rows,
    ranks_total,
    unique_skipped,
)
from tilescope.report.run import PER_RANK_COLUMNS, per_rank_rows, ranks_phrase, run_lines, run_of
from tilescope.text.escape import md_code_block, md_code_span, md_html_text, md_nowrap, md_text
from tilescope.text.words import (
    KERNEL_COLUMNS_NOTE,
    chip_text,
    fmt_pct,
    fmt_us,
    headline,
    launches_text,
    saving_phrase,
    sol_text,
    speed_of_light_text,
    units_text,
)

GITHUB_COMMENT_LIMIT = 65_536
# A pull-request comment a reviewer reads in a minute: the headline, the kernels, every finding
# with its evidence and the code it points at, each excerpt once; what does not fit is named and
# left to the HTML report. Far under GitHub's limit (and the marker line a workflow prepends).
DEFAULT_MAX_CHARS = 20_000
SEVERITY_ICON = {"high": "🔴", "medium": "🟠", "low": "🟡", "info": "⚪"}
MAX_TOP_KERNELS = 15
MAX_LISTED = 30  # skipped rules / rule errors listed before "and N more"
EXCERPT_CONTEXT = 3
EXCERPT_MAX_LINES = 40
# characters of a message in a finding's one-line form (past the budget for full blocks): short
# enough that the first findings keep their blocks beside the first screen's fixes
SHORT_MESSAGE = 100
WHERE_SHOWN = 6  # locations listed in a finding's "Where" before "and N more"
STAGE_ORDER = {"source": 0, "tvmscript": 1, "ascendc": 2}  # the author's code first
_LEXER_BY_SUFFIX = {".py": "python", ".cpp": "cpp", ".cc": "cpp", ".h": "cpp", ".hpp": "cpp",
                    ".json": "json", ".mlir": "mlir", ".ll": "llvm"}


# ---------------------------------------------------------------- IR / source excerpts

@dataclass(frozen=True)
class Excerpt:
    path: Path
    display: str  # the location's file as the finding names it
    stage: str
    first_line: int  # 1-based number of lines[0]
    lines: tuple[str, ...]
    marked: frozenset[int]  # 1-based line numbers the finding points at

    @property
    def language(self) -> str:
        return _LEXER_BY_SUFFIX.get(self.path.suffix.lower(), "")


def excerpt_roots(report: Mapping[str, Any], ir_root: str | Path | None = None,
                  source_root: str | Path | None = None) -> list[Path]:
    """Directories excerpts may be read from: the bundle of the report's input, plus explicit ones.

    Locations come from trace and IR files, so a path like `../../home/u/.ssh/id_rsa` must not
    leak a file into a pull-request comment: only files inside these roots are ever read.
    """
    roots: list[Path] = []
    for cand in (ir_root, source_root, report_input_path(report)):
        if cand is None:
            continue
        p = Path(cand)
        if p.is_file():
            p = p.parent
        if p.is_dir():
            roots.append(p.resolve())
    return roots


def read_excerpt(loc: Mapping[str, Any], roots: Sequence[Path], context: int = EXCERPT_CONTEXT,
                 max_lines: int = EXCERPT_MAX_LINES) -> Excerpt | None:
    """The lines a location points at with some context, or None when the file is not reachable."""
    line = loc.get("line")
    name = str(loc.get("file") or "")
    if not name or not isinstance(line, int) or line < 1:
        return None
    end = loc.get("end_line")
    end = end if isinstance(end, int) and end >= line else line
    path = _confined(name, roots)
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    if line > len(text):
        return None
    end = min(end, len(text), line + max_lines - 1)
    first = max(1, line - context)
    last = min(len(text), end + context)
    return Excerpt(path=path, display=name, stage=str(loc.get("stage", "")), first_line=first,
                   lines=tuple(text[first - 1:last]), marked=frozenset(range(line, end + 1)))


def _confined(name: str, roots: Sequence[Path]) -> Path | None:
    max_bytes = 20 * 1024 * 1024
    for root in roots:
        # a run bundle keeps the author's kernel in kernel/ (collectors/bundle.py), while its
        # locations name it as it was given to `collect`/`lint` (a path outside the bundle)
        for cand in (Path(name), root / name, root / "ir" / name, root / "kernel" / Path(name).name):
            full = cand if cand.is_absolute() else root / cand
            try:
                resolved = full.resolve()
            except (OSError, RuntimeError):
                continue
            if resolved.is_relative_to(root) and resolved.is_file() and resolved.stat().st_size < max_bytes:
                return resolved
    return None


def finding_excerpts(finding: Mapping[str, Any], roots: Sequence[Path]) -> list[Excerpt]:
    out = []
    for loc in finding.get("locations", []) or []:
        ex = read_excerpt(loc, roots) if isinstance(loc, Mapping) else None
        if ex is not None:
            out.append(ex)
    return out


@dataclass(frozen=True)
class SharedExcerpt:
    """One window of one file, shown once, with the findings (indices into the report's list)
    whose locations fall in it."""

    excerpt: Excerpt
    findings: tuple[int, ...]


def shared_excerpts(findings: Sequence[Mapping[str, Any]], roots: Sequence[Path],
                    context: int = EXCERPT_CONTEXT) -> list[SharedExcerpt]:
    """Every file line the findings point at, as windows of `context` lines around them; windows
    that touch are merged (up to EXCERPT_MAX_LINES), so a line several findings share is shown
    once. By finding (the larger saving first), and within one finding the author's source, then
    TVMScript, then Ascend C: what a length limit leaves out is the least valuable finding's code,
    not every Ascend C excerpt."""
    files: dict[Path, dict[str, Any]] = {}
    for i, f in enumerate(findings):
        for loc in f.get("locations", []) or []:
            if not isinstance(loc, Mapping):
                continue
            line, end = loc.get("line"), loc.get("end_line")
            name = str(loc.get("file") or "")
            if not name or not isinstance(line, int) or line < 1:
                continue
            end = end if isinstance(end, int) and end >= line else line
            path = _confined(name, roots)
            if path is None:
                continue
            entry = files.setdefault(path, {"display": name, "stage": str(loc.get("stage", "")), "marks": {}})
            for n in range(line, min(end, line + EXCERPT_MAX_LINES - 1) + 1):
                entry["marks"].setdefault(n, set()).add(i)
    out: list[SharedExcerpt] = []
    for path, entry in files.items():
        try:
            text = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        marks = {n: ids for n, ids in entry["marks"].items() if n <= len(text)}
        for first, last in _windows(sorted(marks), len(text), context):
            inside = {n for n in marks if first <= n <= last}
            ex = Excerpt(path=path, display=entry["display"], stage=entry["stage"], first_line=first,
                         lines=tuple(text[first - 1:last]), marked=frozenset(inside))
            out.append(SharedExcerpt(ex, tuple(sorted(set().union(*(marks[n] for n in inside))))))
    out.sort(key=lambda e: (e.findings[0], STAGE_ORDER.get(e.excerpt.stage, 3), e.excerpt.display,
                            e.excerpt.first_line))
    return out


def _windows(lines: list[int], length: int, context: int) -> list[tuple[int, int]]:
    """(first, last) of the windows around the sorted `lines`: touching ones merged while the
    result stays within EXCERPT_MAX_LINES."""
    windows: list[tuple[int, int]] = []
    for n in lines:
        first, last = max(1, n - context), min(length, n + context)
        if windows and first <= windows[-1][1] + 1 and last - windows[-1][0] < EXCERPT_MAX_LINES:
            windows[-1] = (windows[-1][0], max(windows[-1][1], last))
        elif windows and first <= windows[-1][1]:  # a full window: the next starts after it
            windows.append((windows[-1][1] + 1, last))
        else:
            windows.append((first, last))
    return windows


# ---------------------------------------------------------------- shared prose

def kernels_text(kernels: Sequence[Any], shown: int = 5) -> tuple[list[str], int]:
    names = [str(k) for k in kernels]
    return names[:shown], max(0, len(names) - shown)


# ---------------------------------------------------------------- Markdown blocks

def _headline(report: Mapping[str, Any], findings: Sequence[Mapping[str, Any]]) -> str:
    s = report_summary(report)
    run = run_of(report)
    closing = f"**{md_text(headline(findings, profile_summaries(report)), None)}**"
    if run is not None:  # several ranks: the run, never its first rank, leads (issue #28)
        title = f"## tilescope performance report — {md_code_span(run['path'], 120)} · {ranks_phrase(run)}"
        lead = [f"- {md_text(line, None)}" for line in run_lines(run)]
        return "\n".join([title, "", *lead, "", *_warnings(report), closing]) + "\n"
    src = report_input_path(report)
    chip = report_chip(report).get("name")
    out = ["## tilescope performance report" + (f" — {md_code_span(src, 120)}" if src else ""), ""]
    facts = [f"**Device time {fmt_us(s['total_device_us'])}**"]
    units = units_text(s["raw"])
    if units:
        facts.append(units)
    sol = speed_of_light_text(s["raw"])
    if sol:
        facts.append(sol)
    if chip:
        facts.append(f"chip {md_text(chip_text(report_chip(report)), 160)}")
    if s["kernel_count"] is not None:
        facts.append(md_text(launches_text(s["raw"])))
    out += [" · ".join(facts), ""]
    out += _warnings(report)
    out += [closing]
    return "\n".join(out) + "\n"


def _warnings(report: Mapping[str, Any]) -> list[str]:
    """What was left out of the input (rows skipped, values out of range), under the headline."""
    return [f"> **Warning:** {md_text(w, 400)}\n" for w in data_warnings(report)]


TOP_FIXES = 3  # findings whose fix the first screen shows


def _top_fixes(findings: Sequence[Mapping[str, Any]]) -> str:
    """The first screen's advice: the largest savings' fixes, one numbered item each, where to
    change the code under it; the evidence stays in the findings below."""
    shown = [f for f in findings if f.get("recommendation")][:TOP_FIXES]
    if not shown:
        return ""
    out = ["### What to do first", ""]
    for i, f in enumerate(shown, 1):
        sev = str(f.get("severity", "info"))
        out.append(f"{i}. {SEVERITY_ICON.get(sev, '')} **{md_text(f.get('code', '?'), 12)}** "
                   f"{md_text(f.get('slug', ''), 60)} · {md_text(saving_phrase(f), 80)} — "
                   f"{md_text(f['recommendation'], 600)}")
        where = where_text([dict(loc) for loc in f.get("locations") or [] if isinstance(loc, Mapping)], 3)
        if where:
            out.append(f"   at {md_code_span(where, 200)}")
    return "\n".join(out) + "\n\n"


def _per_rank(report: Mapping[str, Any]) -> str:
    """A multi-rank report's per-rank summaries (tilescope.report.run.per_rank_rows)."""
    rows = per_rank_rows(report)
    if not rows:
        return ""
    out = ["### Per rank", "", "| " + " | ".join(PER_RANK_COLUMNS) + " |", "|---|--:|---|---|--:|---|"]
    for ranks, device, launches, busy, sol, name, share in rows:
        top = f"{md_code_span(name, 60)} {md_nowrap(share)}" if name else "–"
        out.append(f"| {md_text(ranks, 60)} | {md_nowrap(device)} | {md_text(launches, 60)} | "
                   f"{md_text(busy, 120)} | {md_nowrap(md_text(sol, 20))} | {top} |")
    return "\n".join(out) + "\n"


def _ranks(report: Mapping[str, Any]) -> str:
    """The rank table of a multi-rank report (step time split per rank, the slow rank marked)."""
    rows = rank_rows(report)
    if not rows:
        return ""
    section = report.get("cluster") or {}
    out = [f"### Ranks ({section.get('ranks_loaded')} of {section.get('ranks_total')} with a readable "
           "kernel table; times summed over the profiled steps)", "",
           "| " + " | ".join(RANK_COLUMNS[:-1]) + " | note |", "|--:|--:|--:|--:|--:|---|---|"]
    for row in rows:
        # the times (columns 1-4) keep their units on one line in GitHub's narrow columns
        cells = [md_nowrap(md_text(c, 60)) if 0 < i < 5 else md_text(c, 60) for i, c in enumerate(row)]
        if "slow rank" in row[-1]:
            cells[0] = f"**{cells[0]}**"
        out.append("| " + " | ".join(cells) + " |")
    out += [f"- {md_text(n, 300)}" for n in section.get("notes") or []]
    return "\n".join(out) + "\n\n"


def _top_kernels(report: Mapping[str, Any], limit: int) -> str:
    rows = report_kernels(report)
    if not rows:
        return ""
    out = ["### Top kernels", "",
           "| # | kernel | op type | core | launches | time | share | Cube busy | Vector busy "
           "| speed of light |",
           "|--:|---|---|---|--:|--:|--:|--:|--:|--:|"]
    for i, r in enumerate(rows[:limit], 1):
        out.append("| " + " | ".join([
            str(i), md_code_span(r.get("name", "?"), 80), md_text(r.get("op_type", ""), 40),
            md_text(r.get("core_type", ""), 20), md_text(r.get("launches", r.get("count", "")), 12),
            *(md_nowrap(c) for c in (fmt_us(r.get("total_us", r.get("duration_us"))), fmt_pct(r.get("share")),
                                      fmt_pct(r.get("cube_share")), fmt_pct(r.get("vector_share")),
                                      sol_text(r))),
        ]) + " |")
    if len(rows) > limit:
        out.append(f"\n_{len(rows) - limit} more kernels in the full report._")
    out.append(f"\n_{KERNEL_COLUMNS_NOTE}_")
    return "\n".join(out) + "\n"


def _measured_lines(report: Mapping[str, Any]) -> str:
    """The hottest measured lines of a bundle with simulator output (docs/lines.md)."""
    section = lines_view.lines_of(report)
    if section is None:
        return ""
    out = [f"### {lines_view.title(section)}", "", f"_{md_text(lines_view.heading(section), 300)}_", "",
           f"| share | {lines_view.quantity(section)} | per core | TileLang line | pipes | Ascend C lines |",
           "|--:|--:|--:|---|---|---|"]
    for r in lines_view.line_rows(section):
        line = md_text(r.where, 40) + (f" {md_code_span(r.what, 80)}" if r.what else "")
        out.append(f"| {r.share} | {r.cycles} | {r.per_core} | {line} | {md_text(r.pipes, 60)} "
                   f"| {md_text(r.ascendc, 60)} |")
    sync = lines_view.sync_sentence(section)
    out += [f"\n{md_text(sync, 600)}"] if sync else []
    more = lines_view.left_out(section)
    if more:
        out.append(f"\n_{more} more line(s): `tilescope lines` lists them all._")
    return "\n".join(out) + "\n"


def finding_summary_line(f: Mapping[str, Any], message_limit: int = 200) -> str:
    """The text of a finding's `<summary>` (already HTML-escaped: summary is raw HTML on GitHub)."""
    sev = str(f.get("severity", "info"))
    return (f"{SEVERITY_ICON.get(sev, '')} <b>{md_html_text(sev.upper(), 10)}</b> "
            f"<code>{md_html_text(f.get('code', '?'), 12)}</code> {md_html_text(f.get('slug', ''), 60)}"
            + (f" · {md_html_text(f['rank_text'], 80)}" if f.get("rank_text") else "")
            + f" · {md_html_text(saving_phrase(f), 80)} — "
            f"{md_html_text(f.get('message', ''), message_limit)}")


def _finding_block(f: Mapping[str, Any], excerpt_ids: Sequence[str]) -> str:
    """A finding as `<details>`: its fix and where first, then its kernels; the evidence, a table
    of measured values and thresholds, behind a `<details>` of its own."""
    out = ["<details>", f"<summary>{finding_summary_line(f)}</summary>", ""]
    if f.get("recommendation"):
        out += [f"**What to do:** {md_text(f['recommendation'], 1000)}", ""]
    locs = [loc for loc in f.get("locations", []) or [] if isinstance(loc, Mapping)]
    where = list(dict.fromkeys(
        md_code_span(f"{loc.get('file', '?')}:{loc.get('line') or ''}", 120)
        + (f" ({md_text(loc.get('stage'), 20)})" if loc.get("stage") else "") for loc in locs))
    if where:
        rest = len(where) - WHERE_SHOWN
        out.append("**Where:** " + ", ".join(where[:WHERE_SHOWN]) + (f" and {rest} more" if rest > 0 else ""))
        out.append("")
    if excerpt_ids:
        out += [f"**Code:** {', '.join(excerpt_ids)} under *Code the findings point at*", ""]
    names, more = kernels_text(f.get("kernels", []) or [])
    if names:
        out.append("**Kernels:** " + ", ".join(md_code_span(n, 100) for n in names)
                   + (f" and {more} more" if more else ""))
        out.append("")
    occ = f.get("occurrences")
    if isinstance(occ, int) and occ > 1:
        out += [f"**Occurrences:** {occ}", ""]
    evidence = f.get("evidence") or {}
    if isinstance(evidence, Mapping) and evidence:
        tables = _evidence_md(evidence)
        values = sum(1 for line in tables if line.startswith("| ") and not line.startswith("| evidence |"))
        out += ["<details>", f"<summary>Evidence: {values} measured values and thresholds</summary>", "",
                *tables, "</details>", ""]
    out.append("</details>")
    return "\n".join(out) + "\n"


def _evidence_md(evidence: Mapping[str, Any]) -> list[str]:
    """The evidence as small tables with units (tilescope.report.evidence), every cell escaped."""
    out: list[str] = []
    for table in evidence_tables(evidence):
        if table.title:
            count = f" (first {len(table.rows)} of {len(table.rows) + table.more})" if table.more else ""
            out += [f"*{md_text(table.title, 60)}*{count}:", ""]
        out.append("| " + " | ".join(md_text(c, 60) for c in table.columns) + " |")
        out.append("|" + "|".join("---" for _ in table.columns) + "|")
        out += ["| " + " | ".join(md_nowrap(md_text(c, 120)) for c in row) + " |" for row in table.rows]
        out.append("")
    return out


def _excerpt_block(number: int, shared: SharedExcerpt, findings: Sequence[Mapping[str, Any]]) -> str:
    ex = shared.excerpt
    codes = Counter(str(findings[i].get("code", "?")) for i in shared.findings)
    by = ", ".join(c + (f" ×{n}" if n > 1 else "") for c, n in codes.items())
    last = ex.first_line + len(ex.lines) - 1
    span = f"line {last}" if last == ex.first_line else f"lines {ex.first_line}–{last}"
    # collapsed: a reviewer opens the excerpt a finding names (raw HTML: escaped as such)
    return (f"<details>\n<summary><b>E{number}</b> · {md_html_text(ex.stage or 'source', 20)} · "
            f"<code>{md_html_text(ex.display, 120)}</code> {span} · {md_html_text(by, 200)}</summary>\n\n"
            f"{md_code_block(_numbered(ex), ex.language)}\n\n</details>\n\n")


def _numbered(ex: Excerpt) -> str:
    # A ">" gutter marks the referenced lines, since a fenced block cannot be highlighted.
    width = len(str(ex.first_line + len(ex.lines)))
    return "\n".join(
        f"{'>' if ex.first_line + i in ex.marked else ' '} {ex.first_line + i:>{width}} | {text}"
        for i, text in enumerate(ex.lines))


def _tail(report: Mapping[str, Any]) -> str:
    out: list[str] = []
    skipped = unique_skipped(report.get("skipped", []) or [])  # once, not once per rank
    if skipped:
        out += ["### Rules not run (missing inputs)", ""]
        for s in skipped[:MAX_LISTED]:
            missing = ", ".join(md_code_span(m, 40) for m in (s.get("missing") or [])[:8])
            rule = f"{md_text(s.get('code', '?'), 12)} {md_text(s.get('slug', ''), 60)}"
            out.append(f"- {rule}: needs {missing}")
        if len(skipped) > MAX_LISTED:
            out.append(f"- and {len(skipped) - MAX_LISTED} more")
        out.append("")
    errors = list(report.get("errors", []) or [])
    if errors:
        out += ["### Rule errors", ""]
        out += [f"- {md_text(e.get('code', '?'), 12)}: {md_text(e.get('message', ''), 300)}"
                for e in errors[:MAX_LISTED]]
        if len(errors) > MAX_LISTED:
            out.append(f"- and {len(errors) - MAX_LISTED} more")
        out.append("")
    tool = report.get("tool", {}) or {}
    version = md_text(tool.get("version", ""), 20) if isinstance(tool, Mapping) else ""
    out.append(f"<sub>tilescope {version} · report schema "
               f"{md_text(report.get('schema_version', '?'), 10)}</sub>")
    return "\n".join(out) + "\n"


def _truncation_note(total: int, compact: Sequence[Mapping[str, Any]],
                     dropped: Sequence[Mapping[str, Any]], limit: int) -> str:
    parts = []
    if compact:
        parts.append(f"{len(compact)} shown as one line, without evidence and code")
    if dropped:
        codes = Counter(str(f.get("code", "?")) for f in dropped)
        listed = ", ".join(f"{md_text(c, 12)} ×{n}" for c, n in codes.most_common(20))
        more = " …" if len(codes) > 20 else ""
        parts.append(f"{len(dropped)} omitted ({listed}{more})")
    return (f"> [!NOTE]\n> **Truncated** to keep this report under {limit:,} characters: of "
            f"{total} findings, {'; '.join(parts)}. The HTML report (`--format html`) has all of them, "
            "and the JSON and SARIF reports too.\n")


def _excerpts_note(left: Sequence[tuple[int, SharedExcerpt]]) -> str:
    named = []
    for number, shared in left[:6]:
        ex = shared.excerpt
        named.append(f"E{number} {md_code_span(ex.display, 80)} line {min(ex.marked)}")
    more = f" and {len(left) - 6} more" if len(left) > 6 else ""
    return (f"> [!NOTE]\n> {len(left)} code excerpt{'s' if len(left) != 1 else ''} left out for length "
            f"({', '.join(named)}{more}): the HTML report (`--format html`) shows every one beside its "
            "finding.\n")


def render(report: Mapping[str, Any], *, max_chars: int = DEFAULT_MAX_CHARS,
           ir_root: str | Path | None = None, source_root: str | Path | None = None,
           **_opts: Any) -> str:
    """The Markdown report. Findings keep the report's order (by estimated saving); the code they
    point at follows them, each excerpt once; past `max_chars` findings lose their evidence, then
    their block, and excerpts are left out, each time said in a note."""
    findings = group_across_ranks(report_findings(report), ranks_total(report))
    multi = run_of(report) is not None
    if multi:  # the run's own findings first, then the ranks', each by saving
        findings = ([f for f in findings if f.get("scope") == SCOPE_CLUSTER]
                    + [f for f in findings if f.get("scope") != SCOPE_CLUSTER])
    roots = excerpt_roots(report, ir_root, source_root)
    excerpts = shared_excerpts(findings, roots)
    ids_of: dict[int, list[str]] = {}
    for number, shared in enumerate(excerpts, 1):
        for i in shared.findings:
            ids_of.setdefault(i, []).append(f"E{number}")
    lead, ranks = _headline(report, findings) + "\n", _ranks(report)
    head = lead + _top_fixes(findings) + ranks
    kernels = _per_rank(report) if multi else _top_kernels(report, MAX_TOP_KERNELS)
    if len(lead + ranks) + len(kernels) > max_chars // 3 and not multi:  # very long hostile names
        kernels = _top_kernels(report, 3)
    tail = _tail(report)
    if len(head) + len(kernels) + len(tail) > max_chars // 2:
        tail = tail[-200:] if len(tail) > 200 else tail
    measured = _measured_lines(report)
    body = [head, kernels + "\n" if kernels else "", measured + "\n" if measured else ""]
    if findings:
        body.append("### Findings across ranks, then on the ranks, by estimated saving\n\n" if multi
                    else "### Findings by estimated saving\n\n")
    used = sum(map(len, body)) + len(tail)
    reserve = len(_truncation_note(len(findings), findings, findings, max_chars)) + 64
    if excerpts:
        reserve += len(_excerpts_note([(n, e) for n, e in enumerate(excerpts[:7], 1)])) + 200
    compact: list[Mapping[str, Any]] = []
    dropped: list[Mapping[str, Any]] = []
    # every finding gets at least its line; full blocks (evidence, advice, where) go to the first
    # ones, by saving, while the lines of the rest still fit
    shorts = [f"- {finding_summary_line(f, message_limit=SHORT_MESSAGE)}\n" for f in findings]
    still_short = sum(map(len, shorts))
    full_blocks = used + still_short + reserve <= max_chars
    for i, f in enumerate(findings):
        still_short -= len(shorts[i])
        if full_blocks:
            full = _finding_block(f, ids_of.get(i, []))
            if used + len(full) + still_short + reserve <= max_chars:
                body.append(full + "\n")
                used += len(full) + 1
                continue
            full_blocks = False  # in saving order: the rest are lines
        if used + len(shorts[i]) + reserve <= max_chars:
            compact.append(f)
            body.append(shorts[i])
            used += len(shorts[i])
        else:
            dropped.append(f)
    if compact or dropped:
        note = "\n" + _truncation_note(len(findings), compact, dropped, max_chars) + "\n"
        body.append(note)
        used += len(note)
    if excerpts:
        section = "### Code the findings point at\n\n"
        body.append(section)
        used += len(section)
        left: list[tuple[int, SharedExcerpt]] = []
        for number, shared in enumerate(excerpts, 1):
            block = _excerpt_block(number, shared, findings)
            if not left and used + len(block) + reserve <= max_chars:
                body.append(block)
                used += len(block)
            else:  # in order: a reader who meets E7 has seen E1-E6
                left.append((number, shared))
        if left:
            body.append(_excerpts_note(left) + "\n")
    text = "".join(body) + tail
    if len(text) > max_chars:  # only reachable with an absurdly small max_chars
        cut = "\n\n> **Truncated**: the report did not fit the character limit.\n"
        text = text[: max(0, max_chars - len(cut))] + cut
    return text


def append_github_summary(markdown: str, path: str | Path | None = None) -> Path:
    """Append the report to the job summary file ($GITHUB_STEP_SUMMARY).

    The file is shared by every step of the job, so it is appended, never rewritten; one
    `write()` on an O_APPEND descriptor keeps our block contiguous even if another process
    appends at the same time.
    """
    target = path or os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        raise UsageError("--github-summary: GITHUB_STEP_SUMMARY is not set (it is set inside GitHub Actions)")
    data = ("\n" + markdown.rstrip("\n") + "\n").encode("utf-8")
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
    finally:
        os.close(fd)
    return Path(target)
