"""Measured lines for findings (issue #25): when a bundle carries `msprof op simulator` output,
a finding about a kernel of that bundle names the TileLang lines the simulator measured for its
topic — the lines with the most Scalar time for a scalar-bound kernel, the most MTE2/MTE3 time for
a memory-bound one — before the lines the static IR points at.

The simulator models one launch of the bundle's kernel, so only findings about a kernel the
bundle's IR holds get measured lines; a library kernel in the same profile gets none.
"""

from __future__ import annotations

from typing import Any

from tilescope.findings import Location
from tilescope.ir.model import find_kernel
from tilescope.ir.rulekit import stage_path
from tilescope.lines import LineCost, LinesReport, profile_lines
from tilescope.profile import Profile
from tilescope.text.sync_words import where_words

# A finding's topic (rules/_findings.locate) -> the simulator pipes whose time ranks its lines.
# "loop" (Cube/Vector overlap) names the hottest Cube line and the hottest Vector line; "grid"
# (how many blocks) is not a line's cost, so it names none.
TOPIC_PIPES: dict[str, tuple[tuple[str, ...], ...]] = {
    "scalar": (("SCALAR",),),
    "cube": (("CUBE",),),
    "vector": (("VECTOR",),),
    "memory": (("MTE2", "MTE3"),),
    "loop": (("CUBE",), ("VECTOR",)),
}
PIPE_WORDS = {
    ("SCALAR",): "Scalar",
    ("CUBE",): "Cube",
    ("VECTOR",): "Vector",
    ("MTE2", "MTE3"): "GM transfer (MTE2/MTE3)",
}
MAX_LINES = 3


def _basis(report: LinesReport) -> tuple[str, str]:
    """What ranks a line on a pipe: the traced time where the source has traces, else the
    instructions' own metric per pipe (a visualize_data.bin) — (attribute, unit words)."""
    if any(g.pipes for g in report.lines):
        return "pipes", "time"
    if report.metric == "instructions_executed":
        return "pipes_instr", "instructions executed"
    return "pipes_instr", "instruction cycles"


def _ranked(report: LinesReport, pipes: tuple[str, ...], attr: str) -> list[tuple[LineCost, float, float]]:
    """Mapped lines by their amount on `pipes` (LineCost.`attr`, `_basis`), largest first: (line,
    amount, share of those pipes' amount)."""
    spent = [(g, sum(getattr(g, attr).get(p, 0.0) for p in pipes)) for g in report.lines if g.source_lines]
    total = sum(v for _, v in spent)
    if total <= 0:
        return []
    return [(g, v, v / total) for g, v in sorted(spent, key=lambda x: -x[1]) if v > 0]


def sync_items(report: LinesReport, limit: int = MAX_LINES) -> list[dict[str, Any]]:
    """The sync lines with the most wait cycles (WAIT_FLAG, barriers), else the most sync cycles
    where no wait was placed on a line, as measured-line items; [] when no sync cycle is on a line."""
    rows = report.sync_lines
    waits = sum(sum(r["wait_cycles"].values()) for r in rows)
    key, measure = ("wait_cycles", "sync wait cycles") if waits > 0 else ("sync_cycles", "sync cycles")
    total = sum(sum(r[key].values()) for r in rows)
    if total <= 0:
        return []
    ranked = sorted(rows, key=lambda r: -sum(r[key].values()))
    out = []
    for r in ranked[:limit]:
        amount = sum(r[key].values())
        if amount <= 0:
            break
        before = r.get("before") or {}
        own = bool(r["source_lines"])
        out.append(
            {
                "source_lines": list(r["source_lines"] if own else before.get("source_lines") or []),
                "what": r["what"] if own else before.get("what", ""),
                "sync_line": where_words(r),
                "placed_by": "line map" if own else ("next statement" if before else "Ascend C only"),
                "waiting_pipes": sorted(r["wait_cycles"]),
                "amount": round(amount, 3),
                "unit": "cycles",
                "measure": measure,
                "source": "the simulator",
                "share_of_sync": round(amount / total, 4),
                "ascendc_lines": [int(r["line"])],
            }
        )
    return out


def hot_lines(profile: Profile, kernel: str, topic: str) -> list[dict[str, Any]]:
    """The measured lines a finding about `kernel` on `topic` names, most first; [] when the
    profile has no per-line data, the kernel is not the bundle's or the topic names no line.
    Topic "sync": the lines with the most sync waits; "latency": those, then the top Scalar line."""
    groups = TOPIC_PIPES.get("scalar" if topic == "latency" else topic)
    if topic not in ("sync", "latency") and not groups:
        return []
    if profile.ir is None or find_kernel(profile.ir, kernel) is None:
        return []
    report = profile_lines(profile)
    if report is None:
        return []
    waits = sync_items(report) if topic in ("sync", "latency") else []
    if topic == "sync" or not groups:
        return waits
    return waits + _pipe_items(report, groups, 1 if waits else MAX_LINES)


