"""Sync and barrier instructions per source line (issue #25): how often SET_FLAG / WAIT_FLAG /
PIPE_BARRIER (and the other sync instructions the simulator names) ran on each Ascend C line, their
cycles, and the cycles each pipe spent waiting in them.

Where each number comes from (docs/lines.md, "Sync and barrier waits"):
- The instruction CSV (`*_instr_exe.csv`) has one row per instruction address and core: its name,
  pipe (for a WAIT_FLAG or a barrier, the pipe that waited), executions and cycles. It names no line.
- An address is placed on a line by what names both: a per-core trace event with `pc_addr` and
  `code` (every X instruction, and a SET_FLAG's `B` event), or a visualize_data.bin instruction
  (`Address`, `AscendC Inner Code`), which lists WAIT_FLAGs too. A bin alone names the line of
  each of its instructions directly.
- The traces' WAIT_FLAG is an `E` event with no args: it names the waiting pipe and the flag id
  that pairs it with its SET_FLAG, not an address or a line. So without a bin (or another event at
  the same address) a WAIT_FLAG's line is unknown; it is counted as "not placed on a line", and the
  report says so rather than guessing from the SET_FLAG it pairs with.
- A sync line is almost never a TileLang line of its own (TileLang inserts the flags between the
  statements it lowers): each is listed with its Ascend C text and the statement that follows it in
  the kernel source (`before`): the statement the flag or barrier orders, by code order, which is a
  fact of the generated code, not a measurement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tilescope.io.simulator import SimulatorData
from tilescope.io.simulator_trace import parse_addr

# Example: "SET_FLAG", "WAIT_FLAG", "PIPE_BARRIER", "BARRIER", "SET_FLAG_DEV", "WAIT_FLAG_DEV",
# "SET_CROSS_CORE", "WAIT_INTRA_BLOCK", "FFTS_CROSS_CORE_SYNC" (a bin's mnemonic, or the CSV's `instr`)
SYNC_INSTR = re.compile(
    r"^((?:SET|WAIT)_(?:FLAG|CROSS_CORE|INTRA_BLOCK|EVENT)\w*|(?:PIPE_)?BARRIER|FFTS_CROSS_CORE_SYNC)\b",
    re.I,
)
# Example: "WAIT_FLAG", "PIPE_BARRIER": instructions that hold their pipe until something else is done
_WAITS = re.compile(r"^WAIT_|BARRIER", re.I)
TEXT_CHARS = 80  # an Ascend C sync line as shown: "asc_sync_wait(PIPE_MTE2, PIPE_MTE1, ...)"


def sync_names(instr: pd.Series) -> pd.Series:
    """Each instruction's sync name (upper case), NaN for an instruction that is not a sync one."""
    return instr.astype(str).str.extract(SYNC_INSTR, expand=False).str.upper()


def is_wait(name: str) -> bool:
    return bool(_WAITS.search(name))


@dataclass
class LineSync:
    """The sync instructions of one Ascend C line, summed over cores."""

    line: int
    count: dict[str, float] = field(default_factory=dict)  # name -> executions
    cycles: dict[str, float] = field(default_factory=dict)  # name -> cycles
    wait_cycles: dict[str, float] = field(default_factory=dict)  # waiting pipe -> cycles
    waited_by: dict[str, float] = field(default_factory=dict)  # flags set here: waiting pipe -> pairs

    @property
    def total_cycles(self) -> float:
        return sum(self.cycles.values())

    @property
    def total_wait(self) -> float:
        return sum(self.wait_cycles.values())


@dataclass
class SyncPlacement:
    """Every sync instruction of a run: per kernel line, and what could not be put on one."""

    by_line: dict[int, LineSync]
    header_cycles: float  # placed on a library header line (inside a kernel line's call)
    unplaced: dict[str, float]  # name -> cycles of instructions whose line the data does not say
    wait_by_pipe: dict[str, float]  # waiting pipe -> cycles, whole kernel (placed or not)


def _placed(sync: pd.DataFrame, addr_lines: pd.DataFrame | None) -> pd.DataFrame:
    """The sync rows with `file` and `line` where the data names them: the row's own (a bin), else
    its address on its core, else its address on any core when that address has one line only."""
    if "file" in sync and sync["file"].notna().any():
        return sync
    out = sync.drop(columns=[c for c in ("file", "line") if c in sync]).reset_index(drop=True)
    out["addr_int"] = out["addr_int"].astype("Int64")
    if addr_lines is None or addr_lines.empty:
        return out.assign(file=None, line=float("nan"))
    lines = addr_lines.astype({"addr": "Int64", "core": str}).drop_duplicates(
        ["core", "addr", "file", "line"]
    )
    own = lines.drop_duplicates(["core", "addr"], keep=False)  # one line per (core, addr)
    anywhere = lines.drop_duplicates(["addr", "file", "line"]).drop_duplicates("addr", keep=False)
    by_core = out.merge(own.rename(columns={"addr": "addr_int"}), on=["core", "addr_int"], how="left")
    by_addr = out.merge(
        anywhere.drop(columns="core").rename(columns={"addr": "addr_int"}), on="addr_int", how="left"
    )
    found = by_core["file"].notna()
    out["file"] = by_core["file"].where(found, by_addr["file"])
    out["line"] = by_core["line"].where(found, by_addr["line"]).astype("float64")
    return out


