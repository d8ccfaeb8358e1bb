"""The per-rank files of a multi-rank run: torch_npu's `step_trace_time.csv`, `communication.json`
and `communication_matrix.json` (ASCEND_PROFILER_OUTPUT/, formats doc §2.1, §6).

Each reader returns a small pandas table in tilescope's units (µs, MB, GB/s) or raises
`ProfileFormatError` naming the file, the place and what was expected. The files are small (one
row per step, one entry per collective and link), so they are read with the standard library.

Layouts, as written by torch_npu (seen in `gpt3_2rank_memoryl0`, real):
  step_trace_time.csv   `[Device_id,]Step,Computing,Communication(Not Overlapped),Overlapped,
                        Communication,Free,Stage,Bubble,...` in µs, one row per step
  communication.json    {"step2": {"collective"|"p2p": {"<op>@<group>": {"Communication Time Info":
                        {"Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", ...},
                        "Communication Bandwidth Info": {"HCCS"|"RDMA"|...: {...}}}, "Total Op Info": ...}}}
  communication_matrix.json {"step2": {"collective": {"<op>@<group>": {"0-7": {"Transport Type",
                        "Transit Size(MB)", "Transit Time(ms)", "Bandwidth(GB/s)"}}}}}
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from tilescope.errors import ProfileFormatError

STEP_TRACE = "step_trace_time.csv"
COMMUNICATION = "communication.json"
COMMUNICATION_MATRIX = "communication_matrix.json"
TOTAL_OP = "Total Op Info"  # the per-kind sum torch_npu adds beside the operators

# step_trace_time.csv column -> canonical name (µs in the file and in the table)
STEP_COLUMNS = {
    "Computing": "computing_us",
    "Communication(Not Overlapped)": "communication_not_overlapped_us",
    "Overlapped": "overlapped_us",
    "Communication": "communication_us",
    "Free": "free_us",
    "Stage": "stage_us",
    "Bubble": "bubble_us",
}
REQUIRED_STEP_COLUMNS = ("Step", "Computing", "Communication(Not Overlapped)", "Free")

# Example: "step2" -> 2; "step_12" -> 12
_STEP_KEY_RE = re.compile(r"^step_?(\d+)$", re.IGNORECASE)
# Example: "0-7" (source rank 0, destination rank 7)
_LINK_RE = re.compile(r"^(\d+)-(\d+)$")


def _number(path: Path, where: str, value: object, what: str) -> float:
    try:
        x = float(str(value).strip())
    except ValueError:
        raise ProfileFormatError(path, where, f"expected a number for {what}, found {value!r}") from None
    if not math.isfinite(x):
        raise ProfileFormatError(path, where, f"expected a finite number for {what}, found {value!r}")
    return x


def _numbers(
    path: Path, values: list[Any], where: Callable[[int], str], what: str | Callable[[int], str]
) -> np.ndarray:
    """`values` as float64, or the ProfileFormatError `_number` gives for the first bad one.

    Numbers (a JSON file's) and numeric text (a CSV's) convert in one numpy call; anything else
    (a bool, None, a word) and every non-finite result go through `_number` one by one, so the
    error names the first offending entry exactly as it always did."""
    kinds = {type(v) for v in values}
    if kinds <= {float, int} or kinds <= {str}:
        try:
            arr = np.array(values, dtype=np.float64)
        except ValueError:
            arr = None
        if arr is not None and (arr.size == 0 or np.isfinite(arr).all()):
            return arr
    for i, v in enumerate(values):
        _number(path, where(i), v, what if isinstance(what, str) else what(i))
    return np.array(values, dtype=np.float64)  # unreachable unless _number accepts what numpy did not


def read_step_trace(path: Path) -> pd.DataFrame:
    """One row per step: `step` and the columns of STEP_COLUMNS the file has (µs)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:  # csv.Error: a field past MAX_TEXT_BYTES
        raise ProfileFormatError(path, None, f"cannot read ({exc})") from exc
    if not rows:
        raise ProfileFormatError(path, "line 1", "expected a header (Step,Computing,...)")
    header = [h.strip() for h in rows[0]]
    missing = [c for c in REQUIRED_STEP_COLUMNS if c not in header]
    if missing:
        raise ProfileFormatError(path, "line 1", f"expected columns {', '.join(missing)} in the header")
    body = [(i, raw) for i, raw in enumerate(rows[1:], start=1) if any(v.strip() for v in raw)]
    for i, raw in body:
        if len(raw) < len(header):
            raise ProfileFormatError(
                path, f"row {i} (line {i + 1})",
                f"expected {len(header)} fields as in the header, found {len(raw)}",
            )

    def where(j: int) -> str:
        return f"row {body[j][0]} (line {body[j][0] + 1})"

    position = {h: k for k, h in enumerate(header)}  # a repeated name: its last column, as before
    steps = [raw[position["Step"]].strip() for _, raw in body]
    out: dict[str, Any] = {}
    present = [j for j, v in enumerate(steps) if v]
    numbers = _numbers(path, [steps[j] for j in present], lambda k: where(present[k]), "Step")
    step_values: list[int | None] = [None] * len(steps)
    for j, x in zip(present, numbers.tolist(), strict=True):
        step_values[j] = int(x)
    out["step"] = step_values
    for col, name in STEP_COLUMNS.items():
        if col in header:
            out[name] = _numbers(path, [raw[position[col]] for _, raw in body], where, col)
    table = pd.DataFrame(out, columns=["step", *(STEP_COLUMNS[c] for c in STEP_COLUMNS if c in header)])
    table["step"] = table["step"].astype("Int64")
    return table