def _pipe_items(
    report: LinesReport, groups: tuple[tuple[str, ...], ...], limit: int
) -> list[dict[str, Any]]:
    """The lines with the most amount on each pipe group (`limit` per group when one group, else 1)."""
    attr, unit = _basis(report)
    source = "the board" if report.metric == "instructions_executed" else "the simulator"
    out: list[dict[str, Any]] = []
    per_group = limit if len(groups) == 1 else 1
    for pipes in groups:
        for g, amount, share in _ranked(report, pipes, attr)[:per_group]:
            out.append(
                {
                    "source_lines": list(g.source_lines),
                    "what": g.what,
                    "pipes": list(pipes),
                    "amount": round(amount, 3),
                    "unit": "µs" if attr == "pipes" else unit,
                    "measure": unit,
                    "source": source,
                    "share_of_pipes": round(share, 4),
                    "share_of_line_metric": round(g.share, 4),
                    "ascendc_lines": [int(a["line"]) for a in g.ascendc],
                }
            )
    return out


def _pipe_words(item: dict[str, Any]) -> str:
    pipes = tuple(item["pipes"])
    return f"{PIPE_WORDS.get(pipes, '/'.join(pipes))} {item['measure']}"


def measured_phrase(lines: list[dict[str, Any]]) -> str:
    """'the simulator puts 61 % of Scalar time on l.47 (K (GM) -> k_l1 (L1))', one clause per pipe
    group, the first line of each."""
    clauses = []
    seen: set[tuple[str, ...]] = set()
    for item in lines:
        if "sync_line" in item:
            if ("sync",) not in seen:
                seen.add(("sync",))
                share = item["share_of_sync"] * 100
                clauses.append(f"{share:.0f} % of {item['measure']} on {item['sync_line']}")
            continue
        pipes = tuple(item["pipes"])
        if pipes in seen:
            continue
        seen.add(pipes)
        where = ", ".join(str(n) for n in item["source_lines"])
        clauses.append(
            f"{item['share_of_pipes'] * 100:.0f} % of {_pipe_words(item)} on l.{where} ({item['what']})"
        )
    return f"{lines[0]['source']} puts " + "; ".join(clauses) if clauses else ""


def line_locations(profile: Profile, kernel: str, lines: list[dict[str, Any]]) -> tuple[Location, ...]:
    """The kernel source and Ascend C locations of measured lines, labelled with their share."""
    ir = profile.ir or {}
    k = find_kernel(ir, kernel) if ir else None
    if k is None:
        return ()
    cc_file = stage_path(k, "ascendc")
    out: list[Location] = []
    for item in lines:
        if "sync_line" in item:
            label = f"measured: {item['share_of_sync'] * 100:.0f} % of {item['measure']} (simulator)"
        elif "pipes" in item:
            where = "board" if item["source"] == "the board" else "simulator"
            label = f"measured: {item['share_of_pipes'] * 100:.0f} % of {_pipe_words(item)} ({where})"
        else:
            label = (
                f"measured: {item['core_min_cycles']:,.0f}–{item['core_max_cycles']:,.0f} cycles "
                "per core (simulator)"
            )
        for n in item["source_lines"]:
            out.append(Location(file=ir.get("kernel_file", ""), line=n, stage="source", label=label))
        if cc_file:
            out += [
                Location(file=cc_file, line=a, stage="ascendc", label=label)
                for a in item["ascendc_lines"][:2]
            ]
    return tuple(out)


def spread_lines(profile: Profile, kernel: str) -> list[dict[str, Any]]:
    """The mapped lines whose cycles differ most between the simulated cores (max - min), for a
    block-imbalance finding: where the extra work of the slow core is spent."""
    if profile.ir is None or find_kernel(profile.ir, kernel) is None:
        return []
    report = profile_lines(profile)
    if report is None or report.cores < 2:
        return []
    ranked = sorted(
        (g for g in report.lines if g.source_lines and g.core_max > g.core_min),
        key=lambda g: -(g.core_max - g.core_min),
    )
    return [
        {
            "source_lines": list(g.source_lines),
            "what": g.what,
            "core_min_cycles": round(g.core_min, 3),
            "core_max_cycles": round(g.core_max, 3),
            "ascendc_lines": [int(a["line"]) for a in g.ascendc],
        }
        for g in ranked[:MAX_LINES]
    ]


def spread_phrase(lines: list[dict[str, Any]]) -> str:
    """'in the simulator the cores differ most on l.50 (…): 25,600–28,160 cycles per core'."""
    if not lines:
        return ""
    top = lines[0]
    where = ", ".join(str(n) for n in top["source_lines"])
    return (
        f"in the simulator the cores differ most on l.{where} ({top['what']}): "
        f"{top['core_min_cycles']:,.0f}–{top['core_max_cycles']:,.0f} cycles per core"
    )
