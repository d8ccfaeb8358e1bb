"""Build a TileLang kernel from a file, lower it for Ascend and record every IR stage.

`capture_ir(kernel_ref, params, chip)` and `write_ir_dir(capture, dir)` are the API that
`tilescope lint` and `tilescope collect` share. TileLang is imported inside functions only: the rest
of tilescope works without it.

kernel_ref: `path/to/kernel.py`, `path/to/kernel.py:builder` or `path/to/kernel.py:f1,f2,f3`. A
builder may return one PrimFunc, a tuple/list of them or a dict name -> PrimFunc (an unfused chain
of kernels); a `@tilelang.jit` kernel is built with `get_tir(**params)`. tilescope.ir.params
resolves the reference and checks the parameters against the builders before anything is built.
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
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from tilescope.chips import ChipSpec
from tilescope.errors import MissingComponentError, UsageError
from tilescope.ir.ascend_worker import STAGE_PASSES as ASCEND_STAGES
from tilescope.ir.deadline import LOWER_TIMEOUT_S, LoweringTimeout, deadline, timeout_error
from tilescope.ir.dialect import detect as detect_dialect
from tilescope.ir.foreign import require_interpreter, run_worker
from tilescope.ir.lowering import (
    STAGE_PASSES,
    KernelCapture,
    captured_fd2,
    classify_failure,
    flatten_primfuncs,
    stage_file,
    stage_recorder,
)
from tilescope.ir.model import assemble_ir_json
from tilescope.ir.params import (
    REQUIRED,
    UNKNOWN_DEFAULT,
    autotuned,
    builder_signatures,
    check_params,
    for_worker,
    nest_params,
    raise_usage,
    resolve_kernel,
    with_file_params,
)
from tilescope.ir.published import PublishedFileError, load_module
from tilescope.ir.scopes import TILELANG_ASCEND
from tilescope.ir.walk import lowered_allocations, walk_primfunc
from tilescope.scratch import process_dir

__all__ = [
    "IRCapture",
    "autotune_configs",
    "build_primfuncs",
    "capture_ir",
    "capture_many",
    "import_tilelang",
    "worker_runs",
    "write_ir_dir",
]

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
    if "TILELANG_CACHE_DIR" not in os.environ:
        # TileLang makes its cache's folders on import even with the cache off: a folder of this
        # process's own, removed when it exits (every lint left /tmp/tilescope-tl-<pid> behind).
        # Sweep workers and their fork server inherit it through the environment.
        os.environ["TILELANG_CACHE_DIR"] = str(process_dir("tilescope-tl-"))
    try:
        with contextlib.redirect_stdout(sys.stderr):
            # deferred: tilelang/tvm are the optional `tilelang` extra (and seconds to import)
            import tilelang
    except Exception as exc:  # ImportError, or torch missing underneath
        raise MissingComponentError(
            f"TileLang is not importable ({type(exc).__name__}: {exc}); {INSTALL_HINT}"
        ) from exc
    # tilelang logs INFO lines; machine formats on stdout must stay clean.
    for name in ("tilelang", "TileLang"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return tilelang


def _load_module(path: Path, tree: ast.Module) -> ModuleType:
    """The kernel file's declarative part, as published (tilescope.ir.published): never its
    module-level NPU, argparse or test code."""
    try:
        return load_module(path, tree)
    except PublishedFileError as exc:
        raise UsageError(str(exc)) from exc


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
    # deferred: tilelang/tvm are the optional `tilelang` extra (and seconds to import)
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
        args = {k: v for k, v in sigs[0].params.items() if v is not REQUIRED and v is not UNKNOWN_DEFAULT}
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
    # deferred: tilelang/tvm are the optional `tilelang` extra (and seconds to import)
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


def capture_ir(
    kernel_ref: str, params: dict[str, Any], chip: ChipSpec, timeout_s: float | None = LOWER_TIMEOUT_S
) -> IRCapture:
    """Build, lower and record one kernel file's PrimFunc(s); lowering failures are recorded, not
    raised. The kernel's module and builder run here (they are the user's code): past `timeout_s`
    seconds they are stopped, UsageError (tilescope.ir.deadline)."""
    path, names, tree = resolve_kernel(kernel_ref)
    sigs = builder_signatures(tree, names)
    params = with_file_params(tree, sigs, params)
    check_params(path, sigs, {k: [v] for k, v in params.items()}, dict.fromkeys(params, "--param"))
    source_dialect = detect_dialect(tree)
    if source_dialect.dialect == TILELANG_ASCEND:
        return _capture_tilelang_ascend(path, names, tree, [params], chip, timeout_s=timeout_s)[0]
    tilelang = import_tilelang()
    try:
        with deadline(timeout_s):
            return _capture_here(tilelang, path, names, tree, sigs, params, chip)
    except LoweringTimeout:
        assert timeout_s is not None
        raise timeout_error(path, timeout_s) from None


def _capture_here(
    tilelang: ModuleType, path: Path, names: list[str], tree: ast.Module, sigs: Any, params: dict[str, Any],
    chip: ChipSpec,
) -> IRCapture:
    """capture_ir with the tilelang of this interpreter."""
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
    kernel_ref: str, runs: list[dict[str, Any]], chip: ChipSpec, answer: dict[str, Any] | None = None,
    timeout_s: float | None = LOWER_TIMEOUT_S,
) -> list[IRCapture]:
    """capture_ir for several parameter sets of one tilelang-ascend kernel, in one worker (or from
    `answer`, that worker's answer for this file when a batch lowered several: foreign.run_jobs)."""
    path, names, tree = resolve_kernel(kernel_ref)
    sigs = builder_signatures(tree, names)
    merged = [with_file_params(tree, sigs, p) for p in runs]
    for p in merged:
        check_params(path, sigs, {k: [v] for k, v in p.items()}, dict.fromkeys(p, "--param"))
    return _capture_tilelang_ascend(path, names, tree, merged, chip, answer, timeout_s)


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
    timeout_s: float | None = LOWER_TIMEOUT_S,
) -> list[IRCapture]:
    """Lower with tilelang-ascend in its own interpreter (tilescope.ir.foreign): one worker for
    every parameter set, since importing tilelang there costs ~17 s under emulation."""
    why = f"{path} is written for {detect_dialect(tree).describe()}"
    interp = require_interpreter(why)
    t0 = time.perf_counter()
    if answer is None:
        sigs = builder_signatures(tree, names)
        answer = run_worker(interp, path, names, [for_worker(sigs, p) for p in runs],
                            debug=bool(os.environ.get("TILESCOPE_DEBUG")), timeout_s=timeout_s)
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
