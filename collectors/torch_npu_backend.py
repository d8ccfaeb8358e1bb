"""torch_npu profiler backend: one child process per aic-metrics group.

The profiler configuration is built here as a plain, JSON-able description
(`build_profiler_config`) and only turned into torch_npu objects inside the child
(`translate_config`), because torch_npu cannot even be imported without CANN: the description can be
tested, recorded in the manifest and shipped to the child, the objects cannot.

torch_npu takes a single `aic_metrics` group per profiler run (and at ProfilerLevel.Level0 it silently
resets it to AiCoreNone), so each requested group is a separate run at Level1 in a fresh process,
written by `tensorboard_trace_handler` to `profile/<Group>/<worker>_<ts>_ascend_pt/`. The bundle
loader merges the groups into one kernel table.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tilescope.collectors.proc import WORKER, CommandRecord, run_command, tail
from tilescope.errors import TilescopeError
from tilescope.run_module import command

# Member name -> value of torch_npu.profiler.AiCMetrics (torch_npu 2.13.0 _constant.py; notes §7.1).
AIC_METRICS: dict[str, str] = {
    "PipeUtilization": "ACL_AICORE_PIPE_UTILIZATION",
    "ArithmeticUtilization": "ACL_AICORE_ARITHMETIC_UTILIZATION",
    "Memory": "ACL_AICORE_MEMORY_BANDWIDTH",
    "MemoryL0": "ACL_AICORE_L0B_AND_WIDTH",
    "MemoryUB": "ACL_AICORE_MEMORY_UB",
    "ResourceConflictRatio": "ACL_AICORE_RESOURCE_CONFLICT_RATIO",
    "L2Cache": "ACL_AICORE_L2_CACHE",
    "MemoryAccess": "ACL_AICORE_MEMORY_ACCESS",
}
PROFILER_LEVEL = "Level1"  # ProfilerLevel.Level1 -> "Level1": the lowest level that keeps PMU data
EXPORT_TYPE = "text"  # ExportType.Text: kernel_details.csv + trace_view.json, what the loader reads


def build_profiler_config(group: str, warmup: int, repeat: int, out_dir: Path,
                          with_cpu: bool = True) -> dict[str, Any]:
    """The plain description of one profiler run (group = an AiCMetrics member name)."""
    if group not in AIC_METRICS:
        raise TilescopeError(f"metric group {group!r} is not a torch_npu AiCMetrics member "
                             f"({', '.join(AIC_METRICS)})")
    return {
        # CPU as well: host-side op launches and their flows to the NPU kernels (timeline rules).
        "activities": ["CPU", "NPU"] if with_cpu else ["NPU"],
        "schedule": {"wait": 0, "warmup": warmup, "active": repeat, "repeat": 1, "skip_first": 0},
        "experimental_config": {
            "profiler_level": PROFILER_LEVEL,
            "aic_metrics": group,
            "aic_metrics_value": AIC_METRICS[group],
            "l2_cache": False,
            "data_simplification": True,
            "export_type": EXPORT_TYPE,
        },
        "on_trace_ready": {"handler": "tensorboard_trace_handler", "dir_name": str(out_dir),
                           "analyse_flag": True},
        "record_shapes": True,
        "profile_memory": False,
        "with_stack": False,
    }


def translate_config(cfg: dict[str, Any], tp: Any) -> dict[str, Any]:
    """Keyword arguments of `torch_npu.profiler.profile` from a description; `tp` is the module.

    Enum members are looked up by name and checked against the recorded value so that a torch_npu
    whose enum values differ from the ones we documented fails loudly instead of profiling nothing.
    """
    exp = cfg["experimental_config"]
    metric = getattr(tp.AiCMetrics, exp["aic_metrics"])
    # torch_npu's enums are plain classes of strings; accept a real Enum too.
    if str(getattr(metric, "value", metric)) != exp["aic_metrics_value"]:
        raise TilescopeError(
            f"torch_npu AiCMetrics.{exp['aic_metrics']} is {metric!r}, expected {exp['aic_metrics_value']!r}"
        )
    level = getattr(tp.ProfilerLevel, exp["profiler_level"])
    export = tp.ExportType.Text if exp["export_type"] == "text" else tp.ExportType.Db
    sched = cfg["schedule"]
    handler = cfg["on_trace_ready"]
    return {
        "activities": [getattr(tp.ProfilerActivity, a) for a in cfg["activities"]],
        "schedule": tp.schedule(wait=sched["wait"], warmup=sched["warmup"], active=sched["active"],
                                repeat=sched["repeat"], skip_first=sched["skip_first"]),
        "on_trace_ready": tp.tensorboard_trace_handler(handler["dir_name"],
                                                       analyse_flag=handler["analyse_flag"]),
        "experimental_config": tp._ExperimentalConfig(
            profiler_level=level, aic_metrics=metric, l2_cache=exp["l2_cache"],
            data_simplification=exp["data_simplification"], export_type=export,
        ),
        "record_shapes": cfg["record_shapes"],
        "profile_memory": cfg["profile_memory"],
        "with_stack": cfg["with_stack"],
    }


def run_profiled(step_fn: Callable[[], Any], cfg: dict[str, Any], tp: Any = None,
                 torch_mod: Any = None) -> int:
    """In the child: warmup + active steps of `step_fn` under the profiler; returns steps run.

    The profiler is stopped in `finally`, so an exception or Ctrl-C in a step still releases the
    device-side profiling session (and the trace handler writes what was recorded).
    """
    if tp is None:
        # deferred: torch/torch_npu are the NPU stack (the `npu` extra), seconds to import
        import torch_npu.profiler

        tp = torch_npu.profiler
    if torch_mod is None:
        # deferred: torch/torch_npu are the NPU stack (the `npu` extra), seconds to import
        import torch

        torch_mod = torch
    sched = cfg["schedule"]
    steps = sched["skip_first"] + sched["wait"] + sched["warmup"] + sched["active"]
    prof = tp.profile(**translate_config(cfg, tp))
    prof.start()
    try:
        for _ in range(steps):
            torch_mod.npu.synchronize()  # nothing queued before the step begins
            step_fn()
            torch_mod.npu.synchronize()  # the kernel has finished inside its own step
            prof.step()
    finally:
        prof.stop()
    return steps


def profile_groups(
    work: Path,
    bundle: Path,
    job_base: dict[str, Any],
    groups: list[str],
    warmup: int,
    repeat: int,
    timeout: float | None,
    env: dict[str, str] | None = None,
    python: str = sys.executable,
) -> tuple[list[CommandRecord], list[dict[str, Any]]]:
    """One worker (tilescope.collectors.worker) per group into bundle/profile/<group>; records + run info."""
    records: list[CommandRecord] = []
    runs: list[dict[str, Any]] = []
    work.mkdir(parents=True, exist_ok=True)
    for group in groups:
        out_dir = bundle / "profile" / group
        out_dir.mkdir(parents=True, exist_ok=True)
        cfg = build_profiler_config(group, warmup, repeat, out_dir)
        job = dict(job_base, mode="profile", device="npu", warmup=warmup, repeat=repeat, profiler=cfg,
                   result=str(work / f"profile_{group}.result.json"))
        job_path = work / f"profile_{group}.job.json"
        job_path.write_text(json.dumps(job, indent=2), encoding="utf-8")
        log = bundle / "collect" / f"profile_{group}.log"
        rec = CommandRecord([*command([python], WORKER), str(job_path)],
                            f"torch_npu profile ({group})", group=group, log=f"collect/{log.name}")
        run_command(rec, timeout, log, env=env)
        answer = _read_answer(Path(job["result"]))
        if rec.returncode != 0 or "error" in answer:
            raise TilescopeError(
                f"torch_npu profile of {group} failed ({answer.get('error', f'exit {rec.returncode}')}); "
                f"log: {log}\n{tail(log)}"
            )
        produced = sorted(p.name for p in out_dir.glob("*_ascend_pt"))
        if not produced:
            raise TilescopeError(f"torch_npu wrote no *_ascend_pt directory for {group} (log: {log})")
        records.append(rec)
        runs.append({"groups": [group], "path": f"profile/{group}", "outputs": produced, "config": cfg})
    return records, runs


def _read_answer(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
