"""Issue #23's house rule for imports: a module imports at the top; an import inside a function
defers something heavy or optional on purpose (pandas, pyarrow, plotly, tilelang, a module that
pulls one in, a command's own modules off `tilescope --help`) and says why in a `# deferred: …`
comment on the line above it. Consecutive imports share one comment: the one above the first of
them (blank lines and comments between them do not end the group, a statement does)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO_ROOT

FOLDERS = ("analyzer", "rules", "dashboard", "collectors")
MARK = "# deferred:"
Body = list[ast.stmt]


def _bodies(node: ast.AST) -> list[Body]:
    """Every statement list directly under `node` (a body, an orelse, a handler's, a case's)."""
    found: list[Body] = []
    for _name, field in ast.iter_fields(node):
        if isinstance(field, list) and field and isinstance(field[0], ast.stmt):
            found.append(field)
        elif isinstance(field, list):
            found += [
                b
                for item in field
                if isinstance(item, ast.excepthandler | ast.match_case)
                for b in _bodies(item)
            ]
    return found


def _comment_above(lines: list[str], lineno: int) -> bool:
    """True when the comment block just above line `lineno` (1-based) holds a `# deferred:` line."""
    i = lineno - 2
    while i >= 0 and lines[i].lstrip().startswith("#"):
        if lines[i].lstrip().startswith(MARK):
            return True
        i -= 1
    return False


def _undeclared(path: Path, root: Path = REPO_ROOT) -> list[str]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    out: list[str] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for body in _bodies(node):
            group_ok = False
            previous_import = False
            for stmt in body:
                if isinstance(stmt, ast.Import | ast.ImportFrom) and in_function:
                    ok = _comment_above(lines, stmt.lineno) or (previous_import and group_ok)
                    if not ok:
                        text = lines[stmt.lineno - 1].strip()
                        out.append(f"{path.relative_to(root)}:{stmt.lineno}: {text}")
                    group_ok, previous_import = ok, True
                    continue
                group_ok = previous_import = False
                inner = in_function or isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)
                visit(stmt, inner)

    visit(ast.parse(source, filename=str(path)), False)
    return out


def _all_undeclared() -> list[str]:
    found: list[str] = []
    for folder in FOLDERS:
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found += _undeclared(path)
    return found


def test_every_import_inside_a_function_says_why_it_is_deferred() -> None:
    undeclared = _all_undeclared()
    why = "imports inside functions without a `# deferred: …` comment above:\n"
    assert undeclared == [], why + "\n".join(undeclared)


def test_the_check_finds_an_undeclared_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os\n"
        "def f():\n"
        "    # deferred: pandas only here\n"
        "    import pandas as pd\n"
        "\n"
        "    from x import y\n"
        "    z = 1\n"
        "    import json\n"
        "    if z:\n"
        "        # a comment that is not the reason\n"
        "        import re\n"
        "    class C:\n"
        "        def g(self):\n"
        "            # deferred: tvm is optional\n"
        "            # (a second line of the reason)\n"
        "            import tvm\n"
        "    try:\n"
        "        import a\n"
        "    except ImportError:\n"
        "        # deferred: b is the fallback\n"
        "        import b\n",
        encoding="utf-8",
    )
    found = [line.split(":")[1] for line in _undeclared(probe, tmp_path)]
    assert found == ["8", "11", "18"]


@pytest.mark.slow  # a fresh interpreter importing the CLI: ~1.5 s (#23)
def test_analyze_of_a_bundle_loads_no_duckdb(tmp_path: Path) -> None:
    """DuckDB (~40 ms of every command's start) is imported where a timeline or a simulator trace
    is read, not by the rules' modules that every command imports."""
    bundle = REPO_ROOT / "sample_traces" / "tilelang_fa_bundle"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tilescope.cli", "analyze", str(bundle), "-f", "json",
         "-o", str(tmp_path / "r.json")],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "tilescope.rules._findings" in imported  # the run did import the rules
    assert "duckdb" not in imported
