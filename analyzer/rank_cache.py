"""The per-rank summary cache: each input of a multi-rank run reduced once, read back next time.

A second `tilescope analyze` of the same run reads, per input, one JSON file (the ranks' report
parts: summary, findings, skipped rules; or the failure that left the input out) and up to four
small Parquet tables per rank (steps, communication operators, links, per-kernel summary) instead
of its profiler files. The cross-rank model and rules then run on those summaries as on fresh ones.

An entry is found by a key over everything its content depends on:
  - the input: its detected format, path and rank, and the path, size, modification time, inode
    and change time of every file under it, links followed (a rewritten, replaced or touched file
    is a different input), and of the manifest.json / ir/ beside a sample folder's profiler output;
  - the analysis: the configuration (thresholds, selected rules, pattern files with their times),
    `--chip`, the columns loaded, the timeline cap;
  - tilescope itself: its version and the size and time of each of its source files, so that a
    changed rule never reads a summary an older rule wrote; and the versions of the numeric
    libraries (NUMERIC_LIBRARIES), so that an upgraded pandas does not either.
Entries are written atomically (a temporary directory renamed into place) and never modified
(but for unit.json's time, which a read sets: the entry's last use); nothing outside the cache
directory is written. Who the cache trusts and what is checked before an entry is used (owner and
mode, no links, checksums, shapes, sizes): analyzer/rank_cache_trust.py. Default directory:
$TILESCOPE_CACHE_DIR, else $XDG_CACHE_HOME/tilescope/ranks, else ~/.cache/tilescope/ranks;
`--cache-dir` and `--no-cache`.
The size limit, least recently used entries out first: analyzer/rank_cache_prune.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from tilescope.errors import TilescopeError
from tilescope.io.bad_rows import STRICT_ENV
from tilescope.rank_cache_prune import (
    RUN_FILE,
    TMP_PREFIX,
    UNIT_FILE,
    clear,
    ensure_tag,
    entry_bytes,
    locked_ledger,
    prune,
    prune_if_over,
    scan_cache,
)
from tilescope.rank_cache_trust import (
    Limits,
    RunMeta,
    TablesMeta,
    UnitMeta,
    UntrustedEntry,
    check_report_shapes,
    check_root,
    check_shard,
    discard,
    open_entry,
    read_file,
    read_table,
    seal,
    sha256,
    touch,
    unseal,
    warn_untrusted,
)
from tilescope.rankjobs import RankPart, UnitJob, UnitResult

if TYPE_CHECKING:
    import pandas as pd

    from tilescope.cluster import RankTables
    from tilescope.config import Config
    from tilescope.io.failures import LoadFailure
    from tilescope.rank_cache_prune import PruneResult, Scan

# 2: unit.json records the source fingerprint (`code`), so that a prune knows entries no key reaches
# 3: entries sealed with a checksum and their tables' sha256 (tilescope.rank_cache_trust)
CACHE_FORMAT = 3
CACHE_ENV = "TILESCOPE_CACHE_DIR"
TABLES = ("steps", "comm_ops", "links", "kernels")


class CachedLoadError(TilescopeError):
    """The error that left an input out, as a cached summary recorded it (its one line)."""


def default_cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tilescope" / "ranks"


def _stat_rows(root: Path) -> list[tuple[str, int, int, int, int]]:
    """(path, size, mtime_ns, inode, ctime_ns) of `root` (a file) or of every file under it, sorted.
    Links are followed, as the loaders follow them (a rank whose ASCEND_PROFILER_OUTPUT/ is a link
    is read through it), each directory once (a link loop ends). The inode and change time see a
    file replaced or rewritten with its size and modification time restored (`touch -r`)."""
    if root.is_file():
        return [_stat_row(str(root), root.stat())]
    rows = []
    seen: set[tuple[int, int]] = set()
    for dirpath, dirs, files in os.walk(root, followlinks=True):
        try:
            st = os.stat(dirpath)
        except OSError:
            dirs[:] = []
            continue
        if (st.st_dev, st.st_ino) in seen:  # reached again through a link: walked already
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        for name in files:
            p = os.path.join(dirpath, name)
            try:
                rows.append(_stat_row(p, os.stat(p)))
            except OSError:
                continue
    rows.sort()
    return rows


def _stat_row(path: str, st: os.stat_result) -> tuple[str, int, int, int, int]:
    return (path, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def input_rows(found: Any) -> list[tuple[Any, ...]]:
    """(name, size, time) of every file of one input — a detected local input (or its path), or
    the objects under a remote rank folder's URL — listed once per analysis: they make the
    input's cache key (`RankCache.key`) and its worker's memory estimate (`input_bytes`)."""
    if isinstance(found, str):
        # deferred: `tilescope --help` imports this module (through commands.cache); io.remote only when used
        from tilescope.io.remote import fingerprint

        return list(fingerprint(found))
    return list(_stat_rows(found.path if hasattr(found, "path") else Path(found)))


def input_bytes(rows: list[tuple[Any, ...]]) -> int:
    """Bytes of one input's files (`input_rows`)."""
    return sum(int(row[1] or 0) for row in rows)