def _load_json(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ProfileFormatError(path, None, f"cannot read ({exc})") from exc
    try:
        data = msgspec.json.decode(raw)  # ~3x the standard library's speed
    except msgspec.DecodeError:
        data = _load_json_strict(path)  # the standard library's error names the line
    if not isinstance(data, dict):
        raise ProfileFormatError(path, None, "expected a JSON object of steps ({\"step2\": ...})")
    return data


def _load_json_strict(path: Path) -> Any:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileFormatError(path, None, f"cannot read ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise ProfileFormatError(path, f"line {exc.lineno}", f"expected JSON ({exc.msg})") from exc
    if not isinstance(data, dict):
        raise ProfileFormatError(path, None, "expected a JSON object of steps ({\"step2\": ...})")
    return data


def _step_number(path: Path, key: str) -> int | None:
    m = _STEP_KEY_RE.match(key.strip())
    if m is None:
        if key.strip().lower() in ("", "step"):  # a run without step marks
            return None
        raise ProfileFormatError(path, f"key {key!r}", "expected a step key like 'step2'")
    return int(m.group(1))


def _operators(path: Path, data: dict[str, Any]) -> list[tuple[int | None, str, str, dict[str, Any]]]:
    """(step, kind, operator, entry) for every operator of every step; "Total Op Info" left out."""
    found = []
    for step_key, kinds in data.items():
        step = _step_number(path, str(step_key))
        if not isinstance(kinds, dict):
            raise ProfileFormatError(path, f"key {step_key!r}", "expected an object of p2p/collective")
        for kind, ops in kinds.items():
            if not isinstance(ops, dict):
                raise ProfileFormatError(path, f"key {step_key}.{kind}", "expected an object of operators")
            for op, entry in ops.items():
                if op == TOTAL_OP:
                    continue
                if not isinstance(entry, dict):
                    raise ProfileFormatError(path, f"key {step_key}.{kind}.{op}", "expected an object")
                found.append((step, str(kind), str(op), entry))
    return found


def read_communication(path: Path) -> pd.DataFrame:
    """One row per communication operator and step: elapse, transit, wait, synchronization and
    idle time (µs), the bytes moved (MB) and the bandwidth of its busiest transport (GB/s)."""
    data = _load_json(path)
    ops = _operators(path, data)
    wheres = [f"key step{step}.{kind}.{op}" for step, kind, op, _e in ops]
    times: list[dict[str, Any]] = []
    for (_s, _k, _o, entry), where in zip(ops, wheres, strict=True):
        t = entry.get("Communication Time Info")
        if not isinstance(t, dict):
            raise ProfileFormatError(path, where, "expected 'Communication Time Info'")
        times.append(t)

    def ms(key: str) -> np.ndarray:
        return _numbers(path, [t.get(key, 0) for t in times], wheres.__getitem__, key) * 1000.0

    # every transport's size, in one conversion; the busiest transport's bandwidth per operator
    transports: list[tuple[int, str, dict[str, Any]]] = []
    for j, (_s, _k, _o, entry) in enumerate(ops):
        bw = entry.get("Communication Bandwidth Info") or {}
        for transport, info in (bw.items() if isinstance(bw, dict) else ()):
            if isinstance(info, dict):
                transports.append((j, str(transport), info))
    sizes = _numbers(
        path, [i.get("Transit Size(MB)", 0) for _j, _t, i in transports],
        lambda k: wheres[transports[k][0]], lambda k: f"{transports[k][1]} Transit Size(MB)",
    ).tolist()
    busiest: list[str | None] = [None] * len(ops)
    size_mb = [0.0] * len(ops)
    top_info: list[dict[str, Any] | None] = [None] * len(ops)
    for (j, transport, info), moved in zip(transports, sizes, strict=True):
        if moved > size_mb[j]:
            busiest[j], size_mb[j], top_info[j] = transport, moved, info
    gbps = [
        float("nan") if info is None else _number(
            path, wheres[j], info.get("Bandwidth(GB/s)", 0), f"{busiest[j]} Bandwidth(GB/s)"
        )
        for j, info in enumerate(top_info)
    ]
    starts = [t.get("Start Timestamp(us)") for t in times]
    known = [j for j, v in enumerate(starts) if v is not None]
    start_us = np.full(len(starts), np.nan)
    start_us[known] = _numbers(
        path, [starts[j] for j in known], lambda k: wheres[known[k]], "Start Timestamp(us)"
    )
    table = pd.DataFrame({
        "step": pd.array([step for step, _k, _o, _e in ops], dtype="Int64"),
        "kind": [kind for _s, kind, _o, _e in ops],
        "op": [op for _s, _k, op, _e in ops],
        "start_us": start_us,
        "elapse_us": ms("Elapse Time(ms)"), "transit_us": ms("Transit Time(ms)"),
        "wait_us": ms("Wait Time(ms)"), "synchronization_us": ms("Synchronization Time(ms)"),
        "idle_us": ms("Idle Time(ms)"),
        "transport": pd.Series(busiest, dtype=object), "size_mb": np.array(size_mb, dtype=np.float64),
        "bandwidth_gbps": np.array(gbps, dtype=np.float64),
    })
    return table


def read_communication_matrix(path: Path) -> pd.DataFrame:
    """One row per (step, operator, link): source and destination rank, transport type, size (MB),
    transit time (µs), bandwidth (GB/s) and `collective`, the collective the entry is about: its
    "Op Name" where the file gives one (a summary key such as `allreduce-top1@group` names the
    collective it stands for), else the operator key's name (older files key each collective).
    An aggregate (`allreduce-total@group`: no Op Name) has `collective` None. LOCAL "links" (a
    rank's copy to itself) are kept with their transport type; the rules leave them out. Every
    row as written: tilescope.cluster.collective_links reads each collective once."""
    data = _load_json(path)
    rows: list[tuple[int | None, str, str, int, int, dict[str, Any]]] = []
    wheres: list[str] = []
    for step, kind, op, links in _operators(path, data):
        for link, info in links.items():
            where = f"key step{step}.{kind}.{op}.{link}"
            m = _LINK_RE.match(str(link))
            if m is None or not isinstance(info, dict):
                raise ProfileFormatError(path, where, "expected a link 'SRC-DST' with an object")
            rows.append((step, kind, op, int(m.group(1)), int(m.group(2)), info))
            wheres.append(where)
    infos = [r[5] for r in rows]

    def col(key: str, what: str) -> np.ndarray:
        return _numbers(path, [i.get(key, 0) for i in infos], wheres.__getitem__, what)

    table = pd.DataFrame({
        "step": pd.array([r[0] for r in rows], dtype="Int64"),
        "kind": [r[1] for r in rows], "op": [r[2] for r in rows],
        "src_rank": np.array([r[3] for r in rows], dtype=np.int64),
        "dst_rank": np.array([r[4] for r in rows], dtype=np.int64),
        "transport": [str(i.get("Transport Type", "")) for i in infos],
        "size_mb": col("Transit Size(MB)", "Transit Size(MB)"),
        "transit_us": 1000.0 * col("Transit Time(ms)", "Transit Time"),
        "bandwidth_gbps": col("Bandwidth(GB/s)", "Bandwidth(GB/s)"),
        "collective": pd.Series([_collective(r[2], i) for r, i in zip(rows, infos, strict=True)],
                                dtype=object),
    })
    return table


# Example: "allreduce-total@17522688603477080586" (the sum over every all-reduce of the group)
AGGREGATE_KEY_RE = re.compile(r"^[^@]*-total(@|$)", re.IGNORECASE)


def _collective(op: str, info: dict[str, Any]) -> str | None:
    """The collective a matrix entry is about (read_communication_matrix), None for an aggregate."""
    named = info.get("Op Name")
    if isinstance(named, str) and named.strip():
        return named.strip()
    if AGGREGATE_KEY_RE.match(op):
        return None
    return op.split("@", 1)[0]


def output_dir(root: Path) -> Path:
    """Where a rank's summary files are: ASCEND_PROFILER_OUTPUT/ of a torch_npu root, else the root."""
    out = root / "ASCEND_PROFILER_OUTPUT"
    return out if out.is_dir() else root
