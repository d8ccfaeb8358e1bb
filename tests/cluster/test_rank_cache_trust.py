"""The per-rank summary cache's trust model (analyzer/rank_cache_trust.py, docs/reliability.md §9):
the probes of issue #27's Cache section. A cache another user could write is not used (one warning);
no link inside it is followed; an entry that is damaged, edited, of the wrong shape or larger than
its input could produce is recomputed and written again, never read; the key sees files behind
links and edits that restore size and modification time."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tilescope import rank_cache_trust
from tilescope.analysis import kernel_columns_read
from tilescope.cli import main
from tilescope.config import Config
from tilescope.io.detect import detect
from tilescope.rank_cache import RankCache, input_rows
from tilescope.rank_cache_trust import Limits, seal
from tilescope.rankjobs import UnitJob
from tilescope.rankwork import Executor_, RankRun, analyze_inputs


@pytest.fixture(scope="module")
def run2(tmp_path_factory: pytest.TempPathFactory, sample_generator: Any) -> Path:
    """A generated 2-rank run whose second rank's ASCEND_PROFILER_OUTPUT/ is a link to a folder
    outside the run (as a run assembled from several disks has)."""
    from generator.cluster import ClusterSpec, write_cluster_run

    out = tmp_path_factory.mktemp("run2")
    roots = write_cluster_run(out / "run", ClusterSpec(ranks=2, steps=2))
    real = out / "elsewhere"
    shutil.move(roots[1] / "ASCEND_PROFILER_OUTPUT", real)
    (roots[1] / "ASCEND_PROFILER_OUTPUT").symlink_to(real)
    return out / "run"


def _analyze(run: Path, cache: RankCache | None) -> RankRun:
    return analyze_inputs(detect(run), run, Config(), None, kernel_columns_read(), Executor_("serial"), cache)


@pytest.fixture(scope="module")
def uncached(run2: Path) -> RankRun:
    return _analyze(run2, None)


@pytest.fixture(scope="module")
def pristine(run2: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache holding the run's two entries, written once; tests change a copy."""
    root = tmp_path_factory.mktemp("pristine") / "cache"
    _analyze(run2, RankCache(root))
    return root


def _copy(pristine: Path, tmp_path: Path) -> Path:
    root = tmp_path / "cache"
    shutil.copytree(pristine, root, symlinks=True)
    return root


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rank_cache_trust, "_WARNED", set())


def _entries(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("??/*/unit.json"))


def _reseal(meta: Path, data: Any) -> None:
    """Write `data` as unit.json with a valid checksum: a forger who knows the format."""
    meta.write_bytes(seal(msgspec.json.encode(data)))


def _unsealed(meta: Path) -> dict[str, Any]:
    data = json.loads(meta.read_bytes())
    data.pop("sum")
    return data


def test_the_root_and_its_folders_are_private(pristine: Path) -> None:
    assert stat.S_IMODE(pristine.stat().st_mode) == 0o700
    shards = [p for p in pristine.iterdir() if p.is_dir()]
    assert len(shards) >= 2 and all(stat.S_IMODE(p.stat().st_mode) == 0o700 for p in shards)
    assert len(_entries(pristine)) == 2


