"""The one summary model: device time, unit busy shares, kernel shares, savings and their totals.

Every view shows these numbers through the report dict that `build_report` makes from `summarize`
(terminal, Markdown, HTML, JSON, SARIF, the dashboard and `diff`), so one quantity has one value.
docs/metrics.md defines each; the definitions below are also printed where the numbers are shown.

Savings are bounded here, once, for every rule:
- a finding that makes kernels faster saves at most the gap between their measured time and their
  speed of light for the cores they used (`sol_us`, tilescope.metrics), or their whole time where
  none is known; one that gives them a new grid (TS401) at most the gap to their speed of light with
  every core (`sol_device_us`); one that removes or moves work (fusion, AI CPU ops) at most the
  kernels' time;
- findings on one kernel combine as fractions of what is left (each fix removes a share of the
  remaining time) and never past that kernel's gap; severity buckets and the total use the same
  combination, so no bucket exceeds the total and no total exceeds the device time;
- a finding about idle time between kernels (host-bound gaps) is a share of the wall time and is
  capped at the idle time; a static finding (from IR, no runtime data) has no saving estimate.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tilescope.ceilings import COLUMNS as CEILING_COLUMNS
from tilescope.ceilings import over_ceiling
from tilescope.findings import (
    SAVING_GRID,
    SAVING_IDLE,
    SAVING_NONE,
    SAVING_WORK,
    SEVERITIES,
    Finding,
    Severity,
)
from tilescope.intervals import interval_union

if TYPE_CHECKING:
    import pandas as pd

    from tilescope.profile import Profile

COMMUNICATION_TYPES = frozenset({"HCCL", "COMMUNICATION", "HCCL_AI_CPU"})

DEFINITIONS: dict[str, str] = {
    "device_us": "device time: the time at least one compute kernel ran (union of the kernel intervals, "
    "overlapping streams counted once; communication tasks excluded)",
    "with_communication_us": "device time with communication: the union of every task's interval, HCCL "
    "included",
    "kernel_sum_us": "the sum of compute-kernel durations (launches overlapping on several streams count "
    "once each)",
    "communication_us": "time at least one communication task (HCCL) ran",
    "wall_us": "from the first task's start to the last task's end",
    "idle_us": "wall time with no task on the device",
    "units": "a unit's busy share: the sum over launches of its pipe's busy time per core it used, over "
    "device time; launches without pipe metrics add nothing (coverage: the share of the compute "
    "kernels' summed durations whose launches carry per-side PMU times)",
    "savings": "each finding's saving is capped at the gap between its kernels' time and their speed of "
    "light; findings on one kernel combine as fractions of the remaining time, never past that gap",
}


@dataclass(frozen=True)
class DeviceTime:
    device_us: float
    with_communication_us: float
    kernel_sum_us: float
    communication_us: float
    wall_us: float | None
    idle_us: float | None
    exact_intervals: bool  # False: no start times (msprof op), device time is the sum of durations

    def to_dict(self) -> dict[str, Any]:
        d = {k: _r3(v) if isinstance(v, float) else v for k, v in dataclasses.asdict(self).items()}
        d["definitions"] = {k: DEFINITIONS[k] for k in dataclasses.asdict(self) if k in DEFINITIONS}
        return d


def _r3(x: float | None) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return round(float(x), 3)


def _floats(k: pd.DataFrame, col: str) -> np.ndarray:
    # deferred: metrics (pyarrow) only where used
    from tilescope.metrics import float_column

    return float_column(k, col).to_numpy()


def communication_mask(k: pd.DataFrame) -> np.ndarray:
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    if "core_type" not in k.columns:
        return np.zeros(len(k), dtype=bool)
    col = k["core_type"]
    if isinstance(col.dtype, pd.CategoricalDtype):
        # a loaded table's text: test each category once, then pick by code (-1: missing, as "nan")
        hit = col.cat.categories.astype("str").str.upper().isin(COMMUNICATION_TYPES)
        codes = col.cat.codes.to_numpy()
        return np.append(np.asarray(hit, dtype=bool), False)[codes]
    return col.astype("str").str.upper().isin(COMMUNICATION_TYPES).to_numpy(dtype=bool)


def _union_us(start: np.ndarray, end: np.ndarray) -> float:
    u_start, u_end = interval_union(start, end)
    return float((u_end - u_start).sum()) / 1000.0


def device_time(kernels: pd.DataFrame) -> DeviceTime:
    """Device time and its relatives (DEFINITIONS), from the kernel table's intervals."""
    k = kernels
    dur = np.nan_to_num(_floats(k, "duration_us"), nan=0.0)
    dur = np.clip(dur, 0.0, None)
    comm = communication_mask(k)
    kernel_sum = float(dur[~comm].sum())
    comm_sum = float(dur[comm].sum())
    has_start = "start_ns" in k.columns and len(k) and bool(k["start_ns"].notna().any())
    if not has_start:
        return DeviceTime(kernel_sum, kernel_sum + comm_sum, kernel_sum, comm_sum, None, None, False)
    ok = k["start_ns"].notna().to_numpy(dtype=bool)
    # exact int64 ns: a float64 holds ~1.7e18 ns only to the nearest 256 ns
    start_i = k["start_ns"].astype("Int64").to_numpy(dtype="int64", na_value=0)
    end_i = start_i + np.round(dur * 1000.0).astype("int64")
    device = _union_us(start_i[ok & ~comm], end_i[ok & ~comm])
    timed = _union_us(start_i[ok], end_i[ok])  # every task with a start time
    communication = _union_us(start_i[ok & comm], end_i[ok & comm])
    wall = float(end_i[ok].max() - start_i[ok].min()) / 1000.0 if ok.any() else None
    idle = max(0.0, wall - timed) if wall is not None else None
    # rows without a start time still ran: their durations count (as if they overlapped nothing)
    device += float(dur[~ok & ~comm].sum())
    every = timed + float(dur[~ok].sum())
    return DeviceTime(device, every, kernel_sum, communication, wall, idle, True)


