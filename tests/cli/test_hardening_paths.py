"""Issue #13, hardening: paths are data (no reader reads a path as a URI, a glob or SQL), and a
broken SQLite export is one line and exit 2, never a traceback.

Each odd directory name holds a copy of a real profile (../shared/traces/real, copied into
tmp_path at test time) beside decoy siblings holding a *different* profile, placed where the old
readers went: SQLite opened `file:{path}?mode=ro` as an unescaped URI (`pct%41` is `pctA`, `a?b` and
`a#b` are the file `a`, created empty when missing), DuckDB globbed the timeline path (`run[1]`
read `run1`, `x*` every match at once).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import tilescope.io.native as native
import tilescope.msprof_advisor as msa
from tilescope.cli import main
from tilescope.errors import ProfileFormatError
from tilescope.io.sqlite import read_sqlite
from tilescope.io.timeline import read_timeline

from support import REPO_ROOT

REPO = REPO_ROOT
DB = "msprof_1.db"
TRACE = "trace_view.json"
# A name that is not UTF-8 (Latin-1 é): Python hands it over as a str with a surrogate escape.
NOT_UTF8 = os.fsdecode(b"caf\xe9")

# odd name -> sibling files (relative to the odd name's parent) that hold a decoy profile
SQLITE_DECOYS: dict[str, list[str]] = {
    "pct%41": [f"pctA/{DB}"],  # %41 is 'A' in a URI
    "100%": [],  # a bare '%' is a malformed URI escape
    "a?b": ["a"],  # '?' starts the URI query: the old code opened the file 'a'
    "a#b": ["a"],  # '#' starts the URI fragment
    "run[1]": [f"run1/{DB}"],
    "x*": [f"x/{DB}", f"xy/{DB}"],
    "{a,b}": [f"a/{DB}", f"b/{DB}"],
    "it's": [],
    'say "hi"': [],
    " two  spaces ": [],
    "new\nline": [f"new/{DB}"],
    "ünï cödé ✓": [],
    NOT_UTF8: [],
}
TIMELINE_DECOYS: dict[str, list[str]] = {
    "run[1]": [f"run1/{TRACE}"],  # a bracket is a character class in DuckDB's glob
    "x*": [f"x/{TRACE}", f"xy/{TRACE}"],  # '*' read every match, merged into one timeline
    "a?b": [f"acb/{TRACE}"],
    "{a,b}": [f"a/{TRACE}", f"b/{TRACE}"],
    "pct%41": [f"pctA/{TRACE}"],
    "a#b": [f"a/{TRACE}"],
    "it's": [],  # a quote inside the SQL string literal
    'say "hi"': [],
    " two  spaces ": [],
    "new\nline": [f"new/{TRACE}"],
    "ünï cödé ✓": [],
    NOT_UTF8: [],
}


def _files(root: Path) -> set[bytes]:
    """Every path under root, as bytes (names need not be UTF-8)."""
    out: set[bytes] = set()
    for top, dirs, files in os.walk(os.fsencode(root)):
        out.update(os.path.join(top, n) for n in dirs + files)
    return out


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run tilescope in-process; as a process when an argument is not UTF-8, for the output to
    carry its bytes back as a terminal gets them (capsys only takes UTF-8 text)."""
    if all(_utf8(a) for a in args):
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:surrogateescape"}
    r = subprocess.run([sys.executable, "-m", "tilescope.cli", *args], capture_output=True, env=env,
                       cwd=REPO, timeout=120, check=False)
    return r.returncode, os.fsdecode(r.stdout), os.fsdecode(r.stderr)


def _info(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, object]:
    code, out, err = _cli(capsys, "info", "--format", "json", str(path))
    assert code == 0, err
    info = json.loads(out)
    summary = info["summary"]
    return {
        "kernels": info["rows"]["kernels"],
        "kernel_sum_us": summary["device_time"]["kernel_sum_us"],
        "files": info["files"],
    }


def _kernels(capsys: pytest.CaptureFixture[str], path: Path) -> list[dict[str, object]]:
    code, out, err = _cli(capsys, "kernels", "--format", "json", str(path))
    assert code == 0, err
    rows: list[dict[str, object]] = json.loads(out)
    return rows


