"""Where an `msprof op` output keeps its files: the per-block metric CSVs and OpBasicInfo of each
launch directory, and the core folders of an `msprof op simulator` run, found by name only (no file
is read).

Detection (`tilescope.io.detect`) asks these questions of every folder it sniffs, before any table is
parsed; they live apart from the reader (`tilescope.io.msprof_op`, which imports pandas) so that
detecting a path does not import pandas: `tilescope analyze` detects a path before it starts reading
its timeline, and the reading overlaps pandas' import (analyzer/io/prefetch.py).
"""

from __future__ import annotations

import re
from pathlib import Path

METRIC_FILES = (
    "PipeUtilization",
    "Memory",
    "MemoryL0",
    "MemoryUB",
    "ResourceConflictRatio",
    "L2Cache",
    "ArithmeticUtilization",
)
# Example: "L2Cache_20240603022812284.csv" -> metric "L2Cache"; "OpBasicInfo.csv" -> "OpBasicInfo"
METRIC_FILE_RE = re.compile(r"^(?P<metric>[A-Za-z0-9]+?)(?:_\d{8,20})?\.csv$")
# Example: "device3" -> 3
DEVICE_DIR_RE = re.compile(r"^device_?(?P<n>\d{1,3})$")
# Example: "core3.veccore0", "core0.cubecore0": one simulated core of `msprof op simulator` output
CORE_DIR_RE = re.compile(r"^core\d+\.(?:veccore|cubecore)\d+$")


def metric_files(launch_dir: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for p in sorted(launch_dir.iterdir()):
        m = METRIC_FILE_RE.match(p.name)
        if p.is_file() and m and (m.group("metric") in METRIC_FILES or m.group("metric") == "OpBasicInfo"):
            found.setdefault(m.group("metric"), p)
    return found


def find_launch_dirs(root: Path) -> list[tuple[Path, int | None, str | None, int]]:
    """(dir, device, op name, launch index) for every directory holding an OpBasicInfo file. A
    folder holding several `OPPROF_*` runs (msprof op run again and again into one --output, oldest
    first by their timestamped names) is one profile: its runs' launches follow each other."""
    if "OpBasicInfo" in metric_files(root):
        return [(root, None, None, 0)]
    runs = [] if root.name.startswith("OPPROF_") else opprof_runs(root)
    if runs:
        out: list[tuple[Path, int | None, str | None, int]] = []
        after: dict[tuple[int | None, str | None], int] = {}  # the next launch index per operator
        for run in runs:
            found = find_launch_dirs(run)
            start = dict(after)
            for launch_dir, device, op, launch in found:
                index = start.get((device, op), 0) + launch
                out.append((launch_dir, device, op, index))
                after[(device, op)] = max(after.get((device, op), 0), index + 1)
        return out
    return _launch_dirs_below(root)


def opprof_runs(folder: Path) -> list[Path]:
    """The `OPPROF_*` run folders directly in `folder`, oldest first (their names start with the
    run's timestamp)."""
    try:
        return sorted(p for p in folder.iterdir() if p.name.startswith("OPPROF_") and p.is_dir())
    except OSError:
        return []


def _launch_dirs_below(root: Path) -> list[tuple[Path, int | None, str | None, int]]:
    out: list[tuple[Path, int | None, str | None, int]] = []
    for basic in sorted(root.rglob("OpBasicInfo*.csv")):
        launch_dir = basic.parent
        rel = launch_dir.relative_to(root).parts
        if "dump" in rel or "simulator" in rel:
            continue
        device: int | None = None
        if rel and (m := DEVICE_DIR_RE.match(rel[0])):
            device, rel = int(m.group("n")), rel[1:]
        op_name = rel[0] if len(rel) >= 2 else (rel[0] if rel else None)
        launch = int(rel[-1]) if rel and rel[-1].isdigit() else 0
        out.append((launch_dir, device, op_name, launch))
    return out


def is_msprof_op_dir(path: Path) -> bool:
    if not path.is_dir():
        return False
    if "OpBasicInfo" in metric_files(path):
        return True
    return path.name.startswith("OPPROF_") and bool(find_launch_dirs(path))


def has_block_metrics(path: Path) -> bool:
    """Does `path` hold per-block metric CSVs (PipeUtilization.csv, Memory_{ts}.csv, ...)? With
    them an OpBasicInfo folder is an `msprof op` output; without, OpBasicInfo may sit beside other
    profiler files as a clock source (detection)."""
    return any(metric in METRIC_FILES for metric in metric_files(path))


def simulator_core_dirs(folder: Path) -> list[Path]:
    """The core folders (`core0.veccore0/`, ...) directly in `folder`: it is a simulator/ folder."""
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir() and CORE_DIR_RE.match(p.name))
    except OSError:
        return []


def find_simulator(path: Path) -> Path | None:
    """The `simulator/` folder at or below `path` (a bundle, an OPPROF_* folder, the folder
    itself), or None."""
    if path.is_dir() and simulator_core_dirs(path):
        return path
    for candidate in sorted(path.rglob("simulator")) if path.is_dir() else []:
        if candidate.is_dir() and simulator_core_dirs(candidate):
            return candidate
    return None


def simulator_holding(path: Path) -> Path | None:
    """The simulator/ folder that `path` is part of: one of its core folders, or a file in it or in
    a core folder (its per-core or summary `trace.json`); None otherwise."""
    folder = path if path.is_dir() else path.parent
    if CORE_DIR_RE.match(folder.name):
        folder = folder.parent
    return folder if folder != path and simulator_core_dirs(folder) else None
