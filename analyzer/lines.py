"""Measured cost per source line: the simulator's cycles per Ascend C line, rolled up to the TileLang
lines of a bundle's line map (tilescope.ir.linemap), with the pipe split and the spread over cores.

The ranking quantity (`LinesReport.metric`) is cycles where the source measured them (the
simulator's CSVs or visualize_data.bin) and instructions executed where it did not (a board's Source
mode counts no cycles); "cycles" below reads as that quantity, and what was not measured is None.

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
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tilescope.io.simulator import SimulatorData
from tilescope.lines_sync import LineSync, place_sync, sync_lines, sync_names, unplaced_note
from tilescope.profile import Profile

# Example: "__simt_vf__ __launch_bounds__(64) inline void flash_fwd_kernel_simt_vf_3(" starts a function
_VF_DEF = re.compile(r"__simt_vf__.*\bvoid\s+\w+\s*\(")
NO_SOURCE = "(no TileLang line)"


@dataclass
class LineCost:
    """One TileLang line (or group of lines sharing Ascend C code) and the Ascend C lines under it.

    `value` is the quantity lines are ranked by (`LinesReport.metric`): cycles where the source
    measured them, else instructions executed (a board's Source mode); a quantity the source did not
    measure is None, never 0."""

    source_lines: tuple[int, ...]  # empty: Ascend C lines no TileLang line maps to
    what: str
    value: float
    share: float
    core_min: float
    core_max: float
    call_count: float | None
    cycles: float | None = None
    instructions_executed: float | None = None
    stall_cycles: float | None = None
    pipes: dict[str, float] = field(default_factory=dict)  # pipe -> busy µs (traces)
    # pipe -> the metric, from a visualize_data.bin's instructions (each names its line and pipe)
    pipes_instr: dict[str, float] = field(default_factory=dict)
    ascendc: list[dict[str, Any]] = field(default_factory=list)  # line, cycles, share, ...
    # sync instructions placed on its Ascend C lines (tilescope.lines_sync), summed over cores:
    # name -> executions, name -> cycles, waiting pipe -> cycles spent waiting
    sync: dict[str, float] = field(default_factory=dict)
    sync_cycles: dict[str, float] = field(default_factory=dict)
    wait_cycles: dict[str, float] = field(default_factory=dict)

    @property
    def total_wait(self) -> float:
        return sum(self.wait_cycles.values())

    def to_dict(self, metric: str = "cycles") -> dict[str, Any]:
        per_core = metric == "cycles"  # a board's one "ALL" core has no spread
        return {
            "source_lines": list(self.source_lines),
            "what": self.what,
            "cycles": _round(self.cycles, 3),
            "share": round(self.share, 6),
            "core_min_cycles": round(self.core_min, 3) if per_core else None,
            "core_max_cycles": round(self.core_max, 3) if per_core else None,
            "call_count": _round(self.call_count, 3),  # None: the source counts no line executions
            "instructions_executed": _round(self.instructions_executed, 3),
            "stall_cycles": _round(self.stall_cycles, 3),
            "pipes_us": {k: round(v, 4) for k, v in self.pipes.items()},
            "pipes_instr": {k: round(v, 3) for k, v in self.pipes_instr.items()},
            "ascendc": self.ascendc,
            "sync": {k: round(v, 3) for k, v in sorted(self.sync.items())},
            "sync_cycles": {k: round(v, 3) for k, v in sorted(self.sync_cycles.items())},
            "wait_cycles": {k: round(v, 3) for k, v in sorted(self.wait_cycles.items())},
        }

    def add_sync(self, s: LineSync) -> None:
        pairs = ((self.sync, s.count), (self.sync_cycles, s.cycles), (self.wait_cycles, s.wait_cycles))
        for into, part in pairs:
            for k, v in part.items():
                into[k] = into.get(k, 0.0) + v


def compact_lines(source_lines: Iterable[int]) -> str:
    """A line group in few characters, for a hover or a diff cause: "l.41,44"."""
    return "l." + ",".join(str(n) for n in source_lines)


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None or math.isnan(value) else round(value, digits)


@dataclass
class LinesReport:
    kernel_file: str | None
    total_cycles: float | None
    cores: int
    lines: list[LineCost]
    other_files: list[dict[str, Any]]  # header lines, inclusive in their callers: never added
    instructions: list[dict[str, Any]]  # per (pipe, instr): cycles, count, summed over cores
    sync: dict[str, float]  # sync/barrier instructions executed, by name
    notes: list[str]
    metric: str = "cycles"  # what lines are ranked by and shares are of
    measures: tuple[str, ...] = ("cycles",)
    source_kind: str = ""
    total_instructions_executed: float | None = None
    sync_cycles: dict[str, float] = field(default_factory=dict)  # the same instructions' cycles
    instruction_cycles: float | None = None  # every instruction's cycles, summed over cores
    # the Ascend C lines with sync instructions, most wait cycles first (tilescope.lines_sync)
    sync_lines: list[dict[str, Any]] = field(default_factory=list)
    wait_cycles: dict[str, float] = field(default_factory=dict)  # waiting pipe -> cycles, whole kernel
    sync_unplaced_cycles: dict[str, float] = field(default_factory=dict)  # name -> cycles on no line
    sync_header_cycles: float = 0.0  # placed on library header lines (inside a kernel line's call)

    @property
    def sync_share(self) -> float | None:
        """Sync instructions' cycles as a share of every instruction's cycles (None: not measured)."""
        spent, every = sum(self.sync_cycles.values()), self.instruction_cycles
        return spent / every if every else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel_file": self.kernel_file,
            "total_cycles": _round(self.total_cycles, 3),
            "total_instructions_executed": _round(self.total_instructions_executed, 3),
            "metric": self.metric,
            "measures": list(self.measures),
            "source_kind": self.source_kind,
            "cores": self.cores,
            "lines": [x.to_dict(self.metric) for x in self.lines],
            "other_files": self.other_files,
            "instructions": self.instructions,
            "sync": self.sync,
            "sync_cycles": {k: round(v, 3) for k, v in self.sync_cycles.items()},
            "instruction_cycles": _round(self.instruction_cycles, 3),
            "sync_share": _round(self.sync_share, 6),
            "wait_cycles": {k: round(v, 3) for k, v in sorted(self.wait_cycles.items())},
            "sync_lines": self.sync_lines,
            "sync_unplaced_cycles": {k: round(v, 3) for k, v in sorted(self.sync_unplaced_cycles.items())},
            "sync_header_cycles": round(self.sync_header_cycles, 3),
            "notes": self.notes,
        }


def _is_header(path: str) -> bool:
    p = path.replace("\\", "/")
    return p.endswith((".h", ".hpp")) or "/include/" in p


def kernel_file(code: pd.DataFrame, metric: str = "cycles") -> str | None:
    files = code.loc[~code["file"].map(_is_header)]
    if files.empty:
        return None
    return str(files.groupby("file")[metric].sum().idxmax())


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


def ranking_metric(sim: SimulatorData) -> str:
    """Cycles where the source measured them; a board's Source mode counts instructions only."""
    return "cycles" if "cycles" in sim.measures else "instructions_executed"


def _per_line(sim: SimulatorData, own: pd.DataFrame, kfile: str | None, metric: str) -> pd.DataFrame:
    """One row per Ascend C line of the kernel file, hottest first: the metric summed over cores
    (`value`), its min and max per core, cycles, call counts, instructions executed, stall cycles,
    mean L2 hit rate."""
    g = own.groupby("line")
    cols = {c: own[c] if c in own else pd.Series(float("nan"), index=own.index) for c in _LINE_SUMS}
    table = pd.DataFrame({c: cols[c].groupby(own["line"]).sum(min_count=1) for c in _LINE_SUMS})
    table["value"] = g[metric].sum()
    spread = own.groupby(["line", "core"])[metric].sum().groupby("line").agg(["min", "max"])
    table["lo"], table["hi"] = spread["min"], spread["max"]
    table["l2_hit_rate"] = (
        own["l2_hit_rate"].groupby(own["line"]).mean() if "l2_hit_rate" in own else float("nan")
    )
    stalls = sim.stalls
    if stalls is not None and kfile is not None and len(stalls):
        mine = stalls[stalls["file"] == kfile]
        by_line = mine.groupby(mine["line"].astype("int64"))["stall_cycles"].sum()
        table["stall_cycles"] = by_line.reindex(table.index)
    else:
        table["stall_cycles"] = float("nan")
    return table.sort_values("value", ascending=False)


_LINE_SUMS = ("cycles", "call_count", "instructions_executed")


def _by_line_pipe(frame: pd.DataFrame, column: str) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    by_pipe = frame.groupby([frame["line"].astype("int64"), "pipe"])[column].sum()
    for line, pipe, v in zip(
        by_pipe.index.get_level_values(0).tolist(),
        by_pipe.index.get_level_values(1).tolist(),
        by_pipe.tolist(),
        strict=True,
    ):
        out.setdefault(int(line), {})[str(pipe)] = float(v)
    return out


def _pipe_us(sim: SimulatorData, kfile: str | None) -> dict[int, dict[str, float]]:
    """Busy µs per line and pipe, from the per-core traces."""
    return _by_line_pipe(sim.pipes[sim.pipes["file"] == kfile] if kfile else sim.pipes.iloc[0:0], "busy_us")


def _instr_pipes(sim: SimulatorData, kfile: str | None, metric: str) -> dict[int, dict[str, float]]:
    """The metric per line and pipe from a visualize_data.bin's instructions (they name their
    line): the pipe split where there are no traces."""
    instr = sim.instr
    if kfile is None or "file" not in instr or instr.empty:
        return {}
    mine = instr[(instr["file"] == kfile) & instr["line"].notna()]
    return _by_line_pipe(mine, "cycles" if metric == "cycles" else "call_count")


def _add(a: float | None, b: float) -> float | None:
    """Sums over Ascend C lines: a quantity no line measured stays None."""
    if math.isnan(b):
        return a
    return b if a is None else a + b


def _groups(
    table: pd.DataFrame,
    mapping: dict[int, tuple[tuple[int, ...], str]],
    pipes: tuple[dict[int, dict[str, float]], dict[int, dict[str, float]]],
    total: float,
) -> list[LineCost]:
    """Ascend C lines grouped under their TileLang lines; each its own group without a line map."""
    groups: dict[tuple[int, ...], LineCost] = {}
    pipe_us, instr_pipes = pipes
    for c_line, r in zip(table.index.astype("int64").tolist(), table.to_dict("records"), strict=True):
        src, what = mapping.get(c_line, ((), NO_SOURCE))
        key = src if mapping else (c_line,)
        g = groups.get(key)
        if g is None:
            g = groups[key] = LineCost(src, what, 0.0, 0.0, 0.0, 0.0, None)
        g.value += r["value"]
        g.core_min += r["lo"]
        g.core_max += r["hi"]
        g.call_count = _add(g.call_count, r["call_count"])
        g.cycles = _add(g.cycles, r["cycles"])
        g.instructions_executed = _add(g.instructions_executed, r["instructions_executed"])
        g.stall_cycles = _add(g.stall_cycles, r["stall_cycles"])
        g.ascendc.append(_ascendc_entry(c_line, r, total))
        for into, split in ((g.pipes, pipe_us), (g.pipes_instr, instr_pipes)):
            for pipe, v in split.get(c_line, {}).items():
                into[pipe] = into.get(pipe, 0.0) + v
    for g in groups.values():
        g.share = g.value / total if total else 0.0
    return sorted(groups.values(), key=lambda g: -g.value)


def _ascendc_entry(c_line: int, r: Mapping[Any, Any], total: float) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "line": c_line,
        "cycles": _round(r["cycles"], 3),
        "share": round(r["value"] / total, 6) if total else 0.0,
    }
    for key in ("instructions_executed", "stall_cycles", "l2_hit_rate"):
        value = _round(r[key], 3)
        if value is not None:  # only what the source measured (the CSVs' entries stay as they were)
            entry[key] = value
    return entry


