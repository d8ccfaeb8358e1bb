"""Generated in-memory profiles for the dashboard's tests and its 1,000,000-kernel measurement.

Vectorised (numpy), deterministic (seeded), canonical columns only; never used by the app itself.
The data is GENERATED, not measured: it exercises paging, windowing and rendering, not the rules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tilescope.chips import get_chip
from tilescope.findings import Finding, Location, Severity
from tilescope.metrics import with_derived_metrics
from tilescope.profile import Profile, SourceInfo, Timeline

HOSTILE = "<img src=x onerror=alert(1)>"
CORE_TYPES = np.array(["AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU"], dtype=object)


def synthetic_profile(
    n: int = 200,
    names: int = 12,
    streams: int = 2,
    seed: int = 0,
    hostile: bool = False,
    with_blocks: bool = True,
    with_host: bool = True,
    path: str = "synthetic",
) -> Profile:
    rng = np.random.default_rng(seed)
    kernel_names = np.array([f"kernel_{i:03d}" for i in range(names)], dtype=object)
    if hostile:
        kernel_names[0] = HOSTILE
    idx = rng.integers(0, names, n)
    idx[: min(n, names)] = np.arange(min(n, names))  # every name appears at least once
    core = CORE_TYPES[idx % len(CORE_TYPES)]
    dur = np.round(rng.gamma(2.0, 20.0, n) + 1.0 + idx * 0.5, 3)
    gap = rng.integers(1_000, 5_000, n)
    start = 1_736_413_971_558_972_000 + np.cumsum(np.round(dur * 1000).astype(np.int64) + gap)
    cube = np.where(np.isin(core, ["AI_CORE", "MIX_AIC"]), rng.uniform(0.2, 0.9, n), np.nan)
    vec = np.where(np.isin(core, ["AI_VECTOR_CORE", "MIX_AIV", "MIX_AIC"]), rng.uniform(0.1, 0.9, n), np.nan)
    m = 128 + 64 * (idx % 8)
    kernels = pd.DataFrame(
        {
            "name": pd.array(kernel_names[idx], dtype="string"),
            "op_type": pd.array(
                np.where(
                    np.isin(core, ["AI_CORE", "MIX_AIC"]),
                    "MatMulV2",
                    np.array([f"Op{i % 5}" for i in idx], dtype=object),
                ),
                dtype="string",
            ),
            "core_type": pd.array(core, dtype="string"),
            "start_ns": start.astype(np.int64),
            "duration_us": dur,
            "wait_us": np.round(gap / 1000.0, 3),
            "block_dim": pd.array(np.full(n, 24), dtype="Int64"),
            "stream_id": pd.array(idx % streams + 2, dtype="Int64"),
            "input_shapes": pd.array([f"{a},{a};{a},{a}" for a in m], dtype="string"),
            "input_dtypes": pd.array(["DT_FLOAT16;DT_FLOAT16"] * n, dtype="string"),
            "output_shapes": pd.array([f"{a},{a}" for a in m], dtype="string"),
            "output_dtypes": pd.array(["DT_FLOAT16"] * n, dtype="string"),
            "aic_time_us": np.where(np.isnan(cube), np.nan, dur * 0.95),
            "aic_cube_ratio": cube,
            "aic_mte1_ratio": cube * 0.6,
            "aic_mte2_ratio": rng.uniform(0.1, 0.95, n),
            "aic_fixpipe_ratio": cube * 0.1,
            "aic_scalar_ratio": cube * 0.2,
            "aiv_time_us": np.where(np.isnan(vec), np.nan, dur * 0.9),
            "aiv_vec_ratio": vec,
            "aiv_mte2_ratio": vec * 0.5,
            "aiv_mte3_ratio": vec * 0.3,
            "aiv_scalar_ratio": vec * 0.2,
            "aic_main_mem_read_gbps": rng.uniform(100, 1400, n),
            "aic_main_mem_write_gbps": rng.uniform(50, 600, n),
        }
    )
    blocks = None
    if with_blocks:
        b = np.repeat(np.arange(24), 3)
        sub = np.tile(np.array(["cube0", "vector0", "vector1"], dtype=object), 24)
        t = 40 + rng.uniform(0, 5, len(b)) + (b == 3) * 30.0
        blocks = pd.DataFrame(
            {
                "name": pd.array([str(kernel_names[0])] * len(b), dtype="string"),
                "block_id": b,
                "sub_block_id": pd.array(sub, dtype="string"),
                "aic_time_us": np.where(sub == "cube0", t, np.nan),
                "aiv_time_us": np.where(sub != "cube0", t, np.nan),
            }
        )
    timeline = None
    if with_host:
        host = pd.DataFrame(
            {
                "lane": pd.array(["Python"] * n, dtype="string"),
                "name": pd.array([f"aten::op{i % 5}" for i in idx], dtype="string"),
                "cat": "cpu_op",
                "pid": 1,
                "tid": 1,
                "start_ns": start - 20_000,
                "duration_us": np.full(n, 15.0),
            }
        )
        tk = kernels[["name", "stream_id", "start_ns", "duration_us"]].copy()
        timeline = Timeline(kernels=tk, host_ops=host, counters=pd.DataFrame(), flows=pd.DataFrame())
    return Profile(
        source=SourceInfo(path=Path(path), format="kernel_csv"),
        kernels=kernels,
        chip=get_chip("910B2"),
        blocks=blocks,
        timeline=timeline,
    )


def synthetic_report(profile: Profile, hostile: bool = False) -> dict[str, Any]:
    """A report dict shaped like `build_report`'s, with findings pointing at IR lines."""
    names = list(dict.fromkeys(profile.kernels["name"].astype(str)))
    total = float(profile.kernels["duration_us"].sum())
    kernel = names[0] if hostile else names[1 % len(names)]
    findings = [
        Finding(
            "TS201",
            "memory-bound-kernel",
            Severity.HIGH,
            (kernel,),
            f"{kernel} spends 91 % of its time in MTE2 (GM→UB) while Cube is 22 % busy",
            evidence={"aic_mte2_ratio": 0.91, "threshold": 0.8, "chip_hbm_gbps": 1750.0},
            recommendation="Enlarge the K tile so each GM load feeds more Cube work; double-buffer loads.",
            est_saving_us=total * 0.08,
            share_of_total=0.08,
            locations=(
                Location("ir/tvmscript.py", 5, 6, "tvmscript", "the K loop"),
                Location("ir/kernel.cpp", 9, None, "ascendc", "GM→L1 copy"),
            ),
        ),
        Finding(
            "TS110",
            "unfused-softmax-chain",
            Severity.MEDIUM,
            (names[2 % len(names)],),
            "Mul → Softmax → Cast run as 3 kernels over the same tensor",
            evidence={"chain": ["Mul", "Softmax", "Cast"], "bytes_round_trips": 2},
            recommendation="Fuse the chain (FlashAttention-style) to keep the tile in UB.",
            est_saving_us=total * 0.035,
            share_of_total=0.035,
        ),
        Finding(
            "TS402",
            "small-block-dim",
            Severity.LOW,
            (names[3 % len(names)],),
            "Block Dim 8 < 24 Cube cores",
            evidence={"block_dim": 8, "aic_count": 24},
            recommendation="Split the grid so every core gets work.",
            est_saving_us=total * 0.006,
            share_of_total=0.006,
        ),
    ]
    from tilescope.summary import summarize

    # the summary every view reads (tilescope.summary), over these made-up findings
    summary = summarize(profile.with_kernels(with_derived_metrics(profile.kernels, profile.chip)), findings)
    return {"summary": summary, "findings": [f.to_dict() for f in findings], "skipped": [], "errors": []}