def _world_writable_root(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root.chmod(0o777)


def _another_owner(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rank_cache_trust, "me", lambda: os.geteuid() + 1)


def _group_writable_shard(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    next(p for p in root.iterdir() if p.is_dir()).chmod(0o770)


def _shard_is_a_link(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shard = next(p for p in root.iterdir() if p.is_dir())
    shard.rename(root.parent / "moved")
    shard.symlink_to(root.parent / "moved")


@pytest.mark.parametrize(
    "make_untrusted", [_world_writable_root, _another_owner, _group_writable_shard, _shard_is_a_link]
)
def test_a_cache_others_can_write_is_not_used(
    run2: Path,
    tmp_path: Path,
    uncached: RankRun,
    pristine: Path,
    make_untrusted: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _copy(pristine, tmp_path)
    before = sorted(str(p) for p in root.rglob("*"))
    make_untrusted(root, monkeypatch)
    again = _analyze(run2, RankCache(root))
    assert again.cached == 0
    assert again.parts == uncached.parts
    # another RankCache of the same root in this process (analyze makes two): no second warning
    second = RankCache(root)
    assert not second.usable()
    assert second.get(_entries(pristine)[0].name, 2**30) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"tilescope: warning: cache {root}: ")
    assert err[0].endswith("not used, this analysis runs uncached (--cache-dir names another cache)")
    if make_untrusted is not _shard_is_a_link:
        assert sorted(str(p) for p in root.rglob("*")) == before  # nothing written, nothing removed


def test_links_inside_the_cache_are_not_followed(
    run2: Path, tmp_path: Path, uncached: RankRun, pristine: Path
) -> None:
    root = _copy(pristine, tmp_path)
    linked_file, linked_dir = _entries(root)
    # a valid unit.json, but reached through a link; a whole entry that is a link to a valid copy
    copy = tmp_path / "copy.json"
    shutil.copy(linked_file / "unit.json", copy)
    (linked_file / "unit.json").unlink()
    (linked_file / "unit.json").symlink_to(copy)
    shutil.copytree(linked_dir, tmp_path / "entry-copy")
    shutil.rmtree(linked_dir)
    linked_dir.symlink_to(tmp_path / "entry-copy")
    again = _analyze(run2, RankCache(root))
    assert again.cached == 0
    assert again.parts == uncached.parts
    # both written again as real files, and read back next time
    assert not any(p.is_symlink() for p in root.rglob("*"))
    assert copy.is_file() and (tmp_path / "entry-copy" / "unit.json").is_file()  # never touched
    assert all(RankCache(root).get(e.name, 2**20) is not None for e in (linked_file, linked_dir))


def _edit_steps(entry: Path, table: pa.Table) -> None:
    """Replace rank's steps table and record its true checksum (a forger who knows the format)."""
    data = pa.BufferOutputStream()
    pq.write_table(table, data)
    raw = data.getvalue().to_pybytes()
    (entry / "0-steps.parquet").write_bytes(raw)
    meta = _unsealed(entry / "unit.json")
    meta["parts"][0]["sha256"]["steps"] = rank_cache_trust.sha256(raw)
    _reseal(entry / "unit.json", meta)


def _steps(entry: Path) -> pa.Table:
    return pq.read_table(entry / "0-steps.parquet")


def _forge(kind: str, entry: Path) -> None:
    meta_path = entry / "unit.json"
    meta = _unsealed(meta_path)
    if kind == "unit.json is []":
        meta_path.write_bytes(b"[]")
    elif kind == "parts of the wrong shape":
        meta["parts"] = [1, 2]
        _reseal(meta_path, meta)
    elif kind == "rank as text":
        meta["parts"][0]["rank"] = "1"
        _reseal(meta_path, meta)
    elif kind == "negative rank":
        meta["parts"][0]["rank"] = -1
        _reseal(meta_path, meta)
    elif kind == "edited without the checksum":
        text = meta_path.read_bytes().replace(b'"rank":', b'"rank": ', 1)
        meta_path.write_bytes(text)
    elif kind == "truncated":
        meta_path.write_bytes(meta_path.read_bytes()[:100])
    elif kind == "parquet bytes flipped":
        raw = bytearray((entry / "0-steps.parquet").read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        (entry / "0-steps.parquet").write_bytes(bytes(raw))
    elif kind == "a column of the wrong type":
        t = _steps(entry)
        i = t.schema.get_field_index("step_us")
        _edit_steps(entry, t.set_column(i, "step_us", pa.array(["x"] * len(t))))
    elif kind == "a column missing":
        _edit_steps(entry, _steps(entry).drop_columns(["step_us"]))
    elif kind == "an unknown column":
        t = _steps(entry)
        _edit_steps(entry, t.append_column("x", pa.array([1] * len(t))))
    elif kind == "a Parquet bomb":
        # 300,000 rows of one repeated step in a few KB: more than an input of a few KB could give
        t = _steps(entry)
        n = 300_000
        big = pa.table({f.name: pa.repeat(t.column(f.name)[0], n).cast(f.type) for f in t.schema})
        sink = pa.BufferOutputStream()
        pq.write_table(big, sink)
        raw = sink.getvalue().to_pybytes()
        assert len(raw) < 64 * 1024
        (entry / "0-steps.parquet").write_bytes(raw)
        meta["parts"][0]["sha256"]["steps"] = rank_cache_trust.sha256(raw)
        _reseal(meta_path, meta)
    else:
        raise AssertionError(kind)


FORGERIES = [
    "unit.json is []",
    "parts of the wrong shape",
    "rank as text",
    "negative rank",
    "edited without the checksum",
    "truncated",
    "parquet bytes flipped",
    "a column of the wrong type",
    "a column missing",
    "an unknown column",
    "a Parquet bomb",
]


@pytest.mark.parametrize("kind", FORGERIES)
def test_a_damaged_or_forged_entry_is_never_read(pristine: Path, tmp_path: Path, kind: str) -> None:
    root = _copy(pristine, tmp_path)
    entry = next(e for e in _entries(root) if (e / "0-steps.parquet").exists())
    cache = RankCache(root)
    assert cache.get(entry.name, 2**20) is not None
    _forge(kind, entry)
    assert cache.get(entry.name, 2**20) is None
    assert not entry.exists()  # removed, so that the analysis that recomputes it writes it again
    assert not list(entry.parent.glob(".tmp-*"))


def test_a_forged_entry_is_recomputed_and_rewritten(
    run2: Path, tmp_path: Path, uncached: RankRun, pristine: Path
) -> None:
    root = _copy(pristine, tmp_path)
    entry = next(e for e in _entries(root) if (e / "0-steps.parquet").exists())
    _forge("a column missing", entry)  # a rank step time 0.0 and source "nan" before
    again = _analyze(run2, RankCache(root))
    assert again.cached == 1
    assert again.parts == uncached.parts
    for name in ("steps", "comm_ops", "links", "kernels"):
        a, b = getattr(again.cluster, name), getattr(uncached.cluster, name)
        assert a.astype(str).equals(b.astype(str)), name
    assert RankCache(root).get(entry.name, 2**20) is not None  # written again, valid


def test_an_entry_larger_than_its_input_allows_is_not_read(pristine: Path, tmp_path: Path) -> None:
    root = _copy(pristine, tmp_path)
    entry = _entries(root)[0]
    size = (entry / "unit.json").stat().st_size
    cache = RankCache(root)
    assert cache.get(entry.name, input_bytes=size) is not None
    with (entry / "unit.json").open("ab") as f:  # past what an input of 0 bytes allows: not read
        f.truncate(Limits(0).json_bytes + 1)
    assert cache.get(entry.name, input_bytes=0) is None
    assert not entry.exists()


def _job(det: Any) -> UnitJob:
    return UnitJob(0, det, None, None, Config(), kernel_columns_read(), 0)


def test_the_key_sees_files_behind_links_and_restored_times(run2: Path, tmp_path: Path) -> None:
    det = detect(run2)[1]
    cache = RankCache(tmp_path / "cache")
    key = cache.key(_job(det))
    table = det.path / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    assert (det.path / "ASCEND_PROFILER_OUTPUT").is_symlink()
    assert any(str(table) == row[0] for row in input_rows(det))
    st = table.stat()
    text = table.read_bytes()
    # the same size, the modification time put back (`touch -r`): the change time moves
    table.write_bytes(text.replace(b"1", b"2", 1))
    os.utime(table, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert table.stat().st_size == st.st_size
    assert cache.key(_job(det)) != key
    table.write_bytes(text)
    # a link loop inside the rank is walked once
    loop = det.path / "loop"
    loop.symlink_to(det.path)
    try:
        rows = input_rows(det)
        assert len(rows) == len({r[0] for r in rows})
    finally:
        loop.unlink()


def test_a_forged_stored_report_is_not_served(
    run2: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    args = ["analyze", str(run2), "--cache-dir", str(cache), "-f", "json"]

    def report() -> tuple[int, dict[str, Any]]:
        code = main(args)
        out = json.loads(capsys.readouterr().out)
        out.pop("generated_at")
        return code, out

    first = report()
    assert first[1]["findings"]
    run_json = next(cache.glob("??/*/run.json"))
    forged = json.loads(run_json.read_bytes())
    forged["report"]["findings"] = []
    run_json.write_bytes(json.dumps(forged).encode())  # its checksum now wrong
    assert report() == first
    forged = _unsealed(run_json)
    forged["report"] = []  # resealed, but not a report
    _reseal(run_json, forged)
    assert report() == first
    assert report() == first  # the rewritten entry
    assert _unsealed(run_json)["report"]
