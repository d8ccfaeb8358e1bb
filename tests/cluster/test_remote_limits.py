"""A deadline on every remote listing and read, and a per-rank cap on the bytes a URL copies
(analyzer/io/remote.py, issue #27 "URLs and Dask"; docs/reliability.md §10).

No filesystem of the allow-list can be pointed at a local host here without packages the project
does not install (s3fs, gcsfs, adlfs; hdfs needs a JVM's libhdfs), so the deadline is tested
through fsspec itself with a filesystem class this test registers for `s3://`: it lists and reads a
generated run folder, and where a test says so its listing or its reads wait on a real TCP socket,
served by the test, that accepts and never answers — a silent host. The byte cap is tested on a
`file://` URL of a generated run."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tilescope.cli import main
from tilescope.errors import UsageError
from tilescope.io.remote import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT_S, RemoteLimits, remote_limits

from support.tcp import accepting_host


@pytest.fixture(scope="module")
def run2(tmp_path_factory: pytest.TempPathFactory, sample_generator: Any) -> Path:
    """A generated 2-rank run (sample_traces' cluster generator, documented formats)."""
    from generator.cluster import ClusterSpec, write_cluster_run

    out = tmp_path_factory.mktemp("store") / "bucket" / "run"
    out.mkdir(parents=True)
    write_cluster_run(out, ClusterSpec(ranks=2, steps=2))
    return out


@pytest.fixture
def silent_host() -> Iterator[tuple[str, int]]:
    """127.0.0.1:PORT accepting every connection and never sending a byte; closed at the end (the
    calls left waiting on it then return)."""
    with accepting_host() as host:
        yield host


def _wait_on(host: tuple[str, int]) -> bytes:
    """What a filesystem client does with a silent host: send a request, wait for the answer."""
    with socket.create_connection(host) as conn:
        conn.sendall(b"GET /bucket/run HTTP/1.1\r\nHost: store\r\n\r\n")
        return conn.recv(1)  # never answered: blocks until the test's server closes


class _SilentFile:
    def __init__(self, host: tuple[str, int]) -> None:
        self.host = host

    def read(self, size: int = -1) -> bytes:
        return _wait_on(self.host)

    def close(self) -> None:
        pass


def _store(monkeypatch: pytest.MonkeyPatch, root: Path, host: tuple[str, int] | None = None,
           blocks: str = "", lie_sizes: bool = False) -> None:
    """Register, for this test only, an `s3://` filesystem whose bucket is the folder `root/..`:
    its listing (`blocks="ls"`) or its reads (`"read"`) wait on the silent `host`; `lie_sizes`
    lists every file as 0 bytes (as a store's listing may understate)."""
    from fsspec.implementations.local import LocalFileSystem
    from fsspec.registry import _registry
    from fsspec.spec import AbstractFileSystem

    base = root.parent.parent  # s3://bucket/run -> base/bucket/run
    local = LocalFileSystem()

    class Store(AbstractFileSystem):
        protocol = ("s3", "s3a")
        cachable = False

        def _entry(self, entry: dict[str, Any]) -> dict[str, Any]:
            name = str(Path(entry["name"]).relative_to(base))
            size = 0 if lie_sizes and entry["type"] == "file" else entry["size"]
            return {"name": name, "size": size, "type": entry["type"]}

        def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
            if blocks == "ls":
                assert host is not None
                _wait_on(host)
            entries = [self._entry(e) for e in local.ls(str(base / path), detail=True)]
            return entries if detail else [e["name"] for e in entries]

        def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
            return self._entry(local.info(str(base / path)))

        def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
            if blocks == "read":
                assert host is not None
                return _SilentFile(host)
            return open(base / path, "rb")  # closed by the copy

    monkeypatch.setitem(_registry, "s3", Store)


@pytest.fixture
def staging(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """TMPDIR of its own, to see what a stopped copy leaves behind."""
    folder = tmp_path / "staging"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _lines(capsys: pytest.CaptureFixture[str]) -> tuple[str, list[str]]:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return captured.out, [ln for ln in captured.err.splitlines() if ln.strip()]


def test_the_limits_are_read_from_the_environment_and_checked() -> None:
    assert remote_limits({}) == RemoteLimits(DEFAULT_TIMEOUT_S, DEFAULT_MAX_BYTES)
    assert RemoteLimits() == RemoteLimits(60.0, 32 * 2**30)
    env = {"TILESCOPE_URL_TIMEOUT": "2.5", "TILESCOPE_URL_MAX_BYTES": "64M"}
    assert remote_limits(env) == RemoteLimits(2.5, 64 * 2**20)
    assert remote_limits({"TILESCOPE_URL_MAX_BYTES": "3GiB"}).max_bytes == 3 * 2**30
    assert remote_limits({"TILESCOPE_URL_MAX_BYTES": "500000"}).max_bytes == 500_000
    for bad in ("0", "-1", "nan", "inf", "soon"):
        with pytest.raises(UsageError, match=r"^TILESCOPE_URL_TIMEOUT '.*': expected a number of seconds"):
            remote_limits({"TILESCOPE_URL_TIMEOUT": bad})
    assert remote_limits({"TILESCOPE_URL_MAX_BYTES": "1.5G"}).max_bytes == 3 * 2**29  # as the cache's size
    for bad in ("0", "12X", "-5", "lots"):
        with pytest.raises(UsageError, match=r"^TILESCOPE_URL_MAX_BYTES '.*': expected a number of bytes"):
            remote_limits({"TILESCOPE_URL_MAX_BYTES": bad})


def test_a_bad_variable_is_exit_2_before_anything_is_listed(
    run2: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILESCOPE_URL_TIMEOUT", "soon")
    assert main(["analyze", f"file://{run2}", "--no-cache"]) == 2
    assert _lines(capsys)[1] == [
        "tilescope: error: TILESCOPE_URL_TIMEOUT 'soon': expected a number of seconds > 0 (default 60)"
    ]


def test_a_silent_host_listing_ends_at_the_deadline(
    run2: Path, silent_host: tuple[str, int], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _store(monkeypatch, run2, silent_host, blocks="ls")
    monkeypatch.setenv("TILESCOPE_URL_TIMEOUT", "0.5")
    t0 = time.perf_counter()
    assert main(["analyze", "s3://bucket/run", "--no-cache"]) == 2
    took = time.perf_counter() - t0
    assert 0.5 <= took < 0.5 + 3, took
    assert _lines(capsys)[1] == [
        "tilescope: error: s3://bucket/run: cannot list it (no answer within 0.5 s; "
        "TILESCOPE_URL_TIMEOUT sets the deadline)"
    ]


def test_the_store_is_read_when_it_answers(
    run2: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same registered store without a silent host: the run is analysed, named by its URL, as
    its file:// URL is (so the deadline tests above and below exercise the real path)."""
    _store(monkeypatch, run2)
    assert main(["analyze", "s3://bucket/run", "--no-cache", "-j", "1", "-f", "json"]) == 0
    by_s3 = _lines(capsys)[0]
    assert main(["analyze", f"file://{run2}", "--no-cache", "-j", "1", "-f", "json"]) == 0
    by_file = _lines(capsys)[0]
    assert "s3://bucket/run/" in by_s3 and "tilescope-rank-" not in by_s3
    s3_cluster = json.loads(by_s3.replace("s3://bucket/run", str(run2)))["cluster"]
    assert len(s3_cluster["ranks"]) == 2
    assert s3_cluster == json.loads(by_file.replace(f"file://{run2}", str(run2)))["cluster"]


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_a_silent_host_read_leaves_the_rank_out_at_the_deadline_and_is_not_cached(
    run2: Path, silent_host: tuple[str, int], staging: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    _store(monkeypatch, run2, silent_host, blocks="read")
    monkeypatch.setenv("TILESCOPE_URL_TIMEOUT", "0.5")
    monkeypatch.setenv("TILESCOPE_CACHE_DIR", str(tmp_path / "cache"))
    t0 = time.perf_counter()
    assert main(["analyze", "s3://bucket/run", "-j", "1"]) == 2
    took = time.perf_counter() - t0
    assert took < 2 * 0.5 + 4, took  # one deadline per rank, each rank's first read
    rank0 = sorted(p.name for p in run2.iterdir() if p.is_dir())[0]
    assert _lines(capsys)[1] == [
        f"tilescope: error: s3://bucket/run/{rank0}: cannot read it (no answer within 0.5 s; "
        "TILESCOPE_URL_TIMEOUT sets the deadline)"
    ]
    assert list(staging.iterdir()) == []  # nothing half-copied left behind
    # the host answers again: the ranks are analysed now, not served as failed from the cache
    _store(monkeypatch, run2)
    assert main(["analyze", "s3://bucket/run", "-j", "1", "-f", "json"]) == 0
    assert len(json.loads(_lines(capsys)[0])["cluster"]["ranks"]) == 2


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_a_rank_over_the_byte_cap_is_left_out_before_a_byte_is_copied(
    run2: Path, staging: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = tmp_path / "run"
    shutil.copytree(run2, run)
    small, big = sorted(p for p in run.iterdir() if p.is_dir())
    (big / "ASCEND_PROFILER_OUTPUT" / "padding.txt").write_bytes(b"x" * 200_000)
    cap = _folder_bytes(small) + 1000
    assert _folder_bytes(big) > cap
    monkeypatch.setenv("TILESCOPE_URL_MAX_BYTES", str(cap))
    copied: list[str] = []
    from tilescope.io import remote

    real_copy = remote._copy

    def watched(url: str, *args: Any) -> None:
        copied.append(url)
        real_copy(url, *args)

    monkeypatch.setattr(remote, "_copy", watched)
    url = f"file://{run}"
    assert main(["analyze", url, "--no-cache", "-j", "1", "-f", "json"]) == 2  # partial
    out, err = _lines(capsys)
    assert len(json.loads(out)["cluster"]["ranks"]) == 2
    assert err == [
        f"tilescope: warning: {url}/{big.name}: more than the {cap:,} bytes a rank may copy "
        f"(TILESCOPE_URL_MAX_BYTES) in its files, {_folder_bytes(big):,} listed; nothing copied "
        f"— {big.name} left out",
        f"tilescope: error: partial input: 1 of 2 profiles could not be read ({url}/{big.name}); "
        "the output covers the other 1",
    ]
    assert copied == [f"{url}/{small.name}"]
    assert list(staging.iterdir()) == []


def test_a_listing_that_understates_is_stopped_at_the_cap_while_copying(
    run2: Path, staging: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _store(monkeypatch, run2, lie_sizes=True)  # every file listed as 0 bytes
    monkeypatch.setenv("TILESCOPE_URL_MAX_BYTES", "4K")
    assert main(["analyze", "s3://bucket/run", "--no-cache", "-j", "1"]) == 2
    rank0 = sorted(p.name for p in run2.iterdir() if p.is_dir())[0]
    assert _lines(capsys)[1] == [
        f"tilescope: error: s3://bucket/run/{rank0}: more than the 4,096 bytes a rank may copy "
        "(TILESCOPE_URL_MAX_BYTES) while copying; nothing kept"
    ]
    assert list(staging.iterdir()) == []
