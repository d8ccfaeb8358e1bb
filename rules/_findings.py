"""One way to build a Finding, for runtime and static rules alike (`make_finding`: share and
severity from the saving, or a static rule's own severity), and the grouped findings of the runtime
rules: flagged launches grouped per kernel name, with their chip figures, thresholds and locations."""

from __future__ import annotations

import importlib
import importlib.util
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tilescope.chips import ChipSpec
from tilescope.engine import RuleContext
from tilescope.findings import SAVING_DEVICE, Finding, Location, Severity
from tilescope.profile import Profile
from tilescope.rules._columns import num, text
from tilescope.rules._lines import hot_lines, line_locations, measured_phrase
from tilescope.rules._numbers import r3, r4


def group_launches(
    df: pd.DataFrame,
    saving: pd.Series,
    metrics: Sequence[str] = (),
    key: str = "name",
    ranges: Sequence[str] = (),
) -> pd.DataFrame:
    """One row per kernel name: launches, total/median/max duration, summed saving, metric medians,
    and for each of `ranges` (metrics too) its `_min` and `_max`: launches of one name may differ
    (two shapes, two grids), and a median may be a value no launch had.

    Sorted by saving, largest first. `df` holds only the flagged launches.
    """
    if df.empty:
        return pd.DataFrame()
    work = pd.DataFrame(
        {
            "kernel": text(df, key).where(text(df, key) != "", "<unnamed>").to_numpy(),
            "duration_us": num(df, "duration_us").to_numpy(),
            "saving_us": saving.reindex(df.index).fillna(0).to_numpy(),
        }
    )
    for m in metrics:
        work[m] = num(df, m).to_numpy()
    g = work.groupby("kernel", sort=False)
    d = g["duration_us"]
    # The same reductions as a named `g.agg(...)`, without its relabelling machinery (~2.5 ms a call)
    out = pd.DataFrame(
        {
            "launches": d.size(),
            "total_us": d.sum(),
            "median_us": d.median(),
            "max_us": d.max(),
            "saving_us": g["saving_us"].sum(),
        }
    )
    for m in metrics:
        out[m] = g[m].median()
    for m in ranges:
        out[f"{m}_min"], out[f"{m}_max"] = g[m].min(), g[m].max()
    return out.sort_values("saving_us", ascending=False)


def launch_stats(row: pd.Series) -> dict[str, Any]:
    return {
        "launches": int(row["launches"]),
        "total_us": r3(row["total_us"]),
        "median_us": r3(row["median_us"]),
        "max_us": r3(row["max_us"]),
    }


def chip_figures(chip: ChipSpec, *fields: str) -> dict[str, Any]:
    """The chip numbers a verdict used, where the GM bandwidth comes from, and any assumption that
    mentions a figure used."""
    out: dict[str, Any] = {"chip": chip.name}
    for f in fields:
        if f == "ridge_point":
            out[f] = r3(chip.ridge_point())
        elif f == "peak_fp16_tflops":
            peak = chip.peak_flops()
            out[f] = r3(peak / 1e12) if peak else None
        else:
            out[f] = getattr(chip, f, None)
    if any(f in ("hbm_bandwidth_gbps", "ridge_point") for f in fields):
        out["hbm_bandwidth_source"] = chip.hbm_bandwidth_source
    keys = {f.split("_")[0] for f in fields} | {"core count" for f in fields if f.endswith("_count")}
    notes = [a for a in chip.assumptions if any(k in a for k in (*fields, *keys))]
    if notes:
        out["assumptions"] = notes
    return out


