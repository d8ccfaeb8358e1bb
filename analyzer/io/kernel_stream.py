"""One kernel CSV to a file in overlapping stages: parse, normalise + derive, write.

`tilescope kernels FILE --format parquet|csv -o OUT` spends its time in three parts of similar
size: the CSV parse, the normalisation with the derived metrics, and the encoding of the output.
Done one after the other, two of the three leave the second core idle. Here they overlap over
groups of ~16 MB of the file (Arrow and numpy release the GIL in their C++ loops):

  parsers  one or two threads, each parsing whole groups (byte ranges cut at newlines) with the
           typed fast path of `tables.read_csv_strings` (same options), up to AHEAD groups ahead
  main     per group in file order, exactly the steps of `read_kernel_arrow` +
           `add_derived_metrics_arrow`
  writer   the output sink (one Parquet row group or one CSV chunk per group)

The whole-file path (`load_kernels_arrow`) stays the reference. Streaming gives up, by raising
`StreamFallback` before anything reaches the user, wherever it could differ from it:

- a value the typed reader cannot parse (a word in a number column): the whole-file path re-reads
  everything as text, cleans it, and names the bad row with its row number in the file;
- a newline inside a quoted value (legal CSV: a kernel named "a<LF>b"): the ranges are cut at
  newlines without tracking quotes, so a range holding one may have been cut inside a value
  (`_check_whole_rows`);
- a column whose type differs between groups (an unknown column numeric in one, text in another);
- the chip. A CSV alone has no device information (a profile directory records some beside it:
  `device`), so what is not recorded, often all of it, is inferred from the data (medians over all
  rows, `device.infer_from_kernels`). The first group's inference is
  used speculatively; the per-row inputs of the inference are gathered from every group
  (`device.ChipEvidence`, a few float arrays), and at the end the same inference runs on all rows.
  If the chip differs, the caller redoes the file the whole-file way. On real profiles the two
  agree: they describe one device.
"""

from __future__ import annotations

import contextlib
import csv
import importlib
import mmap
import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from tilescope.chips import ChipSpec
from tilescope.columns import canonical_header, is_coupled_header
from tilescope.errors import ProfileFormatError
from tilescope.gcpause import gc_paused
from tilescope.io import device as dev
from tilescope.profile import DeviceInfo

# A group is ~16 MB of the file (~57k kernel_details rows): big enough that per-group overheads
# stay small, small enough that the last group's work after the parse ends is short.
GROUP_BYTES = 16 << 20
BLOCK_SIZE = 2 << 20
# Parser threads taking alternate groups, and how many groups may be parsed ahead of the main
# thread (bounds the memory held). Two parsers: the parse is the critical path when the sink is
# light (the terminal view: 1.31 -> 1.06 s median for 1 M rows); when the sink encodes a file the
# two cores are already busy and a second parser only adds contention (`stream_kernels` uses one).
PARSERS = 2
AHEAD = 2
_END = object()


class StreamFallback(Exception):
    """The file needs the whole-file path; the message says why (for --debug and tests)."""


def _put(q: queue.Queue[Any], item: object, stop: threading.Event) -> bool:
    """Put unless the pipeline is stopping (a bounded queue would otherwise block forever)."""
    while not stop.is_set():
        try:
            q.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def _chunks(buf: pa.Buffer, start: int, size: int) -> Iterator[tuple[int, int]]:
    """Byte ranges [start, end) of about `size` bytes from `start`, each ending after a newline.

    A newline ends a row unless it is inside a quoted value; `_parse` checks that each range was
    whole rows, so the parses concatenated are the parse of the whole file.
    """
    n = buf.size
    while start < n:
        end = min(n, start + size)
        while end < n:
            window = min(n - end, 1 << 16)
            nl = buf.slice(end, window).to_pybytes().find(b"\n")
            if nl >= 0:
                end += nl + 1
                break
            end += window
        yield start, end
        start = end


def _parse(buf: pa.Buffer, start: int, end: int, options: dict[str, Any]) -> pa.Table:
    table = pacsv.read_csv(pa.BufferReader(buf.slice(start, end - start)), **options)
    _check_whole_rows(buf, start, end, table.num_rows)
    return table