def line_costs(
    sim: SimulatorData, line_map: Sequence[Mapping[str, Any]] = (), cpp: str | None = None
) -> LinesReport:
    """The per-line report of a simulator or Source-mode run (module docstring)."""
    code = sim.code
    metric = ranking_metric(sim)
    kfile = kernel_file(code, metric) if len(code) else None
    own = code[code["file"] == kfile] if kfile else code.iloc[0:0]
    total = float(own[metric].sum())
    table = _per_line(sim, own, kfile, metric)
    pipes = (_pipe_us(sim, kfile), _instr_pipes(sim, kfile, metric))
    mapping = c_to_source(line_map, cpp)
    lines = _groups(table, mapping, pipes, total)
    measured_cycles = "cycles" in sim.measures
    counted = "instructions_executed" in sim.measures
    instr_total = float(own["instructions_executed"].sum()) if counted else None
    report = LinesReport(
        kfile,
        total if measured_cycles else None,
        len(sim.cores),
        lines,
        _other_files(code, kfile, metric),
        _instructions(sim.instr, measured_cycles),
        _sync(sim.instr),
        list(sim.notes),
        metric,
        tuple(sorted(sim.measures)),
        sim.kind,
        instr_total,
        _sync(sim.instr, "cycles") if measured_cycles else {},
        _instr_cycles(sim.instr, measured_cycles),
    )
    _add_sync(report, sim, kfile, mapping, cpp)
    return report


