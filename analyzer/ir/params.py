"""Which builders a kernel reference names and what they take, read from the kernel file's source,
and the `-p` / `--sweep` values checked against that before anything is built.

`resolve_kernel(kernel_ref)` finds the file and its builders; `builder_signatures` reads their
parameters (and the file's dataclasses they take) without importing the file; `check_params` and
`validate_sweep` make a value no builder takes, a missing one or one unlike its default exit 2
naming it; `with_file_params`, `nest_params` and `for_worker` shape the values the build is given.
tilescope.ir.capture builds and lowers with them. Nothing here imports TileLang.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from tilescope.errors import UsageError
from tilescope.ir.lowering import NESTED_KEY, nest_fields
from tilescope.ir.published import file_call_params


def parse_kernel_ref(kernel_ref: str) -> tuple[Path, list[str]]:
    """`file.py[:f1[,f2...]]` -> (path, names). Windows drive letters are not supported."""
    path_s, _, funcs = kernel_ref.partition(":")
    path = Path(path_s)
    if not path.is_file():
        raise UsageError(f"{path}: kernel file not found")
    names = [f.strip() for f in funcs.split(",") if f.strip()] if funcs else []
    return path, names


def parse_param(text: str) -> tuple[str, Any]:
    """`NAME=VALUE` or `NAME.FIELD=VALUE` (a field of a dataclass parameter: `tiling.block_q=64`):
    VALUE as a Python literal (ast.literal_eval), else as a string."""
    name, sep, raw = text.partition("=")
    if not sep or not all(part.isidentifier() for part in name.strip().split(".")):
        raise UsageError(f"--param {text!r}: expected NAME=VALUE or NAME.FIELD=VALUE")
    try:
        value: Any = ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError):
        value = raw.strip()
    return name.strip(), value


def _decorator_names(fn: ast.FunctionDef) -> list[str]:
    return [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in fn.decorator_list]


def candidates(tree: ast.Module) -> list[str]:
    """Top-level builders and `@tilelang.jit`/`@T.prim_func` defs of a kernel file.

    A builder is a def containing a nested `@T.prim_func`, or one that returns what a same-file
    builder built (a chain builder returning several PrimFuncs). A test driver that calls a builder
    and runs the kernel (`run_test`, `conv_im2col_gemm` returning a tensor) is not offered; a
    `_`-prefixed builder is (published files name their kernels `_rms_norm`).
    """
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}

    def direct(fn: ast.FunctionDef) -> bool:
        return any(d.endswith(("jit", "prim_func")) for d in _decorator_names(fn)) or any(
            isinstance(n, ast.FunctionDef)
            and n is not fn
            and any(d.endswith("prim_func") for d in _decorator_names(n))
            for n in ast.walk(fn)
        )

    def returns_built(fn: ast.FunctionDef, builders: set[str]) -> bool:
        built_names = {
            t.id
            for a in ast.walk(fn)
            if isinstance(a, ast.Assign)
            and isinstance(a.value, ast.Call)
            and isinstance(a.value.func, ast.Name)
            and a.value.func.id in builders
            for t in a.targets
            if isinstance(t, ast.Name)
        }
        for r in ast.walk(fn):
            if not isinstance(r, ast.Return) or r.value is None:
                continue
            for n in ast.walk(r.value):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in builders:
                    return True
                if isinstance(n, ast.Name) and n.id in built_names:
                    return True
        return False

    builders = {name for name, fn in defs.items() if direct(fn)}
    for _ in range(3):  # builders returning builders, a few levels deep
        builders = builders | {name for name, fn in defs.items() if returns_built(fn, builders)}
    # a `_` builder that another builder calls is a part of a chain, not a kernel of its own
    parts = {
        c.func.id
        for name in builders
        for c in ast.walk(defs[name])
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id != name
    }
    return [n for n in defs if n in builders and not (n.startswith("_") and n in parts)]


def autotuned(obj: Any) -> bool:
    """An `@autotune(configs=...)` kernel (tilelang.autotuner.AutoTuneImpl around a JITImpl)."""
    return hasattr(obj, "jit_impl") and hasattr(obj, "configs") and hasattr(obj, "get_tunner")


def parse_kernel_file(path: Path) -> ast.Module:
    """The kernel file's syntax tree; a file that is not Python is a usage error naming the line
    (exit 2), not a traceback with exit 1 — the gate's code, which CI would read as findings."""
    try:
        source = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: byte {exc.start}: not UTF-8 text; expected a Python kernel file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror})") from None
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        where = f"{path}:{exc.lineno}" if exc.lineno else str(path)
        raise UsageError(f"{where}: {exc.msg}; expected a Python kernel file") from None
    except ValueError as exc:  # source with a NUL byte
        raise UsageError(f"{path}: {exc}; expected a Python kernel file") from None


