"""Run one of tilescope's modules in a Python that may not have tilescope installed:

    python /path/to/tilescope/run_module.py tilescope.collectors.worker JOB.json

Every child process tilescope starts with another interpreter goes through this file: the worker
that lowers tilelang-ascend kernels (its own venv, or an emulated arm64 root that sees the host
folders it reads under /host), the NPU's Python that `collect` runs kernels with, the launcher
`msprof op` profiles.
A PYTHONPATH entry cannot make `tilescope` importable from a checkout, whose folders are not one
`tilescope/` folder (analyzer/ is the package; rules/, dashboard/ and collectors/ are mapped under
it by pyproject.toml), so this file maps the names to the folders first — found from its own place,
which also holds in an installed wheel — and then runs the module as `python -m` would. The child
thus runs the very code of the tilescope that started it, whatever else it has installed.

Standard library only, and nothing of tilescope is imported before the mapping is in place.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and sys.path and (
    os.path.realpath(sys.path[0]) == os.path.dirname(os.path.realpath(__file__))
):
    # A script's folder goes first on sys.path; this one's is the package itself, whose modules
    # (config, errors, profile, io …) would shadow the standard library's and the user's.
    del sys.path[0]

import importlib.abc
import importlib.machinery
import importlib.util
import runpy
from collections.abc import Callable, Sequence
from pathlib import Path

SUBPACKAGES = ("rules", "dashboard", "collectors")


def package_folders(here: Path | None = None) -> dict[str, str]:
    """tilescope's packages and their folders: subfolders of the package once installed, the
    package's siblings in a checkout."""
    pkg = (here or Path(__file__).resolve().parent)
    found = {"tilescope": str(pkg)}
    for name in SUBPACKAGES:
        inside = pkg / name
        found[f"tilescope.{name}"] = str(inside if (inside / "__init__.py").is_file() else pkg.parent / name)
    return found


class _Folders(importlib.abc.MetaPathFinder):
    """Finds the mapped packages in their folders; their modules are then found the usual way."""

    def __init__(self, folders: dict[str, str]) -> None:
        self.folders = folders

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        folder = self.folders.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, str(Path(folder) / "__init__.py"), submodule_search_locations=[folder]
        )


def command(python: Sequence[str], module: str, where: Callable[[str], str] = str) -> list[str]:
    """The argv that runs `module` with the interpreter `python`; `where` turns a host path into
    the path the child sees (the emulated root binds the folders it reads under /host)."""
    return [*python, where(str(Path(__file__).resolve())), module]


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python run_module.py tilescope.MODULE [ARG ...]")
    # first: the child must run this tilescope, not another one installed in its environment
    sys.meta_path.insert(0, _Folders(package_folders()))
    module = sys.argv[1]
    sys.argv = [sys.argv[0], *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
