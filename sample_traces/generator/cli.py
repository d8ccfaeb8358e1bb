"""Command line of the generator (`python sample_traces/generate.py`, `python -m generator`)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from .cluster import ClusterSpec, write_cluster_run
from .fa_bundle import write_fa_bundle
from .large import write_large_kernel_details, write_large_trace_view
from .model import PT_DIR
from .samples import generate_samples

DESCRIPTION = "Deterministic generator of GENERATED (not measured) Ascend profiler outputs for tilescope."
# the bundled samples live next to this package: sample_traces/
SAMPLE_TRACES = Path(__file__).resolve().parents[1]


def _parse_size(text: str) -> int:
    # Example: "1G" -> 1073741824, "500M", "4096"
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B")
    return int(float(t[:-1]) * mult[t[-1]]) if t and t[-1] in mult else int(t)


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Parse the flags and write the samples (default) or the benchmark inputs; returns the exit code."""
    ap = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output directory (default: regenerate the bundled samples next to this script)",
    )
    ap.add_argument(
        "--large-kernels",
        type=int,
        default=None,
        metavar="N",
        help="write a kernel_details.csv with N rows (benchmark input) instead of the samples",
    )
    ap.add_argument(
        "--large-trace",
        type=_parse_size,
        default=None,
        metavar="BYTES",
        help="write a trace_view.json of about BYTES (e.g. 1G) instead of the samples",
    )
    ap.add_argument(
        "--fa-bundle",
        action="store_true",
        help="write the tilelang_fa_bundle run bundle (real TileLang IR, generated profile; needs tilelang)",
    )
    ap.add_argument("--ranks", type=int, default=None, metavar="N",
                    help="write an N-rank torch_npu run (kernel table, step trace, communication) into --out")
    ap.add_argument("--slow-rank", type=int, default=3, metavar="R",
                    help="with --ranks: the slow rank (-1: none)")
    ap.add_argument("--slow-link", default="5-6", metavar="A-B",
                    help="with --ranks: the slow ring link, source-destination ('none': none)")
    ap.add_argument("--steps", type=int, default=2, metavar="S",
                    help="with --ranks: profiled steps per rank (7 tasks each: 6 kernels, 1 all-reduce)")
    ap.add_argument("--layers", type=int, default=1, metavar="L",
                    help="with --ranks: the 6-kernel list runs L times per step (6 L kernels, 1 all-reduce)")
    args = ap.parse_args(argv)
    if args.ranks is not None:
        if args.out is None:
            ap.error("--ranks needs --out DIR")
        link = None if args.slow_link == "none" else tuple(int(x) for x in args.slow_link.split("-", 1))
        spec = ClusterSpec(ranks=args.ranks, slow_rank=None if args.slow_rank < 0 else args.slow_rank,
                           slow_link=link, steps=args.steps, layers=args.layers)  # type: ignore[arg-type]
        roots = write_cluster_run(args.out, spec)
        print(f"wrote {len(roots)} ranks under {args.out}")
        return 0
    if args.fa_bundle:
        root = write_fa_bundle(args.out or SAMPLE_TRACES, SAMPLE_TRACES.parent)
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        print(f"wrote {root} ({size / 1e6:.2f} MB)")
        return 0
    if args.large_kernels is None and args.large_trace is None:
        out = args.out or SAMPLE_TRACES
        for root in generate_samples(out):
            size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
            print(f"wrote {root} ({size / 1e6:.2f} MB)")
        return 0
    if args.out is None:
        ap.error("--large-kernels/--large-trace need --out DIR (keep benchmark files out of the repo)")
    base = args.out / PT_DIR / "ASCEND_PROFILER_OUTPUT"
    if args.large_kernels is not None:
        t0 = time.perf_counter()
        write_large_kernel_details(base / "kernel_details.csv", args.large_kernels)
        size = (base / "kernel_details.csv").stat().st_size
        print(
            f"kernel_details.csv: {args.large_kernels} rows, {size / 1e6:.1f} MB, "
            f"{time.perf_counter() - t0:.1f} s"
        )
    if args.large_trace is not None:
        t0 = time.perf_counter()
        n = write_large_trace_view(base / "trace_view.json", args.large_trace)
        print(f"trace_view.json: {n / 1e6:.1f} MB, {time.perf_counter() - t0:.1f} s")
    return 0
