"""`tilescope info` / `tilescope kernels` end to end, including every bad input of issue #2."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from support import REPO_ROOT, cli_process

REPO = REPO_ROOT


def run(*args: str) -> subprocess.CompletedProcess[str]:
    # wide enough that rich does not fold kernel names
    return cli_process(*args, env={**os.environ, "COLUMNS": "200"})


def test_kernels_json_exact(real_traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "k.json"
    r = run(
        "kernels",
        str(real_traces / "fa_pipeutil_29" / "kernel_details.csv"),
        "--format",
        "json",
        "-o",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())
    assert len(rows) == 29
    first = rows[0]
    assert first["start_ns"] == 1736413971558972912 and isinstance(first["start_ns"], int)
    assert first["aiv_vec_ratio"] is None and first["model_id"] is None
    assert first["input_shape_list"] == [[81920, 4096], [8192, 512]]
    assert first["aic_total_cycles"] == 5295467


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_kernels_stdout_csv_limit_and_parquet(real_traces: Path, tmp_path: Path) -> None:
    src = str(real_traces / "gpt_step_arith_591" / "kernel_details.csv")
    r = run("kernels", src, "--format", "csv", "--limit", "3")
    assert r.returncode == 0 and len(r.stdout.strip().splitlines()) == 4
    assert r.stderr == ""
    out = tmp_path / "k.parquet"
    assert run("kernels", src, "--format", "parquet", "-o", str(out)).returncode == 0
    t = pq.read_table(out)
    assert t.num_rows == 591
    assert t.column("start_ns").to_pylist()[0] == 1699529622790614800
    counts = t.column("core_type").value_counts().to_pylist()
    assert {c["values"]: c["counts"] for c in counts}["AI_VECTOR_CORE"] == 520
    r = run("kernels", src, "--format", "parquet")
    assert r.returncode == 2 and "needs -o" in r.stderr


def test_kernels_table(real_traces: Path) -> None:
    r = run("kernels", str(real_traces / "fa_pipeutil_29" / "kernel_details.csv"), "--limit", "3")
    assert r.returncode == 0 and "MatMulV2" in r.stdout and "showing 3 of 29" in r.stdout


@pytest.mark.parametrize(
    ("trace", "limit", "chip"), [("fa_pipeutil_29", "5", "910B3"), ("gpt_step_arith_591", "1000", "910B4")]
)
@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_streamed_table_view_prints_what_the_dataframe_path_prints(
    real_traces: Path, trace: str, limit: str, chip: str
) -> None:
    """The single-CSV view renders its head on the stream's writer thread, before the count is
    known; the text must be the DataFrame path's (here: the same rows, title and count line)."""
    import io

    from tilescope.commands import kernels as cmd
    from tilescope.io.load import load_profile
    from tilescope.text import terminal

    src = real_traces / trace / "kernel_details.csv"
    r = run("kernels", str(src), "--limit", limit, "--chip", chip)
    assert r.returncode == 0, r.stderr
    kernels = load_profile(src, chip=chip).kernels
    out = io.StringIO()
    console = terminal.console(None, file=out)  # a pipe: no wrapping
    cmd.print_title(console, f"{src} — kernel_csv, chip {chip}")
    console.print(cmd.kernel_table(kernels.head(int(limit))), crop=False)
    cmd._print_count(console, min(len(kernels), int(limit)), len(kernels))
    assert r.stdout == out.getvalue()
    assert ("showing 5 of 29 kernels" in r.stdout) == (trace == "fa_pipeutil_29")


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_info_json(real_traces: Path) -> None:
    r = run("info", str(real_traces / "fa_pipeutil_29" / "kernel_details.csv"), "--format", "json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["format"] == "kernel_csv" and info["producer"] == "torch_npu"
    assert info["metric_groups"] == ["PipeUtilization"]
    assert info["rows"]["kernels"] == 29
    assert info["chip"]["aic_count"] == 20 and info["chip"]["clock_mhz"] == 1800
    assert any("inferred" in w for w in info["warnings"])
    r = run("info", str(real_traces / "fa_pipeutil_29" / "kernel_details.csv"), "--chip", "910B3")
    assert r.returncode == 0 and "910B3" in r.stdout


def test_info_header_only_is_zero_kernels(tmp_path: Path) -> None:
    p = tmp_path / "kernel_details.csv"
    p.write_text("Name,Type,Accelerator Core,Start Time(us),Duration(us)\n")
    r = run("info", str(p), "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rows"]["kernels"] == 0


def _sqlite_without_tables(p: Path) -> None:
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE HOST_INFO (hostUid TEXT)")
    con.commit()
    con.close()


HEADER = "Name,Type,Accelerator Core,Start Time(us),Duration(us)\n"
BAD_INPUTS = {
    "empty": ("kernel_details.csv", b"", "empty file"),
    "truncated_row": (
        "kernel_details.csv",
        (HEADER + "a,b,AI_CORE,1.0,2.0\nc,d,AI_CORE\n").encode(),
        "row 2",
    ),
    "missing_column": (
        "kernel_details.csv",
        b"Name,Type,Accelerator Core,Duration(us)\na,b,AI_CORE,1\n",
        "missing required column",
    ),
    "binary": ("kernel_details.csv", bytes(range(256)) * 4, "binary"),
    "cut_json": (
        "trace_view.json",
        b'[{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": "1.0", "dur": 1}, {"ph',
        "byte",
    ),
    "db_without_tables": ("msprof_1.db", None, "missing table"),
    "not_a_db": ("msprof_2.db", b"garbage" * 100, "not an SQLite database"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_one_line_exit_2_no_output(tmp_path: Path, case: str) -> None:
    name, content, expected = BAD_INPUTS[case]
    p = tmp_path / name
    if content is None:
        _sqlite_without_tables(p)
    else:
        p.write_bytes(content)
    out = tmp_path / "out" / "k.json"
    r = run("kernels", str(p), "--format", "json", "-o", str(out))
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("tilescope: error: ") and name in lines[0] and expected in lines[0]
    assert "Traceback" not in r.stderr
    assert not out.exists() and not any(out.parent.glob("*")) if out.parent.exists() else True


def test_unreadable_file(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root can read files without permission bits")
    p = tmp_path / "kernel_details.csv"
    p.write_text(HEADER)
    p.chmod(0)
    r = run("kernels", str(p), "--format", "json")
    assert r.returncode == 2 and "permission denied" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_directory_without_profile(tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("nothing here")
    r = run("info", str(tmp_path))
    assert r.returncode == 2 and "no Ascend profile found" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_debug_shows_traceback(tmp_path: Path) -> None:
    p = tmp_path / "kernel_details.csv"
    p.write_bytes(b"")
    r = run("--debug", "kernels", str(p), "--format", "json")
    assert r.returncode != 0 and "Traceback" in r.stderr


def test_info_counts_blocks_as_analyze_does(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #28 item 12: `info` said "blocks 24" (the per-block table's rows, one per block and
    sub-core) where `analyze` says 8 blocks."""
    from support import cli

    bundle = REPO / "sample_traces" / "tilelang_fa_bundle"
    code, out, _ = cli(capsys, "analyze", str(bundle), "-f", "json")
    assert code == 0
    (wasted,) = [f for f in json.loads(out)["findings"] if f["code"] == "TS401"]
    blocks = int(wasted["evidence"]["measured"]["block_dim"])
    code, out, _ = cli(capsys, "info", str(bundle), "-f", "json")
    rows = json.loads(out)["rows"]
    assert rows["block_ids"] == blocks == 8 and rows["blocks"] == 24
    code, out, _ = cli(capsys, "info", str(bundle))
    assert f"per-block table 24 ({blocks} blocks, a row per sub-core)" in out and "blocks 24" not in out
