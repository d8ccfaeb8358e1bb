"""Every process tilescope starts ends with the process that started it.

`kill -9` of `analyze` left its pool workers running, of `lint --sweep` its sweep workers, and the
tilelang-ascend worker (in its own session, so that Ctrl-C reaches tilescope first) kept lowering
for minutes (issue #27). On Linux a child asks the kernel for SIGKILL when its parent ends
(`prctl(PR_SET_PDEATHSIG)`), which holds through `exec` — the worker's `unshare`, `sh`, `chroot`
and the emulated interpreter are one process; a Python child that is not its parent's own child (a
fork server's worker), or runs elsewhere, watches the parent from a daemon thread.

Standard library only: `preexec` runs between fork and exec, where nothing may be imported.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WATCH_EVERY_S = 1.0


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)  # this process's own libc: nothing loaded after a fork
    except OSError:
        return None


_LIBC = _libc()


def _ask_kernel() -> bool:
    """SIGKILL to this process when its parent (the thread that forked it) ends; False when this
    system has no such request."""
    return _LIBC is not None and _LIBC.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0


def die_with_parent(parent: int | None = None) -> None:
    """Call first thing in a Python child (a pool's initializer): it then ends with the process
    `parent` (its pid, taken by the parent before starting it, so that a parent that died before
    this call is seen too; None: this process's parent now).

    `parent` may be a grandparent: a worker of a fork server (multiprocessing's forkserver start
    method) is the server's child, and the server ends only once every worker has closed the
    parent's end of a pipe it holds — so such a worker watches the process that asked for it."""
    parent = os.getppid() if parent is None else parent
    if os.getppid() == parent and _ask_kernel():
        if os.getppid() != parent:  # the parent ended just before the request was made
            os._exit(1)
        return
    _watch(parent)


def _watch(pid: int) -> None:
    """A daemon thread that ends this process when process `pid` ends: it waits on a pidfd (Linux
    ≥ 5.3: readable once the process has ended, whatever pid is given out later), else polls."""
    try:
        fd: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux, or too old a kernel; or `pid` has ended already
        fd = None
        if not _exists(pid):
            os._exit(1)

    def wait() -> None:
        if fd is not None:
            select.select([fd], [], [])
        else:
            while _exists(pid):
                time.sleep(WATCH_EVERY_S)
        os._exit(1)

    threading.Thread(target=wait, name="tilescope-parent-watch", daemon=True).start()


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process now holds the pid: the parent is gone
        return False
    return True


class Preexec:
    """`preexec_fn` of a subprocess that must end with this process (Linux; elsewhere nothing:
    no thread can outlive the exec). The parent's pid is taken when this is made."""

    def __init__(self) -> None:
        self.parent = os.getpid()

    def __call__(self) -> None:
        if _ask_kernel() and os.getppid() != self.parent:
            os._exit(1)