def _copy(src: Path, dst: Path) -> Path:
    """One file, into a new folder if need be; a WAL-mode database goes without its -wal/-shm
    (as such exports are usually shipped)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return dst


def _edit_db(path: Path, script: str) -> Path:
    """Run `script` on a database and fold the WAL back in, leaving the file alone."""
    con = sqlite3.connect(path)
    con.executescript(script)
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


@pytest.fixture(scope="module")
def real_db(real_traces: Path) -> Path:
    return real_traces / "msprof_db_2023" / "msprof_0.db"


@pytest.fixture(scope="module")
def real_trace(real_traces: Path) -> Path:
    return real_traces / "torch_timeline_3670" / TRACE


@pytest.fixture(scope="module")
def decoy_db(real_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real database with 5 of its 11 compute tasks: a valid export with other numbers."""
    p = _copy(real_db, tmp_path_factory.mktemp("decoy") / DB)
    return _edit_db(p, "DELETE FROM COMPUTE_TASK_INFO WHERE globalTaskId >= 5;")


@pytest.fixture(scope="module")
def decoy_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A hand-built timeline with 3 kernels of 7 µs on the Ascend Hardware lane."""
    events: list[dict[str, object]] = [
        {"ph": "M", "name": "process_name", "pid": 9, "tid": 0, "args": {"name": "Ascend Hardware"}}
    ]
    events += [
        {"ph": "X", "name": f"decoy{i}", "pid": 9, "tid": 1, "ts": f"{1000 + 20 * i}.000", "dur": 7,
         "args": {"Task Type": "AI_CORE", "Stream Id": 1}}
        for i in range(3)
    ]
    p = tmp_path_factory.mktemp("decoy") / TRACE
    p.write_text(json.dumps(events))
    return p


def _plant(parent: Path, odd: str, real: Path, decoy: Path, decoys: list[str], name: str) -> Path:
    target = parent / odd / name
    _copy(real, target)
    for rel in decoys:
        _copy(decoy, parent / rel)
    return target


# ---- SQLite: the path is percent-encoded, opened read-only and immutable ---------------------------


@pytest.mark.parametrize("odd", list(SQLITE_DECOYS), ids=repr)
def test_sqlite_odd_directory_reads_its_own_database(
    odd: str, tmp_path: Path, real_db: Path, decoy_db: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative file created by mistake would show up under tmp_path
    target = _plant(tmp_path, odd, real_db, decoy_db, SQLITE_DECOYS[odd], DB)
    before = _files(tmp_path)
    got = _info(capsys, target)
    # msprof_db_2023: 11 compute tasks, sum of (endNs - startNs) = 663.872 us, and its one collective
    # (an HCCL row from COMMUNICATION_TASK_INFO, #26) (the decoy has 5 compute tasks)
    assert got["kernels"] == 12 and got["kernel_sum_us"] == pytest.approx(663.872)
    assert got["files"] == [str(target)]
    rows = _kernels(capsys, target)
    ids = [r["global_task_id"] for r in rows]  # the collective's row has no task id
    assert sorted(int(str(i)) for i in ids if i is not None) == list(range(11)) and ids.count(None) == 1
    # no file created anywhere: not 'a' (the URI's truncated path), not the -wal / -shm SQLite
    # writes beside a WAL-mode database opened with mode=ro alone
    assert _files(tmp_path) == before


def test_sqlite_decoy_really_differs(decoy_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The odd-name tests can fail: reading a decoy gives other numbers."""
    assert _info(capsys, decoy_db)["kernels"] == 6  # 5 compute tasks and the one collective