# ---- units -------------------------------------------------------------------------------------

_UNIT_SHARES: dict[str, tuple[str, ...]] = {
    "cube": ("aic_cube_share",),
    "vector": ("aiv_vec_share",),
    "mte": ("aic_mte1_share", "aic_mte2_share", "aic_mte3_share", "aiv_mte2_share", "aiv_mte3_share"),
    "scalar": ("aic_scalar_share", "aiv_scalar_share"),
}


# Every kernel column `summarize` reads when it is given no findings: `tilescope info` loads only
# these (tilescope.io.load, `kernel_columns`); a column read here must be listed here.
SUMMARY_COLUMNS: tuple[str, ...] = (
    "name",
    "core_type",
    "start_ns",
    "duration_us",
    "sol_us",
    *CEILING_COLUMNS,
    "aic_busy_share",
    "aiv_busy_share",
    *(c for cols in _UNIT_SHARES.values() for c in cols),
)


def unit_busy(kernels: pd.DataFrame, device_us: float) -> dict[str, dict[str, float | None]]:
    """Per unit (cube, vector, mte, scalar): busy µs, share of device time, measured coverage.

    Per launch a unit's busy time is its pipe's share of the launch x the launch's duration (for
    "mte" and "scalar", the busiest of that kind's pipes on either side). Communication excluded.
    """
    k = kernels
    comm = communication_mask(k)
    dur = np.where(comm, np.nan, _floats(k, "duration_us"))
    measured = ~np.isnan(_floats(k, "aic_busy_share")) | ~np.isnan(_floats(k, "aiv_busy_share"))
    covered = float(np.nansum(np.where(measured, dur, np.nan)))
    total = float(np.nansum(dur))
    out: dict[str, dict[str, float | None]] = {}
    for unit, cols in _UNIT_SHARES.items():
        present = [c for c in cols if c in k.columns and k[c].notna().any()]
        if not present:
            out[unit] = {"busy_us": None, "share": None, "coverage": None}
            continue
        with np.errstate(all="ignore"):
            share = np.fmax.reduce([_floats(k, c) for c in present]) if len(present) > 1 else _floats(
                k, present[0]
            )
        busy = float(np.nansum(share * dur))
        out[unit] = {
            "busy_us": _r3(busy),
            "share": round(min(1.0, busy / device_us), 4) if device_us > 0 else None,
            "coverage": round(min(1.0, covered / total), 4) if total > 0 else None,
        }
    return out


