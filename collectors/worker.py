"""The child process that builds, checks and runs one kernel: `tilescope.collectors.worker JOB.json`
(started through tilescope.run_module).

Every device action of `tilescope collect` happens here, in a fresh process, because
- torch_npu's profiler takes one aic-metrics group per run and keeps global state between runs;
- a crashing kernel, a hung device or a C-compiler failure must not take the collector (and its
  atomic bundle) down with it, and the parent can kill the whole process group on timeout/Ctrl-C;
- under `msprof op --application=...` the profiled program must be its own executable.

Job (JSON): kernel, function, params (only the --param values; defaults come from the factory),
device ("cpu" | "npu"), mode ("check" | "profile" | "launch"), warmup, repeat, profiler (the plain
config of torch_npu_backend.build_profiler_config, mode "profile"), result (path of the JSON answer);
for a tilelang-ascend kernel also dialect ("tilelang-ascend") and spec (the TILESCOPE_SPEC entry
derived from its signature, used when the file declares none: tilescope.collectors.spec.derived_declaration).
A tilelang-ascend job runs in tilelang-ascend's interpreter (tilescope.ir.foreign), which has its own
`tilelang`: this module imports nothing of tilelang or torch at module level.
"""

from __future__ import annotations

import ast
import json
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

from tilescope.collectors import spec as specmod
from tilescope.collectors.bundle import dist_version, jsonable
from tilescope.errors import UsageError
from tilescope.ir.scopes import TILELANG_ASCEND


def build_prim_func(kernel: Path, function: str | None, params: dict[str, Any]) -> tuple[Any, Any, str,
                                                                                       dict[str, Any]]:
    """Load the kernel file and build its PrimFunc: (PrimFunc, KernelSpec|None, function, params).

    Building goes through tilescope.ir.capture.build_primfuncs, the code `tilescope lint` uses, so a
    builder, a `@tilelang.jit` kernel or a bare PrimFunc means the same thing to both commands.
    """
    # deferred: the tilelang 0.1.15 path only: a tilelang-ascend job's interpreter never loads ir.capture
    from tilescope.ir.capture import build_primfuncs, import_tilelang

    import_tilelang()
    ref = specmod.KernelRef(path=kernel, function=function)
    module = specmod.load_module(kernel)
    name = specmod.resolve_function_name(ref, module)
    built = build_primfuncs(module, [name], params)
    if len(built) != 1:
        raise UsageError(f"{name} builds {len(built)} kernels; collect profiles one at a time")
    factory = getattr(module, name)
    merged = specmod.resolve_params(getattr(factory, "func", factory), params)
    return built[0][1], specmod.find_spec(module, name, kernel), name, merged


def compile_kernel(func: Any, out_idx: list[int], device: str, compile_flags: list[str] | None = None) -> Any:
    """The compiled kernel; `compile_flags` (the simulator job's ["-g"]) go to bisheng after TileLang
    0.1.15's own options, its -O2 among them (`compile_flags` of tilelang.compile: the cython
    adapter's LibraryGenerator and the tvm_ffi path's tl.device_compile_flags both take them)."""
    # deferred: tilelang/tvm are the optional `tilelang` extra; this worker runs under other interpreters
    import tilelang
    from tvm.target import Target

    if device == "cpu":
        # The only CPU path of tilelang 0.1.15 (tilelang-notes §2): C codegen + cython wrapper.
        with Target("c"):
            return tilelang.compile(func, out_idx=out_idx, target="c", target_host="c",
                                    execution_backend="cython")
    # deferred: torch_npu exists only in the NPU stack's interpreter, and a CPU check needs none
    import torch_npu  # noqa: F401  (registers the "npu" device with torch)

    with Target("ascend"):
        if compile_flags:
            return tilelang.compile(func, out_idx=out_idx, target="ascend", compile_flags=list(compile_flags))
        return tilelang.compile(func, out_idx=out_idx, target="ascend")


def _sync(device: str) -> None:
    if device == "npu":
        # deferred: torch (~2 s) is imported on a device only: this worker runs under other interpreters
        import torch

        torch.npu.synchronize()  # added by torch_npu


def check(kernel_fn: Any, func: Any, spec: specmod.KernelSpec, params: dict[str, Any],
          device: str) -> dict[str, Any]:
    target = "c" if device == "cpu" else "ascend"
    if spec.reference is None:
        return specmod.CheckResult("not_run", device, target, "the spec has no 'reference'").to_dict()
    inputs = specmod.make_inputs(spec, params, device)
    got = specmod.as_tuple(kernel_fn(*inputs))
    _sync(device)
    # The reference runs on the CPU from the same seeded values: independent of the device under test.
    expected = specmod.as_tuple(spec.reference(*[x.detach().to("cpu") for x in inputs]))
    if len(got) != len(expected):
        return specmod.CheckResult(
            "fail", device, target, f"kernel returned {len(got)} output(s), reference {len(expected)}",
        ).to_dict()
    names = specmod.output_names(func, spec.out_idx)
    rows = specmod.compare_outputs(got, expected, names, spec.atol, spec.rtol)
    status = "pass" if all(r["passed"] for r in rows) else "fail"
    return specmod.CheckResult(status, device, target, None, spec.atol, spec.rtol, spec.seed, rows).to_dict()


