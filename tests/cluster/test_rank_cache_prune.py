"""The per-rank summary cache's size limit (analyzer/rank_cache_prune.py) and `tilescope cache`:
sizes measured on disk, least recently used entries out first (a read counts as a use), unreachable
entries before them, a writer's young temporary and every name outside the layout left alone, and
an analysis under a tiny limit giving the report an uncached one gives."""

from __future__ import annotations

import hashlib
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tilescope import rank_cache_prune
from tilescope.cli import main
from tilescope.rank_cache import CACHE_FORMAT, RankCache, _code_fingerprint
from tilescope.rank_cache_prune import (
    DEFAULT_MAX_BYTES,
    LEDGER,
    MAX_SIZE_ENV,
    TMP_GRACE_S,
    parse_size,
    prune_if_over,
)
from tilescope.rankjobs import UnitResult

from support import REPO_ROOT

SAMPLE = REPO_ROOT / "sample_traces" / "cluster_8rank"
HOUR = 3600


def _key(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def _entry_dir(root: Path, name: str) -> Path:
    key = _key(name)
    return root / key[:2] / key


def _put(cache: RankCache, name: str, used: float | None = None) -> Path:
    """A real entry (an input left out, no ranks: unit.json only) written by `put`, last used at `used`."""
    cache.put(_key(name), UnitResult(0, []))
    d = _entry_dir(cache.root, name)
    assert (d / "unit.json").is_file()
    if used is not None:
        os.utime(d / "unit.json", (used, used))
    return d


def _du(path: Path) -> int:
    """Bytes on disk as `du` counts them (512-byte blocks), of a directory and everything under it."""
    total = os.lstat(path).st_blocks * 512
    for dirpath, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def _entries_on_disk(root: Path) -> list[Path]:
    return sorted(d for d in root.glob("??/*") if len(d.name) == 64 and d.is_dir())


def _report_json(path: Path) -> str:
    report = json.loads(path.read_text())
    report.pop("generated_at")
    return json.dumps(report, sort_keys=True)


def test_sizes_read_as_documented() -> None:
    assert parse_size("500M") == 500 * 2**20
    assert parse_size("2G") == parse_size("2GiB") == parse_size("2 gb") == 2 * 2**30
    assert parse_size("1.5G") == 3 * 2**29
    assert parse_size("64K") == 65536
    assert parse_size("1048576") == parse_size("1048576B") == 2**20
    assert parse_size("0") == 0
    for bad in ("", "abc", "-1", "2X", "1.2.3", "G", "2 G B"):
        assert parse_size(bad) is None, bad


def test_least_recently_used_go_first_and_a_read_is_a_use(tmp_path: Path) -> None:
    cache = RankCache(tmp_path / "c")
    now = time.time()
    dirs = {name: _put(cache, name, now - (10 - i) * HOUR) for i, name in enumerate("abcde")}
    # "a" is the oldest written; reading it makes it the most recently used
    assert cache.get(_key("a")) is not None
    assert os.stat(dirs["a"] / "unit.json").st_mtime > now - 60
    sizes = {name: _du(d) for name, d in dirs.items()}
    keep = sizes["a"] + sizes["d"] + sizes["e"]
    result = cache.prune(keep)
    assert [e.path for e in result.removed] == [dirs["b"], dirs["c"]]  # oldest use first
    assert sorted(_entries_on_disk(cache.root)) == sorted([dirs["a"], dirs["d"], dirs["e"]])
    assert cache.scan().bytes == keep == sum(_du(d) for d in _entries_on_disk(cache.root))


def test_unreachable_entries_go_before_any_reachable_one(tmp_path: Path) -> None:
    cache = RankCache(tmp_path / "c")
    now = time.time()
    old = _put(cache, "old but current", now - 5 * HOUR)
    other_code = _put(cache, "another tilescope", now)
    other_format = _put(cache, "another format", now)
    no_meta = _put(cache, "unit.json lost", now)
    meta = msgspec.json.decode((other_code / "unit.json").read_bytes())
    (other_code / "unit.json").write_bytes(msgspec.json.encode({**meta, "code": "0" * 64}))
    (other_format / "unit.json").write_bytes(msgspec.json.encode({**meta, "format": CACHE_FORMAT - 1}))
    (no_meta / "unit.json").unlink()
    scan = cache.scan()
    assert {e.path: e.reachable for e in scan.entries} == {
        old: True, other_code: False, other_format: False, no_meta: False}
    result = cache.prune(_du(old))
    assert {e.path for e in result.removed} == {other_code, other_format, no_meta}
    assert _entries_on_disk(cache.root) == [old]


def test_a_writers_young_temporary_is_left_an_abandoned_one_removed(tmp_path: Path) -> None:
    cache = RankCache(tmp_path / "c")
    entry = _put(cache, "x")
    young = entry.parent / ".tmp-writing"
    young.mkdir()
    (young / "0-kernels.parquet").write_bytes(b"\0" * 10_000)
    old = entry.parent / ".tmp-crashed"
    old.mkdir()
    (old / "unit.json").write_bytes(b"{}")
    stale = time.time() - TMP_GRACE_S - 60
    os.utime(old, (stale, stale))
    result = cache.prune(0)
    assert young.is_dir() and (young / "0-kernels.parquet").stat().st_size == 10_000
    assert not old.exists() and not entry.exists()
    assert result.temps_removed == 1
    # clear leaves it too, and says so
    assert main(["cache", "clear", "--cache-dir", str(cache.root)]) == 0
    assert young.is_dir()


def test_names_outside_the_layout_are_never_removed(tmp_path: Path) -> None:
    cache = RankCache(tmp_path / "c")
    entry = _put(cache, "x", time.time() - HOUR)
    outside = tmp_path / "precious"
    (outside / _key("y")).mkdir(parents=True)
    (outside / _key("y") / "unit.json").write_text("{}")
    (outside / "file.txt").write_text("keep")
    shard = entry.parent
    foreign = [
        cache.root / "notes.txt",  # a file at the top
        cache.root / "zz",  # a directory not named as a shard
        shard / "README",  # a file in a shard
        shard / "not-a-key",  # a directory in a shard not named as an entry
        shard / ("0" * 64),  # a key that does not belong in this shard
    ]
    foreign[0].write_text("mine")
    foreign[1].mkdir()
    foreign[2].write_text("mine")
    foreign[3].mkdir()
    foreign[4].mkdir()
    old = time.time() - 10 * HOUR
    for p in foreign:
        os.utime(p, (old, old))
    links = [shard / _key("y"), cache.root / _key("y")[:2]]  # an entry and a shard as symlinks
    for link in links:
        if not link.exists():
            link.symlink_to(outside / _key("y") if link.parent == shard else outside)
    cache.prune(0)
    prune_if_over(cache.root, 0, CACHE_FORMAT, _code_fingerprint())
    assert not entry.exists()
    assert all(p.exists() for p in foreign)
    assert all(link.is_symlink() for link in links)
    assert (outside / _key("y") / "unit.json").read_text() == "{}"
    assert (outside / "file.txt").read_text() == "keep"
    assert set(cache.scan().foreign) == {*foreign, *links}


def test_an_entry_removed_meanwhile_by_another_process_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = RankCache(tmp_path / "c")
    now = time.time()
    first = _put(cache, "a", now - 2 * HOUR)
    second = _put(cache, "b", now - HOUR)
    real_scan = rank_cache_prune.scan_cache

    def scan_then_lose_one(root: Path, fmt: int, code: str) -> Any:
        found = real_scan(root, fmt, code)
        rank_cache_prune.remove_entry(first)  # another prune got there first
        return found

    monkeypatch.setattr(rank_cache_prune, "scan_cache", scan_then_lose_one)
    result = cache.prune(_du(second))
    assert result.removed == []  # the one over the limit was gone already; the other stays
    assert _entries_on_disk(cache.root) == [second]


def test_under_the_limit_only_the_ledger_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = RankCache(tmp_path / "c")
    now = time.time()
    dirs = [_put(cache, name, now - (5 - i) * HOUR) for i, name in enumerate("abcd")]
    total = sum(_du(d) for d in dirs)
    assert cache.prune_if_over(total) is not None  # a ledger not yet known: counted once
    assert json.loads((cache.root / LEDGER).read_text())["bytes"] == total
    added = _put(cache, "e")  # a writer adds its bytes to the ledger
    total += _du(added)
    assert json.loads((cache.root / LEDGER).read_text())["bytes"] == total

    def walked(*_args: Any) -> Any:
        raise AssertionError("the cache was walked although the ledger says it is under the limit")

    monkeypatch.setattr(rank_cache_prune, "scan_cache", walked)
    assert cache.prune_if_over(total) is None
    monkeypatch.undo()
    # over the limit: down to 90 % of it, least recently used first
    limit = total - 1
    result = cache.prune_if_over(limit)
    assert result is not None and [e.path for e in result.removed] == [dirs[0]]
    assert cache.scan().bytes <= limit * 0.9
    assert json.loads((cache.root / LEDGER).read_text())["bytes"] == cache.scan().bytes


def test_bad_limit_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(MAX_SIZE_ENV, "lots")
    for args in (["cache", "info"], ["cache", "prune"],
                 ["analyze", str(SAMPLE), "--cache-dir", str(tmp_path / "c"), "-f", "json"]):
        assert main(args) == 2, args
        out, err = capsys.readouterr()
        assert out == ""
        assert err.splitlines() == [
            "tilescope: error: TILESCOPE_CACHE_MAX_SIZE='lots': expected a size such as 500M, 2G or 0 "
            "(bytes; K, M, G, T are powers of 1024; 0 stores nothing)"
        ]
    assert not (tmp_path / "c").exists()  # said before any work
    assert main(["cache", "prune", "--max-size", "5X", "--cache-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("tilescope: error: --max-size '5X': expected a size")


def test_clear_refuses_a_directory_that_is_not_a_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = RankCache(tmp_path / "home")
    entry = _put(cache, "x")
    (cache.root / "thesis.tex").write_text("years of work")
    for command in ("clear", "prune"):
        assert main(["cache", command, "--cache-dir", str(cache.root)]) == 2
        err = capsys.readouterr().err
        assert err.splitlines() == [
            f"tilescope: error: {cache.root}: not a tilescope cache (it holds 'thesis.tex', which "
            "tilescope does not write there); nothing removed"
        ]
    assert entry.is_dir() and (cache.root / "thesis.tex").read_text() == "years of work"
    (cache.root / "thesis.tex").unlink()
    assert main(["cache", "clear", "--cache-dir", str(cache.root)]) == 0
    assert capsys.readouterr().out.startswith(f"{cache.root}: removed 1 entry (")
    assert sorted(p.name for p in cache.root.iterdir()) == ["CACHEDIR.TAG", LEDGER]


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_info_numbers_are_what_is_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "c"
    monkeypatch.delenv(MAX_SIZE_ENV, raising=False)
    assert main(["analyze", str(SAMPLE), "--cache-dir", str(root), "-j", "1", "-f", "json",
                 "-o", str(tmp_path / "r.json")]) == 0
    capsys.readouterr()
    assert main(["cache", "info", "--cache-dir", str(root), "-f", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    entries = _entries_on_disk(root)
    # 8 ranks' summaries and the whole run's report (rank_cache_prune.RUN_FILE)
    assert sorted(p.name for d in entries for p in d.glob("*.json")) == ["run.json", *["unit.json"] * 8]
    used = [os.stat(next(d.glob("*.json"))).st_mtime_ns / 1e9 for d in entries]

    def iso(t: float) -> str:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    assert info == {
        "directory": str(root), "exists": True, "entries": 9, "unreachable_entries": 0,
        "bytes": sum(_du(d) for d in entries), "limit_bytes": DEFAULT_MAX_BYTES, "limit_source": "default",
        "oldest_use": iso(min(used)), "newest_use": iso(max(used)), "temporary": 0, "temporary_bytes": 0,
        "other": [],
    }
    assert len(entries) == 9
    # everything under the root is the entries, the shard directories and the two bookkeeping files
    shards = {d.parent for d in entries}
    overhead = _du(root) - info["bytes"]
    assert overhead == sum(_du(p) for p in [root / LEDGER, root / "CACHEDIR.TAG"]) + os.lstat(
        root).st_blocks * 512 + sum(os.lstat(s).st_blocks * 512 for s in shards)
    assert main(["cache", "info", "--cache-dir", str(root)]) == 0
    text = capsys.readouterr().out
    assert "  entries     9\n" in text and f"({info['bytes']:,} bytes) on disk" in text


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_a_tiny_limit_gives_the_same_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uncached = tmp_path / "uncached.json"
    assert main(["analyze", str(SAMPLE), "--no-cache", "-j", "1", "-f", "json", "-o", str(uncached)]) == 0
    root = tmp_path / "c"
    # room for one or two of the eight rank entries (~48 KiB each): each run writes them all and its
    # own report (~200 KiB, the newest) and prunes to 90 KiB, oldest first: nothing may be left, and
    # the next run analyses again what is gone
    monkeypatch.setenv(MAX_SIZE_ENV, "100K")
    reports = []
    for i in range(3):
        out = tmp_path / f"cached{i}.json"
        assert main(["analyze", str(SAMPLE), "--cache-dir", str(root), "-j", "2", "-f", "json",
                     "-o", str(out)]) == 0
        reports.append(_report_json(out))
        left = _entries_on_disk(root)
        assert len(left) < 9
        assert sum(_du(d) for d in left) <= 0.9 * 100 * 2**10
    assert reports == [_report_json(uncached)] * 3
    # 0 stores nothing
    monkeypatch.setenv(MAX_SIZE_ENV, "0")
    assert main(["analyze", str(SAMPLE), "--cache-dir", str(tmp_path / "none"), "-j", "1", "-f", "json",
                 "-o", str(tmp_path / "zero.json")]) == 0
    assert not (tmp_path / "none").exists()
    assert _report_json(tmp_path / "zero.json") == _report_json(uncached)
