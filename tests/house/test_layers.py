"""The house rules of docs/internals.md, checked on the package as it installs (`tilescope.…`,
laid out by scripts/package_view.py): the layer contracts of pyproject.toml (import-linter), no
import cycle between modules, ruff and mypy clean, and no module past its size."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO_ROOT

REPO = REPO_ROOT
BIN = Path(sys.executable).parent
# A module does one job in at most 600 lines. A module that must be larger is listed here with its
# ceiling and the reason beside it (none is today).
MAX_LINES = 600
OVERSIZE: dict[str, int] = {}


def _view() -> Path:
    # The view the documented commands use (build/view, beside build/mypy-cache): mypy's cache keys
    # modules by path, so a view in a new temporary folder made every run check the package cold
    # (~35 s); here a run after an unchanged checkout takes a few seconds, and the developer's own
    # `mypy` command and this test warm one cache.
    spec = importlib.util.spec_from_file_location("package_view", REPO / "scripts" / "package_view.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    view: Path = mod.build()
    return view


@pytest.fixture(scope="module")
def view() -> Path:
    return _view()


def test_the_view_holds_every_source_file_once(view: Path) -> None:
    sources = sorted(
        p.relative_to(REPO) for d in ("analyzer", "rules", "dashboard", "collectors")
        for p in (REPO / d).rglob("*.py") if "__pycache__" not in p.parts
    )
    linked = sorted(Path(os.path.realpath(p)).relative_to(REPO) for p in view.rglob("*.py"))
    assert linked == sources


def test_the_layer_contracts_hold(view: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(view)}
    r = subprocess.run([str(BIN / "lint-imports"), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
                       cwd=view, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_cycle(view: Path) -> None:
    code = (
        "import grimp, json; g = grimp.build_graph('tilescope', cache_dir=None); "
        "print(json.dumps({m: sorted(g.find_modules_directly_imported_by(m)) for m in g.modules}))"
    )
    env = {**os.environ, "PYTHONPATH": str(view)}
    r = subprocess.run([sys.executable, "-c", code], cwd=view, env=env, capture_output=True, text=True,
                       timeout=300, check=True)
    import json

    graph = {m: set(deps) for m, deps in json.loads(r.stdout).items()}
    assert len(graph) > 150  # the whole package was read
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_past_its_size() -> None:
    over = {}
    for d in ("analyzer", "rules", "dashboard", "collectors"):
        for p in (REPO / d).rglob("*.py"):
            rel = str(p.relative_to(REPO))
            lines = len(p.read_text(encoding="utf-8").splitlines())
            if lines > OVERSIZE.get(rel, MAX_LINES):
                over[rel] = lines
    assert over == {}
    # an entry whose module has shrunk under the limit is taken off the list
    for rel in OVERSIZE:
        assert len((REPO / rel).read_text(encoding="utf-8").splitlines()) > MAX_LINES, rel


def test_ruff_and_mypy_are_clean(view: Path) -> None:
    r = subprocess.run([str(BIN / "ruff"), "check", "."], cwd=REPO, capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-4000:]
    env = {**os.environ, "MYPYPATH": str(view)}
    r = subprocess.run([str(BIN / "mypy"), "--cache-dir", str(view.parent / "mypy-cache"),
                        "-p", "tilescope"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=600, check=False)
    assert r.returncode == 0, r.stdout[-4000:]


# A function's own code (its docstring, the rules' documentation, and nested functions left out)
# fits in 80 lines, or says why not in a `# long: …` comment just above it.
MAX_FUNCTION_LINES = 80


def _own_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if not body:
        return 0
    lines = set(range(body[0].lineno, fn.end_lineno + 1))  # type: ignore[operator]
    for node in ast.walk(fn):
        if node is not fn and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            lines -= set(range(node.lineno, node.end_lineno + 1))  # type: ignore[operator]
    return len(lines)


def _long_functions() -> list[str]:
    found = []
    for d in ("analyzer", "rules", "dashboard", "collectors"):
        for p in sorted((REPO / d).rglob("*.py")):
            source = p.read_text(encoding="utf-8")
            lines = source.splitlines()
            for fn in ast.walk(ast.parse(source)):
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                if _own_lines(fn) <= MAX_FUNCTION_LINES:
                    continue
                top = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
                if not any(ln.strip().startswith("# long:") for ln in lines[max(0, top - 4):top - 1]):
                    found.append(f"{p.relative_to(REPO)}:{fn.lineno} {fn.name} ({_own_lines(fn)} lines)")
    return found


def test_no_long_function_without_its_reason() -> None:
    assert _long_functions() == []
