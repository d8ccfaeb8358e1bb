"""A Dask cluster that fails while it analyses ranks (issue #27, docs/reliability.md §11): a real
scheduler and real `dask worker` processes, one of them killed with SIGKILL mid-run.

To land the kill while a rank is being analysed, never before or after, the killed worker starts
with a `--preload` script that makes each of its jobs mark a file and wait before the analysis;
the test kills the worker once the mark appears. The failure itself is real: a process gone
mid-job, its connection to the scheduler closed.

- the only worker killed: the ranks waited in `gather` for ever; now one line, exit 3, within the
  no-workers wait after the kill;
- the scheduler killed: one line, exit 3 (Dask's own log lines about it held back);
- one of two workers killed: Dask gives the lost rank to the other worker (its retry), the report
  is the one of the same run in one process.
Each test also checks that tilescope left no process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tilescope.cli import main

from support import only_line

pytest.importorskip("distributed")
pytestmark = pytest.mark.slow  # each starts a scheduler and Dask workers: ~10 s on 2 shared cores

PRELOAD = '''
"""dask worker --preload (written by tests/cluster/test_dask_midrun.py): each job marks its file,
then waits, before the real analysis."""
import os, pathlib, time

import tilescope.rankwork as rankwork

_real = rankwork.run_unit


def run_unit(job):
    pathlib.Path(os.environ["TILESCOPE_TEST_MARK"]).touch()
    time.sleep(60)
    return _real(job)


rankwork.run_unit = run_unit  # the job's function is sent by name: the worker unpickles this one
'''



class Cluster:
    """A `dask scheduler` process on 127.0.0.1 and the `dask worker` processes added to it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.procs: list[subprocess.Popen[bytes]] = []
        # what this test process already ran before the cluster: an earlier test's pool (its
        # forkserver, multiprocessing's resource tracker) lives as long as the process, and is
        # not something the run under test left behind
        self.before = {p.pid for p in _children()}
        info = folder / "scheduler.json"
        self.scheduler = self._start(
            ["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(info)], {}
        )
        deadline = time.monotonic() + 60
        while not (info.exists() and info.read_text().strip()):
            assert time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.1)
        self.address = json.loads(info.read_text())["address"]
        self.mark = folder / "job-started"

    def _start(self, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-m", *argv], env={**os.environ, **env},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def worker(self, slow: bool) -> subprocess.Popen[bytes]:
        argv = ["distributed.cli.dask_worker", self.address, "--nthreads", "1", "--no-nanny",
                "--no-dashboard", "--death-timeout", "10"]
        env = {}
        if slow:
            preload = self.folder / "slow_jobs.py"
            preload.write_text(PRELOAD)
            argv += ["--preload", str(preload)]
            env["TILESCOPE_TEST_MARK"] = str(self.mark)
        return self._start(argv, env)

    def wait_for_workers(self, n: int) -> None:
        import distributed

        with distributed.Client(self.address, set_as_default=False, timeout="60s") as client:
            client.wait_for_workers(n, timeout=120)

    def kill_at_mark(self, proc: subprocess.Popen[bytes], killed: dict[str, float]) -> threading.Thread:
        """SIGKILL `proc` once a slow job has started (its mark exists); the time in `killed`."""

        def watch() -> None:
            deadline = time.monotonic() + 120
            while not self.mark.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            proc.send_signal(signal.SIGKILL)
            killed["at"] = time.monotonic()

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    import tilescope.rankwork_dask as rd

    monkeypatch.setattr(rd, "NO_WORKERS_WAIT_S", 1.0)
    monkeypatch.delenv("TILESCOPE_SCHEDULER", raising=False)
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.stop()


def _children() -> list[Any]:
    import psutil

    return psutil.Process().children(recursive=True)


def _no_process_left_by_tilescope(cluster: Cluster) -> None:
    ours = {p.pid for p in cluster.procs} | cluster.before
    left = [p for p in _children() if p.pid not in ours and p.status() != "zombie"]
    assert left == [], [(p.pid, p.cmdline()) for p in left]


def test_the_only_worker_killed_mid_run_is_one_line_not_a_hang(
    run2: Path, cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    worker = cluster.worker(slow=True)
    cluster.wait_for_workers(1)
    killed: dict[str, float] = {}
    cluster.kill_at_mark(worker, killed)
    assert main(["analyze", str(run2), "--no-cache", "--scheduler", cluster.address]) == 3
    after_kill = time.monotonic() - killed["at"]
    assert after_kill < 1.0 + 6, after_kill  # the no-workers wait (1 s here) and the scheduler's notice
    assert worker.wait(timeout=5) == -signal.SIGKILL
    assert only_line(capsys) == (
        f"tilescope: error: --scheduler {cluster.address}: the Dask cluster lost its workers mid-run "
        "(none for 1 s; 2 of 2 ranks unfinished); start some with `dask worker ADDRESS`"
    )
    _no_process_left_by_tilescope(cluster)


def test_the_scheduler_killed_mid_run_is_one_line(
    run2: Path, cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.worker(slow=True)
    cluster.wait_for_workers(1)
    killed: dict[str, float] = {}
    cluster.kill_at_mark(cluster.scheduler, killed)
    t0 = time.monotonic()
    assert main(["analyze", str(run2), "--no-cache", "--scheduler", cluster.address]) == 3
    assert time.monotonic() - t0 < 60  # the client's reconnection attempts, bounded by the connect deadline
    assert only_line(capsys) == (
        f"tilescope: error: --scheduler {cluster.address}: the Dask cluster failed (FuturesCancelledError: "
        "the ranks were cancelled, scheduler-connection-lost)"
    )
    _no_process_left_by_tilescope(cluster)


def test_one_of_two_workers_killed_mid_run_is_retried_on_the_other(
    run2: Path, cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(run2), "--no-cache", "-j", "1", "-f", "json"]) == 0
    alone = json.loads(capsys.readouterr().out)
    doomed = cluster.worker(slow=True)
    cluster.worker(slow=False)
    cluster.wait_for_workers(2)
    killed: dict[str, float] = {}
    cluster.kill_at_mark(doomed, killed)
    argv = ["analyze", str(run2), "--no-cache", "--scheduler", cluster.address, "-f", "json"]
    assert main(argv) == 0
    assert "at" in killed  # the slow worker did take a rank, and was killed with it
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    on_dask = json.loads(captured.out)
    assert on_dask["cluster"] == alone["cluster"]
    assert on_dask["findings"] == alone["findings"]
    _no_process_left_by_tilescope(cluster)
