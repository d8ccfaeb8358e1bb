"""How numbers and the shared sentences read, in every view (terminal, Markdown, HTML, SARIF,
dashboard, diff): one formatter per quantity, so one value prints the same everywhere.

docs/product.md 'Words and units': µs in tables, ms from 10 ms up (s from 10 s); shares as % in prose.
Rounding is fixed per kind of number: times to 0.1 µs (0.01 ms), unit busy shares and headline shares to
whole per cent, a finding's or kernel's share to 0.1 %.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from tilescope.chips import gm_note
from tilescope.findings import SEVERITIES

UNIT_LABELS = (("cube", "Cube"), ("vector", "Vector"), ("mte", "data movement (MTE)"), ("scalar", "Scalar"))
# Under every top-kernels table: what its busy and speed-of-light columns mean (plain text, no markup).
KERNEL_COLUMNS_NOTE = ("Busy: the pipe's busy time per core as a share of the launch. Speed of light: the "
                       "time the launch would take at the chip's ceiling for its work or traffic, as a share "
                       "of its measured time (its bound in brackets).")


def num(value: Any) -> float | None:
    """A finite float, or None for missing/NaN/non-numeric values."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def fmt_us(value: Any) -> str:
    """43.7 µs, 1,234.5 µs, 12.35 ms, 102.40 s; "–" when unknown. Seconds from 10 s on: a wall
    time of "102,401.47 ms" was never read as the 102 s it is."""
    v = num(value)
    if v is None:
        return "–"
    if abs(v) >= 10_000_000:
        return f"{v / 1e6:,.2f} s"
    return f"{v / 1000:,.2f} ms" if abs(v) >= 10_000 else f"{v:,.1f} µs"


def fmt_bytes(n: float) -> str:
    """Bytes in a message: KiB, MiB to one place, GiB to two (the rules, diff's explanations)."""
    if n >= 1024**3:
        return f"{n / 1024**3:.2f} GiB"
    if n >= 1024**2:
        return f"{n / 1024**2:.1f} MiB"
    return f"{n / 1024:.1f} KiB"


# Example: "500M", "2G", "1.5GiB", "64KB", "0", "1048576"
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:([kmgt])(?:i?b)?|b)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text: str) -> int | None:
    """Bytes of "500M", "2G", "1.5GiB", "0" (units are powers of 1024, as `fmt_bytes` writes them);
    None when it is not a size. For $TILESCOPE_CACHE_MAX_SIZE and $TILESCOPE_URL_MAX_BYTES."""
    m = _SIZE.fullmatch(text.strip())
    if m is None:
        return None
    return int(float(m.group(1)) * _SIZE_UNITS[(m.group(2) or "").lower()])


def count_text(n: Any, noun: str, plural: str | None = None) -> str:
    """`1 launch`, `2 launches`, `1,024 blocks`: a count with its noun agreeing (plural: noun + s)."""
    v = int(num(n) or 0)
    return f"{v:,} {noun if v == 1 else plural or noun + 's'}"


def fmt_pct(ratio: Any, digits: int = 1) -> str:
    """A 0-1 ratio as a percentage; "–" when unknown."""
    v = num(ratio)
    return "–" if v is None else f"{v * 100:.{digits}f} %"


STATIC_SAVING = "static: no time estimate"
# a runtime finding that names data to collect before anything can be estimated (TS206)
UNMEASURED_SAVING = "no time estimate until the data it names is collected"
# each quantity per-line data is ranked by (tilescope.lines.LinesReport.metric), as every view says it
METRIC_WORDS = {"cycles": "cycles", "instructions_executed": "instructions executed"}


def saving_text(f: Mapping[str, Any]) -> str:
    """A finding's estimated saving with what it is a share of; a static finding (lint, IR rules:
    nothing ran) says it has no time, never `0.0 µs (0.0 %)`."""
    kind = f.get("saving_kind", "device")
    if kind == "none":
        evidence = f.get("evidence")
        if isinstance(evidence, Mapping) and evidence.get("collect_next"):
            return UNMEASURED_SAVING
        return STATIC_SAVING
    saving = num(f.get("est_saving_us")) or 0.0
    share = fmt_pct(f.get("share_of_total"))
    if kind == "idle":
        return f"{fmt_us(saving)} idle ({share} of wall time)"
    if kind == "cluster":
        return f"{fmt_us(saving)} ({share} of step time)"
    return f"{fmt_us(saving)} ({share}){_per_rank(f)}"


