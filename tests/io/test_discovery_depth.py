"""Issue #26 item 9: a folder is what it holds — profile folders a few levels down are found,
unrelated folders are not read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tilescope.errors import NoProfileFoundError
from tilescope.io import detect as detect_mod
from tilescope.io.detect import detect

from support import SAMPLES, cli

GROUPS = "vllm_moe_lora_5groups"


def test_prof_group_folder_holding_one_run(real_traces: Path) -> None:
    # vLLM-Ascend's layout: PROF_<group>/PROF_000001_*/ — the PROF_ name of the parent does not
    # make it a run of its own
    group = real_traces / GROUPS / "PROF_PipeUtilization"
    if not group.is_dir():
        pytest.skip(f"{GROUPS} not in the real traces")
    (found,) = detect(group)
    assert found.format == "msprof" and found.path.name.startswith("PROF_000001_")
    # and one more PROF_ level above it, as the collection script wrote it (PROF_GROUP_<ts>/)
    # (one run per metric group of one device: one profile holding the five, #26 item 4)
    (found,) = detect(real_traces / GROUPS)
    assert found.format == "msprof_groups"
    assert sorted(f.path.parent.name for f in found.children) == sorted(
        p.name for p in (real_traces / GROUPS).iterdir()
    )


def test_real_msprof_run_three_levels_down(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    group = real_traces / GROUPS / "PROF_Memory"
    if not group.is_dir():
        pytest.skip(f"{GROUPS} not in the real traces")
    run = next(group.glob("PROF_000001_*"))
    deep = tmp_path / "experiments" / "moe" / "2026-08-23"
    deep.mkdir(parents=True)
    (deep / run.name).symlink_to(run, target_is_directory=True)
    (found,) = detect(tmp_path / "experiments")
    assert found.format == "msprof" and found.path == deep / run.name
    code, out, _ = cli(capsys, "info", str(tmp_path / "experiments"))
    assert code == 0 and "ai_core_num=20" in out


def test_msprof_op_results_three_levels_down(tmp_path: Path) -> None:
    runs = tmp_path / "runs" / "flash_attn" / "v1"
    runs.mkdir(parents=True)
    src = next((SAMPLES / "tilelang_fa_msprof_op").glob("OPPROF_*"))
    shutil.copytree(src, runs / src.name)
    (found,) = detect(tmp_path / "runs")
    assert found.format == "msprof_op" and found.path == runs / src.name


def test_deeper_folders_are_neither_searched_nor_their_files_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a kernel table three plain folders down is no profile of the path given, and below the first
    # level no file is opened to find out
    table = SAMPLES / "attention_unfused"
    kd = next(table.rglob("kernel_details.csv"))
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    shutil.copy(kd, deep / "kernel_details.csv")
    shutil.copy(kd, tmp_path / "a" / "b" / "kernel_details.csv")
    opened: list[Path] = []
    real_head = detect_mod.read_head

    def spy(path: Path, size: int = detect_mod.SNIFF_BYTES) -> bytes | None:
        opened.append(path)
        return real_head(path, size)

    monkeypatch.setattr(detect_mod, "read_head", spy)
    with pytest.raises(NoProfileFoundError):
        detect(tmp_path)
    assert opened == []