def _check_whole_rows(buf: pa.Buffer, start: int, end: int, rows: int) -> None:
    """Raise StreamFallback unless [start, end), which starts a row, ends one and holds no newline
    inside a quoted value.

    A cut inside a quoted value is not an error for the parser: it reads the open value to the
    end of the range, and the rest of the row starts the next range (a crafted value parses there
    as a row of its own). Within the range the parse honours quotes, so every newline ends a row
    exactly when the rows equal the newlines (+1 for a last row without one). That count misses
    one case: the only quoted newline is the one the range was cut after; the last line then holds
    an unclosed quote, which a strict parse of that line finds. Both checks run on the parser
    thread: a count over the range (~1 ms per 16 MB) and one line.
    """
    data = np.frombuffer(buf, dtype=np.uint8, count=end - start, offset=start)
    newlines = int(np.count_nonzero(data == 0x0A))
    unterminated = int(end > start and data[-1] != 0x0A)  # the file's last row, without a newline
    if rows != newlines + unterminated:
        raise StreamFallback("a newline inside a quoted value (or an empty line)")
    last_line = _last_line(data if unterminated else data[:-1]).decode("utf-8", "replace")
    try:
        for _ in csv.reader([last_line], strict=True):
            pass
    except csv.Error as exc:
        raise StreamFallback(f"the range may end inside a quoted value ({exc})") from exc


def _last_line(body: np.ndarray[Any, np.dtype[np.uint8]]) -> bytes:
    """The bytes after the last newline of `body`, looked for in a growing tail (lines are short)."""
    window = 1 << 16
    while True:
        tail = body[-window:].tobytes()
        cut = tail.rfind(b"\n")
        if cut >= 0 or window >= len(body):
            return tail[cut + 1 :]
        window *= 4


class _MappedFile:
    """A file mapped read-only, as one Arrow buffer, whose pages before a point can be let go.

    The mapped pages a parse has read stay in the process's resident set until unmapped, and peak
    RSS counts them (page cache, shared with the kernel, but `ru_maxrss` cannot tell): a stream
    over a 943 MB file held all 943 MB at its end. `release(end)` drops the whole pages before
    `end` from the mapping (madvise MADV_DONTNEED): they stay in the page cache, and a read of
    them again, which the stream never does, would map them back from it unchanged.
    """

    def __init__(self, path: Path) -> None:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            # mmap cannot map an empty file; read_header has refused one already
            self._map = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ) if size else None
        self.buffer = pa.py_buffer(self._map) if self._map is not None else pa.py_buffer(b"")
        self._released = 0

    def release(self, end: int) -> None:
        """Let the mapped pages wholly before byte `end` go."""
        upto = end - end % mmap.PAGESIZE
        if self._map is None or upto <= self._released or not hasattr(mmap, "MADV_DONTNEED"):
            return
        self._map.madvise(mmap.MADV_DONTNEED, self._released, upto - self._released)
        self._released = upto

    def close(self) -> None:
        """Unmap, unless an Arrow buffer still points into the map (the last one unmaps it then)."""
        self.buffer = pa.py_buffer(b"")
        if self._map is not None:
            with contextlib.suppress(BufferError):
                self._map.close()


def _write_groups(
    sink: Callable[[pa.Table], None],
    inbox: queue.Queue[Any],
    stop: threading.Event,
    failed: list[BaseException],
) -> None:
    try:
        while True:
            try:
                item = inbox.get(timeout=0.05)
            except queue.Empty:
                if stop.is_set():  # the main thread gave up: leave the rest unwritten
                    return
                continue
            if item is _END:
                return
            sink(item)
    except BaseException as exc:
        failed.append(exc)
        stop.set()


