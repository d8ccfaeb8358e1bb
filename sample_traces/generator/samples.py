"""The bundled sample directories: the msprof op samples and `generate_samples` for all of them."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from .model import (
    AIC_CORES,
    AIV_CORES,
    OPPROF_DIR,
)
from .msprof_op import (
    MSOP_KERNEL,
    MSOP_SLOW_BLOCK,
    msprof_op_launch,
)
from .output import (
    write_file,
    write_manifest,
    write_readme,
)
from .torch_npu import write_torch_npu_sample

SAMPLES = ("attention_unfused", "attention_fused", "tilelang_fa_msprof_op", "tilelang_fa_msprof_op_multi")


def write_msprof_op_sample(root: Path) -> None:
    files = msprof_op_launch("single")
    for metric, text in files.items():
        write_file(root / OPPROF_DIR / f"{metric}.csv", text)
    _msop_manifest(root, "tilelang_fa_msprof_op", "msprof op single-operator directory (OPPROF_*)", 1)


def write_msprof_op_multi_sample(root: Path) -> None:
    stamps = ("20261130000000123", "20261130000002456")
    for launch, stamp in enumerate(stamps):
        # the second launch runs with a warmer L2: a little faster, a few more hits
        files = msprof_op_launch(f"multi/{launch}", warm=1.0 - 0.02 * launch, l2_hit=0.60 + 0.03 * launch)
        for metric, text in files.items():
            write_file(
                root / OPPROF_DIR / "device0" / MSOP_KERNEL / str(launch) / f"{metric}_{stamp}.csv", text
            )
    _msop_manifest(
        root,
        "tilelang_fa_msprof_op_multi",
        "msprof op multi-operator layout (OPPROF_*/device0/{OpName}/{launch}/{Metric}_{timestamp}.csv)",
        2,
    )


def _msop_manifest(root: Path, name: str, fmt: str, launches: int) -> None:
    contents = {
        "kernel": MSOP_KERNEL,
        "launches": launches,
        "aic_metrics": "Default",
        "block_dim": AIC_CORES,
        "mix_block_dim": AIV_CORES,
        "rows_per_metric_file": 3 * AIC_CORES,
        "workload": "TileLang flash-attention forward, batch 4, 16 heads, seq 2048, head_dim 128, fp16",
        "planted": {
            "cube_vector_imbalance": "aic_cube_ratio ~0.30, aiv_vec_ratio ~0.70 (softmax side dominates)",
            "load_imbalance": f"block {MSOP_SLOW_BLOCK} takes ~1.35x the median block time",
            "ub_bank_conflicts": "aiv_vec_bank_cflt_ratio ~0.2",
            "l2_hit_rate": "~60 % total hit rate",
        },
    }
    write_manifest(root, name, fmt, contents)
    write_readme(
        root,
        f"{name} (generated sample)",
        (
            f"`msprof op --aic-metrics=Default` output of a TileLang flash-attention forward kernel "
            f"`{MSOP_KERNEL}` (TileLang names the entry `{{prim_func}}_kernel`, msprof op "
            f"appends `_mix_aic`), "
            f"Block Dim {AIC_CORES} / Mix Block Dim {AIV_CORES}, {launches} launch(es).\n\n"
            "Each launch has `OpBasicInfo` and the seven metric CSVs (PipeUtilization, "
            "Memory, MemoryL0, MemoryUB, "
            "ResourceConflictRatio, L2Cache, ArithmeticUtilization) with one row per "
            "(block_id, sub_block_id in "
            "cube0/vector0/vector1), `NA` on the other side's columns and a trailing comma on every line.\n\n"
            "Planted: the vector (softmax) side dominates (cube ~30 % busy, vector ~70 %), block "
            f"{MSOP_SLOW_BLOCK} is ~1.35x slower than the median, UB bank conflicts ~0.2, L2 hit rate ~60 %."
        ),
    )


def generate_samples(out: Path) -> list[Path]:
    """(Re)write every bundled sample under ``out``; other folders there (e.g. kernels/) are left alone."""
    writers: dict[str, Callable[[Path], None]] = {
        "attention_unfused": lambda p: write_torch_npu_sample(p, fused=False),
        "attention_fused": lambda p: write_torch_npu_sample(p, fused=True),
        "tilelang_fa_msprof_op": write_msprof_op_sample,
        "tilelang_fa_msprof_op_multi": write_msprof_op_multi_sample,
    }
    written = []
    for name in SAMPLES:
        root = out / name
        if root.exists():
            shutil.rmtree(root)
        writers[name](root)
        written.append(root)
    return written
