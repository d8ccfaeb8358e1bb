"""`tilescope lint --timeout` (tilescope.ir.deadline): lint runs the kernel's module and builder, the
user's code, so one that never returns (issue #27: a builder with `while True` hung lint) is stopped
at the deadline with one line, exit 2 — in this process, and in the tilelang-ascend worker's."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tilescope.cli import main
from tilescope.errors import UsageError
from tilescope.ir import deadline as dl
from tilescope.ir import foreign

BUILDER_SPINS = """import tilelang.ascend.language as T


def spin(M=128):
    n = 0
    while True:  # never returns
        n += 1

    @T.prim_func
    def kernel(A: T.Tensor((M,), "float16")):
        with T.Kernel(1) as core:
            pass

    return kernel
"""

DECORATOR_SPINS = """import tilelang.ascend.language as T


def forever(f):
    while True:  # run when the module is loaded: lint loads it
        pass


@forever
def spin(M=128):
    pass
"""


@pytest.mark.parametrize("source", [BUILDER_SPINS, DECORATOR_SPINS], ids=["builder", "decorator"])
def test_a_kernel_that_never_returns_is_stopped_with_one_line(
    source: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("tilelang")
    kernel = tmp_path / "spin.py"
    kernel.write_text(source)
    t0 = time.perf_counter()
    assert main(["lint", f"{kernel}:spin", "--timeout", "0.5"]) == 2
    assert time.perf_counter() - t0 < 30  # TileLang's import (~5 s cold) and 0.5 s of spinning
    err = capsys.readouterr().err
    assert err.strip() == (
        f"tilescope: error: {kernel}: lowering did not finish within 0.5 s (--timeout 0.5); does its "
        "builder ever return? (a larger --timeout gives it longer)"
    )


def test_the_deadline_passes_through_except_exception_and_is_cleared() -> None:
    caught = []
    with pytest.raises(dl.LoweringTimeout), dl.deadline(0.2):
        while True:
            try:
                time.sleep(0.01)
            except Exception as exc:  # what a builder or TileLang may do: the deadline is not theirs
                caught.append(exc)
    assert caught == []
    with dl.deadline(0.05):
        pass
    time.sleep(0.1)  # no alarm left behind once the block ended in time


def test_the_tilelang_ascend_worker_is_killed_at_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in worker that never answers (a shell that sleeps), run by the real run_jobs."""
    monkeypatch.setattr(foreign, "WORKER_START_S", 0.0)
    kernel = tmp_path / "k.py"
    kernel.write_text("def f():\n    pass\n")
    pidfile = tmp_path / "pid"
    interp = foreign.Interpreter(
        ["sh", "-c", f"echo $$ > {pidfile}; exec sleep 60", "sh"], "native", Path("/")
    )
    t0 = time.perf_counter()
    with pytest.raises(
        UsageError, match=r"k\.py: lowering did not finish within 0\.15 s \(--timeout 0\.15\)"
    ):
        foreign.run_jobs(interp, [(kernel, ["f"], [{}, {}])], timeout_s=0.15)  # two lowerings: 0.3 s
    assert time.perf_counter() - t0 < 5
    assert not Path(f"/proc/{pidfile.read_text().strip()}").exists()  # killed and reaped
