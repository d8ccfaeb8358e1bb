"""`tilescope collect` orchestration: checks, IR, correctness, profiling, manifest — atomically.

Order matters:
1. usage errors (kernel file, metric groups, existing bundle without --force) — exit 2, nothing done;
2. missing components (torch_npu / NPU / msprof; tilelang) — exit 3, before any hardware work;
3. inside `atomic_dir`: kernel copy, IR (tilescope.ir.capture, the code `tilescope lint` runs),
   correctness check in a child (CPU target "c" for --ir-only, the NPU otherwise), one profiler run
   per backend rules, manifest (schema-validated). Only a complete bundle is renamed into place; an
   exception or Ctrl-C removes the temporary directory and kills the child process group.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from tilescope.atomic import atomic_dir
from tilescope.chips import chosen_chip, tl_ascend_platform_of_device
from tilescope.collectors import bundle as bundlemod
from tilescope.collectors import preflight
from tilescope.collectors import spec as specmod
from tilescope.collectors.msprof_op_backend import (
    MSPROF_OP_EXTRA_GROUPS,
    profile_msprof_op,
    profile_msprof_op_simulator,
)
from tilescope.collectors.proc import WORKER, CommandRecord, run_command, tail
from tilescope.collectors.spec import KernelRef, parse_kernel_ref
from tilescope.collectors.torch_npu_backend import AIC_METRICS, profile_groups
from tilescope.config import load_config
from tilescope.errors import MissingComponentError, TilescopeError, UsageError
from tilescope.ir.capture import capture_ir, write_ir_dir
from tilescope.ir.dialect import detect
from tilescope.ir.foreign import require_interpreter
from tilescope.ir.params import builder_signatures, candidates, for_worker, parse_kernel_file, resolve_kernel
from tilescope.ir.scopes import TILELANG_ASCEND
from tilescope.run_module import command

BACKENDS = ("torch_npu", "msprof-op", "msprof-op-simulator")
DEFAULT_METRICS = ("PipeUtilization", "Memory", "MemoryL0", "MemoryUB", "ResourceConflictRatio",
                   "L2Cache", "ArithmeticUtilization")
DEFAULT_WARMUP = 5
DEFAULT_REPEAT = 10
DEFAULT_TIMEOUT_S = 900.0

Log = Callable[[str], None]


@dataclass
class CollectRequest:
    kernel: str  # KERNEL.py[:FUNCTION]
    out: Path
    params: dict[str, Any] = field(default_factory=dict)
    backend: str = "torch_npu"
    metrics: list[str] = field(default_factory=lambda: list(DEFAULT_METRICS))
    warmup: int = DEFAULT_WARMUP
    repeat: int = DEFAULT_REPEAT
    ir_only: bool = False
    force: bool = False
    chip: str | None = None
    timeout: float | None = DEFAULT_TIMEOUT_S
    replay_mode: str = "application"
    # profile the spec's torch `reference` on the same inputs beside the kernel (torch_npu only)
    with_reference: bool = False


def validate_request(req: CollectRequest) -> KernelRef:
    ref = parse_kernel_ref(req.kernel)
    if req.backend not in BACKENDS:
        raise UsageError(f"--backend {req.backend!r}: expected one of {', '.join(BACKENDS)}")
    if req.warmup < 0 or req.repeat < 1:
        raise UsageError("--warmup must be >= 0 and --repeat >= 1")
    if req.with_reference and (req.backend != "torch_npu" or req.ir_only):
        raise UsageError("--with-reference needs --backend torch_npu and a device: msprof op profiles only "
                         "the kernel its --kernel-name names, and --ir-only runs nothing")
    if req.timeout is not None and req.timeout <= 0:
        raise UsageError("--timeout must be positive")
    if req.backend != "msprof-op-simulator":  # the simulator records what it models: no groups
        _check_metrics(req)
    if req.out.exists() and not req.force:
        raise UsageError(f"{req.out}: already exists (use --force to replace it)")
    if req.out.exists() and not (req.out / bundlemod.MANIFEST_NAME).is_file() and any(req.out.iterdir()):
        # --force replaces bundles, not arbitrary directories someone pointed --out at by mistake.
        raise UsageError(f"{req.out}: exists and is not a tilescope bundle; refusing to replace it")
    return ref


def _check_metrics(req: CollectRequest) -> None:
    if len(set(req.metrics)) != len(req.metrics) or not req.metrics:
        raise UsageError("--metrics: give each metric group once, at least one")
    allowed = (set(AIC_METRICS) if req.backend == "torch_npu"
               else set(DEFAULT_METRICS + MSPROF_OP_EXTRA_GROUPS))
    unknown = [m for m in req.metrics if m not in allowed]
    if unknown:
        raise UsageError(f"--metrics: {', '.join(unknown)} not supported by {req.backend} "
                         f"(known: {', '.join(sorted(allowed))})")


def resolve_function(ref: KernelRef) -> KernelRef:
    """Pick the builder as `tilescope lint` does when KERNEL.py has no :FUNCTION."""
    if ref.function:
        return ref

    found = candidates(ast.parse(ref.path.read_text(encoding="utf-8"), filename=str(ref.path)))
    if len(found) != 1:
        raise UsageError(f"{ref.path}: pick a function with {ref.path}:NAME "
                         f"(candidates: {', '.join(found) or 'none'})")
    return KernelRef(path=ref.path, function=found[0])


def _source_dialect(path: Path) -> Any:
    """The kernel's dialect when it is tilelang-ascend's (tilescope.ir.dialect), else None."""
    found = detect(parse_kernel_file(path))
    return found if found.dialect == TILELANG_ASCEND else None


def resolve_chip_name(
    requested: str | None, tilelang_version: str | None = None, dialect: str | None = None
) -> Any:
    """--chip, else the configuration's chip, else the lowering target's (tilescope.chips.chosen_chip):
    tilelang-ascend's TL_PLATFORM for its dialect, tilelang 0.1.15's 950 otherwise."""
    cfg = load_config()
    if dialect == TILELANG_ASCEND:
        return chosen_chip(
            requested, cfg.chip, cfg.source, dialect=dialect, platform=os.environ.get("TL_PLATFORM")
        )
    return chosen_chip(requested, cfg.chip, cfg.source, version=tilelang_version)


def _tilelang_version() -> str | None:
    """The installed TileLang's version, read without importing it (for the chip's reason)."""
    try:
        return version("tilelang")
    except PackageNotFoundError:
        return None


AUTOLOAD = "TORCH_DEVICE_BACKEND_AUTOLOAD"


def keep_torch_npu_out_of_this_process() -> None:
    """Stop `import torch` from auto-loading torch_npu in the collector (and in CPU-only children).

    torch loads installed device backends on import; with torch_npu installed but CANN absent that
    makes `import torch` itself fail ("Failed to load the backend extension: torch_npu", caused by
    libhccl.so). The collector only needs torch for the IR and the CPU check, so it must not depend on
    CANN; the NPU children import torch_npu explicitly and get the user's environment.
    """
    os.environ.setdefault(AUTOLOAD, "0")


def child_env(user_env: dict[str, str], device: str) -> dict[str, str]:
    """The user's environment as it was before collect started, plus what a worker needs.

    Built from a snapshot, not os.environ: the in-process IR capture changes os.environ (tilelang
    cache settings, the autoload switch above), and the device runs must see the user's setup.
    """
    env = dict(user_env)
    # The worker finds this tilescope through tilescope.run_module (WORKER_ARGV), whatever the cwd
    # and the user's PYTHONPATH, which stays as the user set it.
    if device == "cpu":
        env[AUTOLOAD] = "0"
    return env


def run_check(bundle: Path, ref: KernelRef, params: dict[str, Any], device: str,
              timeout: float | None, env: dict[str, str],
              python: str = sys.executable, extra: dict[str, Any] | None = None
              ) -> tuple[CommandRecord, dict[str, Any]]:
    """Build + compile + compare with the reference in a child; returns its record and answer.
    `extra`: job fields of a tilelang-ascend kernel (ascend_job_base), run by `python`, its stack's."""
    collect_dir = bundle / "collect"
    collect_dir.mkdir(parents=True, exist_ok=True)
    result = collect_dir / f"check_{device}.result.json"
    job = {"kernel": str(ref.path), "function": ref.function, "params": params, "device": device,
           "mode": "check", "warmup": 0, "repeat": 1, "result": str(result), **(extra or {})}
    job_path = collect_dir / f"check_{device}.job.json"
    job_path.write_text(json.dumps(job, indent=2), encoding="utf-8")
    log = collect_dir / f"check_{device}.log"
    rec = CommandRecord([*command([python], WORKER), str(job_path)],
                        f"correctness check ({device})", log=f"collect/{log.name}")
    run_command(rec, timeout, log, env=child_env(env, device))
    try:
        answer: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        answer = {"error": f"the check worker exited {rec.returncode} without an answer"}
    if "error" in answer:
        first = str(answer["error"]).splitlines()[0]
        if first.startswith(("UsageError", "TilescopeError")):
            raise UsageError(first.split(": ", 1)[-1])
        raise TilescopeError(
            f"{ref.text}: correctness check failed to run ({first}); log: {log}\n{tail(log)}")
    return rec, answer


