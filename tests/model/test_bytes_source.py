"""Issue #26 item 4: `bytes_moved` comes from the most direct source, and says which
(`bytes_source`): the file's data-volume columns (`msprof op` Memory.csv), else the Memory group's
rates x side times, else the tensor shapes; the shapes are a floor where both exist."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest

from tilescope.io.load import load_profiles

from support import SAMPLES


def test_op_summary_memory_counters_below_the_tensors_take_the_shapes(real_traces: Path) -> None:
    run = real_traces / "vllm_moe_lora_5groups" / "PROF_Memory"
    (p,) = load_profiles(run)
    k = p.kernels
    (i,) = k.index[k["name"].astype(str).str.startswith("aclnnGroupedMatmulV5")]
    # the Memory group's GM counters give (read + write GB/s) x side time = 7,077 bytes for a
    # kernel whose tensors hold 2,637,888 bytes (data the L2 served): the shapes are the floor
    rated = np.nansum(
        [
            (k.at[i, f"{s}_main_mem_read_gbps"] + k.at[i, f"{s}_main_mem_write_gbps"])
            * k.at[i, f"{s}_time_us"]
            * 1e3
            for s in ("aic", "aiv")
            if f"{s}_main_mem_read_gbps" in k.columns
        ]
    )
    assert round(rated) == 7077
    assert k.at[i, "bytes_moved"] == 2_637_888
    assert k.at[i, "bytes_source"] == "tensor shapes (above the measured)"


def test_msprof_op_data_volume_columns_before_rates(tmp_path: Path) -> None:
    src = SAMPLES / "tilelang_fa_msprof_op"
    run = tmp_path / "run"
    shutil.copytree(src, run)
    (memory,) = run.rglob("Memory.csv")
    with open(memory, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header = rows[0]
    read, write = header.index("read_main_memory_datas(KB)"), header.index("write_main_memory_datas(KB)")
    total_kb = 0.0
    for row in rows[1:]:  # the volumes doubled: the rates x block times no longer say the same
        for c in (read, write):
            if row[c] not in ("", "NA"):
                row[c] = repr(float(row[c]) * 2)
                total_kb += float(row[c])
    with open(memory, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)
    before = load_profiles(src)[0].kernels
    (p,) = load_profiles(run)
    assert before.at[0, "bytes_source"] == "data volume"
    assert p.kernels.at[0, "bytes_source"] == "data volume"
    assert p.kernels.at[0, "bytes_moved"] == pytest.approx(total_kb * 1024)
    assert p.kernels.at[0, "bytes_moved"] == pytest.approx(2 * before.at[0, "bytes_moved"])
