"""Measured cost per source line: the simulator's cycles per Ascend C line, rolled up to the TileLang
lines of a bundle's line map (tilescope.ir.linemap), with the pipe split and the spread over cores.

How lines are counted (docs/lines.md):
- The kernel's own source file is the one with the most cycles among the files that are not headers
  (`.h`, `.hpp`, or under an `include/` folder): TileLang compiles a temporary copy of `ir/kernel.cpp`,
  so its path differs from the bundle's. Lines of other files (AscendC library headers) are listed
  apart and never added: the simulator counts inlined code under the calling line (inclusive), so
  their cycles are in a kernel line already.
- A kernel line's cycles are summed over cores; the spread is the min and max over the cores that ran
  it (imbalance per line). Shares are of the kernel file's cycles summed over every line and core.
- The pipe split comes from the per-core traces (instruction time per line and pipe); a line with no
  trace events has no split.
- TileLang lines come from the line map: an Ascend C line mapped from several TileLang lines (a vector
  function several `T.Parallel` loops lowered into) counts once, under all of them together. A line
  inside a `__simt_vf__` function maps as the function's definition line does. Ascend C lines no
  TileLang line maps to (index arithmetic, sync flags, scalar set-up) are "(no TileLang line)".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tilescope.io.simulator import SimulatorData
from tilescope.profile import Profile

# Example: "__simt_vf__ __launch_bounds__(64) inline void flash_fwd_kernel_simt_vf_3(" starts a function
_VF_DEF = re.compile(r"__simt_vf__.*\bvoid\s+\w+\s*\(")
NO_SOURCE = "(no TileLang line)"
SYNC_INSTR = re.compile(r"^(SET_FLAG|WAIT_FLAG|PIPE_BARRIER|BARRIER|SET_CROSS_CORE|WAIT_FLAG_DEV)", re.I)


@dataclass
class LineCost:
    """One TileLang line (or group of lines sharing Ascend C code) and the Ascend C lines under it."""

    source_lines: tuple[int, ...]  # empty: Ascend C lines no TileLang line maps to
    what: str
    cycles: float
    share: float
    core_min: float
    core_max: float
    call_count: float
    pipes: dict[str, float] = field(default_factory=dict)  # pipe -> busy µs (traces)
    ascendc: list[dict[str, Any]] = field(default_factory=list)  # line, cycles, share

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_lines": list(self.source_lines),
            "what": self.what,
            "cycles": round(self.cycles, 3),
            "share": round(self.share, 6),
            "core_min_cycles": round(self.core_min, 3),
            "core_max_cycles": round(self.core_max, 3),
            "call_count": round(self.call_count, 3),
            "pipes_us": {k: round(v, 4) for k, v in self.pipes.items()},
            "ascendc": self.ascendc,
        }


@dataclass
class LinesReport:
    kernel_file: str | None
    total_cycles: float
    cores: int
    lines: list[LineCost]
    other_files: list[dict[str, Any]]  # header lines, inclusive in their callers: never added
    instructions: list[dict[str, Any]]  # per (pipe, instr): cycles, count, summed over cores
    sync: dict[str, float]  # sync/barrier instructions executed, by name
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel_file": self.kernel_file,
            "total_cycles": round(self.total_cycles, 3),
            "cores": self.cores,
            "lines": [x.to_dict() for x in self.lines],
            "other_files": self.other_files,
            "instructions": self.instructions,
            "sync": self.sync,
            "notes": self.notes,
        }


def _is_header(path: str) -> bool:
    p = path.replace("\\", "/")
    return p.endswith((".h", ".hpp")) or "/include/" in p


def kernel_file(code: pd.DataFrame) -> str | None:
    files = code.loc[~code["file"].map(_is_header)]
    if files.empty:
        return None
    return str(files.groupby("file")["cycles"].sum().idxmax())


def vf_owner_lines(cpp: str) -> dict[int, int]:
    """Each line inside a `__simt_vf__` function -> the function's definition line (1-based)."""
    owner: dict[int, int] = {}
    start: int | None = None
    for i, text in enumerate(cpp.splitlines(), 1):
        if start is None and _VF_DEF.search(text):
            start = i
        elif start is not None:
            owner[i] = start
            if text.startswith("}"):
                start = None
    return owner


def c_to_source(
    line_map: Sequence[Mapping[str, Any]], cpp: str | None
) -> dict[int, tuple[tuple[int, ...], str]]:
    """Ascend C line -> (the TileLang lines mapped to it, what they are)."""
    direct: dict[int, dict[int, str]] = {}
    for e in line_map:
        src = e.get("source_line")
        if not isinstance(src, int):
            continue
        for c in e.get("ascendc_lines") or []:
            direct.setdefault(int(c), {}).setdefault(src, str(e.get("what", "")))
    if cpp:
        for line, definition in vf_owner_lines(cpp).items():
            if line not in direct and definition in direct:
                direct[line] = direct[definition]
    return {c: (tuple(sorted(d)), "; ".join(d[s] for s in sorted(d))) for c, d in direct.items()}