@dataclass(frozen=True)
class BuilderSignature:
    """A builder's parameters as its `def` writes them: name -> literal default (or REQUIRED)."""

    name: str
    line: int
    params: dict[str, Any]
    open_ended: bool  # **kwargs, or a @jit kernel whose get_tir binds T.const symbols too
    nested: dict[str, DataclassParam] = field(default_factory=dict)  # parameter -> its dataclass


@dataclass(frozen=True)
class DataclassParam:
    """A parameter that takes a dataclass of the file (`tiling=FwdTiling(block_q=64)`): its fields
    as the class writes them, name -> literal default (or REQUIRED), for `-p tiling.block_q=64`."""

    cls: str
    line: int
    fields: dict[str, Any]


REQUIRED = object()
UNKNOWN_DEFAULT = object()  # a default that is not a literal: its type is not checked


def file_dataclasses(tree: ast.Module) -> dict[str, DataclassParam]:
    """The file's top-level `@dataclass` classes and their fields (read, not imported)."""
    out = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        if not any(
            ast.unparse(d.func if isinstance(d, ast.Call) else d).endswith("dataclass")
            for d in node.decorator_list
        ):
            continue
        fields: dict[str, Any] = {}
        for st in node.body:
            if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
                continue
            if "ClassVar" in ast.unparse(st.annotation):
                continue
            fields[st.target.id] = _field_default(st.value)
        out[node.name] = DataclassParam(node.name, node.lineno, fields)
    return out


def _field_default(value: ast.expr | None) -> Any:
    if value is None:
        return REQUIRED
    if isinstance(value, ast.Call) and ast.unparse(value.func).endswith("field"):
        kw = {k.arg: k.value for k in value.keywords if k.arg}
        if "default" in kw:
            return _literal(kw["default"])
        return UNKNOWN_DEFAULT if "default_factory" in kw else REQUIRED
    return _literal(value)


def _dataclass_of(
    fn: ast.FunctionDef, arg: ast.arg, default: ast.expr | None, classes: dict[str, DataclassParam]
) -> DataclassParam | None:
    """The file's dataclass a parameter takes: named by its default (`tiling=FwdTiling()`), its
    annotation (`tiling: FwdTiling | None = None`) or the body's fallback (`tiling = tiling or
    FwdTiling()`, `if tiling is None: tiling = FwdTiling()`)."""

    def called(node: ast.AST | None) -> str | None:
        for n in ast.walk(node) if node is not None else ():
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in classes:
                return n.func.id
        return None

    if isinstance(default, ast.Call) and (name := called(default)):
        return classes[name]
    for n in ast.walk(arg.annotation) if arg.annotation is not None else ():
        if isinstance(n, ast.Name) and n.id in classes:
            return classes[n.id]
        text = n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) else ""
        written = text.split("|")[0].strip()
        if written in classes:  # a string annotation, `"FwdTiling | None"`
            return classes[written]
    for n in ast.walk(fn):
        if (
            isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == arg.arg for t in n.targets)
            and (name := called(n.value))
        ):
            return classes[name]
        if (
            isinstance(n, ast.BoolOp)
            and isinstance(n.op, ast.Or)
            and isinstance(n.values[0], ast.Name)
            and n.values[0].id == arg.arg
            and (name := called(n))
        ):
            return classes[name]
    return None


def builder_signatures(tree: ast.Module, names: list[str]) -> list[BuilderSignature]:
    """The signatures of the named top-level builders, read from the source (nothing is imported);
    a name that is not a plain `def` in the file is left to the runtime check."""
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = file_dataclasses(tree)
    out = []
    for name in names:
        fn = defs.get(name)
        if fn is None:
            continue
        a = fn.args
        positional = [*a.posonlyargs, *a.args]
        defaults: list[Any] = [REQUIRED] * (len(positional) - len(a.defaults)) + [
            _literal(d) for d in a.defaults
        ]
        params = {arg.arg: d for arg, d in zip(positional, defaults, strict=True)}
        params.update(
            {
                arg.arg: REQUIRED if d is None else _literal(d)
                for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
            }
        )
        jit = any(d.endswith("jit") for d in _decorator_names(fn))
        nodes: list[tuple[ast.arg, ast.expr | None]] = [
            *zip(positional, [None] * (len(positional) - len(a.defaults)) + list(a.defaults), strict=True),
            *zip(a.kwonlyargs, a.kw_defaults, strict=True),
        ]
        nested = {arg.arg: dc for arg, d in nodes if (dc := _dataclass_of(fn, arg, d, classes)) is not None}
        out.append(BuilderSignature(name, fn.lineno, params, a.kwarg is not None or jit, nested))
    return out


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return UNKNOWN_DEFAULT


