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

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tilescope.commands import kernels as kernels_cmd
from tilescope.io import kernel_stream
from tilescope.io import load as load_mod
from tilescope.io.load import kernel_csv_profile, load_profile
from tilescope.text import terminal

from support import REPO_ROOT, cli

REPO = REPO_ROOT
UNFUSED_PT = REPO / "sample_traces" / "attention_unfused" / "localhost_12345_20261130000000000_ascend_pt"




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
    console = terminal.console(None, file=io.StringIO())  # not a terminal: no wrapping
    with console.capture() as captured:
        title = f"{path} — {pr.source.format}, chip {pr.chip.name}"
        kernels_cmd.print_title(console, title)
        console.print(kernels_cmd.kernel_table(pr.kernels.head(rows)), crop=False)
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
    code, out, err = cli(capsys, "kernels", str(folder), "--limit", "7")
    assert (code, err) == (0, "")
    assert out == expected_table
    for fmt in ("parquet", "csv"):
        got = tmp_path / f"got.{fmt}"
        code, _, err = cli(capsys, "kernels", str(folder), "--format", fmt, "-o", str(got))
        assert (code, err) == (0, "")
    got_pq, expected_pq = tmp_path / "got.parquet", tmp_path / "expected.parquet"
    assert pq.read_table(got_pq).equals(pq.read_table(expected_pq))
    assert pq.read_metadata(got_pq).metadata == pq.read_metadata(expected_pq).metadata
    assert (tmp_path / "got.csv").read_bytes() == (tmp_path / "expected.csv").read_bytes()
    code, out, err = cli(capsys, "kernels", str(folder), "--format", "json")
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
        code, out, err = cli(capsys, "kernels", str(path), "--format", "json")
        assert (code, err) == (0, "")
        outs[label] = out
        pq_out = tmp_path / f"{label}.pq"
        code, _, err = cli(capsys, "kernels", str(path), "--format", "parquet", "-o", str(pq_out))
        assert (code, err) == (0, "")
    assert outs["dir"] == outs["file"] and len(json.loads(outs["dir"])) == 8
    assert pq.read_table(tmp_path / "dir.pq").equals(pq.read_table(tmp_path / "file.pq"))


def test_the_device_facts_beside_the_file_choose_the_chip(real_traces: Path, tmp_path: Path) -> None:
    # the timeline's AI Core Freq (1650 MHz) is the only clock this folder records, but the
    # kernels' cycles give 1800 MHz: the counter is the last source (#26: `info`, which reads the
    # timeline first, and `analyze`, which reads it beside the rules, must choose alike), so the
    # streamed table, the DataFrame path and the file alone all use 1800 MHz
    folder = _folders(real_traces, tmp_path)["torch_npu whose clock is the timeline's counter"]
    source = kernel_csv_profile(folder)
    assert source is not None and source.format == "torch_npu"
    assert source.device.timeline_max_frequency_mhz == 1650.0
    streamed = load_mod.load_kernels_arrow(source.path, device=source.device).to_pydict()
    alone = load_mod.load_kernels_arrow(source.path).to_pydict()
    frame = kernels_cmd.kernels_arrow(load_profile(folder).kernels).to_pydict()
    assert streamed["sol_us"] == frame["sol_us"] == alone["sol_us"]
    assert load_profile(folder).chip.clock_mhz == 1800.0


def test_a_timeline_is_read_only_when_it_gives_the_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # info.json records the clock: a broken trace_view.json beside the table is not read at all
    folder = tmp_path / "x_ascend_pt"
    shutil.copytree(UNFUSED_PT, folder)
    tv = folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    tv.write_text('[{"ph":"X", "name": "k", "pid": 1, "tid"', encoding="utf-8")
    code, out, err = cli(capsys, "kernels", str(folder), "--format", "json", "--limit", "1")
    assert (code, err) == (0, "") and len(json.loads(out)) == 1
    # without info.json the timeline is the clock's only source: its error is the command's
    for info in folder.glob("PROF_*/device_*/info.json.*"):
        info.unlink()
    code, out, err = cli(capsys, "kernels", str(folder), "--format", "json")
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
        code, out, err = cli(capsys, "kernels", str(folder), *args)
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


# ---- analyze / info memory: the same numbers from fewer copies --------------------------------------


