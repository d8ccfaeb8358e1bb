"""Benchmark the per-line reading of a big `msprof op simulator` folder (issue #25): the streamed
trace reader of tilescope.io.simulator against a `json.loads` baseline, and `tilescope lines`.

Usage:
    .venv/bin/python benchmarks/bench_lines.py                      # 1,000,000 instructions, 4 cores
    .venv/bin/python benchmarks/bench_lines.py --events 200000 --keep /tmp/sim

A simulator folder is GENERATED in a temporary folder (nothing is committed): 4 cores
(core0.cubecore0, core0.veccore0, core0.veccore1, core1.cubecore0), each with a code CSV, an
instruction CSV and a `trace.json` in the layout of the real trimmed sample (formats doc §5: an
object with "traceEvents", string pid = core and tid = pipe, `X` instructions whose args carry
`code`, `detail`, `pc_addr`, `SET_FLAG`/`WAIT_FLAG` `B`/`E` pairs, `s`/`t` flows, one event per
line), holding `--events` `X` instructions in total plus ~10 % other events.

Each measurement runs in its own subprocess, one after the other, so each reports its own peak RSS
(`ru_maxrss`); times are measured inside the child around the call only (start-up and imports
excluded), except for the CLI, whose wall time and peak RSS are the whole process's:
- `json.loads` baseline: every core's trace read with `json.loads` and summed per (line, pipe) with
  pandas, as the reader did before #25 (the code is below, `_BASELINE`);
- `read_simulator`: the streamed reader, every CSV and trace of the folder;
- `tilescope lines DIR -f json`: the whole command;
- `pipeline_lanes`: the in-core pipeline timeline (merged, capped busy intervals per core and pipe).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORES = ("core0.cubecore0", "core0.veccore0", "core0.veccore1", "core1.cubecore0")
KERNEL_CPP = "/tmp/tilelang_build_bench/kernel.cpp"
HEADER = "/usr/local/Ascend/ascend-toolkit/latest/include/kernel_operator.h"
CUBE_PIPES = ("MTE2", "MTE1", "CUBE", "FIXP", "SCALAR")
VEC_PIPES = ("MTE2", "VECTOR", "MTE3", "SCALAR")
INSTR = {
    "MTE2": "MOV_OUT_TO_UB",
    "MTE1": "LOAD_L1_TO_L0A",
    "CUBE": "MMAD",
    "FIXP": "FIX_L0C_TO_OUT",
    "SCALAR": "ADD",
    "VECTOR": "VADD",
    "MTE3": "MOV_UB_TO_OUT",
}
LINES = 160  # kernel source lines the instructions come from (plus one header line)


def _event(core: str, i: int, ts: float) -> tuple[str, str, int, float]:
    """The i-th instruction of a core: (JSON text, pipe, line, duration µs)."""
    pipes = CUBE_PIPES if "cube" in core else VEC_PIPES
    pipe = pipes[(i * 7) % len(pipes)]
    line = 20 + (i * 13) % LINES
    code = f"{HEADER}:120" if i % 50 == 0 else f"{KERNEL_CPP}:{line}"
    dur = 0.001 * (1 + (i * 31) % 400)
    text = (
        f'{{"args": {{"code": "{code}", "detail": "XD:X16=0x400,XN:X13=0,XM:X14=0x200,Id:{i % 1000}", '
        f'"pc_addr": "0x{0x1130A000 + 4 * (i % 4096):x}"}}, "cname": "rail_response", "dur": {dur:.3f}, '
        f'"name": "{INSTR[pipe]}", "ph": "X", "pid": "{core}", "tid": "{pipe}", "ts": {ts:.3f}}}'
    )
    return text, pipe, line, dur


def _others(core: str, i: int, ts: float) -> list[str]:
    """A SET_FLAG/WAIT_FLAG pair and a flow, as the real traces interleave them."""
    fid = f"{core}_{i}"
    return [
        f'{{"args": {{"code": "", "detail": "PIPE:MTE2,TRIGGERPIPE:SCALAR,FLAGID:0,", "pc_addr": "0x1"}}, '
        f'"cname": "black", "id": "{fid}", "name": "SET_FLAG", "ph": "B", "pid": "{core}", '
        f'"tid": "MTE2", "ts": {ts:.3f}}}',
        f'{{"args": {{}}, "cname": "yellow", "id": "{fid}", "name": "WAIT_FLAG", "ph": "E", '
        f'"pid": "{core}", "tid": "SCALAR", "ts": {ts + 0.001:.3f}}}',
        f'{{"cat": "MTE2ToVECTOR", "id": "{fid}", "name": "flow", "ph": "s", "pid": "{core}", '
        f'"tid": "MTE2", "ts": {ts:.3f}}}',
    ]


def write_core(d: Path, core: str, n: int) -> None:
    """One core folder: trace.json with `n` instructions, and the CSVs that agree with it."""
    d.mkdir(parents=True)
    cycles: dict[int, float] = {}
    per_pipe: dict[str, list[float]] = {}
    ts = 0.0
    with open(d / "trace.json", "w", encoding="utf-8") as out:
        out.write('{"displayTimeUnit": "ns", "profilingType": "op", "schemaVersion": 1, "traceEvents": [\n')
        for i in range(n):
            text, pipe, line, dur = _event(core, i, ts)
            out.write(("" if i == 0 else ",\n") + text)
            if i % 30 == 29:
                out.write(",\n" + ",\n".join(_others(core, i, ts)))
            cycles[line] = cycles.get(line, 0.0) + dur * 1800
            acc = per_pipe.setdefault(pipe, [0.0, 0.0])
            acc[0] += 1
            acc[1] += dur * 1800
            ts += dur * 0.5  # pipes overlap
        out.write("\n]}\n")
    code = ["code,call_count,cycles,running_time(us),"]
    code += [
        f"{KERNEL_CPP}:{line},{n // LINES},{c:.0f},{c / 1800:.4f}," for line, c in sorted(cycles.items())
    ]
    code.append(f"{HEADER}:120,{n // 50},{n * 0.4:.0f},{n * 0.4 / 1800:.4f},")
    (d / f"{core}_code_exe.csv").write_text("\n".join(code) + "\n")
    instr = ["instr,addr,pipe,call_count,cycles,running_time(us),detail,"]
    instr += [
        f'{INSTR[p]},0x{0x100 + k * 4:x},{p},{cnt:.0f},{cyc:.0f},{cyc / 1800:.4f},"id:{k}",'
        for k, (p, (cnt, cyc)) in enumerate(sorted(per_pipe.items()))
    ]
    (d / f"{core}_instr_exe.csv").write_text("\n".join(instr) + "\n")


def write_simulator(root: Path, events: int) -> Path:
    """OPPROF_*/simulator/ with `events` instructions split over the four cores; its path."""
    sim = root / "OPPROF_20261206000000_BENCHLINES" / "simulator"
    for k, core in enumerate(CORES):
        write_core(sim / core, core, events // len(CORES) + (k < events % len(CORES)))
    (root / "GENERATED.txt").write_text("GENERATED by benchmarks/bench_lines.py: made-up numbers.\n")
    return sim


# The pre-#25 reader (analyzer/io/simulator.py at 798cc2c, `_read_trace`): json.loads of the whole
# trace, one Python tuple per X event, pandas groupby.
_BASELINE = """
import json
import pandas as pd
from tilescope.io.simulator import _CODE_RE
def one(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    rows = [(str(e.get("tid", "")).upper(), (e.get("args") or {}).get("code"), e.get("dur"))
            for e in events if isinstance(e, dict) and e.get("ph") == "X"]
    del doc, events
    frame = pd.DataFrame(rows, columns=["pipe", "code", "dur"])
    frame = frame[frame["code"].notna()]
    where = frame["code"].astype(str).str.extract(_CODE_RE)
    frame = frame.assign(file=where["file"], line=pd.to_numeric(where["line"], errors="coerce"),
                         dur=pd.to_numeric(frame["dur"], errors="coerce"))
    frame = frame.dropna(subset=["file", "line", "dur"])
    g = frame.groupby(["file", "line", "pipe"], sort=False)["dur"]
    return pd.DataFrame({"busy_us": g.sum(), "instructions": g.size().astype("float64")}).reset_index()
"""
# The first suggestion, measured for the choice (not a dependency): ijson's C backend
# iterating traceEvents.item, columns in 64k-event batches, a pandas groupby per batch.
_IJSON = """
import ijson
import pandas as pd
from tilescope.io.simulator import _CODE_RE
def _part(cols):
    frame = pd.DataFrame(cols)
    return frame.groupby(["code", "pipe"])["dur"].agg(["sum", "size"])
def one(path):
    parts, cols = [], {"pipe": [], "code": [], "dur": []}
    with open(path, "rb") as fh:
        for e in ijson.items(fh, "traceEvents.item", use_float=True):
            if e.get("ph") == "X":
                cols["pipe"].append(e.get("tid")); cols["code"].append(e["args"].get("code"))
                cols["dur"].append(e.get("dur"))
                if len(cols["dur"]) >= 65536:
                    parts.append(_part(cols)); cols = {"pipe": [], "code": [], "dur": []}
    parts.append(_part(cols))
    g = pd.concat(parts).groupby(level=[0, 1]).sum().reset_index()
    g = g[g["code"] != ""]
    return pd.DataFrame({"busy_us": g["sum"], "instructions": g["size"].astype("float64")})
"""
_STREAMED = """
from tilescope.io.simulator_trace import line_busy
def one(path):
    return line_busy(path)
"""
_TRACES = """
from pathlib import Path
def run(root):
    n = busy = groups = 0
    for trace in sorted(Path(root).glob("core*/trace.json")):
        part = one(trace)
        n, busy, groups = n + part["instructions"].sum(), busy + part["busy_us"].sum(), groups + len(part)
    return f"{n:,.0f} instructions with a line, {busy:,.3f} µs busy, {groups} (core, line, pipe) groups"
"""
_FOLDER = """
from pathlib import Path
from tilescope.io.simulator import read_simulator
def run(root):
    sim = read_simulator(Path(root))
    n, busy = sim.pipes["instructions"].sum(), sim.pipes["busy_us"].sum()
    return (f"{n:,.0f} instructions with a line, {busy:,.3f} µs busy, {len(sim.pipes)} (core, line, pipe) "
            f"groups; {len(sim.code)} code rows")
"""
_LANES = """
from pathlib import Path
from tilescope.pipeline_lanes import pipeline_lanes
def run(root):
    df = pipeline_lanes(Path(root))
    return f"{len(df):,} busy intervals (capped lanes) for {df['instructions'].sum():,} instructions"
"""
CHILDREN = {
    "json.loads (before #25)": _BASELINE + _TRACES,
    "streamed (line_busy)": _STREAMED + _TRACES,
    "read_simulator (folder)": _FOLDER,
    "ijson (yajl2_c)": _IJSON + _TRACES,
    "pipeline_lanes (folder)": _LANES,
}
_TIMER = (
    "import resource, sys, time\n"
    "t = time.perf_counter()\n"
    "what = run(sys.argv[1])\n"
    "dt = time.perf_counter() - t\n"
    "print(f'{dt:.3f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} {what}')\n"
)


def _waited(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int, str, str]:
    """Run argv; its wall time, its own peak RSS (MiB, `wait4`), exit status, stdout, stderr."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=ROOT)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return wall, usage.ru_maxrss / 1024, proc.returncode, out.read().decode(), err.read().decode()


def measure_child(label: str, sim: Path, extra_path: str | None) -> tuple[float, float, str] | None:
    """(seconds inside the call, peak RSS MiB, what it read) of one reader in its own process."""
    env = dict(os.environ)
    if extra_path:
        env["PYTHONPATH"] = extra_path + os.pathsep + env.get("PYTHONPATH", "")
    _wall, _rss, code, out, err = _waited([sys.executable, "-c", CHILDREN[label] + _TIMER, str(sim)], env)
    if code != 0:
        print(f"{label:>26}: skipped ({(err.strip().splitlines() or ['?'])[-1][:120]})", flush=True)
        return None
    seconds, rss, what = out.strip().splitlines()[-1].split(" ", 2)
    return float(seconds), float(rss), what


def measure_cli(sim: Path, out: Path) -> tuple[float, float]:
    """Wall time and peak RSS of the whole `tilescope lines DIR -f json -o OUT` process."""
    wall, rss, code, _out, err = _waited(
        [sys.executable, "-m", "tilescope.cli", "lines", str(sim), "-f", "json", "-o", str(out)]
    )
    if code != 0:
        raise SystemExit(f"tilescope lines failed: {err.strip()[-300:]}")
    return wall, rss


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000, help="X instructions in all, over 4 cores")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; each runs every measurement once")
    ap.add_argument("--keep", type=Path, help="write the folder here and keep it (default: a temp dir)")
    ap.add_argument(
        "--ijson-path",
        help="a folder holding ijson (pip install --target DIR ijson): "
        "also measure the ijson reader; skipped when ijson does not import",
    )
    args = ap.parse_args(argv)
    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="bench_lines_")
    root = args.keep or Path(tmp.name)  # type: ignore[union-attr]
    t = time.perf_counter()
    sim = write_simulator(root, args.events)
    size = sum(f.stat().st_size for f in sim.rglob("*")) / 2**20
    print(
        f"simulator folder: {sim} ({size:,.0f} MiB, {args.events:,} instructions, written in "
        f"{time.perf_counter() - t:.1f} s); {os.cpu_count()} CPUs",
        flush=True,
    )
    labels = [k for k in CHILDREN if args.ijson_path or not k.startswith("ijson")]
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in [*labels, "tilescope lines -f json"]}
    for r in range(args.repeat):
        for label in labels:
            found = measure_child(label, sim, args.ijson_path)
            if found is not None:
                got[label].append(found[:2])
                print(
                    f"[{r + 1}] {label:>26}: {found[0]:6.2f} s  peak RSS {found[1]:6,.0f} MiB  ({found[2]})  "
                    f"load {os.getloadavg()[0]:.2f}",
                    flush=True,
                )
        wall, rss = measure_cli(sim, root / "lines.json")
        got["tilescope lines -f json"].append((wall, rss))
        print(
            f"[{r + 1}] {'tilescope lines -f json':>26}: {wall:6.2f} s  peak RSS {rss:6,.0f} MiB  (whole "
            f"process)  load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
    _summary(got)
    if tmp is not None:
        tmp.cleanup()


def _summary(got: dict[str, list[tuple[float, float]]]) -> None:
    print("\nmedian of the rounds (min–max):")
    med = {}
    for label, runs in got.items():
        if not runs:
            continue
        secs, rss = sorted(r[0] for r in runs), sorted(r[1] for r in runs)
        med[label] = (secs[len(secs) // 2], rss[len(rss) // 2])
        print(
            f"  {label:>26}: {med[label][0]:6.2f} s ({secs[0]:.2f}–{secs[-1]:.2f})  "
            f"peak RSS {med[label][1]:6,.0f} MiB ({rss[0]:,.0f}–{rss[-1]:,.0f})"
        )
    base = med.get("json.loads (before #25)")
    for label in ("streamed (line_busy)", "ijson (yajl2_c)"):
        if base and label in med:
            print(
                f"  {label} / json.loads: time {med[label][0] / base[0]:.2f}, "
                f"peak RSS {med[label][1] / base[1]:.2f}"
            )
    print(f"  load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
