"""Where inside a kernel its measured cost moved between two bundles (#25): per TileLang line.

Each bundle with per-line data (tilescope.lines: an `msprof op simulator` run or a board's Source
mode) gives its kernel's cost per TileLang line. Between two versions of a kernel the line numbers
shift whenever a line is added above, so a line is matched by its statement (the line map's
`what`, e.g. "s_acc += q_l0 @ k_l0"; the n-th occurrence of a repeated statement with the n-th),
and by its Ascend C line where no TileLang line maps. The lines whose cost moved most, by at least
MIN_LINE_SHARE of the base kernel's total, become causes of the kernel's change, after the
kernel's own total. They are not apportioned to its time: the simulator's cycles are not the
board's microseconds, and a board's Source mode counts instructions, not time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tilescope.diff_explain import Cause, signed_share
from tilescope.lines import NO_SOURCE, compact_lines, profile_lines
from tilescope.profile import Profile
from tilescope.text.words import METRIC_WORDS

MIN_LINE_SHARE = 0.05  # a line is named when its cost moved by 5 % of the base kernel's total
MAX_LINES = 3


def line_facts(profile: Profile | None) -> dict[str, Any] | None:
    """{metric, total, lines: {key: (label, value)}} of the profile's per-line data, or None."""
    report = profile_lines(profile) if profile is not None else None
    if report is None or not report.lines:
        return None
    lines: dict[str, tuple[str, float]] = {}
    seen: dict[str, int] = {}
    for g in sorted(report.lines, key=lambda g: (g.source_lines or (1 << 30,), g.what)):
        if g.source_lines and g.what != NO_SOURCE:
            statement = " ".join(g.what.split())
            seen[statement] = seen.get(statement, 0) + 1
            key = f"{statement}#{seen[statement]}"
            label = f"{compact_lines(g.source_lines)} `{statement}`"
        else:
            c_lines = ",".join(str(a["line"]) for a in g.ascendc)
            key = f"ascendc:{c_lines}"
            label = f"Ascend C l.{c_lines} (no TileLang line)"
        lines[key] = (label, g.value)
    total = sum(v for _, v in lines.values())
    return {"metric": report.metric, "total": total, "lines": lines}


def line_causes(base: Mapping[str, Any] | None, head: Mapping[str, Any] | None) -> list[Cause]:
    """The kernel's measured total, then the lines whose cost moved most (module docstring)."""
    if not base or not head:
        return []
    if base["metric"] != head["metric"]:
        return [
            Cause(
                "lines:metric",
                f"per-line data not comparable: {METRIC_WORDS.get(base['metric'])} "
                f"vs {METRIC_WORDS.get(head['metric'])}",
            )
        ]
    unit = METRIC_WORDS.get(base["metric"], base["metric"])
    b_total, h_total = float(base["total"]), float(head["total"])
    if not b_total:
        return []
    moved = []
    for key in dict.fromkeys((*base["lines"], *head["lines"])):
        b_label, b = base["lines"].get(key, (None, 0.0))
        h_label, h = head["lines"].get(key, (None, 0.0))
        if abs(h - b) >= MIN_LINE_SHARE * b_total:
            moved.append((abs(h - b), _moved_text(h_label or b_label, b_label, b, h, unit), key))
    if not moved and abs(h_total - b_total) < MIN_LINE_SHARE * b_total:
        return []  # nothing inside the kernel moved enough to name
    out = [
        Cause(
            "lines:total",
            f"measured {unit} {b_total:,.0f} → {h_total:,.0f} "
            f"({signed_share((h_total - b_total) / b_total)})",
        )
    ]
    for _, text, key in sorted(moved, key=lambda m: -m[0])[:MAX_LINES]:
        out.append(Cause(f"lines:{key}", text))
    return out


def _moved_text(label: str, b_label: str | None, b: float, h: float, unit: str) -> str:
    if not b:
        return f"{label} new, {h:,.0f} {unit}"
    if not h:
        return f"{b_label} gone ({b:,.0f} {unit})"
    return f"{label} {b:,.0f} → {h:,.0f} {unit} ({signed_share((h - b) / b)})"
