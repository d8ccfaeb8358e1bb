"""Ranks at a URL (analyzer/io/remote.py, issue #27 "URLs and Dask"): only the protocols of shared
storage are read, every other one is one line and exit 2 before fsspec is asked; whatever a
filesystem raises is one line; a rank folder holding a FIFO or a link to a device is left out with
one line instead of blocking or filling the disk."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tilescope.cli import main

ALLOWED = "a run of ranks is read from file:///path, s3://, gs://, az:// or abfs://, hdfs:// URLs"


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("zip://kernel.csv::file:///tmp/run.zip", "protocol 'zip' is not read"),
        ("tar://run", "protocol 'tar' is not read"),
        ("github://owner:repo@/run", "protocol 'github' is not read"),
        ("gist://1234", "protocol 'gist' is not read"),
        ("jupyter://host/run", "protocol 'jupyter' is not read"),
        ("dbfs://run", "protocol 'dbfs' is not read"),
        ("data://text", "protocol 'data' is not read"),
        ("ftp://10.255.255.1/run", "protocol 'ftp' is not read"),  # a silent host: waited 30 s before
        ("webhdfs://10.255.255.1/run", "protocol 'webhdfs' is not read"),  # sent HTTP requests to it
        ("s3://bucket/run::zip://x", "protocol 'zip' is not read"),  # every link of a chain
    ],
)
def test_protocols_outside_the_allow_list_are_one_line(
    url: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", url, "--no-cache"]) == 2
    assert capsys.readouterr().err.strip() == f"tilescope: error: {url}: {said}; {ALLOWED}"


@pytest.mark.parametrize("url", ["file://", "file://relative/run"])
def test_a_file_url_must_name_an_absolute_path(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", url, "--no-cache"]) == 2  # `file://` alone was the current directory
    assert (
        capsys.readouterr().err.strip()
        == f"tilescope: error: {url}: expected file:///absolute/path (three slashes)"
    )


def test_any_filesystem_error_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fsspec.implementations.local import LocalFileSystem

    def broken(self: Any, path: str, detail: bool = False, **kwargs: Any) -> Any:
        raise RuntimeError("connection reset by peer\nsecond line")

    monkeypatch.setattr(LocalFileSystem, "ls", broken)
    url = f"file://{tmp_path}"
    assert main(["analyze", url, "--no-cache"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"tilescope: error: {url}: cannot list it (RuntimeError: connection reset by peer)"
    )



@pytest.mark.parametrize("special", ["fifo", "link to /dev/zero"])
def test_a_rank_folder_with_a_special_file_is_left_out_not_copied(
    run2: Path, tmp_path: Path, special: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run2, run)
    rank = sorted(p for p in run.iterdir() if p.is_dir())[1]
    odd = rank / "ASCEND_PROFILER_OUTPUT" / "odd"
    if special == "fifo":
        os.mkfifo(odd)  # the copy blocked on it for ever
    else:
        odd.symlink_to("/dev/zero")  # the copy filled the disk
    url = f"file://{run}"
    assert main(["analyze", url, "--no-cache", "-j", "1", "-f", "json"]) == 2  # partial: one rank left out
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert len(report["cluster"]["ranks"]) == 2
    warnings = [line for line in captured.err.splitlines() if line.startswith("tilescope: warning:")]
    assert len(warnings) == 1, captured.err
    assert f"{odd}: expected files and folders, found a FIFO, device or socket (not copied)" in warnings[0]


def test_a_folder_without_profile_files_is_left_out_before_any_copy(
    run2: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from tilescope.io import remote

    run = tmp_path / "run"
    shutil.copytree(run2, run)
    junk = run / "zz_docs"  # a sibling of the ranks with nothing tilescope reads (as /usr/share/*)
    junk.mkdir()
    (junk / "README.txt").write_text("not a profile\n")
    copied: list[str] = []
    real_check = remote._check_before_copy

    def watched(url: str, *args: Any) -> list[str]:
        files = real_check(url, *args)
        copied.append(url)  # reached only when the copy goes ahead
        return files

    monkeypatch.setattr(remote, "_check_before_copy", watched)
    url = f"file://{run}"
    assert main(["analyze", url, "--no-cache", "-j", "1", "-f", "json"]) == 2
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)["cluster"]["ranks"]) == 3
    assert captured.err.strip().splitlines() == [
        f"tilescope: warning: {url}/zz_docs: no Ascend profile found (1 file(s), none .csv, .json or .db; "
        "nothing copied) — zz_docs left out",
        f"tilescope: error: partial input: 1 of 3 profiles could not be read ({url}/zz_docs); "
        "the output covers the other 2",
    ]
    assert sorted(u.rsplit("/", 1)[-1] for u in copied) == sorted(
        p.name for p in run2.iterdir() if p.is_dir()
    )


def test_a_rank_larger_than_the_free_disk_is_not_copied(
    run2: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tilescope.io import remote

    monkeypatch.setattr(remote, "_free_bytes", lambda folder: 1000)
    url = f"file://{run2}"
    assert main(["analyze", url, "--no-cache", "-j", "1", "-f", "json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"tilescope: error: {url}/"), err
    assert "bytes to copy, more than the 1,000 free where ranks are staged" in err[0]
    assert err[0].endswith("TMPDIR); nothing copied")
