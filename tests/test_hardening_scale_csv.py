"""Large kernel tables (#13, item 8): every path to one kernel table takes the streaming reader, and
the memory work on `analyze` / `info` changes no output.

`tilescope kernels DIR` on a `*_ascend_pt`, `PROF_*` or plain folder whose kernels are one CSV must
stream that CSV (a counting hook on `stream_kernel_csv`, and `load_profiles` never called), and
print exactly what the DataFrame path (`load_profile(DIR).kernels`) gives, including the chip chosen
from the device facts beside the file (info.json, OpBasicInfo, the timeline's AI Core Freq).
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from analyzer.cli import main
from analyzer.commands import kernels as kernels_cmd
from analyzer.io import kernel_stream
from analyzer.io import load as load_mod
from analyzer.io.load import kernel_csv_profile, load_profile

REPO = Path(__file__).resolve().parent.parent
UNFUSED_PT = REPO / "sample_traces" / "attention_unfused" / "localhost_12345_20261130000000000_ascend_pt"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


class _Calls:
    """Counts the streamed files; fails the test when the DataFrame loader is used instead."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.streamed: list[Path] = []
        real = kernel_stream.stream_kernel_csv

        def counting(path: Path, *args: Any, **kwargs: Any) -> Any:
            self.streamed.append(path)
            return real(path, *args, **kwargs)

        def no_dataframe(*_args: Any, **_kwargs: Any) -> Any:
            raise AssertionError("load_profiles called: the folder did not take the Arrow path")

        monkeypatch.setattr(kernel_stream, "stream_kernel_csv", counting)
        monkeypatch.setattr(load_mod, "load_profiles", no_dataframe)


def _expected_machine(path: Path, fmt: str, out: Path | None, limit: int | None = None) -> None:
    """What the DataFrame path writes for `path` (today's output for a folder)."""
    df = load_profile(path).kernels
    kernels_cmd.write_kernels(kernels_cmd.kernels_arrow(df if limit is None else df.head(limit)), fmt, out)


def _expected_table(path: Path, rows: int) -> str:
    pr = load_profile(path)
    console = Console(file=io.StringIO())
    with console.capture() as captured:
        title = f"{path} — {pr.source.format}, chip {pr.chip.name}"
        console.print(kernels_cmd.kernel_table(pr.kernels.head(rows), title))
        kernels_cmd._print_count(console, min(len(pr.kernels), rows), len(pr.kernels))
    return str(captured.get())


def _folders(real_traces: Path, tmp_path: Path) -> dict[str, Path]:
    """Profiles whose kernels are one CSV, each with different things beside it."""
    no_info = tmp_path / "noinfo_ascend_pt"  # no info.json: the clock is the timeline's counter
    shutil.copytree(UNFUSED_PT / "ASCEND_PROFILER_OUTPUT", no_info / "ASCEND_PROFILER_OUTPUT")
    tv = no_info / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    tv.write_text('[{"name":"AI Core Freq","ph":"C","pid":1,"ts":"1","args":{"MHz":1650}}]', encoding="utf-8")
    return {
        "torch_npu with info.json and trace_view.json": UNFUSED_PT,
        "its ASCEND_PROFILER_OUTPUT": UNFUSED_PT / "ASCEND_PROFILER_OUTPUT",
        "a parent with manifest.json": UNFUSED_PT.parent,
        "torch_npu without timeline (real)": real_traces / "kernel_details_na_8",
        "torch_npu rank dir with profiler_info (real)": real_traces / "gpt3_2rank_memoryl0" / "test_rank_1",
        "msprof op_summary (real)": real_traces / "triton_matmul_bd1024_opsum",
        "folder: op_summary + OpBasicInfo + timeline (real)": real_traces / "tilelang_sigmoid_app",
        "torch_npu whose clock is the timeline's counter": no_info,
    }


FOLDERS = [
    "torch_npu with info.json and trace_view.json",
    "its ASCEND_PROFILER_OUTPUT",
    "a parent with manifest.json",
    "torch_npu without timeline (real)",
    "torch_npu rank dir with profiler_info (real)",
    "msprof op_summary (real)",
    "folder: op_summary + OpBasicInfo + timeline (real)",
    "torch_npu whose clock is the timeline's counter",
]


