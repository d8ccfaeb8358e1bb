"""Measured cost per line on the IR view's panes (#25): the dashboard's form of `tilescope lines`.

A bundle whose profile/ holds per-line data (an `msprof op simulator` run, or a board's Source
mode) measures its kernel per Ascend C line; tilescope.lines groups those lines under the TileLang
lines the line map carries them to. Here each pane gets a share per line, drawn as a bar behind the
line with its value at the right (dashboard/assets/ir_view.js):

- Ascend C: each measured line of the kernel's kernel.cpp, its share of the kernel's total, and for
  a line with sync instructions their executions, cycles and the pipes' wait cycles
  (tilescope.lines_sync: the same words `tilescope lines` prints);
- Kernel source: each TileLang line, its group's share (lines that share Ascend C code share one
  value: the simulator cannot split it, so the label names the group);
- TVMScript (before lowering): the TileLang line's share on the line the line map pairs it with.

The shares are the ones `tilescope lines` and the report print (one computation: profile_lines).
Nothing is drawn on the lowered TVMScript, which no measured line maps to, nor on an Ascend C pane
that is not the bundle's ir/kernel.cpp (the file the measured lines are read against).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tilescope.dashboard.ir_view import Stage
from tilescope.lines import LineCost, LinesReport, profile_lines
from tilescope.profile import Profile
from tilescope.text.sync_words import amount_words
from tilescope.text.words import METRIC_WORDS, fmt_pct

MEASURED_CPP = "kernel.cpp"  # the Ascend C the per-line data is mapped with (tilescope.lines.kernel_cpp)


def apply_heat(stages: Sequence[Stage], profile: Profile, kernel: str | None) -> str | None:
    """Set `heat` on the panes the measured lines map to; returns the info line's sentence about
    it (None when the profile has no per-line data or the panes are another kernel's)."""
    report = profile_lines(profile)
    if report is None or not report.lines:
        return None
    unit = METRIC_WORDS.get(report.metric, report.metric)
    source = _source_heat(report.lines, unit)
    by_stage = {
        "ascendc": _ascendc_heat(report, unit),
        "source": source,
        "tvmscript": _tvmscript_heat(source, (profile.ir or {}).get("line_map") or [], kernel),
    }
    for stage in stages:
        if stage.stage != "ascendc" or Path(stage.file).name == MEASURED_CPP:
            stage.heat = by_stage.get(stage.stage, {})
    top = report.lines[0]
    where = _group_name(top) if top.source_lines else f"Ascend C line {top.ascendc[0]['line']}"
    by = _source_name(report)
    return f"Measured per line by {by}: the hottest is {where}, {fmt_pct(top.share)} of {unit}."


def _source_name(report: LinesReport) -> str:
    return report.source_kind or "msprof op simulator"


def _group_name(g: LineCost) -> str:
    lines = ", ".join(str(n) for n in g.source_lines)
    return f"TileLang line {lines}" if len(g.source_lines) == 1 else f"TileLang lines {lines} together"


def _label(share: float, value: float | None, unit: str, group: str = "") -> str:
    amount = f" · {value:,.0f} {unit}" if value is not None else ""
    return f"{fmt_pct(share)} of {unit}{amount}{' · ' + group if group else ''}"


def _source_heat(lines: Iterable[LineCost], unit: str) -> dict[int, tuple[float, str]]:
    heat: dict[int, tuple[float, str]] = {}
    for g in lines:
        together = _group_name(g) if len(g.source_lines) > 1 else ""
        sync = ", ".join(
            f"{k} {g.sync[k]:,.0f}×, {g.sync_cycles.get(k, 0):,.0f} cycles" for k in sorted(g.sync)
        )
        for n in g.source_lines:
            label = _label(g.share, g.value, unit, together)
            heat[n] = (g.share, f"{label} · sync: {sync}" if sync else label)
    return heat


def _ascendc_heat(report: LinesReport, unit: str) -> dict[int, tuple[float, str]]:
    key = "cycles" if report.metric == "cycles" else "instructions_executed"
    sync = {int(r["line"]): amount_words(r) for r in report.sync_lines}
    heat: dict[int, tuple[float, str]] = {}
    for g in report.lines:
        for entry in g.ascendc:
            share = float(entry.get("share") or 0.0)
            line = int(entry["line"])
            label = _label(share, entry.get(key), unit)
            heat[line] = (share, f"{label} · sync: {sync[line]}" if line in sync else label)
    return heat


def _tvmscript_heat(
    source: Mapping[int, tuple[float, str]], line_map: Iterable[Any], kernel: str | None
) -> dict[int, tuple[float, str]]:
    """A TileLang line's value on the TVMScript line the line map pairs it with."""
    heat: dict[int, tuple[float, str]] = {}
    for entry in line_map:
        if not isinstance(entry, dict) or (kernel and entry.get("kernel") not in (None, kernel)):
            continue
        src, tvm = entry.get("source_line"), entry.get("tvmscript_line")
        if isinstance(src, int) and isinstance(tvm, int) and src in source:
            share, label = source[src]
            heat[tvm] = (share, f"{label} · from TileLang line {src}")
    return heat