def _per_rank(f: Mapping[str, Any]) -> str:
    """A finding grouped across ranks shows one rank's saving: say so, and the spread over its
    ranks when they differ (the headline sums every rank's)."""
    members = f.get("by_rank")
    if not isinstance(members, list) or len(members) < 2:
        return ""
    savings = [v for v in (num(m.get("est_saving_us")) for m in members if isinstance(m, Mapping))
               if v is not None]
    if not savings:
        return ""
    lo, hi = min(savings), max(savings)
    if fmt_us(lo) == fmt_us(hi):
        return " per rank"
    return f" on rank {f.get('rank')} ({fmt_us(lo)} to {fmt_us(hi)} per rank)"


def saving_phrase(f: Mapping[str, Any]) -> str:
    """`est. 29.2 µs (66.7 %)`, or `static: no time estimate`: the saving in a sentence."""
    text = saving_text(f)
    return text if text in (STATIC_SAVING, UNMEASURED_SAVING) else f"est. {text}"


def sol_text(row: Mapping[str, Any]) -> str:
    """A kernel's achieved share of its speed of light: `16 % (memory)`; "–" when unknown. Above
    100 % (faster than its ceiling: the chip figure or the model is wrong for it) with a decimal
    and said: `103.6 % (memory, over its ceiling)`."""
    v = num(row.get("sol_pct"))
    if v is None:
        return "–"
    bound = row.get("sol_bound")
    if v > 100:
        return f"{v:.1f} % ({bound + ', ' if bound else ''}over its ceiling)"
    return f"{v:.0f} %" + (f" ({bound})" if bound else "")


def launches_text(summary: Mapping[str, Any]) -> str:
    """`290 launches of 18 kernels` (`kernel_count` counts launches, `distinct_kernels` names)."""
    launches = int(num(summary.get("kernel_count")) or 0)
    kernels = int(num(summary.get("distinct_kernels")) or 0)
    return (f"{launches:,} launch{'es' if launches != 1 else ''} of {kernels:,} "
            f"kernel{'s' if kernels != 1 else ''}")


def chip_text(chip: Mapping[str, Any]) -> str:
    """`910B2: 24 AIC / 48 AIV @ 1800 MHz, GM 1,750 GB/s (vendor, default memory type)`: the chip
    figures every verdict used, with where the bandwidth comes from."""
    parts = [str(chip.get("name") or "?")]
    cores = [f"{chip[k]} {label}" for k, label in (("aic_count", "AIC"), ("aiv_count", "AIV")) if chip.get(k)]
    figures = " / ".join(cores)
    clock = num(chip.get("clock_mhz"))
    if clock is not None:
        figures += f" @ {clock:g} MHz"
    gm = num(chip.get("hbm_bandwidth_gbps"))
    if gm is not None:
        origin = gm_note(gm, chip.get("memory_type") or "default", chip.get("gm_bandwidth_by_type") or {})
        figures += f", GM {gm:,.0f} GB/s ({origin})"
    return parts[0] + (f": {figures}" if figures else "")


def units_text(summary: Mapping[str, Any]) -> str:
    """`Cube busy 28 % · Vector 64 % · data movement (MTE) 33 % · Scalar 14 % of device time`."""
    parts = unit_share_parts(summary)
    if not parts:
        return ""
    return "busy: " + " · ".join(text for _, text in parts) + f" of device time{coverage_text(summary)}"


