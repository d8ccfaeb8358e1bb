"""The optional parts of tilescope, each an extra of pyproject.toml, and the one message a command
gives when the extra it needs is not installed (exit 3, with the line that installs it).

The core — detection, parsing, the rules, text / JSON / Markdown / SARIF reports, diff — needs none
of them, so a CI job that only runs `analyze -f sarif` installs no plotting or web stack.
"""

from __future__ import annotations

import importlib.util

from tilescope.errors import MissingComponentError

# extra -> the modules a command checks for with `require` (import names); in step with
# [project.optional-dependencies]. `--scheduler` says its own line when `distributed` fails to import.
EXTRAS: dict[str, tuple[str, ...]] = {
    "html": ("plotly",),
    "dashboard": ("plotly", "dash", "dash_ag_grid"),
    "agent": ("mcp",),
}


def missing(extra: str) -> list[str]:
    """The modules of `extra` that cannot be imported here (nothing is imported to find out)."""
    out = []
    for module in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a broken install or a module without a spec
            found = False
        if not found:
            out.append(module)
    return out


def install_line(extra: str) -> str:
    return f"pip install 'tilescope[{extra}]'"


def require(extra: str, what: str) -> None:
    """Raise the exit-3 error naming `what` (a command or format) when `extra` is not installed."""
    gone = missing(extra)
    if gone:
        raise MissingComponentError(
            f"{what} needs the {extra} extra ({', '.join(gone)} not installed): {install_line(extra)}"
        )
