"""The one summary model (tilescope.summary) on real profiles and the bundled samples.

Device times are checked against an independent reading of the raw files (the csv module and
Decimal, not tilescope's parsers); the invariants (no share above 100 % of what it is a share of,
no severity bucket above the total) run over every sample and real folder.
"""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tilescope.analysis import analyze
from tilescope.errors import TilescopeError
from tilescope.io.load import load_profiles
from tilescope.report.data import build_report
from tilescope.summary import device_time, summarize

from support import REPO_ROOT

REPO = REPO_ROOT
SAMPLES = sorted(
    p for p in (REPO / "sample_traces").iterdir() if p.is_dir() and (p / "manifest.json").is_file()
)
COMM = {"HCCL", "COMMUNICATION", "HCCL_AI_CPU"}


def _union_us(rows: list[tuple[Decimal, Decimal]]) -> Decimal:
    """Union of [start, start + duration) intervals in µs, by hand."""
    total, end = Decimal(0), None
    for s, d in sorted(rows):
        e = s + d
        if end is None or s > end:
            total += d
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def _raw_intervals(path: Path, start: str, dur: str, core: str) -> dict[str, list[tuple[Decimal, Decimal]]]:
    out: dict[str, list[tuple[Decimal, Decimal]]] = {"compute": [], "all": []}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            try:
                s, d = Decimal(row[start].strip().strip('"')), Decimal(row[dur])
            except (ArithmeticError, KeyError, AttributeError):
                continue
            out["all"].append((s, d))
            if row[core] not in COMM:
                out["compute"].append((s, d))
    return out


def test_device_time_is_the_union_of_compute_kernels(real_traces: Path) -> None:
    path = real_traces / "gpt_step_arith_591" / "kernel_details.csv"
    raw = _raw_intervals(path, "Start Time(us)", "Duration(us)", "Accelerator Core")
    dt = device_time(load_profiles(path)[0].kernels)
    assert dt.device_us == pytest.approx(float(_union_us(raw["compute"])), abs=1e-3)
    assert dt.with_communication_us == pytest.approx(float(_union_us(raw["all"])), abs=1e-3)
    assert dt.kernel_sum_us == pytest.approx(float(sum(d for _, d in raw["compute"])), abs=1e-3)
    assert dt.device_us == pytest.approx(49171.58, abs=0.01)  # the union, as checked above
    first = min(s for s, _ in raw["all"])
    last = max(s + d for s, d in raw["all"])
    assert dt.wall_us == pytest.approx(float(last - first), abs=1e-3)
    assert dt.wall_us is not None
    assert dt.idle_us == pytest.approx(dt.wall_us - dt.with_communication_us, abs=1e-3)


def test_device_busy_values_listed_in_the_readme(real_traces: Path) -> None:
    # README: rank 1 device busy 11514.600 µs (interval union, HCCL included; two kernels overlap)
    rank1 = device_time(load_profiles(real_traces / "gpt3_2rank_memoryl0" / "test_rank_1")[0].kernels)
    assert rank1.with_communication_us == pytest.approx(11514.6, abs=1e-3)
    # README: kernel_details_na_8 device busy 1000.79 µs (Conv2D17 and TransData_22 overlap 0.06 µs)
    na8 = device_time(load_profiles(real_traces / "kernel_details_na_8")[0].kernels)
    assert na8.device_us == pytest.approx(1000.79, abs=1e-3)
    # README: msprof_db_2023 11 compute tasks, sum of (endNs - startNs) = 663.872 µs
    db = device_time(load_profiles(real_traces / "msprof_db_2023")[0].kernels)
    assert db.kernel_sum_us == pytest.approx(663.872, abs=1e-3)


def test_unit_busy_is_a_share_of_device_time(real_traces: Path) -> None:
    prof = load_profiles(real_traces / "fa_pipeutil_29" / "kernel_details.csv")[0]
    s = summarize(prof)
    k = prof.kernels
    # Cube busy = Σ aic_mac_time(us) (per-core Cube time of each launch) / device time
    cube = float(k["aic_cube_time_us"].fillna(0).sum())
    assert s["units"]["cube"]["busy_us"] == pytest.approx(cube, abs=1e-3)
    assert s["shares"]["cube"] == pytest.approx(round(cube / s["total_device_us"], 4))
    assert s["units"]["cube"]["coverage"] == 1.0  # every launch of this table carries pipe metrics


