"""`tilescope collect KERNEL.py[:FUNCTION]`: profile a TileLang kernel into a self-describing bundle.

The command only parses options; collectors/run.py does the work. Progress goes to stderr; the one
line on stdout is the bundle path, so scripts can capture it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tilescope.errors import UsageError

EPILOG = (
    "Examples:\n\n"
    "  tilescope collect attn.py:flash_fwd --param BR=128 --out runs/fa-v1\n\n"
    "  tilescope collect mm.py:matmul --backend msprof-op --metrics PipeUtilization,Memory --out runs/mm\n\n"
    "  tilescope collect sample_traces/kernels/collect_vector_add.py:vector_add --ir-only --out runs/vadd\n\n"
    "Exit codes: 0 bundle written; 2 bad usage or the bundle exists (use --force); 3 no NPU/CANN/"
    "torch_npu/msprof (use --ir-only) or no TileLang. See docs/collecting.md."
)


DEFAULT_METRICS = ("PipeUtilization,Memory,MemoryL0,MemoryUB,ResourceConflictRatio,L2Cache,"
                   "ArithmeticUtilization")


def parse_metrics(text: str) -> list[str]:
    groups = [g.strip() for g in text.split(",") if g.strip()]
    if not groups:
        raise UsageError("--metrics: give at least one metric group")
    return groups


def collect_command(
    kernel: Annotated[str, typer.Argument(metavar="KERNEL.py[:FUNCTION]", help="Kernel file and builder.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Bundle directory to create.")],
    param: Annotated[list[str] | None, typer.Option(
        "--param", "-p", metavar="NAME=VALUE", help="Builder parameter (Python literal); repeatable.",
    )] = None,
    backend: Annotated[str, typer.Option(
        "--backend", help="torch_npu, msprof-op, or msprof-op-simulator (one simulated launch: per-line "
        "cycles and the in-core pipeline; docs/lines.md).",
    )] = "torch_npu",
    metrics: Annotated[str, typer.Option(
        "--metrics", help="aic-metrics groups, comma-separated (torch_npu: one run per group).",
    )] = DEFAULT_METRICS,
    warmup: Annotated[int, typer.Option("--warmup", help="Launches before measuring.")] = 5,
    repeat: Annotated[int, typer.Option("--repeat", help="Measured launches.")] = 10,
    ir_only: Annotated[bool, typer.Option(
        "--ir-only", help="No NPU: IR + manifest (+ CPU correctness check where possible).")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace an existing bundle (only once the new one is complete).")] = False,
    chip: Annotated[str | None, typer.Option("--chip", help="Chip name or TOML for the IR checks.")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds allowed per child process.")] = 900.0,
    with_reference: Annotated[bool, typer.Option(
        "--with-reference", help="Also profile the spec's torch reference on the same inputs (torch_npu): "
        "the vendor's operators beside the kernel, for diff --match.")] = False,
) -> None:
    """Profile a TileLang kernel on an Ascend NPU into a run bundle (manifest.json + profile/ + ir/)."""
    # deferred: collectors.run and ir.params only when this command runs; `tilescope --help` imports every
    #   command module
    from tilescope.collectors.run import CollectRequest, collect
    from tilescope.ir.params import parse_param

    params = dict(parse_param(p) for p in param or [])
    request = CollectRequest(
        kernel=kernel, out=out, params=params, backend=backend, metrics=parse_metrics(metrics),
        warmup=warmup, repeat=repeat, ir_only=ir_only, force=force, chip=chip, timeout=timeout,
        with_reference=with_reference,
    )
    path = collect(request)
    typer.echo(str(path))


def register(app: typer.Typer) -> None:
    app.command("collect", epilog=EPILOG)(collect_command)
