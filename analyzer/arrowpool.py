"""Arrow's memory pool for the processes that load kernel tables (`analyze`, its rank workers)."""

from __future__ import annotations

import os


def arrow_returns_freed_memory() -> bool:
    """Make Arrow's allocator jemalloc with no decay delay, unless ARROW_DEFAULT_MEMORY_POOL says
    otherwise; True when it did.

    Why: the kernel CSV is parsed on Arrow's reader threads, and Arrow's default mimalloc keeps
    what they free (the parsed file, the conversion's buffers: ~0.4 GB per million kernels) as
    cached pages no other allocator can reuse; the rules and the report then put their working
    arrays on top. jemalloc with decay 0 returns freed pages at once: peak RSS of `analyze` on
    3 M kernels 4.0 -> 3.6 GB (docs/benchmarks.md). Only where buffers live changes, no value.
    """
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return False  # the user chose Arrow's allocator
    import pyarrow as pa

    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without jemalloc: keep its default
        return False
    pa.set_memory_pool(pool)
    pa.jemalloc_set_decay_ms(0)
    return True
