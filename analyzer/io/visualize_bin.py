"""`visualize_data.bin`, the per-line and per-instruction file that `msprof op simulator` and the
board's Source mode (`msprof op --aic-metrics=Source`, kernel built with `-g`) write for MindStudio
Insight (docs/internals.md "Input", formats doc §2.3-2.4).

Layout (msopprof `csrc/op_profiling/common/visualize.{h,cpp}` writes it; msinsight
`server/src/modules/source/parser/SourceFileParser.cpp` reads it): blocks one after another, each a
12-byte little-endian header — u64 size of the body (the content plus its zero padding to 4 bytes;
the header is not counted), u8 type, u8 padding count, u8 version, u8 reserved (both 0x5A by
default) — then the body. A source block (0x01) has a 4096-byte NUL-padded path between header and
body that the size does not count either. Type 0x03 is JSON with `Cores` and `Files[]` (`Source`,
`Lines[]`: `Line`, `Address Range`, `Cycles[]`, `Instructions Executed[]`, ...), 0x04 JSON with
`Cores` and `Instructions[]` (`Address`, `AscendC Inner Code` = "file:line", `Pipe`, `Source` = the
disassembly, `Cycles[]`, `Instructions Executed[]`, `RealStallCycles[]`, ...); arrays follow `Cores`,
and a single value stands for every core. The 0x04 block's version byte says how instructions map
to lines: 0 by `AscendC Inner Code`, 0x5A (older) by the lines' address ranges. Other types (trace,
operator details, roofline, cache heat map, stall reasons) are not per-line data and are skipped,
as are types no reader knows (MindStudio Insight indexes and ignores them too).

What the two writers measure differs, and the tables say so (`SimulatorData.measures`): the
simulator writes per-core `Cycles`, `Instructions Executed` and (when simulated) `RealStallCycles`;
the board writes `Cores: ["ALL"]` with `Instructions Executed` and, on A2/A3, an `L2Cache Hit Rate`
in per cent (-1: no L2 access) — no cycles. A board's instruction counts are never cycles.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tilescope.errors import ProfileFormatError
from tilescope.io.simulator import SimulatorData
from tilescope.io.simulator_trace import parse_addr

HEADER = struct.Struct("<QBBBB")  # size, type, padding, version, reserved: 12 bytes
PATH_FIELD = 4096  # a source block's path (PATH_MAX), NUL-padded, not counted in its size
SOURCE, TRACE, FILE_LINES, INSTRUCTIONS = 0x01, 0x02, 0x03, 0x04
# the types msopprof's writer names (VisualizeType); none but 0x01, 0x03 and 0x04 is per-line data
KNOWN_TYPES = {
    0x01: "source text",
    0x02: "trace",
    0x03: "file lines",
    0x04: "instructions",
    0x05: "operator basic info",
    0x06: "compute load figure",
    0x07: "compute load table",
    0x08: "storage access heat map",
    0x09: "storage access table",
    0x0C: "occupancy map",
    0x0D: "roofline",
    0x0E: "cache line heat map",
    0x0F: "top stall reasons",
}
# the 0x04 block's version byte: how its instructions map to source lines
INSTRUCTION_VERSIONS = {0x00: "by 'AscendC Inner Code'", 0x5A: "by the lines' 'Address Range'"}
BOARD_CORES = ["ALL"]
SIMULATOR_KIND = "msprof op simulator visualize_data.bin"
BOARD_KIND = "board Source mode (msprof op --aic-metrics=Source)"
NO_L2_ACCESS = -1.0  # the board's hit rate of a line or instruction that never reached L2
# JSON key -> canonical column, per block
LINE_KEYS = {
    "Cycles": "cycles",
    "Instructions Executed": "instructions_executed",
    "L2Cache Hit Rate": "l2_hit_rate",
}
INSTRUCTION_KEYS = {
    "Cycles": "cycles",
    "Instructions Executed": "call_count",
    "RealStallCycles": "stall_cycles",
    "L2Cache Hit Rate": "l2_hit_rate",
}
CODE_COLUMNS = (
    "core",
    "file",
    "line",
    "call_count",
    "cycles",
    "time_us",
    "instructions_executed",
    "l2_hit_rate",
)
INSTR_COLUMNS = (
    "core", "instr", "addr", "pipe", "call_count", "cycles", "time_us", "detail",
    "file", "line", "stall_cycles", "l2_hit_rate",
)  # fmt: skip
# Example: "/tmp/tilelang_build/kernel.cpp:101" -> ("/tmp/tilelang_build/kernel.cpp", "101")
_INNER_CODE = re.compile(r"^(?P<file>.+):(?P<line>\d+)$")
# Example: "MOV_OUT_TO_L1 Src:OUT,Dst:L1" -> "MOV_OUT_TO_L1"
_MNEMONIC = re.compile(r"^\s*(?P<name>[^\s,]+)")


@dataclass(frozen=True)
class Block:
    index: int
    offset: int  # of its header, in the file
    type: int
    version: int
    body: bytes  # without the padding
    path: str | None = None  # source blocks only


def read_blocks(path: Path, data: bytes) -> list[Block]:
    """Every block of the file, in order; ProfileFormatError at the first that does not fit."""
    if not data:
        raise ProfileFormatError(path, "byte 0", "a visualize_data.bin block header (the file is empty)")
    blocks: list[Block] = []
    offset = 0
    while offset < len(data):
        blocks.append(_block_at(path, data, offset, len(blocks)))
        last = blocks[-1]
        offset += HEADER.size + (PATH_FIELD if last.type == SOURCE else 0) + _stored_size(data, last.offset)
    return blocks


def _stored_size(data: bytes, offset: int) -> int:
    return int(HEADER.unpack_from(data, offset)[0])


def _block_at(path: Path, data: bytes, offset: int, index: int) -> Block:
    where = f"block {index} at byte {offset}"
    if len(data) - offset < HEADER.size:
        raise ProfileFormatError(
            path,
            where,
            f"a {HEADER.size}-byte block header, found {len(data) - offset} byte(s) (truncated file)",
        )
    size, kind, padding, version, _reserved = HEADER.unpack_from(data, offset)
    start = offset + HEADER.size + (PATH_FIELD if kind == SOURCE else 0)
    if start > len(data):
        raise ProfileFormatError(
            path,
            where,
            f"a {PATH_FIELD}-byte source path after the header (the file ends at byte {len(data)})",
        )
    if size > len(data) - start:
        raise ProfileFormatError(
            path,
            where,
            f"a body of {size:,} bytes (its size field) but the file ends {len(data) - start:,} "
            "byte(s) after the header (truncated file or not a visualize_data.bin)",
        )
    if padding > size or padding > 3:
        raise ProfileFormatError(path, where, f"0-3 padding bytes within the body, not {padding} of {size}")
    if kind == INSTRUCTIONS and version not in INSTRUCTION_VERSIONS:
        known = " or ".join(f"0x{v:02X} ({how})" for v, how in INSTRUCTION_VERSIONS.items())
        raise ProfileFormatError(path, where, f"instructions block version {known}, not 0x{version:02X}")
    label = None
    if kind == SOURCE:
        field = data[offset + HEADER.size : start]
        label = field.split(b"\0", 1)[0].decode("utf-8", errors="replace")
    return Block(index, offset, kind, version, bytes(data[start : start + size - padding]), label)


def _json(path: Path, block: Block) -> dict[str, Any]:
    where = f"block {block.index} at byte {block.offset}"
    what = KNOWN_TYPES[block.type]
    try:
        doc = json.loads(block.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProfileFormatError(
            path, where, f"JSON in the {what} block (0x{block.type:02X}): {exc}"
        ) from None
    if not isinstance(doc, dict):
        raise ProfileFormatError(path, where, f"a JSON object in the {what} block, not {type(doc).__name__}")
    return doc


def _cores(path: Path, block: Block, doc: dict[str, Any]) -> list[str]:
    cores = doc.get("Cores")
    if not isinstance(cores, list) or not cores or not all(isinstance(c, str) for c in cores):
        raise ProfileFormatError(
            path, f"block {block.index} at byte {block.offset}", "'Cores': a non-empty list of core names"
        )
    return cores


def _rows(path: Path, where: str, doc: dict[str, Any], key: str) -> list[dict[str, Any]]:
    rows = doc.get(key, [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ProfileFormatError(path, where, f"{key!r}: a list of objects")
    return rows


def per_core(path: Path, where: str, values: Sequence[Any], n_cores: int, name: str) -> np.ndarray:
    """`values` (one per row: a list in the order of `Cores`, one number for every core, or None)
    as a float array of rows x cores, NaN where absent."""
    try:
        arr = np.asarray(values, dtype="float64")  # the usual case at C speed: equal-length lists
    except (TypeError, ValueError):
        arr = None
    if arr is not None and arr.ndim == 2 and arr.shape[1] == n_cores:
        return arr
    if arr is not None and arr.ndim == 1:
        return np.repeat(arr[:, None], n_cores, axis=1)
    if arr is not None and arr.ndim == 2 and arr.shape[1] == 1:
        return np.repeat(arr, n_cores, axis=1)
    out = np.full((len(values), n_cores), np.nan)
    for i, v in enumerate(values):  # ragged or mixed rows: rare, checked one by one
        cell = [v] if v is None or isinstance(v, int | float) else v
        try:
            row = np.asarray(cell, dtype="float64")
        except (TypeError, ValueError):
            row = None
        if row is None or row.ndim != 1 or len(row) not in (1, n_cores) or isinstance(v, bool):
            raise ProfileFormatError(
                path, where, f"{name} of row {i}: a number or one per core ({n_cores}), not {str(v)[:80]!r}"
            )
        out[i] = row
    return out


def _line_numbers(path: Path, where: str, values: list[Any], name: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype="float64")
    except (TypeError, ValueError):
        arr = np.array([np.nan])
    bad = ~np.isfinite(arr) | (arr < 0) | (arr != np.floor(arr)) if arr.ndim == 1 else np.array([True])
    if bad.any():
        i = int(bad.argmax())
        raise ProfileFormatError(
            path, where, f"{name} of row {i}: a line number, not {str(values[i])[:80]!r}"
        )
    return arr.astype("int64")


def _long(cores: list[str], fields: dict[str, np.ndarray], arrays: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per (row, core): per-row `fields` repeated over cores, per-core `arrays` flattened."""
    k = len(cores)
    n = len(next(iter(arrays.values())))
    frame = {"core": np.tile(np.asarray(cores, dtype=object), n)}
    frame.update({name: np.repeat(np.asarray(v), k) for name, v in fields.items()})
    frame.update({name: a.ravel() for name, a in arrays.items()})
    return pd.DataFrame(frame)


