"""`msprof op` runs and the core count (#26 item 2): msprof op records none, so the numbers that
divide by it (per-core pipe shares, the speed of light) say "if the device has N ..." and are at
most medium; an msprof run beside the OPPROF folder in one output folder gives the real count.

The OPPROF folder is the repository's sample (sample_traces/tilelang_fa_msprof_op, documented
format); the sibling run's info.json is the real one of ../shared/traces/real/vllm_moe_lora_5groups
(20 AIC / 40 AIV @ 1800 MHz), copied beside it in a temporary folder (a generated layout)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tilescope.analysis import analyze
from tilescope.io.load import load_profile

from support import REAL_TRACES, SAMPLES

OPPROF = next((SAMPLES / "tilelang_fa_msprof_op").glob("OPPROF_*"))
INFO = (
    next(
        (REAL_TRACES / "vllm_moe_lora_5groups" / "PROF_PipeUtilization").glob("PROF_*/device_0/info.json.0"),
        None,
    )
    if REAL_TRACES.is_dir()
    else None
)


def test_assumed_count_is_said_on_pipe_share_findings() -> None:
    p = load_profile(OPPROF)
    assert p.chip.aic_count == 24 and "aic_count" in p.chip.assumed_figures  # 910B2 defaults
    r = analyze(p)
    by = {f.code: f for f in r.findings}
    # 24 Cube / 48 Vector blocks: more than the 20 / 40 of a 910B3 at the same 1800 MHz, so the
    # per-core times (ceil(blocks / cores) waves) change with the count
    for code in ("TS201", "TS203"):
        f = by[code]
        assert "if the device has 24 AI Cores and 48 Vector cores" in f.message, f.message
        assert "pipe shares per core" in f.message
        assert f.assumed and f.severity.value == "medium"
    # block times and UB conflict ratios do not divide by the count: no caveat, their own severity
    for code in ("TS402", "TS302"):
        assert "if the device has" not in by[code].message and not by[code].assumed


@pytest.mark.skipif(INFO is None, reason="real traces not found")
def test_sibling_msprof_run_gives_the_core_count(tmp_path: Path) -> None:
    assert INFO is not None
    op = tmp_path / OPPROF.name
    shutil.copytree(OPPROF, op)
    dev = tmp_path / "PROF_000001_20261130000000_ABCDEFGHIJKLMNOP" / "device_0"
    dev.mkdir(parents=True)
    shutil.copy(INFO, dev / "info.json.0")
    p = load_profile(op)
    assert (p.chip.aic_count, p.chip.aiv_count, p.chip.clock_mhz) == (20, 40, 1800)
    assert "aic_count" not in p.chip.assumed_figures
    assert p.device.borrowed_from is not None and "info.json.0" in p.device.borrowed_from
    assert dev / "info.json.0" in p.source.files
    r = analyze(p)
    assert not [f for f in r.findings if "if the device has" in f.message]
    ts401 = next(f for f in r.findings if f.code == "TS401")
    assert "24 blocks on 20 cores" in ts401.message

    # a sibling run whose clock is not this run's (OpBasicInfo: 1800 MHz) is another device's
    info = json.loads(INFO.read_text())
    info["DeviceInfo"][0]["aic_frequency"] = "1650"
    (dev / "info.json.0").write_text(json.dumps(info))
    p = load_profile(op)
    assert p.chip.aic_count == 24 and "aic_count" in p.chip.assumed_figures
    assert p.device.borrowed_from is None