def capture_ir_into(bundle: Path, ref: KernelRef, params: dict[str, Any], chip: Any) -> dict[str, Any]:
    """ir/ exactly as `tilescope lint` writes it (the IR engineer's tilescope.ir.capture)."""
    capture = capture_ir(ref.text, params, chip)
    write_ir_dir(capture, bundle / "ir")
    # A lowering failure (e.g. a buffer over capacity) is a finding in ir.json, not a collect error.
    return {"path": "ir", "captured": True, "lowered": bool(capture.ok)}


def spec_record(path: Path, function: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The kernel's TILESCOPE_SPEC as run: shapes and dtypes resolved against the parameters."""
    spec = specmod.find_spec(specmod.load_module(path), function, path)
    return None if spec is None else specmod.record(spec, params, specmod.SPEC_ATTR)


EMULATED_NO_NPU = (
    "no NPU: {name} is a tilelang-ascend kernel, and tilelang-ascend runs here only emulated (an "
    "arm64 root under qemu, {root}); profiling it needs an Ascend NPU with CANN + torch_npu and "
    "tilelang-ascend installed natively (an Atlas A2/A3 host); --ir-only works here (IR + manifest, "
    "no runtime metrics), see docs/collecting.md"
)


def ascend_python(interp: Any, kernel: Path) -> str:
    """The Python that runs a tilelang-ascend kernel on the NPU: this one when tilelang-ascend is
    installed here, the setup script's venv on an aarch64 host; never the emulated root (no device
    reaches it, and it has no CANN) — that is exit 3, before any work."""
    if interp.kind == "in-process":
        return sys.executable
    if interp.kind == "native":
        return str(interp.argv[0])
    raise MissingComponentError(EMULATED_NO_NPU.format(name=kernel.name, root=interp.root))


def ascend_job_base(ref: KernelRef, ir: dict[str, Any]) -> dict[str, Any]:
    """What every tilelang-ascend device job (check, profile, launch) gets, read from the bundle's
    ir.json: the builder, the parameters the IR was captured with (the file's own call included, as
    lint takes them), and the inputs derived from the captured signature (used by the worker when
    the file has no TILESCOPE_SPEC)."""
    kernels = ir.get("kernels", [])
    if len(kernels) != 1:
        raise UsageError(f"{ref.text} builds {len(kernels)} kernels; collect profiles one at a time")
    k = kernels[0]
    derived = None
    if k.get("gm_tensors"):
        derived = specmod.derived_declaration(k["gm_tensors"], k.get("outputs", []), k.get("workspaces", []))

    # `-p tiling.block_M=32` reaches the worker dotted, with the class `tiling` takes (as lint's)
    _path, names, tree = resolve_kernel(ref.text)
    params = for_worker(builder_signatures(tree, names), dict(ir.get("params", {})))
    return {"kernel": str(ref.path), "function": ref.function, "params": params,
            "dialect": TILELANG_ASCEND, "spec": derived}


def _declares_spec(path: Path) -> bool:
    """Does the file assign TILESCOPE_SPEC at module level (read from the source: a tilelang-ascend
    file cannot be imported in the collector's interpreter)?"""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for n in tree.body:
        targets: list[ast.expr] = []
        if isinstance(n, ast.Assign):
            targets = n.targets
        elif isinstance(n, ast.AnnAssign):
            targets = [n.target]
        if any(isinstance(t, ast.Name) and t.id == specmod.SPEC_ATTR for t in targets):
            return True
    return False


def derived_record(declaration: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """manifest["kernel"]["spec"] of inputs derived from the signature, as the worker records a spec it
    ran; a symbolic dim that the given parameters do not settle stays as the IR names it."""
    spec = specmod.spec_from_declaration(declaration, "inputs derived from the signature")
    try:
        return specmod.record(spec, params, "signature")
    except UsageError:
        return dict(declaration, source="signature")


def collect(req: CollectRequest, log: Log | None = None,
            probe: Callable[[str], dict[str, Any]] | None = None) -> Path:
    """Build the bundle at req.out; returns its path. Raises TilescopeError subclasses (exit codes)."""
    say: Log = log or (lambda msg: print(f"tilescope: {msg}", file=sys.stderr))
    user_env = dict(os.environ)
    ref = validate_request(req)
    dialect = _source_dialect(ref.path)  # read from the source: nothing imported yet
    device_probe: dict[str, Any] = {}
    python = sys.executable
    if dialect is not None:  # tilelang-ascend: lowered (and run) by its own stack, in a worker

        interp = require_interpreter(f"{ref.path} is written for {dialect.describe()}")
        if not req.ir_only:
            python = ascend_python(interp, ref.path)
            device_probe = (probe(req.backend) if probe else
                            preflight.check_backend(req.backend, preflight.probe_torch_npu(python)))
    else:
        if not req.ir_only:
            device_probe = probe(req.backend) if probe else preflight.check_backend(req.backend)
        preflight.require_tilelang()
    keep_torch_npu_out_of_this_process()
    pinned = None
    if dialect is not None and not os.environ.get("TL_PLATFORM"):
        pinned = tl_ascend_platform_of_device(device_probe.get("device_name"))
    if pinned is None:
        return _collect(req, ref, dialect, device_probe, python, user_env, say)
    # The IR capture lowers without a device and would take tilelang-ascend's default platform, the
    # NPU child would detect the device's: pin both to the device's (and record it).
    os.environ["TL_PLATFORM"] = user_env["TL_PLATFORM"] = pinned
    try:
        return _collect(req, ref, dialect, device_probe, python, user_env, say)
    finally:
        os.environ.pop("TL_PLATFORM", None)


def _collect(req: CollectRequest, ref: KernelRef, dialect: Any, device_probe: dict[str, Any], python: str,
             user_env: dict[str, str], say: Log) -> Path:
    ref = resolve_function(ref)
    chip = resolve_chip_name(req.chip, _tilelang_version(), dialect.dialect if dialect else None)

    manifest = bundlemod.base_manifest(env=user_env)
    manifest.update(
        ir_only=req.ir_only, parameters=bundlemod.jsonable(req.params),
        backend=None if req.ir_only else req.backend,
        metric_groups=[] if req.ir_only or req.backend == "msprof-op-simulator" else list(req.metrics),
        warmup=req.warmup, repeat=req.repeat, timeout_s=req.timeout, chip=chip.name,
        device_name=device_probe.get("device_name"),
    )
    commands: list[CommandRecord] = []
    with atomic_dir(req.out, force=req.force) as tmp:
        manifest["build_dir"] = str(tmp)
        kernel_copy = tmp / "kernel" / ref.path.name
        kernel_copy.parent.mkdir(parents=True)
        shutil.copy2(ref.path, kernel_copy)  # the exact source that was profiled, next to its profile
        manifest["kernel"] = bundlemod.kernel_record(ref.path, ref.function)

        say(f"capturing IR of {ref.text} for chip {chip.label}")
        manifest["ir"] = capture_ir_into(tmp, ref, req.params, chip)
        ir = _read_ir(tmp)
        manifest["dialect"] = ir.get("dialect")

        device = "cpu" if req.ir_only else "npu"
        answer: dict[str, Any]
        job_base: dict[str, Any] = {"kernel": str(ref.path), "function": ref.function, "params": req.params}
        if dialect is not None:
            job_base = ascend_job_base(ref, ir)
            # the stack that lowered it, not the collector's tilelang (the NPU child's answer refines it)
            manifest["versions"]["tilelang"] = ir.get("lowering", {}).get("stack")
        if dialect is not None and req.ir_only:  # tilelang-ascend has no CPU target to run the kernel on
            why = "tilelang-ascend kernels run only on an NPU"
            answer = {"function": ref.function, "params": job_base["params"], "kernel_name":
                      ir["kernels"][0].get("entry"),
                      "correctness": specmod.CheckResult("not_run", "cpu", None, why).to_dict()}
            if job_base["spec"] is not None and not _declares_spec(ref.path):
                manifest["kernel"]["spec"] = derived_record(job_base["spec"], job_base["params"])
        else:
            say(f"checking the result against the reference ({'CPU target c' if req.ir_only else 'NPU'})")
            # a tilelang-ascend check runs in its stack's interpreter, with the fields of ascend_job_base
            kw: dict[str, Any] = {} if dialect is None else {
                "python": python, "extra": {k: job_base[k] for k in ("dialect", "spec", "params")}}
            rec, answer = run_check(tmp, ref, req.params, device, req.timeout, user_env, **kw)
            commands.append(rec)
        manifest["kernel"].update(function=answer.get("function"), entry=answer.get("kernel_name"))
        if answer.get("spec_record"):  # tilelang-ascend: the worker says which spec it ran
            manifest["kernel"]["spec"] = answer["spec_record"]
        elif answer.get("spec"):
            manifest["kernel"]["spec"] = spec_record(ref.path, str(answer.get("function")),
                                                     answer.get("params", {}))
        manifest["versions"].update(answer.get("versions", {}))
        manifest["resolved_parameters"] = answer.get("params", {})
        manifest["correctness"] = answer["correctness"]
        manifest["device_name"] = answer.get("device_name") or manifest["device_name"]
        _report_check(answer["correctness"], say)

        if not req.ir_only:
            if not answer.get("spec"):
                raise UsageError(f"{ref.path}: no TILESCOPE_SPEC entry for {answer.get('function')!r}; "
                                 "collect needs it to make the kernel's inputs (docs/collecting.md)")
            job_base["function"] = answer.get("function")
            job_base["reference"] = req.with_reference
            manifest["reference"] = req.with_reference
            recs, runs = _profile(req, tmp, job_base, answer.get("kernel_name"), child_env(user_env, "npu"),
                                  say, python)
            commands.extend(recs)
            manifest["profile"] = {"path": "profile", "runs": runs,
                                   "layout": "torch_npu" if req.backend == "torch_npu" else "msprof_op"}
        else:
            (tmp / "profile").mkdir(exist_ok=True)  # present and empty: "no runtime metrics"

        manifest["commands"] = [c.to_dict() for c in commands]
        bundlemod.write_manifest(tmp, manifest)
    say(f"wrote {req.out}")
    return req.out


def _read_ir(bundle: Path) -> dict[str, Any]:
    try:
        data = json.loads((bundle / "ir" / "ir.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _profile(req: CollectRequest, tmp: Path, job_base: dict[str, Any], kernel_name: str | None,
             env: dict[str, str], say: Log, python: str = sys.executable
             ) -> tuple[list[CommandRecord], list[dict[str, Any]]]:
    if req.backend == "torch_npu":
        say(f"profiling with torch_npu: {len(req.metrics)} run(s), one per metric group")
        return profile_groups(tmp / "collect", tmp, job_base, list(req.metrics), req.warmup, req.repeat,
                              req.timeout, env=env, python=python)
    if not kernel_name:
        raise TilescopeError("cannot tell the kernel's entry symbol for msprof op --kernel-name")
    if req.backend == "msprof-op-simulator":
        if job_base.get("dialect") == TILELANG_ASCEND:
            say("note: tilelang-ascend compiles with a fixed bisheng command (no -g): the simulator's "
                "per-line CSVs will hold only their header (docs/lines.md)")
        say("simulating one launch with msprof op simulator (minutes; built with -g, keeping -O2)")
        return profile_msprof_op_simulator(tmp / "collect", tmp, job_base, kernel_name, req.timeout,
                                           env=env, python=python)
    say(f"profiling with msprof op ({','.join(req.metrics)})")
    return profile_msprof_op(tmp / "collect", tmp, job_base, list(req.metrics), kernel_name, req.warmup,
                             req.repeat, req.timeout, req.replay_mode, env=env, python=python)


def _report_check(result: dict[str, Any], say: Log) -> None:
    status = result.get("status")
    if status in ("pass", "fail"):
        say(f"correctness: {status} (max abs err {result.get('max_abs_err')}, "
            f"max rel err {result.get('max_rel_err')}, tolerance {result.get('tolerance')})")
        if status == "fail":
            say("warning: the kernel's result differs from the reference; profiling it anyway")
    else:
        say(f"correctness: {status} ({result.get('reason')})")
