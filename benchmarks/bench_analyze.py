"""Benchmark: analysing with every rule vs parsing, and tilescope vs msprof-analyze's advisor.

Part 1 (issue #3 target: analyse <= 3x parse): a torch_npu directory with a kernel_details.csv of
--rows kernels (default 1,000,000) from sample_traces/generate.py; times `load_profile` (parse) and
`analyze` (all rules) in this process, best of --repeat runs each.

Part 2 (target: tilescope >= 20x faster than the advisor): a torch_npu directory with --small-rows
kernels (default 50,000) and a trace_view.json of about --events events (default 200,000). Times
`tilescope analyze DIR -f json` and `msprof-analyze advisor all -d DIR` as subprocesses, one after
the other in the same run. The advisor is looked up on PATH, then in --advisor-bin (default
/tmp/msa-venv/bin); when absent that half is reported as skipped.

Part 3 (issue #13 target: `analyze` on a large trace_view.json within 2x `read_timeline`): a bare
trace_view.json of --timeline-mb MiB from sample_traces/generate.py; `read_timeline` and the whole
`tilescope analyze FILE -f json -o OUT` each run in their own subprocess (one after the other) on
the code of --code (default: this checkout; e.g. /work/main for a before/after), timed inside the
child around the call, with the child's peak RSS and the load average printed.

    .venv/bin/python benchmarks/bench_analyze.py --dir bench-data
    .venv/bin/python benchmarks/bench_analyze.py --dir /tmp/ba --skip-part1 --skip-part2 --timeline-mb 2048

Part 4 (issue #13: peak memory on large kernel tables), only with --large-rows N (3,000,000 in
docs/benchmarks.md): a torch_npu directory with a kernel_details.csv of N rows; `tilescope analyze
DIR -f json` and `tilescope info DIR -f json`, each in a subprocess of its own, once per --rows-code
checkout (`NAME=DIR`, put first on PYTHONPATH: `--rows-code before=/work/main --rows-code after=.`),
alternating, --repeat times; wall, CPU and peak RSS (ru_maxrss from os.wait4) of each, against
`pandas.read_csv` of the same file in a subprocess too (time and peak RSS: the ratios' baseline),
with the load average before and after every round.

    .venv/bin/python benchmarks/bench_analyze.py --dir bench-data
    .venv/bin/python benchmarks/bench_analyze.py --dir /tmp/bench --skip-part1 --skip-part2 \
        --large-rows 3000000 --repeat 2 --rows-code before=/work/main --rows-code after=.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TypeVar

import checkout  # benchmarks/checkout.py: how another checkout's code is run

T = TypeVar("T")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _generator() -> ModuleType:
    """sample_traces/generate.py: not an installed package, so its folder goes on sys.path."""
    sys.path.insert(0, str(REPO / "sample_traces"))
    return importlib.import_module("generate")


def _torch_dir(root: Path, rows: int, trace_bytes: int | None, gen: ModuleType) -> Path:
    out = root / "ASCEND_PROFILER_OUTPUT"
    kd = out / "kernel_details.csv"
    if not kd.exists():
        out.mkdir(parents=True, exist_ok=True)
        gen.write_large_kernel_details(kd, rows)
    tv = out / "trace_view.json"
    if trace_bytes and not tv.exists():
        gen.write_large_trace_view(tv, trace_bytes)
    return root


def _best(fn: Callable[[], T], repeat: int) -> tuple[float, T | None]:
    """Best time of `repeat` calls and the last call's value (None when repeat < 1)."""
    best, value = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def part1(root: Path, rows: int, repeat: int, gen: ModuleType) -> dict[str, float]:
    from tilescope.analysis import analyze
    from tilescope.io.load import load_profile

    d = _torch_dir(root / f"k{rows}", rows, None, gen).resolve()
    t_parse, profile = _best(lambda: load_profile(d), repeat)
    assert profile is not None
    t_analyze, result = _best(lambda: analyze(profile), repeat)
    assert result is not None
    findings = len(result.findings)
    print(
        f"part 1: {rows:,} kernels: parse {t_parse:.2f} s, analyze (all rules) {t_analyze:.2f} s, "
        f"ratio {t_analyze / t_parse:.2f} (target <= 3), {findings} findings"
    )
    return {"parse_s": t_parse, "analyze_s": t_analyze, "ratio": t_analyze / t_parse}


def _count_events(path: Path) -> int:
    import duckdb

    con = duckdb.connect()
    q = (
        f"SELECT count(*) FROM read_json('{path}', format='array', columns={{'ph': 'VARCHAR'}}, "
        "maximum_object_size=1000000000)"
    )
    return int(con.execute(q).fetchone()[0])  # type: ignore[index]


