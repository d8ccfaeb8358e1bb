"""`--scheduler` / TILESCOPE_SCHEDULER against what issue #27 probed, with real local servers: a port
that accepts and never answers, one that answers other bytes, a TLS address without TLS settings,
a real scheduler with no workers, a real Dask worker that does not see the ranks' filesystem.
Every case is one line with its exit code, within the (shortened) documented deadlines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tilescope.cli import main
from tilescope.errors import UsageError
from tilescope.rankwork import Executor_, plan_executor
from tilescope.rankwork_dask import check_address

from support import only_line
from support.tcp import accepting_host

pytest.importorskip("distributed")



@pytest.fixture
def short(monkeypatch: pytest.MonkeyPatch) -> None:
    import tilescope.rankwork_dask as rd

    monkeypatch.setattr(rd, "CONNECT_DEADLINE_S", 1.5)
    monkeypatch.setattr(rd, "NO_WORKERS_WAIT_S", 1.0)
    monkeypatch.delenv("TILESCOPE_SCHEDULER", raising=False)


def _server(answer: bytes | None) -> Iterator[str]:
    """A Dask address on 127.0.0.1 that accepts every connection and then says `answer` (None: nothing)."""
    with accepting_host(answer) as (host, port):
        yield f"tcp://{host}:{port}"


@pytest.fixture
def silent() -> Iterator[str]:
    yield from _server(None)


@pytest.fixture
def garbage() -> Iterator[str]:
    # an HTTP server's answer after bytes that read as a frame count of ~2^64
    yield from _server(b"\xff" * 16 + b"HTTP/1.1 400 Bad Request\r\n\r\n")


def _timed(argv: list[str]) -> tuple[int, float]:
    t0 = time.perf_counter()
    code = main(argv)
    return code, time.perf_counter() - t0


def test_addresses_are_checked_before_anything_connects(monkeypatch: pytest.MonkeyPatch) -> None:
    for good in ("tcp://10.0.0.1:8786", "10.0.0.1:8786", "tls://head.cluster:8786", "tcp://[::1]:8786"):
        assert check_address(good, "--scheduler") == good
    with pytest.raises(UsageError, match=r"^--scheduler 'tcp://127.0.0.1:99999': port 99999 is out of range"):
        check_address("tcp://127.0.0.1:99999", "--scheduler")
    for bad in ("junk", "http://h:8786", "tcp://h", "tcp://:8786", "tcp://h:8786/x"):
        with pytest.raises(UsageError, match="expected a Dask scheduler address"):
            check_address(bad, "--scheduler")
    monkeypatch.setenv("TILESCOPE_SCHEDULER", "junk")
    with pytest.raises(UsageError, match=r"^TILESCOPE_SCHEDULER 'junk': expected"):
        plan_executor(None, None, [1, 1])
    monkeypatch.setenv("TILESCOPE_SCHEDULER", "tcp://h:1")
    named = "TILESCOPE_SCHEDULER"
    assert plan_executor(None, None, [1, 1]) == Executor_("dask", address="tcp://h:1", named=named)
    assert plan_executor(None, "tcp://g:2", [1, 1]).named == "--scheduler"  # the flag wins


def test_a_bad_variable_or_port_is_exit_2_at_once(
    run2: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILESCOPE_SCHEDULER", "junk")
    code, took = _timed(["analyze", str(run2), "--no-cache"])
    assert code == 2 and took < 5
    assert only_line(capsys).startswith("tilescope: error: TILESCOPE_SCHEDULER 'junk': expected a Dask")
    monkeypatch.delenv("TILESCOPE_SCHEDULER")
    code, took = _timed(["analyze", str(run2), "--no-cache", "--scheduler", "tcp://127.0.0.1:99999"])
    assert code == 2 and took < 5
    assert "port 99999 is out of range" in only_line(capsys)


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_a_port_that_never_answers_ends_at_the_deadline(
    run2: Path, silent: str, short: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, took = _timed(["analyze", str(run2), "--no-cache", "--scheduler", silent])
    assert code == 3 and took < 1.5 + 3
    assert only_line(capsys) == (
        f"tilescope: error: --scheduler {silent}: cannot reach the Dask scheduler (no answer within 1.5 s)"
    )


def test_a_port_that_answers_other_bytes_is_one_line(
    run2: Path, garbage: str, short: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, took = _timed(["analyze", str(run2), "--no-cache", "--scheduler", garbage])
    assert code == 3 and took < 1.5 + 3
    line = only_line(capsys)
    assert line.startswith(f"tilescope: error: --scheduler {garbage}: cannot reach the Dask scheduler (")


def test_tls_without_tls_settings_is_one_line(
    run2: Path, silent: str, short: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    address = silent.replace("tcp://", "tls://")
    monkeypatch.setenv("TILESCOPE_SCHEDULER", address)  # named as the variable it came from
    code, _ = _timed(["analyze", str(run2), "--no-cache"])
    assert code == 3
    line = only_line(capsys)
    said = f"tilescope: error: TILESCOPE_SCHEDULER {address}: cannot reach the Dask scheduler ("
    assert line.startswith(said)
    assert "TypeError: TLS expects" in line


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """A real Dask scheduler on 127.0.0.1 with no worker of its own."""
    import distributed

    with distributed.LocalCluster(
        n_workers=0, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=None
    ) as cluster:
        yield cluster.scheduler_address


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_a_scheduler_without_workers_is_said_after_the_wait(
    run2: Path, scheduler: str, short: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, took = _timed(["analyze", str(run2), "--no-cache", "--scheduler", scheduler])
    assert code == 3 and took < 1.0 + 4
    assert only_line(capsys) == (
        f"tilescope: error: --scheduler {scheduler}: the scheduler has no workers (none joined within 1 s); "
        "start some with `dask worker ADDRESS`"
    )


def _unshare() -> list[str] | None:
    """`unshare` flags for a private mount namespace here (root or user namespaces), else None."""
    tool = shutil.which("unshare")
    if tool is None:
        return None
    flags = [tool, "-m", "--propagation", "private"] if os.geteuid() == 0 else [tool, "-r", "-m"]
    probe = subprocess.run([*flags, "true"], capture_output=True, timeout=10, check=False)
    return flags if probe.returncode == 0 else None


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_workers_that_do_not_see_the_ranks_are_named(
    run2: Path, scheduler: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real Dask worker whose view of the filesystem hides the run (an empty tmpfs mounted over
    its folder, in the worker's own mount namespace): what `run_unit` reports there gives the
    shared-filesystem line, exit 2."""
    flags = _unshare()
    if flags is None:
        pytest.skip("no private mount namespace here (unshare)")
    worker = (
        f"mount -t tmpfs tmpfs {run2} && exec {sys.executable} -m distributed.cli.dask_worker "
        f"{scheduler} --nthreads 1 --no-nanny --no-dashboard"
    )
    proc = subprocess.Popen([*flags, "sh", "-c", worker], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        import distributed

        with distributed.Client(scheduler, set_as_default=False) as client:
            client.wait_for_workers(1, timeout=60)
        assert main(["analyze", str(run2), "--no-cache", "--scheduler", scheduler]) == 2
        rank0 = sorted(p for p in run2.iterdir() if p.is_dir())[0]
        said = (
            f": the Dask workers of --scheduler {scheduler} cannot read it (2 of the ranks): the ranks "
            "must be on a filesystem every worker mounts under the same path"
        )
        assert only_line(capsys) == f"tilescope: error: {rank0}{said}"
        # the same run as a file:// URL: each worker stages its own rank folder, and finds none
        assert main(["analyze", f"file://{run2}", "--no-cache", "--scheduler", scheduler]) == 2
        assert only_line(capsys) == f"tilescope: error: file://{rank0}{said}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
