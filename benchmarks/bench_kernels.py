"""Benchmark: parsing a large kernel_details.csv with `tilescope kernels` vs bare pandas.read_csv.

One run measures both, in this order, on the same file:
  baseline  pandas.read_csv(FILE) in this process (C engine, default inference)
  tilescope `tilescope kernels FILE --format parquet -o OUT` as a subprocess (start-up included)
and prints the ratio and the peak RSS of each (the child's via resource.getrusage(RUSAGE_CHILDREN)).
Targets (issue #2): ratio <= 2.0, peak RSS <= 2 GB.

    .venv/bin/python benchmarks/bench_kernels.py --rows 1000000 --dir bench-data
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _writer() -> object:
    spec = importlib.util.spec_from_file_location("generate", REPO / "sample_traces" / "generate.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["generate"] = mod  # dataclasses look their module up in sys.modules
    spec.loader.exec_module(mod)
    return mod.write_large_kernel_details


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=REPO / "bench-data")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    csv_path = args.dir / f"kernel_details_{args.rows}.csv"
    if not csv_path.exists():
        t = time.perf_counter()
        _writer()(csv_path, args.rows)  # type: ignore[operator]
        print(f"wrote {csv_path} ({csv_path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s")
    import pandas as pd

    load_before = os.getloadavg()[0]
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    df = pd.read_csv(csv_path)
    base = time.perf_counter() - t
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    base_cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    rows = len(df)
    del df
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    out = args.dir / "kernels.parquet"
    cmd = [
        str(REPO / ".venv" / "bin" / "tilescope"),
        "kernels",
        str(csv_path),
        "--format",
        "parquet",
        "-o",
        str(out),
    ]
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    ours = time.perf_counter() - t
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_rss = child.ru_maxrss / 1024
    ours_cpu = child.ru_utime + child.ru_stime

    print(f"rows                      {rows:,}")
    print(f"load average              {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
    print(f"pandas.read_csv           {base:.2f} s wall, {base_cpu:.2f} s CPU (peak RSS {base_rss:,.0f} MiB)")
    print(
        f"tilescope kernels parquet {ours:.2f} s wall, {ours_cpu:.2f} s CPU (peak RSS {child_rss:,.0f} MiB)"
    )
    print(f"ratio {ours / base:.2f}x wall, {ours_cpu / base_cpu:.2f}x CPU (target <= 2.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