# ---- kernels -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelTime:
    """One kernel name's launches: total µs, the speed of light of those that have one, the µs they
    cover, and the gap a fix can close (total - speed of light; the whole time where unknown)."""

    total_us: float
    sol_us: float
    sol_covered_us: float
    sol_device_us: float = 0.0  # the speed of light with every core of the chip (same launches)

    @property
    def gap_us(self) -> float:
        return max(0.0, self.total_us - self.sol_us)

    @property
    def device_gap_us(self) -> float:
        """The gap a new grid can close: to the speed of light with every core."""
        return max(0.0, self.total_us - self.sol_device_us)

    def cap(self, kind: str) -> float:
        """The most a fix of this saving kind can save on this kernel."""
        if kind == SAVING_WORK:
            return self.total_us
        return self.device_gap_us if kind == SAVING_GRID else self.gap_us

    @property
    def sol_known(self) -> bool:
        return self.sol_covered_us >= self.total_us


# The kernel columns `kernel_time` reads (the findings' bounds); with SUMMARY_COLUMNS, all the
# summary reads when it is given findings.
KERNEL_TIME_COLUMNS: tuple[str, ...] = ("name", "duration_us", "sol_us", "sol_device_us")


def kernel_time(kernels: pd.DataFrame) -> dict[str, KernelTime]:
    """Per kernel name: its time and speed of light (KernelTime)."""
    # deferred: pandas (~0.3 s) and metrics (pyarrow) only where used
    import pandas as pd

    from tilescope.metrics import as_str, bounded_sol

    k = kernels
    if "name" not in k.columns or not len(k):
        return {}
    dur = np.clip(np.nan_to_num(_floats(k, "duration_us"), nan=0.0), 0.0, None)
    sol = bounded_sol(_floats(k, "sol_us"), dur)
    known = ~np.isnan(sol)
    device_sol = np.fmin(_floats(k, "sol_device_us"), sol)  # no larger than the grid's
    frame = pd.DataFrame(
        {
            "total": dur,
            "sol": np.where(known, sol, 0.0),
            "covered": np.where(known, dur, 0.0),
            "device": np.where(known, np.nan_to_num(device_sol), 0.0),
        },
        # the names as an Arrow-backed index: to_numpy() made a Python string per launch
        index=pd.Index(as_str(k["name"])),
    )
    sums = frame.groupby(level=0, sort=False).sum()
    return {
        str(name): KernelTime(float(t), float(sl), float(c), float(d))
        for name, t, sl, c, d in zip(
            sums.index, sums["total"], sums["sol"], sums["covered"], sums["device"], strict=True
        )
    }


