"""TS403 aicore-frequency-drop: kernels running while the AI Core clock is below its rated value."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tilescope.engine import RuleContext
from tilescope.findings import Finding
from tilescope.io.timeline_facts import FREQ_COUNTER, kernel_tasks
from tilescope.profile import Profile
from tilescope.rules._columns import num, text
from tilescope.rules._findings import make_finding
from tilescope.rules._intervals import end_ns, start_ns
from tilescope.rules._numbers import pct, r3
from tilescope.text.words import count_text, fmt_us

CODE = "TS403"
SLUG = "aicore-frequency-drop"
KIND = "runtime"
NEEDS = ("timeline",)
THRESHOLDS: dict[str, Any] = {
    "min_drop": 0.05,  # frequency below rated x (1 - min_drop)
    "min_saving_us": 1.0,
}


def missing_inputs(profile: Profile) -> tuple[str, ...]:
    tl = profile.timeline
    if tl is None or tl.counters is None or not (text(tl.counters, "name") == FREQ_COUNTER).any():
        return ("timeline.counters:AI Core Freq",)
    return ()


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Reads the timeline's `AI Core Freq` counter and, for every compute kernel of the timeline
    (runtime tasks such as PROFILING_ENABLE are not kernels), the frequency in effect when it
    started. Kernels that started while the clock was more than
    `min_drop` below the rated frequency (device info, else the chip's clock) are counted; the
    lost time is duration x (1 - f / rated).

    ## Why is this bad?
    At 800 MHz instead of 1800 MHz a compute-bound kernel takes 2.25x as long, and utilisation
    figures computed at the rated clock are wrong (formats doc §7.3).

    ## Example
    The msprof TileLang sample: the counter reads 800 MHz until 0.4 ms after the kernel ended.

    ## What to do instead
    Warm up before measuring (run the kernel a few times first), check power/thermal limits and
    the power-management setting (`npu-smi`), and compare runs at the same clock.

    ## Thresholds
    `min_drop` (0.05), `min_saving_us` (1).

    ## Known limits
    Uses the frequency at each kernel's start (changes inside a kernel are listed, not
    integrated). Needs the `AI Core Freq` counter, which msprof writes and torch_npu may not.
    """
    tl = profile.timeline
    assert tl is not None
    c = tl.counters[text(tl.counters, "name") == FREQ_COUNTER]
    freq = pd.DataFrame({"start_ns": start_ns(c).to_numpy(), "mhz": num(c, "value").to_numpy()}).dropna()
    freq = freq.sort_values("start_ns")
    keep, _types = kernel_tasks(tl.kernels)
    k = tl.kernels[keep]  # compute kernels only: runtime tasks (PROFILING_ENABLE, ...) are not kernels
    ks = pd.DataFrame(
        {
            "start_ns": start_ns(k).to_numpy(),
            "end_ns": end_ns(k).to_numpy(),
            "dur": num(k, "duration_us").to_numpy(),
            "name": text(k, "name").to_numpy(),
        }
    )
    ks = ks.sort_values("start_ns")
    m = pd.merge_asof(ks, freq, on="start_ns", direction="backward")
    # the device's rated clock (OpBasicInfo, info.json, the counter's own maximum) before the chip's
    rated = profile.device.rated_frequency_mhz or profile.chip.clock_mhz or float(freq["mhz"].max())
    drop = float(ctx.thresholds["min_drop"])
    low = m["mhz"] < rated * (1 - drop)
    lost = (m["dur"] * (1 - m["mhz"] / rated)).where(low, 0).fillna(0)
    # frequency changes while a kernel runs
    changes = freq["start_ns"].to_numpy()
    i0 = np.searchsorted(changes, m["start_ns"].to_numpy(), "right")
    i1 = np.searchsorted(changes, m["end_ns"].to_numpy(), "left")
    changed = int((i1 > i0).sum())
    saving = float(lost.sum())
    if not low.any() or saving < float(ctx.thresholds["min_saving_us"]):
        return []
    worst = m[low].assign(lost=lost[low]).sort_values("lost", ascending=False).head(10)
    msg = (
        f"{count_text(low.sum(), 'kernel')} ran below the rated {rated:.0f} MHz (lowest "
        f"{m.loc[low, 'mhz'].min():.0f} MHz, "
        f"{pct(float(low.mean()))} of kernels): {fmt_us(saving)} lost"
    )
    return [
        make_finding(
            ctx,
            code=CODE,
            slug=SLUG,
            kernels=worst["name"].tolist(),
            message=msg,
            saving_us=saving,
            occurrences=int(low.sum()),
            evidence={
                "rated_mhz": rated,
                "min_mhz": r3(m.loc[low, "mhz"].min()),
                "kernels_below": int(low.sum()),
                "kernels_with_frequency_change": changed,
                "worst": [
                    {
                        "name": r["name"],
                        "mhz": r3(r["mhz"]),
                        "duration_us": r3(r["dur"]),
                        "lost_us": r3(r["lost"]),
                    }
                    for _, r in worst.iterrows()
                ],
                "thresholds": dict(ctx.thresholds),
                "saving_model": "duration x (1 - f / rated)",
            },
            recommendation="Warm the device up before measuring, check power/thermal limits "
            "(npu-smi), and compare "
            "runs only at the same clock.",
        )
    ]
