"""The bundled sample directories: the msprof op samples and `generate_samples` for all of them."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from .cluster import ClusterSpec, write_cluster_run
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

SAMPLES = (
    "attention_unfused", "attention_fused", "tilelang_fa_msprof_op", "tilelang_fa_msprof_op_multi",
    "cluster_8rank",
)
# the bundled multi-rank run: small (2 steps of 7 tasks per rank), with the generator's default plants
CLUSTER_SAMPLE = ClusterSpec(ranks=8, steps=2, slow_rank=3, slow_link=(5, 6))


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


def write_cluster_sample(root: Path, spec: ClusterSpec = CLUSTER_SAMPLE) -> None:
    """`cluster_8rank/`: an 8-rank torch_npu run (generator/cluster.py) with what it plants named in
    its manifest, so a test can check that `tilescope analyze` finds exactly that."""
    write_cluster_run(root, spec)
    assert spec.slow_link is not None and spec.slow_rank is not None  # the sample plants both
    src, dst = spec.slow_link
    contents = {
        "ranks": spec.ranks,
        "steps": spec.steps,
        "tasks_per_rank": spec.steps * 7,
        "planted": {
            "slow_rank": spec.slow_rank,
            "slow_kernel": spec.slow_kernel,
            "slow_factor": spec.slow_factor,
            "slow_link": [src, dst],
            "slow_link_gbps": spec.link_gbps * spec.slow_link_factor,
            "link_gbps": spec.link_gbps,
        },
        "model": "every rank runs the same 6 kernels per step, then one ring all-reduce of "
                 f"{spec.allreduce_mb:g} MB; the all-reduce's transfer starts when the last rank arrives",
    }
    write_manifest(root, "cluster_8rank", "a folder of torch_npu *_ascend_pt folders, one per rank", contents)
    write_readme(
        root,
        "cluster_8rank (generated sample)",
        (
            f"An {spec.ranks}-rank torch_npu run written by `generator/cluster.py` "
            f"(`write_cluster_run`): one `*_ascend_pt` folder per rank with `profiler_info_N.json`, "
            "`kernel_details.csv`, `step_trace_time.csv`, `communication.json` and "
            f"`communication_matrix.json`; {spec.steps} steps of 6 kernels and one ring all-reduce per rank. "
            "The numbers come from the generator's deterministic step model, not from the 910B2 "
            "cost model above.\n\n"
            f"Planted: rank {spec.slow_rank} runs {spec.slow_kernel} {spec.slow_factor:g}x longer "
            f"(TS601 slow-rank, TS603 rank-kernel-straggler); HCCS link {src}->{dst} runs at "
            f"{spec.link_gbps * spec.slow_link_factor:g} GB/s instead of {spec.link_gbps:g} GB/s "
            "(TS604 slow-link). `tilescope analyze sample_traces/cluster_8rank` shows both; "
            "`python sample_traces/generate.py --ranks 8 --slow-rank -1 --out DIR` writes the same run "
            "without the slow rank, to `tilescope diff` against."
        ),
    )


def generate_samples(out: Path) -> list[Path]:
    """(Re)write every bundled sample under ``out``; other folders there (e.g. kernels/) are left alone."""
    writers: dict[str, Callable[[Path], None]] = {
        "attention_unfused": lambda p: write_torch_npu_sample(p, fused=False),
        "attention_fused": lambda p: write_torch_npu_sample(p, fused=True),
        "tilelang_fa_msprof_op": write_msprof_op_sample,
        "tilelang_fa_msprof_op_multi": write_msprof_op_multi_sample,
        "cluster_8rank": write_cluster_sample,
    }
    written = []
    for name in SAMPLES:
        root = out / name
        if root.exists():
            shutil.rmtree(root)
        writers[name](root)
        written.append(root)
    return written
