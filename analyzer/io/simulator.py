"""`msprof op simulator` output (formats doc §2.4, §5): per-core code and instruction CSVs and
per-core pipeline traces.

Layout: `OPPROF_*/simulator/core{i}.{veccore|cubecore}{j}/` holding `*_code_exe*.csv`
(`code,call_count,cycles,running_time(us)`, `code` = `path:line`), `*_instr_exe*.csv`
(`instr,addr,pipe,call_count,cycles,running_time(us),detail`) and `trace.json` (an object with
`traceEvents`: `X` events are instructions, `pid` the core, `tid` the pipe, `args.code` the source
line). Runs of several operators add a timestamp to the CSV names. Every line may end with a comma.
The traces are streamed and summed as they are read (tilescope.io.simulator_trace): a run of a
million instructions is hundreds of MB of JSON.

Three tables come out, one row per core and item: `code` (core, file, line, call_count, cycles,
time_us), `instr` (core, instr, addr, pipe, call_count, cycles, time_us, detail) and `pipes`
(core, file, line, pipe, busy_us, instructions: the trace's instruction time per source line and
pipe). A code CSV with only its header means the kernel was built without `-g`: there is no line
to give, and the reader says so instead of reporting nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tilescope.errors import ProfileFormatError
from tilescope.io.msprof_op_layout import find_simulator, simulator_core_dirs
from tilescope.io.simulator_trace import FLAG_COLUMNS, trace_facts

CODE_COLUMNS = ("code", "call_count", "cycles", "running_time(us)")
INSTR_COLUMNS = ("instr", "addr", "pipe", "call_count", "cycles", "running_time(us)", "detail")
# Example: "/tmp/tilelang/kernel_abc.cpp:88" -> ("/tmp/tilelang/kernel_abc.cpp", 88)
_CODE_RE = re.compile(r"^(?P<file>.+):(?P<line>\d+)$")
SIMULATOR_FOLDER = (
    "a msprof op simulator folder (simulator/core*.veccore*/ or core*.cubecore*/ with *_code_exe.csv / "
    "*_instr_exe.csv)"
)
NO_LINE_DATA = (
    "no per-line data: no code CSV, and no per-core trace names a source line (a kernel built "
    "without -g, or an output trimmed of them); what is left is per instruction, for the whole "
    "kernel (docs/lines.md)"
)
CSV_KIND = "msprof op simulator (code/instr CSVs, per-core traces)"
NO_DEBUG_INFO = (
    "built without -g: the simulator's code CSVs hold only their header, so there is no "
    "per-line data (rebuild the kernel with -g, keeping -O2; docs/lines.md)"
)


@dataclass
class SimulatorData:
    root: Path
    code: pd.DataFrame
    instr: pd.DataFrame
    pipes: pd.DataFrame
    cores: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # what the source measured (`lines` names each under its own name): a board's Source mode
    # counts instructions, the simulator counts cycles (tilescope.io.visualize_bin)
    measures: frozenset[str] = frozenset({"cycles"})
    kind: str = CSV_KIND
    # stall cycles per (core, file, line), from a visualize_data.bin's instructions; None: not read
    stalls: pd.DataFrame | None = None
    sources: dict[str, str] = field(default_factory=dict)  # source path -> text, as the file holds it
    # instruction address -> source line (core, addr, file, line): from the per-core traces' events
    # that carry both (tilescope.io.simulator_trace.TraceFacts) and a visualize_data.bin's
    # instructions; what places a sync instruction of the instruction CSV on a line
    addr_lines: pd.DataFrame | None = None
    # SET_FLAG/WAIT_FLAG pairs of the per-core traces (core + FLAG_COLUMNS); None: no trace read
    flags: pd.DataFrame | None = None

    @property
    def has_lines(self) -> bool:
        return len(self.code) > 0 or len(self.pipes) > 0


def read_simulator(path: Path) -> SimulatorData:
    """Read every core folder of a simulator output; ProfileFormatError on a malformed file."""
    root = find_simulator(path)
    if root is None:
        raise ProfileFormatError(path, None, SIMULATOR_FOLDER)
    code: list[pd.DataFrame] = []
    instr: list[pd.DataFrame] = []
    pipes: list[pd.DataFrame] = []
    addrs: list[pd.DataFrame] = []
    flags: list[pd.DataFrame] = []
    files: list[Path] = []
    header_only = 0
    cores = [d.name for d in simulator_core_dirs(root)]
    for core_dir in simulator_core_dirs(root):
        for f in sorted(core_dir.glob("*_code_exe*.csv")):
            files.append(f)
            part = _read_code(f, core_dir.name)
            header_only += part.empty
            code.append(part)
        for f in sorted(core_dir.glob("*_instr_exe*.csv")):
            files.append(f)
            instr.append(_read_instr(f, core_dir.name))
        trace = core_dir / "trace.json"
        if trace.is_file():
            files.append(trace)
            facts = trace_facts(trace)
            for part, into in ((facts.busy, pipes), (facts.addr_lines, addrs), (facts.flags, flags)):
                part.insert(0, "core", core_dir.name)
                into.append(part)
    data = SimulatorData(
        root,
        _concat(code, ("core", "file", "line", "call_count", "cycles", "time_us")),
        _concat(instr, ("core", "instr", "addr", "pipe", "call_count", "cycles", "time_us", "detail")),
        _concat(pipes, ("core", "file", "line", "pipe", "busy_us", "instructions")),
        cores,
        files,
        addr_lines=_concat(addrs, ("core", "addr", "file", "line")),
        flags=_concat(flags, ("core", *FLAG_COLUMNS)),
    )
    if header_only and data.code.empty and data.pipes.empty:
        data.notes.append(NO_DEBUG_INFO)
    elif data.code.empty and (data.pipes.empty or data.pipes["line"].isna().all()):
        data.notes.append(NO_LINE_DATA)
    return data


def _concat(parts: list[pd.DataFrame], columns: tuple[str, ...]) -> pd.DataFrame:
    frames = [p for p in parts if len(p)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(columns))


def _read_csv(path: Path, required: tuple[str, ...]) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, index_col=False)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise ProfileFormatError(
            path, None, f"a CSV with the columns {', '.join(required)} ({exc})"
        ) from None
    df = df.loc[:, [c for c in df.columns if not str(c).startswith("Unnamed:")]]  # the trailing comma
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ProfileFormatError(path, "line 1", f"the column(s) {', '.join(missing)}")
    return df


def _numbers(df: pd.DataFrame, path: Path, cols: tuple[str, ...]) -> dict[str, pd.Series]:
    out = {}
    for c in cols:
        values = pd.to_numeric(df[c], errors="coerce")
        bad = values.isna() | (values < 0)
        if bad.any():
            row = int(bad.to_numpy().argmax())
            raise ProfileFormatError(
                path, f"line {row + 2}", f"a number >= 0 in {c!r}, not {df[c].iloc[row]!r}"
            )
        out[c] = values.astype("float64")
    return out


def _read_code(path: Path, core: str) -> pd.DataFrame:
    df = _read_csv(path, CODE_COLUMNS)
    where = df["code"].str.extract(_CODE_RE)
    bad = where["line"].isna()
    if bad.any():
        row = int(bad.to_numpy().argmax())
        raise ProfileFormatError(
            path, f"line {row + 2}", f"'code' as path:line, not {df['code'].iloc[row]!r}"
        )
    n = _numbers(df, path, ("call_count", "cycles", "running_time(us)"))
    return pd.DataFrame(
        {
            "core": core,
            "file": where["file"],
            "line": where["line"].astype("int64"),
            "call_count": n["call_count"],
            "cycles": n["cycles"],
            "time_us": n["running_time(us)"],
        }
    )


def _read_instr(path: Path, core: str) -> pd.DataFrame:
    df = _read_csv(path, INSTR_COLUMNS)
    n = _numbers(df, path, ("call_count", "cycles", "running_time(us)"))
    return pd.DataFrame(
        {
            "core": core,
            "instr": df["instr"],
            "addr": df["addr"],
            "pipe": df["pipe"].str.upper(),
            "call_count": n["call_count"],
            "cycles": n["cycles"],
            "time_us": n["running_time(us)"],
            "detail": df["detail"],
        }
    )
