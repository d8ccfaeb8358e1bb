"""How a benchmark runs another checkout's code (a before/after in the same run).

A checkout of the `tilescope` layout (issue #23: analyzer/ is the package `tilescope`, rules/ and
the others are mapped under it) is not importable from its root on PYTHONPATH; its link view is
(`scripts/package_view.py`, rebuilt here). A checkout from before that layout is imported from its
root as `analyzer.…`. Either way the child runs with `-P`, so the working directory is not put
ahead of PYTHONPATH, and the editable install of this repository (an import hook, consulted after
PYTHONPATH) is only reached when the checkout lacks a module.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def is_namespaced(code: Path) -> bool:
    return (code / "analyzer" / "run_module.py").is_file()


def package(code: Path) -> str:
    """The name the checkout's core imports as: `tilescope`, or `analyzer` before #23."""
    return "tilescope" if is_namespaced(code) else "analyzer"


def pythonpath(code: Path) -> str:
    if not is_namespaced(code):
        return str(code)
    view = subprocess.run([sys.executable, str(code / "scripts" / "package_view.py")], check=True,
                          capture_output=True, text=True).stdout.strip()
    return view


def env(code: Path) -> dict[str, str]:
    """The environment whose PYTHONPATH makes `code`'s package the one imported."""
    return {**os.environ, "PYTHONPATH": pythonpath(code)}


def cli(code: Path) -> list[str]:
    """argv that runs the checkout's CLI (with `env(code)`)."""
    return [sys.executable, "-P", "-m", f"{package(code)}.cli"]


def source(code: Path, snippet: str) -> str:
    """A `-c` snippet written against `tilescope.…` names, for the checkout's package name."""
    return snippet.replace("tilescope.", f"{package(code)}.")