@pytest.mark.parametrize("name", FOLDERS)
def test_kernels_dir_streams_and_prints_what_the_dataframe_path_prints(
    real_traces: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    folder = _folders(real_traces, tmp_path)[name]
    expected_table = _expected_table(folder, 7)
    for fmt in ("parquet", "csv"):
        _expected_machine(folder, fmt, tmp_path / f"expected.{fmt}")
    _expected_machine(folder, "json", None)
    expected_json = capsys.readouterr().out

    calls = _Calls(monkeypatch)
    code, out, err = _run(capsys, "kernels", str(folder), "--limit", "7")
    assert (code, err) == (0, "")
    assert out == expected_table
    for fmt in ("parquet", "csv"):
        got = tmp_path / f"got.{fmt}"
        code, _, err = _run(capsys, "kernels", str(folder), "--format", fmt, "-o", str(got))
        assert (code, err) == (0, "")
    got_pq, expected_pq = tmp_path / "got.parquet", tmp_path / "expected.parquet"
    assert pq.read_table(got_pq).equals(pq.read_table(expected_pq))
    assert pq.read_metadata(got_pq).metadata == pq.read_metadata(expected_pq).metadata
    assert (tmp_path / "got.csv").read_bytes() == (tmp_path / "expected.csv").read_bytes()
    code, out, err = _run(capsys, "kernels", str(folder), "--format", "json")
    assert (code, err) == (0, "") and out == expected_json
    source = kernel_csv_profile(folder)
    assert source is not None
    assert calls.streamed == [source.path] * 3  # the table view, parquet and csv: each streamed


def test_kernels_file_and_its_folder_give_the_same_table(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # nothing beside the file records a device fact: the folder's table is the file's, byte for byte
    folder = real_traces / "kernel_details_na_8"
    file = folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    outs = {}
    for label, path in (("dir", folder), ("file", file)):
        code, out, err = _run(capsys, "kernels", str(path), "--format", "json")
        assert (code, err) == (0, "")
        outs[label] = out
        pq_out = tmp_path / f"{label}.pq"
        code, _, err = _run(capsys, "kernels", str(path), "--format", "parquet", "-o", str(pq_out))
        assert (code, err) == (0, "")
    assert outs["dir"] == outs["file"] and len(json.loads(outs["dir"])) == 8
    assert pq.read_table(tmp_path / "dir.pq").equals(pq.read_table(tmp_path / "file.pq"))


def test_the_device_facts_beside_the_file_choose_the_chip(real_traces: Path, tmp_path: Path) -> None:
    # the timeline's AI Core Freq (1650 MHz) is the only clock this folder records: the streamed
    # table uses it, as the DataFrame path does, and the file alone (1800 MHz inferred) does not
    folder = _folders(real_traces, tmp_path)["torch_npu whose clock is the timeline's counter"]
    source = kernel_csv_profile(folder)
    assert source is not None and source.format == "torch_npu"
    assert source.device.timeline_max_frequency_mhz == 1650.0
    streamed = load_mod.load_kernels_arrow(source.path, device=source.device).to_pydict()
    alone = load_mod.load_kernels_arrow(source.path).to_pydict()
    frame = kernels_cmd.kernels_arrow(load_profile(folder).kernels).to_pydict()
    assert streamed["sol_us"] == frame["sol_us"]
    assert streamed["sol_us"] != alone["sol_us"]
    assert load_profile(folder).chip.clock_mhz == 1650.0


def test_a_timeline_is_read_only_when_it_gives_the_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # info.json records the clock: a broken trace_view.json beside the table is not read at all
    folder = tmp_path / "x_ascend_pt"
    shutil.copytree(UNFUSED_PT, folder)
    tv = folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    tv.write_text('[{"ph":"X", "name": "k", "pid": 1, "tid"', encoding="utf-8")
    code, out, err = _run(capsys, "kernels", str(folder), "--format", "json", "--limit", "1")
    assert (code, err) == (0, "") and len(json.loads(out)) == 1
    # without info.json the timeline is the clock's only source: its error is the command's
    for info in folder.glob("PROF_*/device_*/info.json.*"):
        info.unlink()
    code, out, err = _run(capsys, "kernels", str(folder), "--format", "json")
    assert code == 2 and out == ""
    assert err.startswith(f"tilescope: error: {tv}: ") and len(err.strip().splitlines()) == 1


def test_a_bad_value_in_a_folders_table_names_the_file_and_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the stream gives up on the bad group; the whole-file read names the row, as for the file
    folder = tmp_path / "y_ascend_pt"
    shutil.copytree(UNFUSED_PT, folder)
    kd = folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = kd.read_text(encoding="utf-8").splitlines(keepends=True)
    header = lines[0].split(",")
    cells = lines[5].split(",")
    cells[header.index("Duration(us)")] = "-3"
    lines[5] = ",".join(cells)
    kd.write_text("".join(lines), encoding="utf-8")
    for args in ([], ["--format", "json"], ["--format", "parquet", "-o", str(tmp_path / "k.pq")]):
        code, out, err = _run(capsys, "kernels", str(folder), *args)
        assert code == 2 and out == ""
        assert err == (
            f"tilescope: error: {kd}: row 5 (line 6): column 'Duration(us)': "
            "expected a duration in µs, 0 .. 8.64e10 (one day), found -3\n"
        )
    assert not (tmp_path / "k.pq").exists()


@pytest.mark.parametrize(
    "where",
    ["sample_traces/tilelang_fa_msprof_op", "sample_traces/tilelang_fa_bundle", "sample_traces"],
)
def test_what_is_not_one_kernel_csv_is_loaded_whole(where: str) -> None:
    # msprof op directories, bundles and parents of several profiles keep the DataFrame path
    assert kernel_csv_profile(REPO / where) is None


def test_op_summary_slices_are_not_one_file(tmp_path: Path, real_traces: Path) -> None:
    out = tmp_path / "PROF_1" / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    real = real_traces / "triton_matmul_bd1024_opsum" / "mindstudio_profiler_output"
    src = next(real.glob("op_summary_*.csv"))
    shutil.copy(src, out / "op_summary_1_1.csv")
    one = kernel_csv_profile(tmp_path / "PROF_1")
    assert one is not None and one.path == out / "op_summary_1_1.csv" and one.format == "msprof"
    shutil.copy(src, out / "op_summary_1_2.csv")
    assert kernel_csv_profile(tmp_path / "PROF_1") is None
