"""What the collector asks the profilers to do: exact msprof op argv and torch_npu profiler config.

torch_npu cannot be imported here (no CANN), so the torch_npu side is tested through the plain
config description and a stand-in module whose enums carry the documented values
(shared docs/tilelang-notes.md §7.1, torch_npu 2.13.0 `_constant.py`).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import tilescope
from tilescope.collectors.msprof_op_backend import (
    build_msprof_op_argv,
    build_simulator_argv,
    move_outputs,
    write_launcher,
)
from tilescope.collectors.torch_npu_backend import (
    AIC_METRICS,
    build_profiler_config,
    profile_groups,
    run_profiled,
    translate_config,
)
from tilescope.errors import TilescopeError

from support.fake_python import write_fake_python


def test_msprof_op_argv_is_exact(tmp_path: Path) -> None:
    argv = build_msprof_op_argv(
        output=Path("/b/.work/msprof_op_out"), application=Path("/b/collect/launch_kernel.py"),
        groups=["PipeUtilization", "Memory", "MemoryL0"], kernel_name="vector_add_kernel_kernel",
        launch_count=10, warmup=5,
    )
    assert argv == [
        "msprof", "op",
        "--output=/b/.work/msprof_op_out",
        "--application=/b/collect/launch_kernel.py",
        "--aic-metrics=PipeUtilization,Memory,MemoryL0",
        "--kernel-name=vector_add_kernel_kernel*",
        "--launch-count=10",
        "--warm-up=5",
        "--replay-mode=application",
    ]


def test_msprof_op_argv_matches_the_real_tilelang_run() -> None:
    # ascend-profiler-formats.md §2.3: msprof op --output=reports/op --application=<abs-path>
    #   --aic-metrics=PipeUtilization '--kernel-name=main_kernel*' --launch-count=1 --warm-up=0
    #   --replay-mode=application
    argv = build_msprof_op_argv(Path("reports/op"), Path("/abs/app"), ["PipeUtilization"], "main_kernel*",
                                1, 0)
    assert argv[2:] == ["--output=reports/op", "--application=/abs/app", "--aic-metrics=PipeUtilization",
                        "--kernel-name=main_kernel*", "--launch-count=1", "--warm-up=0",
                        "--replay-mode=application"]


def test_msprof_op_argv_rejects_bad_input() -> None:
    with pytest.raises(TilescopeError, match="replay mode"):
        build_msprof_op_argv(Path("o"), Path("a"), ["PipeUtilization"], "k", 1, 0, replay_mode="range2")
    with pytest.raises(TilescopeError, match="Bogus"):
        build_msprof_op_argv(Path("o"), Path("a"), ["Bogus"], "k", 1, 0)


def test_launcher_is_an_executable_python_script(tmp_path: Path) -> None:
    job = tmp_path / "job.json"
    launcher = write_launcher(tmp_path / "collect" / "launch_kernel.py", job, python="/usr/bin/python3")
    text = launcher.read_text()
    assert text.startswith("#!/usr/bin/python3\n")
    assert repr(str(job)) in text and "'tilescope.collectors.worker'" in text and "run_module.py" in text
    assert launcher.stat().st_mode & stat.S_IXUSR
    compile(text, str(launcher), "exec")


def _python_without_tilescope() -> str:
    """The base interpreter of this venv, which has no tilescope installed (as an NPU's Python may not)."""
    import sys

    python = Path(sys.base_prefix) / "bin" / "python3"
    probe = subprocess.run([str(python), "-c", "import tilescope"], capture_output=True, check=False)
    if not python.is_file() or probe.returncode == 0:
        pytest.skip(f"{python} is missing or has tilescope installed")
    return str(python)


@pytest.mark.parametrize("which", ["this venv", "a Python without tilescope"])
@pytest.mark.slow  # 2.4-5 s of CPU each (#23: the quick loop keeps tests under ~2 s)
def test_launcher_runs_the_worker(tmp_path: Path, which: str) -> None:
    """The generated script really starts tilescope.collectors.worker (which reports a bad job cleanly),
    also in a Python that does not have tilescope installed."""
    import sys

    python = sys.executable if which == "this venv" else _python_without_tilescope()
    result = tmp_path / "r.json"
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"kernel": str(tmp_path / "missing.py"), "function": "f", "params": {},
                               "device": "cpu", "mode": "launch", "warmup": 0, "repeat": 1,
                               "result": str(result)}))
    launcher = write_launcher(tmp_path / "launch_kernel.py", job, python=python)
    proc = subprocess.run([str(launcher)], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1
    assert "error" in json.loads(result.read_text())


def test_move_outputs_takes_every_opprof_dir(tmp_path: Path) -> None:
    staging = tmp_path / "staging"
    (staging / "OPPROF_20260605170804_UKAXQCBEDBJAUNQY" / "dump").mkdir(parents=True)
    (staging / "OPPROF_20260605170804_UKAXQCBEDBJAUNQY" / "OpBasicInfo.csv").write_text("x\n")
    (staging / "msprof_op.log").write_text("noise")
    names = move_outputs(staging, tmp_path / "profile")
    assert names == ["OPPROF_20260605170804_UKAXQCBEDBJAUNQY"]
    assert (tmp_path / "profile" / names[0] / "OpBasicInfo.csv").is_file()
    assert not (staging / names[0]).exists()


def test_torch_npu_config_description(tmp_path: Path) -> None:
    cfg = build_profiler_config("MemoryUB", warmup=3, repeat=7, out_dir=tmp_path / "profile" / "MemoryUB")
    assert cfg["activities"] == ["CPU", "NPU"]
    assert cfg["schedule"] == {"wait": 0, "warmup": 3, "active": 7, "repeat": 1, "skip_first": 0}
    assert cfg["experimental_config"] == {
        "profiler_level": "Level1", "aic_metrics": "MemoryUB", "aic_metrics_value": "ACL_AICORE_MEMORY_UB",
        "l2_cache": False, "data_simplification": True, "export_type": "text",
    }
    assert cfg["on_trace_ready"] == {"handler": "tensorboard_trace_handler",
                                     "dir_name": str(tmp_path / "profile" / "MemoryUB"), "analyse_flag": True}
    json.dumps(cfg)  # shipped to the child as JSON


def test_aic_metric_values_are_the_documented_ones() -> None:
    assert AIC_METRICS == {
        "PipeUtilization": "ACL_AICORE_PIPE_UTILIZATION",
        "ArithmeticUtilization": "ACL_AICORE_ARITHMETIC_UTILIZATION",
        "Memory": "ACL_AICORE_MEMORY_BANDWIDTH",
        "MemoryL0": "ACL_AICORE_L0B_AND_WIDTH",
        "MemoryUB": "ACL_AICORE_MEMORY_UB",
        "ResourceConflictRatio": "ACL_AICORE_RESOURCE_CONFLICT_RATIO",
        "L2Cache": "ACL_AICORE_L2_CACHE",
        "MemoryAccess": "ACL_AICORE_MEMORY_ACCESS",
    }
    with pytest.raises(TilescopeError, match="AiCMetrics"):
        build_profiler_config("Default", 1, 1, Path("x"))


class FakeTorchNpuProfiler:
    """Stand-in for torch_npu.profiler with the documented enum values; records what it was given."""

    class ProfilerLevel:
        Level0, Level1, Level2, Level_none = "Level0", "Level1", "Level2", "Level_none"

    class AiCMetrics:
        PipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
        ArithmeticUtilization = "ACL_AICORE_ARITHMETIC_UTILIZATION"
        Memory = "ACL_AICORE_MEMORY_BANDWIDTH"
        MemoryL0 = "ACL_AICORE_L0B_AND_WIDTH"
        MemoryUB = "ACL_AICORE_MEMORY_UB"
        ResourceConflictRatio = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
        L2Cache = "ACL_AICORE_L2_CACHE"
        MemoryAccess = "ACL_AICORE_MEMORY_ACCESS"
        AiCoreNone = "ACL_AICORE_NONE"

    class ExportType:
        Db, Text = "db", "text"

    ProfilerActivity = SimpleNamespace(CPU="activity.CPU", NPU="activity.NPU")

    def __init__(self) -> None:
        self.events: list[str] = []
        self.kwargs: dict[str, Any] = {}

    def schedule(self, wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0) -> Any:
        return ("schedule", wait, warmup, active, repeat, skip_first)

    def tensorboard_trace_handler(self, dir_name: str | None = None, worker_name: str | None = None,
                                  analyse_flag: bool = True, async_mode: bool = False) -> Any:
        return ("handler", dir_name, analyse_flag)

    def _ExperimentalConfig(self, **kwargs: Any) -> Any:
        return ("experimental", tuple(sorted(kwargs.items())))

    def profile(self, **kwargs: Any) -> Any:
        self.kwargs = kwargs
        events = self.events

        class Prof:
            def start(self) -> None:
                events.append("start")

            def step(self) -> None:
                events.append("step")

            def stop(self) -> None:
                events.append("stop")

        return Prof()


def fake_torch(events: list[str]) -> Any:
    return SimpleNamespace(npu=SimpleNamespace(synchronize=lambda: events.append("sync")))


def test_translate_config_builds_the_profile_call(tmp_path: Path) -> None:
    tp = FakeTorchNpuProfiler()
    cfg = build_profiler_config("PipeUtilization", 2, 4, tmp_path / "PipeUtilization")
    kw = translate_config(cfg, tp)
    assert kw["activities"] == ["activity.CPU", "activity.NPU"]
    assert kw["schedule"] == ("schedule", 0, 2, 4, 1, 0)
    assert kw["on_trace_ready"] == ("handler", str(tmp_path / "PipeUtilization"), True)
    assert kw["experimental_config"] == ("experimental", (
        ("aic_metrics", "ACL_AICORE_PIPE_UTILIZATION"), ("data_simplification", True),
        ("export_type", "text"), ("l2_cache", False), ("profiler_level", "Level1"),
    ))
    assert kw["record_shapes"] is True


def test_translate_config_refuses_a_torch_npu_with_other_enum_values(tmp_path: Path) -> None:
    tp = FakeTorchNpuProfiler()
    tp.AiCMetrics = SimpleNamespace(PipeUtilization="SOMETHING_ELSE")  # type: ignore[assignment]
    with pytest.raises(TilescopeError, match="expected 'ACL_AICORE_PIPE_UTILIZATION'"):
        translate_config(build_profiler_config("PipeUtilization", 0, 1, tmp_path), tp)


def test_run_profiled_steps_and_synchronises(tmp_path: Path) -> None:
    tp = FakeTorchNpuProfiler()
    calls: list[str] = []
    steps = run_profiled(lambda: tp.events.append("kernel"), build_profiler_config("Memory", 2, 3, tmp_path),
                         tp=tp, torch_mod=fake_torch(tp.events))
    assert steps == 5
    assert tp.events[0] == "start" and tp.events[-1] == "stop"
    assert tp.events[1:-1] == ["sync", "kernel", "sync", "step"] * 5
    assert not calls


def test_run_profiled_stops_the_profiler_on_interrupt(tmp_path: Path) -> None:
    tp = FakeTorchNpuProfiler()
    n = 0

    def step() -> None:
        nonlocal n
        n += 1
        if n == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_profiled(step, build_profiler_config("Memory", 1, 3, tmp_path), tp=tp, torch_mod=fake_torch([]))
    assert tp.events == ["start", "step", "stop"]


def test_profile_groups_writes_one_dir_per_group(tmp_path: Path) -> None:
    fake = write_fake_python(tmp_path / "fakepy")
    bundle = tmp_path / "bundle"
    (bundle / "collect").mkdir(parents=True)
    job_base = {"kernel": "k.py", "function": "f", "params": {}}
    records, runs = profile_groups(bundle / "collect", bundle, job_base,
                                   ["PipeUtilization", "Memory"], 1, 2, timeout=60, env=dict(os.environ),
                                   python=str(fake))
    assert [r.group for r in records] == ["PipeUtilization", "Memory"]
    assert records[0].argv == [str(fake), str(Path(tilescope.__file__).resolve().parent / "run_module.py"),
                               "tilescope.collectors.worker",
                               str(bundle / "collect" / "profile_PipeUtilization.job.json")]
    assert [r["path"] for r in runs] == ["profile/PipeUtilization", "profile/Memory"]
    assert runs[0]["outputs"] == ["host_123_20260101_ascend_pt"]
    for group in ("PipeUtilization", "Memory"):
        worker_dir = bundle / "profile" / group / "host_123_20260101_ascend_pt"
        assert (worker_dir / "ASCEND_PROFILER_OUTPUT").is_dir()
        job = json.loads((bundle / "collect" / f"profile_{group}.job.json").read_text())
        assert job["mode"] == "profile" and job["device"] == "npu"
        assert job["profiler"]["experimental_config"]["aic_metrics"] == group


def test_the_simulator_command_is_exact() -> None:
    argv = build_simulator_argv(Path("/b/w/out"), Path("/b/collect/simulate_kernel.py"), "vector_add_kernel*")
    assert argv == [
        "msprof", "op", "simulator",
        "--output=/b/w/out",
        "--application=/b/collect/simulate_kernel.py",
        "--kernel-name=vector_add_kernel",  # documented as [A-Za-z0-9_]+, matched as a prefix
        "--launch-count=1",
    ]
    with pytest.raises(TilescopeError, match=r"is not \[A-Za-z0-9_\]\+"):
        build_simulator_argv(Path("o"), Path("a"), "main kernel;rm")
