"""`tilescope lines PATH`: where inside a kernel the measured cost goes, per TileLang line (a bundle)
or Ascend C line (a simulator folder or visualize_data.bin alone), from `msprof op simulator` output
or a board's Source mode (docs/internals.md 'Input'; docs/lines.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from tilescope.atomic import write_text_atomic
from tilescope.errors import UsageError
from tilescope.report.lines_view import pipe_shares
from tilescope.text.escape import terminal_text
from tilescope.text.sync_words import amount_words, where_words
from tilescope.text.terminal import WIDTH_HELP, output_width, wrap, write_stdout
from tilescope.text.words import METRIC_WORDS, fmt_pct

LINES_SCHEMA_VERSION = "1"




def _headline(report: dict) -> str:
    """What was read and what it measured, in the words of its source."""
    kfile = report["kernel_file"]
    where = terminal_text(kfile) if kfile else "no kernel source line"
    kind = report.get("source_kind") or ""
    if report.get("metric") == "instructions_executed":
        total = report.get("total_instructions_executed") or 0
        return (
            f"{terminal_text(report['path'])}: {total:,.0f} instructions executed in {where}, all cores "
            f"together ({kind}: instruction counts, not cycles)"
        )
    what = "a model of the chip, not a board measurement"
    cores = f"{report['cores']} simulated core{'s' if report['cores'] != 1 else ''}"
    if not report["lines"]:
        path = terminal_text(report["path"])
        return f"{path}: {cores}, no per-line data ({kind or 'msprof op simulator'}: {what})"
    return (
        f"{terminal_text(report['path'])}: {report['total_cycles']:,.0f} cycles in {where} over "
        f"{cores} ({kind or 'msprof op simulator'}: {what})"
    )


def _pipe_split(item: dict, metric: str) -> str:
    """The pipe split of a line: trace time where traced, else the instructions' own metric."""
    shares, from_instr = pipe_shares(item)
    if not shares:
        return "pipes: no trace"
    source = "pipes"
    if from_instr:
        source = f"pipes (by {'instruction cycles' if metric == 'cycles' else 'instructions executed'})"
    split = " · ".join(f"{p} {fmt_pct(share, 0)}" for p, share in shares)
    return f"{source}: {terminal_text(split)}"


def _line_text(item: dict, metric: str) -> str:
    """The measured numbers of one line: the ranking quantity first, under its own name."""
    if metric == "cycles":
        text = (
            f"{fmt_pct(item['share'], 1):>7}  {item['cycles']:>14,.0f} cycles  "
            f"[{item['core_min_cycles']:,.0f}–{item['core_max_cycles']:,.0f} per core]"
        )
    else:
        text = (
            f"{fmt_pct(item['share'], 1):>7}  {item['instructions_executed']:>14,.0f} instructions executed"
        )
    if item.get("stall_cycles") is not None:
        text += f"  {item['stall_cycles']:,.0f} stall cycles"
    return text


def render_text(report: dict, top: int, width: int | None) -> str:
    out: list[str] = []

    def say(text: str, indent: str = "", hang: str = "    ") -> None:
        out.extend(wrap(text, width, indent, hang))

    metric = report.get("metric", "cycles")
    say(_headline(report))
    for note in report["notes"]:
        say(f"note: {terminal_text(note)}", "  ")
    if report["lines"]:
        _render_lines(report, top, say)
    _render_instructions(report, say)
    if report["other_files"]:
        say(
            f"{len(report['other_files'])} header line(s) also listed in --format json (their "
            f"{METRIC_WORDS.get(metric, metric)} are inside the kernel lines that call them, not added)"
        )
    return "\n".join(out) + "\n"


def _render_lines(report: dict, top: int, say: Callable[..., None]) -> None:
    kfile = report["kernel_file"]
    metric = report.get("metric", "cycles")
    mapped = bool(report["mapped"])
    how = (
        "cycles summed over cores; min–max per core"
        if metric == "cycles"
        else "instructions executed, all cores together; a board's Source mode counts no cycles"
    )
    say(f"hottest {'TileLang' if mapped else 'Ascend C'} lines ({how}):")
    for item in report["lines"][:top]:
        under = ", ".join(str(c["line"]) for c in item["ascendc"][:8]) + (
            " …" if len(item["ascendc"]) > 8 else ""
        )
        if mapped:
            where = (
                ("l." + ", ".join(str(s) for s in item["source_lines"]))
                if item["source_lines"]
                else "(no TileLang line)"
            )
            label = f"{where}  {terminal_text(item['what'])}" if item["source_lines"] else where
        else:
            label = f"{terminal_text(kfile)}:{under}"
        say(f"{_line_text(item, metric)}  {label}", "  ", "           ")
        detail = [_pipe_split(item, metric)]
        l2 = [
            f"{c['l2_hit_rate']:.0f} % (Ascend C {c['line']})"
            for c in item["ascendc"][:8]
            if "l2_hit_rate" in c
        ]
        detail += [f"L2 hit rate {', '.join(l2)}"] if l2 else []
        detail += [f"Ascend C lines {under}"] if mapped else []
        if detail:
            say("; ".join(detail), "           ", "             ")