def _add_sync(
    report: LinesReport,
    sim: SimulatorData,
    kfile: str | None,
    mapping: dict[int, tuple[tuple[int, ...], str]],
    cpp: str | None,
) -> None:
    """The sync instructions per line (tilescope.lines_sync) on the report and its line groups."""
    placement = place_sync(sim, kfile)
    if placement is None:
        return
    by_c_line = {int(a["line"]): g for g in report.lines for a in g.ascendc}
    for line, s in placement.by_line.items():
        if line in by_c_line:
            by_c_line[line].add_sync(s)
    report.sync_lines = sync_lines(placement, mapping, cpp, report.instruction_cycles)
    report.wait_cycles = placement.wait_by_pipe
    report.sync_unplaced_cycles = placement.unplaced
    report.sync_header_cycles = placement.header_cycles
    note = unplaced_note(placement)
    if note:
        report.notes.append(note)


def _other_files(code: pd.DataFrame, kfile: str | None, metric: str) -> list[dict[str, Any]]:
    others = code[code["file"] != kfile] if kfile else code
    heads = others.groupby(["file", "line"])[metric].sum().sort_values(ascending=False).head(20)
    rows = []
    for f, n, v in zip(
        heads.index.get_level_values(0).tolist(),
        heads.index.get_level_values(1).tolist(),
        heads.tolist(),
        strict=True,
    ):
        row: dict[str, Any] = {"file": str(f), "line": int(n), "cycles": None}
        row[metric] = float(v)  # the CSVs' rows stay {file, line, cycles}
        rows.append(row)
    return rows


