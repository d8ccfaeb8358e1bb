"""The child process that builds, checks and runs one kernel: `python -m collectors.worker JOB.json`.

Every device action of `tilescope collect` happens here, in a fresh process, because
- torch_npu's profiler takes one aic-metrics group per run and keeps global state between runs;
- a crashing kernel, a hung device or a C-compiler failure must not take the collector (and its
  atomic bundle) down with it, and the parent can kill the whole process group on timeout/Ctrl-C;
- under `msprof op --application=...` the profiled program must be its own executable.

Job (JSON): kernel, function, params (only the --param values; defaults come from the factory),
device ("cpu" | "npu"), mode ("check" | "profile" | "launch"), warmup, repeat, profiler (the plain
config of torch_npu_backend.build_profiler_config, mode "profile"), result (path of the JSON answer).
"""

from __future__ import annotations

import json
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

from analyzer.errors import UsageError
from collectors import spec as specmod


def build_prim_func(kernel: Path, function: str | None, params: dict[str, Any]) -> tuple[Any, Any, str,
                                                                                       dict[str, Any]]:
    """Load the kernel file and build its PrimFunc: (PrimFunc, KernelSpec|None, function, params).

    Building goes through analyzer.ir.capture.build_primfuncs, the code `tilescope lint` uses, so a
    builder, a `@tilelang.jit` kernel or a bare PrimFunc means the same thing to both commands.
    """
    from analyzer.ir.capture import build_primfuncs, import_tilelang

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


def compile_kernel(func: Any, out_idx: list[int], device: str) -> Any:
    import tilelang
    from tvm.target import Target

    if device == "cpu":
        # The only CPU path of tilelang 0.1.15 (tilelang-notes §2): C codegen + cython wrapper.
        with Target("c"):
            return tilelang.compile(func, out_idx=out_idx, target="c", target_host="c",
                                    execution_backend="cython")
    import torch_npu  # noqa: F401  (registers the "npu" device with torch)

    with Target("ascend"):
        return tilelang.compile(func, out_idx=out_idx, target="ascend")


def _sync(device: str) -> None:
    if device == "npu":
        import torch

        torch.npu.synchronize()  # type: ignore[attr-defined]  # added by torch_npu


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


def launch(kernel_fn: Any, inputs: list[Any], count: int, device: str) -> None:
    """Plain launches (the program msprof op replays): synchronised so each launch is one task."""
    for _ in range(count):
        kernel_fn(*inputs)
        _sync(device)


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    device = job["device"]
    func, spec, name, params = build_prim_func(Path(job["kernel"]), job.get("function"), job["params"])
    answer: dict[str, Any] = {"function": name, "kernel_name": _entry_name(func), "spec": spec is not None,
                              "params": _jsonable(params)}
    if spec is None and job["mode"] == "check":
        reason = f"no {specmod.SPEC_ATTR}[{name!r}] in the kernel file (see docs/collecting.md)"
        answer["correctness"] = specmod.CheckResult("not_run", device, None, reason).to_dict()
        return answer
    if spec is None:
        raise RuntimeError(f"no {specmod.SPEC_ATTR}[{name!r}] in {job['kernel']}: cannot make inputs")
    try:
        kernel_fn = compile_kernel(func, list(spec.out_idx), device)
    except Exception as exc:
        if job["mode"] == "check" and device == "cpu":
            # Not an error of the kernel: most Ascend-style kernels cannot target "c" at all.
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
            reason = f"does not compile for the CPU target 'c' ({type(exc).__name__}: {first[:300]})"
            answer["correctness"] = specmod.CheckResult("not_run", "cpu", "c", reason).to_dict()
            return answer
        raise
    if device == "npu":
        import torch

        answer["device_name"] = torch.npu.get_device_name()  # type: ignore[attr-defined]
    mode = job["mode"]
    if mode == "check":
        answer["correctness"] = check(kernel_fn, func, spec, params, device)
    elif mode == "launch":
        launch(kernel_fn, specmod.make_inputs(spec, params, device), job["warmup"] + job["repeat"], device)
    elif mode == "profile":
        from collectors.torch_npu_backend import run_profiled

        inputs = specmod.make_inputs(spec, params, device)
        launch(kernel_fn, inputs, 1, device)  # first call outside the profiler: JIT load, caches
        run_profiled(lambda: kernel_fn(*inputs), job["profiler"])
    else:
        raise ValueError(f"unknown mode {mode!r}")
    return answer


def _jsonable(params: dict[str, Any]) -> dict[str, Any]:
    from collectors.bundle import jsonable

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