def test_sqlite_pending_wal_is_read(
    tmp_path: Path, real_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A -wal with committed rows not yet in the database file: read them (no immutable open)."""
    src = _copy(real_db, tmp_path / "writer" / DB)
    writer = sqlite3.connect(src)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("DELETE FROM COMPUTE_TASK_INFO WHERE globalTaskId >= 6")
    writer.commit()
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    for suffix in ("", "-wal"):  # copied while the writer still has the WAL open
        shutil.copyfile(f"{src}{suffix}", shipped / f"{DB}{suffix}")
    writer.close()
    assert (shipped / f"{DB}-wal").stat().st_size > 0
    assert _info(capsys, shipped / DB)["kernels"] == 7  # 6 compute tasks and the one collective
    link = tmp_path / "elsewhere" / "link.db"  # the journal is beside the file, not the link
    link.parent.mkdir()
    link.symlink_to(shipped / DB)
    assert _info(capsys, link)["kernels"] == 7


# ---- timeline: DuckDB reads the open file through /dev/fd, never a pattern ------------------------


@pytest.mark.parametrize("odd", list(TIMELINE_DECOYS), ids=repr)
def test_timeline_odd_directory_reads_its_own_file(
    odd: str, tmp_path: Path, real_trace: Path, decoy_trace: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    target = _plant(tmp_path, odd, real_trace, decoy_trace, TIMELINE_DECOYS[odd], TRACE)
    before = _files(tmp_path)
    got = _info(capsys, target)
    # torch_timeline_3670: 276 hardware tasks, 274 of them kernels (2 MEMCPY_ASYNC), 1788.251 us
    assert got["kernels"] == 274 and got["kernel_sum_us"] == pytest.approx(1788.251)
    assert got["files"] == [str(target)]
    assert not any(str(r["name"]).startswith("decoy") for r in _kernels(capsys, target))
    assert _files(tmp_path) == before


def test_timeline_decoy_really_differs(decoy_trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got = _info(capsys, decoy_trace)
    assert got["kernels"] == 3 and got["kernel_sum_us"] == pytest.approx(21.0)


def test_timeline_odd_directory_as_the_argument(
    tmp_path: Path, real_trace: Path, decoy_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The folder itself (detection, then the torch_npu prefetch) reads the same file."""
    target = _plant(tmp_path, "run[1]", real_trace, decoy_trace, [f"run1/{TRACE}"], TRACE)
    got = _info(capsys, target.parent)
    assert got["kernels"] == 274 and got["files"] == [str(target)]


def test_timeline_relative_tilde_path(
    tmp_path: Path, real_trace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`~/trace_view.json` relative to the working directory is the folder named '~', not $HOME."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (home / TRACE).write_text("[]")  # would be 'no events' if read
    monkeypatch.chdir(tmp_path)
    _copy(real_trace, tmp_path / "~" / TRACE)
    assert _info(capsys, Path("~") / TRACE)["kernels"] == 274


def test_timeline_name_does_not_choose_compression(tmp_path: Path, real_trace: Path) -> None:
    """A plain JSON file named .gz is read as what it holds: DuckDB would try to gunzip it."""
    p = _copy(real_trace, tmp_path / "trace_view.json.gz")
    assert len(read_timeline(p).kernels) == 276


@pytest.mark.parametrize("odd", ["run[1]", "x*", "a?b", "it's"])
def test_timeline_without_dev_fd_escapes_the_glob(
    odd: str, tmp_path: Path, real_trace: Path, decoy_trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where /dev/fd does not exist the path goes to DuckDB with `*`, `?`, `[` bracketed."""
    monkeypatch.setattr(native, "FD_DIR", tmp_path / "no-dev-fd")
    target = _plant(tmp_path, odd, real_trace, decoy_trace, TIMELINE_DECOYS[odd], TRACE)
    tl = read_timeline(target)
    assert len(tl.kernels) == 276 and not tl.kernels["name"].str.startswith("decoy").any()


def test_timeline_without_dev_fd_rejects_a_non_utf8_name(
    tmp_path: Path, decoy_trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(native, "FD_DIR", tmp_path / "no-dev-fd")
    target = _copy(decoy_trace, tmp_path / NOT_UTF8 / TRACE)
    with pytest.raises(ProfileFormatError, match="not valid UTF-8"):
        read_timeline(target)


def test_timeline_error_names_the_file_not_the_descriptor(tmp_path: Path) -> None:
    """A DuckDB error message mentions /dev/fd/N; the one line names the user's file."""
    p = tmp_path / "run[1]" / TRACE
    p.parent.mkdir()
    p.write_bytes(b'[{"ph": "X", "ts": "abc"}]')
    with pytest.raises(ProfileFormatError) as info:
        read_timeline(p)
    assert info.value.path == str(p) and info.value.where == "event 1"
    assert "/dev/fd" not in str(info.value)


# ---- CSV tables: Arrow reads the open file, whatever its name ----------------------------------------


@pytest.fixture(scope="module")
def real_csv(real_traces: Path) -> Path:
    return real_traces / "fa_pipeutil_29" / "kernel_details.csv"


def _assert_fa_pipeutil_29(rows: list[dict[str, object]]) -> None:
    # fa_pipeutil_29: 29 kernels; the MatMulV2 row of 185.504 us has aic_total_cycles 5295467
    assert len(rows) == 29
    matmul = [r for r in rows if r["duration_us"] == pytest.approx(185.504)]
    assert [r["aic_total_cycles"] for r in matmul] == [5295467]


@pytest.mark.parametrize("odd", [NOT_UTF8, "run[1]", "pct%41"], ids=repr)
def test_csv_odd_directory_reads_its_own_table(
    odd: str, tmp_path: Path, real_csv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pyarrow refused a path that is not UTF-8 (UnicodeEncodeError, a traceback)."""
    target = _copy(real_csv, tmp_path / odd / "kernel_details.csv")
    _assert_fa_pipeutil_29(_kernels(capsys, target))
    _assert_fa_pipeutil_29(_kernels(capsys, target.parent))  # the folder: detection, then the reader


def test_csv_streamed_output_from_a_non_utf8_name(
    tmp_path: Path, real_csv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kernels --format csv -o` streams the file (tilescope.io.kernel_stream), mapped by its handle."""
    target = _copy(real_csv, tmp_path / NOT_UTF8 / "kernel_details.csv")
    out = tmp_path / "out.csv"
    code, _, err = _cli(capsys, "kernels", "--format", "csv", "-o", str(out), str(target))
    assert code == 0, err
    assert len(out.read_text().splitlines()) == 30  # header + 29 kernels


@pytest.mark.parametrize("name", ["kernel_details.csv.gz", "op_summary.bz2", "k.csv.zst"])
def test_csv_name_does_not_choose_compression(
    name: str, tmp_path: Path, real_csv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plain CSV is recognised by its header; pyarrow then tried to inflate it by its name."""
    _assert_fa_pipeutil_29(_kernels(capsys, _copy(real_csv, tmp_path / name)))


# ---- SQLite: broken databases are one line, exit 2 ------------------------------------------------


def _rebuild(table: str, columns: str) -> str:
    """SQL that rebuilds `table` with only `columns` (and without its primary key, so that an id
    column can hold text)."""
    return (
        f"CREATE TABLE tmp_copy AS SELECT {columns} FROM {table}; DROP TABLE {table}; "
        f"ALTER TABLE tmp_copy RENAME TO {table};"
    )


_ALL_TASK = "startNs, endNs, deviceId, streamId, taskId, contextId, modelId, globalTaskId"
_ALL_CTI = "name, globalTaskId, blockDim, mixBlockDim, taskType, opType"

# case -> (SQL run on a copy of the real database, text the one line must hold)
BROKEN_REAL: dict[str, tuple[str, list[str]]] = {
    "compute_task_without_globalTaskId": (
        _rebuild("COMPUTE_TASK_INFO", "name, blockDim, taskType, opType"),
        ["table COMPUTE_TASK_INFO", "missing column(s) globalTaskId"],
    ),
    "task_without_endNs": (
        _rebuild("TASK", "startNs, deviceId, globalTaskId"),
        ["table TASK", "missing column(s) endNs", "expected the columns globalTaskId, startNs, endNs"],
    ),
    "string_ids_without_value": (
        "ALTER TABLE STRING_IDS RENAME COLUMN value TO v;",
        ["table STRING_IDS", "missing column(s) value"],
    ),
    "text_ids_in_both_tables": (
        _rebuild("COMPUTE_TASK_INFO", _ALL_CTI) + _rebuild("TASK", _ALL_TASK)
        + "UPDATE COMPUTE_TASK_INFO SET globalTaskId = 'g' || globalTaskId;"
        + "UPDATE TASK SET globalTaskId = 'g' || globalTaskId;",
        ["table COMPUTE_TASK_INFO, rowid 1", "column globalTaskId holds the text 'g0'",
         "expected an integer task id"],
    ),
    "text_id_in_task_only": (  # the join silently dropped that compute task
        _rebuild("TASK", _ALL_TASK) + "UPDATE TASK SET globalTaskId = 'x3' WHERE globalTaskId = 3;",
        ["table TASK, rowid 4", "column globalTaskId holds the text 'x3'", "expected an integer task id"],
    ),
    "text_start": (
        "UPDATE TASK SET startNs = 'abc' WHERE globalTaskId = 2;",
        ["table TASK, rowid 2", "column startNs holds the text 'abc'", "expected an integer time in ns"],
    ),
    "text_end_with_newline": (  # SQLite would subtract it as 0: a duration of 55 years
        "UPDATE TASK SET endNs = 'late' || char(10) || 'r' WHERE globalTaskId = 4;",
        ["table TASK, rowid 4", "column endNs holds the text 'late\\nr'", "expected an integer time in ns"],
    ),
    "null_start": (
        "UPDATE TASK SET startNs = NULL WHERE globalTaskId = 1;",
        ["table TASK, rowid 1", "column startNs holds NULL", "expected an integer time in ns"],
    ),
    "real_end": (
        "UPDATE TASK SET endNs = 1.5 WHERE globalTaskId = 7;",
        ["table TASK, rowid 7", "column endNs holds the real number 1.5"],
    ),
    "text_block_dim": (
        "UPDATE COMPUTE_TASK_INFO SET blockDim = 'lots' WHERE globalTaskId = 5;",
        ["table COMPUTE_TASK_INFO, rowid 5", "column blockDim holds the text 'lots'",
         "expected an integer or NULL"],
    ),
    "blob_stream_id": (
        "UPDATE TASK SET streamId = X'0102' WHERE globalTaskId = 6;",
        ["table TASK, rowid 6", "column streamId holds a 2-byte blob"],
    ),
    "pmu_text_task_id": (
        "CREATE TABLE TASK_PMU_INFO (globalTaskId, name INTEGER, value NUMERIC);"  # no affinity
        "INSERT INTO TASK_PMU_INFO VALUES (0, 1, 5), ('t1', 1, 5);",
        ["table TASK_PMU_INFO, rowid 2", "column globalTaskId holds the text 't1'"],
    ),
    "pmu_without_value": (
        "CREATE TABLE TASK_PMU_INFO (globalTaskId INTEGER, name INTEGER);",
        ["table TASK_PMU_INFO", "missing column(s) value"],
    ),
}


def _broken_copy(real_db: Path, tmp_path: Path, name: str, script: str) -> Path:
    return _edit_db(_copy(real_db, tmp_path / "pct%41" / f"{name}.db"), script)


def _assert_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], path: Path, expected: list[str]
) -> str:
    out_file = path.parent / "out.json"
    code, out, err = _cli(capsys, "kernels", "--format", "json", "-o", str(out_file), str(path))
    assert code == 2, err
    assert err.startswith(f"tilescope: error: {path}: ") and err.count("\n") == 1, err
    for text in expected:
        assert text in err, err
    assert out == "" and not out_file.exists()
    return err


@pytest.mark.parametrize("case", list(BROKEN_REAL))
def test_broken_real_database_is_one_line_exit_2(
    case: str, tmp_path: Path, real_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script, expected = BROKEN_REAL[case]
    _assert_one_line_exit_2(capsys, _broken_copy(real_db, tmp_path, case, script), expected)


def _root_page(db: Path, table: str) -> int:
    con = sqlite3.connect(db)
    try:
        page: int = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    finally:
        con.close()
    return page


@pytest.mark.parametrize("table", ["COMPUTE_TASK_INFO", "TASK", "NPU_INFO"])
def test_corrupted_page_is_one_line_exit_2(
    table: str, tmp_path: Path, real_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Garbage over the first page of a table we read. NPU_INFO is optional (the device model):
    damage there is still damage, not 'no model recorded'."""
    p = _copy(real_db, tmp_path / "a#b" / "corrupt.db")
    page_size = int.from_bytes(p.read_bytes()[16:18], "big")
    data = bytearray(p.read_bytes())
    start = (_root_page(p, table) - 1) * page_size
    data[start : start + page_size] = b"\xa5" * page_size
    p.write_bytes(bytes(data))
    _assert_one_line_exit_2(capsys, p, ["unreadable SQLite database", "malformed"])


def test_truncated_database_is_one_line_exit_2(
    tmp_path: Path, real_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "100%" / "cut.db"
    p.parent.mkdir()
    p.write_bytes(real_db.read_bytes()[:40000])
    _assert_one_line_exit_2(capsys, p, ["unreadable SQLite database"])


def _tiny(path: Path, task_table: str, task_rows: str) -> Path:
    """A hand-built export: one compute task (id 1) unless the rows say otherwise."""
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);"
        "INSERT INTO STRING_IDS VALUES (1, 'MatMul');"
        "CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER);"
        "INSERT INTO COMPUTE_TASK_INFO VALUES (1, 1);"
        f"{task_table}; {task_rows};"
    )
    con.commit()
    con.close()
    return path


def test_tiny_database_reads(tmp_path: Path) -> None:
    """The hand-built schema below is a valid export when its values are right."""
    p = _tiny(tmp_path / "ok.db", "CREATE TABLE TASK (globalTaskId INTEGER, startNs INTEGER, endNs INTEGER)",
              "INSERT INTO TASK VALUES (1, 1000, 3500)")
    k = read_sqlite(p).kernels
    assert k["name"].tolist() == ["MatMul"] and k["duration_us"].tolist() == [2.5]


def test_tiny_without_rowid_table_names_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "it's"
    folder.mkdir()
    p = _tiny(
        folder / "norowid.db",
        "CREATE TABLE TASK (globalTaskId INTEGER PRIMARY KEY, startNs, endNs) WITHOUT ROWID",
        "INSERT INTO TASK VALUES (1, '12:00', 3500)",
    )
    err = _assert_one_line_exit_2(capsys, p, ["table TASK: column startNs holds the text '12:00'"])
    assert ", rowid" not in err


def test_tiny_text_numbers_in_text_columns_are_rejected(tmp_path: Path) -> None:
    """Digits stored as TEXT ('1000' in a column declared TEXT) are still not integers."""
    p = _tiny(tmp_path / "t.db", "CREATE TABLE TASK (globalTaskId INTEGER, startNs TEXT, endNs TEXT)",
              "INSERT INTO TASK VALUES (1, '1000', '3500')")
    with pytest.raises(ProfileFormatError) as info:
        read_sqlite(p)
    assert info.value.where == "table TASK, rowid 1"
    assert info.value.expected == "column startNs holds the text '1000'; expected an integer time in ns"


# ---- msprof-analyze: the directory it is given does not depend on its working directory ---------


_FAKE_ADVISOR = (
    "import json, os, sys; d = sys.argv[sys.argv.index('-d') + 1];"
    "ok = os.path.isfile(os.path.join(d, 'ASCEND_PROFILER_OUTPUT', 'kernel_details.csv'));"
    "print(json.dumps({'status': 'found' if ok else 'missing ' + d}))"
)


@pytest.mark.parametrize("name", ["prof", "-prof"])
def test_advisor_gets_an_absolute_directory(
    name: str, tmp_path: Path, real_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The advisor runs in a temp working directory: a relative `-d prof` pointed into it, and a
    name starting with '-' read as an option."""
    out = tmp_path / name / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    shutil.copyfile(real_traces / "fa_pipeutil_29" / "kernel_details.csv", out / "kernel_details.csv")
    monkeypatch.setattr(msa, "find_advisor", lambda: [sys.executable, "-c", _FAKE_ADVISOR])
    monkeypatch.chdir(tmp_path)
    result = msa.run_advisor(Path(name))
    assert result["status"] == "found", result


@pytest.mark.parametrize("fmt", ["json", "md", "html", "sarif", "text"])
def test_reports_of_a_non_utf8_directory_name_it_escaped(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    """A directory named with byte 0xff reached the report as a lone surrogate: msgspec (JSON) and
    the file writer (HTML, Markdown, SARIF) raised UnicodeEncodeError after the analysis was done."""
    import os

    from tilescope.cli import main

    bad = os.path.join(os.fsencode(tmp_path), b"bad\xff")
    os.mkdir(bad)
    src = real_traces / "fa_pipeutil_29" / "kernel_details.csv"
    with open(os.path.join(bad, b"kernel_details.csv"), "wb") as fh:
        fh.write(src.read_bytes())
    out = tmp_path / f"report.{fmt}"
    code = main(["analyze", os.fsdecode(bad), "-f", fmt, "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    text = out.read_bytes().decode("utf-8")  # valid UTF-8
    # the byte as the visible escape \xff (JSON escapes the backslash; SARIF URIs percent-encode it)
    assert any(shown in text for shown in ("bad\\xff", "bad\\\\xff", "bad%5Cxff")), text[:300]
