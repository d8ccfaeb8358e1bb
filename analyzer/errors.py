"""Typed errors with the exit codes of docs/product.md.

Every error the user can cause maps to one clear line and an exit code; anything else is a bug and
keeps its traceback.
"""

from __future__ import annotations

from pathlib import Path

from tilescope.text.escape import terminal_text


class TilescopeError(Exception):
    """Base of every error shown to the user as one line."""

    exit_code = 2

    def one_line(self) -> str:
        return str(self)

    def terminal_line(self) -> str:
        """`tilescope: error: <message>` for stderr. Messages name files and quote values read
        from them, so control characters are shown as escapes, not sent to the terminal."""
        return terminal_text(f"tilescope: error: {self.one_line()}")


class ProfileFormatError(TilescopeError):
    """A profiler file is not what we expected.

    `where` is a row ("row 12"), a line ("line 3") or a byte offset ("byte 1048576"); `expected`
    says what should have been there.
    """

    def __init__(self, path: str | Path, where: str | None, expected: str) -> None:
        self.path = str(path)
        self.where = where
        self.expected = expected
        loc = f"{self.path}: {where}" if where else self.path
        super().__init__(f"{loc}: {expected}")

    def __reduce__(self) -> tuple[type, tuple[str, str | None, str]]:
        # rebuilt from its parts: a per-rank worker's error crosses a process boundary (pickle)
        return (type(self), (self.path, self.where, self.expected))


class NoProfileFoundError(TilescopeError):
    """A path holds nothing we can read."""

    def __init__(self, path: str | Path, detail: str = "") -> None:
        self.path = str(path)
        self.detail = detail
        msg = f"{path}: no Ascend profile found"
        if detail:
            msg += f" ({detail})"
        super().__init__(msg)

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return (type(self), (self.path, self.detail))


class UsageError(TilescopeError):
    """Bad command-line usage or configuration."""


class MissingComponentError(TilescopeError):
    """A required component (NPU, CANN, TileLang, msprof-analyze) is not installed."""

    exit_code = 3


class GateTrippedError(TilescopeError):
    """A --fail-on / --fail-on-regression gate tripped."""

    exit_code = 1