def _one_frame_stats(k: pd.DataFrame, names: list[str] | None = None) -> pd.DataFrame:
    """The reference: report.data.kernel_group_stats as it was, one launches × 61 frame of every
    term summed by one groupby, text columns through object copies (what the JSON report held)."""
    from tilescope.report.data import FIRST_OF_GROUP, WEIGHTED_RATIOS

    if names is not None:
        k = k[k["name"].astype("str").isin(names)]

    def num(col: str) -> pd.Series:
        return pd.to_numeric(k[col], errors="coerce").astype("float64") if col in k else pd.Series(
            np.nan, index=k.index, dtype="float64"
        )

    dur, flops, moved = num("duration_us"), num("flops"), num("bytes_moved")
    both = flops.notna() & moved.notna()
    cols = {
        "d": dur, "flops": flops, "bytes_moved": moved, "ai_f": flops.where(both), "ai_b": moved.where(both),
        "tf_d": dur.where(both & dur.notna()), "tf_f": flops.where(both & dur.notna()),
        "bw_d": dur.where(moved.notna() & dur.notna()), "bw_b": moved.where(dur.notna()),
        "sol": num("sol_us"), "sol_d": dur.where(num("sol_us").notna()),
    }
    for c in WEIGHTED_RATIOS:
        v = num(c)
        cols[f"{c}__w"] = v * dur
        cols[f"{c}__d"] = dur.where(v.notna())
    key = k["name"].astype("str")
    g = pd.DataFrame(cols, index=k.index).groupby(key, sort=False)
    sums = g.sum(min_count=1)
    quart = g["d"].quantile(np.array([0.25, 0.5, 0.75])).unstack()
    out = pd.DataFrame({
        "launches": g.size(), "median_us": quart[0.5], "p25_us": quart[0.25], "p75_us": quart[0.75],
        "min_us": g["d"].min(), "max_us": g["d"].max(), "flops": g["flops"].mean(),
        "bytes_moved": g["bytes_moved"].mean(),
        "arithmetic_intensity": sums["ai_f"] / sums["ai_b"].where(sums["ai_b"] > 0),
        "achieved_tflops": sums["tf_f"] / sums["tf_d"].where(sums["tf_d"] > 0) / 1e6,
        "achieved_gbps": sums["bw_b"] / sums["bw_d"].where(sums["bw_d"] > 0) / 1e3,
        "sol_us": sums["sol"], "sol_pct": sums["sol"] / sums["sol_d"].where(sums["sol_d"] > 0) * 100.0,
    })
    for label in ("sol_bound", "bytes_source"):  # the value most launches of the kernel have
        if label in k:
            counts = k[label].astype("object").groupby(key, sort=False).value_counts()
            out[label] = counts.groupby(level=0, sort=False).idxmax().map(lambda ix: ix[1])
    for c in WEIGHTED_RATIOS:
        out[c] = sums[f"{c}__w"] / sums[f"{c}__d"].where(sums[f"{c}__d"] > 0)
    firsts = k[list(FIRST_OF_GROUP)].astype("object").groupby(key, sort=False).first()
    out = out.join(firsts)
    out["input_shape_variants"] = k["input_shapes"].groupby(key, sort=False).nunique()
    return out


def _launches(n: int, sorted_names: bool, seed: int = 7) -> pd.DataFrame:
    """Every column kernel_group_stats reads, finite everywhere (no NaN in any summed term)."""
    from tilescope.report.data import WEIGHTED_RATIOS

    rng = np.random.default_rng(seed)
    names = np.array(["matmul", "softmax", "add"])
    idx = np.sort(rng.integers(0, 3, n)) if sorted_names else rng.integers(0, 3, n)
    k = pd.DataFrame({
        "name": pd.Series(names[idx], dtype="str"),
        "duration_us": rng.uniform(100, 200, n).round(3),
        "flops": rng.uniform(1e9, 2e9, n),
        "bytes_moved": rng.uniform(1e6, 2e6, n),
        "sol_us": rng.uniform(10, 90, n),
        "sol_bound": pd.Series(np.array(["compute", "memory"])[rng.integers(0, 2, n)], dtype="str"),
        "op_type": pd.Series(names[idx], dtype="str"),
        "core_type": pd.Series(["AI_CORE"] * n, dtype="str"),
        "input_shapes": pd.Series(np.array(['"8,16"', '"4,4"'])[rng.integers(0, 2, n)], dtype="str"),
        "input_dtypes": pd.Series(["FLOAT16"] * n, dtype="str"),
    })
    for c in WEIGHTED_RATIOS:
        k[c] = rng.uniform(0, 1, n).round(5) * (100.0 if c.endswith("_pct") else 1.0)
    return k


