"""Terminal output in linter style: one line per finding, a closing summary line (docs/product.md)."""

from __future__ import annotations

import io
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tilescope.ranksets import rank_set_text, ranks_label
from tilescope.report import lines_view
from tilescope.report.access import profile_summaries, report_input_path, where_text
from tilescope.report.palette import severity_style
from tilescope.report.ranks import (
    RANK_COLUMNS,
    SCOPE_CLUSTER,
    group_across_ranks,
    rank_rows,
    ranks_total,
    unique_skipped,
)
from tilescope.report.run import common_root, ranks_phrase, run_lines, run_of
from tilescope.text.escape import terminal_text
from tilescope.text.terminal import console as make_console
from tilescope.text.terminal import fit_names, wrap
from tilescope.text.words import (
    chip_text,
    fmt_us,
    headline,
    launches_text,
    saving_text,
    speed_of_light_text,
    units_text,
)


def _kernels(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" +{len(names) - limit}" if len(names) > limit else "")


def summary_line(report: dict[str, Any]) -> str:
    """The closing line: counts and the combined, bounded savings of every profile (words.headline)."""
    findings = group_across_ranks(report.get("findings", []) or [], ranks_total(report))
    return headline(findings, profile_summaries(report))


def not_checked_lines(skipped: list[dict[str, Any]]) -> list[str]:
    """The "not checked:" block of analyze and lint: one line per missing input, rules sharing it
    together ("TS500, TS501: needs ir"); empty when every rule ran."""
    if not skipped:
        return []
    by_need: dict[str, list[str]] = {}
    for s in skipped:
        need = "; ".join(s.get("needs") or s.get("missing") or [])
        by_need.setdefault(need, []).append(f"{s.get('code')} {s.get('slug')}")
    lines = ["not checked:"]
    for need, names in by_need.items():
        label = names[0] if len(names) == 1 else ", ".join(n.split()[0] for n in names)
        lines.append(f"  {label}: needs {need}")
    return lines


FINDING_MIN = 40  # cells the finding column needs beside the others; narrower: one block per finding
KERNEL_MAX = 40  # cells of the kernel column on a terminal: whole names that fit, then "+N"


def render(report: dict[str, Any], **opts: Any) -> str:
    """Render to a string; `color=True` keeps ANSI styles, `width` wraps at that many columns
    (None, the default: no wrapping, every line whole)."""
    buf = io.StringIO()
    width = opts.get("width")
    width = None if width is None else int(width)
    color = bool(opts.get("color", False))
    console = make_console(width, file=buf, color=color)

    def say(text: object, style: str = "", indent: str = "", hang: str | None = None) -> None:
        for line in wrap(terminal_text(text), width, indent, hang):
            console.print(Text(line, style=style), no_wrap=True, crop=False)

    run = run_of(report)
    total_ranks = ranks_total(report)
    findings = group_across_ranks(report.get("findings", []), total_ranks)
    if run is not None:  # the run first: its ranks, the slow rank, the spread, cross-rank findings
        say(f"{run['path']}: {ranks_phrase(run)}", "bold", "", "  ")
        for line in run_lines(run):
            say(line, "", "  ", "    ")
        _print_ranks(console, report, say)
        across = [f for f in findings if f.get("scope") == SCOPE_CLUSTER]
        if across:
            say("across ranks:", "bold")
            _print_findings(console, across, True, width)
        say("per rank:", "bold")
        _print_profiles(report, say, "  ")
        findings = across + [f for f in findings if f.get("scope") != SCOPE_CLUSTER]
        if len(findings) > len(across):
            say("on the ranks:", "bold")
            _print_findings(console, findings[len(across):], True, width)
    else:
        _print_profiles(report, say, "")
        _print_ranks(console, report, say)
        if findings:
            _print_findings(console, findings, total_ranks > 1, width)
    if findings and opts.get("recommendations", True):
        # the fixes are what to read: full weight, not dim
        for f in findings[: int(opts.get("max_recommendations", 5))]:
            say(f"{f.get('code')} → {f.get('recommendation')}", "", "  ", "    ")
            where = where_text(list(f.get("locations") or []), limit=6)
            if where:
                say(f"at {where}", "dim", "      ", "         ")
    _print_lines(report, say)
    # rules with the same missing input share one line ("TS500-TS506 ... needs a run bundle")
    lines = not_checked_lines([dict(s) for s in unique_skipped(report.get("skipped", []))])
    if lines:
        console.print(Text(lines[0], style="bold"))
        for line in lines[1:]:
            say(line.strip(), "", "  ", "    ")
    for e in report.get("errors", []):
        say(f"error: {e.get('message')}", "bold red", "", "  ")
    adv = report.get("advisor")
    if adv:
        say(f"msprof-analyze advisor: {adv.get('status')} — {len(adv.get('problems', []))} problems, "
            f"{adv.get('duplicates', 0)} already reported by tilescope", "dim", "", "  ")
    say(summary_line(report), "bold")
    return buf.getvalue()


