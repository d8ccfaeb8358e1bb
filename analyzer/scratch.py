"""Scratch directories (DuckDB spill space, the advisor's input layout) that never outlive the process.

Each is removed when its block ends, normally or by an exception (`Interrupted` included). That
is not enough on its own: the CLI ends with `os._exit`, which skips the `finally` of threads still
running (a timeline read on the prefetch thread when the kernel table beside it was bad), so the
live ones are also registered here and `remove_all` removes them on that fast exit path.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

_lock = threading.Lock()
_live: set[Path] = set()
_swept: set[str] = set()
_closed = False


class ScratchClosedError(RuntimeError):
    """A scratch directory was asked for after `remove_all` (the process is exiting)."""


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A new directory in the system temp dir (TMPDIR), removed with its contents afterwards."""
    path = _new_live(prefix)
    try:
        yield path
    finally:
        _remove(path)
        with _lock:
            _live.discard(path)


def process_dir(prefix: str) -> Path:
    """A new directory in the system temp dir for the rest of this process (what a library wants
    to find in an environment variable), removed when the process ends: by `remove_all` on the
    CLI's fast exit, at interpreter exit for an in-process caller. Named and swept as
    `scratch_dir`'s, so a killed process's is removed by the next run."""
    path = _new_live(prefix)
    atexit.register(_remove, path)
    return path


def _new_live(prefix: str) -> Path:
    """A new `prefix<pid>-XXXX` directory, registered as live; the first of a prefix sweeps the
    ones killed processes left."""
    # created and registered under the lock: `remove_all` never misses one created beside it
    with _lock:
        if _closed:
            raise ScratchClosedError("the process is exiting")
        if prefix not in _swept:
            _swept.add(prefix)
            _sweep_dead(prefix)
        # the pid in the name lets a later run remove what a killed one (kill -9) left
        path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))
        _live.add(path)
    return path


def _sweep_dead(prefix: str) -> None:
    """Remove `prefix<pid>-*` directories whose process is gone (a kill -9 skips every cleanup);
    another user's, or a live process's, are left alone."""
    for path in Path(tempfile.gettempdir()).glob(f"{glob.escape(prefix)}*-*"):
        pid = path.name[len(prefix) :].split("-", 1)[0]
        try:
            st = path.lstat()
        except OSError:
            continue
        if not pid.isdigit() or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            _remove(path)
        except (PermissionError, OverflowError, ValueError):
            continue


def _remove(path: Path) -> None:
    # twice: a thread still writing there (a DuckDB spill) may add a file while the tree goes
    for _ in range(2):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            return


def remove_all() -> None:
    """Remove every live scratch directory and refuse new ones: the process is about to end
    without running the `finally` blocks of its other threads."""
    global _closed
    with _lock:
        _closed = True
        paths = sorted(_live)
        _live.clear()
    for path in paths:
        _remove(path)