def profiled_step(kernel_fn: Any, spec: specmod.KernelSpec, inputs: list[Any], reference: bool) -> Any:
    """One profiled step: the kernel, and with `reference` (collect --with-reference) the spec's
    torch reference on the same device inputs right after it, so the vendor's operators that
    compute the same result are in the profile beside the kernel (`diff --match` pairs them)."""
    if not reference:
        return lambda: kernel_fn(*inputs)
    ref = spec.reference
    if ref is None:
        raise RuntimeError("--with-reference: the kernel's TILESCOPE_SPEC entry has no 'reference' "
                           "(torch code computing the same outputs; docs/collecting.md)")
    return lambda: (kernel_fn(*inputs), ref(*inputs))


def launch(kernel_fn: Any, inputs: list[Any], count: int, device: str) -> None:
    """Plain launches (the program msprof op replays): synchronised so each launch is one task."""
    for _ in range(count):
        kernel_fn(*inputs)
        _sync(device)


def build_ascend_kernel(
    kernel: Path, function: str, params: dict[str, Any], derived: dict[str, Any] | None
) -> tuple[Any, Any, specmod.KernelSpec, dict[str, Any], str]:
    """tilelang-ascend 0.1.4: (the compiled kernel, its PrimFunc, the input spec, the parameters with
    the builder's defaults, where the spec came from), through tilelang-ascend's own API.

    A `@tilelang.jit(out_idx=..., workspace_idx=..., pass_configs=...)` builder is called with the
    parameters: that lowers, compiles with bisheng and returns a JITKernel whose adapter takes the
    inputs as torch_npu tensors and allocates the outputs and workspaces itself (`c = matmul(...)(a, b)`
    in tilelang-ascend's examples). A plain builder's PrimFunc goes through `tilelang.compile` with the
    spec's out_idx. The file is imported without its script part (tilescope.ir.published), as lint
    imports it: published examples run NPU tests at module level.
    """

    # deferred: tilelang-ascend and torch_npu exist only in that stack's interpreter; ir.published is this
    #   path's
    import tilelang
    import torch_npu  # noqa: F401  (the adapter allocates outputs on torch.device("npu"))

    from tilescope.ir.published import PublishedFileError, load_module

    try:
        module = load_module(kernel, ast.parse(kernel.read_text(encoding="utf-8"), filename=str(kernel)))
    except PublishedFileError as exc:
        raise UsageError(str(exc)) from None
    obj = getattr(module, function, None)
    if not callable(obj):
        raise UsageError(f"{kernel}: no function {function!r}")
    impl = getattr(obj, "__jit_impl__", None)
    # deferred: tilelang-ascend jobs only (the lowering helpers ir.ascend_worker shares)
    from tilescope.ir.ascend_worker import nested_params
    from tilescope.ir.lowering import NESTED_KEY

    classes = dict(params.pop(NESTED_KEY, None) or {})  # -p tiling.block_M=32: built as lint builds it
    fn = impl.func if impl is not None else obj
    params = specmod.resolve_params(fn, nested_params(module, fn, params, classes))
    spec = specmod.find_spec(module, function, kernel)
    source = specmod.SPEC_ATTR
    if spec is None and derived is not None:
        spec = specmod.spec_from_declaration(derived, f"{kernel}: inputs derived from {function}'s signature")
        source = "signature"
    if spec is None:
        raise UsageError(f"{kernel}: no {specmod.SPEC_ATTR}[{function!r}] and no inputs derived from its "
                         "signature: cannot make inputs (docs/collecting.md)")
    if impl is not None:
        kernel_fn = obj(**params)
        func = kernel_fn.prim_func
    else:
        func = obj(**params)
        kernel_fn = tilelang.compile(func, out_idx=list(spec.out_idx) or None)
    expected = ascend_input_count(kernel_fn.adapter)
    if expected is not None and expected != len(spec.inputs):
        raise UsageError(f"{kernel}: {function} takes {expected} input tensor(s) when called, the spec "
                         f"declares {len(spec.inputs)} ({', '.join(t.name for t in spec.inputs) or 'none'})")
    return kernel_fn, func, spec, params, source


