"""The first record of a CSV file, read whole and checked (issue #27's caps): every table reader's
header, and the content detection's."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import BinaryIO

from tilescope.errors import ProfileFormatError
from tilescope.io.detect import first_line
from tilescope.io.validate import MAX_TEXT_BYTES, TEXT_EXPECTED

__all__ = ["MAX_COLUMNS", "MAX_HEADER_BYTES", "read_header"]


# A header is one line of a few KB (the widest real one, op_summary with every metric group, has
# ~130 columns); it is read whole up to MAX_HEADER_BYTES, never cut, and may name at most
# MAX_COLUMNS columns (each a column Arrow allocates per block: 150,000 took 1.3 GB for 8 rows)
MAX_HEADER_BYTES = 16 << 20
MAX_COLUMNS = 10_000


def read_header(path: Path) -> list[str]:
    """The first CSV record of a text file, whole; typed errors for binary, empty or unreadable
    files and for a header past MAX_HEADER_BYTES, MAX_COLUMNS or a field past MAX_TEXT_BYTES."""
    try:
        with open(path, "rb") as fh:
            head = _first_line_bytes(fh)
    except PermissionError as exc:
        raise ProfileFormatError(path, None, "cannot read file (permission denied)") from exc
    except IsADirectoryError as exc:
        raise ProfileFormatError(path, None, "expected a file, found a directory") from exc
    except OSError as exc:
        raise ProfileFormatError(path, None, f"cannot read file ({exc.strerror})") from exc
    if not head.strip():
        raise ProfileFormatError(path, None, "empty file; expected a CSV header row")
    if b"\x00" in head:
        nul = head.index(b"\x00")
        raise ProfileFormatError(path, f"byte {nul}", "binary data; expected CSV text")
    line = first_line(head)
    if len(line) > MAX_HEADER_BYTES:
        raise ProfileFormatError(path, "line 1", f"expected a CSV header of at most {MAX_HEADER_BYTES >> 20} "
                                                 f"MiB, found a line of more than {MAX_HEADER_BYTES:,} bytes")
    try:
        text = line.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ProfileFormatError(path, "line 1", "not UTF-8 text; expected a CSV header row") from exc
    try:
        header = next(csv.reader([text]), [])
    except csv.Error as exc:  # a field past csv.field_size_limit (MAX_TEXT_BYTES characters)
        raise ProfileFormatError(path, "line 1", f"header: expected {TEXT_EXPECTED} per field ({exc})") \
            from exc
    if len(header) > MAX_COLUMNS:
        raise ProfileFormatError(path, "line 1", f"expected a header of at most {MAX_COLUMNS:,} columns, "
                                                 f"found {len(header):,}")
    longest = max((len(h.encode("utf-8", "surrogatepass")) for h in header), default=0)
    if longest > MAX_TEXT_BYTES:
        raise ProfileFormatError(path, "line 1", f"header: expected {TEXT_EXPECTED} per field, found "
                                                 f"{longest:,} bytes")
    return header


def _first_line_bytes(fh: BinaryIO) -> bytes:
    """The file's start up to and past its first line end, read in 1 MiB steps; at most one step
    past MAX_HEADER_BYTES when no line ends sooner."""
    chunks = [fh.read(1 << 20)]
    total = len(chunks[0])
    while total <= MAX_HEADER_BYTES and not (b"\n" in chunks[-1] or b"\r" in chunks[-1]):
        more = fh.read(1 << 20)
        if not more:
            break
        chunks.append(more)
        total += len(more)
    return b"".join(chunks)
