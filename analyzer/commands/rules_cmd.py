"""`tilescope rules` (list every rule) and `tilescope rule CODE|SLUG` (its documentation)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.cells import cell_len, chop_cells
from rich.console import Console
from rich.markdown import Markdown

from tilescope.engine import discover_rules, get_rule
from tilescope.errors import UsageError
from tilescope.text.escape import terminal_text
from tilescope.text.terminal import WIDTH_HELP, output_width, write_stdout


def rules_table_rows() -> list[tuple[str, str, str, str, str]]:
    return [(r.code, r.slug, r.kind, ", ".join(r.needs), r.summary) for r in discover_rules()]


RULES_FOOTER = "`tilescope rule CODE` shows one rule in full: what it does, what it needs, its thresholds."


def rules_lines(width: int | None) -> list[str]:
    """One line per rule, its columns aligned: `width` None (a pipe): every column whole, nothing
    cut; else the code, slug and kind, then the summary cut to the width with "…" (what it needs
    is left out: `tilescope rule CODE` has it): a line per rule, where a wrapped table took 417
    lines at 80 columns."""
    rows = [[terminal_text(cell) for cell in row] for row in rules_table_rows()]
    header = ["code", "slug", "kind", "needs", "summary"]
    if width is not None:
        rows, header = [[r[0], r[1], r[2], r[4]] for r in rows], ["code", "slug", "kind", "summary"]
    widths = [max(cell_len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    out = []
    for row in [header, *rows]:
        line = "  ".join(cell + " " * (w - cell_len(cell)) for cell, w in zip(row, widths, strict=False))
        line = f"{line}  {row[-1]}"
        out.append(line if width is None or cell_len(line) <= width else chop_cells(line, width - 1)[0] + "…")
    return [*out, "", f"{len(rows)} rules. {RULES_FOOTER}"]


def rule_markdown(code_or_slug: str) -> str:
    info = get_rule(code_or_slug)
    if info is None:
        raise UsageError(f"unknown rule {code_or_slug!r}; `tilescope rules` lists them")
    thresholds = "\n".join(f"- `{k}` = `{v!r}`" for k, v in info.thresholds.items()) or "- (none)"
    return (
        f"# {info.code} {info.slug}\n\n*kind:* {info.kind} — *needs:* {', '.join(info.needs)}\n\n"
        f"{info.doc}\n\n## Default thresholds\n\n{thresholds}\n\n"
        f"Override in `[tool.tilescope.rules.{info.code}]` (pyproject.toml or tilescope.toml).\n"
    )


def register(app: typer.Typer) -> None:
    @app.command("rules")
    def rules_cmd(
        width: Annotated[int | None, typer.Option("--width", metavar="N", min=20, help=WIDTH_HELP)] = None,
    ) -> None:
        """List every rule, one line each: code, slug, kind, what it needs, summary.

        On a terminal the line is cut to its width; piped, nothing is cut.
        `tilescope rule CODE` shows one rule in full.

        Example: tilescope rules
        """
        write_stdout("".join(line + "\n" for line in rules_lines(output_width(width))))
    @app.command("rule")
    def rule_cmd(code: Annotated[str, typer.Argument(help="Rule code (TS101) or slug.")]) -> None:
        """Show one rule's documentation and default thresholds.

        Example: tilescope rule TS102
        """
        text = rule_markdown(code)
        if sys.stdout.isatty():
            Console().print(Markdown(text))
        else:
            sys.stdout.write(text)
