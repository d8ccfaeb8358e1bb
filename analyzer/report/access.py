"""The report accessors: the one place that knows the key names of the JSON report
(report.schema.json), so every renderer, `diff` and the dashboard read it the same way.
Plain dicts in, plain dicts out; nothing is plotted here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tilescope.text.words import num


def _first(d: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return default


def report_summary(report: Mapping[str, Any]) -> dict[str, Any]:
    """The first profile's summary (tilescope.summary) with the keys renderers read."""
    s = _first(report, "summary", default={}) or {}
    shares = {k: num(v) for k, v in (_first(s, "shares", default={}) or {}).items()}
    # the sentences built from several keys (words.units_text, launches_text, ...) read `raw`
    return {
        "total_device_us": num(_first(s, "total_device_us")),
        "shares": shares,
        "units_definition": _first(s, "units_definition", default=""),
        "kernel_count": _first(s, "kernel_count"),
        "raw": s,
    }


def profile_summaries(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every profile's summary (one per rank), for totals over a multi-rank report."""
    out = [dict(p.get("summary") or {}) for p in report.get("profiles", []) or []]
    return out or [dict(report.get("summary") or {})]


def data_warnings(report: Mapping[str, Any]) -> list[str]:
    """What the numbers of this report leave out or doubt, that every format says (text prints it
    among a profile's notes): each profile's unreadable rows skipped, its values outside their
    range left out and its launches faster than their speed of light, with its rank in a
    multi-rank report; first, a bundle collected from an earlier version of its kernel."""
    profiles = [p for p in report.get("profiles", []) or [] if isinstance(p, Mapping)]
    out = []
    for p in profiles:
        rank = f"rank {p['rank']}: " if len(profiles) > 1 and p.get("rank") is not None else ""
        summary = p.get("summary")
        sol = (summary.get("speed_of_light") or {}) if isinstance(summary, Mapping) else {}
        if isinstance(p.get("stale_kernel"), str):  # a bundle of an earlier kernel: said first
            out.append(f"{rank}{p['stale_kernel']}")
        for said in (p.get("rows_skipped"), p.get("values_out_of_range"), sol.get("over_ceiling")):
            if isinstance(said, Mapping) and said.get("note"):
                out.append(f"{rank}{said['note']}")
    return out


def report_kernels(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per-kernel aggregate rows (top kernels first), whatever key the report stores them under."""
    rows = _first(report, "top_kernels", "kernels", default=None)
    if rows is None:
        rows = _first(report.get("summary", {}) or {}, "top_kernels", default=[])
    return [dict(r) for r in rows or []]


def report_findings(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(f) for f in report.get("findings", []) or []]


def report_chip(report: Mapping[str, Any]) -> dict[str, Any]:
    inputs = report.get("inputs", {}) or {}
    chip = _first(inputs, "chip", default=None) or _first(report, "chip", default={}) or {}
    return dict(chip) if isinstance(chip, Mapping) else {"name": str(chip)}


def report_input_path(report: Mapping[str, Any]) -> str | None:
    inputs = report.get("inputs", {}) or {}
    if isinstance(inputs, Mapping):
        p = _first(inputs, "path", "bundle", "source")
        if isinstance(p, str):
            return p
        paths = inputs.get("paths")
        if isinstance(paths, list) and paths:
            return str(paths[0])
    return None


def report_timeline(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Launch rows with start_ns and duration_us, when the report carries them."""
    rows = _first(report, "timeline", "launches", default=[]) or []
    if isinstance(rows, Mapping):
        rows = rows.get("kernels", []) or []
    return [dict(r) for r in rows if "start_ns" in r and "duration_us" in r]


def where_text(locations: list[dict[str, Any]], limit: int | None = None) -> str:
    """`flash_attention.py:41 ir/tvmscript.py:46 ir/kernel.cpp:130`: the lines a finding points at.

    Kernel source files are shown by name (their recorded path is repo-relative), IR files as
    stored in the bundle; repeats are dropped, and past `limit` entries a `+N more` says so.
    """
    parts: list[str] = []
    for loc in locations:
        if loc.get("line") is None:
            continue
        file = str(loc.get("file", ""))
        short = file.replace("\\", "/").rsplit("/", 1)[-1] if loc.get("stage") == "source" else file
        parts.append(f"{short}:{loc['line']}")
    unique = list(dict.fromkeys(parts))
    if limit is not None and len(unique) > limit:
        return " ".join(unique[:limit]) + f" +{len(unique) - limit} more"
    return " ".join(unique)