def write_ir_bundle(ir_dir: Path, hostile: bool = False) -> dict[str, Any]:
    """A minimal ir/ directory (three stages + ir.json with a line map) for the IR view."""
    ir_dir.mkdir(parents=True, exist_ok=True)
    comment = f"# {HOSTILE}\n" if hostile else ""
    (ir_dir / "tvmscript.py").write_text(
        comment + '@T.prim_func\ndef main(A: T.Buffer((1024, 1024), "float16")):\n'
        '    a_l1 = T.alloc_buffer((128, 64), "float16", scope="shared.dyn")\n'
        '    for kk in T.serial(16, annotations={"num_stages": 2}):\n'
        "        T.ascend_copy(A[0, kk * 64], a_l1[0, 0])\n"
        "        T.gemm(a_l1, b_l1, c_l0)\n" + "".join(f"    # filler {i}\n" for i in range(80)),
        encoding="utf-8",
    )
    (ir_dir / "final.py").write_text(
        '@T.prim_func\ndef main(A_handle: T.handle):\n    T.func_attr({"global_symbol": "main"})\n'
        '    for kk in range(16):\n        T.call_extern("asc_copy_gm2l1", kk)\n',
        encoding="utf-8",
    )
    (ir_dir / "kernel.cpp").write_text(
        '#include "kernel_operator.h"\n// generated by tilelang\n'
        'extern "C" __global__ __aicore__ void main_kernel(GM_ADDR A) {\n'
        "  AscendC::TPipe pipe;\n  int x = 0;\n  for (int kk = 0; kk < 16; ++kk) {\n"
        "    // load the K tile\n    __cbuf__ half* a_l1;\n    asc_copy_gm2l1(a_l1, A + kk * 64, 8192);\n"
        "    asc_mmad(c_l0, a_l0, b_l0, 128, 64, 128);\n  }\n}\n",
        encoding="utf-8",
    )
    # The layout of analyzer/ir/capture.py: per-kernel stage lists, one shared line map. The
    # "evil" stage proves that ir.json cannot point the viewer outside ir/.
    stages = [
        {"name": "tvmscript", "file": "tvmscript.py"},
        {"name": "final", "file": "final.py"},
        {"name": "ascendc", "file": "kernel.cpp"},
        {"name": "evil", "file": "../../etc/passwd"},
    ]
    return {
        "kernels": [{"name": "main", "stages": stages}],
        "line_map": [
            {
                "kernel": "main",
                "op": "copy",
                "what": "A (GM) -> a_l1 (L1)",
                "source_line": 12,
                "tvmscript_line": 5 + bool(hostile),
                "ascendc_lines": [9],
            }
        ],
    }
