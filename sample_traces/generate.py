#!/usr/bin/env python3
"""Deterministic generator of GENERATED (not measured) Ascend profiler outputs for tilescope.

Run ``python sample_traces/generate.py`` to rewrite the bundled samples in place, or
``python sample_traces/generate.py --out DIR`` to write them elsewhere.  Benchmark inputs are only
written on request: ``--large-kernels N`` (a kernel_details.csv with N rows) and
``--large-trace BYTES`` (a trace_view.json of about BYTES), both into ``--out DIR``.
``--fa-bundle`` writes the TileLang flash-attention run bundle (needs tilelang).

This file is the thin entry point; the code lives in the ``generator/`` package next to it (see
``generator/__init__.py`` for the module map and ``generator/model.py`` for the performance model).
``sample_traces`` is not an installed package, so this script puts its own directory on ``sys.path``
and imports the package as ``generator``. It can be run from any working directory, or imported
as ``generate`` with this folder on ``sys.path``, as the tests (the ``sample_generator`` fixture)
and benchmarks do; the names below are re-exported for them.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

import generator  # noqa: E402  (needs the sys.path entry above)

if Path(generator.__file__ or "").resolve().parent != _HERE / "generator":
    raise ImportError(f"'generator' resolved to {generator.__file__}, expected {_HERE / 'generator'}")

from generator.cli import main  # noqa: E402
from generator.kernel_table import KD_HEADER  # noqa: E402
from generator.large import write_large_kernel_details, write_large_trace_view  # noqa: E402
from generator.model import (  # noqa: E402
    AIC_CORES,
    AIV_CORES,
    ASSUMPTIONS,
    FREQ_MHZ,
    GENERATOR_NAME,
    GENERATOR_VERSION,
    OPPROF_DIR,
    PT_DIR,
    SEED,
)
from generator.msprof_op import MSOP_HEADERS, MSOP_KERNEL, OPBASIC_HEADER, msprof_op_launch  # noqa: E402
from generator.samples import SAMPLES, generate_samples  # noqa: E402

__all__ = [
    "AIC_CORES",
    "AIV_CORES",
    "ASSUMPTIONS",
    "FREQ_MHZ",
    "GENERATOR_NAME",
    "GENERATOR_VERSION",
    "KD_HEADER",
    "MSOP_HEADERS",
    "MSOP_KERNEL",
    "OPBASIC_HEADER",
    "OPPROF_DIR",
    "PT_DIR",
    "SAMPLES",
    "SEED",
    "generate_samples",
    "main",
    "msprof_op_launch",
    "write_large_kernel_details",
    "write_large_trace_view",
]

if __name__ == "__main__":
    sys.exit(main(prog="generate.py"))
