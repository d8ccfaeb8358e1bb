"""Arrow's memory pool for the processes that load kernel tables (`analyze`, its rank workers)."""

from __future__ import annotations

import os

# An input under this size (a rank of a multi-rank run, typically a few MB) gets a short decay
# instead of none: returning every freed page at once cost the workers of a 64-rank run of 8,808
# kernels per rank 1.2-1.3 s of system time for 64 x 105 ms of work; 100 ms halves that (wall
# 4.3-4.5 -> 3.9-4.2 s) while the pages still go back within a rule's run.
SMALL_INPUT_BYTES = 64 * 2**20
SMALL_INPUT_DECAY_MS = 100


def arrow_returns_freed_memory(input_bytes: int | None = None) -> bool:
    """Make Arrow's allocator jemalloc with no decay delay (SMALL_INPUT_DECAY_MS for an input of
    `input_bytes` under SMALL_INPUT_BYTES), unless ARROW_DEFAULT_MEMORY_POOL says otherwise; True
    when it did.

    Why: the kernel CSV is parsed on Arrow's reader threads, and Arrow's default mimalloc keeps
    what they free (the parsed file, the conversion's buffers: ~0.4 GB per million kernels) as
    cached pages no other allocator can reuse; the rules and the report then put their working
    arrays on top. jemalloc with decay 0 returns freed pages at once: peak RSS of `analyze` on
    3 M kernels 4.0 -> 3.6 GB (docs/benchmarks.md). Only where buffers live changes, no value.
    """
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return False  # the user chose Arrow's allocator
    # deferred: pyarrow (~0.25 s) only where used
    import pyarrow as pa

    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without jemalloc: keep its default
        return False
    pa.set_memory_pool(pool)
    small = input_bytes is not None and 0 < input_bytes < SMALL_INPUT_BYTES
    pa.jemalloc_set_decay_ms(SMALL_INPUT_DECAY_MS if small else 0)
    return True
