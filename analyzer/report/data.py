"""THE versioned JSON report: every format, the dashboard and diff render from this dict.

`build_report(profile, result)` for one profile, or `build_report([(profile, result), ...])` for
several (one per rank). The schema is `schema/report.schema.json`; `validate_report()` checks a dict
against it. Top-level `inputs`, `summary` and `top_kernels` describe the first profile (what a
single-input renderer reads); `profiles` has one entry per profile and every finding, skipped rule
and error carries the `rank` / `input` it belongs to.

Top kernels carry what the tables and charts show (op type, shapes, duration-weighted pipe ratios,
Cube/Vector shares, roofline figures, launch-time quartiles; `kernel_group_stats`), `timeline` the
first profile's launches (capped, `launch_timeline`) and `inputs.chip` the roofline's chip figures.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tilescope.analysis import skipped_to_dict
from tilescope.findings import Finding
from tilescope.gcpause import gc_paused
from tilescope.lines import lines_section
from tilescope.profile import Profile
from tilescope.report.meta import SCHEMA_VERSION, TIMELINE_CAP, now_stamp, tool_version
from tilescope.report.ranks import SCOPE_CLUSTER, cluster_section, group_across_ranks, group_skipped
from tilescope.report.run import run_section
from tilescope.summary import FIRST_OF_GROUP, TIMELINE_KEYS, WEIGHTED_RATIOS, summarize

# pandas and the profile model are imported by the functions that need them: `tilescope analyze`
# imports this module before loading, and loading starts the timeline scan before pandas is loaded.
if TYPE_CHECKING:
    import pandas as pd

    from tilescope.cluster import Cluster
    from tilescope.engine import AnalysisResult

SCHEMA_PATH = Path(__file__).with_name("schema") / "report.schema.json"
def _valid_text(text: str) -> str:
    """`text` as valid Unicode: a path that is not UTF-8 (byte 0xff in a directory name) arrives
    as a lone surrogate, which no UTF-8 writer (msgspec, files) can encode; its byte is written as
    the visible escape `\\xff` instead, in every format alike."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text


def _jsonable(x: Any) -> Any:
    """Numpy/pandas scalars and NaN made JSON-safe (NaN/inf become null)."""
    t = type(x)
    if t is str:  # most of a report's ~60,000 values; isascii is a flag lookup
        return x if x.isascii() else _valid_text(x)
    if t is int or t is bool or x is None:
        return x
    if t is float:
        return None if math.isnan(x) or math.isinf(x) else x
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating | float):
        f = float(x)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, Path):
        return str(x)
    return x


def _summary(profile: Profile, result: AnalysisResult) -> dict[str, Any]:
    """tilescope.summary's model of this profile and its (already bounded) findings."""
    derived = _derived(profile)
    if derived is not profile.kernels:  # a Profile built by hand: the summary reads derived columns
        profile = profile.with_kernels(derived)
    s = summarize(profile, result.findings, dt=result.device_time)
    s["rules_run"] = list(result.rules_run)
    if s.get("top_kernels") and len(profile.kernels):
        s["top_kernels"] = enrich_top_kernels(list(s["top_kernels"]), profile.kernels)  # derived above
    return s


def _derived(profile: Profile) -> pd.DataFrame:
    """The kernel table with tilescope.metrics' derived columns (loaded profiles already have them)."""
    # deferred: metrics (pyarrow) only where used
    from tilescope.metrics import with_derived_metrics

    return with_derived_metrics(profile.kernels, profile.chip)


