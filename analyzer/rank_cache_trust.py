"""Who the per-rank summary cache (analyzer/rank_cache.py) trusts, and what it checks before an
entry is used (docs/reliability.md §9).

The cache trusts one party: the user running tilescope. Its root is created 0700; a root or shard
folder owned by another user, or writable by other users, is not used at all (one warning, the
analysis runs uncached), since whoever can write there can plant entries. Below the root no link is
followed: the shard, the entry and each of its files are opened relative to their parent with
O_NOFOLLOW and must be a directory / regular file owned by the user.

An entry is then checked before any of it is used, and a failing one is removed (so that the
analysis that recomputes it writes it again):
  - size: each file at most what the key's input could produce (`Limits`), checked on the open
    file before it is read, and a Parquet table's row count and uncompressed size from its footer
    before its pages are decoded (a few KB of Parquet can decode to GBs of constant rows);
  - integrity: unit.json / run.json end with the sha256 of what precedes (`seal`), and unit.json
    records the sha256 of each Parquet file: a damaged or edited entry is never read as valid;
  - shape: unit.json decodes to `UnitMeta` (typed: rank numbers are integers ≥ 0), and each Parquet
    table has the columns and column types its table has when written (`TABLE_SCHEMAS`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec

from tilescope.rank_cache_prune import entry_bytes, locked_ledger, remove_entry
from tilescope.text.escape import terminal_text

if TYPE_CHECKING:
    import pyarrow as pa

OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
# Example: "3f"
_SHARD = re.compile(r"[0-9a-f]{2}")
# Example: b',"sum":"3f0c…"}' (the seal: sha256 of the bytes before it, with the closing brace)
_SEAL = re.compile(rb',"sum":"([0-9a-f]{64})"\}\Z')
_NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_WARNED: set[str] = set()


class UntrustedEntry(Exception):
    """An entry that fails a check (`why`): it is recomputed and written again."""


def me() -> int:
    """The user the cache belongs to (tests stand in another one)."""
    return os.geteuid()


def _not_trusted(st: os.stat_result, what: str) -> str | None:
    if st.st_uid != me():
        return f"{what} is owned by user id {st.st_uid}, not by you ({me()})"
    if st.st_mode & OTHERS_WRITE:  # yours, made with a umask of 002 by an older tilescope perhaps
        mode = stat.S_IMODE(st.st_mode)
        return f"{what} is writable by other users (mode {mode:04o}; chmod go-w to use it)"
    return None


def check_root(root: Path) -> str | None:
    """Create `root` (0700) when missing; why it may not be used, or None. The root itself may be
    reached through a link (a cache moved to another disk); its shard folders may not."""
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(root, 0o700)
        st = os.stat(root)
    except OSError:
        return None  # cannot be created: nothing to read, and writes are skipped (as before)
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    reason = _not_trusted(st, "it")
    if reason is not None:
        return reason
    try:
        with os.scandir(root) as it:
            shards = [e for e in it if _SHARD.fullmatch(e.name)]
        for shard in shards:
            reason = check_shard(Path(shard.path))
            if reason is not None:
                return reason
    except OSError:
        return None
    return None


def check_shard(shard: Path) -> str | None:
    """Why the shard folder `shard` may not be used (a link, another user's, writable by others)."""
    st = os.lstat(shard)
    if stat.S_ISLNK(st.st_mode):
        return f"its folder {shard.name} is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return None  # not a shard: `tilescope cache` lists it as foreign, no key reaches it
    return _not_trusted(st, f"its folder {shard.name}")


def warn_untrusted(root: Path, reason: str) -> None:
    """One line on stderr, once per cache root and process."""
    if str(root) in _WARNED:
        return
    _WARNED.add(str(root))
    line = (
        f"tilescope: warning: cache {root}: {reason}; not used, this analysis runs uncached "
        "(--cache-dir names another cache)"
    )
    sys.stderr.write(terminal_text(line) + "\n")


@dataclass(frozen=True)
class Limits:
    """The most one entry of an input of `input_bytes` can hold. unit.json carries the input's
    report part (up to ~8x the bytes of a small input: the chip, findings and timeline sample);
    a summary table has at most one row per few bytes of input (a kernel, a step, a link each
    take a line of their file), each of at most ~16 eight-byte numbers and text from the input."""

    input_bytes: int

    @property
    def json_bytes(self) -> int:
        return 16 * self.input_bytes + 16 * 2**20

    @property
    def parquet_bytes(self) -> int:
        return 4 * self.input_bytes + 4 * 2**20

    @property
    def rows(self) -> int:
        return self.input_bytes // 8 + 4096

    @property
    def decoded_bytes(self) -> int:
        return 16 * self.input_bytes + 16 * 2**20


# ---- the entry's files, opened without following links -------------------------------------------


@contextlib.contextmanager
def open_entry(root: Path, key: str) -> Iterator[int | None]:
    """The entry directory's descriptor (None: no such entry), reached from the root through its
    shard with no link followed; both must be the user's and not writable by others."""
    fds: list[int] = []
    try:
        try:
            fds.append(os.open(root, os.O_RDONLY | os.O_DIRECTORY))
            for name in (key[:2], key):
                fds.append(os.open(name, _NOFOLLOW | os.O_DIRECTORY, dir_fd=fds[-1]))
                reason = _not_trusted(os.fstat(fds[-1]), name)
                if reason is not None:
                    raise UntrustedEntry(reason)
        except FileNotFoundError:
            yield None
            return
        except OSError as exc:  # ENOTDIR, ELOOP: a file or link where a directory should be
            raise UntrustedEntry(f"cannot be opened ({exc.strerror})") from exc
        yield fds[-1]
    finally:
        for fd in fds:
            os.close(fd)


def read_file(entry_fd: int, name: str, limit: int) -> bytes:
    """The whole of `name` in the entry: a regular file of the user's, at most `limit` bytes
    (checked on the open file, before reading)."""
    try:
        fd = os.open(name, _NOFOLLOW, dir_fd=entry_fd)
    except OSError as exc:
        raise UntrustedEntry(f"{name}: cannot be opened ({exc.strerror})") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UntrustedEntry(f"{name}: not a regular file")
        reason = _not_trusted(st, name)
        if reason is not None:
            raise UntrustedEntry(reason)
        if st.st_size > limit:
            raise UntrustedEntry(f"{name}: {st.st_size} bytes, more than the {limit} its input allows")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise UntrustedEntry(f"{name}: grew past {limit} bytes while read")
        return data
    finally:
        os.close(fd)


def touch(entry_fd: int, name: str) -> None:
    """Mark the entry used now (its file's time; the prune's least recently used order)."""
    with contextlib.suppress(OSError):
        os.utime(name, dir_fd=entry_fd, follow_symlinks=False)


def discard(root: Path, key: str) -> None:
    """Remove an entry that failed a check (its bytes out of the ledger), so that it is written
    again; a link in its place is removed, never followed."""
    path = root / key[:2] / key
    try:
        st = os.lstat(path)
        if check_shard(path.parent) is not None:
            return
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(path)
            return
        size = entry_bytes(path)
    except OSError:
        return
    if remove_entry(path):
        with locked_ledger(root) as ledger:
            if ledger is not None:
                ledger.add(-size)


# ---- integrity ------------------------------------------------------------------------------------


def seal(body: bytes) -> bytes:
    """A JSON object's bytes with `"sum"` (sha256 of `body`) appended as its last key."""
    assert body.endswith(b"}")
    return body[:-1] + b',"sum":"' + hashlib.sha256(body).hexdigest().encode() + b'"}'


def unseal(data: bytes) -> bytes:
    """`body` of `seal(body)`; UntrustedEntry when the sum is missing or does not match."""
    m = _SEAL.search(data)
    if m is None:
        raise UntrustedEntry("no checksum")
    body = data[: m.start()] + b"}"
    if hashlib.sha256(body).hexdigest().encode() != m.group(1):
        raise UntrustedEntry("checksum does not match")
    return body


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---- shape ----------------------------------------------------------------------------------------

TableName = Literal["steps", "comm_ops", "links", "kernels"]
Rank = Annotated[int, msgspec.Meta(ge=0, le=2**31)]


class TablesMeta(msgspec.Struct):
    tables: list[TableName]
    sha256: dict[TableName, str]
    files: list[str]
    notes: list[str]


class PartMeta(TablesMeta):
    part: dict[str, Any]
    rank: Rank | None
    path: str


class FailureMeta(TablesMeta):
    path: str
    message: str
    rank: Rank | None


class UnitMeta(msgspec.Struct):
    format: int
    code: str
    parts: list[PartMeta]
    failure: FailureMeta | None = None


class FailedMeta(msgspec.Struct):
    path: str
    message: str
    rank: Rank | None


class RunMeta(msgspec.Struct):
    format: int
    code: str
    report: dict[str, Any]
    failures: list[FailedMeta]


def check_report_shapes(
    parts: list[dict[str, Any]] | None = None, report: dict[str, Any] | None = None
) -> None:
    """UntrustedEntry unless each report part (its profile entry, findings and skipped rules) or the
    stored report follows the JSON report's schema (analyzer/report/schema): a forged part sealed
    again (`est_saving_us` a list) was a TypeError traceback when the report was assembled."""
    part_check, report_check = _report_validators()
    # a part's entry gets its "id" (its place in the report) when the report is assembled
    checks = [(part_check, {**p, "entry": {"id": 0, **p["entry"]}} if isinstance(p.get("entry"), dict) else p)
              for p in parts or []]
    checks += [(report_check, report)] if report is not None else []
    for validator, value in checks:
        error = next(iter(validator.iter_errors(value)), None)
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "the top"
            raise UntrustedEntry(f"not a report of its schema (at {where}: {error.message[:120]})")


@functools.cache
def _report_validators() -> tuple[Any, Any]:
    """Validators of a report part and of a whole report, built once per process."""
    # deferred: jsonschema (~0.1 s) only on a cache hit
    import json

    import jsonschema

    # the file report.data.load_schema reads: that module imports numpy, which a hit never needs
    schema = json.loads((Path(__file__).parent / "report" / "schema" / "report.schema.json").read_bytes())
    part = {
        "$defs": schema["$defs"], "type": "object", "required": ["entry", "findings", "skipped"],
        "properties": {"entry": {"$ref": "#/$defs/input"},
                       "findings": {"type": "array", "items": {"$ref": "#/$defs/finding"}},
                       "skipped": {"type": "array", "items": {"$ref": "#/$defs/skipped"}}},
    }
    return jsonschema.Draft202012Validator(part), jsonschema.Draft202012Validator(schema)


# a column's kind: "int" (integers; all-null allowed), "float" (any number), "text"
_STEP_US = ("computing_us", "communication_not_overlapped_us", "free_us", "step_us")
_STEP_MORE = ("overlapped_us", "communication_us", "stage_us", "bubble_us")
_OP_US = ("start_us", "elapse_us", "transit_us", "wait_us", "synchronization_us", "idle_us")
# per table: (required columns, columns that may be there too), as rank_tables writes them
TABLE_SCHEMAS: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "steps": (
        {"step": "int", **dict.fromkeys(_STEP_US, "float"), "source": "text"},
        dict.fromkeys(_STEP_MORE, "float"),
    ),
    "comm_ops": (
        {
            "step": "int",
            "kind": "text",
            "op": "text",
            **dict.fromkeys(_OP_US, "float"),
            "transport": "text",
            "size_mb": "float",
            "bandwidth_gbps": "float",
        },
        {},
    ),
    "links": (
        {
            "step": "int",
            "kind": "text",
            "op": "text",
            "src_rank": "int",
            "dst_rank": "int",
            "transport": "text",
            "size_mb": "float",
            "transit_us": "float",
            "bandwidth_gbps": "float",
        },
        {"collective": "text"},  # the collective a row names; none for an aggregate's remainder (#26)
    ),
    "kernels": (
        {
            "name": "text",
            "launches": "int",
            "total_us": "float",
            "median_us": "float",
            "input_shapes": "text",
        },
        {},
    ),
}


