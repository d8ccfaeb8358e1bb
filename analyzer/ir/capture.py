"""Build a TileLang kernel from a file, lower it for Ascend and record every IR stage.

`capture_ir(kernel_ref, params, chip)` and `write_ir_dir(capture, dir)` are the API that
`tilescope lint` and `tilescope collect` share. TileLang is imported inside functions only: the rest
of tilescope works without it.

kernel_ref: `path/to/kernel.py`, `path/to/kernel.py:builder` or `path/to/kernel.py:f1,f2,f3`. A
builder may return one PrimFunc, a tuple/list of them or a dict name -> PrimFunc (an unfused chain
of kernels); a `@tilelang.jit` kernel is built with `get_tir(**params)`.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import inspect
import json
import logging
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from tilescope.chips import ChipSpec
from tilescope.errors import MissingComponentError, UsageError
from tilescope.ir.dialect import detect as detect_dialect
from tilescope.ir.lowering import (
    CAPACITY_RE,
    STAGE_PASSES,
    KernelCapture,
    captured_fd2,
    classify_failure,
    flatten_primfuncs,
    stage_file,
    stage_recorder,
)

__all__ = ["CAPACITY_RE", "STAGE_PASSES", "KernelCapture", "capture_ir", "classify_failure", "write_ir_dir"]

from tilescope.ir.scopes import TILELANG_ASCEND

INSTALL_HINT = "install the tilelang extra: pip install torch==2.13.0 && pip install 'tilescope[tilelang]'"


@dataclass
class IRCapture:
    kernel_file: Path
    function: str
    params: dict[str, Any]
    chip: ChipSpec
    kernels: list[KernelCapture]
    ir: dict[str, Any]  # the ir.json document
    tilelang_version: str
    sha256: str
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(k.failure is None for k in self.kernels)


def import_tilelang() -> ModuleType:
    """Import tilelang hermetically (no shared kernel cache), or raise MissingComponentError (exit 3)."""
    os.environ.setdefault("TILELANG_DISABLE_CACHE", "1")
    os.environ.setdefault(
        "TILELANG_CACHE_DIR", os.path.join(tempfile.gettempdir(), f"tilescope-tl-{os.getpid()}")
    )
    try:
        with contextlib.redirect_stdout(sys.stderr):
            import tilelang
    except Exception as exc:  # ImportError, or torch missing underneath
        raise MissingComponentError(
            f"TileLang is not importable ({type(exc).__name__}: {exc}); {INSTALL_HINT}"
        ) from exc
    # tilelang logs INFO lines; machine formats on stdout must stay clean.
    for name in ("tilelang", "TileLang"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return tilelang


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


def _load_module(path: Path, tree: ast.Module) -> ModuleType:
    """The kernel file's declarative part, as published (tilescope.ir.published): never its
    module-level NPU, argparse or test code."""
    from tilescope.ir.published import PublishedFileError, load_module

    try:
        return load_module(path, tree)
    except PublishedFileError as exc:
        raise UsageError(str(exc)) from exc


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


def _accepted(fn: Any, params: dict[str, Any]) -> dict[str, Any]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return dict(params)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return dict(params)
    return {k: v for k, v in params.items() if k in sig.parameters}


def build_primfuncs(mod: ModuleType, names: list[str], params: dict[str, Any]) -> list[tuple[str, Any]]:
    """Call each builder / jit kernel with the parameters it accepts; unknown parameters are an error."""
    from tvm import tirx

    built: list[tuple[str, Any]] = []
    used: set[str] = set()
    for name in names:
        obj = getattr(mod, name, None)
        if obj is None:
            raise UsageError(f"{name!r} is not defined in {mod.__file__}")
        if isinstance(obj, tirx.PrimFunc):
            built.append((name, obj))
            continue
        if autotuned(obj):
            # @autotune over @tilelang.jit: calling it runs the autotuner (compiles and benchmarks
            # every config on the device). Lint builds the jit kernel itself, with the config the
            # author names (defaults and -p values); `--sweep autotune` builds each config.
            obj = obj.jit_impl
        if hasattr(obj, "get_tir"):  # eager @tilelang.jit kernel: shapes bound by get_tir
            # Every parameter goes to get_tir: besides the signature's arguments it binds the
            # kernel's T.const shape symbols (M, N, K), which no signature lists.
            kw = dict(params)
            used.update(kw)
            with contextlib.redirect_stdout(sys.stderr):
                built.extend(flatten_primfuncs(name, obj.get_tir(**kw), tirx.PrimFunc, UsageError))
            continue
        if not callable(obj):
            raise UsageError(f"{name!r} is neither a builder function nor a @tilelang.jit kernel")
        kw = _accepted(obj, params)
        used.update(kw)
        with contextlib.redirect_stdout(sys.stderr):
            built.extend(flatten_primfuncs(name, obj(**kw), tirx.PrimFunc, UsageError))
    unknown = sorted(set(params) - used)
    if unknown:
        accepted = sorted({p for n in names for p in _param_names(getattr(mod, n, None))})
        raise UsageError(
            f"unknown --param {', '.join(unknown)}; {', '.join(names)} accept: {', '.join(accepted)}"
        )
    return built


def autotuned(obj: Any) -> bool:
    """An `@autotune(configs=...)` kernel (tilelang.autotuner.AutoTuneImpl around a JITImpl)."""
    return hasattr(obj, "jit_impl") and hasattr(obj, "configs") and hasattr(obj, "get_tunner")


# A config key the autotuner gives the PassContext, not the kernel (tilelang.autotuner.tuner).
_RESERVED_CONFIG_KEYS = frozenset({"pass_configs"})


def autotune_configs(kernel_ref: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The `configs` of an `@autotune` kernel, read from the decorator object without running the
    autotuner (importing the file's declarative part only wraps the function). A `configs` callable
    is the author's generator: called as the autotuner calls it, with the kernel's arguments."""
    path, names, tree = resolve_kernel(kernel_ref)
    sigs = builder_signatures(tree, names)
    where = f"{path}:{sigs[0].line}" if sigs else str(path)
    if len(names) != 1:
        raise UsageError(f"{path}: --sweep autotune takes one kernel, not {', '.join(names)}")
    import_tilelang()
    mod = _load_module(path, tree)
    obj = getattr(mod, names[0], None)
    if obj is None or not autotuned(obj):
        raise UsageError(
            f"{where}: --sweep autotune: {names[0]} has no @autotune(configs=...) decorator; "
            "expected an @autotune kernel, or NAME=V1,V2,..."
        )
    configs = obj.configs
    if callable(configs):
        args = {k: v for k, v in sigs[0].params.items() if v is not REQUIRED and v is not _UNKNOWN_DEFAULT}
        args.update(with_file_params(tree, sigs, params))
        try:
            with contextlib.redirect_stdout(sys.stderr):
                configs = configs(**_accepted(configs, args))
        except Exception as exc:
            raise UsageError(
                f"{where}: --sweep autotune: {names[0]}'s configs generator raised "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            ) from None
    configs = list(configs) if isinstance(configs, (list, tuple)) or inspect.isgenerator(configs) else configs
    if not isinstance(configs, list) or not configs or not all(isinstance(c, dict) for c in configs):
        raise UsageError(
            f"{where}: --sweep autotune: {names[0]}'s configs is {type(configs).__name__}; "
            "expected a non-empty list of dicts (NAME -> value)"
        )
    return [{k: v for k, v in c.items() if k not in _RESERVED_CONFIG_KEYS} for c in configs]