NUMERIC_LIBRARIES = ("numpy", "pandas", "pyarrow", "msgspec")


def _version_of(name: str) -> str:
    """An installed distribution's version, read from its metadata (nothing imported)."""
    # deferred: `tilescope --help` imports this module (through commands.cache); importlib.metadata only when
    #   used
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "-"


@lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    # deferred: `tilescope --help` imports this module (through commands.cache); report.meta and run_module
    #   only when used
    from tilescope.report.meta import tool_version
    from tilescope.run_module import SUBPACKAGES, package_folders

    h = hashlib.sha256(f"{CACHE_FORMAT}:{tool_version()}".encode())
    # the libraries the numbers go through: another pandas or pyarrow may sum or parse otherwise
    h.update(repr([_version_of(name) for name in NUMERIC_LIBRARIES]).encode())
    # the core's code and the rules', the same files whether installed or a checkout: installed,
    # the rules, the dashboard and the collectors are subfolders of the core's folder
    folders = package_folders()
    core = folders["tilescope"]
    beside = tuple(os.path.join(core, name) + os.sep for name in SUBPACKAGES)
    rows = [r for r in _stat_rows(Path(core)) if not r[0].startswith(beside)]
    for row in [*rows, *_stat_rows(Path(folders["tilescope.rules"]))]:
        if row[0].endswith((".py", ".json", ".toml")):
            h.update(repr(row).encode())
    return h.hexdigest()