def test_top_kernels_are_compute_kernels_with_their_share(real_traces: Path) -> None:
    prof = load_profiles(real_traces / "gpt_step_arith_591" / "kernel_details.csv")[0]
    s = summarize(prof)
    names = [t["name"] for t in s["top_kernels"]]
    assert not any(n.startswith("hcom_") for n in names)  # communication is apart, not a kernel share
    top = s["top_kernels"][0]
    assert top["share"] == pytest.approx(round(top["total_us"] / s["total_device_us"], 4))


def _reports() -> list[tuple[str, dict[str, Any]]]:
    real = REPO.parent / "shared" / "traces" / "real"
    folders = [*SAMPLES, *(sorted(p for p in real.iterdir() if p.is_dir()) if real.is_dir() else [])]
    out = []
    for folder in folders:
        try:
            profiles = load_profiles(folder)
        except TilescopeError:
            continue  # a folder that cannot load is the loader tests' subject
        for prof in profiles:
            out.append((f"{folder.name}:{prof.rank}", build_report(prof, analyze(prof))))
    return out


@pytest.fixture(scope="module")
def every_report() -> list[tuple[str, dict[str, Any]]]:
    return _reports()


@pytest.mark.slow  # 2.4-5 s of CPU each (#23: the quick loop keeps tests under ~2 s)
def test_no_share_exceeds_what_it_is_a_share_of(every_report: list[tuple[str, dict[str, Any]]]) -> None:
    assert len(every_report) >= len(SAMPLES)
    for label, report in every_report:
        for p in report["profiles"]:
            s = p["summary"]
            device = s["total_device_us"]
            totals = s["findings"]
            assert 0 <= totals["est_recoverable_share"] <= 1, label
            assert totals["est_recoverable_us"] <= device + 1e-6, label
            idle = s["device_time"]["idle_us"]
            if idle is not None:
                assert totals["est_idle_recoverable_us"] <= idle + 1e-6, label
            for sev, bucket in totals["saving_by_severity"].items():
                assert bucket["device_us"] <= totals["est_recoverable_us"] + 1e-6, (label, sev)
            for unit, share in s["shares"].items():
                assert share is None or 0 <= share <= 1, (label, unit)
            for t in s["top_kernels"]:
                assert t["share"] is None or 0 <= t["share"] <= 1, label
                for key, v in t.items():
                    if key.endswith("_share") and v is not None:
                        assert 0 <= v <= 1, (label, t["name"], key)
                if t.get("sol_pct") is not None:
                    # above 100 % only when flagged: the launch ran faster than its ceiling (#26)
                    assert t["sol_pct"] >= 0, (label, t["name"])
                    assert t["sol_pct"] <= 100 or s["speed_of_light"]["over_ceiling"], (label, t["name"])
        for f in report["findings"]:
            assert 0 <= f["share_of_total"] <= 1, (label, f["code"], f["share_of_total"])
            if f["saving_kind"] in ("device", "grid", "work"):
                device = report["profiles"][f["input"]]["summary"]["total_device_us"]
                assert f["est_saving_us"] <= device + 1e-6, (label, f["code"])


def test_launches_are_the_compute_kernels_device_time_is_over(real_traces: Path) -> None:
    """torch_2rank_pipeutil_text rank 0's kernel table has 191 rows, 4 of them HCCL all-reduces:
    device time is over 187 launches, and the 4 are communication tasks (#26: "over 191
    launches" counted the all-reduces)."""
    path = real_traces / "torch_2rank_pipeutil_text" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    with open(path / "kernel_details.csv", newline="", encoding="utf-8-sig") as fh:
        cores = [row["Accelerator Core"] for row in csv.DictReader(fh)]
    prof = load_profiles(path / "kernel_details.csv")[0]
    s = summarize(prof)
    assert (len(cores), cores.count("HCCL")) == (191, 4)
    assert (s["kernel_count"], s["communication_tasks"]) == (len(cores) - 4, 4) == (187, 4)
    assert s["distinct_kernels"] == prof.kernels.loc[prof.kernels["core_type"] != "HCCL", "name"].nunique()
