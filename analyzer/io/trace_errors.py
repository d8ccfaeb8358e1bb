"""What the timeline reader's two modules (`tilescope.io.timeline`, `tilescope.io.trace_window`)
say alike of a file that is not a Chrome-trace timeline: `EXPECTED`, which every such
ProfileFormatError starts with, DuckDB's read_json errors in words (`duckdb_json_error`, which the
simulator's trace reader shares with its own `expected`), and the file offset of a JSON syntax
error from msgspec's validating pass over the whole file (`malformed_offset` on the error path
of both forms, `msgspec_error` for the object form's exact window).

msgspec is imported where it is used, on those error paths only.
"""

from __future__ import annotations

import mmap
import re
from pathlib import Path
from typing import BinaryIO

from tilescope.errors import ProfileFormatError

EXPECTED = "expected a Chrome-trace JSON array of events (trace_view.json / msprof_*.json)"
# Example: Malformed JSON in file "<file>", at byte 1 in record/value 2: unexpected character.
_MALFORMED = re.compile(r"at byte (\d+) in record/value \d+: ([^\n]*)")
# Example: JSON transform error in file "<file>", in record/value 4: Expected OBJECT, but got UBIGINT: 5
_TRANSFORM = re.compile(r"in record/value (\d+): ([^\n]*)")
# Example: JSON is malformed: invalid character (byte 27)
_MSGSPEC_BYTE = re.compile(r"\(byte (\d+)\)")


def msgspec_error(path: Path, exc: Exception, size: int) -> ProfileFormatError:
    """msgspec's syntax error as one line with its file offset, worded as DuckDB's."""
    if isinstance(exc, RecursionError):
        return ProfileFormatError(path, None, f"{EXPECTED}; malformed JSON: values nested too deeply")
    offset = _msgspec_offset(exc, size)
    reason = "unexpected end of data" if offset == size else _MSGSPEC_BYTE.sub("", str(exc))
    reason = reason.replace("JSON is malformed: ", "").strip().rstrip(".")
    where = f"byte {offset}" if offset is not None else None
    return ProfileFormatError(path, where, f"{EXPECTED}; malformed JSON: {reason}")


def duckdb_json_error(path: Path, fh: BinaryIO, msg: str, expected: str, other: str) -> ProfileFormatError:
    """DuckDB's read_json error `msg` (file names already hidden by the caller, which knows what
    it opened) as one line: a syntax error at its file offset, a value of the wrong type at its
    event, else `other` (the caller's short reason)."""
    found = _MALFORMED.search(msg)
    if found:
        # DuckDB's "at byte N" counts from the start of the bad record, not of the file
        offset = malformed_offset(fh)
        where = f"byte {offset}" if offset is not None else f"event {found[1]}"
        return ProfileFormatError(path, where, f"{expected}; malformed JSON: {found[2].rstrip('. ')}")
    found = _TRANSFORM.search(msg)
    if found:
        return ProfileFormatError(path, f"event {found[1]}", f"{expected}; {found[2][:160]}")
    return ProfileFormatError(path, None, f"{expected}; {other[:160]}")


def malformed_offset(fh: BinaryIO) -> int | None:
    """File offset of the first JSON syntax error (error path only: a second, validating pass
    over the same open file).

    msgspec validates the whole document into one zero-copy `Raw` view over a memory map, so even
    a 1 GB file (array or object form) costs no decoded document.
    """
    # deferred: msgspec only when used; `info` runs without it
    import msgspec

    try:
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            size = len(data)
            msgspec.json.decode(data, type=msgspec.Raw)
    except msgspec.DecodeError as exc:
        return _msgspec_offset(exc, size)
    except (OSError, ValueError, RecursionError):
        return None
    return None


def _msgspec_offset(exc: Exception, size: int) -> int | None:
    """The file offset in a msgspec syntax error (the end of the data when it was truncated)."""
    if "truncated" in str(exc):
        return size
    found = _MSGSPEC_BYTE.search(str(exc))
    return int(found[1]) if found else None
