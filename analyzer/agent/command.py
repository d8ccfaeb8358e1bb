"""`tilescope mcp --root DIR ...`: the Model Context Protocol server over stdio (docs/agents.md)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from tilescope.errors import UsageError
from tilescope.extras import require

_ROOT_HELP = "A folder the tools may read (repeatable); every path an agent names must lie under one."
_SCRATCH_HELP = (
    "The one folder the tools write to (saved results, temporary files, the rank cache); "
    "default: a temporary folder removed when the server ends."
)


def mcp_command(
    root: Annotated[list[Path] | None, typer.Option("--root", metavar="DIR", help=_ROOT_HELP)] = None,
    scratch: Annotated[Path | None, typer.Option("--scratch", metavar="DIR", help=_SCRATCH_HELP)] = None,
) -> None:
    """Serve tilescope's commands to a coding agent over stdio (Model Context Protocol).

    Tools: info, analyze, kernels, lint, diff, rule, lines; each returns its command's JSON and
    says which files it rests on and what it assumed. Stdout carries the protocol only.

    Example: tilescope mcp --root ~/runs --root ~/kernels
    """
    require("agent", "tilescope mcp")
    # deferred: the dashboard's path rules and the server (the mcp SDK) only when this command runs
    from tilescope.agent.server import run
    from tilescope.dashboard.paths import RootSet
    from tilescope.scratch import scratch_dir

    if not root:
        raise UsageError("tilescope mcp needs at least one --root DIR: the folders its tools may read")
    roots = list(RootSet.of(root).roots)  # each an existing folder, links followed (exit 2 otherwise)
    with contextlib.ExitStack() as stack:
        if scratch is None:
            folder = stack.enter_context(scratch_dir("tilescope-mcp-"))
        else:
            folder = scratch.expanduser().resolve()
            folder.mkdir(parents=True, exist_ok=True)
        run(roots, folder)


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp_command)