def _same_stats(got: pd.DataFrame, want: pd.DataFrame) -> None:
    from tilescope.report.data import FIRST_OF_GROUP

    for c in FIRST_OF_GROUP:  # the same strings; read as they are now, not as an object copy
        got[c] = got[c].astype("object")
    pd.testing.assert_frame_equal(got, want, check_exact=True)


@pytest.mark.parametrize("sorted_names", [True, False])
@pytest.mark.parametrize("nan_in", [None, "aiv_mte3_share", "bytes_moved"])
@pytest.mark.parametrize("names", [None, ["softmax", "add"]])
def test_kernel_group_stats_sums_as_one_frame_did(
    sorted_names: bool, nan_in: str | None, names: list[str] | None
) -> None:
    # pandas sums a NaN-free block of sorted groups with np.add.reduceat and any other block with
    # its Kahan loop (they differ in the last bit): one NaN in one term of the old one-frame sum put
    # every sum on the Kahan loop, and the few-at-a-time sums must follow it bit for bit
    from tilescope.report.data import kernel_group_stats

    k = _launches(4000, sorted_names)
    if nan_in is not None:
        k.loc[1234, nan_in] = np.nan
    _same_stats(kernel_group_stats(k, names), _one_frame_stats(k, names))


def test_kernel_group_stats_leaves_out_unnamed_launches_as_before() -> None:
    from tilescope.report.data import kernel_group_stats

    k = _launches(600, sorted_names=True)
    k.loc[[0, 300, 599], "name"] = np.nan  # before, inside and after the sorted runs
    got = kernel_group_stats(k)
    assert int(got["launches"].sum()) == 597
    _same_stats(got, _one_frame_stats(k))


@pytest.mark.parametrize("name", FOLDERS[:1] + FOLDERS[3:7])
def test_kernel_group_stats_on_real_and_sample_profiles(real_traces: Path, tmp_path: Path, name: str) -> None:
    from tilescope.report.data import kernel_group_stats

    k = load_profile(_folders(real_traces, tmp_path)[name]).kernels
    tops = list(k["name"].dropna().astype("str").unique()[:10])
    _same_stats(kernel_group_stats(k), _one_frame_stats(k))
    _same_stats(kernel_group_stats(k, tops), _one_frame_stats(k, tops))


def test_float_columns_are_read_in_place_and_stay_read_only() -> None:
    # the derived metrics, summary, report and rules read float64 columns without a copy, and
    # cannot write through what they read
    from tilescope.metrics import KernelColumns, float_column
    from tilescope.rules._columns import num

    k = load_profile(UNFUSED_PT).kernels
    column = k["duration_us"].to_numpy()
    for got in (float_column(k, "duration_us"), num(k, "duration_us")):
        assert np.shares_memory(got.to_numpy(), column)
    read = KernelColumns(k).floats("duration_us")
    assert np.shares_memory(read, column) and not read.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        float_column(k, "duration_us").to_numpy()[0] = -1.0
    assert k["duration_us"].iloc[0] == column[0] > 0
    # other dtypes are converted as before: nullable ints to float, text to NaN, absent to NaN
    assert float_column(k, "block_dim").dtype == np.float64
    assert float_column(k, "name").isna().all() and float_column(k, "no_such_column").isna().all()


def test_rule_text_read_once_per_value_keeps_every_name(capsys: pytest.CaptureFixture[str]) -> None:
    # TS404 now looks up only the names of the gaps it lists; its message and evidence must still
    # name the kernel the longest stall came before (the sample plants one)
    code, out, _ = cli(capsys, "analyze", str(UNFUSED_PT.parent), "--format", "json")
    assert code == 0
    (ts404,) = [f for f in json.loads(out)["findings"] if f["code"] == "TS404"]
    largest = ts404["evidence"]["largest_gaps"]
    assert largest and all(g["before"] for g in largest)
    assert f"before {largest[0]['before']} (" in ts404["message"]


def test_strings_shares_one_object_per_value() -> None:
    from tilescope.rules._columns import strings, text

    k = load_profile(UNFUSED_PT).kernels
    got, want = strings(text(k, "name")), text(k, "name").to_numpy()
    assert got.dtype == object and list(got) == list(want)
    assert len({id(x) for x in got}) == k["name"].nunique()  # one string object per distinct name
    with_missing = pd.Series(["a", None, "a"], dtype="str")
    assert list(map(str, strings(with_missing))) == ["a", "nan", "a"]  # as to_numpy() gives them



