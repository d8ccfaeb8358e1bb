"""`collect --backend msprof-op-simulator` builds the kernel with -g, keeping -O2 (#25 item 5): the
job asks for it, the worker hands it to tilelang.compile, and TileLang 0.1.15 puts it on bisheng's
command line after its own -O2. No NPU, bisheng or simulator runs here: the simulator command is
replaced by one that writes nothing, bisheng's run by a recorder."""

from __future__ import annotations

import json
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import pytest

from tilescope.collectors import msprof_op_backend, worker
from tilescope.collectors.proc import CommandRecord
from tilescope.errors import TilescopeError


def test_the_simulator_job_asks_for_line_information(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[list[str]] = []

    def no_simulator(rec: CommandRecord, timeout: float | None, log: Path, **_: Any) -> CommandRecord:
        ran.append(rec.argv)
        rec.returncode = 0
        return rec

    monkeypatch.setattr(msprof_op_backend, "run_command", no_simulator)
    base = {"kernel": "k.py", "function": "f", "params": {}}
    with pytest.raises(TilescopeError, match="wrote no OPPROF_"):
        msprof_op_backend.profile_msprof_op_simulator(tmp_path / "w", tmp_path / "b", base, "f_kernel", 5.0)
    job = json.loads((tmp_path / "b" / "collect" / "simulate_job.json").read_text())
    assert job["compile_flags"] == ["-g"] and job["mode"] == "launch"
    assert len(ran) == 1 and ran[0][1:3] == ["op", "simulator"]  # ran[0][0]: msprof, wherever it is
    assert "compile_flags" not in base  # the caller's job stays as it was


@pytest.mark.slow
def test_the_worker_hands_the_flags_to_tilelang(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tilelang")
    import tilelang

    calls: list[dict[str, Any]] = []
    monkeypatch.setitem(sys.modules, "torch_npu", types.ModuleType("torch_npu"))  # no NPU stack here
    monkeypatch.setattr(tilelang, "compile", lambda func, **kw: calls.append(kw) or "kernel")
    assert worker.compile_kernel("prim_func", [2], "npu", ["-g"]) == "kernel"
    assert worker.compile_kernel("prim_func", [2], "npu") == "kernel"
    assert calls == [
        {"out_idx": [2], "target": "ascend", "compile_flags": ["-g"]},
        {"out_idx": [2], "target": "ascend"},
    ]


@pytest.mark.slow
def test_tilelang_puts_g_after_its_own_O2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TileLang 0.1.15's LibraryGenerator (the cython adapter's build of an Ascend kernel), with
    bisheng's run recorded instead of made."""
    pytest.importorskip("tilelang")
    import tilelang.contrib.bisheng as bisheng
    from tilelang.jit.adapter import libgen
    from tvm.target import Target

    seen: list[list[str]] = []

    def record(cmd: list[str], **_: Any) -> Any:
        seen.append(list(cmd))
        return types.SimpleNamespace(returncode=1, stdout=b"", stderr=b"")

    monkeypatch.setattr(bisheng, "find_bisheng_path", lambda: "bisheng")
    monkeypatch.setattr(libgen.subprocess, "run", record)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its source file lands here
    gen = libgen.LibraryGenerator(Target("ascend"))
    gen.assign_pass_configs({})
    gen.assign_compile_flags(["-g"])
    gen.update_lib_code("// generated Ascend C\n")
    with pytest.raises(RuntimeError):  # the recorder "fails" the build: nothing to link
        gen.compile_lib()
    cmd = seen[0]
    assert cmd[0] == "bisheng" and "-O2" in cmd and "-g" in cmd
    assert cmd.index("-O2") < cmd.index("-g")
    assert not any(flag.startswith("-O") and flag != "-O2" for flag in cmd)
