"""The ir.json document: assembly from captured kernels, schema and validation.

Versioned by `schema_version` (major.minor: a minor bump only adds optional fields). The JSON Schema
is `analyzer/ir/schema/ir.schema.json`.
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from tilescope.chips import ChipSpec
from tilescope.ir.footprint import annotate_allocations, clamp_total_k, footprints
from tilescope.ir.linemap import build_line_map, find_kernel_def, map_kernel
from tilescope.ir.lowering import STAGE_PASSES, KernelCapture, stage_file

SCHEMA_VERSION = "1.1"  # 1.1: failure.detail, lowering, chip_reason, explicit_versions, copy regions
SCHEMA_PATH = Path(__file__).parent / "schema" / "ir.schema.json"


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def _tilescope_version() -> str:
    try:
        # deferred: importlib.metadata (email, zipfile, csv: ~60 ms) only to stamp IR written here
        from importlib.metadata import version

        return version("tilescope")
    except Exception:  # not installed as a distribution (a checkout on sys.path)
        return "0.1.0"


def entry_name(prim_func_name: str) -> str:
    """TileLang names the device entry `{prim_func}_kernel`."""
    return f"{prim_func_name}_kernel"


# long: one record per kernel built key by key in the order ir.schema.json documents them: the
# keys are the file's contract and read best side by side with the schema.
def assemble_ir_json(
    path: Path,
    function: str,
    params: dict[str, Any],
    chip: ChipSpec,
    kernels: list[KernelCapture],
    tree: ast.Module,
    tilelang_version: str,
    sha256: str,
    stage_passes: dict[str, str] | None = None,
) -> dict[str, Any]:
    passes = STAGE_PASSES if stage_passes is None else stage_passes  # the lowering stack's own

    several = len(kernels) > 1
    out_kernels: list[dict[str, Any]] = []
    line_map: list[dict[str, Any]] = []
    dialect = None
    tvm_module = None
    for kc in kernels:
        entry = entry_name(kc.name)
        rec: dict[str, Any] = {
            "name": kc.name,
            "entry": entry,
            "label": kc.label,
            "failure": kc.failure,
            "lower_seconds": round(kc.lower_seconds, 4),
        }
        rec["stages"] = [
            {
                "name": s,
                "file": stage_file(kc.name, s, several),
                "pass": passes.get(s),
                "lines": len(kc.stages[s].splitlines()),
            }
            for s in ("tvmscript", *passes, "final", "ascendc")
            if s in kc.stages
        ]
        w = kc.walked
        if w:
            dialect = dialect or w["dialect"]
            tvm_module = tvm_module or w["tvm_module"]
            annotate_allocations(w, kc.versions)
            clamp_total_k(w)
            map_kernel(
                w,
                find_kernel_def(tree, kc.name),
                kc.stages.get("tvmscript", ""),
                kc.stages.get("ascendc"),
                entry,
            )
            for r in w["reduces"]:
                r["kind"] = (r["kind"] or "").strip('"')
            rec.update(
                {
                    "dialect": w["dialect"],
                    "grid": w["grid"],
                    "source_def_line": w.get("source_def_line"),
                    "source_launch_line": w.get("source_launch_line"),
                    "gm_tensors": w["gm_tensors"],
                    "allocations": w["allocations"],
                    "versions": kc.versions,
                    "explicit_versions": w.get("explicit_versions", {}),
                    "lowered_allocations": kc.lowered_allocations,
                    "footprint": footprints(w, kc.lowered_allocations, chip),
                    "loops": w["loops"],
                    "gemms": w["gemms"],
                    "copies": w["copies"],
                    "elementwise": w["elementwise"],
                    "reduces": w["reduces"],
                    "fills": w["fills"],
                    "gm_reads": sorted({c["src"] for c in w["copies"] if c["src_level"] == "GM"}),
                    "gm_writes": sorted({c["dst"] for c in w["copies"] if c["dst_level"] == "GM"}),
                }
            )
            rec["core_type"] = _core_type(w)
            cores = launch_cores(kc.stages.get("ascendc"))
            if cores is not None:  # what the generated Ascend C launches its blocks on
                rec["launch_cores"] = cores
            if w.get("workspaces"):  # tilelang-ascend's declared cross-core GM workspaces
                rec["workspaces"] = w["workspaces"]
            if w.get("outputs"):  # tilelang-ascend's jit out_idx: collect passes every other tensor
                rec["outputs"] = w["outputs"]
            line_map.extend(build_line_map(w, kc.name))
        else:
            kdef = find_kernel_def(tree, function.split(",")[0])
            rec["source_def_line"] = kdef.lineno if kdef is not None else None
        out_kernels.append(rec)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"tilescope": _tilescope_version(), "tilelang": tilelang_version},
        "kernel_file": str(path),
        "kernel_sha256": sha256,
        "function": function,
        "params": {k: _jsonable(v) for k, v in params.items()},
        "chip": chip.name,
        "chip_reason": chip.chosen_because,
        "dialect": dialect,
        "tvm_module": tvm_module,
        "lowered": all(k.failure is None for k in kernels),
        "kernels": out_kernels,
        "line_map": line_map,
        "line_map_notes": (
            "source lines come from the kernel file's AST (allocations, T.copy/T.gemm/T.reduce calls, "
            "loops), matched to IR records by buffer names in order; Ascend C lines by intrinsic family "
            "plus GM tensor name; merged on-chip buffers map by order; Python-unrolled ops share one line."
        ),
    }


# `KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2)` in generated Ascend C: a MIX_AIC kernel's
# block is one AI Core group (1 AIC + its AIVs; tilelang-ascend launches even Vector-only kernels
# so, its `vid` picking the sub-core), an AIV_ONLY kernel's block one AIV core.
_KERNEL_TYPE_RE = re.compile(r"KERNEL_TYPE_(AIV_ONLY|AIC_ONLY|MIX_AIC_\d+_\d+|MIX_AIV_\d+_\d+)")


def launch_cores(ascendc: str | None) -> str | None:
    """"aic" or "aiv": the cores one block of the kernel occupies, from its Ascend C's kernel
    type (None when the source declares none, as tilelang 0.1.15's 950 code does)."""
    m = _KERNEL_TYPE_RE.search(ascendc or "")
    if m is None:
        return None
    kind = m.group(1)
    return "aiv" if kind == "AIV_ONLY" or kind.startswith("MIX_AIV") else "aic"


def _core_type(w: dict[str, Any]) -> str:
    cube = bool(w["gemms"])
    vector = bool(w["elementwise"] or w["reduces"]) or any(a["hardware"] == "UB" for a in w["allocations"])
    return "mix" if cube and vector else ("cube" if cube else ("vector" if vector else "unknown"))


@cache
def load_schema() -> dict[str, Any]:
    return dict(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


@cache
def _ir_validator() -> Any:
    # deferred: jsonschema (~0.1 s) only when validating
    import jsonschema

    return jsonschema.Draft202012Validator(load_schema())


def ir_schema_error(doc: dict[str, Any]) -> Any:
    """The most relevant way `doc` breaks ir.schema.json (a jsonschema.ValidationError), or None."""
    # deferred: jsonschema (~0.1 s) only when validating
    import jsonschema

    return jsonschema.exceptions.best_match(_ir_validator().iter_errors(doc))


def validate_ir(doc: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when `doc` does not follow ir.schema.json."""
    error = ir_schema_error(doc)
    if error is not None:
        raise error


def find_kernel(ir: dict[str, Any], kernel_name: str) -> dict[str, Any] | None:
    """The ir.json kernel a profiler row belongs to: `{prim_func}_kernel`, plus `_mix_aic`/`_mix_aiv`."""
    name = kernel_name
    for suffix in ("_mix_aic", "_mix_aiv"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    for k in ir.get("kernels", []):
        if name in (k["entry"], k["name"]):
            return dict(k)
    for k in ir.get("kernels", []):  # profilers may decorate further (e.g. prefixes); last resort
        if k["entry"] in name:
            return dict(k)
    return None
