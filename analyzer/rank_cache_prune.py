"""Keeping the per-rank summary cache (analyzer/rank_cache.py) under a size limit, least recently
used entries first.

The layout under the cache root; nothing else is ever deleted (never followed through a symlink):
  <hh>/<key>/     an entry: unit.json and its Parquet tables (<hh>: the key's first two hex digits),
                  or a whole run's run.json; that file's modification time is the entry's last use
                  (`RankCache.get` / `get_run` touch it)
  <hh>/.tmp-*/    an entry being written (renamed to <hh>/<key> once complete) or being removed, or
                  one a crashed process left behind: garbage once older than `TMP_GRACE_S`
  usage.json      the ledger: the bytes of every entry and when they were last counted. Writers
                  add their entry's bytes under an exclusive lock on it, so that a run under the limit
                  reads this one small file instead of walking the cache
  CACHEDIR.TAG    tells backup tools (and `tilescope cache clear`) that this is a cache

Sizes are bytes on disk (st_blocks, what `du` counts, as ccache counts them): a 4 KiB block holds
each small file, and the limit is about the disk.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from tilescope.errors import UsageError
from tilescope.text.words import parse_size

MAX_SIZE_ENV = "TILESCOPE_CACHE_MAX_SIZE"
# 2 GiB holds ~10,000 rank summaries of 8,808 kernels (~0.2 MB each): two runs of a 4,096-rank job
# (today's and yesterday's, so a re-run after one rank changed reads the rest back), or a 64-rank job
# ~150 times over — and it stays small beside the profiler output it summarises.
DEFAULT_MAX_BYTES = 2 * 2**30
# an automatic prune goes down to 90 % of the limit, so the next runs do not each walk the cache
# again for a few bytes over (ccache's limit_multiple); an explicit `cache prune` to the limit itself
AUTO_PRUNE_TO = 0.9
# a writer fills its .tmp- directory within seconds of its analysis; one an hour old was left behind
TMP_GRACE_S = 3600.0
# the ledger is re-counted from the entries once a day even under the limit: entries written
# without it (a filesystem without locks, a process killed between rename and ledger) cannot hide
RECOUNT_S = 24 * 3600.0
LEDGER = "usage.json"
TAG = "CACHEDIR.TAG"
TAG_TEXT = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by tilescope (per-rank summaries).\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
TMP_PREFIX = ".tmp-"

# Example: "3f"
_SHARD = re.compile(r"[0-9a-f]{2}")
# Example: "3f0c…" (64 hex digits: the sha256 key of an entry)
_KEY = re.compile(r"[0-9a-f]{64}")
SIZE_EXPECTED = "a size such as 500M, 2G or 0 (bytes; K, M, G, T are powers of 1024; 0 stores nothing)"


class NotACacheError(UsageError):
    """A directory given as a cache holds something tilescope does not write there."""


def max_cache_bytes() -> int:
    """The cache's size limit: $TILESCOPE_CACHE_MAX_SIZE, else `DEFAULT_MAX_BYTES`."""
    text = os.environ.get(MAX_SIZE_ENV)
    if text is None or not text.strip():
        return DEFAULT_MAX_BYTES
    size = parse_size(text)
    if size is None:
        raise UsageError(f"{MAX_SIZE_ENV}={text!r}: expected {SIZE_EXPECTED}")
    return size


def limit_source() -> str:
    """Where `max_cache_bytes` came from, for `tilescope cache info`."""
    text = os.environ.get(MAX_SIZE_ENV)
    return f"{MAX_SIZE_ENV}={text.strip()}" if text and text.strip() else "default"


def disk_bytes(st: os.stat_result) -> int:
    # st_blocks is in 512-byte units on every POSIX system, whatever the filesystem's block size
    blocks = getattr(st, "st_blocks", None)
    return st.st_size if blocks is None else blocks * 512


def entry_bytes(d: Path) -> int:
    """Bytes on disk of one entry directory (flat: unit.json and Parquet files) and of itself."""
    total = disk_bytes(os.lstat(d))
    with os.scandir(d) as it:
        for f in it:
            with contextlib.suppress(FileNotFoundError):
                total += disk_bytes(f.stat(follow_symlinks=False))
    return total