def locate(profile: Profile, kernel: str, topic: str) -> tuple[Location, ...]:
    """Source/IR locations for a kernel when the profile carries IR and the locator exists."""
    if profile.ir is None or importlib.util.find_spec("tilescope.ir.locate") is None:
        return ()
    try:
        mod = importlib.import_module("tilescope.ir.locate")
        locs = mod.locate(profile.ir, kernel, topic)
    except Exception:  # a locator failure must not cost the finding itself
        return ()
    out: list[Location] = []
    for loc in locs or ():
        if isinstance(loc, Location):
            out.append(loc)
        elif isinstance(loc, dict):
            out.append(Location(**loc))
    return tuple(out)


def make_finding(
    ctx: RuleContext,
    *,
    code: str,
    slug: str,
    kernels: Iterable[str],
    message: str,
    evidence: dict[str, Any],
    recommendation: str,
    saving_us: float,
    severity: Severity | None = None,
    occurrences: int = 1,
    locations: tuple[Location, ...] = (),
    saving_kind: str = SAVING_DEVICE,
    assumed: Sequence[str] = (),
) -> Finding:
    """A finding with its share and severity from the saving (the engine bounds both afterwards:
    tilescope.summary.bound_findings). `saving_kind` "idle" for savings of idle time between kernels.
    A static rule (read from the IR: nothing ran, so nothing to share out) passes saving_us=0 and
    its own `severity`; the engine marks its findings as not estimated (tilescope.engine)."""
    saving = max(0.0, float(saving_us)) if not math.isnan(float(saving_us)) else 0.0
    sev = ctx.severity(saving) if severity is None else severity
    return Finding(
        code=code,
        slug=slug,
        severity=Severity.MEDIUM if assumed and sev is Severity.HIGH else sev,
        kernels=tuple(dict.fromkeys(kernels)),
        message=message,
        evidence=evidence,
        recommendation=recommendation,
        est_saving_us=saving,
        share_of_total=ctx.share(saving),
        locations=locations,
        occurrences=int(occurrences),
        saving_kind=saving_kind,
        assumed=tuple(assumed),
    )


def thresholds_used(ctx: RuleContext, *keys: str) -> dict[str, Any]:
    return {k: ctx.thresholds[k] for k in keys if k in ctx.thresholds}


def capped(groups: pd.DataFrame, ctx: RuleContext) -> tuple[pd.DataFrame, int]:
    """The top `max_findings` groups and how many were left out (reported in the last finding)."""
    limit = int(ctx.thresholds.get("max_findings", 20))
    return groups.head(limit), max(0, len(groups) - limit)


def ranked(groups: pd.DataFrame, kernels: pd.DataFrame, ctx: RuleContext, code: str) -> pd.DataFrame:
    """Cap, then rank, then (the caller) cut: each kernel's saving bounded by its speed of light as
    the engine will bound it (`summary.bound_findings`: the same `KernelTime.cap` of the rule's
    saving kind), the groups ordered by that bound, those bounded to zero left out — they are at
    their speed of light, nothing to recover, and recorded for the run's note
    (`RuleContext.at_speed_of_light`) — and the `min_saving_us` floor applied to what is left.

    Ranking by the raw estimate let a kernel already at its speed of light take one of the
    `max_findings` places and a real saving drop off the list (#26). The findings keep the raw
    estimate: the engine caps it and records both in `evidence["saving_bound"]`."""
    times = ctx.kernel_times(kernels)
    kind = ctx.saving_kind
    # one lookup per kernel name (not per launch); a name the table lacks is not bounded here
    cap = np.array([times[k].cap(kind) if k in times else np.inf for k in groups.index], dtype="float64")
    bounded = np.minimum(groups["saving_us"].to_numpy(dtype="float64"), cap)
    out = groups.assign(bounded_us=bounded)
    ctx.at_speed_of_light(code, [str(k) for k in out.index[(bounded <= 0) & (cap <= 0)]])
    out = out[out["bounded_us"] > 0]
    out = out[out["bounded_us"] >= float(ctx.thresholds.get("min_saving_us", 0.0))]
    return out.sort_values("bounded_us", ascending=False, kind="stable")


