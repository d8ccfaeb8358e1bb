"""Import a kernel file as it is published, without running its script part.

Example files of both TileLang stacks run NPU code at module level — `tilelang.cache.clear_cache()`,
`argparse`, `torch.randn(...).npu()`, a test loop calling the kernel — so importing them as they
are fails before anything is lowered. `load_module` executes only the declarative part of the
file (imports, definitions, assignments that call nothing of the script), statement by statement
with the file's own line numbers (TileLang's parser reads the source of `@T.prim_func` through
`inspect`); `file_call_params` reads, without importing anything, the arguments the file itself
passes to a builder (`func = matmul(M, N, K, 128, 256, 64)` after argparse, or the first row of a
`for ... in test_configs` loop), which lint takes as the builder's default parameters.

Standard library only: the tilelang-ascend worker imports this module inside its own interpreter.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

# Modules whose calls an executed assignment may make (building a config, a logger, a dtype);
# any other call — torch, argparse, the kernel itself, a `func` built from it — is the script part.
_DECLARATIVE_MODULES = frozenset(
    {"tilelang", "tvm", "logging", "math", "functools", "dataclasses", "typing", "enum", "collections"}
)
# Modules that cannot be imported without the vendor runtime (CANN); the builders never need them.
_SKIPPED_IMPORTS = frozenset({"torch_npu"})
# Calls an argument expression may make when it is evaluated for the file's own builder call.
_PURE_CALLS = {
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "min": min,
    "max": max,
    "abs": abs,
    "round": round,
    "len": len,
    "tuple": tuple,
    "list": list,
    "dict": dict,
    "range": range,
}


class PublishedFileError(Exception):
    """The declarative part of the file failed (an import): the message names the line."""


def _root(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _declarative_roots(tree: ast.Module) -> set[str]:
    """Names a declarative assignment may call: TileLang/TVM and a few standard modules as the
    file imports them (`T`, `DataType`), builtins, and the file's own classes (a tiling dataclass)."""
    roots = set(_PURE_CALLS)
    for n in tree.body:
        if isinstance(n, ast.Import):
            roots |= {
                (a.asname or a.name).split(".")[0]
                for a in n.names
                if a.name.split(".")[0] in _DECLARATIVE_MODULES
            }
        elif isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] in _DECLARATIVE_MODULES:
            roots |= {a.asname or a.name for a in n.names}
        elif isinstance(n, ast.ClassDef):
            roots.add(n.name)
    return roots


def _calls_script(node: ast.AST, allowed: set[str]) -> bool:
    """Does evaluating `node` call anything but TileLang, builtins and the file's own classes?"""
    return any(isinstance(n, ast.Call) and _root(n.func) not in allowed for n in ast.walk(node))


