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


# ---- communication (issue #26 item 2): the collectives of a database export count ----------------

DB_EXPORT = "torch_2rank_pipeutil_db"


def _db_of_rank(real_traces: Path, rank: int) -> tuple[Path, Path]:
    out = real_traces / DB_EXPORT / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    return out / f"ascend_pytorch_profiler_{rank}.db", out / "analysis.db"


@pytest.mark.parametrize("rank", [0, 1])
def test_database_export_counts_its_collectives(real_traces: Path, rank: int) -> None:
    """Communication and idle time of a torch_npu database export are the ones its own
    analysis.db gives (StepTraceTime Communication and Free), as a text export's are: rank 0
    102,108.1 µs and 25,258.144 µs. Before, the collectives were not read: 0 µs and 123,330 µs."""
    from tilescope.summary import communication_mask, device_time

    db, analysis = _db_of_rank(real_traces, rank)
    con = sqlite3.connect(f"file:{analysis}?mode=ro", uri=True)
    computing, communication, free = con.execute(
        "SELECT computing, communication, free FROM StepTraceTime").fetchone()
    con.close()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    ops = con.execute("SELECT count(*) FROM COMMUNICATION_OP").fetchone()[0]
    con.close()
    k = read_sqlite(db).kernels
    hccl = k.loc[communication_mask(k)]
    assert len(hccl) == ops == 4
    assert hccl["name"].str.startswith("hcom_allReduce__").all()
    assert (hccl["op_type"] == "hcom_allReduce_").all()  # the text export's Type
    dt = device_time(k)
    assert dt.device_us == pytest.approx(computing, abs=1e-3)
    assert dt.communication_us == pytest.approx(communication, abs=1e-3)
    assert dt.idle_us == pytest.approx(free, abs=1e-3)
    if rank == 0:
        assert (dt.communication_us, dt.idle_us) == (pytest.approx(102108.1), pytest.approx(25258.144))


def test_collectives_without_an_operator_row_come_from_their_tasks(real_traces: Path) -> None:
    """msprof's 2023 export lists HCCL tasks and no COMMUNICATION_OP row: the collective is the
    span of its tasks that TASK places (first start to last end)."""
    from tilescope.summary import communication_mask, device_time

    db = real_traces / "msprof_db_2023" / "msprof_0.db"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    first, last = con.execute(
        "SELECT min(t.startNs), max(t.endNs) FROM COMMUNICATION_TASK_INFO AS c "
        "JOIN TASK AS t ON t.globalTaskId = c.globalTaskId").fetchone()
    assert con.execute("SELECT count(*) FROM COMMUNICATION_OP").fetchone()[0] == 0
    con.close()
    k = read_sqlite(db).kernels
    hccl = k.loc[communication_mask(k)]
    assert list(hccl["name"]) == ["hcom_allGather__305_879_1"]
    assert int(hccl["start_ns"].iloc[0]) == first
    assert device_time(k).communication_us == pytest.approx((last - first) / 1000.0)
    assert device_time(k).device_us == pytest.approx(663.872)  # the compute tasks are unchanged


def test_a_collective_with_a_text_time_is_refused_in_one_line(tmp_path: Path) -> None:
    db = make_db(tmp_path / "msprof_3.db", True)
    con = sqlite3.connect(db)
    con.executescript("""
    CREATE TABLE COMMUNICATION_OP (opName INTEGER, startNs INTEGER, endNs INTEGER, opId INTEGER);
    INSERT INTO STRING_IDS VALUES (30, 'hcom_allReduce__1_0_1');
    INSERT INTO COMMUNICATION_OP VALUES (30, 'soon', 1736413971559300000, 1);
    """)
    con.commit()
    con.close()
    refused = r"table COMMUNICATION_OP, rowid 1.*startNs holds the text 'soon'"
    with pytest.raises(ProfileFormatError, match=refused):
        read_sqlite(db)


def test_diff_of_the_text_and_database_exports_removes_no_collective(real_traces: Path) -> None:
    """The same kind of run in both exports: `diff` matches kernels by their normalised name,
    and the all-reduce is in both tables (before, the database's had none: "removed")."""
    from tilescope.diff import normalise_kernel_name
    from tilescope.summary import communication_mask

    text = real_traces / "torch_2rank_pipeutil_text" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    base = load_profile(text / "kernel_details.csv").kernels
    head = read_sqlite(_db_of_rank(real_traces, 0)[0]).kernels

    def collectives(k: pd.DataFrame) -> list[str]:
        return sorted(normalise_kernel_name(str(n)) for n in k.loc[communication_mask(k), "name"])

    assert collectives(head) == collectives(base) == ["hcom_allReduce"] * 4
