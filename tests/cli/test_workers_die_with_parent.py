"""`kill -9` of tilescope ends its workers (tilescope.lifeline; issue #27 found pool workers, sweep
workers and the tilelang-ascend worker running on): each case starts a real parent process that
starts its workers the way tilescope does, kills the parent with SIGKILL and checks that every
worker is gone within a few seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _alive(pid: int) -> bool:
    """Running, not a zombie left for a reaper that may never come (PID 1 of a container)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _kill_parent_and_wait(script: str, tmp_path: Path, grace_s: float = 5.0) -> list[int]:
    """Run `script` (it prints its workers' pids on one line, then sleeps), SIGKILL it, and return
    the workers still alive `grace_s` later (asserting they were alive before)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        pids = [int(p) for p in line.split()]
        assert pids, parent.stderr.read() if parent.stderr else ""
        assert all(_alive(p) for p in pids)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    left = [p for p in pids if _alive(p)]
    for p in left:  # never leave them behind for the next test
        os.kill(p, signal.SIGKILL)
    return left


POOL = """
    import os, time
    {first}
    import tilescope.rankwork as rw
    pool = rw._process_pool(2)
    assert pool._mp_context.get_start_method() == {method!r}
    list(pool.map(time.sleep, [0.3, 0.3]))  # both workers started
    time.sleep(0.3)  # and through their initializer
    import multiprocessing.forkserver as fs
    server = [fs._forkserver._forkserver_pid] if {method!r} == "forkserver" else []
    print(*pool._processes, *server, flush=True)  # the workers, and the fork server
    time.sleep(60)
"""


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_analyze_pool_workers_forked_from_the_command_die_with_it(tmp_path: Path) -> None:
    assert _kill_parent_and_wait(POOL.format(first="", method="fork"), tmp_path) == []


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_analyze_pool_workers_from_the_fork_server_die_with_it(tmp_path: Path) -> None:
    # a process that has loaded DuckDB starts its workers from a fork server (rankwork._process_pool)
    script = POOL.format(first="import duckdb; duckdb.connect().execute('select 1')", method="forkserver")
    assert _kill_parent_and_wait(script, tmp_path) == []


def test_the_tilelang_ascend_worker_dies_with_lint(tmp_path: Path) -> None:
    """The worker is started in its own session (Ctrl-C reaches tilescope first), so no signal of
    the terminal reaches it: a stand-in interpreter (a shell that sleeps) started by the real
    `foreign.run_jobs` must still end when tilescope is killed."""
    kernel = tmp_path / "k.py"
    kernel.write_text("def f():\n    pass\n")
    script = f"""
        import sys
        from pathlib import Path
        from tilescope.ir import foreign
        pidfile = Path({str(tmp_path / "worker.pid")!r})
        stand_in = ["sh", "-c", f"echo $$ > {{pidfile}}; exec sleep 60", "sh"]
        interp = foreign.Interpreter(stand_in, "native", Path("/"))
        import threading, time
        def report():
            while not pidfile.exists() or not pidfile.read_text().strip():
                time.sleep(0.02)
            print(pidfile.read_text().strip(), flush=True)
        threading.Thread(target=report, daemon=True).start()
        foreign.run_jobs(interp, [(Path({str(kernel)!r}), ["f"], [{{}}])])
    """
    assert _kill_parent_and_wait(script, tmp_path) == []


@pytest.mark.slow
def test_sweep_workers_die_with_lint(tmp_path: Path) -> None:
    pytest.importorskip("tilelang")
    script = """
        import os, time
        from tilescope.sweep import worker_pool
        pool = worker_pool(1)
        pid = pool.submit(os.getpid).result()  # through its initializer (TileLang imported)
        print(pid, flush=True)
        time.sleep(60)
    """
    assert _kill_parent_and_wait(script, tmp_path) == []
