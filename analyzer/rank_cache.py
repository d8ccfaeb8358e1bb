"""The per-rank summary cache: each input of a multi-rank run reduced once, read back next time.

A second `tilescope analyze` of the same run reads, per input, one JSON file (the ranks' report
parts: summary, findings, skipped rules; or the failure that left the input out) and up to four
small Parquet tables per rank (steps, communication operators, links, per-kernel summary) instead
of its profiler files. The cross-rank model and rules then run on those summaries as on fresh ones.

An entry is found by a key over everything its content depends on:
  - the input: its detected format, path and rank, and the path, size and modification time of
    every file under it (a rewritten or touched file is a different input), and of the
    manifest.json / ir/ beside a sample folder's profiler output;
  - the analysis: the configuration (thresholds, selected rules, pattern files with their times),
    `--chip`, the columns loaded, the timeline cap;
  - tilescope itself: its version and the size and time of each of its source files, so that a
    changed rule never reads a summary an older rule wrote.
Entries are written atomically (a temporary directory renamed into place) and never modified;
nothing outside the cache directory is written. Default directory: $TILESCOPE_CACHE_DIR, else
$XDG_CACHE_HOME/tilescope/ranks, else ~/.cache/tilescope/ranks; `--cache-dir` and `--no-cache`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from analyzer.errors import TilescopeError

if TYPE_CHECKING:
    import pandas as pd

    from analyzer.rankwork import RankPart, UnitJob, UnitResult

CACHE_FORMAT = 1
CACHE_ENV = "TILESCOPE_CACHE_DIR"
TABLES = ("steps", "comm_ops", "links", "kernels")


class CachedLoadError(TilescopeError):
    """The error that left an input out, as a cached summary recorded it (its one line)."""


def default_cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tilescope" / "ranks"


def _stat_rows(root: Path) -> list[tuple[str, int, int]]:
    """(path, size, mtime_ns) of `root` (a file) or of every file under it, sorted."""
    if root.is_file():
        st = root.stat()
        return [(str(root), st.st_size, st.st_mtime_ns)]
    rows = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            try:
                st = os.stat(p)
            except OSError:
                continue
            rows.append((p, st.st_size, st.st_mtime_ns))
    rows.sort()
    return rows


def input_bytes(found: Any) -> int:
    """Bytes under one input (its worker's memory estimate, analyzer.rankwork): a detected local
    input's files, or the objects under a remote rank folder's URL."""
    if isinstance(found, str):
        from analyzer.io.remote import fingerprint

        return sum(int(size or 0) for _n, size, _t in fingerprint(found))
    root = found.path if hasattr(found, "path") else Path(found)
    return sum(size for _p, size, _t in _stat_rows(root))


@lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    import analyzer
    import rules
    from analyzer.report.data import tool_version

    h = hashlib.sha256(f"{CACHE_FORMAT}:{tool_version()}".encode())
    for pkg in (analyzer, rules):
        for row in _stat_rows(Path(pkg.__path__[0])):
            if row[0].endswith((".py", ".json", ".toml")):
                h.update(repr(row).encode())
    return h.hexdigest()


class RankCache:
    """Summaries under `root` (created on first write)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def key(self, job: UnitJob) -> str:
        h = hashlib.sha256(_code_fingerprint().encode())
        cfg = job.config
        pattern_files = [str(p) for p in (cfg.rules.get("TS102", {}).get("pattern_files") or [])]
        if job.det is not None:
            source: list[Any] = [job.det.format, str(job.det.path), job.det.rank, _stat_rows(job.det.path)]
        else:  # a remote rank folder: its objects' names, sizes and times as the store lists them
            from analyzer.io.remote import fingerprint

            source = ["url", job.url, fingerprint(str(job.url))]
        parts: list[Any] = [
            *source, job.chip, job.kernel_columns, job.timeline_cap, repr(dataclasses.asdict(cfg)),
        ]
        from analyzer.analysis import pattern_files as configured_patterns

        for f in [*configured_patterns(cfg), *pattern_files]:
            if Path(f).is_file():
                parts.append(_stat_rows(Path(f)))
        if job.manifest_dir is not None:
            for extra in (job.manifest_dir / "manifest.json", job.manifest_dir / "ir"):
                if extra.exists():
                    parts.append(_stat_rows(extra))
        h.update(repr(parts).encode("utf-8", "surrogateescape"))
        return h.hexdigest()

    def _dir(self, key: str) -> Path:
        return self.root / key[:2] / key

    def get(self, key: str) -> UnitResult | None:
        """The stored result, or None (absent, or unreadable: then it is recomputed)."""
        d = self._dir(key)
        meta = d / "unit.json"
        if not meta.is_file():
            return None
        try:
            data = msgspec.json.decode(meta.read_bytes())
            return _result_from(data, d)
        except (OSError, msgspec.DecodeError, KeyError, TypeError, ValueError):
            return None

    def put(self, key: str, result: UnitResult) -> None:
        """Store `result` atomically; a cache that cannot be written is skipped, not an error."""
        final = self._dir(key)
        if final.exists():
            return
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
        except OSError:
            return
        try:
            (tmp / "unit.json").write_bytes(msgspec.json.encode(_result_to(result, tmp)))
            os.rename(tmp, final)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)


