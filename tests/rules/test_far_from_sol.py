"""TS206 far-from-speed-of-light (#26 item 6): a kernel far below its speed of light with a large
share of device time gets a finding that says what is known and what to collect next.

Asserted on the real `triton_matmul_bd1024_opsum` (values recomputed here from its raw CSV) and on
generated tables (built in the test, documented canonical columns)."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

import pandas as pd
import pytest

from tilescope.analysis import analyze
from tilescope.chips import get_chip
from tilescope.profile import Profile, SourceInfo
from tilescope.text.words import saving_text

from support import REPO_ROOT

REAL = REPO_ROOT.parent / "shared" / "traces" / "real"
TRITON = REAL / "triton_matmul_bd1024_opsum"


def _triton_rows() -> list[dict[str, str]]:
    (path,) = (TRITON / "mindstudio_profiler_output").glob("op_summary_*.csv")
    with path.open(newline="") as fh:
        return [r for r in csv.DictReader(fh) if r["OP Type"] == "matmul_kernel"]


@pytest.mark.skipif(not TRITON.is_dir(), reason=f"real traces not found at {TRITON}")
def test_triton_matmul_far_from_its_speed_of_light() -> None:
    from tilescope.io.load import load_profile

    p = load_profile(TRITON)
    r = analyze(p)
    (f,) = [f for f in r.findings if f.code == "TS206"]
    rows = _triton_rows()
    durations = [float(x["Task Duration(us)"]) for x in rows]
    total = sum(durations)
    # bytes from the tensor shapes: two 512x512 fp16 inputs, one 512x512 fp32 output, each once
    bytes_moved = 2 * 512 * 512 * 2 + 512 * 512 * 4
    gm = p.chip.hbm_bandwidth_gbps  # 800 GB/s: the 910B4 class its cycles give (1650 MHz)
    assert gm == 800
    sol_per_launch = bytes_moved / (gm * 1e3)  # µs
    assert f.kernels == ("matmul_kernel",)
    assert f.evidence["launches"] == len(rows) == 5
    assert f.evidence["total_us"] == pytest.approx(total, abs=1e-3)
    assert f.evidence["sol_share"] == pytest.approx(len(rows) * sol_per_launch / total, abs=1e-4)
    assert f.evidence["sol_share"] == pytest.approx(0.0075, abs=1e-4)  # the 0.75 %
    assert f.evidence["sol_bound"] == "memory"
    assert f.evidence["busiest_pipe"] == "mte2"
    mte2 = statistics.median(float(x["aic_mte2_time(us)"]) / float(x["Task Duration(us)"]) for x in rows)
    assert f.evidence["busiest_pipe_share"] == pytest.approx(mte2, abs=1e-4)  # 0.881: below TS202's 0.95
    assert f.evidence["share_of_device_time"] == pytest.approx(total / r.total_device_us, abs=1e-4)
    assert f.evidence["flops_known"] is False
    assert "0.75 % of its speed of light (memory-bound" in f.message
    assert "busiest pipe MTE2 (GM→local) at 88 % of the launch" in f.message
    assert "if the device has" not in f.message  # 28 AIC @ 1650 are inferred, not assumed
    # PipeUtilization is loaded: what explains MTE2 busy on 2 MiB is the Memory and L2 groups
    assert f.evidence["collect_next"] == ["aic_metrics=Memory", "aic_metrics=L2Cache", "msprof op"]
    assert f.severity.value == "medium" and f.saving_kind == "none" and f.est_saving_us == 0
    assert saving_text(f.to_dict()) == "no time estimate until the data it names is collected"
    # nothing else on the profile says the matmul is slow: before TS206 only TS404 (info) fired
    assert not [g for g in r.findings if g.code in ("TS202", "TS203") and "matmul_kernel" in g.kernels]


def _generated(groups: list[str], rows: list[dict[str, object]], producer: str = "msprof") -> Profile:
    return Profile(
        source=SourceInfo(path=Path("generated"), format="msprof", producer=producer, metric_groups=groups),
        kernels=pd.DataFrame(rows),
        chip=get_chip("910B2"),
    )


def _row(name: str, dur: float, **extra: object) -> dict[str, object]:
    # a Vector launch: 4 MiB of fp16 in and out from its shapes; 48 blocks on a 910B2
    base: dict[str, object] = {
        "name": name,
        "op_type": name,
        "core_type": "AI_VECTOR_CORE",
        "duration_us": dur,
        "block_dim": 48,
        "input_shapes": "1048576",
        "input_dtypes": "FLOAT16",
        "output_shapes": "1048576",
        "output_dtypes": "FLOAT16",
    }
    base.update(extra)
    return base


def test_generated_thresholds_and_next_data() -> None:
    # 4 MiB at 1750 GB/s is 2.4 µs: a 200 µs launch is at 1.2 % of it, a 30 µs one at 8 %
    slow = [
        _row("SlowVec", 200.0, aiv_time_us=200.0, aiv_vec_ratio=0.9, aiv_mte2_ratio=0.1) for _ in range(3)
    ]
    small = [_row("SmallShare", 30.0, aiv_time_us=30.0, aiv_vec_ratio=0.9)]  # 30 / 630 < 10 %
    short = [_row("Short", 5.0, aiv_time_us=5.0, aiv_vec_ratio=0.9) for _ in range(20)]  # < 20 µs
    r = analyze(_generated(["PipeUtilization"], slow + small + short))
    found = [f for f in r.findings if f.code == "TS206"]
    assert [f.kernels for f in found] == [("SlowVec",)]
    (f,) = found
    assert f.evidence["busiest_pipe"] == "vector"
    assert f.evidence["collect_next"] == ["aic_metrics=ResourceConflictRatio", "msprof op"]
    # an msprof op run says it in its own words and has the per-block data already
    r = analyze(_generated(["PipeUtilization", "ResourceConflictRatio"], slow, producer="msprof_op"))
    (f,) = [f for f in r.findings if f.code == "TS206"]
    assert f.evidence["collect_next"] == ["msprof op simulator"]
