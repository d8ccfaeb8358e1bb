"""Usage errors end like every other error (docs/product.md): exit 2, one line, no traceback.

typer 0.29 raises its own (vendored click) exceptions; the entry point once checked the `click`
package's classes instead, and every usage error ended in a traceback with exit code 1.
"""

from __future__ import annotations

import os

import pytest

from support import REPO_ROOT, cli_process

REPO = REPO_ROOT


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["kernels", "--bogus"],
            "tilescope: error: No such option: --bogus (see 'tilescope kernels --help')",
        ),
        (["kernels"], "tilescope: error: Missing argument 'path'. (see 'tilescope kernels --help')"),
        (["nosuch"], "tilescope: error: No such command 'nosuch'. (see 'tilescope --help')"),
        (["analyze", "x", "--format", "json", "--bogus"], "No such option: --bogus"),
        (["kernels", "x.csv", "--limit", "abc"], "Invalid value for '--limit'"),
    ],
)
def test_usage_error_is_one_line_exit_2(args: list[str], message: str) -> None:
    r = cli_process(*args)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tilescope: error: ") and message in lines[0]


def test_no_command_prints_the_help() -> None:
    r = cli_process()
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "Usage:" in r.stdout and "kernels" in r.stdout and "analyze" in r.stdout


def test_help_is_success() -> None:
    r = cli_process("kernels", "--help")
    assert r.returncode == 0 and "Example: tilescope kernels" in r.stdout


def test_root_help_lists_each_command_on_one_line() -> None:
    # typer's rich help keeps a single line break of a command's first docstring paragraph in the
    # root listing: `lines` once broke its summary in the middle of a sentence
    # wide enough that no summary wraps; UTF-8 so that rich draws the panel with its box lines
    r = cli_process("--help", env={**os.environ, "COLUMNS": "200", "PYTHONIOENCODING": "utf-8"})
    assert r.returncode == 0, r.stderr
    panel = r.stdout.split("Commands", 1)[1].splitlines()
    rows = [row.strip("│ ") for row in panel if row.startswith("│")]
    names = [row.split()[0] for row in rows]
    assert names == ["info", "kernels", "analyze", "rules", "rule", "lint", "collect", "diff", "lines",
                     "serve", "mcp", "cache"], rows
