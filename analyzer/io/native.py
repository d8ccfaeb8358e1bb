"""The name under which a native reader (DuckDB, Arrow) opens a file Python already has open.

Given the user's path, such a library interprets it: DuckDB reads it as a glob
(`run[1]/trace_view.json` reads `run1/trace_view.json`, `x*/...` every match at once), DuckDB and
Arrow pick a decompressor by its extension (a plain CSV named `.gz` fails to inflate), and both
take only UTF-8 text, which a POSIX file name need not be. `/dev/fd/N` names the open file
instead: there is nothing in it to interpret, and the file read is the file that was checked.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from tilescope.errors import ProfileFormatError

# Where an open file can be named by its descriptor (Linux, macOS, the BSDs).
FD_DIR = Path("/dev/fd")


def native_name(path: Path, fh: BinaryIO, escape: Callable[[str], str] | None = None) -> str:
    """`/dev/fd/N` for `fh` (the open `path`). Where there is no /dev/fd: the absolute path, passed
    through `escape` (what the library would interpret), if it is UTF-8."""
    if FD_DIR.is_dir():
        return f"{FD_DIR}/{fh.fileno()}"
    name = str(path.absolute())
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ProfileFormatError(
            path, None, "the file name is not valid UTF-8, which the reader needs on a system without /dev/fd"
        ) from None
    return escape(name) if escape is not None else name
