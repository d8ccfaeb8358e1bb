"""Issue #26 item 1: no finding rests on an assumed core count or clock it does not state.

Real data: `vllm_moe_lora_5groups`, one msprof run per metric group of one 20 AIC / 40 AIV device at
1800 MHz; `info.json` kept for three groups, left out for ArithmeticUtilization and
ResourceConflictRatio (README of ../shared/traces/real).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from tilescope.analysis import analyze
from tilescope.findings import Severity
from tilescope.io.load import load_profile

from support import cli

GROUPS = "vllm_moe_lora_5groups"


def _run(real: Path, group: str) -> Path:
    return next((real / GROUPS / f"PROF_{group}").glob("PROF_000001_*"))


@pytest.fixture(scope="module")
def real(real_traces: Path) -> Path:
    if not (real_traces / GROUPS).is_dir():
        pytest.skip(f"{GROUPS} not in the real traces")
    return real_traces


@pytest.mark.parametrize("group", ["ArithmeticUtilization", "ResourceConflictRatio"])
def test_run_without_info_json_takes_the_fewest_cores_its_grids_prove(real: Path, group: str) -> None:
    # the GroupedMatmul grid of 20 blocks ran in one wave (cycles / (20 x aicore_time) = 1800 MHz):
    # the device has at least 20 AI Cores; 910B3 (20) is the fewest at 1800 MHz, not 910B2's 24,
    # so no "20 blocks on 24 cores" finding rests on a guess
    pr = load_profile(_run(real, group))
    assert (pr.chip.aic_count, pr.chip.aiv_count, pr.chip.clock_mhz) == (20, 40, 1800.0)
    assert set(pr.chip.assumed_figures) == {"aic_count", "aiv_count"}
    assert any("at least 20 AI Cores" in w for w in pr.warnings)
    found = analyze(pr).findings
    grouped = [f for f in found if f.code == "TS401" and "GroupedMatmul" in f.kernels[0]]
    assert grouped == []
    for f in (f for f in found if f.code == "TS401"):  # OnesLike: 8 blocks on the assumed 40 AIV
        assert f.assumed and f.severity is not Severity.HIGH
        assert "if the device has 40 Vector cores" in f.message


def test_sibling_run_info_json_in_the_same_parent_folder(real: Path, tmp_path: Path) -> None:
    # msprof's own output folder: several PROF_* runs side by side, one with device_0/info.json.0
    out = tmp_path / "out"
    out.mkdir()
    (out / "PROF_000001_A").symlink_to(_run(real, "ArithmeticUtilization"), target_is_directory=True)
    (out / "PROF_000002_M").symlink_to(_run(real, "Memory"), target_is_directory=True)
    pr = load_profile(out / "PROF_000001_A")
    assert (pr.chip.aic_count, pr.chip.aiv_count, pr.chip.clock_mhz) == (20, 40, 1800.0)
    assert pr.chip.assumed_figures == ()
    assert pr.device.borrowed_from and "PROF_000002_M/device_0/info.json.0" in pr.device.borrowed_from
    assert any("its cycles give 1800 MHz too" in w for w in pr.warnings)
    assert out / "PROF_000002_M" / "device_0" / "info.json.0" in pr.source.files
    # a found core count: the OnesLike 8-of-40 finding no longer says "if"
    ts401 = [f for f in analyze(pr).findings if f.code == "TS401"]
    assert ts401 and all(not f.assumed for f in ts401)


def test_sibling_info_json_is_only_looked_for_beside_the_run(real: Path) -> None:
    # PROF_ArithmeticUtilization/ holds one run: the info.json of PROF_Memory/ (a folder above) is
    # another collection's and is not read
    pr = load_profile(_run(real, "ArithmeticUtilization"))
    assert pr.device.borrowed_from is None
    assert [p.name for p in pr.source.files] == ["op_summary_20260823165358.csv"]


def test_coupled_table_gets_a_coupled_chip_and_its_own_clock(real: Path, tmp_path: Path) -> None:
    # A coupled-chip op_summary (un-prefixed PMU names: one AI Core with Cube and Vector inside),
    # built from the real PipeUtilization run's rows with its aic_ columns renamed as a 310P / 910A
    # writes them; its cycles give 1800 MHz, which is no evidence of a 910B
    src = next(_run(real, "PipeUtilization").glob("mindstudio_profiler_output/op_summary_*.csv"))
    lines = src.read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    keep = [i for i, h in enumerate(header) if not h.startswith(("aiv_", "cube_utilization"))]
    renamed = [header[i].removeprefix("aic_") for i in keep]  # aic_total_cycles -> total_cycles
    rows = list(csv.reader(io.StringIO("\n".join(lines[1:]))))
    body = io.StringIO()
    w = csv.writer(body, lineterminator="\n")
    w.writerow(renamed)
    for r in rows:
        if r[7] == "MIX_AIC":  # the Cube kernel; a coupled chip types it AI_CORE
            w.writerow(["AI_CORE" if i == 7 else r[i] for i in keep])
    table = tmp_path / "op_summary_20260823165335.csv"
    table.write_text(body.getvalue(), encoding="utf-8")
    pr = load_profile(table)
    assert pr.source.coupled
    assert pr.chip.split is False and pr.chip.family == "310P"
    assert pr.chip.clock_mhz == 1800.0 and "clock_mhz" not in pr.chip.assumed_figures
    assert any("coupled table's own cycles" in w for w in pr.warnings)
    # 20 blocks ran in one wave: at least 20 AI Cores, more than the catalogued 310P's 8
    assert pr.chip.aic_count == 20 and "aic_count" in pr.chip.assumed_figures


def test_info_and_analyze_say_the_same_clock_note(real: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # torch_npu text export: the timeline's AI Core Freq counter and the kernels' cycles both give
    # 1800 MHz; `info` read the timeline before choosing, `analyze` beside the rules, and each
    # printed another source. The cycles come first now, the counter only when they give none.
    rank0 = real / "torch_2rank_pipeutil_text" / "rank0_ascend_pt"
    code, info_out, _ = cli(capsys, "info", str(rank0), "--width", "400")
    assert code == 0
    code, analyze_out, _ = cli(capsys, "analyze", str(rank0), "--width", "400")
    assert code in (0, 1)

    def clock_notes(text: str) -> list[str]:
        return [
            line.split("note", 1)[1].lstrip(": ").strip()
            for line in text.splitlines()
            if line.lstrip().startswith("note") and "MHz" in line
        ]

    assert clock_notes(info_out) == clock_notes(analyze_out)
    assert clock_notes(info_out) and "inferred from the data" in clock_notes(info_out)[0]


def test_the_timeline_counter_is_the_clock_when_the_cycles_give_none(
    real: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # kernel_details_na_8 has no cycle counts: the timeline's AI Core Freq counter is the only clock.
    # `analyze` reads the timeline beside the rules; it must read it before choosing here, and say
    # what `info` says.
    folder = tmp_path / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    folder.mkdir(parents=True)
    src = real / "kernel_details_na_8" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    (folder / "kernel_details.csv").write_bytes(src.read_bytes())
    (folder / "trace_view.json").write_text(
        '[{"name":"AI Core Freq","ph":"C","pid":1,"ts":"1","args":{"MHz":1650}}]', encoding="utf-8"
    )
    outs = []
    for command in ("info", "analyze"):
        code, out, _ = cli(capsys, command, str(folder.parent), "--width", "400")
        assert code in (0, 1)
        outs.append(sorted(line.split("note", 1)[1].lstrip(": ") for line in out.splitlines()
                           if line.lstrip().startswith("note") and "MHz" in line))
    assert outs[0] == outs[1]
    assert outs[0] == ["clock 1650 MHz from the highest AI Core Freq counter value of the timeline "
                       "(the kernels' cycles give none)"]
