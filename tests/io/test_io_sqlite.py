"""SQLite exports (formats §8), built synthetically from the documented schema (no real DB exists)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from tilescope.errors import ProfileFormatError
from tilescope.io.load import load_profile
from tilescope.io.sqlite import read_sqlite

STRINGS = {
    1: "MatMul_1",
    2: "MatMulV2",
    3: "AI_CORE",
    4: "Add_2",
    5: "Add",
    6: "AI_VECTOR_CORE",
    10: "aic_total_time",
    11: "aic_total_cycles",
    12: "aic_mac_ratio",
    13: "aiv_total_time",
    14: "aiv_vec_ratio",
    15: "aic_mac_time",
    16: "aic_main_mem_read_bw",
    17: "KERNEL_AICORE",
    18: "128,256;256,64",
    19: "128,64",
}


def make_db(path: Path, new_names: bool, pmu: bool = True) -> Path:
    blocks, mix = ("blockNum", "mixBlockNum") if new_names else ("blockDim", "mixBlockDim")
    con = sqlite3.connect(path)
    con.executescript(f"""
    CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);
    CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER,
        globalTaskId INTEGER, globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER,
        taskId INTEGER, modelId INTEGER);
    CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER, {blocks} INTEGER, {mix} INTEGER,
        taskType INTEGER, opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER, inputShapes INTEGER,
        outputFormats INTEGER, outputDataTypes INTEGER, outputShapes INTEGER, attrInfo INTEGER,
        opState INTEGER, hf32Eligible INTEGER);
    CREATE TABLE TASK_PMU_INFO (globalTaskId INTEGER, name INTEGER, value NUMERIC);
    CREATE TABLE NPU_INFO (id INTEGER, name TEXT);
    CREATE TABLE META_DATA (name TEXT, value TEXT);
    """)
    con.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", list(STRINGS.items()))
    con.executemany(
        "INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        [
            (1736413971558972912, 1736413971559158416, 0, 7, 100, 1, 17, 0, 2, 61653, 4294967295),
            (1736413971559200000, 1736413971559210000, 0, 8, 101, 1, 17, 0, 2, 61654, 4294967295),
        ],
    )
    con.executemany(
        "INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [
            (1, 100, 16, 0, 3, 2, None, None, 18, None, None, 19, None, None, None),
            (4, 101, 40, 0, 6, 5, None, None, None, None, None, None, None, None, None),
        ],
    )
    if pmu:
        con.executemany(
            "INSERT INTO TASK_PMU_INFO VALUES (?,?,?)",
            [
                (100, 10, 183870.0),
                (100, 11, 5295467),
                (100, 12, 0.824),
                (100, 15, 151425.0),
                (100, 16, 250.5),
                (100, 13, 0),
                (100, 14, 0),
                (101, 13, 8500.0),
                (101, 14, 0.41),
                (101, 10, 0),
                (101, 11, 0),
            ],
        )
    con.execute("INSERT INTO NPU_INFO VALUES (0, 'Ascend910B3')")
    con.execute("INSERT INTO META_DATA VALUES ('CANN_VERSION', '8.0.RC3')")
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("new_names", [False, True])
def test_sqlite_kernels(tmp_path: Path, new_names: bool) -> None:
    data = read_sqlite(make_db(tmp_path / "ascend_pytorch_profiler_3.db", new_names))
    assert data.rank == 3 and data.model_name == "Ascend910B3" and data.cann_version == "8.0.RC3"
    k = data.kernels
    assert len(k) == 2
    mm = k.iloc[0]
    assert mm["name"] == "MatMul_1" and mm["op_type"] == "MatMulV2" and mm["core_type"] == "AI_CORE"
    assert mm["start_ns"] == 1736413971558972912
    assert mm["duration_us"] == pytest.approx(185.504)
    assert mm["block_dim"] == 16 and mm["stream_id"] == 2 and mm["task_id"] == 61653
    assert pd.isna(mm["model_id"])
    assert mm["aic_time_us"] == pytest.approx(183.87)  # ns -> µs
    assert mm["aic_cube_time_us"] == pytest.approx(151.425)
    assert mm["aic_total_cycles"] == 5295467 and mm["aic_cube_ratio"] == 0.824
    assert mm["aic_main_mem_read_gbps"] == 250.5
    assert mm["input_shapes"] == "128,256;256,64"
    add = k.iloc[1]
    assert add["aiv_time_us"] == pytest.approx(8.5) and add["aiv_vec_ratio"] == 0.41
    assert add["wait_us"] == pytest.approx((1736413971559200000 - 1736413971559158416) / 1000)


def test_sqlite_profile_chip_from_npu_info(tmp_path: Path) -> None:
    pr = load_profile(make_db(tmp_path / "msprof_20260101.db", True))
    assert pr.source.format == "sqlite" and pr.chip.name == "910B3"
    mm = pr.kernels.iloc[0]
    assert mm["cube_utilization_pct"] == pytest.approx(79.295, abs=1e-3)
    assert pd.isna(mm["aiv_time_us"])  # 0 on the unused side -> null
    assert mm["flops"] == 2 * 128 * 256 * 64


def test_sqlite_missing_tables(tmp_path: Path) -> None:
    p = tmp_path / "msprof_1.db"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE HOST_INFO (hostUid TEXT, hostName TEXT)")
    con.commit()
    con.close()
    with pytest.raises(ProfileFormatError, match="missing table"):
        read_sqlite(p)


def test_sqlite_not_a_database(tmp_path: Path) -> None:
    p = tmp_path / "msprof_2.db"
    p.write_bytes(b"this is not sqlite at all" * 10)
    with pytest.raises(ProfileFormatError, match="not an SQLite database"):
        read_sqlite(p)
