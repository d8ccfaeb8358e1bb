"""Issue #26 item 5: a launch faster than its speed of light keeps its value (103.5 %, never clamped
to 100 % nor hidden as "–"), is flagged with a note naming the kernel and the ceiling, and is left
out of the speed-of-light total; savings stay bounded as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tilescope.io.load import load_profiles
from tilescope.metrics import bounded_sol
from tilescope.profile import Profile
from tilescope.summary import speed_of_light
from tilescope.text.words import sol_text

from support import SAMPLES


@pytest.fixture(scope="module")
def arith(real_traces: Path) -> Profile:
    return load_profiles(real_traces / "gpt_step_arith_591")[0]


def test_a_launch_over_its_gm_ceiling_keeps_its_value(arith: Profile) -> None:
    k = arith.kernels
    launch = k[(k["name"].astype(str) == "DropOutDoMask24") & (k["duration_us"] == 111.40)].iloc[0]
    # 207,618,048 bytes in 111.40 µs: 1,863.7 GB/s against the 910B1's 1,800 GB/s GM ceiling
    assert arith.chip.hbm_bandwidth_gbps == 1800.0
    assert round(launch["achieved_gbps"], 1) == 1863.7
    assert round(launch["sol_pct"], 2) == 103.54  # was clamped to 100.0
    assert launch["sol_bound"] == "memory"
    assert (
        sol_text({"sol_pct": launch["sol_pct"], "sol_bound": "memory"})
        == "103.5 % (memory, over its ceiling)"
    )
    # 63.12 µs for the same bytes: 182.7 %, more than 5 % over (was null, "–")
    fast = k[(k["name"].astype(str) == "DropOutDoMask24") & (k["duration_us"] == 63.12)].iloc[0]
    assert round(fast["sol_pct"], 1) == 182.7


def test_the_total_leaves_them_out_and_says_so(arith: Profile) -> None:
    sol = speed_of_light(arith.kernels)
    over = sol["over_ceiling"]
    assert (over["launches"], over["kernels"]) == (33, 20)
    assert over["furthest"] == {
        "kernel": "AsStrided94",
        "bound": "memory",
        "sol_pct": 250.11,
        "achieved": 4501.941,
        "ceiling": 1800.0,
        "unit": "GB/s",
    }
    assert over["note"].startswith(
        "33 launches of 20 kernels ran faster than their speed of light "
        "(furthest: AsStrided94: 4,502 GB/s is 250.1 % of its GM ceiling of 1,800 GB/s)"
    )
    k = arith.kernels
    ok = ~(k["sol_us"] > k["duration_us"]) & k["sol_us"].notna()
    compute = ~k["core_type"].astype(str).isin(["HCCL", "COMMUNICATION"])
    assert sol["sol_us"] == round(float(k.loc[ok & compute, "sol_us"].sum()), 3)
    assert sol["achieved_pct"] <= 100


def test_savings_are_bounded_as_before() -> None:
    # at most the duration up to 5 % over it (the profiler rounds), unknown beyond
    got = bounded_sol(np.array([90.0, 103.0, 106.0, np.nan]), np.array([100.0, 100.0, 100.0, 100.0]))
    assert got[:2].tolist() == [90.0, 100.0] and np.isnan(got[2]) and np.isnan(got[3])


def test_a_cube_ceiling_names_the_peak() -> None:
    p = load_profiles(SAMPLES / "cluster_8rank")[0]
    over = speed_of_light(p.kernels)["over_ceiling"]
    assert over is not None and over["furthest"]["unit"] == "TFLOP/s" and over["furthest"]["bound"] == "cube"
    assert "of its Cube peak of 354 TFLOP/s" in over["note"]