def _expected_like(default: Any) -> tuple[str, Any] | None:
    """What a value must be, judged by the literal default it replaces: (words, predicate)."""
    if isinstance(default, bool):
        return "True or False", lambda v: isinstance(v, bool)
    if isinstance(default, int):
        if default > 0:
            return "a positive integer", lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0
        return "an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)
    if isinstance(default, float):
        return "a number", lambda v: isinstance(v, int | float) and not isinstance(v, bool)
    if isinstance(default, str):
        return "a string", lambda v: isinstance(v, str)
    return None


def check_params(
    path: Path, sigs: list[BuilderSignature], values: dict[str, list[Any]], how: dict[str, str]
) -> None:
    """`-p` / `--sweep` values against the builders' signatures, before anything is lowered: a name
    no builder takes, a parameter without default left out, or a value unlike its default
    (`block_M=abc`, `0`, `-64` where the default is 128) is exit 2 naming it."""
    if not sigs:
        return
    heads = {k.partition(".")[0]: k for k in values if "." in k}  # `tiling` of `tiling.block_q`
    if not any(s.open_ended for s in sigs):
        accepted = {p for s in sigs for p in s.params}
        unknown = sorted({k.partition(".")[0] for k in values} - accepted)
        if unknown:
            raise UsageError(
                f"unknown {', '.join(f'{how[heads.get(u, u)]} {heads.get(u, u)}' for u in unknown)}; "
                f"{', '.join(s.name for s in sigs)} accept: {', '.join(sorted(accepted))}"
            )
    _check_fields(path, sigs, values, how)
    for s in sigs:
        missing = [p for p, d in s.params.items() if d is REQUIRED and p not in values and p not in heads]
        if missing and not s.open_ended:
            raise UsageError(
                f"{path}:{s.line}: {s.name}() has no default for {', '.join(missing)}; "
                f"give {' '.join(f'-p {m}=VALUE' for m in missing)}"
            )
        for p, d in s.params.items():
            rule = _expected_like(d) if p in values else None
            if rule is None:
                continue
            words, ok = rule
            for bad in (v for v in values[p] if not ok(v)):
                raise UsageError(f"{how[p]} {p}={bad!r}: expected {words}, like {s.name}()'s default {d!r}")


def _check_fields(
    path: Path, sigs: list[BuilderSignature], values: dict[str, list[Any]], how: dict[str, str]
) -> None:
    """`-p tiling.block_q=64`: `tiling` takes a dataclass of the file, which has a field `block_q`,
    and 64 is like its default — else exit 2 naming the field and the accepted ones."""
    for key in (k for k in values if "." in k):
        head, _, name = key.partition(".")
        if "." in name:
            raise UsageError(f"{how[key]} {key}: expected NAME.FIELD=VALUE (one level of fields)")
        if head in values:
            raise UsageError(
                f"{how[head]} {head} and {how[key]} {key}: expected the whole {head} or its fields, not both"
            )
        takers = [s for s in sigs if head in s.params]
        if not takers:
            if any(s.open_ended for s in sigs):
                raise UsageError(
                    f"{how[key]} {key}: {', '.join(s.name for s in sigs)} has no parameter {head} "
                    "that takes a dataclass; expected NAME=VALUE"
                )
            continue  # the unknown-name check above named it
        for s in takers:
            dc = s.nested.get(head)
            if dc is None:
                raise UsageError(
                    f"{how[key]} {key}: {s.name}()'s {head} takes no dataclass of {path} (none is "
                    f"its default, its annotation or its fallback); expected {head}=VALUE"
                )
            if name not in dc.fields:
                raise UsageError(
                    f"{how[key]} {key}: {dc.cls} ({path}:{dc.line}) has no field {name}; "
                    f"accepted: {', '.join(f'{head}.{f}' for f in dc.fields)}"
                )
            rule = _expected_like(dc.fields[name])
            if rule is None:
                continue
            words, ok = rule
            for bad in (v for v in values[key] if not ok(v)):
                raise UsageError(
                    f"{how[key]} {key}={bad!r}: expected {words}, like {dc.cls}.{name}'s default "
                    f"{dc.fields[name]!r}"
                )


def nest_params(
    mod: ModuleType, path: Path, sigs: list[BuilderSignature], params: dict[str, Any]
) -> dict[str, Any]:
    """`{"tiling.block_q": 64}` -> `{"tiling": dataclasses.replace(default, block_q=64)}`, the
    default being the parameter's own dataclass default or, when that is None (`tiling=None` with
    `tiling = tiling or FwdTiling()` in the body), the class constructed with its defaults
    (`lowering.nest_fields`, which the tilelang-ascend worker runs too)."""
    def taker(head: str) -> BuilderSignature:
        s = next((s for s in sigs if head in s.nested), None)
        if s is None:  # check_params said why, before anything was imported
            raise UsageError(f"--param {head}.FIELD: {head} takes no dataclass of {path}")
        return s

    def fail(head: str, values: dict[str, Any], exc: Exception) -> Exception:
        dc = taker(head).nested[head]
        return UsageError(field_error(path, dc.line, dc.cls, head, values, exc))

    return nest_fields(
        params,
        lambda head: _runtime_default(getattr(mod, taker(head).name, None), head),
        lambda head: getattr(mod, taker(head).nested[head].cls),
        fail,
    )


