"""Benchmark the dashboard's Timeline tab on a big torch_npu trace: building the lanes, the first
view's window and figure, and (where the code has it) the Chrome-trace export.

Usage:
    .venv/bin/python benchmarks/bench_timeline_view.py --size-mb 100 [--code /tmp/main-checkout]
    .venv/bin/python benchmarks/bench_timeline_view.py --input /path/to/trace_view.json

The trace is benchmarks/bench_timeline.py's generator (the real torch_npu layout). Each checkout
runs in its own subprocess (one after the other) that loads the trace (not timed), then times
`build_lanes`, `timeline_window` of the first view and `timeline_figure` + `plotly.io.to_json`, and
the export streamed to /dev/null; it prints one JSON line with the times, the lanes, the segments
and its peak RSS. `--code` adds a run on another checkout (e.g. main exported with `git archive`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_timeline import write_trace_view
from checkout import env

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
import plotly.io as pio
from tilescope.io.load import load_profile
from tilescope.dashboard.data import make_entry
from tilescope.dashboard.figures_timeline import timeline_figure
if sys.argv[2] == "lanes":
    from tilescope.dashboard import timeline_lanes as T
    build = T.build_lanes
else:  # before the lanes had their own module
    from tilescope.dashboard import query as T
    from tilescope.dashboard import figures as F
    build = lambda e: T.build_lanes(e, F.core_categories)
profile = load_profile(sys.argv[1])
entry = make_entry("p0", "bench", profile, report={})
out = {}
t = time.perf_counter(); lanes = build(entry); out["build_lanes_s"] = time.perf_counter() - t
x0, x1 = T.fit_window(lanes) if hasattr(T, "fit_window") else (None, None)
t = time.perf_counter(); seg = T.timeline_window(lanes, x0, x1); out["window_s"] = time.perf_counter() - t
t = time.perf_counter()
fig = timeline_figure(seg.lane, seg.start, seg.end, seg.text, seg.category, [ln.label for ln in lanes],
                      seg.merged, None, seg.links)
out["figure_bytes"] = len(pio.to_json(fig)); out["figure_s"] = time.perf_counter() - t
out["lanes"] = len(lanes); out["segments"] = sum(len(ln.start) for ln in lanes)
out["drawn"] = seg.total_in_window
if sys.argv[2] == "lanes":
    from tilescope.dashboard.timeline_export import chrome_trace
    t = time.perf_counter(); n = sum(len(piece) for piece in chrome_trace(lanes, "bench"))
    out["export_s"] = time.perf_counter() - t; out["export_bytes"] = n
out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def run(trace: Path, code: Path) -> dict[str, float]:
    has_lanes = (code / "dashboard" / "timeline_lanes.py").is_file()
    done = subprocess.run(
        # the editable install's import hook would find this checkout's modules a checkout lacks
        [sys.executable, "-P", "-c", CHILD, str(trace), "lanes" if has_lanes else "query"],
        env=env(code), cwd=code, capture_output=True, text=True,
    )
    if done.returncode:
        raise SystemExit(f"{code}: {done.stderr.strip().splitlines()[-1]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=100.0, help="size of the generated trace (MiB)")
    ap.add_argument("--input", type=Path, help="benchmark this trace instead of generating one")
    ap.add_argument("--code", type=Path, help="another checkout to run the same steps on")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-tl-view-") as tmp:
        trace = args.input
        if trace is None:
            trace = Path(tmp) / "trace_view.json"
            groups = write_trace_view(trace, int(args.size_mb * 1024 * 1024))
            print(f"generated {trace.stat().st_size / 2**20:,.0f} MiB ({groups:,} launch groups)", flush=True)
        for label, code in (("this checkout", ROOT), *((("--code", args.code),) if args.code else ())):
            print(f"{label} ({code}): {json.dumps(run(trace, code))}", flush=True)


if __name__ == "__main__":
    main()
