"""`tilescope lines PATH`: where inside a kernel the measured cycles go, per TileLang line (a bundle)
or Ascend C line (a simulator folder alone), from `msprof op simulator` output (docs/lines.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tilescope.atomic import write_text_atomic
from tilescope.errors import UsageError
from tilescope.text.escape import terminal_text
from tilescope.text.terminal import WIDTH_HELP, output_width, wrap, write_stdout
from tilescope.text.words import fmt_pct

LINES_SCHEMA_VERSION = "1"


def render_text(report: dict, top: int, width: int | None) -> str:
    out: list[str] = []

    def say(text: str, indent: str = "", hang: str = "    ") -> None:
        out.extend(wrap(text, width, indent, hang))

    kfile = report["kernel_file"]
    say(
        f"{terminal_text(report['path'])}: {report['total_cycles']:,.0f} cycles in "
        f"{terminal_text(kfile) if kfile else 'no kernel source line'} over {report['cores']} "
        "simulated cores (msprof op simulator: a model of the chip, not a board measurement)"
    )
    for note in report["notes"]:
        say(f"note: {terminal_text(note)}", "  ")
    if not report["lines"]:
        return "\n".join(out) + "\n"
    mapped = bool(report["mapped"])
    say(
        f"hottest {'TileLang' if mapped else 'Ascend C'} lines (cycles summed over cores; "
        "min–max per core; pipes from the per-core traces):"
    )
    for item in report["lines"][:top]:
        pipes = item["pipes_us"]
        busy = sum(pipes.values())
        split = (
            " · ".join(f"{p} {fmt_pct(v / busy, 0)}" for p, v in sorted(pipes.items(), key=lambda kv: -kv[1]))
            if busy
            else "no trace"
        )
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
        say(
            f"{fmt_pct(item['share'], 1):>7}  {item['cycles']:>14,.0f} cycles  "
            f"[{item['core_min_cycles']:,.0f}–{item['core_max_cycles']:,.0f} per core]  {label}",
            "  ",
            "           ",
        )
        say(
            f"pipes: {split}" + (f"; Ascend C lines {under}" if mapped else ""),
            "           ",
            "             ",
        )
    if report["sync"]:
        say("sync instructions executed: " + ", ".join(f"{k} {v:,.0f}" for k, v in report["sync"].items()))
    if report["other_files"]:
        say(
            f"{len(report['other_files'])} header line(s) also listed in --format json (their cycles are "
            "inside the kernel lines that call them, not added)"
        )
    return "\n".join(out) + "\n"


def register(app: typer.Typer) -> None:
    @app.command("lines")
    def lines_cmd(
        path: Annotated[Path, typer.Argument(help="A bundle, an OPPROF_* folder or its simulator/ folder.")],
        fmt: Annotated[str, typer.Option("--format", "-f", help="text or json.")] = "text",
        top: Annotated[int, typer.Option("--top", min=1, help="Lines shown (text).")] = 15,
        output: Annotated[
            Path | None, typer.Option("-o", "--output", help="Write here (atomically).")
        ] = None,
        width: Annotated[int | None, typer.Option("--width", metavar="N", min=20, help=WIDTH_HELP)] = None,
    ) -> None:
        """Measured cycles per source line, hottest first, from msprof op simulator output.

        A bundle maps them to its TileLang lines (its line map), with the Ascend C lines under each.

        Example: tilescope lines runs/fa-sim --top 10
        """
        if fmt not in ("text", "json"):
            raise UsageError(f"--format {fmt!r}: choose text or json")
        if not path.exists():
            raise UsageError(f"{path}: no such file or directory")
        # deferred: pandas (through the simulator reader) only for this command
        from tilescope.io.simulator import read_simulator
        from tilescope.lines import bundle_line_map, line_costs

        sim = read_simulator(path)
        line_map, cpp = bundle_line_map(path) if (path / "ir").is_dir() else ([], None)
        report = {
            "lines_schema_version": LINES_SCHEMA_VERSION,
            "path": str(path),
            "simulator": str(sim.root),
            "mapped": bool(line_map),
            **line_costs(sim, line_map, cpp).to_dict(),
        }
        text = (
            json.dumps(report, indent=2, ensure_ascii=False) + "\n"
            if fmt == "json"
            else render_text(report, top, output_width(width) if output is None else width)
        )
        if output is not None:
            write_text_atomic(output, text)
        else:
            write_stdout(text)
