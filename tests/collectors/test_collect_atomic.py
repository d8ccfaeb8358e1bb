"""Bundle safety and the orchestration around the device work, with fakes for what needs an NPU.

- an exception or Ctrl-C mid-collect leaves no bundle and no temporary directory;
- an existing bundle is kept without --force, and with --force replaced only by a complete one;
- a child process is killed (its whole process group) on timeout and on Ctrl-C;
- both backends' layouts: profile/<Group>/<worker>_ascend_pt/ and profile/OPPROF_*/.
"""

from __future__ import annotations

import _thread
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tilescope.collectors import bundle as bundlemod
from tilescope.collectors import run as runmod
from tilescope.collectors import torch_npu_backend
from tilescope.collectors.proc import CommandRecord, run_command
from tilescope.errors import TilescopeError, UsageError

from support import REPO_ROOT

REPO = REPO_ROOT
VECTOR_ADD = REPO / "sample_traces" / "kernels" / "collect_vector_add.py"
NPU_PROBE = {"available": True, "device_count": 1, "device_name": "Ascend910B2"}


def fake_ir(bundle: Path, ref: Any, params: dict[str, Any], chip: Any) -> dict[str, Any]:
    (bundle / "ir").mkdir()
    (bundle / "ir" / "ir.json").write_text("{}")
    return {"path": "ir", "captured": True}


def fake_check(device: str) -> Any:
    def check(
        bundle: Path,
        ref: Any,
        params: dict[str, Any],
        dev: str,
        timeout: float | None,
        env: dict[str, str],
        python: str = "",
    ) -> tuple[CommandRecord, dict[str, Any]]:
        rec = CommandRecord(
            ["python", "-m", "tilescope.collectors.worker", "job.json"],
            f"correctness check ({dev})",
            returncode=0,
            duration_s=0.1,
        )
        answer = {
            "function": "vector_add",
            "kernel_name": "vector_add_kernel_kernel",
            "spec": True,
            "params": {"N": 4096},
            "device_name": "Ascend910B2" if dev == "npu" else None,
            "correctness": {
                "status": "pass",
                "device": dev,
                "target": "c",
                "reason": None,
                "outputs": [
                    {
                        "name": "C",
                        "passed": True,
                        "max_abs_err": 0.0,
                        "max_rel_err": 0.0,
                        "mismatched": 0,
                        "numel": 4096,
                    }
                ],
                "tolerance": {"atol": 1e-5, "rtol": 1e-5},
                "seed": 0,
                "max_abs_err": 0.0,
                "max_rel_err": 0.0,
            },
        }
        return rec, answer

    return check


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """No tilelang and no child process: IR and check replaced by fakes."""
    monkeypatch.setattr(runmod, "capture_ir_into", fake_ir)
    monkeypatch.setattr(runmod, "run_check", fake_check("cpu"))
    monkeypatch.setattr(runmod.preflight, "require_tilelang", lambda: None)