def unit_share_parts(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(unit key, `Cube 28 %`) for every unit the summary has a busy share of, in UNIT_LABELS order."""
    shares = summary.get("shares") or {}
    return [(k, f"{label} {fmt_pct(shares.get(k), 0)}") for k, label in UNIT_LABELS
            if num(shares.get(k)) is not None]


def coverage_text(summary: Mapping[str, Any]) -> str:
    """` (measured on 94 % of it)` when the launches with pipe metrics cover under 99.5 % of the
    compute kernels' time (the busy shares then leave the rest out); "" otherwise."""
    units = summary.get("units") or {}
    coverage = min((num((units.get(k) or {}).get("coverage")) or 1.0) for k, _ in UNIT_LABELS)
    return f" (measured on {fmt_pct(coverage, 0)} of it)" if coverage < 0.995 else ""


def speed_of_light_text(summary: Mapping[str, Any]) -> str:
    """`kernels ran at 13 % of their speed of light (over 100 % of kernel time)`; "" when unknown."""
    sol = summary.get("speed_of_light") or {}
    achieved = num(sol.get("achieved_pct"))
    if achieved is None:
        return ""
    coverage = num(sol.get("coverage"))
    over = f" (over {fmt_pct(coverage, 0)} of kernel time)" if coverage is not None else ""
    # under 1 %, one significant digit: "0 %" would say the kernels did nothing (0.03 % on the
    # generated 8-rank sample, whose shapes are small for their times)
    shown = f"{achieved:.1g}" if 0 < achieved < 0.95 else f"{achieved:.0f}"
    return f"kernels ran at {shown} % of their speed of light{over}"


def recoverable(summaries: Sequence[Mapping[str, Any]]) -> tuple[float, float, float, float | None]:
    """Combined device saving, device time, idle saving and wall time over the profiles' summaries."""
    device = idle = total = 0.0
    wall: float | None = None
    for s in summaries:
        t = s.get("findings") or {}
        device += num(t.get("est_recoverable_us")) or 0.0
        idle += num(t.get("est_idle_recoverable_us")) or 0.0
        total += num(s.get("total_device_us")) or 0.0
        w = num((s.get("device_time") or {}).get("wall_us"))
        if w is not None:
            wall = (wall or 0.0) + w
    return device, total, idle, wall


def share_text(part: float, whole: float | None) -> str:
    """`87 %` of a headline; `< 1 %` for a share that rounds to 0 but is not (1.9 ms of a 100 s
    wall), so a zero only ever means nothing."""
    if not whole or whole <= 0:
        return ""
    ratio = part / whole
    return "< 1 %" if 0 < ratio < 0.005 else fmt_pct(ratio, 0)


def recoverable_text(
    device_us: float | None,
    idle_us: float | None = None,
    *,
    device_total: float | None = None,
    wall_us: float | None = None,
    across: tuple[float, float | None] | None = None,
) -> str:
    """What findings could recover, each kind of saving in its own unit and only the kinds there
    are: `38.3 µs (87 % of device time)` of kernel time, `116.02 ms of idle gaps (22 % of wall
    time)`, `8,400.0 µs of step time across ranks (21 %)` (`across`: saving and share), joined by
    ` + `; "" when none is above zero. Never `0.0 µs` standing for "the saving is of another kind":
    the headlines, the dashboard's KPI and its severity chart all word it here."""
    parts = []
    device, idle = num(device_us) or 0.0, num(idle_us) or 0.0
    if device > 0:
        share = share_text(device, device_total)
        parts.append(fmt_us(device) + (f" ({share} of device time)" if share else ""))
    if idle > 0:
        share = share_text(idle, wall_us)
        parts.append(f"{fmt_us(idle)} of idle gaps" + (f" ({share} of wall time)" if share else ""))
    if across is not None and (num(across[0]) or 0.0) > 0:
        share = fmt_pct(across[1], 0) if num(across[1]) is not None else ""
        parts.append(f"{fmt_us(across[0])} of step time across ranks" + (f" ({share})" if share else ""))
    return " + ".join(parts)


NO_ESTIMATE = "no time saving estimated"


def headline(findings: Sequence[Mapping[str, Any]], summaries: Sequence[Mapping[str, Any]]) -> str:
    """`6 findings: 5 high, 1 medium — est. 36.7 µs (84 % of device time) recoverable`, the closing
    line of every view; savings are the summary's combined, bounded totals (tilescope.summary),
    each kind in its own unit (`recoverable_text`)."""
    if not findings:
        return "No findings."
    counts = Counter(str(f.get("severity")) for f in findings)
    parts = ", ".join(f"{counts[s]} {s}" for s in SEVERITIES if counts[s])
    device, total, idle, wall = recoverable(summaries)
    noun = "finding" if len(findings) == 1 else "findings"
    across = [f for f in findings
              if f.get("saving_kind") == "cluster" and (num(f.get("est_saving_us")) or 0) > 0]
    # cross-rank savings overlap (a straggler and the wait it causes): the largest one
    best = max(across, key=lambda f: num(f.get("est_saving_us")) or 0.0) if across else None
    saving = recoverable_text(
        device, idle, device_total=total, wall_us=wall,
        across=(num(best.get("est_saving_us")) or 0.0, num(best.get("share_of_total"))) if best else None)
    return f"{len(findings)} {noun}: {parts} — " + (f"est. {saving} recoverable" if saving else NO_ESTIMATE)
