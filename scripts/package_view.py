"""Lay out the checkout as the installed package looks, for the tools that read source files by
folder rather than import them: `build/view/tilescope/…`, real folders holding a relative link to
each file of analyzer/, rules/, dashboard/ and collectors/.

mypy and import-linter derive a module's name from its folder, and the checkout's folders are not
named after the package (pyproject.toml maps analyzer/ to `tilescope`, rules/ to `tilescope.rules` …;
the editable install's import hook does the same at run time, which neither tool follows). The view
is rebuilt whole on every call (a few milliseconds), so files added or removed since are seen.

    python scripts/package_view.py            # prints the folder to put on MYPYPATH / PYTHONPATH
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VIEW = REPO / "build" / "view"
SKIP = ("__pycache__",)


def _folders() -> dict[str, Path]:
    # the one place that knows which folder holds which package (standard library only), loaded by
    # its path: the package's folder on sys.path would shadow the standard library's `io`, `profile`
    spec = importlib.util.spec_from_file_location("run_module", REPO / "analyzer" / "run_module.py")
    assert spec is not None and spec.loader is not None
    run_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_module)
    return {name: Path(folder) for name, folder in run_module.package_folders(REPO / "analyzer").items()}


def build(view: Path = VIEW) -> Path:
    """(Re)build the view; returns the folder that holds `tilescope/`."""
    if view.exists():
        shutil.rmtree(view)
    for name, folder in _folders().items():
        target = view.joinpath(*name.split("."))
        for src_dir, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if d not in SKIP and not d.startswith(".")]
            rel = Path(src_dir).relative_to(folder)
            out = target / rel
            out.mkdir(parents=True, exist_ok=True)
            for f in files:
                if f.endswith((".pyc", ".pyo")):
                    continue
                (out / f).symlink_to(os.path.relpath(Path(src_dir) / f, out))
    return view


if __name__ == "__main__":
    print(build())
