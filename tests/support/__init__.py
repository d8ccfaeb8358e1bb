"""What the tests share: where things are, and one way to run the CLI.

`tests/` is on sys.path (pytest puts the folder of the root conftest.py there), so every test
module, in whichever folder, imports this as `support`; the helpers that build inputs live beside
it (`support.report_data`, `support.synthetic`, `support.profiles`, `support.dash_calls`,
`support.terminal`, `support.fake_python`), and the Chromium tests' pieces (`support.browser`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent.parent
REPO_ROOT = TESTS.parent
SAMPLES = REPO_ROOT / "sample_traces"
# read-only data of other projects beside the repository (never copied into it)
REAL_TRACES = REPO_ROOT.parent / "shared" / "traces" / "real"
REAL_KERNELS = REPO_ROOT.parent / "shared" / "kernels" / "real"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`tilescope ARGS` in this process: exit code, stdout, stderr."""
    from tilescope.cli import main

    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def cli_process(*args: str | Path, env: dict[str, str] | None = None, timeout: float = 120,
                **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """`tilescope ARGS` as a process of its own, from the repository root, text output."""
    return subprocess.run(
        [sys.executable, "-m", "tilescope.cli", *map(str, args)], capture_output=True, text=True,
        cwd=REPO_ROOT, env=env if env is not None else dict(os.environ), timeout=timeout, check=False,
        **kwargs,
    )


def only_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one non-blank line the command wrote to stderr, asserting there was no traceback and
    no second line (the contract for a failure: one line and the exit code)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    return lines[0]
