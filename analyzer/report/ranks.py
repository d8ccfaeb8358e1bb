"""The multi-rank parts of a report: the `cluster` section (rank table, step split, the cross-rank
rules' bookkeeping) and what every renderer shows of it: the rank table's rows, per-rank findings
grouped across ranks ("on 7 of 8 ranks") and the "not checked" list given once.

`cluster_section` is called by `build_report` (the JSON); the rest reads the report dict only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tilescope.findings import SEVERITY_RANK
from tilescope.text.words import fmt_us

if TYPE_CHECKING:
    import pandas as pd

    from tilescope.cluster import Cluster
    from tilescope.engine import AnalysisResult

SCOPE_CLUSTER = "cluster"  # a finding/skipped rule about the ranks together (TS6xx)
SLOW_RANK_CODE = "TS601"
RANK_COLUMNS = ("rank", "step time", "Computing", "Communication (not overlapped)", "Free", "from", "")


def cluster_section(cluster: Cluster, result: AnalysisResult) -> dict[str, Any]:
    """`report["cluster"]`: one row per rank (µs summed over its steps, the step time's min,
    median and max, `slow` on the rank TS601 named), the per-step rows (binned past
    cluster.STEP_ROWS_CAP: `steps_bin_width` > 1), the notes of summary files left out, and which
    TS6xx rules ran."""
    # deferred: cluster (pandas) only where used
    from tilescope.cluster import rank_table, report_steps

    slow = next((f.evidence.get("rank") for f in result.findings if f.code == SLOW_RANK_CODE), None)
    rows = rank_table(cluster, slow)
    per_step, width = report_steps(cluster.steps.drop(
        columns=["overlapped_us", "communication_us", "stage_us", "bubble_us"], errors="ignore"))
    return {
        "ranks": rows,
        "slow_rank": slow,
        "ranks_total": len(rows),
        "ranks_loaded": sum(1 for r in rows if r["kernels_loaded"]),
        "steps": _step_records(per_step),
        "steps_bin_width": width,
        "notes": list(cluster.notes),
        "rules_run": list(result.rules_run),
        "links": link_totals(cluster.links),
    }


def _step_records(steps: pd.DataFrame) -> list[dict[str, Any]]:
    """One JSON-ready dict per rank and step (NaN and <NA> -> None), built column by column: a
    64-rank run of 1,258 steps has 80,000 of them."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    if not len(steps):
        return []
    columns = []
    for name in steps.columns:
        col = steps[name]
        values = col.astype(object).where(col.notna(), None).tolist()
        if pd.api.types.is_integer_dtype(col.dtype):
            values = [None if v is None else int(v) for v in values]
        elif pd.api.types.is_float_dtype(col.dtype):
            values = [None if v is None else float(v) for v in values]
        columns.append(values)
    names = [str(c) for c in steps.columns]
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


def link_totals(links: Any) -> list[dict[str, Any]]:
    """Per link (source rank -> destination rank) of `cluster.links`, as `cluster.link_sums`
    sums them (each collective once, over every step, transport and reporting rank):
    `size_mb`, `transit_us`, `bandwidth_gbps` = Σ size / Σ transit time (as TS604 computes it),
    `transports`, `collectives` (how many were read) and `unlisted` (an aggregate of the file held
    collectives it does not list one by one; their part is in the sums).

    Why one row per rank pair: the communication matrix has one cell per pair, and a pair can move
    data over two transports (HCCS and RDMA on the real gpt3 run). LOCAL copies (a rank to itself)
    and rows without a transit time are left out. Both ends of a link may report it; each end's
    rows count, as in TS604, so a transfer seen from both sides is summed twice (its bandwidth,
    a ratio, is unchanged when the two views agree)."""
    # deferred: pandas (~0.3 s) and the cluster model only when there are links
    import pandas as pd

    from tilescope.cluster import link_sums

    if not isinstance(links, pd.DataFrame) or links.empty or "src_rank" not in links.columns:
        return []
    pairs = link_sums(links)
    out = []
    for rec in pairs.reset_index().to_dict("records"):  # one per rank pair, not per transfer
        size, transit = float(rec["size_mb"]), float(rec["transit_us"])
        out.append({
            "src_rank": int(rec["src_rank"]), "dst_rank": int(rec["dst_rank"]),
            "transports": list(rec["transports"]),
            "size_mb": round(size, 6), "transit_us": round(transit, 3),
            "bandwidth_gbps": round(size / transit * 1000.0, 3),  # MB/µs is TB/s
            "collectives": int(rec["collectives"]), "unlisted": bool(rec["unlisted"]),
        })
    return out


def rank_rows(report: Mapping[str, Any], grouped: bool = True) -> list[list[str]]:
    """The rank table as text cells (RANK_COLUMNS), ranks whose cells read the same sharing one
    row (`0-2, 4-7`): a table of 64 or 4,096 rows of the same numbers would hide the one that
    differs. `grouped=False`: one row per rank, in the section's order (the dashboard, whose rows
    each open their rank). Empty for a single-rank report; the JSON keeps one row per rank."""
    # deferred: `tilescope --help` imports this module (through commands.diff); ranksets only when used
    from tilescope.ranksets import rank_set_text

    if not grouped:
        return _rank_rows(report)
    groups: dict[tuple[str, ...], list[int]] = {}
    for row in _rank_rows(report):
        groups.setdefault(tuple(row[1:]), []).append(int(row[0]))
    return [[rank_set_text(ranks), *cells] for cells, ranks in groups.items()]


