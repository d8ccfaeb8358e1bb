"""SIGINT and SIGTERM end a command by unwinding it, like Ctrl-C in plain Python.

While a command runs (`signals_raise`), either signal raises `Interrupted` in the main thread, so
every `finally` and context manager on the way out runs: output temporaries are dropped, scratch
directories removed, child process groups killed. The CLI then prints one line and exits with
128 + the signal number (130, 143; docs/product.md).

`Interrupted` is a BaseException, like KeyboardInterrupt, so `except Exception` does not swallow
it, but it is not a KeyboardInterrupt: typer turns that into a bare exit code 130 (SIGTERM's 143
would be lost) and pyarrow/DuckDB treat it specially. Libraries may still swallow the exception
they see (DuckDB's `fetchall` turns it into RuntimeError('Query interrupted')), so the signal is
also recorded: the CLI reports it whatever exception ends the command, and `check()` stops any
output from being committed after it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

SIGNALS: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)
# Test hook, see `hold_point`: "NAME:MARKER".
HOLD_ENV = "TILESCOPE_TEST_HOLD"


class Interrupted(BaseException):
    """SIGINT/SIGTERM arrived while a command ran; unwinds the stack like KeyboardInterrupt."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class _State:
    """The first signal received while handlers are installed; whether one may still raise."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.raising = False


_state = _State()


def _handler(signum: int, frame: FrameType | None) -> None:
    if _state.signum is not None or not _state.raising:
        # Raise once only: a second Ctrl-C must not cut short the cleanup the first one started
        # (a half-removed scratch directory, a child process group left running).
        return
    _state.signum = signum
    raise Interrupted(signum)


def received() -> int | None:
    """The signal that interrupted the current command, if one did."""
    return _state.signum


def check() -> None:
    """Raise `Interrupted` if a signal arrived, even if some library swallowed the exception:
    called before output is committed, so an interrupted command never replaces a file."""
    if _state.signum is not None:
        raise Interrupted(_state.signum)


@contextlib.contextmanager
def signals_raise(restore: bool = True) -> Iterator[None]:
    """Within the block, SIGINT/SIGTERM raise `Interrupted` (once; later ones are recorded only).

    A signal the parent set to be ignored (`nohup`, a background job of a non-interactive shell)
    stays ignored. Outside the main thread signals cannot be handled; nothing is installed. On
    leaving, the previous handlers come back when `restore`; otherwise (the process is about to
    `os._exit`) ours stay, recording without raising, so a late signal cannot print a traceback.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}
    for sig in SIGNALS:
        if signal.getsignal(sig) != signal.SIG_IGN:
            previous[sig] = signal.signal(sig, _handler)
    _state.signum, _state.raising = None, True
    try:
        yield
    finally:
        _state.raising = False
        if restore:
            for sig, old in previous.items():
                if old is not None:  # None: a handler set outside Python, which cannot be put back
                    signal.signal(sig, old)
            _state.signum = None


def hold_point(name: str) -> None:
    """Test hook: with TILESCOPE_TEST_HOLD=NAME:MARKER in the environment, create MARKER and wait
    here until a signal ends the process, so a test can signal a real run at this exact point
    instead of sleeping and hoping. Without the variable this is one dictionary lookup."""
    spec = os.environ.get(HOLD_ENV)
    if not spec:
        return
    point, _, marker = spec.partition(":")
    if point != name:
        return
    Path(marker).touch()
    while True:  # in the main thread a signal's `Interrupted` ends the wait; elsewhere os._exit does
        time.sleep(60)
