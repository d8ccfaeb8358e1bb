"""Benchmark (issue #16): a multi-rank run, tilescope vs `msprof-analyze cluster`, and the cache.

For each --ranks N (default 8, 64, 256) a generated N-rank torch_npu run (sample_traces/generate.py
--ranks N --steps S --layers L: 6 L kernels + 1 all-reduce per step and rank, step trace,
communication.json, communication_matrix.json; 4 x 367 layers = 8,808 kernels per rank by default),
then, one after the other in the same round (so that both see the same machine load):
  msprof      `msprof-analyze cluster -d RUN --export_type text -o OUT` (reads the step and
              communication summaries only), looked up on PATH, then in --msprof-bin
  first       `tilescope analyze RUN -f json -o OUT --cache-dir FRESH` (every per-rank rule and the
              cross-rank ones; local worker pool, default size)
  repeat      the same command again: the run's stored report (run.json; nothing analysed or
              assembled, pandas and the rules not imported)
  summaries   the same command once more with the stored report removed: per-rank summaries from
              the cache, the model and the cross-rank rules rebuilt on them (what a run with one
              changed rank pays, less that rank's analysis)
  workers     `analyze_inputs` in a child process with the pool: the largest worker peak RSS and the
              CPU seconds per rank (analyzer/rankwork.py measures both where the work runs)
Wall times and peak RSS (os.wait4's ru_maxrss of each child, which covers its own children: the
largest process of the pool) are printed with the load average, as a Markdown table, plus a
projection of a 4,096-rank run on a Dask cluster of 32 workers from the measured per-rank CPU.

    .venv/bin/python benchmarks/bench_cluster.py --dir /tmp/bc
    .venv/bin/python benchmarks/bench_cluster.py --dir /tmp/bc --ranks 8,64 --msprof-bin /tmp/msa/bin
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import checkout  # benchmarks/checkout.py: how another checkout's code is run

REPO = Path(__file__).resolve().parent.parent
_WORKERS = """
import json, sys
from pathlib import Path
from tilescope.analysis import kernel_columns_read
from tilescope.config import Config
from tilescope.io.detect import detect
from tilescope.rank_cache import input_bytes, input_rows
from tilescope.rankwork import analyze_inputs, plan_executor

run = Path(sys.argv[1])
found = detect(run)
where = plan_executor(None, None, [input_bytes(input_rows(d)) for d in found])
r = analyze_inputs(found, run, Config(), None, kernel_columns_read(), where, None)
print(json.dumps({"workers": where.workers, "peak_kib": max(r.worker_peak_kib),
                  "cpu_s": r.cpu_s, "ranks": len(r.parts)}))
"""


def _run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """(wall seconds, peak RSS MiB of the child or the largest of its children, stdout)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}")
    return wall, usage.ru_maxrss // 1024, out.decode()


def _msprof(bin_dir: Path) -> str | None:
    found = shutil.which("msprof-analyze")
    if found:
        return found
    candidate = bin_dir / "msprof-analyze"
    return str(candidate) if candidate.is_file() else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, required=True, help="where the runs and outputs go")
    ap.add_argument("--ranks", default="8,64,256")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--layers", type=int, default=367)
    ap.add_argument("--msprof-bin", type=Path, default=Path("/tmp/msa/bin"))
    args = ap.parse_args(argv)
    py = sys.executable
    ts = [py, "-P", "-c", "from tilescope.cli import main; main()"]
    msprof = _msprof(args.msprof_bin)
    env = checkout.env(REPO)  # this checkout's code, whatever else is installed
    rows = []
    per_rank_cpu: list[float] = []
    for n in [int(x) for x in args.ranks.split(",")]:
        run = args.dir / f"run{n}"
        if not run.is_dir():
            subprocess.run([py, "sample_traces/generate.py", "--ranks", str(n), "--steps", str(args.steps),
                            "--layers", str(args.layers), "--out", str(run)], cwd=REPO, check=True,
                           stdout=subprocess.DEVNULL)
        load = os.getloadavg()[0]
        row: dict[str, object] = {"ranks": n, "load_before": round(load, 1)}
        if msprof:
            out = args.dir / f"msprof{n}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            row["msprof_s"], row["msprof_mib"], _ = _run([msprof, "cluster", "-d", str(run), "--export_type",
                                                          "text", "-o", str(out)])
        cache = args.dir / f"cache{n}"
        shutil.rmtree(cache, ignore_errors=True)
        report = args.dir / f"report{n}.json"
        cmd = [*ts, "analyze", str(run), "-f", "json", "-o", str(report), "--cache-dir", str(cache)]
        row["first_s"], row["first_mib"], _ = _run(cmd, env)
        row["repeat_s"], row["repeat_mib"], _ = _run(cmd, env)
        for stored in cache.glob("??/*/run.json"):
            shutil.rmtree(stored.parent)
        row["summaries_s"], row["summaries_mib"], _ = _run(cmd, env)
        _w, _p, out_text = _run([py, "-c", _WORKERS, str(run)], env)
        work = json.loads(out_text.strip().splitlines()[-1])
        row["workers"] = work["workers"]
        row["worker_peak_mib"] = round(work["peak_kib"] / 1024)
        row["cpu_per_rank_ms"] = round(1000 * statistics.median(work["cpu_s"]), 1)
        per_rank_cpu = work["cpu_s"]
        row["load_after"] = round(os.getloadavg()[0], 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    keys = ["ranks", "msprof_s", "first_s", "repeat_s", "summaries_s", "first_mib", "workers",
            "worker_peak_mib", "cpu_per_rank_ms", "load_before", "load_after"]
    print("\n| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for row in rows:
        cells = [f"{row[k]:.2f}" if isinstance(row.get(k), float) else str(row.get(k, "–")) for k in keys]
        print("| " + " | ".join(cells) + " |")
    if per_rank_cpu and rows:
        last = rows[-1]
        n = int(str(last["ranks"]))
        cpu = statistics.median(per_rank_cpu)
        # the driver's share (cache reads, model, cross-rank rules, JSON) grows with ranks: the
        # analysis from the summaries measures it; its growth per rank between the two largest runs,
        # extended to 4,096 ranks (a single run: all of it scaled, an over-estimate)
        if len(rows) >= 2:
            a, b = rows[-2], rows[-1]
            slope = (float(str(b["summaries_s"])) - float(str(a["summaries_s"]))) / (
                int(str(b["ranks"])) - int(str(a["ranks"])))
            driver = float(str(b["summaries_s"])) + slope * (4096 - n)
        else:
            driver = float(str(last["summaries_s"])) * 4096 / n
        work = cpu * 4096 / 32
        print(f"\nprojection, 4,096 ranks on 32 Dask workers: per-rank work {cpu * 1000:.0f} ms CPU "
              f"x 4096 / 32 = {work:.1f} s, plus the driver ~{driver:.1f} s (the analysis from the "
              f"summaries, extended from {n} ranks), ~{work + driver:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
