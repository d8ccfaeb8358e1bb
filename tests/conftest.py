"""Shared fixtures: the repository root, the real profiler traces (skipped when absent) and the
sample generator."""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from support import REAL_TRACES, REPO_ROOT
from support.lowering import share_lowerings

# `analyze` on a multi-rank run caches per-rank summaries (analyzer/rank_cache.py): the tests, and
# the commands they run in subprocesses, keep theirs in a directory of their own, removed at exit
_CACHE = tempfile.mkdtemp(prefix="tilescope-test-cache-")
os.environ["TILESCOPE_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)


@pytest.fixture
def sigint_handled() -> Iterator[None]:
    """SIGINT handled in this process for the test, as from a terminal: a suite started from a
    background job (`cmd &`) has it ignored, so Ctrl-C (`_thread.interrupt_main`) would do nothing
    and the children would inherit the ignored SIGINT that run_command's kill sends first (each
    waited KILL_GRACE_S for nothing). A Python handler is reset to the default in a child on exec."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def real_traces() -> Path:
    """../shared/traces/real (read-only third-party data; never copied into the repo)."""
    if not (REAL_TRACES / "fa_pipeutil_29" / "kernel_details.csv").is_file():
        pytest.skip(f"real traces not available at {REAL_TRACES}")
    return REAL_TRACES


@pytest.fixture(scope="session")
def sample_generator() -> ModuleType:
    """sample_traces/generate.py, the generator's entry point with its re-exported names.
    sample_traces/ is not an installed package: its folder goes on sys.path, as the script itself
    does for its `generator` package."""
    folder = str(REPO_ROOT / "sample_traces")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module("generate")


# The quick loop (`bash scripts/test.sh -m "not slow"`, docs/internals.md "Tests") leaves out what
# takes seconds per test: a real browser, lowering kernels with TileLang, the end-to-end runs (act,
# the fuzz budget, regenerating a bundle) and the house checks (mypy over the package, a wheel build).
SLOW_FOLDERS = frozenset({"browser", "e2e", "house", "npu"})
SLOW_MARKERS = frozenset({"browser", "tilelang"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow_files: set[Path] = set()
    for item in items:
        folder = Path(str(item.fspath)).parent.name
        if folder in SLOW_FOLDERS or any(item.get_closest_marker(m) for m in SLOW_MARKERS):
            item.add_marker(pytest.mark.slow)
            slow_files.add(item.path)
    # Under `-n N --dist loadfile` each worker takes whole files in this order (pytest_configure
    # below): the files with slow tests go first, the browser's (the longest, every dashboard view on
    # every input) before them all, so the end of the run is made of short files that fill both
    # workers instead of one long file running alone while the other worker idles (the run of
    # 2026-05 ended with the every-view file starting last, 3 of its 12 minutes on one worker).
    items[:] = sorted(items, key=lambda i: (i.path not in slow_files, i.path.parent.name != "browser"))


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist's load{file,scope} sorts files by their number of tests, most first, which put the
    # single-test every-view file last: keep the order above instead
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        _start_fork_server()  # in the processes that run tests, not in xdist's controller
        share_lowerings()


def _start_fork_server() -> None:
    """This process's fork server, started now with what both of tilescope's pools preload (the
    per-rank workers' modules, tilescope.rankwork_preload; TileLang, tilescope.ir.sweep_preload).
    A process has one fork server, preloaded by whichever pool starts it: a command starts one
    pool, but the suite runs both in each worker, and every `lint --sweep` after an `analyze` of
    ranks had each of its workers import TileLang itself (32 of the suite's CPU seconds, 8 workers)."""
    import multiprocessing
    import multiprocessing.forkserver

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return
    preload = ["tilescope.rankwork_preload"]
    if importlib.util.find_spec("tilelang") is not None:
        preload.append("tilescope.ir.sweep_preload")
    multiprocessing.get_context("forkserver").set_forkserver_preload(preload)
    multiprocessing.forkserver.ensure_running()
