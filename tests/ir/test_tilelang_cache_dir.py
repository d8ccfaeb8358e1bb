"""TileLang makes its cache's folders when it is imported, even with the cache off: `lint` left an
empty /tmp/tilescope-tl-<pid> tree behind on every run (88 of them on this machine). The folder is
now the process's own scratch (tilescope.scratch.process_dir): removed when `lint` exits, and one a
killed run left is removed by the next."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO_ROOT


@pytest.mark.tilelang
@pytest.mark.slow  # one `lint` in a fresh interpreter: importing TileLang is ~4 s
def test_lint_leaves_no_tilelang_folder_and_sweeps_a_killed_runs(tmp_path: Path) -> None:
    pytest.importorskip("tilelang")
    dead = tmp_path / "tilescope-tl-999999999-x1y2z3"  # a pid no process has: a run killed with -9
    (dead / "0.1.15" / "linux-x86_64" / "kernels").mkdir(parents=True)
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("TILELANG_CACHE_DIR", None)
    done = subprocess.run(
        [sys.executable, "-m", "tilescope.cli", "lint", "sample_traces/kernels/matmul.py:matmul"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )
    assert done.returncode in (0, 1), done.stderr  # 1: a finding at or above the gate
    assert "TS" in done.stdout or "no findings" in done.stdout.lower(), done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == []
