"""The pipelined `tilescope kernels` file output must equal the whole-file path, value for value.

Small blocks and group sizes force many row groups on small files, so every seam of the pipeline
(group boundaries cut in the file's bytes, per-group dictionaries, groups parsed on different
threads) is crossed. Every case where streaming must give up is
checked to fall back and still produce the whole-file result, or its exact error.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tilescope.commands.kernels import stream_kernels
from tilescope.io import kernel_stream
from tilescope.io.kernel_sink import TableSink, large_strings
from tilescope.io.kernel_stream import StreamFallback, stream_kernel_csv
from tilescope.io.load import load_kernels_arrow, load_profile
from tilescope.io.tables import decode_dictionary

from support import REPO_ROOT

REPO = REPO_ROOT
HEADER = (
    "Name,Type,Accelerator Core,Start Time(us),Duration(us),Block Dim,aicore_time(us),aic_total_cycles,"
    "cube_utilization(%),Input Shapes,Input Data Types,Output Shapes,Output Data Types\n"
)


def _plain(table: pa.Table) -> pa.Table:
    """Text as plain `string` (Parquet does not keep dictionary or large_string without its schema)."""
    cols = {n: decode_dictionary(table.column(n)) for n in table.column_names}
    return pa.table(
        {n: c.cast(pa.string()) if pa.types.is_large_string(c.type) else c for n, c in cols.items()}
    )


def _whole(path: Path, chip: str | None = None) -> pa.Table:
    table = load_kernels_arrow(path, chip=chip)
    return _plain(large_strings(table)).replace_schema_metadata(None)


def rows_bytes(path: Path, rows: int) -> int:
    """A group size in bytes that cuts `path` after its first `rows` data rows (and about every
    `rows` rows after that, for rows of similar length)."""
    lines = path.read_bytes().split(b"\n")
    return sum(len(line) + 1 for line in lines[1 : rows + 1]) - 1


def _streamed(path: Path, tmp: Path, group_rows: int, chip: str | None = None) -> tuple[pa.Table, int]:
    out = tmp / "streamed.parquet"
    sink = TableSink("parquet", out)
    stream_kernel_csv(path, chip, sink, large_strings, group_bytes=rows_bytes(path, group_rows))
    sink.close()
    table = _plain(pq.read_table(out))
    return table.replace_schema_metadata(None), pq.ParquetFile(out).metadata.num_row_groups


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_stream, "BLOCK_SIZE", 4096)  # many small batches -> many groups


# gpt_step_arith_591 with --chip 910B4 (not its device): the chip is given, so every group uses it
@pytest.mark.parametrize(("trace", "chip"), [("fa_pipeutil_29", None), ("gpt_step_arith_591", "910B4")])
@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_stream_equals_whole_file_on_real_traces(
    real_traces: Path, tmp_path: Path, small_blocks: None, trace: str, chip: str | None
) -> None:
    src = real_traces / trace / "kernel_details.csv"
    streamed, groups = _streamed(src, tmp_path, group_rows=7, chip=chip)
    assert groups > 3  # several groups, so the seams are exercised
    whole = _whole(src, chip=chip)
    assert streamed.schema.equals(whole.schema)
    assert streamed.to_pylist() == whole.to_pylist()


def test_wrong_chip_guess_on_a_real_trace_falls_back(
    real_traces: Path, tmp_path: Path, small_blocks: None
) -> None:
    """The first group decides the chip the stream converts with; when all rows decide otherwise,
    streaming gives up and the whole-file path runs. The real trace with the cycle counts of its
    first 30 rows blanked: the first group carries no evidence (chip defaults: 910B2, 1800 MHz),
    the rest give 1850 MHz and 24 cores (910B1)."""
    import csv

    rows = list(csv.reader((real_traces / "gpt_step_arith_591" / "kernel_details.csv").open(newline="")))
    header = rows[0]
    for row in rows[1:31]:
        for col in ("aic_total_cycles", "aiv_total_cycles"):
            row[header.index(col)] = "0"
    src = tmp_path / "kernel_details.csv"
    with src.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    with pytest.raises(StreamFallback, match="chip"):
        _streamed(src, tmp_path, group_rows=7)
    out = tmp_path / "k.parquet"
    stream_kernels(src, "parquet", out, None)
    assert _plain(pq.read_table(out)).replace_schema_metadata(None).to_pylist() == _whole(src).to_pylist()


def test_stream_equals_whole_file_on_generated_rows(
    tmp_path: Path, small_blocks: None, sample_generator: ModuleType
) -> None:
    src = tmp_path / "kernel_details.csv"
    sample_generator.write_large_kernel_details(src, 5000, chunk_rows=1500)
    streamed, groups = _streamed(src, tmp_path, group_rows=600)
    assert groups >= 8
    whole = _whole(src)
    assert streamed.num_rows == 5000
    assert streamed.to_pylist() == whole.to_pylist()
    # the exact ns start times and the data-inferred chip survive the pipeline
    assert streamed.column("start_ns").type == pa.int64()
    assert (
        streamed.column("cube_utilization_calc_pct").to_pylist()
        == whole.column("cube_utilization_calc_pct").to_pylist()
    )


@pytest.mark.parametrize("source", ["csv", "directory"])
def test_parquet_reads_back_into_the_canonical_dataframe(tmp_path: Path, source: str) -> None:
    """Both ways of writing Parquet (the streamed CSV path, and a profile directory's DataFrame)
    carry the pandas metadata: read_parquet gives back the canonical dtypes (nullable Int64, str)."""
    from tilescope.commands.kernels import kernels_arrow, write_kernels

    sample = REPO / "sample_traces" / "attention_unfused"
    src = next(sample.glob("*_ascend_pt")) / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    out = tmp_path / "k.parquet"
    if source == "csv":
        stream_kernels(src, "parquet", out, None)
        ref = load_profile(src).kernels.reset_index(drop=True)
    else:
        ref = load_profile(sample).kernels.reset_index(drop=True)
        write_kernels(kernels_arrow(ref), "parquet", out)
    back = pd.read_parquet(out)
    assert str(back["step_id"].dtype) == "Int64" and str(back["start_ns"].dtype) == "Int64"
    lists = [c for c in ref.columns if c.endswith("_list")]
    pd.testing.assert_frame_equal(back.drop(columns=lists), ref.drop(columns=lists))
    shapes = [None if v is None else [list(d) for d in v] for v in back["input_shape_list"]]
    want = [None if v is pd.NA else v for v in ref["input_shape_list"].tolist()]
    assert shapes == want and any(shapes)


def _rows(n: int, *, mhz: float = 1800.0, bad_at: int | None = None, note_at: int | None = None) -> str:
    lines = []
    for i in range(n):
        dur = 10.0 + i % 5
        cycles = int(mhz * 8 * dur * 0.9)  # 8 blocks at 90 % of the kernel time
        util = cycles / (1800.0 * 24 * dur) * 100
        duration = "fast" if i == bad_at else f"{dur}"
        lines.append(
            f'k{i % 3},MatMulV2,AI_CORE,"{1000 + i * 20}.125\t",{duration},8,{dur * 0.9:.4f},{cycles},'
            f'{util:.3f},"""64,64;64,64""",FLOAT16;FLOAT16,"""64,64""",FLOAT16\n'
        )
    return "".join(lines)


def test_unparseable_value_falls_back_and_names_the_file_row(tmp_path: Path, small_blocks: None) -> None:
    src = tmp_path / "kernel_details.csv"
    src.write_text(HEADER + _rows(300, bad_at=249))
    with pytest.raises(StreamFallback):
        stream_kernel_csv(src, None, lambda t: None, large_strings, group_bytes=rows_bytes(src, 50))
    out = tmp_path / "k.parquet"
    env = {**os.environ, "COLUMNS": "200"}
    r = subprocess.run(
        [sys.executable, "-m", "tilescope.cli", "kernels", str(src), "--format", "parquet", "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )
    # the whole-file path names the row in the file, not in a group, and nothing is left behind
    assert r.returncode == 2 and "row 250" in r.stderr and "'fast'" in r.stderr, r.stderr
    assert not out.exists() and not list(tmp_path.glob(".k.parquet.*"))


def test_chip_guess_from_first_group_is_checked_against_all_rows(tmp_path: Path, small_blocks: None) -> None:
    src = tmp_path / "kernel_details.csv"
    # the first 40 rows' cycles give 1650 MHz (the first group guesses a 910B4), the other 200 give
    # 1800: all rows vote 1800
    src.write_text(HEADER + _rows(40, mhz=1650.0) + _rows(200))
    with pytest.raises(StreamFallback, match="chip"):
        stream_kernel_csv(src, None, lambda t: None, large_strings, group_bytes=rows_bytes(src, 40))
    # the command redoes it the whole-file way: same values as load_kernels_arrow
    out = tmp_path / "k.parquet"
    stream_kernels(src, "parquet", out, None)
    assert _plain(pq.read_table(out)).replace_schema_metadata(None).to_pylist() == _whole(src).to_pylist()
    # with --chip nothing is inferred, so nothing needs checking
    streamed, _ = _streamed(src, tmp_path, group_rows=40, chip="910B2")
    assert streamed.to_pylist() == _whole(src, chip="910B2").to_pylist()


def test_column_type_changing_between_groups_falls_back(tmp_path: Path, small_blocks: None) -> None:
    src = tmp_path / "kernel_details.csv"
    body = _rows(120).splitlines(keepends=True)
    # an unknown column: numbers in the first rows, text later -> float64 in one group, text in another
    lines = [HEADER.rstrip("\n") + ",Custom Note\n"]
    lines += [row.rstrip("\n") + (",1.5\n" if i < 60 else ",slow\n") for i, row in enumerate(body)]
    src.write_text("".join(lines))
    with pytest.raises(StreamFallback, match="types differ"):
        stream_kernel_csv(src, None, lambda t: None, large_strings, group_bytes=rows_bytes(src, 30))
    out = tmp_path / "k.csv"
    stream_kernels(src, "csv", out, None)
    assert pd.read_csv(out)["custom_note"].tolist()[58:62] == ["1.5", "1.5", "slow", "slow"]


def test_a_failing_sink_stops_the_pipeline(tmp_path: Path, small_blocks: None) -> None:
    src = tmp_path / "kernel_details.csv"
    src.write_text(HEADER + _rows(400))
    calls = []

    def sink(table: pa.Table) -> None:
        calls.append(table.num_rows)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        stream_kernel_csv(src, None, sink, large_strings, group_bytes=rows_bytes(src, 20))
    assert len(calls) == 2


def test_op_summary_streams_like_the_whole_file(tmp_path: Path, small_blocks: None) -> None:
    """msprof op_summary headers (Task Start Time, Block Num, MIX_AIC, unquoted TAB) take the same path."""
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        from test_io_kernel_csv import OP_SUMMARY_HEADER, OP_SUMMARY_ROW
    finally:
        sys.path.pop(0)
    src = tmp_path / "op_summary_20260606121516.csv"
    src.write_text(OP_SUMMARY_HEADER + "\n" + "\n".join([OP_SUMMARY_ROW] * 300) + "\n")
    streamed, groups = _streamed(src, tmp_path, group_rows=5, chip="910B3")
    assert groups > 3
    assert streamed.to_pylist() == _whole(src, chip="910B3").to_pylist()
    assert streamed.column("start_ns")[0].as_py() == 1780748105187895870


def test_streamed_csv_is_the_bytes_of_one_write(
    tmp_path: Path, small_blocks: None, monkeypatch: pytest.MonkeyPatch, sample_generator: ModuleType
) -> None:
    """CSV written group by group (many groups here) = one write_csv of the whole-file table."""
    import pyarrow.csv as pacsv

    from tilescope.io.kernel_sink import csv_table

    src = tmp_path / "kernel_details.csv"
    sample_generator.write_large_kernel_details(src, 3000, chunk_rows=1000)
    monkeypatch.setattr(kernel_stream, "GROUP_BYTES", rows_bytes(src, 250))
    out = tmp_path / "k.csv"
    stream_kernels(src, "csv", out, None)
    ref = tmp_path / "ref.csv"
    pacsv.write_csv(csv_table(_whole(src)), ref)
    assert out.read_bytes() == ref.read_bytes()
    assert out.read_bytes().count(b"step_id") == 1  # one header line


def test_groups_are_whole_rows_covering_the_file() -> None:
    """Byte ranges start right after the previous one, end just after a newline (the last one at the
    end of the file, newline or not), including around a row longer than the 64 KB search window."""
    long_row = b"x" * 200_000 + b"\n"
    data = b"h1,h2\n" + b"a,1\r\n" * 50 + long_row + b"b,2\n" * 30 + b"c,3"
    buf = pa.py_buffer(data)
    for size in (1, 7, 100, 1 << 16, len(data)):
        ranges = list(kernel_stream._chunks(buf, 6, size))
        assert ranges[0][0] == 6 and ranges[-1][1] == len(data)
        assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
        assert all(data[end - 1 : end] == b"\n" for _, end in ranges[:-1])
        assert all(end - start >= min(size, len(data) - start) for start, end in ranges)
    assert [r for r in kernel_stream._chunks(buf, len(data), 10)] == []


@pytest.mark.parametrize("parsers", [1, 2, 3])
def test_crlf_file_without_final_newline_streams_like_the_whole_file(
    tmp_path: Path, small_blocks: None, parsers: int
) -> None:
    src = tmp_path / "kernel_details.csv"
    text = (HEADER + _rows(200)).replace("\n", "\r\n").removesuffix("\r\n")
    src.write_bytes(text.encode())
    out = tmp_path / "k.parquet"
    sink = TableSink("parquet", out)
    rows, _ = stream_kernel_csv(
        src, None, sink, large_strings, group_bytes=rows_bytes(src, 15), parsers=parsers
    )
    sink.close()
    assert rows == 200 and pq.ParquetFile(out).metadata.num_row_groups >= 10
    assert _plain(pq.read_table(out)).replace_schema_metadata(None).to_pylist() == _whole(src).to_pylist()


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_a_quoted_newline_cut_by_a_group_boundary_never_changes_the_table(
    real_traces: Path, tmp_path: Path
) -> None:
    """Groups are cut at newlines without tracking quotes. A group holding a newline inside a quoted
    shape, wherever the cut lands (before, on or after it), falls back to the whole-file path,
    whose table is the reference: the stream never returns a different table. (Cut on the quoted
    newline itself, the first group parses without an error; tests/cli/test_hardening_output.py
    crafts a row for which the second one does too.)"""
    lines = (real_traces / "fa_pipeutil_29" / "kernel_details.csv").read_text().splitlines(keepends=True)
    at = lines[3].index('"""') + 3
    lines[3] = lines[3][:at] + "\n" + lines[3][at:]
    src = tmp_path / "kernel_details.csv"
    src.write_text("".join(lines))
    inside = src.read_bytes().index(b'"""\n') + 3 - len(lines[0])  # the quoted newline, from row 1
    for size in range(inside - 40, inside + 40):
        with pytest.raises(StreamFallback):
            stream_kernel_csv(src, "910B3", lambda t: None, lambda t: t, group_bytes=size)