def _param_names(fn: Any) -> list[str]:
    try:
        return list(inspect.signature(getattr(fn, "func", fn)).parameters)
    except (TypeError, ValueError):
        return []


def _lower(func: Any, kc: KernelCapture) -> Any:
    import tilelang
    import tvm
    from tvm.target import Target

    keep = stage_recorder(kc, STAGE_PASSES, "auto_schedule")
    t0 = time.perf_counter()
    try:
        with (
            captured_fd2(),
            contextlib.redirect_stdout(sys.stderr),
            tvm.transform.PassContext(instruments=[keep]),
            Target("ascend"),
        ):
            art = tilelang.lower(func, target="ascend")
    except Exception as exc:  # InternalError (capacity), AssertionError, ValueError from tile ops
        kc.failure = classify_failure(exc, "lower", keep.last)
        return None
    finally:
        kc.lower_seconds = time.perf_counter() - t0
    return art


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
_UNKNOWN_DEFAULT = object()  # a default that is not a literal: its type is not checked


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
        return _UNKNOWN_DEFAULT if "default_factory" in kw else REQUIRED
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
        return _UNKNOWN_DEFAULT


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
    from tilescope.ir.lowering import nest_fields

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
    from tilescope.ir.published import file_call_params

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


def capture_ir(kernel_ref: str, params: dict[str, Any], chip: ChipSpec) -> IRCapture:
    """Build, lower and record one kernel file's PrimFunc(s); lowering failures are recorded, not raised."""
    from tilescope.ir.model import assemble_ir_json
    from tilescope.ir.walk import lowered_allocations, walk_primfunc

    path, names, tree = resolve_kernel(kernel_ref)
    sigs = builder_signatures(tree, names)
    params = with_file_params(tree, sigs, params)
    check_params(path, sigs, {k: [v] for k, v in params.items()}, dict.fromkeys(params, "--param"))
    source_dialect = detect_dialect(tree)
    if source_dialect.dialect == TILELANG_ASCEND:
        return _capture_tilelang_ascend(path, names, tree, [params], chip)[0]
    tilelang = import_tilelang()
    source = path.read_text(encoding="utf-8")
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    mod = _load_module(path, tree)
    kernels: list[KernelCapture] = []
    try:
        built = build_primfuncs(mod, names, nest_params(mod, path, sigs, params))
    except UsageError:
        raise
    except Exception as exc:  # the builder itself raised (e.g. a T.gemm shape assertion)
        kc = KernelCapture(name=names[0], label=",".join(names))
        kc.failure = classify_failure(exc, "build", None, kernel_file=str(path))
        raise_usage(path, names, sigs, kc.failure)
        built = []
        kernels.append(kc)
    timings["build_s"] = time.perf_counter() - t0
    lower_s = walk_s = 0.0
    for label, func in built:
        name = str(func.attrs["global_symbol"]) if func.attrs and "global_symbol" in func.attrs else label
        kc = KernelCapture(name=name, label=label)
        kc.stages["tvmscript"] = func.script()
        t1 = time.perf_counter()
        kc.walked = walk_primfunc(func)
        walk_s += time.perf_counter() - t1
        art = _lower(func, kc)
        lower_s += kc.lower_seconds
        if art is not None:
            kc.stages["final"] = art.device_mod.script()
            kc.stages["ascendc"] = art.kernel_source
            kc.lowered_allocations = lowered_allocations(art.device_mod, kc.walked["dialect"])
        kernels.append(kc)
    timings["lower_s"] = lower_s
    t2 = time.perf_counter()
    sha = hashlib.sha256(source.encode("utf-8")).hexdigest()
    version = str(getattr(tilelang, "__version__", "unknown"))
    ir = assemble_ir_json(path, ",".join(names), params, chip, kernels, tree, version, sha)
    timings["analyse_s"] = time.perf_counter() - t2 + walk_s
    ir["timings"] = {k: round(v, 4) for k, v in timings.items()}
    return IRCapture(
        kernel_file=path,
        function=",".join(names),
        params=dict(params),
        chip=chip,
        kernels=kernels,
        ir=ir,
        tilelang_version=version,
        sha256=sha,
        timings=timings,
    )