def _print_profiles(report: dict[str, Any], say: Any, indent: str) -> None:
    """Each profile's facts and lines; several ranks as one line per group of ranks that read
    alike, not one per rank (4,096 ranks...), what they share said once with its ranks."""
    profiles = report.get("profiles", [])
    if len(profiles) == 1:
        p = profiles[0]
        rank = f" rank {p['rank']}" if p.get("rank") is not None else ""
        say(f"{p.get('path')}{rank}: {_profile_facts(p)}", "bold", indent, indent + "  ")
        for line, style in _profile_lines(p):
            say(line, style, indent + "  ", indent + "    ")
        return
    if not indent:  # several profiles without a run section (a report written before it)
        root = common_root([str(p.get("path") or "") for p in profiles])
        say(f"{root}: {len(profiles)} ranks", "bold", "", "  ")
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(profiles):
        rank_id = int(p["rank"]) if p.get("rank") is not None else i
        groups.setdefault(_profile_facts(p), []).append(rank_id)
    for facts, ranks in groups.items():
        say(f"{ranks_label(ranks)}: {facts}", "bold", "  ", "    ")
    for (line, style), ranks in _lines_by_rank(profiles).items():
        say(f"{line}{_on_ranks(ranks, len(profiles))}", style, "  ", "    ")


def _print_lines(report: dict[str, Any], say: Any) -> None:
    """The measured lines of a bundle that carries simulator output (docs/lines.md)."""
    section = lines_view.lines_of(report)
    if section is None:
        return
    say(f"{lines_view.title(section).lower()}: {lines_view.heading(section)}", "bold", "", "  ")
    for r in lines_view.line_rows(section):
        say(
            f"{r.share:>7}  {r.cycles:>10} {lines_view.quantity(section)}"
            + (f" [{r.per_core} per core]" if r.per_core else "")
            + f"  {r.where}"
            + (f"  {r.what}" if r.what else "")
            + f" — {r.pipes}; Ascend C {r.ascendc}",
            "",
            "  ",
            "             ",
        )
    sync = lines_view.sync_sentence(section)
    if sync:
        say(sync, "", "  ", "    ")
    more = lines_view.left_out(section)
    if more:
        where = report_input_path(report) or "PATH"
        say(f"{more} more line(s): tilescope lines {where}", "dim", "  ", "    ")


def _profile_lines(p: dict[str, Any]) -> list[tuple[str, str]]:
    """A profile's lines under its header: unit busy shares, speed of light, chip, notes."""
    s = p.get("summary") or {}
    lines = [(t, "bold") for t in (units_text(s), speed_of_light_text(s)) if t]
    lines.append((f"chip {chip_text(p.get('chip') or {})}", "dim"))
    # What the loader had to assume or could not find (no device info, no runtime metrics in an
    # IR-only bundle, inferred core counts) changes how findings read: say it up front.
    lines += [(f"note: {note}", "dim") for note in p.get("warnings") or []]
    return lines


def _profile_facts(p: dict[str, Any]) -> str:
    """`14 launches of 6 kernels, device time 1,980.0 µs, chip 910B2 (no PMU metrics)`."""
    s = p.get("summary") or {}
    chip = p.get("chip") or {}
    return (f"{launches_text(s)}, device time {fmt_us(s.get('total_device_us'))}, chip {chip.get('name')} "
            f"({', '.join(p.get('metric_groups') or []) or 'no PMU metrics'})")


def _lines_by_rank(profiles: list[dict[str, Any]]) -> dict[tuple[str, str], list[int]]:
    out: dict[tuple[str, str], list[int]] = {}
    for i, p in enumerate(profiles):
        rank = p.get("rank")
        for line in _profile_lines(p):
            out.setdefault(line, []).append(int(rank) if rank is not None else i)
    return out


