"""The `{"traceEvents": [...]}` object form of a timeline: where its events array is in the file
(`events_window`, `exact_window`), and the read-only filesystem (`window_fs`) through which DuckDB
reads that byte range (`window_url`) as a file of its own. `tilescope.io.timeline` scans it there
like a bare array.

json, msgspec and fsspec are imported where they are used: a bare-array timeline needs none of them.
"""

from __future__ import annotations

import json
import mmap
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote, unquote

import numpy as np

from tilescope.errors import MissingComponentError, ProfileFormatError
from tilescope.io.native import native_name
from tilescope.io.trace_errors import EXPECTED, msgspec_error

# DuckDB streams a JSON array but materialises any other top-level value (format='unstructured'
# allocated the whole object: "failed to allocate" above ~100 MB). So the object form is read as
# the array form: the byte range of its traceEvents array is found, and DuckDB reads that range
# through a registered read-only filesystem (`window_fs`) as if it were a file of its own.
#
# Start: the keys before "traceEvents" are parsed from the head of the file (the array is usually
# the first key; Python's json skips the others). End: the array's `]` is the last `]` of the file
# that the rest of the file closes as a valid object (`, "k": v, ...}`); those keys are few.
# When that guess is wrong (a later key holds a `]` followed by valid JSON), the window is not one
# JSON array and DuckDB's scan fails; the exact window then comes from msgspec's validating pass
# over the whole file (`exact_window`), which also places the error of a broken file.

WINDOW_PROTOCOL = "tilescope-window"
TRACE_EVENTS = "traceEvents"
_HEAD_BYTES = 1 << 20  # keys before traceEvents parsed from at most this much of the file
_TAIL_BYTES = 1 << 20  # keys after it: the `]` is looked for in at most this much of the end
_TAIL_TRIES = 64  # `]` candidates tried from the end
_JSON_WS = b" \t\r\n"
# Example: tilescope-window://81-524436561/%2Ftmp%2Fp%2Ftrace.json
WINDOW_URL = re.compile(WINDOW_PROTOCOL + r"://(\d+)-(\d+)/([^/'\"\s]+)")


def events_window(path: Path, fh: BinaryIO, size: int, first: int) -> tuple[int, int]:
    """[start, end) of the traceEvents array of an object-form file (`first`: offset of its `{`):
    the guess from the keys before and after it, else the exact window."""
    start = _events_start(fh, first)
    end = _events_end(fh, size, start) if start is not None else None
    if start is None or end is None:
        start, end = exact_window(path, fh)
    return start, end


def window_url(path: Path, fh: BinaryIO, start: int, end: int) -> str:
    """The URL `window_fs` serves as bytes [start, end) of the open file `fh` (`native_name`: its
    /dev/fd name, never the path, so that no name is interpreted and a non-UTF-8 one is no error;
    percent-encoded: no glob characters)."""
    return f"{WINDOW_PROTOCOL}://{start}-{end}/{quote(native_name(path, fh), safe='')}"


def _events_start(fh: BinaryIO, first: int) -> int | None:
    """Offset of the `[` that opens the top-level "traceEvents" value, from the keys before it;
    None when they do not parse within the head (a long or broken value: `exact_window` decides)."""
    # latin-1: one character per byte, so string positions are file offsets; the structure
    # (all ASCII) and the keys we compare with (ASCII) survive any UTF-8 inside the strings
    head = os.pread(fh.fileno(), _HEAD_BYTES, 0).decode("latin-1")
    decoder = json.JSONDecoder()

    def skip_ws(i: int) -> int:
        while i < len(head) and head[i] in " \t\r\n":
            i += 1
        return i

    pos = skip_ws(first + 1)
    try:
        while pos < len(head) and head[pos] == '"':
            key, pos = json.decoder.scanstring(head, pos + 1)  # type: ignore[attr-defined]
            pos = skip_ws(pos)
            if head[pos : pos + 1] != ":":
                return None
            pos = skip_ws(pos + 1)
            if key == TRACE_EVENTS:
                return pos if head[pos : pos + 1] == "[" else None
            _value, pos = decoder.raw_decode(head, pos)
            pos = skip_ws(pos)
            if head[pos : pos + 1] != ",":
                return None
            pos = skip_ws(pos + 1)
    except (ValueError, RecursionError):  # a broken or absurdly nested value: msgspec will say
        return None
    return None


