"""Which per-line data a path holds and which reader reads it, for `tilescope lines`.

Two sources: a simulator folder's CSVs and traces (tilescope.io.simulator) and a
`visualize_data.bin` (tilescope.io.visualize_bin), which the simulator writes beside its CSVs
(`simulator/visualize_data.bin`) and a board's Source mode writes alone (`OPPROF_*/`, or
`OPPROF_*/{op}/{launch}/` per launch). When both are there the CSVs give the cycles, call counts
and pipe split (the same simulation, with running times and traces the bin lacks) and the bin adds
what only it has: stall cycles per line and the source text. A bin alone gives what it measured.
"""

from __future__ import annotations

from pathlib import Path

from tilescope.errors import ProfileFormatError, UsageError
from tilescope.io.simulator import SIMULATOR_FOLDER, SimulatorData, find_simulator, read_simulator
from tilescope.io.visualize_bin import HEADER, bin_addr_lines, read_visualize_bin

VISUALIZE_BIN = "visualize_data.bin"
# the first header's version and reserved bytes as every writer leaves them; MindStudio Insight
# recognises the file by the same two bytes (SourceFileParser::CheckOperatorBinary)
_MAGIC_AT, _MAGIC = 10, b"\x5a\x5a"


def looks_like_visualize_bin(path: Path) -> bool:
    """A file named visualize_data.bin, or whose first block header reads as one."""
    if path.name == VISUALIZE_BIN:
        return True
    try:
        with path.open("rb") as f:
            head = f.read(HEADER.size)
    except OSError:
        return False
    return len(head) == HEADER.size and head[_MAGIC_AT:] == _MAGIC and head[:8] != bytes(8)


def find_visualize_bins(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if looks_like_visualize_bin(path) else []
    return sorted(p for p in path.rglob(VISUALIZE_BIN) if p.is_file()) if path.is_dir() else []


def has_line_data(path: Path) -> bool:
    return find_simulator(path) is not None or bool(find_visualize_bins(path))


def read_line_data(path: Path) -> SimulatorData:
    """The per-line data under `path` (module docstring); one-line errors on bad input."""
    root = find_simulator(path) if path.is_dir() else None
    if root is not None:
        sim = read_simulator(root)
        beside = root / VISUALIZE_BIN
        return _with_bin(sim, read_visualize_bin(beside)) if beside.is_file() else sim
    bins = find_visualize_bins(path)
    if len(bins) == 1:
        return read_visualize_bin(bins[0])
    if len(bins) > 1:
        raise UsageError(
            f"{path}: {len(bins)} visualize_data.bin files (one per operator launch), e.g. {bins[0]} and "
            f"{bins[1]}: pass the one to read"
        )
    raise ProfileFormatError(path, None, f"{SIMULATOR_FOLDER} or a visualize_data.bin")


def _with_bin(sim: SimulatorData, vbin: SimulatorData) -> SimulatorData:
    """The CSVs' data with the bin's stall cycles and source text added."""
    sim.files.append(vbin.root)
    sim.sources = vbin.sources
    # the bin names the line of every instruction it lists, WAIT_FLAGs included (the traces do not)
    sim.addr_lines = bin_addr_lines(vbin.instr, sim.addr_lines)
    sim.notes.extend(vbin.notes)
    if "stall_cycles" in vbin.measures:
        sim.stalls = vbin.stalls
        sim.measures = sim.measures | {"stall_cycles"}
        sim.notes.append(
            "stall cycles from visualize_data.bin; cycles, call counts and pipes from the simulator's "
            "CSVs and traces"
        )
    return sim