def field_error(
    path: Path | str, line: int, cls: str, head: str, values: dict[str, Any], exc: Exception
) -> str:
    fields = ", ".join(f"{head}.{k}={v!r}" for k, v in values.items())
    return (f"{path}:{line}: {cls} with {fields}: {exc}; "
            f"expected every field without a default given as -p {head}.FIELD=VALUE")


def _runtime_default(obj: Any, name: str) -> Any:
    """The default of a builder's parameter `name` as imported (None when it has none)."""
    if autotuned(obj):
        obj = obj.jit_impl
    fn = getattr(obj, "func", obj)
    try:
        p = inspect.signature(fn).parameters.get(name)
    except (TypeError, ValueError):
        return None
    return None if p is None or p.default is p.empty else p.default


def with_file_params(
    tree: ast.Module, sigs: list[BuilderSignature], params: dict[str, Any]
) -> dict[str, Any]:
    """The arguments the file itself passes to the builder (`func = matmul(M, N, K, 128, 256, 64)`
    after argparse, the first row of a test loop) as defaults under the user's `-p` values."""
    merged: dict[str, Any] = {}
    for s in sigs:
        found = file_call_params(tree, s.name, list(s.params))
        if found is not None:
            merged.update(found[0])
    for head in {k.partition(".")[0] for k in params if "." in k}:
        merged.pop(head, None)  # `-p tiling.block_q=64` over the file's own `tiling=...`
    return {**merged, **params}


def resolve_kernel(kernel_ref: str) -> tuple[Path, list[str], ast.Module]:
    """The file, the builder names (the one candidate when none is named) and the syntax tree."""
    path, names = parse_kernel_ref(kernel_ref)
    tree = parse_kernel_file(path)
    if not names:
        found = candidates(tree)
        if len(found) != 1:
            listed = ", ".join(found) if found else "none"
            raise UsageError(f"{path}: pick a function with {path}:NAME (candidates: {listed})")
        names = found
    return path, names, tree


def validate_sweep(
    kernel_ref: str,
    base: dict[str, Any],
    grid: dict[str, list[Any]],
    configs: list[dict[str, Any]] | None = None,
) -> None:
    """`--sweep` (and the @autotune configs of `--sweep autotune`) and `-p` checked as one lint's
    `-p` is, before any worker lowers a combination (a worker's usage error was a table row and
    exit 0)."""
    path, names, tree = resolve_kernel(kernel_ref)
    values: dict[str, list[Any]] = {k: [v] for k, v in base.items()}
    how = dict.fromkeys(base, "--param")
    for c in configs or []:
        for k, v in c.items():
            values.setdefault(k, []).append(v)
            how[k] = "--sweep autotune"
    values.update(grid)
    how.update(dict.fromkeys(grid, "--sweep"))
    check_params(path, builder_signatures(tree, names), values, how)


def raise_usage(
    path: Path, names: list[str], sigs: list[BuilderSignature], failure: dict[str, Any] | None
) -> None:
    """A build failure that is the user's (classify_failure kind "usage": a missing or ill-typed
    parameter the builder rejected, a call it cannot take, an unknown name) is exit 2 naming the
    file:line and what was expected — a TS500 finding with exit 0 would read as the kernel's fault."""
    if not failure or failure.get("kind") != "usage":
        return
    where = failure.get("where") or (f"{path}:{sigs[0].line}" if sigs else str(path))
    raise UsageError(f"{where}: {', '.join(names)}: {failure['usage']}")


def for_worker(sigs: list[BuilderSignature], params: dict[str, Any]) -> dict[str, Any]:
    """A run's parameters as the tilelang-ascend worker takes them (JSON): `-p tiling.block_q=64`
    stays dotted, with the class each head takes and its line under `lowering.NESTED_KEY`, for
    the worker's `nest_fields` (it cannot read the file's syntax the way check_params did)."""
    nested: dict[str, list[Any]] = {}
    for head in sorted({k.partition(".")[0] for k in params if "." in k}):
        s = next((s for s in sigs if head in s.nested), None)
        if s is not None:
            nested[head] = [s.nested[head].cls, s.nested[head].line]
    return {**params, NESTED_KEY: nested} if nested else params
