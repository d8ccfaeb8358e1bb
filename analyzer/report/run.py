"""The run a multi-rank report describes, said before any one rank's numbers (issue #28).

A multi-rank report's top-level `inputs`, `summary` and `top_kernels` are its first rank's (what a
single-input reader expects); a reader of the run wants the ranks, the slow rank, how far the
ranks' step times spread and what the cross-rank rules found first. `run_section` is that lead,
computed once from the report's `cluster` section and its cross-rank findings: the JSON stores it
as `run` (`tilescope.report.data.add_cluster`), and the terminal, Markdown and HTML renderers say
it with `run_lines`, in the same words.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from tilescope.report.ranks import SCOPE_CLUSTER, SLOW_RANK_CODE
from tilescope.text.words import fmt_pct, fmt_us, launches_text, num, speed_of_light_text, unit_share_parts

# what `run.cross_rank_findings` keeps of each cross-rank finding (the rest is in `findings`)
CROSS_KEYS = ("code", "slug", "severity", "est_saving_us", "share_of_total")


def run_of(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """The report's `run` section, or the same computed from a report written without one;
    None for a single-rank report."""
    stored = report.get("run")
    return dict(stored) if isinstance(stored, Mapping) else run_section(report)


def run_section(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """`report["run"]` of a multi-rank report (None without a `cluster` section): the run's folder,
    rank counts, the slow rank (TS601's) and the rank with the longest step, step time and
    Computing per rank as min / median / max (`spread` = (max - min) / median) with the ranks at
    each end, and the cross-rank findings by saving."""
    section = report.get("cluster")
    if not isinstance(section, Mapping) or not section.get("ranks"):
        return None
    rows = [r for r in section.get("ranks") or [] if isinstance(r, Mapping)]
    step = _spread(rows, "step_us")
    cross = [{k: f.get(k) for k in CROSS_KEYS} for f in report.get("findings") or []
             if isinstance(f, Mapping) and f.get("scope") == SCOPE_CLUSTER]
    return {
        "path": run_path(report),
        "ranks_total": int(section.get("ranks_total") or len(rows)),
        "ranks_loaded": int(section.get("ranks_loaded") or 0),
        "slow_rank": section.get("slow_rank"),
        "longest_step_rank": step["max_rank"] if step else None,
        "step_us": step,
        "computing_us": _spread(rows, "computing_us"),
        "cross_rank_findings": cross,
    }


def _spread(rows: Sequence[Mapping[str, Any]], key: str) -> dict[str, Any] | None:
    pairs = [(int(r["rank"]), v) for r in rows if (v := num(r.get(key))) is not None]
    if not pairs:
        return None
    values = [v for _, v in pairs]
    median = statistics.median(values)
    lo = min(pairs, key=lambda p: (p[1], p[0]))
    hi = max(pairs, key=lambda p: (p[1], -p[0]))
    return {
        "min": round(lo[1], 3), "median": round(median, 3), "max": round(hi[1], 3),
        "spread": round((hi[1] - lo[1]) / median, 6) if median > 0 else None,
        "min_rank": lo[0], "max_rank": hi[0],
    }


def run_path(report: Mapping[str, Any]) -> str:
    """The folder holding every rank (their common parent), readable or not."""
    section = report.get("cluster") or {}
    paths = [str(r.get("path") or "") for r in section.get("ranks") or [] if isinstance(r, Mapping)]
    paths = [p for p in paths if p] or [str(p.get("path") or "") for p in report.get("profiles") or []]
    return common_root(paths)


def common_root(paths: Sequence[str]) -> str:
    """The longest common folder of `paths` (a URL keeps its `scheme://`); the first path when
    they share none."""
    if not paths:
        return ""
    scheme = paths[0].partition("://")[0] + "://" if "://" in paths[0] else ""
    if scheme and all(p.startswith(scheme) for p in paths):  # ranks at a URL: keep its "//"
        return scheme + common_root([p[len(scheme):] for p in paths])
    if len(paths) == 1:
        return os.path.dirname(paths[0].rstrip("/")) or paths[0]
    try:
        return os.path.commonpath(paths) or paths[0]
    except ValueError:  # absolute and relative paths mixed
        return paths[0]


def ranks_phrase(run: Mapping[str, Any]) -> str:
    """`8 ranks` or `2 ranks, 1 with a readable kernel table`."""
    total, loaded = int(run.get("ranks_total") or 0), int(run.get("ranks_loaded") or 0)
    text = f"{total:,} ranks"
    return text if loaded == total else f"{text}, {loaded:,} with a readable kernel table"


def run_lines(run: Mapping[str, Any]) -> list[str]:
    """The lead of a multi-rank report, one plain-text sentence each: the slow rank, the spread
    of step time and Computing over the ranks, the cross-rank findings."""
    step, computing = run.get("step_us") or {}, run.get("computing_us") or {}
    slow = run.get("slow_rank")
    if slow is not None:
        line = f"slow rank: {slow} ({SLOW_RANK_CODE})"
        if computing and computing.get("max_rank") == slow:
            line += (f", Computing {fmt_us(computing.get('max'))} vs a median of "
                     f"{fmt_us(computing.get('median'))} over the ranks")
    else:
        line = f"slow rank: none named ({SLOW_RANK_CODE} did not fire)"
        if step:
            line += f"; the longest step is rank {step.get('max_rank')}'s"
    lines = [line]
    if step:
        lines.append(f"step time per rank: {_range(step)}" + (
            f"; Computing {_range(computing)}" if computing else ""))
    cross = list(run.get("cross_rank_findings") or [])
    if cross:
        named = ", ".join(f"{f.get('code')} {f.get('slug')} ({f.get('severity')})" for f in cross)
        lines.append(f"cross-rank findings: {len(cross)} — {named}")
    else:
        lines.append("cross-rank findings: none")
    return lines


def _range(s: Mapping[str, Any]) -> str:
    """`131.91 ms (rank 1) to 136.58 ms (rank 0), spread 3.4 % of the median`."""
    if fmt_us(s.get("min")) == fmt_us(s.get("max")):
        return f"{fmt_us(s.get('max'))} on every rank"
    spread = num(s.get("spread"))
    return (f"{fmt_us(s.get('min'))} (rank {s.get('min_rank')}) to {fmt_us(s.get('max'))} "
            f"(rank {s.get('max_rank')})" + (f", spread {fmt_pct(spread)} of the median"
                                            if spread is not None else ""))


PER_RANK_COLUMNS = (
    "ranks", "device time", "launches", "busy (of device time)", "speed of light", "top kernel",
)


def per_rank_rows(report: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """The per-rank summaries as plain-text cells (PER_RANK_COLUMNS; the top kernel as its name
    and its share apart, so a renderer can mark the name as code), ranks whose cells read the
    same sharing one row (`0-2, 4-7`): 4,096 rows of the same numbers would hide the one that
    differs."""
    # deferred: `tilescope --help` imports this module (through commands.diff); ranksets only when used
    from tilescope.ranksets import rank_set_text

    groups: dict[tuple[str, ...], list[int]] = {}
    for i, p in enumerate(report.get("profiles") or []):
        s = p.get("summary") or {}
        top = (s.get("top_kernels") or [{}])[0] or {}
        sol = speed_of_light_text(s).removeprefix("kernels ran at ").split(" of their")[0]
        cells = (fmt_us(s.get("total_device_us")), launches_text(s),
                 " · ".join(text for _, text in unit_share_parts(s)) or "–", sol or "–",
                 str(top.get("name") or ""), fmt_pct(top.get("share")) if top.get("name") else "")
        groups.setdefault(cells, []).append(int(p["rank"]) if p.get("rank") is not None else i)
    return [(rank_set_text(ranks), *cells) for cells, ranks in groups.items()]