def code_table(path: Path, block: Block, doc: dict[str, Any], cores: list[str]) -> pd.DataFrame:
    """Per (core, file, line) from a 0x03 block, lines a core never ran left out."""
    where = f"block {block.index} at byte {block.offset}"
    parts = []
    for fi, f in enumerate(_rows(path, where, doc, "Files")):
        source, lines = f.get("Source"), _rows(path, where, f, "Lines")
        if not isinstance(source, str) or not source:
            raise ProfileFormatError(path, where, f"Files[{fi}]: 'Source', the path of a source file")
        if not lines:
            continue
        numbers = _line_numbers(path, where, [ln.get("Line") for ln in lines], f"Files[{fi}].Lines 'Line'")
        arrays = {
            col: per_core(
                path, where, [ln.get(key) for ln in lines], len(cores), f"Files[{fi}].Lines {key!r}"
            )
            for key, col in LINE_KEYS.items()
        }
        parts.append(
            _long(cores, {"file": np.full(len(lines), source, dtype=object), "line": numbers}, arrays)
        )
    if not parts:
        return pd.DataFrame(columns=list(CODE_COLUMNS))
    code = pd.concat(parts, ignore_index=True)
    code["l2_hit_rate"] = code["l2_hit_rate"].where(code["l2_hit_rate"] != NO_L2_ACCESS)
    ran = (code["cycles"].fillna(0) > 0) | (code["instructions_executed"].fillna(0) > 0)
    code = code.loc[ran].reset_index(drop=True)
    code["call_count"] = np.nan  # the file counts instructions per line, not executions of the line
    code["time_us"] = np.nan
    return code.loc[:, list(CODE_COLUMNS)]


