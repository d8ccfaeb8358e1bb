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
from pathlib import Path
from typing import Any

import pandas as pd

from analyzer.errors import ProfileFormatError

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


def read_step_trace(path: Path) -> pd.DataFrame:
    """One row per step: `step` and the columns of STEP_COLUMNS the file has (µs)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileFormatError(path, None, f"cannot read ({exc})") from exc
    if not rows:
        raise ProfileFormatError(path, "line 1", "expected a header (Step,Computing,...)")
    header = [h.strip() for h in rows[0]]
    missing = [c for c in REQUIRED_STEP_COLUMNS if c not in header]
    if missing:
        raise ProfileFormatError(path, "line 1", f"expected columns {', '.join(missing)} in the header")
    out: dict[str, list[Any]] = {"step": []} | {STEP_COLUMNS[c]: [] for c in STEP_COLUMNS if c in header}
    for i, raw in enumerate(rows[1:], start=1):
        if not any(v.strip() for v in raw):
            continue
        where = f"row {i} (line {i + 1})"
        if len(raw) < len(header):
            raise ProfileFormatError(
                path, where, f"expected {len(header)} fields as in the header, found {len(raw)}"
            )
        rec = dict(zip(header, raw, strict=False))
        step = rec["Step"].strip()
        out["step"].append(int(_number(path, where, step, "Step")) if step else None)
        for col, name in STEP_COLUMNS.items():
            if col in header:
                out[name].append(_number(path, where, rec[col], col))
    table = pd.DataFrame(out)
    table["step"] = table["step"].astype("Int64")
    return table


def _load_json(path: Path) -> dict[str, Any]:
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
    rows = []
    for step, kind, op, entry in _operators(path, data):
        where = f"key step{step}.{kind}.{op}"
        t = entry.get("Communication Time Info")
        if not isinstance(t, dict):
            raise ProfileFormatError(path, where, "expected 'Communication Time Info'")

        def ms(key: str, t: dict[str, Any] = t, where: str = where) -> float:
            return _number(path, where, t.get(key, 0), key) * 1000.0

        bw = entry.get("Communication Bandwidth Info") or {}
        busiest, size_mb, gbps = None, 0.0, float("nan")
        for transport, info in (bw.items() if isinstance(bw, dict) else ()):
            if not isinstance(info, dict):
                continue
            size = _number(path, where, info.get("Transit Size(MB)", 0), f"{transport} Transit Size(MB)")
            if size > size_mb:
                busiest, size_mb = str(transport), size
                gbps = _number(path, where, info.get("Bandwidth(GB/s)", 0), f"{transport} Bandwidth(GB/s)")
        start = t.get("Start Timestamp(us)")
        rows.append({
            "step": step, "kind": kind, "op": op,
            "start_us": float("nan") if start is None else _number(path, where, start, "Start Timestamp(us)"),
            "elapse_us": ms("Elapse Time(ms)"), "transit_us": ms("Transit Time(ms)"),
            "wait_us": ms("Wait Time(ms)"), "synchronization_us": ms("Synchronization Time(ms)"),
            "idle_us": ms("Idle Time(ms)"),
            "transport": busiest, "size_mb": size_mb, "bandwidth_gbps": gbps,
        })
    table = pd.DataFrame(rows, columns=[
        "step", "kind", "op", "start_us", "elapse_us", "transit_us", "wait_us", "synchronization_us",
        "idle_us", "transport", "size_mb", "bandwidth_gbps",
    ])
    table["step"] = table["step"].astype("Int64")
    return table


def read_communication_matrix(path: Path) -> pd.DataFrame:
    """One row per (step, operator, link): source and destination rank, transport type, size (MB),
    transit time (µs) and bandwidth (GB/s). LOCAL "links" (a rank's copy to itself) are kept with
    their transport type; the rules leave them out."""
    data = _load_json(path)
    rows = []
    for step, kind, op, links in _operators(path, data):
        for link, info in links.items():
            where = f"key step{step}.{kind}.{op}.{link}"
            m = _LINK_RE.match(str(link))
            if m is None or not isinstance(info, dict):
                raise ProfileFormatError(path, where, "expected a link 'SRC-DST' with an object")
            rows.append({
                "step": step, "kind": kind, "op": op,
                "src_rank": int(m.group(1)), "dst_rank": int(m.group(2)),
                "transport": str(info.get("Transport Type", "")),
                "size_mb": _number(path, where, info.get("Transit Size(MB)", 0), "Transit Size(MB)"),
                "transit_us": 1000.0 * _number(path, where, info.get("Transit Time(ms)", 0), "Transit Time"),
                "bandwidth_gbps": _number(path, where, info.get("Bandwidth(GB/s)", 0), "Bandwidth(GB/s)"),
            })
    table = pd.DataFrame(rows, columns=[
        "step", "kind", "op", "src_rank", "dst_rank", "transport", "size_mb", "transit_us", "bandwidth_gbps",
    ])
    table["step"] = table["step"].astype("Int64")
    return table


def output_dir(root: Path) -> Path:
    """Where a rank's summary files are: ASCEND_PROFILER_OUTPUT/ of a torch_npu root, else the root."""
    out = root / "ASCEND_PROFILER_OUTPUT"
    return out if out.is_dir() else root