def request(out: Path, **kw: Any) -> runmod.CollectRequest:
    return runmod.CollectRequest(kernel=f"{VECTOR_ADD}:vector_add", out=out, **kw)


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_ir_only_with_fakes_writes_a_valid_bundle(tmp_path: Path, fast: None) -> None:
    out = runmod.collect(request(tmp_path / "b", ir_only=True), log=lambda m: None)
    manifest = bundlemod.read_manifest(out)
    bundlemod.validate_manifest(manifest)
    assert manifest["ir_only"] is True and manifest["backend"] is None
    assert (out / "profile").is_dir() and not any((out / "profile").iterdir())
    assert (out / "kernel" / VECTOR_ADD.name).read_bytes() == VECTOR_ADD.read_bytes()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_failure_mid_collect_leaves_nothing(
    tmp_path: Path, fast: None, monkeypatch: pytest.MonkeyPatch, exc: BaseException
) -> None:
    seen: list[Path] = []

    def failing(bundle: Path, *a: Any, **k: Any) -> Any:
        assert (bundle / "ir" / "ir.json").is_file()  # IR was already written into the temp dir
        seen.append(bundle)
        raise exc

    monkeypatch.setattr(runmod, "run_check", failing)
    with pytest.raises(type(exc)):
        runmod.collect(request(tmp_path / "b", ir_only=True), log=lambda m: None)
    assert seen and not seen[0].exists()
    assert not (tmp_path / "b").exists()
    assert leftovers(tmp_path) == []


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_existing_bundle_needs_force(tmp_path: Path, fast: None, monkeypatch: pytest.MonkeyPatch) -> None:
    out = runmod.collect(request(tmp_path / "b", ir_only=True), log=lambda m: None)
    first = (out / "manifest.json").read_text()
    with pytest.raises(UsageError, match="already exists \\(use --force"):
        runmod.collect(request(out, ir_only=True), log=lambda m: None)
    assert (out / "manifest.json").read_text() == first

    # --force and a failure: the old bundle survives untouched
    def failing(*a: Any, **k: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(runmod, "run_check", failing)
    with pytest.raises(KeyboardInterrupt):
        runmod.collect(request(out, ir_only=True, force=True), log=lambda m: None)
    assert (out / "manifest.json").read_text() == first
    assert leftovers(tmp_path) == []

    # --force and success: replaced
    monkeypatch.setattr(runmod, "run_check", fake_check("cpu"))
    time.sleep(1.1)  # created_utc has one-second resolution
    runmod.collect(request(out, ir_only=True, force=True, params={"N": 4096}), log=lambda m: None)
    assert (out / "manifest.json").read_text() != first
    assert bundlemod.read_manifest(out)["parameters"] == {"N": 4096}
    assert leftovers(tmp_path) == []


def test_force_refuses_a_directory_that_is_not_a_bundle(tmp_path: Path, fast: None) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "precious.txt").write_text("x")
    with pytest.raises(UsageError, match="not a tilescope bundle"):
        runmod.collect(request(tmp_path / "src", ir_only=True, force=True), log=lambda m: None)
    assert (tmp_path / "src" / "precious.txt").is_file()


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"backend": "nsys"}, "--backend"),
        ({"metrics": ["PipeUtilization", "Bogus"]}, "Bogus"),
        ({"metrics": ["Default"]}, "Default"),  # msprof op only
        ({"repeat": 0}, "--repeat"),
        ({"with_reference": True, "backend": "msprof-op"}, "--with-reference needs --backend torch_npu"),
        ({"with_reference": True, "ir_only": True}, "--with-reference needs --backend torch_npu"),
    ],
)
def test_usage_errors_before_anything(tmp_path: Path, kw: dict[str, Any], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        runmod.collect(request(tmp_path / "b", **kw), log=lambda m: None, probe=lambda b: NPU_PROBE)
    assert list(tmp_path.iterdir()) == []


# --- the hardware flow with fakes in place of torch_npu / msprof -------------------------------

FAKE_MSPROF = """#!/bin/sh
# Stands in for CANN's msprof: `msprof op --output=DIR ...` writes one OPPROF_* directory.
[ "$1" = "op" ] || exit 9
for a in "$@"; do case "$a" in --output=*) out="${a#--output=}";; esac; done
d="$out/OPPROF_20260605170804_UKAXQCBEDBJAUNQY"
mkdir -p "$d/dump"
echo "Op Name,Op Type" > "$d/OpBasicInfo.csv"
echo "block_id,aiv_vec_ratio," > "$d/PipeUtilization.csv"
echo "$@" > "$out/../argv.txt"
"""


def test_msprof_op_flow(tmp_path: Path, fast: None, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "msprof").write_text(FAKE_MSPROF)
    (bindir / "msprof").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(runmod, "run_check", fake_check("npu"))
    out = runmod.collect(
        request(
            tmp_path / "b", backend="msprof-op", metrics=["PipeUtilization", "Memory"], warmup=2, repeat=3
        ),
        log=lambda m: None,
        probe=lambda b: NPU_PROBE,
    )
    m = bundlemod.read_manifest(out)
    bundlemod.validate_manifest(m)
    assert m["backend"] == "msprof-op" and m["metric_groups"] == ["PipeUtilization", "Memory"]
    assert m["profile"]["layout"] == "msprof_op"
    assert m["profile"]["runs"] == [
        {
            "groups": ["PipeUtilization", "Memory"],
            "path": "profile/OPPROF_20260605170804_UKAXQCBEDBJAUNQY",
            "outputs": ["OPPROF_20260605170804_UKAXQCBEDBJAUNQY"],
        }
    ]
    assert (out / "profile" / "OPPROF_20260605170804_UKAXQCBEDBJAUNQY" / "OpBasicInfo.csv").is_file()
    argv = m["commands"][-1]["argv"]
    build = m["build_dir"]
    assert argv == [
        str(bindir / "msprof"),
        "op",
        f"--output={build}/collect/msprof_op_out",
        f"--application={build}/collect/launch_kernel.py",
        "--aic-metrics=PipeUtilization,Memory",
        "--kernel-name=vector_add_kernel_kernel*",
        "--launch-count=3",
        "--warm-up=2",
        "--replay-mode=application",
    ]
    assert os.access(out / "collect" / "launch_kernel.py", os.X_OK)
    job = json.loads((out / "collect" / "launch_job.json").read_text())
    assert job["mode"] == "launch" and job["warmup"] == 2 and job["repeat"] == 3
    assert m["device_name"] == "Ascend910B2" and m["correctness"]["device"] == "npu"
    assert leftovers(tmp_path) == []


def test_torch_npu_flow_layout(tmp_path: Path, fast: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from support.fake_python import write_fake_python

    fake = write_fake_python(tmp_path / "fakepy")
    real = torch_npu_backend.profile_groups

    def with_fake_python(*a: Any, **k: Any) -> Any:
        k["python"] = str(fake)
        return real(*a, **k)

    monkeypatch.setattr(runmod, "profile_groups", with_fake_python)
    monkeypatch.setattr(runmod, "run_check", fake_check("npu"))
    out = runmod.collect(
        request(tmp_path / "b", metrics=["PipeUtilization", "MemoryUB"]),
        log=lambda m: None,
        probe=lambda b: NPU_PROBE,
    )
    m = bundlemod.read_manifest(out)
    bundlemod.validate_manifest(m)
    assert m["profile"]["layout"] == "torch_npu"
    assert [r["path"] for r in m["profile"]["runs"]] == ["profile/PipeUtilization", "profile/MemoryUB"]
    for g in ("PipeUtilization", "MemoryUB"):
        assert (out / "profile" / g / "host_123_20260101_ascend_pt" / "ASCEND_PROFILER_OUTPUT").is_dir()
    assert [c["purpose"] for c in m["commands"]] == [
        "correctness check (npu)",
        "torch_npu profile (PipeUtilization)",
        "torch_npu profile (MemoryUB)",
    ]
    assert m["reference"] is False
    out = runmod.collect(
        request(tmp_path / "r", metrics=["PipeUtilization"], with_reference=True),
        log=lambda m: None,
        probe=lambda b: NPU_PROBE,
    )
    assert bundlemod.read_manifest(out)["reference"] is True  # and the schema accepts it


def test_a_profiled_step_runs_the_reference_on_the_same_inputs() -> None:
    from tilescope.collectors.spec import KernelSpec
    from tilescope.collectors.worker import profiled_step

    calls: list[tuple[str, tuple[int, ...]]] = []
    kernel = lambda *xs: calls.append(("kernel", xs))  # noqa: E731
    spec = KernelSpec(inputs=(), out_idx=(), reference=lambda *xs: calls.append(("reference", xs)))
    profiled_step(kernel, spec, [1, 2], reference=True)()
    profiled_step(kernel, spec, [1, 2], reference=False)()
    assert calls == [("kernel", (1, 2)), ("reference", (1, 2)), ("kernel", (1, 2))]
    with pytest.raises(RuntimeError, match="has no 'reference'"):
        profiled_step(kernel, KernelSpec(inputs=(), out_idx=()), [1], reference=True)


def test_missing_spec_stops_a_hardware_run(
    tmp_path: Path, fast: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_spec(*a: Any, **k: Any) -> Any:
        rec, answer = fake_check("npu")(*a, **k)
        answer.update(spec=False, correctness={"status": "not_run", "reason": "no spec"})
        return rec, answer

    monkeypatch.setattr(runmod, "run_check", no_spec)
    with pytest.raises(UsageError, match="no TILESCOPE_SPEC"):
        runmod.collect(request(tmp_path / "b"), log=lambda m: None, probe=lambda b: NPU_PROBE)
    assert list(tmp_path.iterdir()) == []


# --- child processes -----------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _spawn_tree_argv(pidfile: Path) -> list[str]:
    # a child that starts a grandchild, records its pid, then waits forever
    return ["/bin/sh", "-c", f"sleep 300 & echo $! > {pidfile}; wait"]


@pytest.mark.usefixtures("sigint_handled")
@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    rec = CommandRecord(_spawn_tree_argv(pidfile), "sleeper")
    with pytest.raises(TilescopeError, match="no result after 1 s"):
        run_command(rec, 1.0, tmp_path / "log")
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


@pytest.mark.usefixtures("sigint_handled")
def test_ctrl_c_kills_the_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    rec = CommandRecord(_spawn_tree_argv(pidfile), "sleeper")

    def interrupt_soon() -> None:
        deadline = time.monotonic() + 10
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        _thread.interrupt_main()  # what Ctrl-C does: KeyboardInterrupt in the main thread

    threading.Thread(target=interrupt_soon, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run_command(rec, 60.0, tmp_path / "log")
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


# --- collect --backend msprof-op-simulator (#25) ---------------------------------------------------

FAKE_SIMULATOR = """#!/bin/sh
# Stands in for CANN's msprof: `msprof op simulator --output=DIR ...` writes OPPROF_*/simulator/.
[ "$1" = "op" ] && [ "$2" = "simulator" ] || exit 9
for a in "$@"; do case "$a" in --output=*) out="${a#--output=}";; esac; done
d="$out/OPPROF_20261206120000_SIMULATEDRUNABCD/simulator/core0.veccore0"
mkdir -p "$d"
printf 'code,call_count,cycles,running_time(us)\\n/tmp/k/kernel.cpp:12,4,900,0.5\\n' \\
  > "$d/core0.veccore0_code_exe.csv"
printf 'instr,addr,pipe,call_count,cycles,running_time(us),detail\\nVADD,1,VECTOR,4,900,0.5,""\\n' \\
  > "$d/core0.veccore0_instr_exe.csv"
echo "ASCEND_RT_VISIBLE_DEVICES=$ASCEND_RT_VISIBLE_DEVICES" > "$out/../env.txt"
"""


def test_a_simulated_collect_is_a_bundle_lines_reads(
    tmp_path: Path, fast: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "msprof").write_text(FAKE_SIMULATOR)
    (bindir / "msprof").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(runmod, "run_check", fake_check("npu"))
    # metric groups are not read for the simulator (it records what it models)
    req = request(tmp_path / "b", backend="msprof-op-simulator", metrics=["NotAGroup"])
    out = runmod.collect(req, log=lambda m: None, probe=lambda b: NPU_PROBE)
    m = bundlemod.read_manifest(out)
    bundlemod.validate_manifest(m)
    assert m["backend"] == "msprof-op-simulator" and m["metric_groups"] == []
    assert m["profile"]["runs"] == [
        {
            "groups": ["simulator"],
            "path": "profile/OPPROF_20261206120000_SIMULATEDRUNABCD",
            "outputs": ["OPPROF_20261206120000_SIMULATEDRUNABCD"],
        }
    ]
    build = m["build_dir"]
    assert m["commands"][-1]["argv"] == [
        str(bindir / "msprof"),
        "op",
        "simulator",
        f"--output={build}/collect/msprof_op_simulator_out",
        f"--application={build}/collect/simulate_kernel.py",
        "--kernel-name=vector_add_kernel_kernel",
        "--launch-count=1",
    ]
    job = json.loads((out / "collect" / "simulate_job.json").read_text())
    assert (job["mode"], job["warmup"], job["repeat"]) == ("launch", 0, 1)
    # the simulator models device 0 only: the launcher's environment says so
    assert (out / "collect" / "env.txt").read_text().strip() == "ASCEND_RT_VISIBLE_DEVICES=0"
    assert leftovers(tmp_path) == []
    from support import cli

    code, text, err = cli(capsys, "lines", str(out), "-f", "json")
    assert code == 0, err
    report = json.loads(text)
    assert report["total_cycles"] == 900 and report["lines"][0]["ascendc"][0]["line"] == 12
