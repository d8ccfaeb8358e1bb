"""Benchmark: parsing a large kernel_details.csv with `tilescope kernels` vs bare pandas.read_csv.

One run measures both on the same file, --repeat times, alternating:
  tilescope `tilescope kernels PATH` as a subprocess (start-up included), once per output form:
            the terminal table (the default; stdout to /dev/null), `--format csv -o OUT` and
            `--format parquet -o OUT`; PATH is the file itself and, with `--paths file,dir`, the
            torch_npu folder `*_ascend_pt/ASCEND_PROFILER_OUTPUT/` holding it (a hard link of the
            same file): the way users call it, which must take the same streaming path
  baseline  pandas.read_csv(FILE) in this process (C engine, default inference)
and prints each ratio (best against best, and run by run against the pandas read that follows it),
CPU times, the load average and the peak RSS of each.
With `--code NAME=DIR` (repeatable) each form runs once per checkout, with DIR on PYTHONPATH (e.g.
`--code before=/work/main --code after=.`), alternating, so a change is measured against the code
before it in the same run on the same (shared) machine.
The child's peak RSS is read from os.wait4 before this process has loaded the table: a child's
ru_maxrss starts at its parent's RSS at fork time, so forking after read_csv would report ~1.2 GB
for any child.
Targets (issue #2): ratio <= 2.0, peak RSS <= 2 GB. Issue #13: `kernels DIR` as fast and as small
as `kernels FILE`.

    .venv/bin/python benchmarks/bench_kernels.py --rows 1000000 --dir bench-data
    .venv/bin/python benchmarks/bench_kernels.py --rows 1000000 --dir /tmp/bench --paths file,dir \\
        --forms table,parquet --code before=/work/main --code after=.
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

import checkout  # benchmarks/checkout.py: how another checkout's code is run

REPO = Path(__file__).resolve().parent.parent
FORMS = ("table", "csv", "parquet")


def _writer() -> Callable[..., None]:
    """The generator's large kernel_details writer (sample_traces/ is not an installed package:
    its folder goes on sys.path)."""
    sys.path.insert(0, str(REPO / "sample_traces"))
    return cast(Callable[..., None], importlib.import_module("generate").write_large_kernel_details)


def _run_child(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Wall s, CPU s and peak RSS MiB of one subprocess, from its own rusage (os.wait4)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {proc.returncode}")
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


def _torch_folder(csv_path: Path) -> Path:
    """A `*_ascend_pt` folder whose kernel table is `csv_path` (hard-linked: no second copy)."""
    root = csv_path.parent / f"{csv_path.stem}_ascend_pt"
    kd = root / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    if not kd.exists():
        kd.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(csv_path, kd)
        except OSError:
            import shutil

            shutil.copyfile(csv_path, kd)
    return root


def _codes(specs: list[str]) -> dict[str, Path]:
    """`NAME=DIR` pairs; without any, this checkout alone."""
    out: dict[str, Path] = {}
    for spec in specs or [f"this={REPO}"]:
        name, _, where = spec.partition("=")
        if not where:
            raise SystemExit(f"--code takes NAME=DIR, not {spec!r}")
        out[name] = Path(where).resolve()
    return out


def _command(code: Path, path: Path, form: str, out_dir: Path) -> tuple[list[str], dict[str, str]]:
    cmd = [*checkout.cli(code), "kernels", str(path)]
    if form != "table":
        cmd += ["--format", form, "-o", str(out_dir / f"kernels.{form}")]
    return cmd, checkout.env(code)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=REPO / "bench-data")
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs of each side")
    ap.add_argument("--forms", default=",".join(FORMS), help="table,csv,parquet (any of them)")
    ap.add_argument("--paths", default="file", help="file, dir or file,dir: what PATH is")
    ap.add_argument("--code", action="append", default=[], help="NAME=DIR: a checkout to run (repeatable)")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    csv_path = args.dir / f"kernel_details_{args.rows}.csv"
    if not csv_path.exists():
        t = time.perf_counter()
        _writer()(csv_path, args.rows)
        print(f"wrote {csv_path} ({csv_path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s")
    paths = {"file": csv_path, "dir": _torch_folder(csv_path)}
    wanted_paths = [p for p in args.paths.split(",") if p]
    forms = [f for f in args.forms.split(",") if f]
    if any(p not in paths for p in wanted_paths) or any(f not in FORMS for f in forms):
        raise SystemExit(f"--paths takes file/dir, --forms {'/'.join(FORMS)}")
    codes = _codes(args.code)
    cases = [(c, p, f) for c in codes for p in wanted_paths for f in forms]
    ours: dict[tuple[str, str, str], list[tuple[float, float, float]]] = {k: [] for k in cases}
    base: list[tuple[float, float]] = []
    loads = [os.getloadavg()[0]]
    for _ in range(args.repeat):
        # every child forks before this process has read the table (see the module docstring)
        for c, p, f in cases:
            cmd, env = _command(codes[c], paths[p], f, args.dir)
            ours[(c, p, f)].append(_run_child(cmd, env))
        base.append(_read_csv_in_process(csv_path))
        loads.append(os.getloadavg()[0])
    import pandas as pd

    rows = len(pd.read_csv(csv_path, usecols=[0]))
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"rows                      {rows:,}")
    print(f"code                      {', '.join(f'{c}={d}' for c, d in codes.items())}")
    print(f"load average (1 min)      {', '.join(f'{x:.1f}' for x in loads)}")
    for i, (bw, bc) in enumerate(base):
        line = ", ".join(f"{'/'.join(k)} {ours[k][i][0]:.2f} s ({ours[k][i][1]:.2f} s CPU)" for k in cases)
        print(f"run {i + 1}: pandas {bw:.2f} s ({bc:.2f} s CPU); tilescope {line}")
    bw, bc = min(b[0] for b in base), min(b[1] for b in base)
    print(f"pandas.read_csv           best {bw:.2f} s wall, {bc:.2f} s CPU (peak RSS {base_rss:,.0f} MiB)")
    for key in cases:
        runs = ours[key]
        w, cpu = min(o[0] for o in runs), min(o[1] for o in runs)
        rss = runs[0][2]  # the first run forks before this process read the table
        # each run against the pandas read right after it: the spread a single comparison can show
        paired = sorted(o[0] / b[0] for o, b in zip(runs, base, strict=True))
        print(
            f"kernels {'/'.join(key):<22} best {w:.2f} s wall, {cpu:.2f} s CPU (peak RSS {rss:,.0f} MiB): "
            f"ratio {w / bw:.2f}x wall, {cpu / bc:.2f}x CPU (target <= 2.0); run by run "
            f"{paired[0]:.2f}-{paired[-1]:.2f}x, median {statistics.median(paired):.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