class RankCache:
    """Summaries under `root` (created 0700 on first use; who and what it trusts:
    tilescope.rank_cache_trust)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._usable: bool | None = None

    def usable(self) -> bool:
        """The root created if missing, and it and its shard folders the user's alone; else one
        warning (once per process) and every read and write of this cache is skipped."""
        if self._usable is None:
            reason = check_root(self.root)
            if reason is not None:
                warn_untrusted(self.root, reason)
            self._usable = reason is None
        return self._usable

    def key(self, job: UnitJob, rows: list[tuple[Any, ...]] | None = None) -> str:
        """The entry of `job`'s input; `rows`: its `input_rows`, when the caller has them already."""
        if job.det is not None:
            files = rows if rows is not None else input_rows(job.det)
            source: list[Any] = [job.det.format, str(job.det.path), job.det.rank, files]
        else:  # a remote rank folder: its objects' names, sizes and times as the store lists them
            source = ["url", job.url, rows if rows is not None else input_rows(str(job.url))]
        parts: list[Any] = [*source, job.chip, job.kernel_columns, job.timeline_cap]
        return _digest(parts, job.config, job.manifest_dir)

    def run_key(self, path: Path | str, found: Sequence[Any], rows: Sequence[list[tuple[Any, ...]]],
                config: Config, chip: str | None, timeline_cap: int) -> str:
        """The whole run's entry: every input as its own key has it (`key`), in order, under the
        same analysis. The kernel columns are left out: they follow from the rules, whose sources
        are in the fingerprint, so the key needs no rule imported (a hit imports no pandas)."""
        inputs = [[d, None] if isinstance(d, str) else [d.format, str(d.path), d.rank] for d in found]
        parts: list[Any] = ["run", str(path), inputs, list(rows), chip, timeline_cap]
        # deferred: `tilescope --help` imports this module (through commands.cache); io.load only when used
        from tilescope.io.load import manifest_dir_of

        return _digest(parts, config, manifest_dir_of(path) if isinstance(path, Path) else None)

    def _dir(self, key: str) -> Path:
        return self.root / key[:2] / key

    def get_run(self, key: str, input_bytes: int = 0) -> CachedRun | None:
        """A whole run's stored report and left-out inputs, or None (absent, or failing a check:
        then removed, and the run analysed and stored again). `input_bytes`: the run's files."""
        if not self.usable():
            return None
        # deferred: `tilescope --help` imports this module (through commands.cache); gcpause and io.failures
        #   only when used
        from tilescope.gcpause import gc_paused
        from tilescope.io.failures import LoadFailure

        try:
            with open_entry(self.root, key) as fd:
                if fd is None:
                    return None
                raw = read_file(fd, RUN_FILE, Limits(input_bytes).json_bytes)
                with gc_paused():  # a report of 64 ranks is ~10^6 objects: no collection while they arrive
                    data = _decode(unseal(raw), RunMeta)
                check_report_shapes(report=data.report)
                failures = [LoadFailure(_text_path(f.path), CachedLoadError(f.message), f.rank)
                            for f in data.failures]
                touch(fd, RUN_FILE)  # used now, as `get` marks a unit entry
                return CachedRun(data.report, failures)
        except UntrustedEntry:
            discard(self.root, key)
            return None

    def put_run(self, key: str, report: dict[str, Any], failures: Sequence[LoadFailure]) -> None:
        """Store a run's report (atomically, as `put`); skipped when the cache cannot be written."""
        failed = [{"path": _path_text(f.path), "message": f.error.one_line(), "rank": f.rank}
                  for f in failures]
        self._write(key, RUN_FILE, {**_entry_head(), "report": report, "failures": failed})

    def get(self, key: str, input_bytes: int = 0) -> UnitResult | None:
        """The stored result, or None (absent, or failing a check of rank_cache_trust: then
        removed, recomputed and written again). `input_bytes`: the input's files (`input_rows`),
        which bound what its entry may hold."""
        if not self.usable():
            return None
        limits = Limits(input_bytes)
        try:
            with open_entry(self.root, key) as fd:
                if fd is None:
                    return None
                meta = _decode(unseal(read_file(fd, UNIT_FILE, limits.json_bytes)), UnitMeta)
                check_report_shapes(parts=[p.part for p in meta.parts])
                result = _result_from(meta, fd, limits)
                # used now: the least recently used entries are pruned first (one utime, no lock);
                # an entry another process removed meanwhile has been read whole already
                touch(fd, UNIT_FILE)
                return result
        except UntrustedEntry:
            discard(self.root, key)
            return None

    def put(self, key: str, result: UnitResult) -> None:
        """Store `result` atomically; a cache that cannot be written is skipped, not an error."""
        self._write(key, UNIT_FILE, lambda tmp: _result_to(result, tmp))

    def _write(self, key: str, name: str, content: Any) -> None:
        """Entry `key`: a temporary directory holding `name` (JSON of `content`, or of what
        `content(tmp)` returns after writing its own files there) renamed into place, its bytes
        added to the cache's ledger."""
        final = self._dir(key)
        if not self.usable() or os.path.lexists(final):
            return
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(final.parent, 0o700)
            if check_shard(final.parent) is not None:  # made a link or another's since the root's check
                return
            tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=final.parent))
        except OSError:
            return
        ensure_tag(self.root)
        try:
            data = content(tmp) if callable(content) else content
            (tmp / name).write_bytes(seal(msgspec.json.encode(data)))
            size = entry_bytes(tmp)
            # renamed and counted under the ledger's lock: a prune counting the entries meanwhile
            # sees this one either in its count or in the ledger, never in both
            with locked_ledger(self.root) as ledger:
                os.rename(tmp, final)
                if ledger is not None:
                    ledger.add(size)
        except (OSError, TypeError, ValueError):  # TypeError/ValueError: msgspec could not encode it
            shutil.rmtree(tmp, ignore_errors=True)

    # Keeping it under a size limit (analyzer/rank_cache_prune.py): an entry is reachable when this
    # tilescope (its cache format and source fingerprint) wrote it

    def scan(self) -> Scan:
        """Every entry, temporary and foreign name under the root, without changing anything."""
        return scan_cache(self.root, CACHE_FORMAT, _code_fingerprint())

    def prune_if_over(self, limit: int) -> PruneResult | None:
        """After an analysis: cheap (the ledger) unless the cache is over `limit`."""
        if not self.usable():
            return None
        return prune_if_over(self.root, limit, CACHE_FORMAT, _code_fingerprint())

    def prune(self, limit: int) -> PruneResult:
        return prune(self.root, limit, CACHE_FORMAT, _code_fingerprint())

    def clear(self) -> PruneResult:
        return clear(self.root, CACHE_FORMAT, _code_fingerprint())


@dataclass
class CachedRun:
    """A whole run answered from the cache: its report and the inputs that were left out."""

    report: dict[str, Any]
    failures: list[LoadFailure]


