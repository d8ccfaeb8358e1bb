"""One kernel CSV to a file in overlapping stages: parse, normalise + derive, write.

`tilescope kernels FILE --format parquet|csv -o OUT` spends its time in three parts of similar
size: the CSV parse, the normalisation with the derived metrics, and the encoding of the output.
Done one after the other, two of the three leave the second core idle. Here they run as a
pipeline over ~64k-row groups, each stage on its own thread (Arrow and numpy release the GIL in
their C++ loops):

  reader   pyarrow's streaming CSV reader with the typed fast path of `tables.read_csv_strings`
           (same options), 2 MB blocks collected into groups
  main     per group, exactly the steps of `read_kernel_arrow` + `add_derived_metrics_arrow`
  writer   the output sink (one Parquet row group or one CSV chunk per group)

The whole-file path (`load_kernels_arrow`) stays the reference. Streaming gives up, by raising
`StreamFallback` before anything reaches the user, wherever it could differ from it:

- a value the typed reader cannot parse (a word in a number column): the whole-file path re-reads
  everything as text, cleans it, and names the bad row with its row number in the file;
- a column whose type differs between groups (an unknown column numeric in one, text in another);
- the chip. A single CSV has no device information, so the clock and core count are inferred from
  the data (medians over all rows, `device.infer_from_kernels`). The first group's inference is
  used speculatively; the per-row inputs of the inference are gathered from every group
  (`device.ChipEvidence`, a few float arrays), and at the end the same inference runs on all rows.
  If the chip differs, the caller redoes the file the whole-file way. On real profiles the two
  agree: they describe one device.
"""

from __future__ import annotations

import importlib
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from analyzer.chips import ChipSpec
from analyzer.columns import canonical_header
from analyzer.errors import ProfileFormatError

# Measured on 1 M rows, 2 cores (docs/benchmarks.md): one reader is as fast as one per half of the
# file (Parquet output 1.28-1.35 s vs 1.33-1.71 s, terminal view 1.24-1.50 s vs 1.06-1.45 s) with
# half the memory: the second half's groups pile up until their turn, and page faults eat the gain
GROUP_ROWS = 65536
BLOCK_SIZE = 2 << 20
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


def _read_groups(
    source: Any,
    options: dict[str, Any],
    out: queue.Queue[Any],
    stop: threading.Event,
    group_rows: int,
) -> None:
    try:
        batches: list[pa.RecordBatch] = []
        rows = 0
        for batch in pacsv.open_csv(source, **options):
            batches.append(batch)
            rows += batch.num_rows
            if rows >= group_rows:
                if not _put(out, batches, stop):
                    return
                batches, rows = [], 0
        if batches and not _put(out, batches, stop):
            return
        _put(out, _END, stop)
    except BaseException as exc:  # handed to the main thread, which decides
        _put(out, exc, stop)


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


def _items(inbox: queue.Queue[Any]) -> Any:
    """The reader's groups in file order; an error item ends the iteration."""
    while (item := inbox.get()) is not _END:
        yield item
        if isinstance(item, BaseException):
            return


def stream_kernel_csv(
    path: Path,
    chip: str | None,
    sink: Callable[[pa.Table], None],
    conform: Callable[[pa.Table], pa.Table],
    group_rows: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[int, ChipSpec]:
    """Feed `sink` the canonical kernel table of one CSV, group by group; returns the row count and
    the chip the derived metrics used.

    `conform` maps each finished group to the output schema (run on the main thread); `progress`
    is called after each group with (bytes read so far, file size). Raises
    StreamFallback (nothing useful was written; use the whole-file path) or the typed error of a bad
    file (same as the whole-file path for header-level problems).
    """
    from analyzer.io import device as dev
    from analyzer.io.kernel_csv import check_header, contract_table
    from analyzer.io.tables import (
        convert_columns,
        csv_options,
        null_unused_side_arrow,
        numeric_columns,
        read_header,
        typed_column_types,
    )
    from analyzer.metrics import add_derived_metrics_arrow
    from analyzer.profile import DeviceInfo

    group_rows = group_rows or GROUP_ROWS
    header = read_header(path)
    canonical = canonical_header(header)
    check_header(path, header, canonical)
    # pyarrow imports pandas on its first array/scalar construction (its pandas shim); start that
    # 0.2 s import now, beside the reader, instead of on the main thread's first group
    threading.Thread(target=importlib.import_module, args=("pandas",), daemon=True).start()
    names = [f"c{i}" for i in range(len(header))]
    options = csv_options(names, typed_column_types(names, numeric_columns(canonical)), True, BLOCK_SIZE)

    # memory-mapped: the parse reads the page cache in place (0.03 s of system time per 313 MB,
    # against 0.16-0.23 s for read() copies through a path or a Python file); its position is
    # the progress of the parse
    source = pa.memory_map(str(path))
    size = source.size()
    stop = threading.Event()
    # room for ~0.4 s of parsing: the reader must not stall while the main thread waits for the
    # pandas import on its first group (8 vs 3: median 1.24 vs 1.37 s for the 1 M-row table view)
    parsed: queue.Queue[Any] = queue.Queue(maxsize=8)
    ready: queue.Queue[Any] = queue.Queue(maxsize=3)
    failed: list[BaseException] = []
    threads = [
        threading.Thread(target=_read_groups, args=(source, options, parsed, stop, group_rows), daemon=True),
        threading.Thread(target=_write_groups, args=(sink, ready, stop, failed), daemon=True),
    ]
    for t in threads:
        t.start()
    spec = None
    schema: pa.Schema | None = None
    evidence = dev.ChipEvidence()
    total = 0
    try:
        for item in _items(parsed):
            if isinstance(item, pa.ArrowException):  # the whole-file path re-reads it and names the row
                raise StreamFallback(str(item)) from item
            if isinstance(item, BaseException):
                raise item
            raw = pa.Table.from_batches(item)
            try:
                cols = convert_columns(path, header, raw, canonical=canonical)
            except ProfileFormatError as exc:  # its row number is relative to the group
                raise StreamFallback(str(exc)) from exc
            null_unused_side_arrow(cols)
            table = contract_table(cols, raw.num_rows)
            if chip is None:
                evidence.add(table)
            if spec is None:
                spec = dev.choose_chip(chip, DeviceInfo(), evidence, [])
            table = conform(add_derived_metrics_arrow(table, spec))
            if schema is None:
                schema = table.schema
            elif not table.schema.equals(schema):
                raise StreamFallback("column types differ between row groups")
            total += table.num_rows
            if progress is not None:
                progress(min(source.tell(), size), size)
            if not _put(ready, table, stop):
                break
        if failed:
            raise failed[0]
        if not total:
            raise StreamFallback("no rows: the whole-file path writes the empty table")
        if chip is None:
            final = dev.choose_chip(None, DeviceInfo(), evidence, [])
            if final != spec:
                raise StreamFallback(
                    f"chip inferred from all rows ({final.name}) differs from the first rows'"
                )
        _put(ready, _END, stop)
        threads[-1].join()
        if failed:
            raise failed[0]
    except BaseException:
        stop.set()
        raise
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=5)
        if not threads[0].is_alive():
            source.close()
    assert spec is not None  # total > 0: at least one group set it
    return total, spec
