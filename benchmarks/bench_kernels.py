"""Benchmark: parsing a large kernel_details.csv with `tilescope kernels` vs bare pandas.read_csv.

One run measures both on the same file, --repeat times, alternating:
  tilescope `tilescope kernels FILE` as a subprocess (start-up included), once per output form:
            the terminal table (the default; stdout to /dev/null), `--format csv -o OUT` and
            `--format parquet -o OUT`
  baseline  pandas.read_csv(FILE) in this process (C engine, default inference)
and prints each ratio (best against best, and run by run against the pandas read that follows it),
CPU times, the load average and the peak RSS of each.
The child's peak RSS is read from os.wait4 before this process has loaded the table: a child's
ru_maxrss starts at its parent's RSS at fork time, so forking after read_csv would report ~1.2 GB
for any child.
Targets (issue #2): ratio <= 2.0, peak RSS <= 2 GB.

    .venv/bin/python benchmarks/bench_kernels.py --rows 1000000 --dir bench-data
"""

from __future__ import annotations

import argparse
import importlib
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

REPO = Path(__file__).resolve().parent.parent


def _writer() -> Callable[..., None]:
    """The generator's large kernel_details writer (sample_traces/ is not an installed package:
    its folder goes on sys.path)."""
    sys.path.insert(0, str(REPO / "sample_traces"))
    return cast(Callable[..., None], importlib.import_module("generate").write_large_kernel_details)


def _run_child(cmd: list[str]) -> tuple[float, float, float]:
    """Wall s, CPU s and peak RSS MiB of one subprocess, from its own rusage (os.wait4)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"tilescope kernels failed with exit code {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _read_csv_in_process(path: Path) -> tuple[float, float]:
    import pandas as pd

    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    df = pd.read_csv(path)
    wall = time.perf_counter() - t
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    del df
    return wall, (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=REPO / "bench-data")
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs of each side")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    csv_path = args.dir / f"kernel_details_{args.rows}.csv"
    if not csv_path.exists():
        t = time.perf_counter()
        _writer()(csv_path, args.rows)
        print(f"wrote {csv_path} ({csv_path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s")
    exe = str(REPO / ".venv" / "bin" / "tilescope")
    forms = {
        "table": [exe, "kernels", str(csv_path)],
        "csv": [exe, "kernels", str(csv_path), "--format", "csv", "-o", str(args.dir / "kernels.csv")],
        "parquet": [exe, "kernels", str(csv_path), "--format", "parquet", "-o", str(args.dir / "k.parquet")],
    }
    ours: dict[str, list[tuple[float, float, float]]] = {f: [] for f in forms}  # wall, CPU, peak RSS MiB
    base: list[tuple[float, float]] = []
    loads = [os.getloadavg()[0]]
    for _ in range(args.repeat):
        # every child forks before this process has read the table (see the module docstring)
        for form, cmd in forms.items():
            ours[form].append(_run_child(cmd))
        base.append(_read_csv_in_process(csv_path))
        loads.append(os.getloadavg()[0])
    import pandas as pd

    rows = len(pd.read_csv(csv_path, usecols=[0]))
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"rows                      {rows:,}")
    print(f"load average (1 min)      {', '.join(f'{x:.1f}' for x in loads)}")
    for i, (bw, bc) in enumerate(base):
        line = ", ".join(f"{f} {ours[f][i][0]:.2f} s ({ours[f][i][1]:.2f} s CPU)" for f in forms)
        print(f"run {i + 1}: pandas {bw:.2f} s ({bc:.2f} s CPU); tilescope {line}")
    bw, bc = min(b[0] for b in base), min(b[1] for b in base)
    print(f"pandas.read_csv           best {bw:.2f} s wall, {bc:.2f} s CPU (peak RSS {base_rss:,.0f} MiB)")
    for form in forms:
        w, c = min(o[0] for o in ours[form]), min(o[1] for o in ours[form])
        rss = ours[form][0][2]  # the first run forks before this process read the table
        # each run against the pandas read right after it: the spread a single comparison can show
        paired = sorted(o[0] / b[0] for o, b in zip(ours[form], base, strict=True))
        print(
            f"tilescope kernels {form:<8}best {w:.2f} s wall, {c:.2f} s CPU (peak RSS {rss:,.0f} MiB): "
            f"ratio {w / bw:.2f}x wall, {c / bc:.2f}x CPU (target <= 2.0); run by run "
            f"{paired[0]:.2f}-{paired[-1]:.2f}x, median {statistics.median(paired):.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