def capture_many(
    kernel_ref: str, runs: list[dict[str, Any]], chip: ChipSpec, answer: dict[str, Any] | None = None
) -> list[IRCapture]:
    """capture_ir for several parameter sets of one tilelang-ascend kernel, in one worker (or from
    `answer`, that worker's answer for this file when a batch lowered several: foreign.run_jobs)."""
    path, names, tree = resolve_kernel(kernel_ref)
    sigs = builder_signatures(tree, names)
    merged = [with_file_params(tree, sigs, p) for p in runs]
    for p in merged:
        check_params(path, sigs, {k: [v] for k, v in p.items()}, dict.fromkeys(p, "--param"))
    return _capture_tilelang_ascend(path, names, tree, merged, chip, answer)


def for_worker(sigs: list[BuilderSignature], params: dict[str, Any]) -> dict[str, Any]:
    """A run's parameters as the tilelang-ascend worker takes them (JSON): `-p tiling.block_q=64`
    stays dotted, with the class each head takes and its line under `lowering.NESTED_KEY`, for
    the worker's `nest_fields` (it cannot read the file's syntax the way check_params did)."""
    from tilescope.ir.lowering import NESTED_KEY

    nested: dict[str, list[Any]] = {}
    for head in sorted({k.partition(".")[0] for k in params if "." in k}):
        s = next((s for s in sigs if head in s.nested), None)
        if s is not None:
            nested[head] = [s.nested[head].cls, s.nested[head].line]
    return {**params, NESTED_KEY: nested} if nested else params


