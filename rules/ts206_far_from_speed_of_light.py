"""TS206 far-from-speed-of-light: a kernel holding much of the device time runs far below its
speed of light and no pipe explains it; say what is known and which data to collect next."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tilescope.engine import RuleContext
from tilescope.findings import SAVING_NONE, Finding, Severity
from tilescope.metrics import PIPE_SHARES
from tilescope.profile import Profile
from tilescope.rules._columns import num, text
from tilescope.rules._findings import make_finding, thresholds_used
from tilescope.rules._numbers import pct, r3, r4
from tilescope.text.words import fmt_bytes, fmt_us

CODE = "TS206"
SLUG = "far-from-speed-of-light"
KIND = "runtime"
NEEDS = ("duration_us", "sol_us")
# No time estimate: what separates the kernel from its speed of light is not measured yet, and the
# gap itself (up to ~99 % of the kernel) is a bound, not a saving (tilescope.summary.bound_findings).
SAVING_KIND = SAVING_NONE
THRESHOLDS: dict[str, Any] = {
    # Below a tenth of the speed of light. The speed of light is optimistic (bytes from tensor
    # shapes count each tensor once, docs/metrics.md §8; a re-read operand costs more): a kernel
    # at 10 % would stay below half its ceiling even if its real traffic were 5x the shape floor,
    # so below this line the distance is not an artefact of the byte model.
    "max_sol_share": 0.10,
    # A tenth of the device time: twice the `high` severity cut (0.05), so that halving the kernel
    # alone would move the profile by a `high` finding's worth; smaller kernels are left to the
    # pipe rules (TS201-TS204), whose estimates cover them.
    "min_device_share": 0.10,
    # the speed of light must be known for most of the kernel's time (launches without one, e.g.
    # no shapes, count nothing): a percentage over a sliver of it says nothing of the kernel
    "min_sol_coverage": 0.5,
    # A launch's start-up (block dispatch, instruction fetch, the first loads) costs microseconds
    # whatever the kernel: a median launch shorter than TS404's `short_kernel_us` (20) is dominated
    # by it, and its distance to a sub-µs speed of light says nothing of the kernel's code. Not a
    # time floor the engine scales on short profiles: the start-up is the same there.
    "min_launch_us": 20.0,
    "max_findings": 5,
}
# Kernel columns check() reads besides NEEDS (`analyze` loads only what the rules and the report read)
READS = (
    "name",
    "sol_bound",
    "bytes_moved",
    "bytes_source",
    "flops",
    *dict.fromkeys(c for cols in PIPE_SHARES.values() for c in cols),
)
# the pipe label (tilescope.metrics.PIPE_SHARES) as a message says it
_PIPE_WORDS = {
    "cube": "Cube",
    "vector": "Vector",
    "mte1": "MTE1 (L1→L0)",
    "mte2": "MTE2 (GM→local)",
    "mte3": "MTE3 (local→GM)",
    "fixpipe": "FixPipe",
    "scalar": "Scalar",
}


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Flags each kernel that holds at least `min_device_share` of the device time and runs, over its
    launches, below `max_sol_share` of its speed of light (the time-weighted `sol_us / duration`
    of docs/metrics.md §3.5, over launches that have one) — whether or not a pipe rule fired. The
    finding says what is known: the speed-of-light bound (memory, Cube or Vector) and its bytes or
    FLOPs, the busiest pipe and its share of the launch; and what to collect next, chosen by that
    pipe and by the metric groups the profile already holds.

    ## Why is this bad?
    The kernel takes most of the time and does a small fraction of the work its cores could: the
    largest saving of the profile is probably here, but the profile does not say why. A pipe busy
    below TS202's 95 % (a Triton matmul with MTE2 at 88 % of each launch) or a model that does not
    count re-reads leaves the pipe rules silent; the next measurement is what turns the distance
    into a diagnosis.

    ## Example
    `triton_matmul_bd1024_opsum`: `matmul_kernel`, 5 launches, 99 % of device time at 0.75 % of its
    speed of light (memory: 2.0 MiB in 2.6 µs at 800 GB/s), MTE2 busy 88 % of each launch:
    collect `aic_metrics=Memory` and `L2Cache`, and `msprof op` per-block data.

    ## What to do instead
    Collect what the finding names: with `Memory`, the GM and L2 bytes the MTE pipes moved (re-reads
    the shape floor misses); with `L2Cache`, whether they hit; with `ResourceConflictRatio`, bank
    conflicts of a busy Vector pipe; `msprof op` gives per-block times (load imbalance, TS402) and
    `msprof op simulator` the per-instruction pipeline of a Scalar-bound kernel. Then rerun.

    ## Thresholds
    `max_sol_share` (0.10: the shape byte model is a floor, 10 % leaves room for 5x re-reads below
    half the ceiling), `min_device_share` (0.10: twice the `high` severity cut), `min_sol_coverage`
    (0.5 of the kernel's time has a speed of light), `min_launch_us` (20: a shorter median launch
    is mostly start-up), `max_findings` (5).

    ## Known limits
    No time estimate (saving kind `none`): the gap to the speed of light bounds a saving, it is not
    one. Severity is `medium`, a large share of device time with its cause not yet measured. The
    speed of light rests on the chip's figures: when the core count or clock is assumed, the
    message says so (`if the device has ...`).
    """
    df = profile.kernels
    total = ctx.total_device_us
    if total <= 0 or not len(df):
        return []
    times = ctx.kernel_times(df)
    max_sol, min_share = float(ctx.thresholds["max_sol_share"]), float(ctx.thresholds["min_device_share"])
    cover = float(ctx.thresholds["min_sol_coverage"])
    names = text(df, "name")
    medians = num(df, "duration_us").groupby(names.to_numpy()).median()
    min_launch = float(ctx.thresholds["min_launch_us"])
    flagged = [
        (name, t)
        for name, t in times.items()
        if t.total_us >= min_share * total
        and t.sol_covered_us >= cover * t.total_us
        and t.sol_covered_us > 0
        and t.sol_us / t.sol_covered_us < max_sol
        and float(medians.get(name, 0.0)) >= min_launch
    ]
    flagged.sort(key=lambda nt: -nt[1].total_us)
    limit = int(ctx.thresholds.get("max_findings", 5))
    findings = []
    for name, t in flagged[:limit]:
        rows = df.loc[(names == name).to_numpy()]
        known = _known(rows, t.sol_us / t.sol_covered_us, t.total_us / total)
        nxt = _collect_next(profile, known)
        guess = _assumed(profile)
        said = _message(name, known, t.total_us, guess)
        evidence = {
            "launches": len(rows),
            "total_us": r3(t.total_us),
            "share_of_device_time": r4(t.total_us / total),
            "sol_share": r4(known["sol_share"]),
            "sol_bound": known["bound"],
            "busiest_pipe": known["pipe"],
            "busiest_pipe_share": r4(known["pipe_share"]),
            "bytes_per_launch": r3(known["bytes"]),
            "bytes_source": known["bytes_source"],
            "flops_known": bool(known["flops"]),
            "metric_groups": list(profile.source.metric_groups),
            "collect_next": [c for c, _ in nxt],
            "thresholds": thresholds_used(ctx, *(k for k in THRESHOLDS if k != "max_findings")),
        }
        findings.append(
            make_finding(
                ctx,
                code=CODE,
                slug=SLUG,
                kernels=[name],
                message=said,
                evidence=evidence,
                recommendation="Collect next: " + "; ".join(f"{c} ({why})" for c, why in nxt) + ".",
                saving_us=0.0,
                severity=Severity.MEDIUM,
                occurrences=len(rows),
                saving_kind=SAVING_NONE,
                assumed=guess,
            )
        )
    if len(flagged) > limit and findings:
        findings[-1].evidence["more_kernels_not_listed"] = len(flagged) - limit
    return findings