# long: each stage's arrays are freed (`del`) before the next stage builds its own, which holds
# the peak on millions of launches (see the docstring); helpers would keep them alive in frames.
def kernel_group_stats(kernels: pd.DataFrame, names: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per kernel name (index): launch-time statistics, duration-weighted pipe ratios,
    roofline figures, the speed of light and the first non-null op type, core type, shapes and
    dtypes of the kernel's launches.

    Weighted means: Σ(value × duration) / Σ(duration) over the launches that carry the value.
    `arithmetic_intensity` = Σ flops / Σ bytes_moved and `achieved_tflops` = Σ flops / Σ duration,
    both over the launches with FLOPs and bytes (one roofline point); `achieved_gbps` = Σ bytes /
    Σ duration over launches with bytes; `flops` and
    `bytes_moved` are means per launch; `sol_us` is the sum over launches and `sol_pct` = Σ sol_us /
    Σ duration over the launches that have one; `sol_bound` the bound most launches share.

    The per-launch terms are summed a few at a time (`_GroupSums`), and the text columns are read
    as they are: a launches × 61 frame of terms and an object copy of four text columns held
    ~3 GB on 3 M launches.
    """
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    if "name" not in kernels.columns:
        return pd.DataFrame()
    codes, uniques = _factorized_names(kernels["name"])
    if names is None:
        keep = np.ones(len(codes), dtype=bool)
    else:  # the launches of these names (a name not in the table has no launch)
        wanted = uniques.get_indexer(pd.Index(list(names), dtype="str"))
        keep = np.isin(codes, wanted[wanted >= 0])
    # the kernels' numbers as the group key, NaN for a launch without a name: groupby numbers
    # and leaves out the launches exactly as it does with the names themselves
    key = np.where(codes >= 0, codes, np.nan)[keep]

    # deferred: metrics (pyarrow) only where used
    from tilescope.metrics import float_column, text_column

    def values(col: str) -> np.ndarray:
        return float_column(kernels, col).to_numpy()[keep]

    dur, flops, moved, sol = values("duration_us"), values("flops"), values("bytes_moved"), values("sol_us")

    def ratio_terms(col: str) -> tuple[np.ndarray, np.ndarray]:
        v = values(col)
        return v * dur, _where(~np.isnan(v), dur)

    # Does any term hold a NaN? (the base terms do exactly when one of these four does)
    nan_in_terms = any(np.isnan(a).any() for a in (dur, flops, moved, sol)) or any(
        np.isnan(ratio_terms(c)[0]).any() for c in WEIGHTED_RATIOS
    )
    g = _GroupSums(key, nan_in_terms)
    has_dur, has_moved = ~np.isnan(dur), ~np.isnan(moved)
    both = ~np.isnan(flops) & has_moved
    base = {
        "flops": (flops, None),
        "ai_f": (flops, both),
        "ai_b": (moved, both),
        # a roofline point: AI and FLOP/s over the same launches, those with both FLOPs and bytes
        "tf_d": (dur, both & has_dur),
        "tf_f": (flops, both & has_dur),
        "bw_d": (dur, has_moved & has_dur),
        "bw_b": (moved, has_dur),
        "sol": (sol, None),
        "sol_d": (dur, ~np.isnan(sol)),
    }
    parts = []
    per_pass = _ratios_per_pass(len(key))
    # a few terms per pass, as the weighted ratios below: one 10-row block held ~0.5 GB at once
    for batch in _batches(list(base), 2 * per_pass):
        block = g.block(len(batch))
        for row, name in zip(block, batch, strict=False):
            v, mask = base[name]
            if mask is None:
                row[:] = v
            else:
                row.fill(np.nan)
                np.copyto(row, v, where=mask)
        part = g.sums_of(block)
        del block
        part = part.iloc[:, : len(batch)]
        part.columns = list(batch)
        parts.append(part)
    sums = pd.concat(parts, axis=1)
    del parts, base, both, has_dur, has_moved
    by_launch = pd.Series(dur).groupby(key, sort=False)
    quart = by_launch.quantile(np.array([0.25, 0.5, 0.75])).unstack()
    out = pd.DataFrame(
        {
            "launches": by_launch.size(),
            "median_us": quart[0.5],
            "p25_us": quart[0.25],
            "p75_us": quart[0.75],
            "min_us": by_launch.min(),
            "max_us": by_launch.max(),
            "flops": pd.Series(flops).groupby(key, sort=False).mean(),
            "bytes_moved": pd.Series(moved).groupby(key, sort=False).mean(),
            "arithmetic_intensity": sums["ai_f"] / sums["ai_b"].where(sums["ai_b"] > 0),
            "achieved_tflops": sums["tf_f"] / sums["tf_d"].where(sums["tf_d"] > 0) / 1e6,
            "achieved_gbps": sums["bw_b"] / sums["bw_d"].where(sums["bw_d"] > 0) / 1e3,
            "sol_us": sums["sol"],
            "sol_pct": sums["sol"] / sums["sol_d"].where(sums["sol_d"] > 0) * 100.0,
        }
    )
    del sums, flops, moved, sol
    # The remaining columns are collected and joined once: inserting ~30 columns one by one cost
    # more than computing them (each insert rebuilds the column index; ~20 -> ~10 ms per rank of
    # 8,808 launches). Each is aligned on `out`'s index, as `out[c] = ...` aligned it.
    more: dict[str, pd.Series] = {}
    for label in ("sol_bound", "bytes_source"):
        if label in kernels.columns:
            # the resource most launches of the kernel are bound by, the source of most launches' bytes
            counts = text_column(kernels, label)[keep].groupby(key, sort=False).value_counts()
            more[label] = counts.groupby(level=0, sort=False).idxmax().map(lambda ix: ix[1])
    for batch in _batches(WEIGHTED_RATIOS, per_pass):
        block = g.block(2 * len(batch))  # per ratio: Σ value × duration, Σ duration
        for i, c in enumerate(batch):
            block[2 * i], block[2 * i + 1] = ratio_terms(c)
        w = g.sums_of(block)
        sums_w = w.to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            for i, c in enumerate(batch):
                num, den = sums_w[:, 2 * i], sums_w[:, 2 * i + 1]
                # Σ value × duration / Σ duration, NaN where no launch carried the value
                more[c] = pd.Series(num / np.where(den > 0, den, np.nan), index=w.index)
    for c in FIRST_OF_GROUP:
        if c in kernels.columns:
            more[c] = text_column(kernels, c)[keep].groupby(key, sort=False).first()
    if "input_shapes" in kernels.columns:
        shapes = text_column(kernels, "input_shapes")[keep]
        more["input_shape_variants"] = shapes.groupby(key, sort=False).nunique()
    if more:
        out = pd.concat([out, pd.DataFrame({c: v.reindex(out.index) for c, v in more.items()})], axis=1)
    out.index = uniques.take(out.index.to_numpy(dtype=np.intp)).rename("name")
    return out


def _factorized_names(names: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """`pd.factorize` of the names as `str`: a code per launch (-1 without a name) and the
    distinct names in order of first appearance. A Categorical (a loaded table's text) is
    factorised by its codes, without a string per launch (3 M launches: ~150 MB)."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    if not isinstance(names.dtype, pd.CategoricalDtype):
        return pd.factorize(names.astype("str"), sort=False)
    cat = names.cat.codes.to_numpy()
    # NaN for a missing name: factorize leaves it out (-1), as it leaves out a missing string
    codes, firsts = pd.factorize(np.where(cat >= 0, cat, np.nan), sort=False)
    labels = pd.Index(names.cat.categories.astype("str"))
    return codes, labels.take(firsts.astype(np.intp))


def _where(mask: np.ndarray, values: np.ndarray) -> np.ndarray:
    """`values` where `mask`, else NaN (Series.where)."""
    return np.where(mask, values, np.nan)


# Weighted ratios summed per groupby pass: 2 × 3 launch-long columns (~140 MB on 3 M launches)
_RATIOS_PER_PASS = 3
# ... and as many more per pass as fit the same number of cells: a table of a few thousand
# launches (a rank of a multi-rank run) sums every term in 2 passes instead of 11, ~20 -> ~9 ms of
# each rank's ~100 ms. The sums do not depend on the batching (`_GroupSums`).
_CELLS_PER_PASS = 2 * _RATIOS_PER_PASS * 3_000_000


def _ratios_per_pass(launches: int) -> int:
    return max(_RATIOS_PER_PASS, _CELLS_PER_PASS // max(1, 2 * launches))


def _batches(items: Sequence[str], size: int) -> list[Sequence[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


class _GroupSums:
    """Σ per kernel (min_count=1, as DataFrame.groupby.sum) of per-launch terms, a few at a time.

    pandas sums a block with np.add.reduceat when its groups come in order and the block holds no
    NaN, else with its Kahan loop, and the two can differ in the last bit. The report's sums used
    to come from one block of every term, so a NaN in any term put all of them on the Kahan loop:
    when a term holds one (`nan_in_terms`), every smaller block gets an all-NaN row as well, and no
    sum changes. Groups come in order of first appearance, as with `groupby(sort=False)`.
    """

    def __init__(self, key: np.ndarray, nan_in_terms: bool) -> None:
        self.key = key
        self.nan_row = nan_in_terms

    def block(self, rows: int) -> np.ndarray:
        """An uninitialised (rows × launches) block for the terms of one pass (+ the NaN row)."""
        out = np.empty((rows + self.nan_row, len(self.key)))
        if self.nan_row:
            out[-1] = np.nan
        return out

    def sums_of(self, block: np.ndarray) -> pd.DataFrame:
        """Σ per group of each row of `block`; columns numbered from 0 (the NaN row's included)."""
        # deferred: pandas (~0.3 s) only when this builds a frame
        import pandas as pd

        # the transposed 2-D block becomes the frame's one block: pandas reads it in place
        frame = pd.DataFrame(block.T, copy=False)
        return frame.groupby(self.key, sort=False).sum(min_count=1)


def _rounded(value: Any, digits: int | None) -> Any:
    v = _jsonable(value)
    if isinstance(v, float) and digits is not None:
        return round(v, digits)
    return v


# key -> decimals in the report (None: unrounded); times in µs to the ns, ratios like the summary's
_KERNEL_KEYS: dict[str, int | None] = {
    "launches": None, "median_us": 3, "p25_us": 3, "p75_us": 3, "min_us": 3, "max_us": 3,
    **{c: 4 for c in WEIGHTED_RATIOS},
    "flops": None, "bytes_moved": None, "arithmetic_intensity": None, "achieved_tflops": None,
    "achieved_gbps": 3, "sol_us": 3, "sol_pct": 2, "input_shape_variants": None,
}


def enrich_top_kernels(tops: list[dict[str, Any]], kernels: pd.DataFrame) -> list[dict[str, Any]]:
    """profile_summary's top kernels plus the per-kernel figures the charts and tables show."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    if not tops:
        return tops
    stats = kernel_group_stats(kernels, [t["name"] for t in tops])
    out = []
    for t in tops:
        row = dict(t)
        if t["name"] in stats.index:
            s = stats.loc[t["name"]]
            for c, digits in _KERNEL_KEYS.items():
                if c in s.index:
                    row[c] = _rounded(s[c], digits)
            for c in (*FIRST_OF_GROUP, "sol_bound", "bytes_source"):
                if c in s.index and not (c == "core_type" and row.get("core_type")):
                    row[c] = None if pd.isna(s[c]) else str(s[c])
        out.append(row)
    return out


def launch_timeline(
    kernels: pd.DataFrame, cap: int = TIMELINE_CAP
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Kernel launches for the timeline chart, ≤ `cap`: over it, the `cap` longest, in start order."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    need = ("name", "start_ns", "duration_us")
    if any(c not in kernels.columns for c in need):
        return [], {"launches": 0, "kept": 0, "cap": cap}
    ok = kernels["start_ns"].notna() & kernels["duration_us"].notna()
    t = kernels.loc[ok, [c for c in TIMELINE_KEYS if c in kernels.columns]]
    total = len(t)
    if total > cap:
        t = t.nlargest(cap, "duration_us", keep="first")
    t = t.sort_values("start_ns", kind="stable")
    cols: dict[str, list[Any]] = {
        "name": t["name"].astype("str").tolist(),
        "start_ns": t["start_ns"].astype("int64").tolist(),
        "duration_us": t["duration_us"].astype("float64").tolist(),
    }
    for c in ("core_type", "stream_id"):
        vals = t[c].astype("object").tolist() if c in t.columns else [None] * len(t)
        cols[c] = [None if pd.isna(v) else (int(v) if c == "stream_id" else str(v)) for v in vals]
    columns = zip(*(cols[c] for c in TIMELINE_KEYS), strict=True)
    rows = [dict(zip(TIMELINE_KEYS, r, strict=True)) for r in columns]
    return rows, {"launches": total, "kept": len(rows), "cap": cap}


def _input(profile: Profile) -> dict[str, Any]:
    """A profile's `profiles` entry but its `id` (its place among the report's inputs:
    `assemble_report` puts it first)."""
    src, dev = profile.source, profile.device
    timeline_skipped = profile.timeline.rows_skipped if profile.timeline is not None else None
    return {
        "path": str(src.path),
        "format": src.format,
        "producer": src.producer,
        "files": [str(f) for f in src.files],
        "metric_groups": list(src.metric_groups),
        "rank": profile.rank,
        "chip": _chip(profile),
        "device": dataclasses.asdict(dev),
        "has_timeline": profile.timeline is not None,
        "has_blocks": profile.blocks is not None,
        "has_ir": profile.ir is not None,
        "warnings": list(profile.warnings) + ([timeline_skipped["note"]] if timeline_skipped else []),
        "stale_kernel": profile.stale_kernel,
        "rows_skipped": _skipped_rows(profile.rows_skipped, timeline_skipped),
        "values_out_of_range": profile.values_out_of_range,
    }


def _skipped_rows(table: dict[str, Any] | None, timeline: dict[str, Any] | None) -> dict[str, Any] | None:
    """The rows the kernel table and the events the timeline left out, as one entry: their count,
    the first of the table's (else the timeline's), both notes."""
    if table is None or timeline is None:
        return table or timeline
    return {"count": int(table["count"]) + int(timeline["count"]), "first": table["first"],
            "note": f"{table['note']}; {timeline['note']}"}


def _chip(profile: Profile) -> dict[str, Any]:
    """ChipSpec.to_dict plus what the roofline needs, flagged when a figure is an assumption."""
    d = profile.chip.to_dict()
    d["peak_fp16_flops"] = profile.chip.peak_flops("float16")
    # the roofline says whether its GM roof is the vendor's figure (and for which memory type)
    d["hbm_bandwidth_assumed"] = profile.chip.hbm_note == "configured"
    d["ridge_point_flop_per_byte"] = profile.chip.ridge_point("float16")
    return d


def _tag(d: dict[str, Any], index: int, rank: int | None) -> dict[str, Any]:
    return {**d, "input": index, "rank": rank}


def _pair(p: Any) -> tuple[Profile, AnalysisResult]:
    return (p.profile, p.result) if hasattr(p, "profile") else (p[0], p[1])


def build_report(
    profiles: Profile | Sequence[tuple[Profile, AnalysisResult]] | Sequence[Any],
    result: AnalysisResult | None = None,
    *,
    extra_findings: Sequence[Finding] = (),
    advisor: dict[str, Any] | None = None,
    generated_at: str | None = None,
    timeline_cap: int = TIMELINE_CAP,
    cluster: tuple[Cluster, AnalysisResult] | None = None,
) -> dict[str, Any]:
    """The report dict for one `(profile, result)` or a list of pairs (objects with .profile/.result work).

    `timeline` (the first profile's launches, at most `timeline_cap`; 0 leaves it out) feeds the
    HTML timeline chart. `cluster` (a multi-rank run's model and its TS6xx result) adds the
    `cluster` section (tilescope.report.ranks) and the cross-rank findings, `scope` "cluster".
    """
    with gc_paused():  # ~60,000 small objects: no collections over the loaded profile meanwhile
        report = _build_report(profiles, result, extra_findings, advisor, generated_at, timeline_cap)
        if cluster is not None:
            add_cluster(report, *cluster)
        return report


def add_cluster(report: dict[str, Any], cluster: Cluster, result: AnalysisResult) -> None:
    """Add a multi-rank run's `cluster` section and its cross-rank (TS6xx) findings, skipped rules
    and errors to `report`, in place, and group the ranks' own findings and skipped rules across
    ranks (tilescope.report.ranks.group_across_ranks, group_skipped); findings stay ordered by
    saving."""
    index = {e["rank"]: e["id"] for e in report["profiles"]}
    section = cluster_section(cluster, result)
    # the per-step rows are JSON-ready already (tens of thousands of them)
    report["cluster"] = {k: v if k == "steps" else _jsonable(v) for k, v in section.items()}
    for f in result.findings:
        rank = f.evidence.get("rank")
        tagged = {**_tag(f.to_dict(), index.get(rank, 0), rank), "scope": SCOPE_CLUSTER}
        report["findings"].append(_jsonable(tagged))
    report["skipped"] += [_jsonable({**skipped_to_dict(s), "input": 0, "rank": None, "scope": SCOPE_CLUSTER})
                          for s in result.skipped]
    report["errors"] += [_jsonable({**_tag(e.to_dict(), 0, None), "scope": SCOPE_CLUSTER})
                         for e in result.errors]
    # one entry per problem with the ranks it was found on, not one per rank (the JSON of a
    # 4,096-rank run would repeat each problem 4,096 times, occurrences and all)
    total = int(report["cluster"]["ranks_total"])
    report["findings"] = group_across_ranks(report["findings"], total)
    report["findings"].sort(key=lambda f: (-f["est_saving_us"], f["code"]))
    report["skipped"] = group_skipped(report["skipped"], total)
    # the run before any rank's own numbers (`inputs`, `summary` are the first rank's): right
    # after the report's own header, as every renderer leads with it
    run = run_section(report)
    items = list(report.items())
    report.clear()
    for key, value in items:
        report[key] = value
        if key == "generated_at":
            report["run"] = run


def profile_part(profile: Profile, result: AnalysisResult, timeline_cap: int = 0) -> dict[str, Any]:
    """What the report takes from one analysed profile, before it is numbered among the others:
    its `profiles` entry (without `id`), its findings, skipped rules and errors (untagged), and
    with `timeline_cap` > 0 its launches for the timeline chart. JSON-safe, so a per-rank worker can
    hand it back over a process boundary or a cache file (`tilescope.rankwork`) and `assemble_report`
    makes the same report as from the profile itself."""
    entry = _input(profile)
    entry["warnings"] += result.notes
    entry["summary"] = _summary(profile, result)
    over = (entry["summary"].get("speed_of_light") or {}).get("over_ceiling")
    if over:  # every format says it: text among the notes, Markdown and HTML under the headline
        entry["warnings"].append(over["note"])
    lines = lines_section(profile)
    if lines is not None:
        entry["lines"] = lines
    part: dict[str, Any] = {
        "entry": entry,
        "findings": [f.to_dict() for f in result.findings],
        "skipped": [
            skipped_to_dict(s, profile.source.producer, profile.source.metric_groups) for s in result.skipped
        ],
        "errors": [e.to_dict() for e in result.errors],
        "timeline": None,
        # where the loader's notes end and the analysis' begin: a per-rank worker adds the notes on
        # ranks left out there, where loading every rank in one process puts them (rankwork)
        "load_warnings": len(profile.warnings),
    }
    if timeline_cap > 0:
        launches, info = launch_timeline(profile.kernels, timeline_cap)
        part["timeline"] = {"launches": launches, "info": info}
    return dict(_jsonable(part))


def assemble_report(
    parts: Sequence[dict[str, Any]],
    extra_findings: Sequence[Finding] = (),
    advisor: dict[str, Any] | None = None,
    generated_at: str | None = None,
) -> dict[str, Any]:
    """The report of several `profile_part`s, numbered in order (`input`), each entry's `rank` as
    the part's entry says; the first part's timeline (when it has one) feeds the chart."""
    if not parts:
        raise ValueError("a report needs at least one profile")
    entries, findings, skipped, errors = [], [], [], []
    for i, part in enumerate(parts):
        entry = {"id": i, **part["entry"]}
        rank = _jsonable(entry["rank"])
        entry["rank"] = rank
        entries.append(entry)
        findings += [_tag(f, i, rank) for f in part["findings"]]
        skipped += [_tag(s, i, rank) for s in part["skipped"]]
        errors += [_tag(e, i, rank) for e in part["errors"]]
    findings += [_jsonable(_tag(f.to_dict(), 0, entries[0]["rank"])) for f in extra_findings]
    findings.sort(key=lambda f: (-f["est_saving_us"], f["code"]))
    first = entries[0]
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "tilescope", "version": tool_version()},
        "generated_at": generated_at or now_stamp(),
        "inputs": {k: v for k, v in first.items() if k != "summary"},
        "summary": first["summary"],
        "top_kernels": first["summary"].get("top_kernels", []),
        "profiles": entries,
        "findings": findings,
        "skipped": skipped,
        "errors": errors,
    }
    if "lines" in first:
        report["lines"] = first["lines"]
    timeline = parts[0].get("timeline")
    if timeline and timeline["launches"]:
        report["timeline"] = timeline["launches"]
        report["timeline_info"] = timeline["info"]
    if advisor is not None:
        report["advisor"] = _jsonable(advisor)
    # the parts are JSON-safe already (profile_part): not walked again (400,000 values on 64 ranks)
    return report


def _build_report(
    profiles: Profile | Sequence[tuple[Profile, AnalysisResult]] | Sequence[Any],
    result: AnalysisResult | None,
    extra_findings: Sequence[Finding],
    advisor: dict[str, Any] | None,
    generated_at: str | None,
    timeline_cap: int,
) -> dict[str, Any]:
    if isinstance(profiles, Profile):
        assert result is not None, "build_report(profile, result)"
        pairs: list[tuple[Profile, AnalysisResult]] = [(profiles, result)]
    else:
        pairs = [_pair(p) for p in profiles]
    if not pairs:
        raise ValueError("build_report needs at least one profile")
    parts = [profile_part(prof, res, timeline_cap if i == 0 else 0) for i, (prof, res) in enumerate(pairs)]
    return assemble_report(parts, extra_findings, advisor, generated_at)


def load_schema() -> dict[str, Any]:
    return dict(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def validate_report(report: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when the report does not match the schema."""
    # deferred: jsonschema (~0.1 s) only when validating
    import jsonschema

    jsonschema.validate(report, load_schema())