@pytest.mark.parametrize("categorical", [True, False])
def test_text_codes_equal_text_is_equal_code(categorical: bool) -> None:
    from tilescope.rules._columns import (
        core_type_codes,
        core_types,
        op_type_codes,
        op_types,
        text,
        text_codes,
    )

    df = pd.DataFrame(
        {
            # "" as a category and a missing value are both "": one code
            "input_shapes": ["4,4", "", None, "4,4", "8"],
            "op_type": ["Add", None, "", "Add", "Mul"],
            "name": ["add_1", "cast_2", "k3", None, "mul_5"],
            # two categories, one upper-cased label
            "core_type": ["ai_vector_core", "AI_VECTOR_CORE", None, "MIX_AIV", "AI_CORE"],
        }
    )
    if categorical:
        df = df.astype({c: "category" for c in df.columns})
    cases = [
        (text_codes(df, "input_shapes"), text(df, "input_shapes")),
        (text_codes(df, "missing"), text(df, "missing")),
        (op_type_codes(df), op_types(df)),
        (core_type_codes(df), core_types(df)),
    ]
    for (codes, labels), want in cases:
        assert list(labels[codes]) == list(want)
        assert len(set(labels)) == len(labels)  # distinct labels: equal text <=> equal code


# ---- info: the counts and summary from the columns the summary reads, streamed -----------------------


def _info_without_streaming(path: Path, chip: str | None) -> list[dict[str, Any]]:
    """What `info` printed before: every profile loaded whole, then described."""
    from tilescope.commands.info import profile_info
    from tilescope.io.load import load_profiles

    return [profile_info(pr) for pr in load_profiles(path, chip=chip)]


INFO_CASES = [
    ("fa_pipeutil_29", None),  # a kernel CSV: the chip inferred from the data, with its notes
    ("gpt_step_arith_591", "910B4"),
    ("kernel_details_na_8", None),
    ("triton_matmul_bd1024_opsum", None),
    ("gpt3_2rank_memoryl0/test_rank_1", None),
]