def instr_table(path: Path, block: Block, doc: dict[str, Any], cores: list[str]) -> pd.DataFrame:
    """Per (core, instruction) from a 0x04 block, instructions a core never ran left out."""
    where = f"block {block.index} at byte {block.offset}"
    rows = _rows(path, where, doc, "Instructions")
    if not rows:
        return pd.DataFrame(columns=list(INSTR_COLUMNS))
    text = {key: pd.Series([r.get(key) for r in rows], dtype=object) for key in ("Address", "Pipe", "Source")}
    disasm = text["Source"].where(text["Source"].map(lambda s: isinstance(s, str)), "").astype(str)
    inner = pd.Series([r.get("AscendC Inner Code") for r in rows], dtype=object)
    at = inner.where(inner.map(lambda s: isinstance(s, str)), "").astype(str).str.extract(_INNER_CODE)
    fields = {
        "addr": text["Address"].fillna("").astype(str).to_numpy(),
        "pipe": text["Pipe"].fillna("").astype(str).str.upper().to_numpy(),
        "instr": disasm.str.extract(_MNEMONIC)["name"].fillna("").to_numpy(),
        "detail": disasm.to_numpy(),
        "file": at["file"].to_numpy(dtype=object),
        "line": pd.to_numeric(at["line"]).to_numpy(dtype="float64"),
    }
    arrays = {
        col: per_core(path, where, [r.get(key) for r in rows], len(cores), f"Instructions {key!r}")
        for key, col in INSTRUCTION_KEYS.items()
    }
    instr = _long(cores, fields, arrays)
    instr["line"] = instr["line"].astype("float64")
    instr["l2_hit_rate"] = instr["l2_hit_rate"].where(instr["l2_hit_rate"] != NO_L2_ACCESS)
    ran = (instr["cycles"].fillna(0) > 0) | (instr["call_count"].fillna(0) > 0)
    instr = instr.loc[ran].reset_index(drop=True)
    instr["time_us"] = np.nan
    return instr.loc[:, list(INSTR_COLUMNS)]


