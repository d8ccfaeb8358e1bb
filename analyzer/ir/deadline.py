"""A deadline on lowering one kernel (`tilescope lint --timeout`, default `LOWER_TIMEOUT_S`).

A builder with `while True` hung lint for ever (issue #27): lint imports and runs the kernel's
module and builder, which are the user's code. In this process the deadline is a SIGALRM timer whose
handler raises `LoweringTimeout` — a BaseException, so that neither the builder's nor TileLang's
`except Exception` swallows it; it interrupts Python code (the builder, TileLang's Python passes),
not a single native call, which is seen when it returns. The tilelang-ascend worker, a process of its
own, is killed `WORKER_START_S` + the deadline × its lowerings after it started.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from tilescope.errors import UsageError

LOWER_TIMEOUT_S = 600.0  # generous: the largest published kernels lower in under 10 s on x86
# importing tilelang-ascend in its worker: 17–40 s under emulation (docs/lint.md), with room to spare
WORKER_START_S = 120.0


class LoweringTimeout(BaseException):
    """The deadline passed while lowering ran in this process."""


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Raise LoweringTimeout in this thread after `seconds` (None or 0: no deadline). Only the main
    thread receives signals: elsewhere (a server's request thread) there is no deadline."""
    usable = bool(seconds) and threading.current_thread() is threading.main_thread()
    if not usable or not hasattr(signal, "setitimer"):
        yield
        return
    assert seconds is not None

    def ring(signum: int, frame: FrameType | None) -> None:
        raise LoweringTimeout(seconds)

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def timeout_error(path: Path | str, seconds: float) -> UsageError:
    """The one line (exit 2) of a lowering stopped at its deadline."""
    return UsageError(
        f"{path}: lowering did not finish within {seconds:g} s (--timeout {seconds:g}); does its "
        "builder ever return? (a larger --timeout gives it longer)"
    )