def _rank_rows(report: Mapping[str, Any]) -> list[list[str]]:
    section = report.get("cluster") or {}
    out = []
    for r in section.get("ranks") or []:
        mark = []
        if r.get("slow"):
            mark.append("slow rank")
        if not r.get("kernels_loaded"):
            mark.append("kernel table unreadable")
        out.append([
            str(r.get("rank")), fmt_us(r.get("step_us")), fmt_us(r.get("computing_us")),
            fmt_us(r.get("communication_not_overlapped_us")), fmt_us(r.get("free_us")),
            str(r.get("source") or "–"), ", ".join(mark),
        ])
    return out


def group_across_ranks(findings: Sequence[Mapping[str, Any]], ranks_total: int) -> list[dict[str, Any]]:
    """Per-rank findings of the same rule on the same kernels, one entry for all the ranks they
    were found on: the member with the highest severity, then the largest saving (its own message,
    evidence and numbers), with `ranks` (sorted ids), `rank_text` ("on 7 of 8 ranks: 0-6"),
    `ranks_total` and `by_rank` (each member's rank, input, severity, saving, share, occurrences
    and message, by rank). Cross-rank findings, single-rank reports and entries grouped already
    pass through; the order (largest saving first) is kept.

    `build_report` groups a multi-rank report's JSON this way (one entry per problem, not one per
    rank: a 4,096-rank report would otherwise repeat each problem 4,096 times with its listed
    occurrences); the renderers call it again, which changes nothing on a grouped report and
    groups a report written before (schema 1.0)."""
    # deferred: `tilescope --help` imports this module (through commands.diff); ranksets only when used
    from tilescope.ranksets import rank_set_text

    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    order: list[tuple[Any, ...]] = []
    for i, f in enumerate(findings):
        if (ranks_total < 2 or f.get("scope") == SCOPE_CLUSTER or f.get("rank") is None
                or "by_rank" in f):
            key: tuple[Any, ...] = ("single", i)
        else:
            key = (f.get("code"), f.get("slug"), tuple(f.get("kernels") or ()))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(dict(f))
    out = []
    for key in order:
        members = groups[key]
        top: dict[str, Any] = max(members, key=_weight)
        best = dict(top)
        if key[0] != "single":
            members.sort(key=lambda f: int(f["rank"]))
            ranks = sorted({int(f["rank"]) for f in members})
            best["ranks"] = ranks
            best["rank_text"] = f"on {len(ranks)} of {ranks_total} ranks: {rank_set_text(ranks)}"
            best["ranks_total"] = ranks_total
            best["by_rank"] = [{k: f.get(k) for k in BY_RANK_KEYS} for f in members]
        elif best.get("scope") == SCOPE_CLUSTER:
            best["rank_text"] = "across ranks"
        out.append(best)
    return out


# what a grouped finding keeps of each rank's own (the rest is the representative's): its
# numbers and its message, which says them in words
BY_RANK_KEYS = ("rank", "input", "severity", "est_saving_us", "share_of_total", "occurrences", "message")


def rank_findings(findings: Sequence[Mapping[str, Any]], rank: int) -> list[dict[str, Any]]:
    """One rank's own findings from a report's list, grouped (`by_rank`) or not: a grouped entry
    the rank is a member of comes back with that rank's own severity, saving, share, occurrences,
    message and input. Only the representative's evidence is in the report: another rank's
    finding comes back with `evidence` empty and `evidence_rank` naming the rank that has it."""
    out: list[dict[str, Any]] = []
    for f in findings:
        if f.get("scope") == SCOPE_CLUSTER:
            continue
        members = f.get("by_rank")
        if isinstance(members, list):
            own = next((m for m in members if isinstance(m, Mapping) and m.get("rank") == rank), None)
            if own is not None:
                plain = {k: v for k, v in f.items() if k not in GROUP_KEYS}
                if own.get("rank") != f.get("rank"):
                    plain["evidence"] = {}
                    plain["evidence_rank"] = f.get("rank")
                out.append({**plain, **own})
        elif f.get("rank") == rank:
            out.append(dict(f))
    return out


GROUP_KEYS = ("ranks", "rank_text", "ranks_total", "by_rank")


def _weight(f: Mapping[str, Any]) -> tuple[int, float]:
    return SEVERITY_RANK.get(str(f.get("severity", "")).lower(), -1), _saving(f)


def _saving(f: Mapping[str, Any]) -> float:
    return float(f.get("est_saving_us") or 0.0)


def ranks_total(report: Mapping[str, Any]) -> int:
    """How many ranks the report covers (loaded or not); the profile count without a cluster."""
    section = report.get("cluster") or {}
    return int(section.get("ranks_total") or len(report.get("profiles") or []))


def unique_skipped(skipped: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Each skipped rule once (the first rank's entry): "not checked" is said once for all ranks."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for s in skipped:
        key = _skip_key(s)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def group_skipped(skipped: Sequence[Mapping[str, Any]], ranks_total: int) -> list[dict[str, Any]]:
    """A multi-rank report's skipped rules, one entry per rule and missing input with `ranks`:
    the sorted ids of the ranks it was skipped on (cross-rank ones and single-rank reports pass
    through)."""
    out: list[dict[str, Any]] = []
    index: dict[tuple[Any, ...], dict[str, Any]] = {}
    for s in skipped:
        if ranks_total < 2 or s.get("scope") == SCOPE_CLUSTER or s.get("rank") is None or "ranks" in s:
            out.append(dict(s))
            continue
        key = _skip_key(s)
        entry = index.get(key)
        if entry is None:
            entry = index[key] = {**s, "ranks": []}
            out.append(entry)
        entry["ranks"].append(int(s["rank"]))
    for entry in index.values():
        entry["ranks"] = sorted(set(entry["ranks"]))
    return out


def _skip_key(s: Mapping[str, Any]) -> tuple[Any, ...]:
    return (s.get("code"), tuple(s.get("needs") or s.get("missing") or ()))