def _instructions(instr: pd.DataFrame, measured_cycles: bool = True, top: int = 30) -> list[dict[str, Any]]:
    """The costliest instructions, summed over cores: by cycles, or by count where no cycles were
    measured (cycles None then)."""
    if instr.empty:
        return []
    extra = {"stall_cycles": ("stall_cycles", "sum")} if "stall_cycles" in instr else {}
    g = instr.groupby(["pipe", "instr"]).agg(cycles=("cycles", "sum"), count=("call_count", "sum"), **extra)
    out = g.sort_values("cycles" if measured_cycles else "count", ascending=False).head(top).reset_index()
    rows = []
    for r in out.to_dict("records"):
        row = {
            "pipe": str(r["pipe"]),
            "instr": str(r["instr"]),
            "cycles": round(float(r["cycles"]), 3) if measured_cycles else None,
            "count": round(float(r["count"]), 3),
        }
        if extra and instr["stall_cycles"].notna().any():
            row["stall_cycles"] = round(float(r["stall_cycles"]), 3)
        rows.append(row)
    return rows


def _sync(instr: pd.DataFrame, column: str = "call_count") -> dict[str, float]:
    """Sync/barrier instructions by name: executions (`call_count`) or their `cycles`."""
    if instr.empty or column not in instr:
        return {}
    names = sync_names(instr["instr"])
    counts = instr[column].groupby(names).sum()
    return {str(k): float(v) for k, v in counts.items()}