@pytest.mark.parametrize(("name", "chip"), INFO_CASES)
def test_info_streams_the_kernel_table_and_says_what_it_said(
    real_traces: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    chip: str | None,
) -> None:
    from tilescope.io import kernel_csv

    path = real_traces / name
    (expected,) = _info_without_streaming(path, chip)
    streamed: list[Path] = []
    real_stream = kernel_stream.stream_kernel_csv

    def counting(p: Path, *args: Any, **kwargs: Any) -> Any:
        streamed.append(p)
        return real_stream(p, *args, **kwargs)

    def no_whole_read(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("the kernel table was read whole")

    monkeypatch.setattr(kernel_stream, "stream_kernel_csv", counting)
    monkeypatch.setattr(kernel_csv, "read_kernel_table", no_whole_read)
    code, out, err = cli(capsys, "info", str(path), "--format", "json", *(["--chip", chip] if chip else []))
    assert (code, err) == (0, "")
    assert json.loads(out) == json.loads(json.dumps(expected, ensure_ascii=False))
    assert len(streamed) == 1 and streamed[0].suffix == ".csv"


def test_info_on_a_sample_folder_with_a_timeline(capsys: pytest.CaptureFixture[str]) -> None:
    expected = _info_without_streaming(UNFUSED_PT.parent, None)
    code, out, err = cli(capsys, "info", str(UNFUSED_PT.parent), "--format", "json")
    assert (code, err) == (0, "")
    got = json.loads(out)
    assert got == json.loads(json.dumps(expected[0], ensure_ascii=False))
    assert got["rows"]["kernels"] == 290 and got["rows"]["timeline_kernels"] > 0


def test_info_with_a_bad_value_names_it_as_before(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the stream gives up on the group; the whole-file read names the file and the row
    folder = tmp_path / "z_ascend_pt"
    shutil.copytree(UNFUSED_PT, folder)
    kd = folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = kd.read_text(encoding="utf-8").splitlines(keepends=True)
    cells = lines[200].split(",")
    cells[lines[0].split(",").index("Duration(us)")] = "fast"
    lines[200] = ",".join(cells)
    kd.write_text("".join(lines), encoding="utf-8")
    code, out, err = cli(capsys, "info", str(folder), "--format", "json")
    assert code == 2 and out == ""
    assert err == (
        f"tilescope: error: {kd}: row 200 (line 201): "
        "column 'Duration(us)': expected a number, found 'fast'\n"
    )


def test_summary_reads_only_its_listed_columns(real_traces: Path) -> None:
    # SUMMARY_COLUMNS is what `info` keeps: the summary of a table cut to them is the whole one's
    from tilescope.summary import SUMMARY_COLUMNS, summarize

    rank_1 = real_traces / "gpt3_2rank_memoryl0" / "test_rank_1"
    for path in (UNFUSED_PT, real_traces / "gpt_step_arith_591", rank_1):
        pr = load_profile(path)
        lean = pr.with_kernels(pr.kernels[[c for c in pr.kernels.columns if c in SUMMARY_COLUMNS]])
        assert summarize(lean) == summarize(pr)
    # the sample exercises every part: units with PMU shares, speed of light, top kernels
    full = summarize(load_profile(UNFUSED_PT))
    assert full["units"]["cube"]["busy_us"] > 0 and full["speed_of_light"]["sol_us"] > 0
    assert len(full["top_kernels"]) == 10


def _links_by_strings(df: pd.DataFrame, order: pd.DataFrame, vec: np.ndarray) -> np.ndarray:
    """TS101's links as they were found before: per-row strings, split and exploded."""
    from tilescope.rules._columns import op_types, strings, text
    from tilescope.rules._shapes import tensor_elems

    rows = order["_row"].to_numpy()
    prev_ok = np.zeros(len(rows), dtype=bool)
    prev_ok[1:] = order["_stream"].to_numpy()[1:] == order["_stream"].to_numpy()[:-1]
    sig = strings(op_types(df) + "|" + text(df, "input_shapes"))[rows]
    prev_ok[1:] &= sig[1:] != sig[:-1]
    cand = np.flatnonzero(prev_ok & vec[rows] & np.roll(vec[rows], 1))
    if len(cand) == 0:
        return np.zeros(len(rows), dtype=bool)
    outs = strings(text(df, "output_shapes"))[rows[cand - 1]]
    ins = strings(text(df, "input_shapes"))[rows[cand]]
    o = pd.DataFrame({"i": cand, "t": outs}).assign(t=lambda d: d["t"].str.split(";")).explode("t")
    n = pd.DataFrame({"i": cand, "t": ins}).assign(t=lambda d: d["t"].str.split(";")).explode("t")
    o["e"], n["e"] = tensor_elems(o["t"].fillna("")).to_numpy(), tensor_elems(n["t"].fillna("")).to_numpy()
    o, n = o[o["e"] > 1], n[n["e"] > 1]
    hit = o.merge(n, on=["i", "e"])[["i", "e"]].drop_duplicates("i")
    link = np.zeros(len(rows), dtype=bool)
    link[hit["i"].to_numpy(dtype="int64")] = True
    return link


@pytest.mark.parametrize("categorical", [True, False])
def test_ts101_links_by_codes_as_by_strings(categorical: bool) -> None:
    from tilescope.rules._columns import op_type_codes, text_codes
    from tilescope.rules._intervals import stream_ordered
    from tilescope.rules.ts101_unfused_elementwise_chain import _links

    rng = np.random.default_rng(13)
    n = 4000
    shapes = ["4,4", "16", "2,8;4,4", "1", "", "4,4;1", "8,2", "x,4", "16;16", "1,1;2", None]
    df = pd.DataFrame(
        {
            "name": rng.choice(np.asarray(["a", "b", "c", "d"], dtype=object), n),
            "op_type": rng.choice(np.asarray(["Add", "Mul", "", None], dtype=object), n),
            "input_shapes": rng.choice(np.asarray(shapes, dtype=object), n),
            "output_shapes": rng.choice(np.asarray(shapes, dtype=object), n),
            "stream_id": rng.integers(0, 3, n),
            "start_ns": rng.integers(0, 10**6, n),
        }
    )
    if categorical:
        df = df.astype({c: "category" for c in ("name", "op_type", "input_shapes", "output_shapes")})
    order = stream_ordered(df)
    vec = rng.random(n) < 0.8
    ins, outs = text_codes(df, "input_shapes"), text_codes(df, "output_shapes")
    got = _links(order, vec, op_type_codes(df)[0], ins, outs)
    want = _links_by_strings(df, order, vec)
    assert want.sum() > 100 and (got == want).all()
