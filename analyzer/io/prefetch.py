"""The timeline read on a second thread: `load_profiles` starts reading a torch_npu directory's
trace_view.json before it imports pandas and the readers (`prefetch_timeline`, `import_readers`),
and the loaders take the future over (`read_timeline_now`, `start_timeline`, `take_timeline`).

Kept light at import, as `tilescope.io.load` is: DuckDB needs neither pandas nor the readers, so
the scan overlaps their import (~0.15 s, pandas most of it) on the main thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from tilescope.io.detect import TORCH_OUT
from tilescope.io.parts import Parts

if TYPE_CHECKING:
    from tilescope.profile import Timeline

# Timelines whose reading `load_profiles` started before importing the readers, by path.
_PREFETCHED: dict[Path, Future[Timeline]] = {}


def read_timeline_now(path: Path, parts: Parts) -> Timeline | None:
    prefetched = _PREFETCHED.pop(path, None)  # a directory holding only a trace_view.json
    if prefetched is not None:
        parts.files.append(path)
        return prefetched.result()
    try:
        # deferred: io.timeline (duckdb) only where used
        from tilescope.io.timeline import read_timeline
    except ImportError:
        parts.warnings.append(f"{path.name}: timeline reader not available; timeline skipped")
        return None
    parts.files.append(path)
    return read_timeline(path)


def start_timeline(path: Path, before_build: Callable[[], object] | None = None) -> Future[Timeline] | None:
    """Read the timeline on a second thread while the kernel table is parsed: both readers spend
    their time in C++ (DuckDB's JSON scan, Arrow's CSV reader) with the GIL released."""
    prefetched = _PREFETCHED.pop(path, None)
    if prefetched is not None:
        return prefetched
    try:
        # deferred: io.timeline (duckdb) only where used
        from tilescope.io.timeline import read_timeline
    except ImportError:
        return None
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tilescope-timeline")
    future = pool.submit(read_timeline, path, before_build)
    pool.shutdown(wait=False)
    return future


def prefetch_timeline(p: Path, imported: threading.Event) -> None:
    """Start reading the trace_view.json of a torch_npu directory before pandas is imported.

    Only the plain layouts `formats._read_torch` reads (the `*_ascend_pt` root or its
    ASCEND_PROFILER_OUTPUT); `formats._read_torch` takes the future over. The scan runs while the main
    thread imports pandas and the readers; the frames are built once `imported` is set.
    """
    if not p.is_dir() or (p / "manifest.json").is_file():
        return
    for tv in (p / TORCH_OUT / "trace_view.json", p / "trace_view.json"):
        if tv.is_file():
            future = start_timeline(tv, imported.wait)
            if future is not None:
                _PREFETCHED[tv] = future
            return


def import_readers() -> None:
    """What loading imports anyway, at once: the prefetch thread builds frames only after this."""
    # deferred: the point of this function: the readers (pandas, pyarrow) load here while the prefetch thread
    #   scans
    import tilescope.io.kernel_csv
    import tilescope.io.timeline_links
    import tilescope.metrics
    import tilescope.profile  # noqa: F401


def _finish_timeline(path: Path, future: Future[Timeline] | None, parts: Parts) -> Timeline | None:
    if future is None:
        return read_timeline_now(path, parts)  # reports the missing reader as a warning
    parts.files.append(path)
    return future.result()


def take_timeline(parts: Parts, path: Path, future: Future[Timeline] | None, defer: bool) -> None:
    """The timeline into `parts`: left still being read (`pending_timeline`, resolved by the profile
    on first use) when `defer` and a read is under way, else waited for."""
    if future is not None and defer:
        parts.files.append(path)
        parts.pending_timeline = future.result
    else:
        parts.timeline = _finish_timeline(path, future, parts)


def clear_prefetched() -> None:
    """Drop a prefetched timeline that detection did not pick (it is read normally if asked for)."""
    _PREFETCHED.clear()