def top_kernels(kernels: pd.DataFrame, device_us: float, top: int = 10) -> list[dict[str, Any]]:
    """Compute kernels by total time, each with its share of device time (communication apart)."""
    # deferred: pandas (~0.3 s) and metrics (pyarrow) only where used
    import pandas as pd

    from tilescope.metrics import as_str

    k = kernels
    if not len(k) or "name" not in k.columns:
        return []
    keep = ~communication_mask(k)
    # only the columns read below: a row filter of the whole table copied all ~80 columns
    sub = k.loc[keep, [c for c in ("name", "duration_us", "core_type") if c in k.columns]]
    if not len(sub):
        return []
    dur = pd.Series(_floats(sub, "duration_us"), index=sub.index)
    g = pd.DataFrame(
        {
            "name": as_str(sub["name"]),
            "d": dur,
            "core_type": as_str(sub["core_type"]) if "core_type" in sub else None,
        }
    )
    agg = g.groupby("name", sort=False).agg(
        count=("d", "size"), total_us=("d", "sum"), mean_us=("d", "mean"), core_type=("core_type", "first")
    )
    agg = agg.sort_values("total_us", ascending=False, kind="stable").head(top)
    out = []
    for name, row in agg.iterrows():
        total = float(row["total_us"])
        out.append(
            {
                "name": str(name),
                "core_type": None if pd.isna(row["core_type"]) else str(row["core_type"]),
                "count": int(row["count"]),
                "total_us": round(total, 3),
                "mean_us": round(float(row["mean_us"]), 3),
                "share": round(min(1.0, total / device_us), 4) if device_us > 0 else None,
            }
        )
    return out


# ---- savings -------------------------------------------------------------------------------------


def _spread(finding: Finding, times: dict[str, KernelTime]) -> dict[str, float]:
    """The finding's saving per kernel of the table, spread over its kernels by their time."""
    names = [n for n in dict.fromkeys(finding.kernels) if n in times and times[n].total_us > 0]
    if not names or finding.est_saving_us <= 0:
        return {}
    span = sum(times[n].total_us for n in names)
    return {n: finding.est_saving_us * times[n].total_us / span for n in names}


def bound_findings(
    findings: Sequence[Finding],
    kernels: pd.DataFrame,
    dt: DeviceTime,
    severity: Callable[[float], Severity],
) -> list[Finding]:
    """Every finding with its saving capped (module docstring), share and severity recomputed.

    `severity(share)` maps a share of device time to a severity (the run's configured cuts).
    A capped finding records its raw estimate and the bound in `evidence["saving_bound"]`.
    """
    times = kernel_time(kernels)
    out: list[Finding] = []
    for f in findings:
        if f.saving_kind == SAVING_NONE:
            out.append(dataclasses.replace(f, est_saving_us=0.0, share_of_total=0.0))
            continue
        if f.saving_kind == SAVING_IDLE:
            saving, bound = f.est_saving_us, None
            if dt.idle_us is not None and saving > dt.idle_us:
                saving, bound = dt.idle_us, "the idle time between tasks"
            base = dt.wall_us or dt.device_us
            share = saving / base if base else 0.0
            out.append(_with_saving(f, saving, min(1.0, share), bound, severity))
            continue
        spread = _spread(f, times)
        if spread:
            cap = sum(times[n].cap(f.saving_kind) for n in spread)
            how = _bound_text(f.saving_kind, [times[n] for n in spread])
        else:
            cap, how = dt.device_us, "the device time"
        saving, bound = (cap, how) if f.est_saving_us > cap else (f.est_saving_us, None)
        share = min(1.0, saving / dt.device_us) if dt.device_us > 0 else 0.0
        out.append(_with_saving(f, saving, share, bound, severity))
    return out


def _bound_text(kind: str, times: list[KernelTime]) -> str:
    """What capped a saving of this kind on these kernels (`KernelTime.cap`), for its evidence."""
    if kind == SAVING_WORK:
        return "the kernels' measured time"
    if kind == SAVING_GRID:
        return "the gap to the kernels' speed of light with every core"
    if all(t.sol_known for t in times):
        return "the gap to the kernels' speed of light"
    if any(t.sol_covered_us > 0 for t in times):
        return "the kernels' time less the speed of light of the launches that have one"
    return "the kernels' measured time"