TOP_INSTRUCTIONS = 5


def _render_instructions(report: dict, say: Callable[..., None]) -> None:
    """The costliest instructions and the sync ones, whole kernel: what is left when a build has no
    line information, and where flags and barriers show up either way."""
    rows = report["instructions"][:TOP_INSTRUCTIONS]
    if rows:
        by_cycles = rows[0]["cycles"] is not None
        items = [
            f"{terminal_text(r['instr'])} ({terminal_text(r['pipe'])}) "
            + (f"{r['cycles']:,.0f} cycles, " if by_cycles else "")
            + f"{r['count']:,.0f}×"
            for r in rows
        ]
        how = "cycles summed over cores" if by_cycles else "by instructions executed"
        say(f"costliest instructions ({how}): " + "; ".join(items))
    if report["sync"]:
        text = "sync instructions executed: " + ", ".join(f"{k} {v:,.0f}" for k, v in report["sync"].items())
        spent, every = sum(report.get("sync_cycles", {}).values()), report.get("instruction_cycles")
        if spent and every:
            share = fmt_pct(spent / every, 1)
            text += f"; their cycles {spent:,.0f} of {every:,.0f} instruction cycles ({share})"
        say(text)
    if report.get("wait_cycles"):
        say("cycles pipes spent waiting (WAIT_FLAG, barriers): " + ", ".join(
            f"{terminal_text(p)} {c:,.0f}" for p, c in report["wait_cycles"].items()))
    rows = report.get("sync_lines") or []
    if rows:
        say(f"sync lines, most waiting first ({len(rows)}):")
        for row in rows[:TOP_INSTRUCTIONS]:
            say(f"{terminal_text(where_words(row))}: {terminal_text(amount_words(row))}", "  ", "      ")


def lines_report(path: Path) -> dict[str, Any]:
    """The `--format json` document of `tilescope lines PATH` (also the agent's `lines` tool)."""
    # deferred: pandas (through the per-line readers) only for this command
    from tilescope.io.line_data import read_line_data
    from tilescope.lines import bundle_line_map, line_costs

    sim = read_line_data(path)
    line_map, cpp = bundle_line_map(path) if (path / "ir").is_dir() else ([], None)
    return {
        "lines_schema_version": LINES_SCHEMA_VERSION,
        "path": str(path),
        "simulator": str(sim.root),
        "mapped": bool(line_map),
        **line_costs(sim, line_map, cpp).to_dict(),
    }


def register(app: typer.Typer) -> None:
    @app.command("lines")
    def lines_cmd(
        path: Annotated[
            Path,
            typer.Argument(
                help="A bundle, an OPPROF_* folder, its simulator/ folder or a visualize_data.bin."
            ),
        ],
        fmt: Annotated[str, typer.Option("--format", "-f", help="text or json.")] = "text",
        top: Annotated[int, typer.Option("--top", min=1, help="Lines shown (text).")] = 15,
        output: Annotated[
            Path | None, typer.Option("-o", "--output", help="Write here (atomically).")
        ] = None,
        width: Annotated[int | None, typer.Option("--width", metavar="N", min=20, help=WIDTH_HELP)] = None,
    ) -> None:
        """Measured cost per source line, hottest first: msprof op simulator output or visualize_data.bin.

        The cost is the simulator's cycles, or a board Source run's instructions executed. A bundle
        maps them to its TileLang lines (its line map), with the Ascend C lines under each.

        Example: tilescope lines runs/fa-sim --top 10
        """
        if fmt not in ("text", "json"):
            raise UsageError(f"--format {fmt!r}: choose text or json")
        if not path.exists():
            raise UsageError(f"{path}: no such file or directory")
        report = lines_report(path)
        text = (
            json.dumps(report, indent=2, ensure_ascii=False) + "\n"
            if fmt == "json"
            else render_text(report, top, output_width(width) if output is None else width)
        )
        if output is not None:
            write_text_atomic(output, text)
        else:
            write_stdout(text)