def _import_names(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    return [a.name for a in node.names]


def declarative(tree: ast.Module) -> list[ast.stmt]:
    """The top-level statements `load_module` executes, in file order."""
    allowed = _declarative_roots(tree)
    kept: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if not any(m.split(".")[0] in _SKIPPED_IMPORTS for m in _import_names(node)):
                kept.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            # decorators run at definition: `@tilelang.jit(...)` only wraps; a decorator calling
            # the script part would be unusual and is left to fail with its line
            kept.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if node.value is not None and not _calls_script(node.value, allowed):
                kept.append(node)
        elif isinstance(node, ast.Try) and all(
            isinstance(s, (ast.Import, ast.ImportFrom, ast.Assign, ast.Pass)) for s in node.body
        ):
            kept.append(node)  # `try: import x except ImportError: x = None`
    return kept


def load_module(path: Path, tree: ast.Module) -> ModuleType:
    """Execute the declarative part of `path` as a module of its own (siblings importable)."""
    mod_name = f"tilescope_kernel_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None:
        raise PublishedFileError(f"{path}: cannot import")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod  # @T.prim_func reads the source through inspect
    parent = str(path.resolve().parent)
    added = parent not in sys.path
    if added:
        sys.path.insert(0, parent)  # kernels may import their siblings
    try:
        with contextlib.redirect_stdout(sys.stderr):
            for node in declarative(tree):
                code = compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec", dont_inherit=True)
                try:
                    exec(code, mod.__dict__)
                except Exception as exc:
                    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                        continue  # a value the builders may not need; a NameError later names it
                    raise PublishedFileError(
                        f"{path}:{node.lineno}: {ast.unparse(node).splitlines()[0][:120]} failed: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
    finally:
        if added:
            sys.path.remove(parent)
    return mod


# --- the file's own call of a builder ------------------------------------------------------------


def _argparse_defaults(tree: ast.Module) -> SimpleNamespace:
    """`parser.add_argument("--seq-len", type=int, default=128)` anywhere -> args.seq_len == 128."""
    ns = SimpleNamespace()
    for n in ast.walk(tree):
        if not (
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"
        ):
            continue
        flags = [a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        kw = {k.arg: k.value for k in n.keywords if k.arg}
        dest: str | None = None
        if "dest" in kw and isinstance(kw["dest"], ast.Constant):
            dest = str(kw["dest"].value)
        else:
            longs = [f for f in flags if f.startswith("--")]
            pick = longs[0] if longs else (flags[0] if flags else None)
            dest = pick.lstrip("-").replace("-", "_") if pick else None
        if not dest:
            continue
        value: Any = None
        if "default" in kw:
            with contextlib.suppress(ValueError, SyntaxError, TypeError):
                value = ast.literal_eval(kw["default"])
        elif "action" in kw and isinstance(kw["action"], ast.Constant) and kw["action"].value == "store_true":
            value = False
        setattr(ns, dest, value)
    return ns


def _safe(node: ast.AST) -> bool:
    """An expression made of names, literals, arithmetic, subscripts and a few builtins."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            if not (isinstance(n.func, ast.Name) and n.func.id in _PURE_CALLS):
                return False
        elif isinstance(n, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)) or (
            isinstance(n, ast.Attribute) and n.attr.startswith("_")
        ):
            return False
    return True


def _eval(node: ast.expr, env: dict[str, Any]) -> Any:
    code = compile(ast.Expression(body=node), "<kernel file>", "eval", dont_inherit=True)
    return eval(code, {"__builtins__": _PURE_CALLS}, env)


def _bind(target: ast.expr, value: Any, env: dict[str, Any]) -> None:
    """`a, (b, c) = value` into env (names only; anything else is ignored)."""
    if isinstance(target, ast.Name):
        env[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)):
        items = list(value)
        if len(items) == len(target.elts):
            for t, v in zip(target.elts, items, strict=True):
                _bind(t, v, env)


def _is_parse_args(value: ast.expr) -> bool:
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in ("parse_args", "parse_known_args")
    )


class _CallFinder:
    def __init__(self, tree: ast.Module, builder: str) -> None:
        self.builder = builder
        self.args_ns = _argparse_defaults(tree)
        self.found: tuple[list[Any], dict[str, Any], int] | None = None

    def _try_call(self, node: ast.AST, env: dict[str, Any]) -> bool:
        for n in ast.walk(node):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == self.builder):
                continue
            if any(isinstance(a, ast.Starred) for a in n.args) or any(k.arg is None for k in n.keywords):
                continue
            parts = [*n.args, *(k.value for k in n.keywords)]
            if not all(_safe(p) for p in parts):
                continue
            try:
                args = [_eval(a, env) for a in n.args]
                kwargs = {str(k.arg): _eval(k.value, env) for k in n.keywords}
            except Exception:
                continue
            self.found = (args, kwargs, n.lineno)
            return True
        return False

    def block(self, stmts: list[ast.stmt], env: dict[str, Any], depth: int = 0) -> bool:
        for s in stmts:
            if depth > 4:
                return False
            value = (
                getattr(s, "value", None)
                if isinstance(s, (ast.Assign, ast.AnnAssign, ast.Expr, ast.Return))
                else None
            )
            if value is not None and self._try_call(value, env):
                return True
            if isinstance(s, ast.Assign) and len(s.targets) == 1:
                if _is_parse_args(s.value):
                    _bind(s.targets[0], self.args_ns, env)
                elif _safe(s.value):
                    with contextlib.suppress(Exception):
                        _bind(s.targets[0], _eval(s.value, env), env)
            elif isinstance(s, ast.For):
                with contextlib.suppress(Exception):
                    if _safe(s.iter):
                        first = next(iter(_eval(s.iter, env)))
                        inner = dict(env)
                        _bind(s.target, first, inner)
                        if self.block(s.body, inner, depth + 1):
                            return True
            elif (
                isinstance(s, ast.If)
                or (isinstance(s, ast.FunctionDef) and depth == 0 and s.name == "main" and not s.args.args)
            ) and self.block(s.body, dict(env), depth + 1):
                return True
        return False


def file_call_params(tree: ast.Module, builder: str, params: list[str]) -> tuple[dict[str, Any], int] | None:
    """The arguments of the file's own first evaluable call of `builder`, by parameter name, and
    its line; None when the file never calls it with values that can be read without running it."""
    finder = _CallFinder(tree, builder)
    if not finder.block(list(tree.body), {}) or finder.found is None:
        return None
    args, kwargs, line = finder.found
    if len(args) > len(params):
        return None
    bound = dict(zip(params, args, strict=False))
    for k, v in kwargs.items():
        if k in params:
            bound[k] = v
    return bound, line