def worker_runs(kernel_ref: str, params: dict[str, Any]) -> tuple[Path, list[str], list[dict[str, Any]]]:
    """(path, builders, [parameters with the file's own defaults]) as a worker job for run_jobs."""
    path, names, tree = resolve_kernel(kernel_ref)
    sigs = builder_signatures(tree, names)
    return path, names, [for_worker(sigs, with_file_params(tree, sigs, params))]


def _capture_tilelang_ascend(
    path: Path,
    names: list[str],
    tree: ast.Module,
    runs: list[dict[str, Any]],
    chip: ChipSpec,
    answer: dict[str, Any] | None = None,
) -> list[IRCapture]:
    """Lower with tilelang-ascend in its own interpreter (tilescope.ir.foreign): one worker for
    every parameter set, since importing tilelang there costs ~17 s under emulation."""
    from tilescope.ir.ascend_worker import STAGE_PASSES as ASCEND_STAGES
    from tilescope.ir.foreign import require_interpreter, run_worker
    from tilescope.ir.model import assemble_ir_json

    why = f"{path} is written for {detect_dialect(tree).describe()}"
    interp = require_interpreter(why)
    t0 = time.perf_counter()
    if answer is None:
        sigs = builder_signatures(tree, names)
        answer = run_worker(interp, path, names, [for_worker(sigs, p) for p in runs],
                            debug=bool(os.environ.get("TILESCOPE_DEBUG")))
    elif "usage_error" in answer:  # a batch's answer for this file (run_jobs)
        raise UsageError(str(answer["usage_error"]))
    elapsed = time.perf_counter() - t0
    source = path.read_text(encoding="utf-8")
    sha = hashlib.sha256(source.encode("utf-8")).hexdigest()
    version = f"tilelang-ascend {answer.get('tilelang_version', 'unknown')}"
    out = []
    for params, run in zip(runs, answer["runs"], strict=True):
        if "usage_error" in run:
            raise UsageError(f"{path}: {run['usage_error']}")
        if "internal_error" in run:
            raise RuntimeError(f"tilelang-ascend worker: {run['internal_error']}\n{run.get('traceback', '')}")
        kernels = [KernelCapture.from_json(k) for k in run["kernels"]]
        for k in kernels:
            raise_usage(path, names, builder_signatures(tree, names), k.failure)
        t2 = time.perf_counter()
        ir = assemble_ir_json(path, ",".join(names), params, chip, kernels, tree, version, sha, ASCEND_STAGES)
        timings = {
            "build_s": float(run.get("build_s", 0.0)),
            "lower_s": sum(k.lower_seconds for k in kernels),
            "worker_s": elapsed,
            "analyse_s": time.perf_counter() - t2,
        }
        ir["timings"] = {k: round(v, 4) for k, v in timings.items()}
        ir["lowering"] = {
            "stack": version,
            "interpreter": interp.kind,
            "platform": os.environ.get("TL_PLATFORM", "A3"),
        }
        out.append(IRCapture(path, ",".join(names), dict(params), chip, kernels, ir, version, sha, timings))
    return out




def write_ir_dir(capture: IRCapture, directory: str | Path) -> Path:
    """Write ir.json and the stage texts (tvmscript.py, <stage>.py, kernel.cpp) into `directory`."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    several = len(capture.kernels) > 1
    for kc in capture.kernels:
        for stage, text in kc.stages.items():
            target = d / stage_file(kc.name, stage, several)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    (d / "ir.json").write_text(
        json.dumps(capture.ir, indent=1, sort_keys=False, default=str) + "\n", encoding="utf-8"
    )
    return d