def ensure_tag(root: Path) -> None:
    """Write CACHEDIR.TAG once (a writer calls this; failing to is no error)."""
    # created, never opened through a link nor rewritten: a link planted there is not followed
    with contextlib.suppress(OSError):
        fd = os.open(root / TAG, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(TAG_TEXT)


# the file an entry is known by: an input's summaries, or a whole run's report
UNIT_FILE = "unit.json"
RUN_FILE = "run.json"


def entry_header(fmt: int, code: str) -> bytes:
    """How this tilescope's unit.json begins (`rank_cache._result_to` writes `format` and `code`
    first): a scan reads these few bytes of each entry, not its whole report parts, to tell the
    entries no key of this tilescope reaches."""
    return msgspec.json.encode({"format": fmt, "code": code})[:-1] + b","


@dataclass(frozen=True)
class Entry:
    path: Path
    bytes: int
    used_ns: int  # unit.json's modification time: written or last read
    reachable: bool  # written by this cache format and this tilescope (else no key finds it)


@dataclass(frozen=True)
class Temp:
    path: Path
    bytes: int
    mtime: float

    def abandoned(self, now: float) -> bool:
        return now - self.mtime > TMP_GRACE_S


@dataclass
class Scan:
    """What is under a cache root, sorted into the layout above; `foreign`: everything else."""

    root: Path
    entries: list[Entry] = field(default_factory=list)
    temps: list[Temp] = field(default_factory=list)
    foreign: list[Path] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(e.bytes for e in self.entries)


def scan_cache(root: Path, fmt: int, code: str) -> Scan:
    """Every entry with its bytes, last use and reachability (`fmt`, `code`: this tilescope's
    cache format and source fingerprint). Entries removed meanwhile by another process are skipped."""
    out = Scan(root)
    header = entry_header(fmt, code)
    try:
        top = list(os.scandir(root))
    except (FileNotFoundError, NotADirectoryError):
        return out
    for shard in top:
        if shard.name in (LEDGER, TAG) and shard.is_file(follow_symlinks=False):
            continue
        if not (_SHARD.fullmatch(shard.name) and shard.is_dir(follow_symlinks=False)):
            out.foreign.append(Path(shard.path))
            continue
        try:
            children = list(os.scandir(shard.path))
        except FileNotFoundError:
            continue
        for child in children:
            _sort_child(out, shard.name, child, header)
    return out


def _sort_child(out: Scan, shard: str, child: os.DirEntry[str], header: bytes) -> None:
    path = Path(child.path)
    try:
        if not child.is_dir(follow_symlinks=False):
            out.foreign.append(path)
        elif _KEY.fullmatch(child.name) and child.name.startswith(shard):
            out.entries.append(_entry(path, header))
        elif child.name.startswith(TMP_PREFIX):
            out.temps.append(Temp(path, entry_bytes(path), os.lstat(path).st_mtime))
        else:
            out.foreign.append(path)
    except FileNotFoundError:  # removed by another process between the listing and now
        pass


def _entry(d: Path, header: bytes) -> Entry:
    size = entry_bytes(d)
    meta = d / UNIT_FILE
    if not os.path.lexists(meta):  # a whole run's entry begins the same way
        meta = d / RUN_FILE
    try:
        used = os.lstat(meta).st_mtime_ns
        with open(meta, "rb") as f:
            reachable = f.read(len(header)) == header
    except OSError:  # no unit.json (or unreadable): no key can read it
        used, reachable = os.lstat(d).st_mtime_ns, False
    return Entry(d, size, used, reachable)


class Ledger:
    """usage.json, opened and locked: the bytes of every entry, and when they were counted."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def read(self) -> tuple[int, float] | None:
        """(bytes, counted_at), or None when it is new or unreadable (then the entries are counted)."""
        try:
            os.lseek(self.fd, 0, os.SEEK_SET)
            data = msgspec.json.decode(os.read(self.fd, 4096))
            return int(data["bytes"]), float(data["counted_at"])
        except (OSError, msgspec.DecodeError, KeyError, TypeError, ValueError):
            return None

    def write(self, nbytes: int, counted_at: float) -> None:
        with contextlib.suppress(OSError):
            text = msgspec.json.encode({"bytes": nbytes, "counted_at": counted_at})
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, text, 0)

    def add(self, nbytes: int) -> None:
        """A writer's new entry; a ledger that is not known stays unknown (the next prune counts)."""
        known = self.read()
        if known is not None:
            self.write(known[0] + nbytes, known[1])


@contextlib.contextmanager
def locked_ledger(root: Path) -> Iterator[Ledger | None]:
    """The ledger under an exclusive lock (None when it cannot be opened: a read-only cache).
    A filesystem without locks (Lustre without -o flock) still gets the ledger, unlocked: a lost
    update makes it wrong until the next recount, which `RECOUNT_S` bounds."""
    try:
        fd = os.open(root / LEDGER, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError:
        yield None
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield Ledger(fd)
    finally:
        os.close(fd)  # closing releases the lock


@dataclass
class PruneResult:
    removed: list[Entry] = field(default_factory=list)
    temps_removed: int = 0
    left: Scan | None = None  # what the cache holds afterwards

    @property
    def removed_bytes(self) -> int:
        return sum(e.bytes for e in self.removed)

    @property
    def left_bytes(self) -> int:
        return 0 if self.left is None else self.left.bytes - self.removed_bytes


def prune_if_over(root: Path, limit: int, fmt: int, code: str) -> PruneResult | None:
    """After an analysis: prune when the ledger says the cache is over `limit` (to 90 % of it), or
    when the ledger is unknown or a day old (recounted); None when the ledger alone said all is well."""
    if not root.is_dir():
        return None
    with locked_ledger(root) as ledger:
        if ledger is None:
            return None
        known = ledger.read()
        now = time.time()
        if known is not None and known[0] <= limit and 0 <= now - known[1] < RECOUNT_S:
            return None
        return _prune_locked(root, ledger, limit, int(limit * AUTO_PRUNE_TO), fmt, code, now)


def prune(root: Path, limit: int, fmt: int, code: str) -> PruneResult:
    """Remove abandoned temporaries, then entries — unreachable first, then least recently used —
    until the cache holds at most `limit` bytes."""
    with locked_ledger(root) as ledger:
        return _prune_locked(root, ledger, limit, limit, fmt, code, time.time())


def clear(root: Path, fmt: int, code: str) -> PruneResult:
    """Remove every entry and abandoned temporary (a writer's young one is left to finish);
    refuses, removing nothing, a directory that holds anything tilescope does not write there."""
    found = scan_cache(root, fmt, code)
    refuse_foreign(found)
    result = prune(root, 0, fmt, code)
    with contextlib.suppress(OSError), os.scandir(root) as it:
        for shard in it:
            if _SHARD.fullmatch(shard.name) and shard.is_dir(follow_symlinks=False):
                with contextlib.suppress(OSError):  # not empty: a writer's temporary is in it
                    os.rmdir(shard.path)
    return result


def refuse_foreign(found: Scan) -> None:
    if found.foreign:
        first = found.foreign[0].relative_to(found.root)
        more = f" and {len(found.foreign) - 1} more" if len(found.foreign) > 1 else ""
        raise NotACacheError(
            f"{found.root}: not a tilescope cache (it holds '{first}'{more}, which tilescope does not "
            "write there); nothing removed"
        )


def _prune_locked(root: Path, ledger: Ledger | None, limit: int, target: int, fmt: int, code: str,
                  now: float) -> PruneResult:
    found = scan_cache(root, fmt, code)
    result = PruneResult(left=found)
    for tmp in found.temps:
        if tmp.abandoned(now):
            shutil.rmtree(tmp.path, ignore_errors=True)
            result.temps_removed += 1
    total = found.bytes
    if total > limit:
        # unreachable entries first (no key finds them), then the least recently used
        for entry in sorted(found.entries, key=lambda e: (e.reachable, e.used_ns, e.path.name)):
            if total <= target:
                break
            if remove_entry(entry.path):
                result.removed.append(entry)
            total -= entry.bytes  # gone either way: removed here, or by another process
    if ledger is not None:
        ledger.write(total, now)
    return result


def remove_entry(path: Path) -> bool:
    """Rename the entry to a temporary name, then delete it: a reader sees it whole or not at all,
    and a removal cut short leaves a temporary that a later prune collects, not a broken entry.
    False when it was gone already (another process)."""
    grave = path.parent / f"{TMP_PREFIX}rm-{uuid.uuid4().hex}"
    try:
        os.rename(path, grave)
    except OSError:
        return False
    shutil.rmtree(grave, ignore_errors=True)
    return True
