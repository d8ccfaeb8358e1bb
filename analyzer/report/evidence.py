"""A finding's evidence as small tables of plain-text values with their units, for the Markdown and
HTML reports (the JSON and SARIF outputs keep the evidence as it is).

Evidence is nested JSON (measured values, thresholds, chip figures, lists of occurrences). Printed
as compact JSON it was cut at 160 characters and read `7.858e+04`; here every scalar becomes a row
`measured.block_dim | 8`, with the unit its key names (`_us` µs, `_bytes` B, `_gbps` GB/s, shares
as %), and a list of records (occurrences, instances, the slowest blocks) becomes a table of its
own whose start times read as offsets from the first (`+1.27 ms`), not epoch nanoseconds.
Callers escape the text for their format.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_ROWS = 8  # records of a list shown; the rest are counted
MAX_LIST = 12  # items of a list of plain values shown
# A share of something, 0-1, printed as % (docs/product.md: ratios as % in prose and tables)
_SHARE_WORDS = ("share", "ratio", "efficiency", "of_peak", "coverage", "fraction")


@dataclass(frozen=True)
class EvidenceTable:
    """One table: `title` "" for the finding's own values, else the list's key."""

    title: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]] = field(default_factory=list)
    more: int = 0  # records of the list not shown


def evidence_tables(evidence: Mapping[str, Any], max_rows: int = MAX_ROWS) -> list[EvidenceTable]:
    """The finding's values (`evidence | value`) first, then one table per list of records."""
    main: list[tuple[str, str]] = []
    lists: list[EvidenceTable] = []
    for key, value in evidence.items():
        if _is_records(value):
            lists.append(_records_table(str(key), value, max_rows))
        else:
            main += _rows(str(key), value, unit_key=str(key), top=True)
    tables = [EvidenceTable("", ("evidence", "value"), [(k, v) for k, v in main])] if main else []
    return tables + lists


def _is_records(value: Any) -> bool:
    return isinstance(value, list | tuple) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _rows(label: str, value: Any, unit_key: str, top: bool = False, depth: int = 0) -> list[tuple[str, str]]:
    """`label | text` rows of one value; a mapping gives a row per item (`parent.child`), its
    children taking the parent's unit when their own key names none (`needed_bytes.L0A`)."""
    if isinstance(value, Mapping) and depth < 2:
        out: list[tuple[str, str]] = []
        for k, v in value.items():
            if v is None:  # a metric this profile did not collect: nothing to trace
                continue
            child_unit = str(k) if _unit_of(str(k)) else unit_key
            out += _rows(f"{label}.{k}", v, child_unit, depth=depth + 1)
        return out
    if value is None and not top:
        return []
    return [(label, value_text(unit_key, value))]


def value_text(key: str, value: Any) -> str:
    """One evidence value as text, with the unit its key names."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return _number_text(key, float(value), isinstance(value, int))
    if isinstance(value, list | tuple):
        items = [value_text(key, v) if not isinstance(v, Mapping | list) else _compact(v) for v in value]
        more = f" … +{len(items) - MAX_LIST}" if len(items) > MAX_LIST else ""
        return ", ".join(items[:MAX_LIST]) + more
    return _compact(value)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))


def _unit_of(key: str) -> str:
    """The unit a key names: `total_us` us, `needed_bytes` B, `hbm_bandwidth_gbps` GB/s, ..."""
    k = key.lower()
    for suffix, unit in (("_us", "us"), ("_ns", "ns"), ("_ms", "ms"), ("bytes", "B"), ("_gbps", "GB/s"),
                         ("mhz", "MHz"), ("_pct", "%pct"), ("flop_per_byte", "FLOP/B"),
                         ("arithmetic_intensity", "FLOP/B"), ("ridge_point", "FLOP/B")):
        if k.endswith(suffix):
            return unit
    if "_over_" in k or k.endswith("over_median"):
        return "x"
    if any(w in k for w in _SHARE_WORDS):
        return "share"
    return ""


def _number_text(key: str, v: float, is_int: bool) -> str:
    if not math.isfinite(v):
        return "–"
    unit = _unit_of(key)
    if unit == "us":
        return time_text(v)
    if unit == "ms":
        return time_text(v * 1000)
    if unit == "ns":
        return f"{plain_number(v, is_int)} ns"
    if unit == "B":
        n = int(v)
        return f"{n:,} B" + (f" ({n / 1024:,.4g} KiB)" if n >= 1024 else "")
    if unit == "share":
        return f"{v * 100:.1f} %" if abs(v) <= 1.5 else plain_number(v, is_int)
    if unit == "%pct":
        return f"{v:.1f} %"
    if unit == "x":
        return f"{v:.2f}×"
    return plain_number(v, is_int) + (f" {unit}" if unit else "")


def time_text(us: float) -> str:
    """Evidence time: µs to three decimals (trailing zeros dropped), ms from 10 ms up."""
    if abs(us) >= 10_000:
        return f"{_trim(f'{us / 1000:,.3f}')} ms"
    return f"{_trim(f'{us:,.3f}')} µs"


def plain_number(v: float, is_int: bool = False) -> str:
    """`8`, `78,580`, `0.3333`, `0.000012`: never exponent notation."""
    if is_int or v == int(v):
        return f"{int(v):,}"
    if abs(v) >= 100:
        return f"{v:,.1f}"
    if abs(v) >= 0.001:
        return _trim(f"{v:.4f}")
    return _trim(f"{v:.9f}")


def _trim(s: str) -> str:
    return s.rstrip("0").rstrip(".") if "." in s else s


def _records_table(key: str, records: Sequence[Mapping[str, Any]], max_rows: int) -> EvidenceTable:
    """A list of records as a table: a column per plain key (in first-seen order), a nested list
    shown by its size (`7 kernels`), start times as offsets from the earliest start."""
    columns: list[str] = []
    for r in records:
        for k in r:
            if k not in columns:
                columns.append(str(k))
    starts = [r[c] for r in records for c in columns if _is_start(c) and isinstance(r.get(c), int | float)]
    t0 = min(starts) if starts else 0
    shown = records[:max_rows]
    rows = []
    for r in shown:
        cells = []
        for c in columns:
            v = r.get(c)
            if _is_start(c) and isinstance(v, int | float):
                cells.append("+" + time_text((v - t0) / 1000))
            elif isinstance(v, list | tuple) and v and all(isinstance(x, Mapping) for x in v):
                cells.append(f"{len(v)} {c}")
            else:
                cells.append(value_text(c, v) if not isinstance(v, Mapping) else _compact(v))
        rows.append(tuple(cells))
    headers = tuple(f"{c[:-3]} (from the first)" if _is_start(c) else c for c in columns)
    return EvidenceTable(key, headers, rows, max(0, len(records) - len(shown)))


def _is_start(column: str) -> bool:
    """An absolute start time in ns (`start_ns`): epoch-based, so shown relative to the first."""
    return column.lower() in ("start_ns", "ts_ns", "begin_ns")
