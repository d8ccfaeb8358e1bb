"""`tilescope rules` (list every rule) and `tilescope rule CODE|SLUG` (its documentation)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text

from tilescope.engine import discover_rules, get_rule
from tilescope.errors import UsageError
from tilescope.text.escape import terminal_text


def rules_table_rows() -> list[tuple[str, str, str, str, str]]:
    return [(r.code, r.slug, r.kind, ", ".join(r.needs), r.summary) for r in discover_rules()]


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
    def rules_cmd() -> None:
        """List every rule: code, slug, kind, what it needs, summary.

        Example: tilescope rules
        """
        console = Console(width=None if sys.stdout.isatty() else 200)
        table = Table("code", "slug", "kind", "needs", "summary", box=None, header_style="bold")
        for row in rules_table_rows():
            # Text, not markup: "[...]" in a summary or a needs list is printed as written
            table.add_row(*(Text(terminal_text(cell)) for cell in row))
        console.print(table)

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