def _known(rows: pd.DataFrame, sol_share: float, device_share: float) -> dict[str, Any]:
    """What the profile says of one kernel's launches: the bound its speed of light names (the
    most frequent `sol_bound`), the busiest pipe (largest median share of the launch), the median
    bytes and whether any launch has FLOPs."""
    bounds = text(rows, "sol_bound")
    bounds = bounds[bounds != ""]
    pipe, pipe_share = None, float("nan")
    for label, cols in PIPE_SHARES.items():
        present = [num(rows, c) for c in cols if c in rows.columns]
        if not present:
            continue
        values = np.fmax.reduce([p.to_numpy() for p in present])
        if np.isnan(values).all():
            continue
        v = float(np.nanmedian(values))
        if pipe is None or v > pipe_share:
            pipe, pipe_share = label, v
    source = text(rows, "bytes_source")
    source = source[source != ""]
    flops = num(rows, "flops")
    return {
        "sol_share": sol_share,
        "device_share": device_share,
        "bound": str(bounds.mode().iloc[0]) if len(bounds) else None,
        "pipe": pipe,
        "pipe_share": pipe_share,
        "bytes": float(num(rows, "bytes_moved").median()),
        "bytes_source": str(source.mode().iloc[0]) if len(source) else None,
        "flops": bool((flops > 0).any()),
        "sol_us": float(num(rows, "sol_us").median()),
    }