def line_costs(
    sim: SimulatorData, line_map: Sequence[Mapping[str, Any]] = (), cpp: str | None = None
) -> LinesReport:
    """The per-line report of a simulator run (module docstring)."""
    code = sim.code
    kfile = kernel_file(code) if len(code) else None
    own = code[code["file"] == kfile] if kfile else code.iloc[0:0]
    total = float(own["cycles"].sum())
    per_line = own.groupby("line").agg(cycles=("cycles", "sum"), calls=("call_count", "sum"))
    per_core = own.groupby(["line", "core"])["cycles"].sum().groupby("line").agg(["min", "max"])
    pipes = sim.pipes[sim.pipes["file"] == kfile] if kfile else sim.pipes.iloc[0:0]
    pipe_us: dict[int, dict[str, float]] = {}
    by_pipe = pipes.groupby(["line", "pipe"])["busy_us"].sum()
    for line, pipe, us in zip(
        by_pipe.index.get_level_values(0).tolist(),
        by_pipe.index.get_level_values(1).tolist(),
        by_pipe.tolist(),
        strict=True,
    ):
        pipe_us.setdefault(int(line), {})[str(pipe)] = float(us)
    mapping = c_to_source(line_map, cpp)
    groups: dict[tuple[int, ...], LineCost] = {}
    per_line = per_line.sort_values("cycles", ascending=False)
    rows = zip(
        per_line.index.astype("int64").tolist(),
        per_line["cycles"].tolist(),
        per_line["calls"].tolist(),
        per_core["min"].reindex(per_line.index).tolist(),
        per_core["max"].reindex(per_line.index).tolist(),
        strict=True,
    )
    for c_line, cycles, calls, lo, hi in rows:
        src, what = mapping.get(c_line, ((), NO_SOURCE))
        g = groups.get(src)
        if g is None:
            g = groups[src] = LineCost(src, what, 0.0, 0.0, 0.0, 0.0, 0.0)
        g.cycles += cycles
        g.call_count += calls
        g.core_min += lo
        g.core_max += hi
        g.ascendc.append(
            {"line": c_line, "cycles": cycles, "share": round(cycles / total, 6) if total else 0.0}
        )
        for pipe, us in pipe_us.get(c_line, {}).items():
            g.pipes[pipe] = g.pipes.get(pipe, 0.0) + us
    for g in groups.values():
        g.share = g.cycles / total if total else 0.0
    others = code[code["file"] != kfile] if kfile else code
    heads = others.groupby(["file", "line"])["cycles"].sum().sort_values(ascending=False).head(20)
    other_rows = [
        {"file": str(f), "line": int(n), "cycles": float(c)}
        for f, n, c in zip(
            heads.index.get_level_values(0).tolist(),
            heads.index.get_level_values(1).tolist(),
            heads.tolist(),
            strict=True,
        )
    ]
    return LinesReport(
        kfile,
        total,
        len(sim.cores),
        sorted(groups.values(), key=lambda g: -g.cycles),
        other_rows,
        _instructions(sim.instr),
        _sync(sim.instr),
        list(sim.notes),
    )


def _instructions(instr: pd.DataFrame, top: int = 30) -> list[dict[str, Any]]:
    if instr.empty:
        return []
    g = instr.groupby(["pipe", "instr"]).agg(cycles=("cycles", "sum"), count=("call_count", "sum"))
    out = g.sort_values("cycles", ascending=False).head(top).reset_index()
    return [
        {"pipe": str(p), "instr": str(i), "cycles": round(float(c), 3), "count": round(float(n), 3)}
        for p, i, c, n in zip(out["pipe"], out["instr"], out["cycles"], out["count"], strict=True)
    ]


def _sync(instr: pd.DataFrame) -> dict[str, float]:
    if instr.empty:
        return {}
    names = instr["instr"].astype(str).str.extract(SYNC_INSTR, expand=False).str.upper()
    counts = instr["call_count"].groupby(names).sum()
    return {str(k): float(v) for k, v in counts.items()}


def bundle_line_map(bundle: Path) -> tuple[list[dict[str, Any]], str | None]:
    """A bundle's line map (ir/ir.json) and generated Ascend C (ir/kernel.cpp), empty when absent."""
    try:
        ir = json.loads((bundle / "ir" / "ir.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        ir = {}
    cpp_path = bundle / "ir" / "kernel.cpp"
    cpp = cpp_path.read_text(encoding="utf-8", errors="replace") if cpp_path.is_file() else None
    line_map = ir.get("line_map") if isinstance(ir, dict) else None
    return (list(line_map) if isinstance(line_map, list) else []), cpp


_CACHE = "_line_costs"
# lines a report (JSON `lines`, the Markdown / HTML / terminal section) carries; `tilescope lines`
# gives them all
REPORT_LINES = 10


def profile_lines(profile: Profile) -> LinesReport | None:
    """The per-line report of a profile's simulator output (a bundle's, `Profile.simulator`),
    computed once per profile; None without one."""
    if _CACHE in profile.__dict__:
        cached: LinesReport | None = profile.__dict__[_CACHE]
        return cached
    report = None
    sim = profile.simulator
    if isinstance(sim, SimulatorData) and len(sim.code):
        line_map = (profile.ir or {}).get("line_map")
        cpp = None
        if profile.ir_dir is not None and (profile.ir_dir / "kernel.cpp").is_file():
            cpp = (profile.ir_dir / "kernel.cpp").read_text(encoding="utf-8", errors="replace")
        report = line_costs(sim, line_map if isinstance(line_map, list) else [], cpp)
    profile.__dict__[_CACHE] = report
    return report


def lines_section(profile: Profile, top: int = REPORT_LINES) -> dict[str, Any] | None:
    """The report's `lines` section: the hottest `top` line groups of the profile's simulator
    output with the Ascend C lines under each (docs/lines.md), or None."""
    report = profile_lines(profile)
    if report is None:
        return None
    full = report.to_dict()
    sim = profile.simulator
    return {
        "source": "msprof op simulator",
        "simulator": str(sim.root) if isinstance(sim, SimulatorData) else None,
        "mapped": bool((profile.ir or {}).get("line_map")),
        "kernel_file": full["kernel_file"],
        "total_cycles": full["total_cycles"],
        "cores": full["cores"],
        "lines": full["lines"][:top],
        "more_lines": max(0, len(full["lines"]) - top),
        "sync": full["sync"],
        "notes": full["notes"],
    }