def _events_end(fh: BinaryIO, size: int, start: int) -> int | None:
    """End (exclusive) of the traceEvents array: the last `]` after which the file closes the
    top-level object validly; None when none does within the tail."""
    # deferred: msgspec only when used; `info` runs without it
    import msgspec

    at = max(start + 1, size - _TAIL_BYTES)
    tail = os.pread(fh.fileno(), size - at, at)
    p = len(tail)
    for _ in range(_TAIL_TRIES):
        p = tail.rfind(b"]", 0, p)
        if p < 0:
            return None
        rest = tail[p + 1 :].strip(_JSON_WS)
        if rest == b"}":
            return at + p + 1
        if rest.startswith(b","):
            try:
                msgspec.json.decode(b"{" + rest[1:], type=dict[str, msgspec.Raw])
            except msgspec.DecodeError:
                continue
            return at + p + 1
    return None


def exact_window(path: Path, fh: BinaryIO) -> tuple[int, int]:
    """[start, end) of the traceEvents array by a validating pass over the whole file (msgspec:
    values are skipped in place, never decoded); ProfileFormatError naming the byte of a syntax
    error, a missing "traceEvents" key or a non-list value."""
    # deferred: msgspec only when used; `info` runs without it
    import msgspec

    with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        try:
            top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
        except (msgspec.DecodeError, RecursionError) as exc:
            raise msgspec_error(path, exc, len(data)) from None
        raw = top.pop(TRACE_EVENTS, None)
        del top
        if raw is None:
            raise ProfileFormatError(path, None, f"{EXPECTED}; found no events (an object without a "
                                                 f"\"{TRACE_EVENTS}\" list)")
        # msgspec.Raw is a view into `data`: its address gives the offset
        view = np.frombuffer(raw, np.uint8)
        start = int(view.ctypes.data - np.frombuffer(data, np.uint8).ctypes.data)
        end, opening = start + len(view), bytes(view[:1])
        del view, raw
    if opening != b"[":
        raise ProfileFormatError(path, f"byte {start}", f"{EXPECTED}; \"{TRACE_EVENTS}\" is not a list")
    return start, end


class _Window:
    """Bytes [start, end) of a file as a read-only, seekable binary file."""

    def __init__(self, path: str, start: int, end: int) -> None:
        self._fh = open(path, "rb", buffering=0)  # noqa: SIM115 (closed by close())
        self._start, self._size, self._pos = start, end - start, 0
        self.closed = False

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self._pos, self._size)[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, n: int = -1) -> bytes:
        left = max(0, self._size - self._pos)
        n = left if n is None or n < 0 else min(n, left)
        self._fh.seek(self._start + self._pos)
        data = self._fh.read(n) if n else b""
        self._pos += len(data)
        return data

    def readinto(self, buf: Any) -> int:
        data = self.read(len(memoryview(buf)))
        memoryview(buf).cast("B")[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._fh.close()
        self.closed = True

    def __enter__(self) -> _Window:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def window_fs() -> Any:
    """An fsspec filesystem serving `window_url`s (DuckDB registers fsspec filesystems only)."""
    try:
        # deferred: fsspec (~0.1 s) only for a remote (URL) input
        from fsspec.spec import AbstractFileSystem
    except ImportError:
        raise MissingComponentError(
            'reading a {"traceEvents": [...]} timeline needs fsspec (pip install fsspec)'
        ) from None

    class WindowFS(AbstractFileSystem):
        protocol = WINDOW_PROTOCOL

        @staticmethod
        def _parse(url: str) -> tuple[str, int, int]:
            found = WINDOW_URL.search(url if "://" in url else f"{WINDOW_PROTOCOL}://{url}")
            if found is None:
                raise FileNotFoundError(url)
            return unquote(found[3]), int(found[1]), int(found[2])

        def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> _Window:
            if mode != "rb":
                raise PermissionError(f"{path}: read-only")
            return _Window(*self._parse(path))

        def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
            _file, start, end = self._parse(path)
            return {"name": path, "size": end - start, "type": "file"}

        def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
            return [self.info(path)] if detail else [path]

        def modified(self, path: str) -> datetime:
            return datetime.fromtimestamp(Path(self._parse(path)[0]).stat().st_mtime, UTC)

    return WindowFS()