def ascend_versions() -> dict[str, str | None]:
    """The versions of the stack that ran the kernel (this interpreter's, which on an aarch64 host
    may be a venv of its own): they replace the collector's in the manifest."""
    stack = dist_version("tilelang-ascend")
    return {"torch": dist_version("torch"),
            "torch_npu": dist_version("torch-npu") or dist_version("torch_npu"),
            "tilelang": f"tilelang-ascend {stack}" if stack else dist_version("tilelang")}


def ascend_input_count(adapter: Any) -> int | None:
    """How many tensors tilelang-ascend's cython adapter takes: every parameter it does not allocate
    itself (result_idx, workspace_idx, auto_gm_idx — cython_wrapper.pyx `forward`); None when the
    adapter does not say."""
    try:
        allocated = set(adapter.result_idx) | set(adapter.workspace_idx) | set(adapter.auto_gm_idx or [])
        return len(adapter.params) - len(allocated)
    except (AttributeError, TypeError):
        return None


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    device = job["device"]
    if job.get("dialect") == TILELANG_ASCEND:
        name = str(job["function"])
        kernel_fn, func, spec, params, source = build_ascend_kernel(
            Path(job["kernel"]), name, dict(job["params"]), job.get("spec"))
        answer: dict[str, Any] = {"function": name, "kernel_name": _entry_name(func), "spec": True,
                                  "params": _jsonable(params), "versions": ascend_versions(),
                                  "spec_record": specmod.record(spec, params, source)}
        return _run_mode(job, answer, kernel_fn, func, spec, params, device)
    func, found, name, params = build_prim_func(Path(job["kernel"]), job.get("function"), job["params"])
    answer = {"function": name, "kernel_name": _entry_name(func), "spec": found is not None,
              "params": _jsonable(params)}
    if found is None and job["mode"] == "check":
        reason = f"no {specmod.SPEC_ATTR}[{name!r}] in the kernel file (see docs/collecting.md)"
        answer["correctness"] = specmod.CheckResult("not_run", device, None, reason).to_dict()
        return answer
    if found is None:
        raise RuntimeError(f"no {specmod.SPEC_ATTR}[{name!r}] in {job['kernel']}: cannot make inputs")
    try:
        kernel_fn = compile_kernel(func, list(found.out_idx), device, job.get("compile_flags"))
    except Exception as exc:
        if job["mode"] == "check" and device == "cpu":
            # Not an error of the kernel: most Ascend-style kernels cannot target "c" at all.
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
            reason = f"does not compile for the CPU target 'c' ({type(exc).__name__}: {first[:300]})"
            answer["correctness"] = specmod.CheckResult("not_run", "cpu", "c", reason).to_dict()
            return answer
        raise
    return _run_mode(job, answer, kernel_fn, func, found, params, device)


def _run_mode(job: dict[str, Any], answer: dict[str, Any], kernel_fn: Any, func: Any,
              spec: specmod.KernelSpec, params: dict[str, Any], device: str) -> dict[str, Any]:
    """Check, launch or profile a compiled kernel: the same for both dialects."""
    if device == "npu":
        # deferred: torch (~2 s) is imported on a device only: this worker runs under other interpreters
        import torch

        answer["device_name"] = torch.npu.get_device_name()
    mode = job["mode"]
    if mode == "check":
        answer["correctness"] = check(kernel_fn, func, spec, params, device)
    elif mode == "launch":
        launch(kernel_fn, specmod.make_inputs(spec, params, device), job["warmup"] + job["repeat"], device)
    elif mode == "profile":
        # deferred: profile mode only: torch_npu's profiler, which a check or a launch never touches
        from tilescope.collectors.torch_npu_backend import run_profiled

        inputs = specmod.make_inputs(spec, params, device)
        launch(kernel_fn, inputs, 1, device)  # first call outside the profiler: JIT load, caches
        run_profiled(profiled_step(kernel_fn, spec, inputs, bool(job.get("reference"))), job["profiler"])
    else:
        raise ValueError(f"unknown mode {mode!r}")
    return answer


def _jsonable(params: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = jsonable(params)
    return out


def _entry_name(func: Any) -> str | None:
    try:
        return str(func.attrs["global_symbol"]) + "_kernel"
    except Exception:  # not a PrimFunc with a symbol; msprof op then needs the name from elsewhere
        return None


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str]) -> int:
    # The collector stops us with SIGINT/SIGTERM on timeout or Ctrl-C; turning both into
    # KeyboardInterrupt runs the `finally` that stops the profiler before the process ends.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    job_path = Path(argv[0])
    job = json.loads(job_path.read_text(encoding="utf-8"))
    result_path = Path(job["result"])
    try:
        answer = run_job(job)
        code = 0
    except BaseException as exc:  # report everything, including KeyboardInterrupt, to the parent
        answer = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        code = 130 if isinstance(exc, KeyboardInterrupt) else 1
    result_path.write_text(json.dumps(answer, indent=2, default=str), encoding="utf-8")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
