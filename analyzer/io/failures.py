"""The failure model of loading several profiles under one path: one that cannot be read is left
out (`LoadFailure`, named by its rank where anything names one: `rank_of_failed`), the others carry
a note about it (`left_out_warnings`), and a command that wrote their output ends with
`PartialLoadError` (exit 2). Used by `tilescope.io.load` and the per-rank workers
(`tilescope.rankwork`) alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tilescope.errors import TilescopeError
from tilescope.io.detect import Detected
from tilescope.text.escape import terminal_text


@dataclass
class LoadFailure:
    """One of several profiles under a path that could not be read (the others were loaded)."""

    path: Path | str  # the profile's root (a rank's directory, a database, ...; str: a URL)
    error: TilescopeError  # ProfileFormatError or NoProfileFoundError: file, row, what was expected
    rank: int | None = None

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else Path(str(self.path)).name

    def warning_line(self) -> str:
        """`tilescope: warning: <file>: row 16 (line 17): expected ... — rank 0 left out`, for
        stderr: the path and the message may quote the trace, so control characters are shown as
        escapes (`terminal_text`)."""
        return terminal_text(f"tilescope: warning: {self.error.one_line()} — {self.label} left out")


class PartialLoadError(TilescopeError):
    """Raised by a command after it wrote the output of the profiles that loaded, when others
    under the same path could not be read: exit 2, "partial: some inputs could not be read"."""

    def __init__(self, failures: list[LoadFailure], loaded: int) -> None:
        self.failures = failures
        # each named with its path, so that the one error line says which files to look at (the
        # warning lines above it carry each file's row and reason)
        named = [f"{f.label}: {f.path}" if f.rank is not None else str(f.path) for f in failures[:3]]
        labels = ", ".join(named)
        labels += ", …" if len(failures) > 3 else ""
        n, total = len(failures), len(failures) + loaded
        super().__init__(
            f"partial input: {n} of {total} profiles could not be read ({labels}); "
            f"the output covers the other {loaded}"
        )


def rank_of_failed(det: Detected) -> int | None:
    """The rank of a profile that failed to load, from what names it (no table is read)."""
    # deferred: io.device (pyarrow) only where used
    from tilescope.io import device as dev

    if det.rank is not None:
        return det.rank
    if det.format == "torch_npu":
        rank = dev.read_profiler_info(det.path)[0]
        return rank if rank is not None else dev.rank_from_name(det.path)
    if det.format in ("folder", "kernel_csv"):
        return dev.rank_from_name(det.path)
    if det.format == "sqlite":
        # deferred: io.sqlite (pyarrow) only where used
        from tilescope.io.sqlite import RANK_DB_RE

        m = RANK_DB_RE.match(det.path.name)
        return int(m.group("rank")) if m else None
    return None


def left_out_warnings(failures: Sequence[LoadFailure]) -> list[str]:
    """The note every loaded profile carries about the inputs under the same path left out."""
    return [f"{f.label} left out: {f.error.one_line()}" for f in failures]