def _on_ranks(ranks: list[int], total: int) -> str:
    if len(ranks) == total:
        return f" (all {total} ranks)"
    return f" ({ranks_label(ranks)})"


def _print_ranks(console: Console, report: dict[str, Any], say: Any) -> None:
    """The rank table of a multi-rank report: step time split per rank, the slow rank marked."""
    rows = rank_rows(report)
    if not rows:
        return
    section = report.get("cluster") or {}
    say(f"ranks: {section.get('ranks_total')} ({section.get('ranks_loaded')} with a readable kernel table); "
        "step time summed over the profiled steps", "bold")
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=False)
    for i, col in enumerate(RANK_COLUMNS):
        table.add_column(col, justify="right" if 0 < i < 5 else "left", no_wrap=True)
    for row in rows:  # alike ranks share a row (`0-2, 4-7`)
        style = severity_style("high", console.color_system) if "slow rank" in row[-1] else ""
        table.add_row(*(Text(terminal_text(c), style=style) for c in row))
    console.print(table, crop=False)
    for note in section.get("notes") or []:
        say(f"note: {note}", "dim", "  ", "    ")


def _rank_cell(f: dict[str, Any], total: int) -> str:
    """Which ranks a (grouped) finding is about: `0-6 (7/8)`, `all`, or `1` for a cross-rank one."""
    if f.get("scope") == "cluster":
        return "all"
    ranks = f.get("ranks")
    if ranks:
        shown = rank_set_text(ranks)
        return shown if len(ranks) == 1 else f"{shown} ({len(ranks)} of {total})"
    return str(f.get("rank", ""))


def _finding_cells(f: dict[str, Any], multi: bool, width: int | None) -> dict[str, str]:
    occ = int(f.get("occurrences") or 1)
    cells = {
        "sev": str(f.get("severity")),
        "code": str(f.get("code")),
        "rule": str(f.get("slug")),
        # whole in a pipe; on a terminal the names that fit KERNEL_MAX cells (below)
        "kernel": _kernels(list(f.get("kernels") or [])),
        # how many times the rule matched it (`occurrences`), said in words: "[x565]" was a riddle
        "finding": str(f.get("message")) + (f" ({occ:,} occurrences)" if occ > 1 else ""),
        "saving": saving_text(f),
    }
    if multi:
        cells["rank"] = _rank_cell(f, int(f.get("ranks_total") or 0))
    cells = {k: terminal_text(v) for k, v in cells.items()}
    if width is not None:
        cells["kernel"] = fit_names([terminal_text(n) for n in f.get("kernels") or []], KERNEL_MAX)
    return cells


def _print_findings(console: Console, findings: list[dict[str, Any]], multi: bool, width: int | None) -> None:
    """A table (sev, code, rule, kernel, finding, saving) when the finding column gets FINDING_MIN
    cells beside the others; else linter-style blocks: a line of facts, the message under it."""
    rows = [_finding_cells(f, multi, width) for f in findings]
    columns = ["sev", "code", "rule", *(["rank"] if multi else []), "kernel", "finding", "saving"]
    fixed = {c: max(cell_len(c), *(cell_len(r[c]) for r in rows)) for c in columns if c != "finding"}
    room = None if width is None else width - sum(fixed.values()) - 2 * (len(columns) - 1)
    if room is not None and room < FINDING_MIN:
        for r in rows:
            facts = f"{r['code']} {r['rule']}" + (f" rank {r['rank']}" if multi else "")
            head = wrap(f"{facts} · {r['kernel']} · {r['saving']}", width, f"{r['sev']:<7}", " " * 7)
            style = severity_style(r["sev"], console.color_system)
            for i, line in enumerate(head):
                text = Text(line)
                if i == 0:
                    text.stylize(style, 0, len(r["sev"]))
                console.print(text, no_wrap=True, crop=False)
            for line in wrap(r["finding"], width, " " * 7):
                console.print(Text(line), no_wrap=True, crop=False)
        return
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=False)
    for col in columns:
        table.add_column(col, justify="right" if col in ("rank", "saving") else "left", no_wrap=True)
    for r in rows:
        message = r["finding"] if room is None else "\n".join(wrap(r["finding"], room))
        table.add_row(*(Text(message if c == "finding" else r[c],
                             style=severity_style(r["sev"], console.color_system) if c == "sev" else "")
                        for c in columns))
    console.print(table, crop=False)