def _instr_cycles(instr: pd.DataFrame, measured_cycles: bool) -> float | None:
    """All instructions' cycles summed over cores (what the sync cycles are a share of)."""
    if not measured_cycles or instr.empty or "cycles" not in instr:
        return None
    return float(instr["cycles"].sum())


def bundle_line_map(bundle: Path) -> tuple[list[dict[str, Any]], str | None]:
    """A bundle's line map (ir/ir.json) and generated Ascend C (ir/kernel.cpp), empty when absent."""
    try:
        ir = json.loads((bundle / "ir" / "ir.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        ir = {}
    line_map = ir.get("line_map") if isinstance(ir, dict) else None
    return (list(line_map) if isinstance(line_map, list) else []), kernel_cpp(bundle / "ir")


def kernel_cpp(ir_dir: Path | None) -> str | None:
    """A bundle's generated Ascend C (ir/kernel.cpp), None when absent."""
    path = ir_dir / "kernel.cpp" if ir_dir is not None else None
    return path.read_text(encoding="utf-8", errors="replace") if path is not None and path.is_file() else None


_CACHE = "_line_costs"
# lines a report (JSON `lines`, the Markdown / HTML / terminal section) carries; `tilescope lines`
# gives them all
REPORT_LINES = 10
SYNC_LINES = 5  # the sync lines a report carries (most wait cycles first)


def profile_lines(profile: Profile) -> LinesReport | None:
    """The per-line report of a profile's simulator output (a bundle's, `Profile.simulator`),
    computed once per profile; None without one."""
    if _CACHE in profile.__dict__:
        cached: LinesReport | None = profile.__dict__[_CACHE]
        return cached
    report = None
    sim = profile.simulator
    # an output trimmed to its instruction CSVs has no line, but its sync share is still measured
    if isinstance(sim, SimulatorData) and (len(sim.code) or len(sim.instr)):
        line_map = (profile.ir or {}).get("line_map")
        report = line_costs(sim, line_map if isinstance(line_map, list) else [], kernel_cpp(profile.ir_dir))
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
        "source": full["source_kind"] or "msprof op simulator",
        "simulator": str(sim.root) if isinstance(sim, SimulatorData) else None,
        "mapped": bool((profile.ir or {}).get("line_map")),
        "metric": full["metric"],
        "kernel_file": full["kernel_file"],
        "total_cycles": full["total_cycles"],
        "total_instructions_executed": full["total_instructions_executed"],
        "cores": full["cores"],
        "lines": full["lines"][:top],
        "more_lines": max(0, len(full["lines"]) - top),
        "sync": full["sync"],
        "sync_share": full["sync_share"],
        "wait_cycles": full["wait_cycles"],
        "sync_lines": full["sync_lines"][:SYNC_LINES],
        "notes": full["notes"],
    }