def place_sync(sim: SimulatorData, kfile: str | None) -> SyncPlacement | None:
    """The sync instructions of `sim` on the kernel file's lines (module docstring); None when the
    run has no instruction data."""
    instr = sim.instr
    if instr.empty or "instr" not in instr:
        return None
    names = sync_names(instr["instr"])
    sync = instr.loc[names.notna()].assign(name=names[names.notna()])
    if sync.empty:
        return SyncPlacement({}, 0.0, {}, {})
    sync = sync.assign(addr_int=sync["addr"].map(parse_addr))
    placed = _placed(sync, sim.addr_lines)
    cycles = pd.to_numeric(placed["cycles"], errors="coerce").fillna(0.0)
    count = pd.to_numeric(placed["call_count"], errors="coerce").fillna(0.0)
    waits = placed["name"].map(is_wait)
    wait_by_pipe = cycles[waits].groupby(placed.loc[waits, "pipe"].astype(str)).sum()
    own = placed["file"].notna() & (placed["file"] == kfile)
    known = placed["file"].notna() & placed["line"].notna()
    by_line: dict[int, LineSync] = {}
    for (line, name, pipe), c, n in zip(
        zip(placed.loc[own, "line"], placed.loc[own, "name"], placed.loc[own, "pipe"], strict=True),
        cycles[own],
        count[own],
        strict=True,
    ):
        entry = by_line.setdefault(int(line), LineSync(int(line)))
        entry.count[name] = entry.count.get(name, 0.0) + float(n)
        entry.cycles[name] = entry.cycles.get(name, 0.0) + float(c)
        if is_wait(name):
            entry.wait_cycles[str(pipe)] = entry.wait_cycles.get(str(pipe), 0.0) + float(c)
    _add_flag_pairs(by_line, sim.flags, kfile)
    unplaced = cycles[~known].groupby(placed.loc[~known, "name"]).sum()
    return SyncPlacement(
        by_line,
        float(cycles[known & ~own].sum()),
        {str(k): float(v) for k, v in unplaced.items()},
        {str(k): float(v) for k, v in wait_by_pipe.items()},
    )


def _add_flag_pairs(by_line: dict[int, LineSync], flags: pd.DataFrame | None, kfile: str | None) -> None:
    """The traces' SET_FLAG/WAIT_FLAG pairs: on the setting line, which pipe waited and how often."""
    if flags is None or flags.empty or kfile is None:
        return
    mine = flags[(flags["file"] == kfile) & flags["line"].notna()]
    for line, pipe, pairs in zip(mine["line"], mine["wait_pipe"], mine["pairs"], strict=True):
        entry = by_line.setdefault(int(line), LineSync(int(line)))
        entry.waited_by[str(pipe)] = entry.waited_by.get(str(pipe), 0.0) + float(pairs)


def _next_statement(
    line: int, mapping: dict[int, tuple[tuple[int, ...], str]], cpp_lines: list[str]
) -> int | None:
    """The first Ascend C line after `line` that the line map carries to a TileLang line, within the
    same block (stopping at a closing brace of a shallower block): what the flag orders."""
    depth = 0
    for n in range(line + 1, min(len(cpp_lines), line + 40) + 1):
        text = cpp_lines[n - 1]
        if n in mapping:
            return n
        depth += text.count("{") - text.count("}")
        if depth < 0:
            return None
    return None


def sync_lines(
    placement: SyncPlacement,
    mapping: dict[int, tuple[tuple[int, ...], str]],
    cpp: str | None,
    total_cycles: float | None,
) -> list[dict[str, Any]]:
    """Each Ascend C line with sync instructions, most wait cycles first (then most sync cycles,
    then most flag pairs): the JSON `sync_lines` of `tilescope lines` (docs/lines.md)."""
    cpp_lines = cpp.splitlines() if cpp else []
    rows = []
    for s in placement.by_line.values():
        src, what = mapping.get(s.line, ((), ""))
        text = cpp_lines[s.line - 1].strip()[:TEXT_CHARS] if 0 < s.line <= len(cpp_lines) else None
        row: dict[str, Any] = {
            "line": s.line,
            "text": text,
            "source_lines": list(src),
            "what": what,
            "sync": {k: round(v, 3) for k, v in sorted(s.count.items())},
            "sync_cycles": {k: round(v, 3) for k, v in sorted(s.cycles.items())},
            "wait_cycles": {k: round(v, 3) for k, v in sorted(s.wait_cycles.items())},
            "waited_by": {k: round(v, 3) for k, v in sorted(s.waited_by.items())},
            "share_of_instruction_cycles": round(s.total_cycles / total_cycles, 6) if total_cycles else None,
            "before": None,
        }
        after = _next_statement(s.line, mapping, cpp_lines) if not src and cpp_lines else None
        if after is not None:
            b_src, b_what = mapping[after]
            row["before"] = {"ascendc_line": after, "source_lines": list(b_src), "what": b_what}
        rows.append((s.total_wait, s.total_cycles, sum(s.waited_by.values()), -s.line, row))
    rows.sort(key=lambda r: r[:4], reverse=True)
    return [r[-1] for r in rows]


def unplaced_note(placement: SyncPlacement) -> str | None:
    """What the data cannot place, said instead of guessed."""
    cycles = sum(placement.unplaced.values())
    if cycles <= 0:
        return None
    names = ", ".join(f"{k} {v:,.0f}" for k, v in sorted(placement.unplaced.items(), key=lambda kv: -kv[1]))
    return (
        f"sync cycles not placed on a line ({names}): the instruction CSV names addresses, not lines, "
        "and no trace event or visualize_data.bin names these addresses' lines (a WAIT_FLAG's trace "
        "event carries none); which line waited is not in the data (docs/lines.md)"
    )