def _write_tables(tables: Any, d: Path, prefix: str) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    written = []
    for name in TABLES:
        frame: pd.DataFrame = getattr(tables, name)
        if len(frame) == 0 or len(frame.columns) == 0:
            continue
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), d / f"{prefix}{name}.parquet")
        written.append(name)
    return written


def _read_tables(d: Path, prefix: str, names: list[str], files: list[str], notes: list[str]) -> Any:
    import pandas as pd
    import pyarrow.parquet as pq

    from analyzer.cluster import RankTables

    frames = {n: pd.DataFrame() for n in TABLES}
    for n in names:
        # ParquetFile.read, not read_table: no dataset discovery and no thread pool for a table of a
        # few hundred rows (~0.3 ms instead of ~1.8 ms; a 64-rank run reads 256 of them)
        frames[n] = pq.ParquetFile(d / f"{prefix}{n}.parquet").read(use_threads=False).to_pandas()
    return RankTables(frames["steps"], frames["comm_ops"], frames["links"], frames["kernels"],
                      files=[_text_path(f) for f in files], notes=list(notes))


def _part_to(rp: RankPart, d: Path, i: int) -> dict[str, Any]:
    return {
        "part": rp.part, "rank": rp.rank, "path": _path_text(rp.path),
        "tables": _write_tables(rp.tables, d, f"{i}-"),
        "files": [_path_text(f) for f in rp.tables.files], "notes": rp.tables.notes,
    }


def _path_text(p: Path | str) -> str:
    # the path's bytes one code point each: a name that is not UTF-8 survives the JSON round trip;
    # a URL (a remote rank) is kept as text, marked by its scheme
    from analyzer.io.remote import is_url

    if isinstance(p, str) and is_url(p):
        return p
    return os.fsencode(p).decode("latin-1")


def _text_path(text: str) -> Path | str:
    from analyzer.io.remote import is_url

    return text if is_url(text) else Path(os.fsdecode(text.encode("latin-1")))


def _result_to(result: UnitResult, d: Path) -> dict[str, Any]:
    parts = [_part_to(rp, d, i) for i, rp in enumerate(result.parts)]
    out: dict[str, Any] = {"format": CACHE_FORMAT, "parts": parts}
    if result.failure is not None:
        f, t = result.failure, result.failure_tables
        assert t is not None
        out["failure"] = {"path": _path_text(f.path), "message": f.error.one_line(), "rank": f.rank,
                          "tables": _write_tables(t, d, "failed-"),
                          "files": [_path_text(p) for p in t.files], "notes": t.notes}
    return out


def _result_from(data: dict[str, Any], d: Path) -> UnitResult:
    from analyzer.io.load import LoadFailure
    from analyzer.rankwork import RankPart, UnitResult

    if data.get("format") != CACHE_FORMAT:
        raise ValueError("another cache format")
    parts = [
        RankPart(p["part"], p["rank"], _text_path(p["path"]),
                 _read_tables(d, f"{i}-", p["tables"], p["files"], p["notes"]))
        for i, p in enumerate(data["parts"])
    ]
    res = UnitResult(-1, parts)
    if "failure" in data:
        f = data["failure"]
        res.failure = LoadFailure(_text_path(f["path"]), CachedLoadError(f["message"]), f["rank"])
        res.failure_tables = _read_tables(d, "failed-", f["tables"], f["files"], f["notes"])
    return res
