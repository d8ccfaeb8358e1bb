"""The report's measured-lines section (`report["lines"]`, tilescope.lines.lines_section) in the
words every format shows it with: one row per TileLang line group, hottest first, so the terminal,
Markdown and HTML say the same thing about the same line (docs/lines.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tilescope.text.sync_words import amount_words, where_words
from tilescope.text.words import fmt_pct

TITLE = "Where the time goes inside the kernel"
# a board's Source mode counts instructions, not time: its section says so in its title too
BOARD_TITLE = "Where the instructions go inside the kernel"
# The simulator is a model: every view says so beside its numbers, not in a footnote elsewhere.
SOURCE_NOTE = "msprof op simulator: a model of the chip, not a board measurement"
SHOWN = 5


@dataclass(frozen=True)
class LineRow:
    share: str  # "48.3 %"
    cycles: str  # "53,760": the section's metric (cycles, or a board's instructions executed)
    per_core: str  # "25,600–28,160"; "" where the source has no per-core values (a board)
    where: str  # "l.50" / "l.41, 44" / "(no TileLang line)" / "kernel.cpp:101"
    what: str
    pipes: str  # "CUBE 100 %"
    ascendc: str  # "101, 102"


def lines_of(report: Mapping[str, Any]) -> Mapping[str, Any] | None:
    section = report.get("lines")
    return section if isinstance(section, Mapping) and section.get("lines") else None


def board(section: Mapping[str, Any]) -> bool:
    """A board's Source mode: instructions executed, all cores together, no cycles per line."""
    return section.get("metric") == "instructions_executed"


def heading(section: Mapping[str, Any]) -> str:
    """'111,270 cycles over 4 simulated cores (msprof op simulator: …)', or a board run's
    instruction count under its own name."""
    if board(section):
        return (
            f"{float(section.get('total_instructions_executed') or 0):,.0f} instructions executed, all "
            f"cores together ({section.get('source')}: instruction counts, not cycles)"
        )
    return (
        f"{float(section.get('total_cycles') or 0):,.0f} cycles over {int(section.get('cores') or 0)} "
        f"simulated cores ({SOURCE_NOTE})"
    )


def title(section: Mapping[str, Any]) -> str:
    return BOARD_TITLE if board(section) else TITLE


def quantity(section: Mapping[str, Any]) -> str:
    """The column the rows' `cycles` field holds: 'cycles' or 'instructions'."""
    return "instructions" if board(section) else "cycles"


def pipe_shares(item: Mapping[str, Any]) -> tuple[list[tuple[str, float]], bool]:
    """A line's pipes with their share of its pipe amount, largest first, and whether they come
    from a visualize_data.bin's instructions (its own metric per pipe) rather than trace time."""
    traced = {str(k): float(v) for k, v in (item.get("pipes_us") or {}).items()}
    pipes = traced or {str(k): float(v) for k, v in (item.get("pipes_instr") or {}).items()}
    busy = sum(pipes.values())
    if busy <= 0:
        return [], False
    return [(name, v / busy) for name, v in sorted(pipes.items(), key=lambda kv: -kv[1])], not traced


def _pipes(item: Mapping[str, Any]) -> str:
    shares, _ = pipe_shares(item)
    if not shares:
        return "no traced instructions"
    return ", ".join(f"{name} {fmt_pct(share, 0)}" for name, share in shares[:3])


def line_rows(section: Mapping[str, Any], limit: int = SHOWN) -> list[LineRow]:
    """The first `limit` line groups as display strings (the section is hottest first)."""
    mapped = bool(section.get("mapped"))
    value = "instructions_executed" if board(section) else "cycles"
    rows = []
    for item in list(section.get("lines") or [])[:limit]:
        src = [int(n) for n in item.get("source_lines") or []]
        c_lines = [int(a["line"]) for a in item.get("ascendc") or []]
        if src:
            where = "l." + ", ".join(str(n) for n in src)
        elif mapped:
            where = str(item.get("what") or "")
        else:
            where = "Ascend C " + ", ".join(str(n) for n in c_lines[:3])
        rows.append(
            LineRow(
                share=fmt_pct(item.get("share"), 1),
                cycles=f"{float(item.get(value) or 0):,.0f}",
                per_core=(
                    f"{float(item.get('core_min_cycles') or 0):,.0f}–"
                    f"{float(item.get('core_max_cycles') or 0):,.0f}"
                    if item.get("core_min_cycles") is not None
                    else ""
                ),
                where=where,
                what=str(item.get("what") or "") if src else "",
                pipes=_pipes(item),
                ascendc=", ".join(str(n) for n in c_lines[:6]) + (" …" if len(c_lines) > 6 else ""),
            )
        )
    return rows


def left_out(section: Mapping[str, Any], limit: int = SHOWN) -> int:
    """Line groups not shown: beyond `limit` here, plus those the report itself left out."""
    return max(0, len(section.get("lines") or []) - limit) + int(section.get("more_lines") or 0)


def sync_sentence(section: Mapping[str, Any]) -> str | None:
    """'Sync and barrier instructions: 8.7 % of the instruction cycles; most waiting: Ascend C 96
    `asc_sync_wait(…)` before l.49 (…): WAIT_FLAG 64×, 1,920 cycles; …' (tilescope.lines_sync), or
    None when the run measured no sync cycles."""
    share = section.get("sync_share")
    if share is None:
        return None
    text = f"Sync and barrier instructions: {fmt_pct(share, 1)} of the instruction cycles"
    rows = list(section.get("sync_lines") or [])
    if rows:
        most = "most waiting" if rows[0].get("wait_cycles") else "most sync cycles (no wait placed on a line)"
        text += f"; {most}: {where_words(rows[0])}: {amount_words(rows[0])}"
    return text + "."
