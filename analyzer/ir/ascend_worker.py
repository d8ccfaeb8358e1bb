"""Lower tilelang-ascend (A2/A3, 910B) kernels inside tilelang-ascend's own interpreter.

tilelang-ascend 0.1.4 installs under the import name `tilelang`, like tilelang 0.1.15, and ships
for aarch64 only, so it runs in an interpreter of its own (a venv on an aarch64 host, an emulated
arm64 root on x86_64 — see analyzer/ir/foreign.py). tilescope starts this module there as
`python -m tilescope.ir.ascend_worker`, writes one JSON request on stdin

    {"path": "k.py", "names": ["matmul"], "runs": [{"M": 1024, ...}, ...]}

and reads one JSON answer on stdout: `{"tilelang_version", "runs": [{"kernels": [KernelCapture
...]} | {"usage_error": "..."}]}`; every run lowers in the same process (the import of tilelang
costs ~17 s under emulation, a lowering under 1 s). Anything the kernel prints goes to stderr.

Standard library, tilelang-ascend and tilescope.ir.{ascendc,lowering,published,scopes,walk} only.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from tilescope.ir.ascendc import ascendc_placements
from tilescope.ir.lowering import (
    NESTED_KEY,
    KernelCapture,
    captured_fd2,
    classify_failure,
    flatten_primfuncs,
    nest_fields,
    stage_recorder,
)
from tilescope.ir.published import PublishedFileError, load_module
from tilescope.ir.scopes import PIPE_OF_DIRECTION, TILELANG_ASCEND, hardware_for
from tilescope.ir.walk import lowered_allocations, walk_primfunc

# tilelang-ascend's passes after which the IR is recorded (stage -> pass name; OptimizeForTarget in
# tilelang/engine/phase.py). Its software pipeline decides the buffer versions, its memory planning
# the addresses: the two stages a reader of a capacity or pipelining finding wants to see.
STAGE_PASSES = {
    "layout_inference": "tl.LayoutInference",
    "auto_schedule": "tl.PipelinePlanning",
    "multi_buffer": "tl.InjectSoftwarePipeline",
}


class UsageProblem(Exception):
    """The user's to fix (a missing parameter, a name that is no builder), not the kernel's."""


def _builder(mod: Any, name: str) -> tuple[Any, dict[str, Any], Any]:
    """(the undecorated builder, its jit pass configs, the jit implementation or None)."""
    obj = getattr(mod, name, None)
    if obj is None:
        raise UsageProblem(f"{name!r} is not defined in {mod.__file__}")
    impl = getattr(obj, "__jit_impl__", None)
    if impl is not None:  # @tilelang.jit: calling it would compile with bisheng and build an adapter
        return impl.func, dict(impl.pass_configs or {}), impl
    if not callable(obj):
        raise UsageProblem(f"{name!r} is neither a builder function nor a @tilelang.jit kernel")
    return inspect.unwrap(obj), {}, None


def nested_params(mod: Any, fn: Any, params: dict[str, Any], classes: dict[str, list[Any]]) -> dict[str, Any]:
    """`-p tiling.block_q=64` as a dataclass built here (`lowering.nest_fields`, the 950 path's)."""
    if not any("." in k for k in params):
        return params

    def default_of(head: str) -> Any:
        try:
            p = inspect.signature(fn).parameters.get(head)
        except (TypeError, ValueError):
            return None
        return None if p is None or p.default is p.empty else p.default

    def class_of(head: str) -> Any:
        if head not in classes:
            raise UsageProblem(f"--param {head}.FIELD: {head} takes no dataclass of the file")
        return getattr(mod, str(classes[head][0]))

    def fail(head: str, values: dict[str, Any], exc: Exception) -> Exception:
        cls, line = classes.get(head, ["?", 0])
        fields = ", ".join(f"{head}.{k}={v!r}" for k, v in values.items())
        return UsageProblem(f"line {line}: {cls} with {fields}: {exc}; "
                            f"expected every field without a default given as -p {head}.FIELD=VALUE")

    return nest_fields(params, default_of, class_of, fail)


def _call(fn: Any, params: dict[str, Any]) -> Any:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn(**params)
    if not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        unknown = sorted(set(params) - set(sig.parameters))
        if unknown:
            raise UsageProblem(f"unknown --param {', '.join(unknown)}; accepted: {', '.join(sig.parameters)}")
    missing = [
        p.name
        for p in sig.parameters.values()
        if p.default is p.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and p.name not in params
    ]
    if missing:
        raise UsageProblem(
            f"{fn.__name__}() has no default for {', '.join(missing)}; give "
            + " ".join(f"-p {m}=VALUE" for m in missing)
        )
    return fn(**params)


# tilelang-ascend infers where `T.alloc_shared` / `T.alloc_fragment` buffers live (UB in a vector
# kernel, L1 beside a GEMM) in this pass: the un-lowered IR's scope is a placeholder there.
SCOPE_PASS = "tl.InferAllocScope"


def _scopes(mod: Any) -> dict[str, str]:
    """Buffer name -> storage scope of every block allocation in a module."""
    # deferred: tilelang-ascend and its tvm exist only in that stack's interpreter (17 s to import
    #   under emulation)
    import tvm

    found: dict[str, str] = {}

    def grab(n: Any) -> None:
        if isinstance(n, tvm.tir.Block):
            for b in n.alloc_buffers:
                found[str(b.name)] = str(b.scope())

    for _, f in mod.functions_items():
        if isinstance(f, tvm.tir.PrimFunc):
            tvm.tir.stmt_functor.post_order_visit(f.body, grab)
    return found


def _apply_scopes(kc: KernelCapture, scopes: dict[str, str]) -> None:
    """The walked allocations take the scopes tilelang-ascend inferred (names are kept)."""
    moved: dict[str, str] = {}
    for a in kc.walked.get("allocations", []):
        scope = scopes.get(a["name"])
        if scope and scope != a["scope"]:
            a["declared_scope"] = a["scope"]
            a["scope"] = scope
            a["hardware"] = moved[a["name"]] = hardware_for(scope, TILELANG_ASCEND)
    for c in kc.walked.get("copies", []):  # their levels and pipe follow the buffers'
        c["src_level"] = moved.get(c["src"], c["src_level"])
        c["dst_level"] = moved.get(c["dst"], c["dst_level"])
        c["pipe"] = PIPE_OF_DIRECTION.get((c["src_level"], c["dst_level"]))
    for g in kc.walked.get("gemms", []):
        for side in ("a", "b", "c"):
            g[f"{side}_level"] = moved.get(g.get(side, ""), g.get(f"{side}_level"))


def _lower(func: Any, kc: KernelCapture, pass_configs: dict[str, Any], impl: Any) -> Any:
    # deferred: tilelang-ascend and its tvm exist only in that stack's interpreter (17 s to import
    #   under emulation)
    import tilelang
    import tvm

    def on_pass(name: str, mod: Any) -> None:
        if name == SCOPE_PASS:
            _apply_scopes(kc, _scopes(mod))

    keep = stage_recorder(kc, STAGE_PASSES, "multi_buffer", on_pass)
    t0 = time.perf_counter()
    try:
        with (
            captured_fd2(),
            contextlib.redirect_stdout(sys.stderr),
            tvm.transform.PassContext(opt_level=3, config=pass_configs, instruments=[keep]),
        ):
            art = tilelang.lower(
                func,
                target=getattr(impl, "target", None) or "auto",
                platform=getattr(impl, "platform", None) or "auto",
            )
    except Exception as exc:
        kc.failure = classify_failure(exc, "lower", keep.last, TILELANG_ASCEND)
        return None
    finally:
        kc.lower_seconds = time.perf_counter() - t0
        if os.environ.get("TILESCOPE_WORKER_PASSES"):
            print("passes: " + " ".join(keep.passes), file=sys.stderr)
    return art


def _param_names(func: Any, idx: Any) -> list[str]:
    """The names of the PrimFunc parameters at `idx` (an int or a list, negative from the end, as
    tilelang-ascend's adapter legalizes them), buffer names where a parameter is a buffer."""
    if idx is None:
        return []
    wanted = [idx] if isinstance(idx, int) else list(idx)
    params = list(func.params)
    names = []
    for i in wanted:
        if -len(params) <= int(i) < len(params):
            var = params[int(i)]
            buf = func.buffer_map.get(var)
            names.append(str(buf.name if buf is not None else var.name))
    return names


def _workspaces(func: Any, impl: Any) -> list[str]:
    """The GM parameters `@tilelang.jit(workspace_idx=...)` declares as workspaces: tilelang-ascend
    passes Cube results to the Vector cores through them (A2/A3 have no L0C -> UB path)."""
    return _param_names(func, getattr(impl, "workspace_idx", None))


def _outputs(func: Any, impl: Any) -> list[str]:
    """The GM parameters `@tilelang.jit(out_idx=...)` makes outputs: the compiled kernel allocates
    and returns them, so `tilescope collect` must not pass them
    (tilescope.collectors.spec.derived_declaration)."""
    return _param_names(func, getattr(impl, "out_idx", None))


def _run(mod: Any, names: list[str], params: dict[str, Any]) -> list[KernelCapture]:
    # deferred: tilelang-ascend and its tvm exist only in that stack's interpreter (17 s to import
    #   under emulation)
    import tvm

    prim_func = tvm.tir.PrimFunc
    built: list[tuple[str, Any, dict[str, Any], Any]] = []
    classes: dict[str, list[Any]] = dict(params.pop(NESTED_KEY, None) or {})
    for name in names:
        fn, configs, impl = _builder(mod, name)
        try:
            call_params = nested_params(mod, fn, params, classes)
            with contextlib.redirect_stdout(sys.stderr):
                result = _call(fn, call_params)
        except UsageProblem:
            raise
        except Exception as exc:  # the builder itself raised (a T.gemm_v0 shape assertion, ...)
            kc = KernelCapture(name=name, label=name)
            kc.failure = classify_failure(exc, "build", None, TILELANG_ASCEND)
            return [kc]
        built.extend(
            (label, f, configs, impl) for label, f in flatten_primfuncs(name, result, prim_func, UsageProblem)
        )
    kernels = []
    for label, func, configs, impl in built:
        attrs = func.attrs
        name = str(attrs["global_symbol"]) if attrs is not None and "global_symbol" in attrs else label
        kc = KernelCapture(name=name, label=label)
        kc.stages["tvmscript"] = func.script()
        kc.walked = walk_primfunc(func, TILELANG_ASCEND)
        kc.walked["workspaces"] = _workspaces(func, impl)
        kc.walked["outputs"] = _outputs(func, impl)
        art = _lower(func, kc, configs, impl)
        if art is not None:
            kc.stages["final"] = art.device_mod.script()
            kc.stages["ascendc"] = art.kernel_source
            # the planned placements: buffers with disjoint lifetimes share offsets (an FA's S and O
            # accumulators both at L0C offset 0), so the sum of the allocations overstates them
            kc.lowered_allocations = ascendc_placements(art.kernel_source) or lowered_allocations(
                art.device_mod, TILELANG_ASCEND
            )
        kernels.append(kc)
    return kernels


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """Lower every run of the request with the tilelang imported here (tilelang-ascend)."""
    os.environ.setdefault("TILELANG_DISABLE_CACHE", "1")
    with contextlib.redirect_stdout(sys.stderr):
        # deferred: tilelang-ascend and its tvm exist only in that stack's interpreter (17 s to import
        #   under emulation)
        import tilelang

    result: dict[str, Any] = {
        "tilelang_version": str(getattr(tilelang, "__version__", "unknown")),
        "runs": [],
    }
    path = Path(request["path"])
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        mod = load_module(path, tree)
    except (PublishedFileError, SyntaxError, OSError) as exc:
        result["usage_error"] = str(exc)
        return result
    for params in request["runs"]:
        t0 = time.perf_counter()
        try:
            kernels = _run(mod, list(request["names"]), dict(params))
            result["runs"].append(
                {"kernels": [k.to_json() for k in kernels], "build_s": time.perf_counter() - t0}
            )
        except UsageProblem as exc:
            result["runs"].append({"usage_error": str(exc)})
        except Exception as exc:  # a bug of ours or of the stack: the whole story, for --debug
            result["runs"].append(
                {"internal_error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
            )
    return result


def main() -> int:
    request = json.loads(sys.stdin.read())
    out = sys.stdout
    sys.stdout = sys.stderr  # the kernel's prints must not corrupt the answer
    # {"jobs": [request, ...]}: several kernel files for one import of tilelang (tests, batches)
    result = {"jobs": [answer(j) for j in request["jobs"]]} if "jobs" in request else answer(request)
    out.write(json.dumps(result, default=str))
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