def part2(root: Path, rows: int, events: int, advisor_bin: Path, gen: ModuleType) -> dict[str, float | None]:
    d = _torch_dir(root / f"t{rows}_{events}", rows, events * 180, gen)  # ~180 bytes per generated event
    n_events = _count_events(d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    load_before = os.getloadavg()[0]
    runs = []
    for _ in range(3):  # the first run also pays for cold file caches; all three are printed
        t0 = time.perf_counter()
        ts = subprocess.run(
            [sys.executable, "-m", "tilescope.cli", "analyze", str(d), "-f", "json"],
            cwd=REPO,
            capture_output=True,
            text=True,
            env=dict(os.environ),
            check=False,
        )
        runs.append(time.perf_counter() - t0)
    t_ts = min(runs)
    n_find = len(json.loads(ts.stdout)["findings"]) if ts.returncode in (0, 1) and ts.stdout else -1
    print(
        f"part 2: {rows:,} kernels + {n_events:,} timeline events: tilescope analyze "
        f"{', '.join(f'{r:.2f}' for r in runs)} s "
        f"(best {t_ts:.2f} s, exit {ts.returncode}, {n_find} findings)"
    )
    exe = shutil.which("msprof-analyze") or (
        str(advisor_bin / "msprof-analyze") if (advisor_bin / "msprof-analyze").exists() else None
    )
    if exe is None:
        print("part 2: msprof-analyze not installed: advisor comparison skipped")
        return {"tilescope_s": t_ts, "advisor_s": None, "speedup": None}
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        adv = subprocess.run(
            [exe, "advisor", "all", "-d", str(d), "-l", "en", "--agent", "-o", out],
            cwd=out,
            capture_output=True,
            text=True,
            check=False,
            timeout=7200,
        )
        t_adv = time.perf_counter() - t0
    print(
        f"part 2: msprof-analyze advisor all {t_adv:.2f} s (exit {adv.returncode}); "
        f"tilescope is {t_adv / t_ts:.1f}x faster (target >= 20x); "
        f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    return {"tilescope_s": t_ts, "advisor_s": t_adv, "speedup": t_adv / t_ts}


_PART3_CHILD = {
    "read_timeline": (
        "from tilescope.io.timeline import read_timeline\n"
        "def run(p, out):\n"
        "    t = read_timeline(p)\n"
        "    return f'{len(t.kernels)} kernels, {len(t.host_ops)} host ops, {len(t.flows)} flows'\n"
    ),
    "analyze": (
        "from tilescope.cli import main\n"
        "def run(p, out):\n"
        "    code = main(['analyze', p, '-f', 'json', '-o', out])\n"
        "    import json\n"
        "    with open(out) as fh:\n"
        "        n = len(json.load(fh)['findings'])\n"
        "    return f'exit {code}, {n} findings'\n"
    ),
}
_PART3_TIMER = (
    "import resource, sys, time\n"
    "t = time.perf_counter()\n"
    "what = run(sys.argv[1], sys.argv[2])\n"
    "dt = time.perf_counter() - t\n"
    "print(f'{dt:.3f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} {what}')\n"
)


def _part3_child(label: str, trace: Path, out: Path, code_dir: Path) -> tuple[float, float, str] | None:
    res = subprocess.run(
        [sys.executable, "-P", "-c", checkout.source(code_dir, _PART3_CHILD[label]) + _PART3_TIMER,
         str(trace), str(out)],
        capture_output=True, text=True, env=checkout.env(code_dir), cwd=code_dir, check=False,
    )
    if res.returncode != 0:
        print(f"part 3: {label} failed: {(res.stderr.strip().splitlines() or ['?'])[-1][:300]}", flush=True)
        return None
    seconds, rss, what = res.stdout.strip().splitlines()[-1].split(" ", 2)
    return float(seconds), float(rss), what


def part3(root: Path, size_mb: float, code_dir: Path, gen: ModuleType) -> dict[str, float | None]:
    trace = root / f"tl{size_mb:g}" / "trace_view.json"
    if not trace.exists():
        trace.parent.mkdir(parents=True, exist_ok=True)
        gen.write_large_trace_view(trace, int(size_mb * 2**20))
    print(f"part 3: {trace} ({trace.stat().st_size / 2**20:,.0f} MiB), code {code_dir}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)
    got: dict[str, tuple[float, float, str] | None] = {}
    # kept beside the trace, one per checkout, so that a before/after can compare the findings
    report = trace.with_name(f"report.{code_dir.name}.json")
    for label in ("read_timeline", "analyze"):
        got[label] = found = _part3_child(label, trace, report, code_dir)
        if found is not None:
            print(f"part 3: {label:>13}: {found[0]:7.2f} s  peak RSS {found[1]:7,.0f} MiB  ({found[2]})  "
                  f"load average {os.getloadavg()[0]:.2f}", flush=True)
    read, whole = got["read_timeline"], got["analyze"]
    ratio = whole[0] / read[0] if read and whole else None
    if ratio is not None:
        print(f"part 3: analyze / read_timeline = {ratio:.2f} (target <= 2)")
    return {"read_s": read[0] if read else None, "analyze_s": whole[0] if whole else None, "ratio": ratio}


_READ_CSV = """
import sys, time
import pandas as pd
t = time.perf_counter()
df = pd.read_csv(sys.argv[1])
print(f"{time.perf_counter() - t:.3f} {len(df)}")
"""


def _child(
    cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[float, float, float, str]:
    """Wall s, CPU s, peak RSS MiB (os.wait4: the child's own ru_maxrss) and stdout of a subprocess."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=cwd
    )
    out = proc.stdout.read() if proc.stdout is not None else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # 1: a finding tripped no gate here, but analyze may exit 1 with --fail-on
        raise SystemExit(f"{' '.join(cmd[:6])} ... failed with exit code {code}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def part4(root: Path, rows: int, repeat: int, codes: dict[str, Path], gen: ModuleType) -> None:
    """Peak RSS and time of `analyze` and `info` on a large kernel table, per checkout."""
    d = _torch_dir(root / f"k{rows}", rows, None, gen).resolve()
    csv = d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    size = csv.stat().st_size
    runs: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    base: list[tuple[float, float, float]] = []
    loads = [os.getloadavg()[0]]
    for _ in range(repeat):
        for name, code in codes.items():
            env = checkout.env(code)
            for command in ("analyze", "info"):
                cmd = [*checkout.cli(code), command, str(d), "-f", "json"]
                wall, cpu, rss, _out = _child(cmd, env, cwd=code)
                runs.setdefault((name, command), []).append((wall, cpu, rss))
        wall, cpu, rss, _out = _child([sys.executable, "-c", _READ_CSV, str(csv)])
        base.append((wall, cpu, rss))
        loads.append(os.getloadavg()[0])
    bw, brss = min(b[0] for b in base), min(b[2] for b in base)
    print(
        f"part 4: {rows:,} kernels ({size / 1e6:,.0f} MB kernel_details.csv); load average "
        f"{', '.join(f'{x:.1f}' for x in loads)}"
    )
    ratio = brss * 2**20 / size
    print(f"part 4: pandas.read_csv  best {bw:.2f} s, peak RSS {brss:,.0f} MiB ({ratio:.1f}x the file)")
    for (name, command), rs in runs.items():
        w, c, peak = min(r[0] for r in rs), min(r[1] for r in rs), max(r[2] for r in rs)
        print(
            f"part 4: {name:<8} {command:<8} best {w:6.2f} s wall ({w / bw:4.1f}x read_csv), {c:6.2f} s CPU, "
            f"peak RSS {peak:,.0f} MiB ({peak * 2**20 / size:.1f}x the file, {peak / brss:.1f}x read_csv's); "
            f"runs {', '.join(f'{r[0]:.1f} s/{r[2]:,.0f} MiB' for r in rs)}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--small-rows", type=int, default=50_000)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--dir", type=Path, default=REPO / "bench-data")
    ap.add_argument("--advisor-bin", type=Path, default=Path("/tmp/msa-venv/bin"))
    ap.add_argument("--skip-part1", action="store_true")
    ap.add_argument("--skip-part2", action="store_true")
    ap.add_argument("--timeline-mb", type=float, default=0.0, help="part 3 trace size in MiB (0: skip)")
    ap.add_argument("--code", type=Path, default=REPO, help="part 3: the checkout whose code runs")
    ap.add_argument("--large-rows", type=int, default=0, help="part 4: kernels in the large table (0: skip)")
    ap.add_argument("--rows-code", action="append", default=[], help="part 4: NAME=DIR checkout (repeatable)")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    gen = _generator()
    if not args.skip_part1:
        part1(args.dir, args.rows, args.repeat, gen)
    if not args.skip_part2:
        part2(args.dir, args.small_rows, args.events, args.advisor_bin, gen)
    if args.timeline_mb > 0:
        part3(args.dir, args.timeline_mb, args.code.resolve(), gen)
    if args.large_rows:
        pairs = (c.partition("=") for c in args.rows_code or [f"this={REPO}"])
        codes = {name: Path(where).resolve() for name, _, where in pairs}
        part4(args.dir, args.large_rows, args.repeat, codes, gen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