def _digest(parts: list[Any], cfg: Config, manifest_dir: Path | None) -> str:
    """sha256 of `parts` with the code fingerprint, the configuration and the files it names."""
    h = hashlib.sha256(_code_fingerprint().encode())
    # `--strict` refuses a file whose unreadable rows a default run skipped: another result
    parts = [*parts, repr(dataclasses.asdict(cfg)), os.environ.get(STRICT_ENV) == "1"]
    pattern_files = [str(p) for p in (cfg.rules.get("TS102", {}).get("pattern_files") or [])]
    # deferred: `tilescope --help` imports this module (through commands.cache); analysis only when used
    from tilescope.analysis import pattern_files as configured_patterns

    for f in [*configured_patterns(cfg), *pattern_files]:
        if Path(f).is_file():
            parts.append(_stat_rows(Path(f)))
    if manifest_dir is not None:
        for extra in (manifest_dir / "manifest.json", manifest_dir / "ir"):
            if extra.exists():
                parts.append(_stat_rows(extra))
    h.update(repr(parts).encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _tables_to(tables: RankTables, d: Path, prefix: str) -> dict[str, Any]:
    """Write a rank's non-empty tables as `{prefix}{name}.parquet`; the JSON that finds them again
    (with their checksums, the files and notes) for `_tables_from`."""
    # deferred: pyarrow (~0.25 s) only where used
    import pyarrow as pa
    import pyarrow.parquet as pq

    written, sums = [], {}
    for name in TABLES:
        frame: pd.DataFrame = getattr(tables, name)
        if len(frame) == 0 or len(frame.columns) == 0:
            continue
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), sink)
        data = sink.getvalue().to_pybytes()
        (d / f"{prefix}{name}.parquet").write_bytes(data)
        written.append(name)
        sums[name] = sha256(data)
    return {"tables": written, "sha256": sums, "files": [_path_text(f) for f in tables.files],
            "notes": tables.notes}


def _tables_from(fd: int, prefix: str, meta: TablesMeta, limits: Limits) -> RankTables:
    """A rank's tables as `_tables_to` wrote them, each checked (rank_cache_trust.read_table).
    Left as Arrow: the ranks' tables become one pandas frame each when assembled (cluster._concat)."""
    # deferred: cluster (pandas) only where used
    from tilescope.cluster import RankTables

    out = RankTables.empty()
    for name in meta.tables:
        data = read_file(fd, f"{prefix}{name}.parquet", limits.parquet_bytes)
        setattr(out, name, read_table(data, name, meta.sha256.get(name), limits))
    out.files = [_text_path(f) for f in meta.files]
    out.notes = list(meta.notes)
    return out


def _part_to(rp: RankPart, d: Path, i: int) -> dict[str, Any]:
    return {"part": rp.part, "rank": rp.rank, "path": _path_text(rp.path),
            **_tables_to(rp.tables, d, f"{i}-")}


def _path_text(p: Path | str) -> str:
    # the path's bytes one code point each: a name that is not UTF-8 survives the JSON round trip;
    # a URL (a remote rank) is kept as text, marked by its scheme
    # deferred: `tilescope --help` imports this module (through commands.cache); io.remote only when used
    from tilescope.io.remote import is_url

    if isinstance(p, str) and is_url(p):
        return p
    return os.fsencode(p).decode("latin-1")


def _text_path(text: str) -> Path | str:
    # deferred: `tilescope --help` imports this module (through commands.cache); io.remote only when used
    from tilescope.io.remote import is_url

    return text if is_url(text) else Path(os.fsdecode(text.encode("latin-1")))


def _entry_head() -> dict[str, Any]:
    """What every entry's JSON begins with: a prune reads only these bytes to tell the entries no
    key of this tilescope reaches (rank_cache_prune.entry_header)."""
    return {"format": CACHE_FORMAT, "code": _code_fingerprint()}


def _result_to(result: UnitResult, d: Path) -> dict[str, Any]:
    parts = [_part_to(rp, d, i) for i, rp in enumerate(result.parts)]
    out: dict[str, Any] = {**_entry_head(), "parts": parts}
    if result.failure is not None:
        f, t = result.failure, result.failure_tables
        assert t is not None
        out["failure"] = {"path": _path_text(f.path), "message": f.error.one_line(), "rank": f.rank,
                          **_tables_to(t, d, "failed-")}
    return out


def _decode(data: bytes, kind: type[Any]) -> Any:
    """An entry's JSON as `kind` (rank_cache_trust's typed shapes), of this cache format."""
    try:
        out = msgspec.json.decode(data, type=kind)
    except msgspec.DecodeError as exc:
        raise UntrustedEntry(f"not an entry of this shape ({exc})") from exc
    if out.format != CACHE_FORMAT:
        raise UntrustedEntry("another cache format")
    return out


def _result_from(meta: UnitMeta, fd: int, limits: Limits) -> UnitResult:
    # deferred: `tilescope --help` imports this module (through commands.cache); io.failures only when used
    from tilescope.io.failures import LoadFailure

    parts = [
        RankPart(p.part, p.rank, _text_path(p.path), _tables_from(fd, f"{i}-", p, limits))
        for i, p in enumerate(meta.parts)
    ]
    res = UnitResult(-1, parts)
    if meta.failure is not None:
        f = meta.failure
        res.failure = LoadFailure(_text_path(f.path), CachedLoadError(f.message), f.rank)
        res.failure_tables = _tables_from(fd, "failed-", f, limits)
    return res