def _kind_matches(kind: str, t: pa.DataType) -> bool:
    # deferred: pyarrow (~0.25 s) only where a table is read
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_null(t):  # a column with no value at all (an all-null step or shape)
        return True
    if kind == "int":
        return pa.types.is_integer(t)
    if kind == "float":
        return pa.types.is_integer(t) or pa.types.is_floating(t)
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def check_schema(table: str, schema: pa.Schema) -> None:
    required, optional = TABLE_SCHEMAS[table]
    names = schema.names
    if len(set(names)) != len(names):
        raise UntrustedEntry(f"{table}: a repeated column")
    missing = [c for c in required if c not in names]
    if missing:
        raise UntrustedEntry(f"{table}: no column {missing[0]}")
    for field in schema:
        kind = required.get(field.name) or optional.get(field.name)
        if kind is None:
            raise UntrustedEntry(f"{table}: unknown column {field.name!r}")
        if not _kind_matches(kind, field.type):
            raise UntrustedEntry(f"{table}: column {field.name} is {field.type}, expected {kind}")


def read_table(data: bytes, table: str, digest: str | None, limits: Limits) -> pa.Table:
    """One summary table from its file's bytes: checksum, then the footer's row count, decoded
    size and schema, and only then its pages."""
    # deferred: pyarrow (~0.25 s) only where a table is read
    import pyarrow as pa
    import pyarrow.parquet as pq

    if digest is None or sha256(data) != digest:
        raise UntrustedEntry(f"{table}: checksum does not match")
    try:
        pf = pq.ParquetFile(pa.BufferReader(data))
        meta = pf.metadata
        if meta.num_rows > limits.rows:
            raise UntrustedEntry(f"{table}: {meta.num_rows} rows, more than its input allows")
        decoded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        if decoded > limits.decoded_bytes:
            raise UntrustedEntry(f"{table}: {decoded} bytes decoded, more than its input allows")
        check_schema(table, pf.schema_arrow)
        out = pf.read(use_threads=False)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise UntrustedEntry(f"{table}: not a readable Parquet table ({exc})") from exc
    if out.num_rows != meta.num_rows:
        raise UntrustedEntry(f"{table}: row count differs from its footer")
    return out
