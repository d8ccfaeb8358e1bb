"""Child processes with a timeout that never outlive the collector.

Each child gets its own session (process group) so that a timeout, an exception or Ctrl-C in the
collector kills the child *and* whatever it started (msprof op forks the application and its own
helpers); otherwise a stuck profiler keeps the device busy after tilescope has exited.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tilescope.errors import TilescopeError
from tilescope.lifeline import Preexec

# The child that builds, checks and runs one kernel, started through tilescope.run_module.command
# (the NPU's Python may not have tilescope installed).
WORKER = "tilescope.collectors.worker"

KILL_GRACE_S = 5.0


@dataclass
class CommandRecord:
    """One command as the manifest records it."""

    argv: list[str]
    purpose: str
    group: str | None = None
    returncode: int | None = None
    duration_s: float | None = None
    log: str | None = None  # bundle-relative path of its combined stdout/stderr

    def to_dict(self) -> dict[str, object]:
        return {"argv": self.argv, "purpose": self.purpose, "group": self.group,
                "returncode": self.returncode, "duration_s": self.duration_s, "log": self.log}


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    # SIGINT first: msprof op and the worker treat it as Ctrl-C and stop the profiler cleanly
    # (prof.stop() in the worker's finally); SIGTERM if that is not enough. Then SIGKILL for the
    # whole group regardless: background helpers of a shell ignore SIGINT and would outlive it.
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=KILL_GRACE_S)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=KILL_GRACE_S)


def run_command(
    record: CommandRecord,
    timeout: float | None,
    log_path: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> CommandRecord:
    """Run `record.argv`, output to `log_path`; raise TilescopeError on timeout, kill on any exit."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            record.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, cwd=cwd, start_new_session=True, preexec_fn=Preexec(),  # ends with the collector
        )
        try:
            record.returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise TilescopeError(
                f"{record.purpose}: no result after {timeout:g} s, stopped (raise --timeout; log: {log_path})"
            ) from None
        except BaseException:
            _kill_group(proc)  # exception or Ctrl-C in the collector: the child must not linger
            raise
        finally:
            record.duration_s = round(time.monotonic() - start, 3)
    return record


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])