def ranked_findings(findings: list[Finding], kernels: pd.DataFrame, ctx: RuleContext) -> list[Finding]:
    """`ranked` for findings a rule made one by one (one per launch): each bounded by its kernel's
    speed of light, ordered by that bound, those at zero left out (recorded), then cut at
    `max_findings`."""
    times = ctx.kernel_times(kernels)

    def bound(f: Finding) -> float:
        caps = [times[k].cap(ctx.saving_kind) for k in f.kernels if k in times]
        return min(f.est_saving_us, sum(caps)) if caps else f.est_saving_us

    scored = [(bound(f), i, f) for i, f in enumerate(findings)]
    ctx.at_speed_of_light(
        findings[0].code if findings else "",
        [k for b, _i, f in scored if b <= 0 and f.est_saving_us > 0 for k in f.kernels],
    )
    kept = sorted(((b, i, f) for b, i, f in scored if b > 0), key=lambda t: (-t[0], t[1]))
    return [f for _b, _i, f in kept[: int(ctx.thresholds.get("max_findings", 20))]]


def grouped_findings(
    profile: Profile,
    ctx: RuleContext,
    *,
    code: str,
    slug: str,
    flagged: np.ndarray,
    saving: pd.Series,
    metrics: Sequence[str],
    message: Callable[[str, pd.Series], str],
    recommendation: str | Callable[[str, pd.Series], str],
    topic: str,
    chip_fields: Sequence[str] = (),
    extra: Callable[[str, pd.Series], dict[str, Any]] | None = None,
    assumed: Callable[[str, pd.Series], Sequence[str]] | None = None,
    ranges: Sequence[str] = (),
    line_topic: str | None = None,
) -> list[Finding]:
    """One finding per kernel name over the flagged launches (every row was evaluated), largest
    saving first, at most `max_findings`; the last one says how many kernels were left out.
    `topic` places the finding in the IR (tilescope.ir.locate); `line_topic` (default `topic`)
    picks the measured lines it names (rules/_lines.hot_lines). `recommendation`: one for all, or
    one per kernel (its own replacement said, not pointed at)."""
    # only the columns group_launches reads: a row filter of the whole table copies all ~80
    k = profile.kernels
    df = k.loc[flagged, [c for c in dict.fromkeys(("name", "duration_us", *metrics)) if c in k.columns]]
    groups = group_launches(df, saving[flagged], metrics, ranges=ranges)
    if groups.empty:
        return []
    top, left_out = capped(ranked(groups, k, ctx, code), ctx)
    keys = [k for k in ctx.thresholds if k not in ("max_findings", "pattern_files")]
    findings = []
    for kernel, row in top.iterrows():
        ev: dict[str, Any] = {
            **launch_stats(row),
            "measured": {m: r4(row[m]) for m in metrics},
            "thresholds": thresholds_used(ctx, *keys),
        }
        if chip_fields:
            ev["chip_figures"] = chip_figures(profile.chip, *chip_fields)
        if extra is not None:
            ev.update(extra(str(kernel), row))
        said = message(str(kernel), row)
        places = locate(profile, str(kernel), topic)
        measured = hot_lines(profile, str(kernel), line_topic or topic)
        if measured:
            ev["measured_lines"] = measured
            said = f"{said}; {measured_phrase(measured)}"
            places = (*line_locations(profile, str(kernel), measured), *places)
        findings.append(
            make_finding(
                ctx,
                code=code,
                slug=slug,
                kernels=[str(kernel)],
                message=said,
                evidence=ev,
                recommendation=(recommendation if isinstance(recommendation, str)
                                else recommendation(str(kernel), row)),
                saving_us=float(row["saving_us"]),
                occurrences=int(row["launches"]),
                locations=places,
                assumed=assumed(str(kernel), row) if assumed is not None else (),
            )
        )
    if left_out and findings:
        findings[-1].evidence["more_kernels_not_listed"] = left_out
    return findings