def _with_saving(
    f: Finding, saving: float, share: float, bound: str | None, severity: Callable[[float], Severity]
) -> Finding:
    saving = max(0.0, float(saving))
    evidence = dict(f.evidence)
    if bound is not None:
        evidence["saving_bound"] = {
            "estimated_us": _r3(f.est_saving_us), "capped_us": _r3(saving), "by": bound
        }
    # errors and advisor findings keep their own severity; ours follow the (bounded) share
    sev = f.capped_severity(severity(share)) if f.source == "tilescope" else f.severity
    return dataclasses.replace(f, est_saving_us=saving, share_of_total=share, severity=sev, evidence=evidence)


def combined_saving(
    findings: Iterable[Finding],
    kernels: pd.DataFrame,
    dt: DeviceTime,
    times: dict[str, KernelTime] | None = None,
) -> tuple[float, float]:
    """Device time and idle time the findings could recover together (module docstring);
    `times`: `kernel_time(kernels)` when the caller has it already."""
    times = kernel_time(kernels) if times is None else times
    kept: dict[str, float] = {}  # kernel -> product of (1 - fraction) over its findings
    kinds: dict[str, set[str]] = {}  # kernel -> saving kinds of its findings (the loosest bound wins)
    loose = 0.0  # savings on no kernel of the table
    idle = 0.0
    for f in findings:
        if f.est_saving_us <= 0 or f.saving_kind == SAVING_NONE:
            continue
        if f.saving_kind == SAVING_IDLE:
            idle += f.est_saving_us
            continue
        spread = _spread(f, times)
        if not spread:
            loose += f.est_saving_us
        for name in spread:
            kinds.setdefault(name, set()).add(f.saving_kind)
        for name, part in spread.items():
            kept[name] = kept.get(name, 1.0) * (1.0 - min(1.0, part / times[name].total_us))
    device = loose
    for name, rest in kept.items():
        t = times[name]
        cap = max(t.cap(kind) for kind in kinds[name])
        device += min(cap, t.total_us * (1.0 - rest))
    device = min(device, dt.device_us)
    if dt.idle_us is not None:
        idle = min(idle, dt.idle_us)
    return device, idle


def finding_totals(findings: Sequence[Finding], kernels: pd.DataFrame, dt: DeviceTime) -> dict[str, Any]:
    """Counts and combined savings, overall and per severity (the same combination on each subset)."""
    counts = Counter(f.severity.value for f in findings)
    times = kernel_time(kernels)  # one group-by for the total and every bucket
    device, idle = combined_saving(findings, kernels, dt, times)
    by_sev: dict[str, dict[str, float | None]] = {}
    for sev in SEVERITIES:
        d, i = combined_saving([f for f in findings if f.severity.value == sev], kernels, dt, times)
        by_sev[sev] = {"device_us": _r3(d), "idle_us": _r3(i)}
    wall = dt.wall_us
    return {
        "count": len(findings),
        "by_severity": {k: counts.get(k, 0) for k in SEVERITIES},
        "saving_by_severity": by_sev,
        "est_recoverable_us": _r3(device),
        "est_recoverable_share": round(device / dt.device_us, 6) if dt.device_us > 0 else 0.0,
        "est_idle_recoverable_us": _r3(idle),
        "est_idle_recoverable_share": round(idle / wall, 6) if wall else None,
        "not_estimated": sum(1 for f in findings if f.saving_kind == SAVING_NONE),
        "definition": DEFINITIONS["savings"],
    }


def speed_of_light(kernels: pd.DataFrame) -> dict[str, Any]:
    """How close the compute kernels run to their speed of light, over the launches that have one
    and ran no faster than it; those that did are counted in `over_ceiling` (tilescope.ceilings)."""
    keep = ~communication_mask(kernels)
    dur = _floats(kernels, "duration_us")[keep]
    sol = _floats(kernels, "sol_us")[keep]
    with np.errstate(invalid="ignore"):
        over = sol > dur  # NaN compares False
    known = ~np.isnan(sol) & ~np.isnan(dur) & ~over
    measured = float(dur[known].sum())
    total = float(np.nansum(dur))
    return {
        "sol_us": _r3(float(sol[known].sum())),
        "measured_us": _r3(measured),
        "achieved_pct": round(float(sol[known].sum()) / measured * 100, 2) if measured > 0 else None,
        "coverage": round(measured / total, 4) if total > 0 else None,
        "over_ceiling": over_ceiling(kernels[keep] if over.any() else kernels, over, dur, sol),
    }


