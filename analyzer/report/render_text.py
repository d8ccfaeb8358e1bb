"""Terminal output in linter style: one line per finding, a closing summary line (docs/product.md)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from analyzer.report.charts import profile_summaries
from analyzer.report.escape import terminal_text
from analyzer.report.words import (
    chip_text,
    fmt_us,
    headline,
    launches_text,
    saving_text,
    speed_of_light_text,
    units_text,
)

SEVERITY_STYLE = {"high": "bold #c0392b", "medium": "bold #e67e22", "low": "#f1c40f", "info": "#7f8c8d"}


def where_text(locations: list[dict[str, Any]], limit: int | None = None) -> str:
    """`flash_attention.py:41 ir/tvmscript.py:46 ir/kernel.cpp:130`: the lines a finding points at.

    Kernel source files are shown by name (their recorded path is repo-relative), IR files as
    stored in the bundle; repeats are dropped, and past `limit` entries a `+N more` says so.
    """
    parts: list[str] = []
    for loc in locations:
        if loc.get("line") is None:
            continue
        file = str(loc.get("file", ""))
        short = file.replace("\\", "/").rsplit("/", 1)[-1] if loc.get("stage") == "source" else file
        parts.append(f"{short}:{loc['line']}")
    unique = list(dict.fromkeys(parts))
    if limit is not None and len(unique) > limit:
        return " ".join(unique[:limit]) + f" +{len(unique) - limit} more"
    return " ".join(unique)


def _kernels(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" +{len(names) - limit}" if len(names) > limit else "")


def _text(value: object, style: str = "") -> Text:
    """One printed line or cell. Everything here can hold text from the trace (names, paths,
    messages that quote them): a `Text` is never read as rich markup, and `terminal_text` shows
    control characters as escapes instead of sending them to the terminal."""
    return Text(terminal_text(value), style=style)


def summary_line(report: dict[str, Any]) -> str:
    """The closing line: counts and the combined, bounded savings of every profile (words.headline)."""
    return headline(report.get("findings", []) or [], profile_summaries(report))


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


def render(report: dict[str, Any], **opts: Any) -> str:
    """Render to a string; `color=True` keeps ANSI styles, `width` sets the line width."""
    buf = io.StringIO()
    console = Console(
        file=buf,
        force_terminal=bool(opts.get("color", False)),
        width=int(opts.get("width", 120)),
        no_color=not opts.get("color", False),
        highlight=False,
    )
    multi = len(report.get("profiles", [])) > 1
    for p in report.get("profiles", []):
        s = p.get("summary") or {}
        chip = p.get("chip") or {}
        rank = f" rank {p['rank']}" if p.get("rank") is not None else ""
        console.print(
            _text(
                f"{p.get('path')}{rank}: {launches_text(s)}, "
                f"device time {fmt_us(s.get('total_device_us'))}, chip {chip.get('name')} "
                f"({', '.join(p.get('metric_groups') or []) or 'no PMU metrics'})",
                style="bold",
            )
        )
        units = units_text(s)
        if units:
            console.print(_text(f"  {units}", style="bold"))
        sol = speed_of_light_text(s)
        if sol:
            console.print(_text(f"  {sol}", style="bold"))
        console.print(_text(f"  chip {chip_text(chip)}", style="dim"))
        # What the loader had to assume or could not find (no device info, no runtime metrics in an
        # IR-only bundle, inferred core counts) changes how findings read: say it up front.
        for note in p.get("warnings") or []:
            console.print(_text(f"  note: {note}", style="dim"))
    findings = report.get("findings", [])
    if findings:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=False)
        for col, just in (
            ("sev", "left"),
            ("code", "left"),
            ("rule", "left"),
            *((("rank", "right"),) if multi else ()),
            ("kernel", "left"),
            ("finding", "left"),
            ("saving", "right"),
        ):
            table.add_column(col, justify=just, overflow="fold")
        for f in findings:
            sev = str(f.get("severity"))
            occ = int(f.get("occurrences") or 1)
            row = [
                _text(sev, style=SEVERITY_STYLE.get(sev, "")),
                _text(f.get("code")),
                _text(f.get("slug")),
                *((_text(f.get("rank", "")),) if multi else ()),
                _text(_kernels(list(f.get("kernels") or []))),
                _text(str(f.get("message")) + (f" [x{occ}]" if occ > 1 else "")),
                _text(saving_text(f)),
            ]
            table.add_row(*row)
        console.print(table)
        if opts.get("recommendations", True):
            for f in findings[: int(opts.get("max_recommendations", 5))]:
                console.print(_text(f"  {f.get('code')} → {f.get('recommendation')}", style="dim"))
                where = where_text(list(f.get("locations") or []), limit=6)
                if where:
                    console.print(_text(f"      at {where}", style="dim"))
    lines = not_checked_lines(report.get("skipped", []))
    for i, line in enumerate(lines):
        console.print(_text(line, style="bold" if i == 0 else ""))
    for e in report.get("errors", []):
        console.print(_text(f"error: {e.get('message')}", style="bold red"))
    adv = report.get("advisor")
    if adv:
        console.print(
            _text(
                f"msprof-analyze advisor: {adv.get('status')} — {len(adv.get('problems', []))} problems, "
                f"{adv.get('duplicates', 0)} already reported by tilescope",
                style="dim",
            )
        )
    console.print(_text(summary_line(report), style="bold"))
    return buf.getvalue()