# long: one pipeline whose reader, parse pool and writer thread share its locals (the queues, the
# stop event, the chip chosen on the first group); split, they would travel as a state object.
@gc_paused()  # the stream's Arrow wrappers and the pandas import beside it
def stream_kernel_csv(
    path: Path,
    chip: str | None,
    sink: Callable[[pa.Table], None],
    conform: Callable[[pa.Table], pa.Table],
    group_bytes: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    parsers: int = PARSERS,
    on_chip: Callable[[ChipSpec], None] | None = None,
    device: DeviceInfo | None = None,
    notes: list[str] | None = None,
) -> tuple[int, ChipSpec]:
    """Feed `sink` the canonical kernel table of one CSV, group by group; returns the row count and
    the chip the derived metrics used.

    `conform` maps each finished group to the output schema (run on the main thread); `progress`
    is called after each group with (bytes read so far, file size); `group_bytes` is the size of
    a group in the file (tests make it small to cross many group seams); `on_chip` is told the
    chip chosen on the first group, before the sink sees any row (it is the final one unless the
    stream falls back); `device` the device facts recorded beside the file (`load.KernelCsv`),
    which the chip is chosen from before anything is inferred from the rows; `notes` gets what
    `device.choose_chip` says about the chip from all rows (what it adds on the whole table). Raises
    StreamFallback (nothing useful was written; use the whole-file path) or the typed error of a bad
    file (same as the whole-file path for header-level problems).
    """
    # deferred: io.kernel_csv, io.tables and metrics (pyarrow) only where used
    from tilescope.io.kernel_csv import check_header, contract_table
    from tilescope.io.tables import (
        convert_columns,
        csv_options,
        null_unused_side_arrow,
        numeric_columns,
        read_header,
        typed_column_types,
    )
    from tilescope.metrics import add_derived_metrics_arrow

    device = device or DeviceInfo()
    group_bytes = group_bytes or GROUP_BYTES
    header = read_header(path)
    canonical = canonical_header(header)
    check_header(path, header, canonical)
    coupled = is_coupled_header(header)
    # pyarrow imports pandas on its first array/scalar construction (its pandas shim); start that
    # 0.2 s import now, beside the parsers, instead of on the main thread's first group
    threading.Thread(target=importlib.import_module, args=("pandas",), daemon=True).start()
    names = [f"c{i}" for i in range(len(header))]
    types = typed_column_types(names, numeric_columns(canonical))
    # each range is parsed whole on one thread; parsers take alternate ranges
    options = csv_options(names, types, True, BLOCK_SIZE, skip_rows=0, use_threads=False)

    # memory-mapped: the parse reads the page cache in place (0.03 s of system time per 313 MB,
    # against 0.16-0.23 s for read() copies through a path or a Python file); the map outlives
    # the handle. The pages of the groups done are let go as the stream moves on (`release`).
    source = _MappedFile(path)
    buf = source.buffer
    size = buf.size
    _, header_end = next(_chunks(buf, 0, 1), (0, size))  # the header line, as a range of its own
    ranges = _chunks(buf, header_end, group_bytes)
    pool = ThreadPoolExecutor(max_workers=parsers, thread_name_prefix="tilescope-parse")
    parsing: deque[tuple[int, Future[pa.Table]]] = deque()

    def parse_next() -> None:
        if (r := next(ranges, None)) is not None:
            parsing.append((r[1], pool.submit(_parse, buf, r[0], r[1], options)))

    stop = threading.Event()
    ready: queue.Queue[Any] = queue.Queue(maxsize=3)
    failed: list[BaseException] = []
    writer = threading.Thread(target=_write_groups, args=(sink, ready, stop, failed), daemon=True)
    writer.start()
    spec = None
    schema: pa.Schema | None = None
    evidence = dev.ChipEvidence()
    total = 0
    try:
        for _ in range(max(AHEAD, parsers)):
            parse_next()
        while parsing:
            end, parsed = parsing.popleft()
            try:
                raw = parsed.result()
            except pa.ArrowException as exc:  # the whole-file path re-reads it and names the row
                raise StreamFallback(str(exc)) from exc
            parse_next()
            source.release(end)
            if not raw.num_rows:
                continue
            try:
                cols = convert_columns(path, header, raw, canonical=canonical)
            except ProfileFormatError as exc:  # its row number is relative to the group
                raise StreamFallback(str(exc)) from exc
            null_unused_side_arrow(cols)
            table = contract_table(cols, raw.num_rows)
            if chip is None:
                evidence.add(table)
            if spec is None:
                spec = dev.choose_chip(chip, device, evidence, [], coupled)
                if on_chip is not None:
                    on_chip(spec)
            table = conform(add_derived_metrics_arrow(table, spec, coupled=coupled))
            if schema is None:
                schema = table.schema
            elif not table.schema.equals(schema):
                raise StreamFallback("column types differ between row groups")
            total += table.num_rows
            if progress is not None:
                progress(end, size)
            if not _put(ready, table, stop):
                break
        if failed:
            raise failed[0]
        if not total:
            raise StreamFallback("no rows: the whole-file path writes the empty table")
        if chip is None:
            said: list[str] = []
            final = dev.choose_chip(None, device, evidence, said, coupled)
            if notes is not None:
                notes.extend(said)
            if final != spec:
                raise StreamFallback(
                    f"chip inferred from all rows ({final.name}) differs from the first rows'"
                )
        _put(ready, _END, stop)
        writer.join()
        if failed:
            raise failed[0]
    finally:
        stop.set()
        for _, parsed in parsing:
            parsed.cancel()
        pool.shutdown(wait=True)  # a running parse reads the mapped file: let it finish first
        writer.join(timeout=5)
        source.close()
    assert spec is not None  # total > 0: at least one group set it
    return total, spec
