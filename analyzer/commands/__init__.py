"""The sub-commands of `tilescope`, one module each (analyzer/cli.py registers them)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

CHIP_HELP = ("Chip name (910B2, ...; NAME:cj for the vendor's \"CJ\" memory type, whose GM and L2 are "
             "slower: 910B2 1.3 TB/s, not 1.75) or a .toml/.json chip file.")
STRICT_HELP = (
    "Refuse a kernel table with an unreadable row (exit 2, the row named) instead of skipping the "
    "row with a note that counts such rows."
)


def honours_strict(command: Callable[..., T]) -> Callable[..., T]:
    """Run `command` with its `--strict` in force (tilescope.io.bad_rows.strict_rows), restored
    after it: commands run in-process in the tests, and per-rank workers inherit the setting."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> T:
        # deferred: io.bad_rows only when a command runs; `tilescope --help` imports this module
        from tilescope.io.bad_rows import strict, strict_rows

        with strict_rows(bool(kwargs.get("strict")) or strict()):
            return command(*args, **kwargs)

    return run
