"""Helpers the static rules (rules/ts5*_*.py) share: locations and iteration over ir.json kernels."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tilescope.findings import Location


def stage_path(kernel: dict[str, Any], stage: str) -> str | None:
    for s in kernel.get("stages", []):
        if s["name"] == stage:
            return f"ir/{s['file']}"
    return None


def locations(
    ir: dict[str, Any], kernel: dict[str, Any], rec: dict[str, Any] | None, label: str = ""
) -> tuple[Location, ...]:
    """Kernel source line + TVMScript line + Ascend C line(s) of one IR record (or the kernel def)."""
    out: list[Location] = []
    src_line = (rec or {}).get("source_line") or kernel.get("source_def_line")
    out.append(Location(file=ir.get("kernel_file", ""), line=src_line, stage="source", label=label))
    ts = (rec or {}).get("tvmscript_line")
    ts_file = stage_path(kernel, "tvmscript")
    if ts and ts_file:
        out.append(Location(file=ts_file, line=ts, stage="tvmscript", label=label))
    cc_file = stage_path(kernel, "ascendc")
    for line in ((rec or {}).get("ascendc_lines") or [])[:2]:
        if cc_file:
            out.append(Location(file=cc_file, line=line, stage="ascendc", label=label))
    return tuple(out)


def lowered_kernels(ir: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Kernels that were walked (built), whether or not the lowering succeeded."""
    for k in ir.get("kernels", []):
        if "allocations" in k:
            yield k


def alloc(kernel: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((a for a in kernel.get("allocations", []) if a["name"] == name), None)


def fmt_kib(nbytes: int | float) -> str:
    return f"{nbytes / 1024:.1f} KiB"


def loop_by_id(kernel: dict[str, Any], loop_id: str | None) -> dict[str, Any] | None:
    return next((lp for lp in kernel.get("loops", []) if lp["id"] == loop_id), None)


def ops_in_loop(kernel: dict[str, Any], kind: str, loop_id: str) -> list[dict[str, Any]]:
    """The records of one kind ("copies", "gemms", "elementwise", "reduces", "fills") inside a loop."""
    return [r for r in kernel.get(kind, []) if loop_id in r.get("enclosing_loops", [])]


def grid_blocks(kernel: dict[str, Any]) -> int | None:
    """Blocks launched: the product of the grid extents, None when one is symbolic."""
    grid = kernel.get("grid") or []
    if not grid or not all(isinstance(g, int) for g in grid):
        return None
    n = 1
    for g in grid:
        n *= int(g)
    return n