def _assumed(profile: Profile) -> tuple[str, ...]:
    """The chip figures the speed of light divides by that the profile did not record."""
    chip = profile.chip
    said = [chip.assumed_value(f) for f in ("aic_count", "aiv_count", "clock_mhz")]
    return tuple(f"{v}: assumed for {chip.base_name}, not recorded in the profile" for v in said if v)


def _message(name: str, k: dict[str, Any], total_us: float, guess: tuple[str, ...]) -> str:
    bound = k["bound"] or "unknown"
    what = ""
    if bound == "memory" and k["bytes"] == k["bytes"]:
        what = f": {fmt_bytes(k['bytes'])} in {fmt_us(k['sol_us'])} a launch"
    said = (
        f"{name} runs at {100 * k['sol_share']:.2f} % of its speed of light ({bound}-bound{what}) and "
        f"holds {pct(k['device_share'])} of device time ({fmt_us(total_us)})"
    )
    if k["pipe"] is not None:
        said += f"; busiest pipe {_PIPE_WORDS[k['pipe']]} at {pct(k['pipe_share'])} of the launch"
    else:
        said += "; no pipe shares collected"
    if not k["flops"]:
        said += "; FLOPs unknown (no shape model for it), so the speed of light counts bytes only"
    if guess:
        said += (
            f", if the device has {', '.join(g.split(':')[0] for g in guess)} (--chip gives the real figures)"
        )
    return said


def _collect_next(profile: Profile, k: dict[str, Any]) -> list[tuple[str, str]]:
    """Which data would explain the distance, by the busiest pipe, leaving out what is loaded."""
    loaded = set(profile.source.metric_groups)
    op = profile.source.producer == "msprof_op"
    flag = "msprof op --aic-metrics=" if op else "aic_metrics="
    out: list[tuple[str, str]] = []

    def want(group: str, why: str) -> None:
        if group not in loaded:
            out.append((flag + group, why))

    pipe = k["pipe"]
    if pipe is None:
        want("PipeUtilization", "which pipe is busy")
    if pipe in ("mte1", "mte2", "mte3") or (pipe is None and k["bound"] == "memory"):
        want("Memory", "the GM and L2 bytes moved: re-reads the shape byte floor does not count")
        want("L2Cache", "whether those reads hit L2")
    if pipe == "vector":
        want("ResourceConflictRatio", "Unified Buffer bank conflicts of the Vector pipe")
    if pipe in ("scalar", "cube", "fixpipe") or (pipe is None and k["bound"] != "memory"):
        out.append(("msprof op simulator", "the per-instruction pipeline: what each pipe waits on"))
    if profile.blocks is None and not op:
        out.append(("msprof op", "per-block times: whether some cores finish early, TS402"))
    if not out:
        out.append(("msprof op simulator", "the per-instruction pipeline: what each pipe waits on"))
    return out