def summarize(
    profile: Profile,
    findings: Sequence[Finding] | None = None,
    top: int = 10,
    dt: DeviceTime | None = None,
) -> dict[str, Any]:
    """The JSON-serialisable summary every view shows (see the module docstring); `dt`: the
    profile's `device_time` when the caller has it already (the engine's)."""
    # deferred: metrics (pyarrow) only where used
    from tilescope.metrics import as_str

    k = profile.kernels
    dt = device_time(k) if dt is None else dt
    dur = _floats(k, "duration_us")
    by_core: dict[str, float] = {}
    if "core_type" in k.columns and len(k):
        # deferred: pandas (~0.3 s) only when this builds a frame
        import pandas as pd

        by_core = {
            str(c): round(float(v), 3)
            for c, v in pd.Series(dur, index=k.index)
            .groupby(as_str(k["core_type"]).fillna("UNKNOWN"))
            .sum()
            .items()
        }
    units = unit_busy(k, dt.device_us)
    # launches are the compute kernels device time is over: an HCCL task is no launch of a
    # kernel ("over 191 launches" counted the 4 all-reduces of torch_2rank_pipeutil_text)
    comm = communication_mask(k)
    out: dict[str, Any] = {
        "kernel_count": int((~comm).sum()),
        "distinct_kernels": int(k.loc[~comm, "name"].nunique()) if "name" in k.columns else 0,
        "communication_tasks": int(comm.sum()),
        "total_device_us": round(dt.device_us, 3),
        "device_time": dt.to_dict(),
        "time_by_core_type_us": by_core,
        "units": units,
        "shares": {u: v["share"] for u, v in units.items()},
        "units_definition": DEFINITIONS["units"],
        "speed_of_light": speed_of_light(k),
        "top_kernels": top_kernels(k, dt.device_us, top),
    }
    if findings is not None:
        out["findings"] = finding_totals(findings, k, dt)
    return out


# Per-launch pipe ratios (of their side's time) and shares (of the launch) averaged per kernel,
# weighted by launch duration, plus the speed of light (tilescope.metrics).
WEIGHTED_RATIOS = (
    "aic_cube_ratio", "aic_mte1_ratio", "aic_mte2_ratio", "aic_mte3_ratio", "aic_fixpipe_ratio",
    "aic_scalar_ratio", "aiv_vec_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio", "aiv_scalar_ratio",
    "aic_busy_share", "aic_cube_share", "aic_mte1_share", "aic_mte2_share", "aic_mte3_share",
    "aic_fixpipe_share", "aic_scalar_share", "aiv_busy_share", "aiv_vec_share", "aiv_mte2_share",
    "aiv_mte3_share", "aiv_scalar_share", "cube_share", "vector_share", "cube_utilization_pct",
)
FIRST_OF_GROUP = ("op_type", "core_type", "input_shapes", "input_dtypes")
TIMELINE_KEYS = ("name", "start_ns", "duration_us", "core_type", "stream_id")
# Every kernel column the report reads (tilescope.report.data: `kernel_group_stats`,
# `launch_timeline`, the summary with its findings bounded by each kernel's speed of light):
# `analyze` loads only these and the rules'. Defined here, below the report, because the analysis
# (tilescope.analysis.kernel_columns_read) chooses what to load before any report exists.
REPORT_COLUMNS: tuple[str, ...] = tuple(
    dict.fromkeys(
        (*SUMMARY_COLUMNS, *KERNEL_TIME_COLUMNS, *WEIGHTED_RATIOS, *FIRST_OF_GROUP, *TIMELINE_KEYS,
         "flops", "bytes_moved", "bytes_source", "sol_us", "sol_bound")
    )
)
