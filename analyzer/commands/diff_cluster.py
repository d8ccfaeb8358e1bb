"""How `tilescope diff` shows two multi-rank runs (tilescope.diff_cluster): text, Markdown, JSON.

Per-rank kernel and finding changes are grouped across the ranks that agree ("improved on rank 3",
"resolved on ranks 0-7"), so eight ranks read like one run plus what differs.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len

from tilescope.commands.diff_words import finding_line, signed_pct, signed_us, term_text
from tilescope.diff import KernelDelta, finding_identity
from tilescope.diff_cluster import (
    SPLIT,
    ClusterDiff,
    ClusterFindingChange,
    RankDelta,
    RankStep,
    rank_text,
    step_value,
)
from tilescope.diff_links import FASTER, ONLY_BASE, ONLY_HEAD, SLOWER, LinkDelta, changed
from tilescope.ranksets import ranks_label
from tilescope.text.escape import md_code_span, md_text, one_line
from tilescope.text.terminal import console, wrap
from tilescope.text.words import fmt_us, saving_phrase

SPLIT_LABELS = {"step_us": "step time", "computing_us": "Computing",
                "communication_not_overlapped_us": "Communication (not overlapped)", "free_us": "Free"}
QUIET = "within threshold"  # kernel verdicts not listed one by one
SHOWN_GROUPS = 15


# ---------------------------------------------------------------- shared wording

def _arrow(d: RankDelta, attr: str) -> str:
    b, h = step_value(d.base, attr), step_value(d.head, attr)
    delta = d.delta(attr)
    text = f"{fmt_us(b)} → {fmt_us(h)}"
    return text + (f" {signed_us(delta)}" if delta is not None else "")


def _pct(b: float | None, h: float | None) -> float | None:
    return None if b is None or h is None or b <= 0 else (h / b - 1) * 100


def _slow_text(s: RankStep | None) -> str:
    return "none" if s is None or s.step is None else f"rank {s.rank} ({fmt_us(s.step.median)} per step)"


def slowest_line(r: ClusterDiff) -> str:
    b, h = r.base_slowest, r.head_slowest
    bv, hv = step_value(b, "step_us"), step_value(h, "step_us")
    change = "" if bv is None or hv is None else f": {signed_us(hv - bv)} ({signed_pct(_pct(bv, hv))})"
    return (f"slowest rank (longest step; ties: most Computing): {_slow_text(b)} → {_slow_text(h)}"
            f"{change}, {r.slowest_verdict}")


def straggler_line(r: ClusterDiff) -> str:
    b, h = r.base_straggler, r.head_straggler
    head = "straggler (TS601 slow-rank): "
    if b is None and h is None:
        return head + "none in either run"
    if b == h:
        return head + f"rank {b} in both runs (still there)"
    if h is None:
        return head + f"rank {b} → none (vanished)"
    if b is None:
        return head + f"none → rank {h} (new)"
    return head + f"rank {b} → rank {h} (moved)"


def _change_line(c: ClusterFindingChange, esc: Callable[[object], str]) -> str:
    f = c.finding
    sev = esc(f.get("severity", ""))
    if c.status == "still there" and c.base and c.head and c.base.get("severity") != c.head.get("severity"):
        sev = f"{esc(c.base.get('severity', ''))} → {esc(c.head.get('severity', ''))}"
    subject = f" ({esc(c.subject)})" if c.subject else ""
    saving = saving_phrase(f)
    if c.status == "still there" and c.base is not None and saving_phrase(c.base) != saving:
        saving += f" (base: {saving_phrase(c.base)})"
    what = f"{esc(f.get('code', '?'))} {esc(f.get('slug', ''))}{subject}"
    return f"{sev} {what}: {esc(f.get('message', ''))} — {saving}"


@dataclass
class KernelGroup:
    name: str
    verdict: str
    ranks: list[int]
    shown: KernelDelta  # the rank with the largest change per step
    shown_rank: int


def kernel_groups(r: ClusterDiff) -> tuple[list[KernelGroup], int]:
    """Kernel changes grouped by (kernel, verdict) across ranks, largest change first; and how
    many rank x kernel comparisons were within the threshold (not listed)."""
    groups: dict[tuple[str, str], KernelGroup] = {}
    quiet = 0
    for rank, result in r.kernels.items():
        for d in result.kernels:
            if d.verdict == QUIET:
                quiet += 1
                continue
            g = groups.get((d.name, d.verdict))
            if g is None:
                groups[(d.name, d.verdict)] = KernelGroup(d.name, d.verdict, [rank], d, rank)
                continue
            g.ranks.append(rank)
            if abs(d.delta_us) > abs(g.shown.delta_us):
                g.shown, g.shown_rank = d, rank
    return sorted(groups.values(), key=lambda g: -abs(g.shown.delta_us)), quiet


def _kernel_numbers(g: KernelGroup) -> str:
    d = g.shown
    where = f"rank {g.shown_rank}: " if len(g.ranks) > 1 else ""
    if d.base is None or d.head is None:
        return f"{where}{signed_us(d.delta_us)} per step"
    medians = f"{fmt_us(d.base.per_launch.median)} → {fmt_us(d.head.per_launch.median)}"
    change = f"({signed_pct(d.median_delta_pct)}), {signed_us(d.delta_us)} per step"
    return f"{where}median per launch {medians} {change}"


def _changes(n: int) -> str:
    return f"{n} change{'s' if n != 1 else ''}"


def _ranks_text(ranks: list[int], total: int) -> str:
    return ranks_label(ranks) + (f" ({len(ranks)} of {total})" if len(ranks) > 1 else "")


def finding_groups(r: ClusterDiff) -> list[tuple[str, dict[str, Any], list[int]]]:
    """Per-rank findings resolved / new on some ranks, grouped by (status, code, kernels)."""
    out: dict[tuple[str, tuple[str, tuple[str, ...]]], tuple[str, dict[str, Any], list[int]]] = {}
    for rank, result in r.kernels.items():
        for status, found in (("resolved", result.resolved), ("new", result.new)):
            for f in found:
                key = (status, finding_identity(f))
                if key not in out:
                    out[key] = (status, f, [])
                out[key][2].append(rank)
    return list(out.values())


def gate_line(r: ClusterDiff, esc: Callable[[object], str] = one_line) -> str:
    head = (f"regression gate ({r.threshold_pct:g} %, noise-aware; slowest rank's step time, "
            "each rank's top kernels)")
    if not r.regressions:
        return f"{head}: passed"
    return f"{head}: TRIPPED — " + "; ".join(esc(x) for x in r.regressions)


def new_gate_line(r: ClusterDiff, esc: Callable[[object], str] = one_line) -> str | None:
    if r.fail_on_new is None:
        return None
    head = f"new-findings gate ({r.fail_on_new} and above, new since the base; TS6xx by what they name)"
    if not r.new_over_gate:
        return f"{head}: passed"
    shown = "; ".join(
        f"{esc(f.get('severity', ''))} {esc(f.get('code', '?'))} {esc(f.get('slug', ''))} "
        f"on rank {esc(f.get('rank'))}"
        for f in r.new_over_gate[:5])
    more = f" (+{len(r.new_over_gate) - 5} more)" if len(r.new_over_gate) > 5 else ""
    return f"{head}: TRIPPED — {len(r.new_over_gate)} finding(s): {shown}{more}"


def _title(r: ClusterDiff) -> str:
    b, h = len(r.base_ranks), len(r.head_ranks)
    return f"{b}-rank run → {h}-rank run" if b != h else f"two {b}-rank runs"


# ---------------------------------------------------------------- text

RANK_HEADERS = ("ranks", *(SPLIT_LABELS[a] + " (base → head)" for a in SPLIT), "verdict")


def _rank_lines(r: ClusterDiff, width: int | None) -> list[str]:
    """The per-rank table (box-less, numbers unwrapped) when it fits `width`, else a block per rank."""
    # deferred: rich.table, rich.text only for terminal output; `tilescope --help` imports every command
    #   module
    from rich.table import Table
    from rich.text import Text

    rows = [[rank_text(ranks), *cells] for ranks, cells in rank_rows(r, _arrow)]
    natural = sum(max(cell_len(h), *(cell_len(c[i]) for c in rows)) for i, h in enumerate(RANK_HEADERS))
    if width is not None and natural + 2 * (len(RANK_HEADERS) - 1) > width:
        lines: list[str] = []
        for cells in rows:
            word = "ranks" if any(c in cells[0] for c in ",-") else "rank"
            lines += wrap(f"{word} {cells[0]}: step time {cells[1]}, {cells[-1]}", width, "", "    ")
            split = " · ".join(f"{SPLIT_LABELS[a]} {c}" for a, c in zip(SPLIT[1:], cells[2:-1], strict=True))
            lines += wrap(split, width, "    ", "      ")
        return lines
    table = Table(box=None, pad_edge=False, show_header=True, header_style="", expand=False)
    for i, header in enumerate(RANK_HEADERS):
        table.add_column(header, justify="left" if i in (0, len(RANK_HEADERS) - 1) else "right", no_wrap=True)
    for cells in rows:
        table.add_row(*(Text(c) for c in cells))
    buf = io.StringIO()
    console(None, file=buf, color=False).print(table, crop=False)
    return [line.rstrip() for line in buf.getvalue().splitlines()]


def rank_rows(r: ClusterDiff, cell: Callable[[RankDelta, str], str]) -> list[tuple[list[int], list[str]]]:
    """The per-rank rows (step time and split, base → head, and the verdict), ranks whose rows read
    the same merged into one ("0-2, 4-7"): 64 ranks that agree are one line, the outlier its own."""
    merged: dict[tuple[str, ...], list[int]] = {}
    for d in r.ranks:
        merged.setdefault((*(cell(d, a) for a in SPLIT), d.verdict), []).append(d.rank)
    return [(ranks, list(cells)) for cells, ranks in merged.items()]


def render_text(r: ClusterDiff, width: int | None = None) -> str:
    esc = term_text
    out: list[str] = []

    def say(text: str, indent: str = "", hang: str = "  ") -> None:
        out.extend(wrap(text, width, indent, hang))

    say(f"tilescope diff of {_title(r)}: {esc(r.base_label)} → {esc(r.head_label)}")
    for note in r.notes:
        say(f"note: {note}")
    say(slowest_line(r))
    say(straggler_line(r))
    out.append("")
    say("step time per rank: mean per profiled step (the split adds up to it); verdict on the step time; "
        "ranks that read the same share a row")
    out += _rank_lines(r, width)
    out.append("")
    changes = r.findings
    counts = {s: sum(1 for c in changes if c.status == s) for s in ("gone", "new", "still there")}
    say(f"cross-rank findings (TS6xx): {counts['gone']} gone, {counts['new']} new, "
        f"{counts['still there']} still there")
    for c in changes:
        say(f"{c.status:<11} {_change_line(c, esc)}", "  ", "    ")
    out.append("")
    if r.links:
        say(links_line(r))
        moved = changed(r.links)
        for d in moved[:SHOWN_GROUPS]:
            say(f"{d.verdict:<11} {esc(d.name)}: {link_numbers(d)}", "  ", "    ")
        if len(moved) > SHOWN_GROUPS:
            say(f"… {len(moved) - SHOWN_GROUPS} more (--format json has all)", "  ")
        out.append("")
    groups, quiet = kernel_groups(r)
    say(f"kernels per rank (each rank's top kernels, matched as in a single-run diff; {len(r.kernels)} "
        f"rank{'s' if len(r.kernels) != 1 else ''} compared): {quiet} comparisons within the threshold, "
        f"{_changes(len(groups))}")
    total = len(r.common_ranks)
    for g in groups[:SHOWN_GROUPS]:
        where = _ranks_text(g.ranks, total)
        say(f"{esc(g.name)}: {g.verdict} on {where} — {_kernel_numbers(g)}", "  ", "    ")
    if len(groups) > SHOWN_GROUPS:
        say(f"… {len(groups) - SHOWN_GROUPS} more (--format json has all)", "  ")
    found = finding_groups(r)
    persisting = sum(k.persisting for k in r.kernels.values())
    say(f"per-rank findings: {sum(1 for s, _, _ in found if s == 'resolved')} resolved, "
        f"{sum(1 for s, _, _ in found if s == 'new')} new (grouped across ranks), "
        f"{persisting} persisting (summed over ranks)")
    for status, f, ranks in found:
        say(f"{status:<8} {finding_line(f, esc)} on {_ranks_text(ranks, total)}", "  ", "    ")
    out.append("")
    say(gate_line(r, esc))
    new_gate = new_gate_line(r, esc)
    if new_gate is not None:
        say(new_gate)
    return "\n".join(out) + "\n"


def links_line(r: ClusterDiff) -> str:
    """`links (bandwidth per rank pair over the run, no spread): 56 compared, 1 slower, ...`."""
    n = {v: sum(1 for d in r.links if d.verdict == v) for v in (SLOWER, FASTER, ONLY_BASE, ONLY_HEAD)}
    both = sum(1 for d in r.links if d.base_gbps is not None and d.head_gbps is not None)
    text = (f"links (bandwidth per rank pair over the run, no spread): {both} in both runs, "
            f"{n[SLOWER]} slower and {n[FASTER]} faster by {r.threshold_pct:g} % or more")
    if n[ONLY_BASE] or n[ONLY_HEAD]:
        text += f"; {n[ONLY_BASE]} only in base, {n[ONLY_HEAD]} only in head"
    return text


def link_numbers(d: LinkDelta) -> str:
    """`20.0 → 5.0 GB/s (-75.0 %), 56.0 → 56.0 MB moved`."""
    def n(v: float | None) -> str:
        return "–" if v is None else f"{v:,.1f}"

    pct = d.pct
    change = "" if pct is None else f" ({signed_pct(pct)})"
    return f"{n(d.base_gbps)} → {n(d.head_gbps)} GB/s{change}, {n(d.base_mb)} → {n(d.head_mb)} MB moved"


# ---------------------------------------------------------------- Markdown

def _md_cell(d: RankDelta, attr: str) -> str:
    return _arrow(d, attr).replace(" ", "\u00a0")  # a number cell stays on one line (escape.md_nowrap)


def render_md(r: ClusterDiff) -> str:
    icon = "❌" if r.tripped else "✅"
    out = [f"## tilescope diff of {_title(r)} — {md_code_span(r.base_label, 100)} → "
           f"{md_code_span(r.head_label, 100)}", ""]
    out += [f"> {md_text(n, None)}" for n in r.notes]
    if r.notes:
        out.append("")
    # the gates' verdict first: what a reviewer of the pull request reads before anything else
    out += [f"{icon} **{md_text(gate_line(r), None)}**", ""]
    new_gate = new_gate_line(r)
    if new_gate is not None:
        out += [f"{'❌' if r.new_over_gate else '✅'} **{md_text(new_gate, None)}**", ""]
    out += [f"**{md_text(slowest_line(r), None)}**", "", md_text(straggler_line(r), None), "",
            "Step time per rank: mean per profiled step (the split adds up to it); "
            "verdict on the step time; ranks that read the same share a row.", "",
            "| ranks | " + " | ".join(f"{SPLIT_LABELS[a]} base → head" for a in SPLIT) + " | verdict |",
            "|---|" + "--:|" * len(SPLIT) + "---|"]
    out += [f"| {rank_text(ranks)} | " + " | ".join(cells) + " |" for ranks, cells in rank_rows(r, _md_cell)]
    counts = {s: sum(1 for c in r.findings if c.status == s) for s in ("gone", "new", "still there")}
    out += ["", f"**Cross-rank findings (TS6xx):** {counts['gone']} gone, {counts['new']} new, "
            f"{counts['still there']} still there", ""]
    marks = {"gone": "✅ gone", "new": "🆕 new", "still there": "⏳ still there"}
    out += [f"- {marks[c.status]} {_change_line(c, md_text)}" for c in r.findings]
    if r.links:
        line = links_line(r)
        out += ["", f"**{md_text(line[0].upper() + line[1:], None)}**"]
        moved = changed(r.links)
        if moved:
            out += ["", "| link | verdict | bandwidth and data, base → head |", "|---|---|---|"]
            out += [f"| {md_text(d.name, None)} | {d.verdict} | {md_text(link_numbers(d), None)} |"
                    for d in moved[:SHOWN_GROUPS]]
            if len(moved) > SHOWN_GROUPS:
                out.append(f"\n_{len(moved) - SHOWN_GROUPS} more in `--format json`._")
    groups, quiet = kernel_groups(r)
    total = len(r.common_ranks)
    out += ["", f"**Kernels per rank** (each rank's top kernels, matched as in a single-run diff): "
            f"{quiet} comparisons within the threshold, {_changes(len(groups))}", ""]
    if groups:
        out += ["| kernel | verdict | ranks | largest change |", "|---|---|---|---|"]
        out += [f"| {md_code_span(g.name, 120)} | {g.verdict} | {_ranks_text(g.ranks, total)} | "
                f"{md_text(_kernel_numbers(g), None)} |" for g in groups[:SHOWN_GROUPS]]
        if len(groups) > SHOWN_GROUPS:
            out.append(f"\n_{len(groups) - SHOWN_GROUPS} more in `--format json`._")
    found = finding_groups(r)
    if found:
        out += ["", "**Per-rank findings:**", ""]
        out += [f"- {'✅' if s == 'resolved' else '🆕'} {s} {finding_line(f, md_text)} on "
                f"{_ranks_text(ranks, total)}" for s, f, ranks in found]
    return "\n".join(out) + "\n"


def render_json(r: ClusterDiff) -> str:
    return json.dumps(r.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n"


RENDERERS: dict[str, Callable[[ClusterDiff], str]] = {
    "text": render_text, "md": render_md, "json": render_json,
}
