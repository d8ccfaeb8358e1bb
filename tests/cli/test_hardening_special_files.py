"""A FIFO, a link to a device, or a link loop where a profile is expected (issue #27: "a FIFO or a
link to /dev/zero inside a rank folder"). Given as the path itself they were a NotADirectoryError
traceback (exit 1, the "gate tripped" code; reading one would block for ever or never end); now
one line, exit 2. Beside a real profile (../shared/traces/real/fa_pipeutil_29, copied) under the
names readers look for, they are not read: the result is the profile's own."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tilescope.cli import main

# Example: "generated_at": "2026-12-06T23:25:41+00:00" (the one field that differs between two runs)
_STAMP = re.compile(r'"generated_at": "[^"]*"')
COMMANDS = [["info"], ["kernels", "--format", "json"], ["analyze", "--format", "json", "--no-cache"]]


def _special(at: Path, kind: str) -> Path:
    if kind == "fifo":
        os.mkfifo(at)
    else:
        at.symlink_to("/dev/zero")
    return at


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_special_file_as_the_path_is_one_line(
    tmp_path: Path, kind: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = _special(tmp_path / "trace_view.json", kind)
    assert main([*command, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"tilescope: error: {path}: expected a file or a folder, found a FIFO, device or socket (not read)"
    ]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_special_files_beside_a_profile_are_not_read(
    real_traces: Path, tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain"
    shutil.copytree(real_traces / "fa_pipeutil_29", plain)
    odd = tmp_path / "odd"
    shutil.copytree(plain, odd)
    _special(odd / "trace_view.json", "fifo")
    _special(odd / "msprof_0.db", "link to /dev/zero")
    (odd / "loop").symlink_to(".")
    assert main([*command, str(plain)]) == 0
    expected = _STAMP.sub("", capsys.readouterr().out.replace(str(plain), "DIR"))
    assert main([*command, str(odd)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert _STAMP.sub("", captured.out.replace(str(odd), "DIR")) == expected
    if command[0] == "kernels":
        assert len(json.loads(expected)) == 29  # the real table's 29 launches