def measured(code: pd.DataFrame, instr: pd.DataFrame) -> frozenset[str]:
    """The quantities the file carries values of (a column of NaN only was not measured)."""
    found = {c for c in ("cycles", "instructions_executed", "l2_hit_rate") if code[c].notna().any()}
    found |= {"stall_cycles"} if instr["stall_cycles"].notna().any() else set()
    return frozenset(found)


def read_visualize_bin(path: Path) -> SimulatorData:
    """The per-line (0x03) and per-instruction (0x04) tables of one visualize_data.bin."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ProfileFormatError(path, None, f"a readable visualize_data.bin ({exc.strerror})") from None
    blocks = read_blocks(path, data)
    notes: list[str] = []
    found = {kind: [b for b in blocks if b.type == kind] for kind in (FILE_LINES, INSTRUCTIONS)}
    if not found[FILE_LINES] and not found[INSTRUCTIONS]:
        raise ProfileFormatError(
            path, None, "a file-lines (0x03) or instructions (0x04) block (visualize_data.bin of a -g build)"
        )
    cores: list[str] = []
    code = pd.DataFrame(columns=list(CODE_COLUMNS))
    instr = pd.DataFrame(columns=list(INSTR_COLUMNS))
    if found[FILE_LINES]:
        doc = _json(path, found[FILE_LINES][0])
        cores = _cores(path, found[FILE_LINES][0], doc)
        code = code_table(path, found[FILE_LINES][0], doc, cores)
    if found[INSTRUCTIONS]:
        doc = _json(path, found[INSTRUCTIONS][0])
        instr_cores = _cores(path, found[INSTRUCTIONS][0], doc)
        cores = cores or instr_cores
        instr = instr_table(path, found[INSTRUCTIONS][0], doc, instr_cores)
    notes.extend(_block_notes(blocks, found))
    measures = measured(code, instr)
    kind = BOARD_KIND if cores == BOARD_CORES and "cycles" not in measures else SIMULATOR_KIND
    sources = {b.path or "": b.body.decode("utf-8", errors="replace") for b in blocks if b.type == SOURCE}
    stalls = instr.loc[
        instr["stall_cycles"].notna() & instr["file"].notna(), ["core", "file", "line", "stall_cycles"]
    ]
    return SimulatorData(
        path,
        code,
        instr,
        pd.DataFrame(columns=["core", "file", "line", "pipe", "busy_us", "instructions"]),
        cores,
        [path],
        notes,
        measures=measures,
        kind=kind,
        stalls=stalls.reset_index(drop=True),
        sources=sources,
        addr_lines=bin_addr_lines(instr),
    )


def bin_addr_lines(instr: pd.DataFrame, before: pd.DataFrame | None = None) -> pd.DataFrame:
    """The address -> source line pairs of a bin's instructions (core, addr, file, line), after
    those already known (`before`, from the traces)."""
    named = instr[instr["file"].notna() & instr["line"].notna()]
    found = pd.DataFrame(
        {
            "core": named["core"].astype(str),
            "addr": named["addr"].map(parse_addr),
            "file": named["file"],
            "line": named["line"],
        }
    ).dropna()
    found = found.astype({"addr": "int64", "line": "int64"})
    parts = [p for p in (before, found) if p is not None and len(p)]
    if not parts:
        return found.reset_index(drop=True)
    return pd.concat(parts, ignore_index=True).drop_duplicates().reset_index(drop=True)


def _block_notes(blocks: list[Block], found: dict[int, list[Block]]) -> list[str]:
    notes = []
    for kind, same in found.items():
        if len(same) > 1:
            notes.append(
                f"{len(same)} {KNOWN_TYPES[kind]} blocks: read the first, as MindStudio Insight does "
                f"(byte {same[0].offset})"
            )
    unknown = sorted({b.type for b in blocks if b.type not in KNOWN_TYPES})
    if unknown:
        names = ", ".join(f"0x{t:02X}" for t in unknown)
        notes.append(
            f"skipped block type(s) {names}: unknown to this reader (MindStudio Insight skips them too)"
        )
    return notes
