"""What a report says about itself — schema version, tool version, time stamp, timeline cap —
in a module that imports nothing heavy: a run answered from the cache (`commands.analyze.cached_run`)
and the cache's code fingerprint need these without numpy or pandas."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata

SCHEMA_VERSION = "1.1"  # 1.1: a multi-rank report groups each rank's own findings and skipped rules
TIMELINE_CAP = 5_000  # launches in `timeline`; above it the longest are kept


def now_stamp() -> str:
    """A report's `generated_at`: now, UTC, to the second."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def tool_version() -> str:
    try:
        return importlib.metadata.version("tilescope")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0+unknown"
