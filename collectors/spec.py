"""The kernel input spec: how `tilescope collect` makes inputs and checks the result.

A kernel file declares, next to its factory function, a module-level dict

    TILESCOPE_SPEC = {
        "vector_add": {                                  # the factory's name (KERNEL.py:vector_add)
            "inputs": [("A", ("N",), "float32"), ("B", ("N",), "float32")],
            "out_idx": [2],                              # kernel arguments that are outputs
            "reference": lambda A, B: A + B,             # torch code, same order as `inputs`
            "atol": 1e-5, "rtol": 1e-5,
        },
    }

A plain dict keeps kernel files free of any tilescope import (they must also run under msprof op on
a machine where only the kernel's own dependencies matter); `KernelSpec`/`TensorSpec` below are the
typed form the collector works with, and a kernel may use them directly too. Shape entries are ints,
parameter names or small arithmetic expressions over parameters ("M // 2"), resolved against the
factory's defaults overridden by `--param`. docs/collecting.md is the user-facing description.

Only the functions that run kernels import torch/tilelang, and only inside the function.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.util
import inspect
import operator
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from tilescope.errors import UsageError

SPEC_ATTR = "TILESCOPE_SPEC"
INIT_KINDS = ("randn", "rand", "randint", "zeros", "ones", "arange")


@dataclass(frozen=True)
class TensorSpec:
    """One kernel input: name, shape (ints / parameter expressions), dtype and how to fill it."""

    name: str
    shape: tuple[int | str, ...]
    dtype: str = "float32"
    init: str = "randn"  # one of INIT_KINDS; integer dtypes default to randint(-8, 8)
    low: float = -8
    high: float = 8


@dataclass(frozen=True)
class KernelSpec:
    inputs: tuple[TensorSpec, ...]
    out_idx: tuple[int, ...]
    reference: Callable[..., Any] | None = None
    atol: float = 1e-3
    rtol: float = 1e-3
    seed: int = 0
    cpu: bool = True  # False: do not even try the CPU target "c" (GPU/Ascend-style kernel)


@dataclass(frozen=True)
class KernelRef:
    path: Path
    function: str | None

    @property
    def text(self) -> str:
        return f"{self.path}:{self.function}" if self.function else str(self.path)


def parse_kernel_ref(ref: str) -> KernelRef:
    """`KERNEL.py[:FUNCTION]`; the colon split is from the right so Windows-style paths survive."""
    path_text, sep, func = ref.rpartition(":")
    if not sep or not func.isidentifier():
        path_text, func = ref, ""
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise UsageError(f"{path}: kernel file not found")
    if path.suffix != ".py":
        raise UsageError(f"{path}: expected a Python file (KERNEL.py[:FUNCTION])")
    return KernelRef(path=path.resolve(), function=func or None)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def _kernel_dir_on_path(path: Path) -> Iterator[None]:
    # Kernel files import their siblings (helpers, shared tiles); make that work like `python KERNEL.py`.
    directory = str(path.parent)
    added = directory not in sys.path
    if added:
        sys.path.insert(0, directory)
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(directory)


def load_module(path: Path) -> ModuleType:
    """Import a kernel file under a private module name (no clash with installed packages)."""
    name = "tilescope_kernel_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    # @T.prim_func reads the source through inspect, which needs the module registered.
    sys.modules[name] = module
    with _kernel_dir_on_path(path):
        spec.loader.exec_module(module)
    return module


def resolve_function_name(ref: KernelRef, module: ModuleType) -> str:
    if ref.function:
        if not callable(getattr(module, ref.function, None)):
            raise UsageError(f"{ref.path}: no function {ref.function!r}")
        return ref.function
    declared = getattr(module, SPEC_ATTR, None)
    if isinstance(declared, dict) and len(declared) == 1:
        return str(next(iter(declared)))
    raise UsageError(f"{ref.path}: say which kernel factory to use (KERNEL.py:FUNCTION)")


def resolve_params(factory: Callable[..., Any], params: dict[str, Any]) -> dict[str, Any]:
    """The factory's defaults overridden by --param; unknown names are a usage error."""
    sig = inspect.signature(factory)
    accepts_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    unknown = [k for k in params if k not in sig.parameters]
    if unknown and not accepts_kwargs:
        known = ", ".join(sig.parameters) or "none"
        raise UsageError(f"unknown --param {', '.join(unknown)} (the factory takes: {known})")
    merged = {
        name: p.default
        for name, p in sig.parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    merged.update(params)
    missing = [
        n for n, p in sig.parameters.items()
        if p.default is inspect.Parameter.empty and n not in merged
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    if missing:
        raise UsageError(f"missing --param {', '.join(missing)} (no default in the factory)")
    return merged


def _tensor_spec(item: Any, where: str) -> TensorSpec:
    if isinstance(item, TensorSpec):
        return item
    if isinstance(item, dict):
        return TensorSpec(
            name=str(item["name"]), shape=tuple(item["shape"]), dtype=str(item.get("dtype", "float32")),
            init=str(item.get("init", "randn")), low=item.get("low", -8), high=item.get("high", 8),
        )
    if isinstance(item, (tuple, list)) and len(item) in (3, 4):
        init = str(item[3]) if len(item) == 4 else "randn"
        return TensorSpec(name=str(item[0]), shape=tuple(item[1]), dtype=str(item[2]), init=init)
    raise UsageError(f"{where}: an input must be (name, shape, dtype[, init]) or a dict, got {item!r}")


def spec_from_declaration(decl: Any, where: str) -> KernelSpec:
    if isinstance(decl, KernelSpec):
        return decl
    if not isinstance(decl, dict):
        raise UsageError(f"{where}: expected a dict or KernelSpec, got {type(decl).__name__}")
    unknown = set(decl) - {"inputs", "out_idx", "reference", "atol", "rtol", "seed", "cpu"}
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    if "inputs" not in decl or "out_idx" not in decl:
        raise UsageError(f"{where}: needs 'inputs' and 'out_idx'")
    inputs = tuple(_tensor_spec(x, where) for x in decl["inputs"])
    for t in inputs:
        if t.init not in INIT_KINDS:
            raise UsageError(f"{where}: input {t.name}: init must be one of {', '.join(INIT_KINDS)}")
    out_idx = decl["out_idx"]
    out = (int(out_idx),) if isinstance(out_idx, int) else tuple(int(i) for i in out_idx)
    reference = decl.get("reference")
    if reference is not None and not callable(reference):
        raise UsageError(f"{where}: 'reference' must be callable")
    return KernelSpec(
        inputs=inputs, out_idx=out, reference=reference, atol=float(decl.get("atol", 1e-3)),
        rtol=float(decl.get("rtol", 1e-3)), seed=int(decl.get("seed", 0)), cpu=bool(decl.get("cpu", True)),
    )


def find_spec(module: ModuleType, function: str, path: Path) -> KernelSpec | None:
    declared = getattr(module, SPEC_ATTR, None)
    if declared is None:
        return None
    if not isinstance(declared, dict):
        raise UsageError(f"{path}: {SPEC_ATTR} must be a dict keyed by factory name")
    if function not in declared:
        return None
    return spec_from_declaration(declared[function], f"{path}: {SPEC_ATTR}[{function!r}]")


def derived_declaration(
    gm_tensors: Sequence[dict[str, Any]], outputs: Sequence[str], workspaces: Sequence[str]
) -> dict[str, Any]:
    """A TILESCOPE_SPEC entry made from the kernel's own signature, for a file that declares none.

    `gm_tensors` are the PrimFunc's GM tensor parameters in signature order (name, shape, dtype:
    tilescope.ir.walk.gm_tensors, kept in ir.json); `outputs` and `workspaces` name those that
    tilelang-ascend's `@tilelang.jit(out_idx=..., workspace_idx=...)` allocates itself. Every other
    tensor is an input, filled as the spec's defaults fill it (randn floats, randint integers), in
    signature order — what its compiled adapter expects as positional arguments. Symbolic dims stay
    names and resolve against the builder's parameters like a spec's shape entries (eval_dim). No
    reference: without one the correctness check is `not_run`, never a made-up pass.
    """
    allocated = set(outputs) | set(workspaces)
    unknown = sorted(allocated - {str(t["name"]) for t in gm_tensors})
    if unknown:
        raise UsageError(f"out_idx/workspace_idx name(s) {', '.join(unknown)} that are not GM tensors")
    inputs = [
        {"name": str(t["name"]), "shape": list(t["shape"]), "dtype": str(t["dtype"])}
        for t in gm_tensors
        if str(t["name"]) not in allocated
    ]
    return {
        "inputs": inputs,
        "out_idx": [i for i, t in enumerate(gm_tensors) if str(t["name"]) in set(outputs)],
    }


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}


def eval_dim(dim: int | str, params: dict[str, Any]) -> int:
    """An int, a parameter name or integer arithmetic over parameters ("M // 2 + 1")."""
    if isinstance(dim, int):
        return dim

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in params:
                raise UsageError(f"shape {dim!r}: no parameter {node.id!r}")
            return int(params[node.id])
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return int(_BINOPS[type(node.op)](ev(node.left), ev(node.right)))
        raise UsageError(f"shape {dim!r}: only ints, parameter names and + - * // % are allowed")

    try:
        tree = ast.parse(str(dim), mode="eval")
    except SyntaxError as exc:
        raise UsageError(f"shape {dim!r}: not an expression") from exc
    return ev(tree.body)


def input_shapes(spec: KernelSpec, params: dict[str, Any]) -> list[tuple[int, ...]]:
    return [tuple(eval_dim(d, params) for d in t.shape) for t in spec.inputs]


def resolve_dtype(dtype: str, params: dict[str, Any]) -> str:
    """A dtype name, or the name of a parameter holding one (`"dtype"` -> params["dtype"])."""
    value = params.get(dtype, dtype) if dtype.isidentifier() else dtype
    text = str(value)
    return text.rsplit(".", 1)[-1]  # "torch.float16" / T.float16 objects print with a prefix


def record(spec: KernelSpec, params: dict[str, Any], source: str) -> dict[str, Any]:
    """The spec as run, for manifest["kernel"]["spec"]: shapes and dtypes resolved against the
    parameters; `source` says where it came from (TILESCOPE_SPEC, or the kernel's signature)."""
    shapes = input_shapes(spec, params)
    return {
        "source": source,
        "inputs": [{"name": t.name, "shape": list(shape), "dtype": resolve_dtype(t.dtype, params),
                    "init": t.init} for t, shape in zip(spec.inputs, shapes, strict=True)],
        "out_idx": list(spec.out_idx),
        "reference": getattr(spec.reference, "__name__", "callable") if spec.reference else None,
        "atol": spec.atol, "rtol": spec.rtol, "seed": spec.seed, "cpu": spec.cpu,
    }


def make_inputs(spec: KernelSpec, params: dict[str, Any], device: str) -> list[Any]:
    """Deterministic inputs (seeded) on `device` ("cpu" or "npu")."""
    # deferred: torch/torch_npu are the NPU stack (the `npu` extra), seconds to import
    import torch

    gen = torch.Generator().manual_seed(spec.seed)
    out = []
    for t, shape in zip(spec.inputs, input_shapes(spec, params), strict=True):
        name = resolve_dtype(t.dtype, params)
        dtype = getattr(torch, name, None)
        if not isinstance(dtype, torch.dtype):
            raise UsageError(f"input {t.name}: unknown dtype {name!r}")
        is_float = dtype.is_floating_point
        init = t.init if (is_float or t.init != "randn") else "randint"
        if init == "randn":
            x = torch.randn(shape, generator=gen, dtype=torch.float32)
        elif init == "rand":
            x = torch.rand(shape, generator=gen, dtype=torch.float32)
        elif init == "randint":
            x = torch.randint(int(t.low), int(t.high), shape, generator=gen, dtype=torch.int64)
        elif init == "zeros":
            x = torch.zeros(shape)
        elif init == "ones":
            x = torch.ones(shape)
        else:
            x = torch.arange(int(torch.Size(shape).numel()), dtype=torch.float32).reshape(shape)
        # Generate on the CPU, then move: identical values on every device for a given seed.
        out.append(x.to(dtype).to(device))
    return out


def compare_outputs(
    actual: Sequence[Any], expected: Sequence[Any], names: Sequence[str], atol: float, rtol: float
) -> list[dict[str, Any]]:
    """Per output: max abs/rel error and whether every element is within atol + rtol·|expected|."""
    # deferred: torch/torch_npu are the NPU stack (the `npu` extra), seconds to import
    import torch

    rows = []
    for got, want, name in zip(actual, expected, names, strict=True):
        got_f = got.detach().to("cpu", torch.float64)
        want_f = torch.as_tensor(want).detach().to("cpu", torch.float64)
        if got_f.shape != want_f.shape:
            rows.append({"name": name, "passed": False, "shape": list(got_f.shape),
                         "expected_shape": list(want_f.shape), "max_abs_err": None, "max_rel_err": None,
                         "mismatched": None, "numel": int(want_f.numel())})
            continue
        diff = (got_f - want_f).abs()
        rel = diff / want_f.abs().clamp_min(1e-12)
        bad = diff > (atol + rtol * want_f.abs())
        bad |= torch.isnan(got_f) != torch.isnan(want_f)
        rows.append({
            "name": name,
            "passed": not bool(bad.any()),
            "shape": list(got_f.shape),
            "max_abs_err": float(torch.nan_to_num(diff, nan=float("inf")).max()) if diff.numel() else 0.0,
            "max_rel_err": float(torch.nan_to_num(rel, nan=float("inf")).max()) if rel.numel() else 0.0,
            "mismatched": int(bad.sum()),
            "numel": int(diff.numel()),
        })
    return rows


def as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


@dataclass
class CheckResult:
    """What goes into manifest["correctness"]."""

    status: str  # "pass" | "fail" | "error" | "not_run"
    device: str | None = None
    target: str | None = None
    reason: str | None = None
    atol: float | None = None
    rtol: float | None = None
    seed: int | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"status": self.status, "device": self.device, "target": self.target,
                             "reason": self.reason, "outputs": self.outputs}
        if self.atol is not None:
            d["tolerance"] = {"atol": self.atol, "rtol": self.rtol}
            d["seed"] = self.seed
            errs = [o["max_abs_err"] for o in self.outputs if o.get("max_abs_err") is not None]
            rels = [o["max_rel_err"] for o in self.outputs if o.get("max_rel_err") is not None]
            d["max_abs_err"] = max(errs) if errs else None
            d["max_rel_err"] = max(rels) if rels else None
        return d


def output_names(func: Any, out_idx: Sequence[int]) -> list[str]:
    """Kernel argument names of the outputs (from the PrimFunc's params), for the report."""
    try:
        params = list(func.params)
        # The buffer's name is the one in the kernel source ("C"); the param var is "C_handle".
        return [str(func.buffer_map[params[i]].name) for i in out_idx]
    except Exception:  # a PrimFunc-like object we cannot introspect; names are cosmetic
        return [f"out{i}" for i in out_idx]
