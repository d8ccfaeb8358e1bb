"""A representative report dict and bundle for the renderer tests.

`sample_report(bundle)` follows the report contract of docs/internals.md (summary, top kernels,
findings as Finding.to_dict(), skipped rules, errors, inputs with chip). When the real
`build_report` is available, `real_report()` builds one from a sample bundle instead and the
renderer tests run on both.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from tilescope.findings import Finding, Location, Severity

from support import REPO_ROOT

HOSTILE = (
    "<img src=x onerror=alert(1)>",
    "a|b",
    "`x`",
    "@org/team",
    "[x](javascript:alert(1))",
    "</script><script>alert(2)</script>",
    "<!--",
    "```",
    "a\nb\r\n| c |",
    "' onmouseover='alert(3)",
)


TVMSCRIPT = "\n".join(f"    line_{i} = T.op({i})  # tvm" for i in range(1, 61)) + "\n"


KERNEL_CPP = "\n".join(f"  pipe_barrier(PIPE_ALL); // cpp {i}" for i in range(1, 41)) + "\n"


KERNEL_PY = "\n".join(f"    T.copy(A[{i}], a_ub)  # src {i}" for i in range(1, 31)) + "\n"


def _findings() -> list[Finding]:
    return [
        Finding(
            code="TS101", slug="unfused-attention", severity=Severity.HIGH,
            kernels=("BatchMatMul_1", "ScaledMaskedSoftmax_2", "BatchMatMul_3"),
            message="attention runs as 3 kernels with 2 round trips through HBM",
            evidence={"chain_us": 812.5, "hbm_round_trips": 2, "threshold_chain_len": 3,
                      "shapes": [[8, 16, 2048, 128]]},
            recommendation="Fuse QK^T, softmax and PV into one flash-attention kernel.",
            est_saving_us=640.0, share_of_total=0.128,
            locations=(Location(file="kernels/attn.py", line=12, end_line=13, stage="source"),
                       Location(file="ir/tvmscript.py", line=30, stage="tvmscript"),
                       Location(file="ir/kernel.cpp", line=20, stage="ascendc")),
            occurrences=4,
        ),
        Finding(
            code="TS201", slug="vector-bound-kernel", severity=Severity.MEDIUM,
            kernels=("flash_attn_fwd_kernel_mix_aiv",),
            message="Vector busy 91 % while Cube idles 70 %",
            evidence={"aiv_vec_ratio": 0.91, "aic_cube_ratio": 0.3, "threshold": 0.8},
            recommendation="Overlap the softmax with the next QK^T tile (double-buffer UB).",
            est_saving_us=180.0, share_of_total=0.036,
            locations=(Location(file="kernels/attn.py", line=20, stage="source"),),
        ),
        Finding(
            code="TS402", slug="small-launch", severity=Severity.LOW,
            kernels=("Cast_7",), message="12 launches shorter than 5 µs",
            evidence={"launches": 12, "median_us": 3.1}, recommendation="Fuse the cast into its producer.",
            est_saving_us=30.0, share_of_total=0.006,
        ),
        Finding(
            code="TS402", slug="small-launch", severity=Severity.INFO,
            kernels=("Mul_9",), message="3 launches shorter than 5 µs",
            evidence={"launches": 3}, recommendation="Fuse the mul into its producer.",
            est_saving_us=2.0, share_of_total=0.0004,
        ),
    ]


def make_bundle(root: Path) -> Path:
    (root / "ir").mkdir(parents=True, exist_ok=True)
    (root / "profile").mkdir(exist_ok=True)
    (root / "manifest.json").write_text('{"kernel": "attn.py:flash_fwd"}\n')
    (root / "ir" / "tvmscript.py").write_text(TVMSCRIPT)
    (root / "ir" / "kernel.cpp").write_text(KERNEL_CPP)
    (root / "kernels").mkdir(exist_ok=True)
    (root / "kernels" / "attn.py").write_text(KERNEL_PY)
    return root


def sample_report(bundle: Path | None = None) -> dict[str, Any]:
    # per-kernel figures as build_report writes them: pipe ratios of their side, shares of the launch
    kernels = [
        {"name": "BatchMatMul_1", "op_type": "BatchMatMul", "core_type": "AI_CORE", "launches": 4,
         "total_us": 2100.0, "median_us": 520.0, "share": 0.42, "aic_cube_ratio": 0.81,
         "aic_mte2_ratio": 0.55, "aic_mte1_ratio": 0.3, "aic_scalar_ratio": 0.05,
         "aic_cube_share": 0.79, "aic_mte2_share": 0.54, "aic_mte1_share": 0.29, "aic_scalar_share": 0.05,
         "cube_share": 0.79, "sol_pct": 52.0, "sol_bound": "cube",
         "arithmetic_intensity": 120.0, "achieved_tflops": 180.0, "input_shapes": "8,16,2048,128"},
        {"name": "ScaledMaskedSoftmax_2", "op_type": "ScaledMaskedSoftmax", "core_type": "AI_VECTOR_CORE",
         "launches": 4, "total_us": 1500.0, "median_us": 370.0, "share": 0.30, "aiv_vec_ratio": 0.62,
         "aiv_mte2_ratio": 0.7, "aiv_mte3_ratio": 0.5, "aiv_scalar_ratio": 0.1,
         "aiv_vec_share": 0.6, "aiv_mte2_share": 0.68, "aiv_mte3_share": 0.49, "aiv_scalar_share": 0.1,
         "vector_share": 0.6, "sol_pct": 71.0, "sol_bound": "memory",
         "arithmetic_intensity": 1.5, "achieved_tflops": 2.0},
        {"name": "Cast_7", "op_type": "Cast", "core_type": "AI_VECTOR_CORE", "launches": 12,
         "total_us": 40.0, "median_us": 3.1, "share": 0.008, "aiv_vec_ratio": 0.2, "aiv_vec_share": 0.2,
         "vector_share": 0.2},
    ]
    report: dict[str, Any] = {
        "schema_version": "1.0",
        "tool": {"name": "tilescope", "version": "0.1.0"},
        "inputs": {"path": str(bundle) if bundle else "runs/fa-v1", "format": "bundle",
                   "chip": {"name": "910B2", "peak_fp16_tflops": 353.9, "hbm_bandwidth_gbps": 1600.0}},
        "summary": {"total_device_us": 5000.0, "kernel_count": 20, "distinct_kernels": 3,
                    "shares": {"cube": 0.28, "vector": 0.70, "mte": 0.12, "scalar": 0.03},
                    "units": {u: {"busy_us": v * 5000.0, "share": v, "coverage": 1.0}
                              for u, v in (("cube", 0.28), ("vector", 0.70), ("mte", 0.12),
                                           ("scalar", 0.03))},
                    "units_definition": "busy share of device time",
                    "device_time": {"device_us": 5000.0, "wall_us": 6000.0, "idle_us": 1000.0},
                    "findings": {"est_recoverable_us": 1200.0, "est_recoverable_share": 0.24,
                                 "est_idle_recoverable_us": 0.0,
                                 "saving_by_severity": {"high": {"device_us": 1000.0}}}},
        "top_kernels": kernels,
        "timeline": [{"name": k["name"], "start_ns": 1_000_000 + i * 600_000, "duration_us": k["median_us"],
                      "core_type": k["core_type"], "stream_id": 2} for i, k in enumerate(kernels)],
        "findings": [f.to_dict() for f in _findings()],
        "skipped": [{"code": "TS301", "slug": "l2-cache-thrash", "missing": ["aic_l2_hit_rate"]}],
        "errors": [{"code": "TS999", "slug": "broken-rule", "severity": "info", "kernels": [],
                    "message": "rule TS999 (broken-rule) crashed and was skipped: ZeroDivisionError",
                    "evidence": {}, "source": "tilescope-engine-error"}],
    }
    return report


def hostile_report(bundle: Path | None = None, name: str = HOSTILE[0]) -> dict[str, Any]:
    """The sample report with `name` in every untrusted slot: kernel names, shapes, messages, paths."""
    r = copy.deepcopy(sample_report(bundle))
    r["top_kernels"][0]["name"] = name
    r["top_kernels"][0]["op_type"] = name
    r["timeline"][0]["name"] = name
    f = r["findings"][0]
    f["kernels"] = [name, "b"]
    f["message"] = f"slow: {name}"
    f["slug"] = name
    f["evidence"] = {name: name, "shape": name}
    f["recommendation"] = f"rename {name}"
    f["locations"].append({"file": name, "line": 1, "end_line": None, "stage": "source", "label": name})
    r["skipped"][0]["missing"] = [name]
    return r


def real_report() -> dict[str, Any] | None:
    """A report built by the real pipeline (load, analyse, build_report) from the unfused sample."""
    from tilescope.diff import analyze_path

    sample = REPO_ROOT / "sample_traces" / "attention_unfused"
    if not sample.exists():
        return None
    report = analyze_path(sample)
    report.pop("_profile")
    return report
