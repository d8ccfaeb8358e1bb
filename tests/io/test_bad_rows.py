"""Issue #26 item 11: an unreadable row of a kernel table is skipped with one note that counts such
rows and names the first (file, row, what was expected); `--strict` refuses the file (exit 2);
the count is in every report format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilescope.commands.analyze import renderer
from tilescope.errors import ProfileFormatError
from tilescope.io.bad_rows import STRICT_ENV
from tilescope.io.load import load_profiles
from tilescope.report.data import validate_report

from support import cli

# the real broken row (README: rank 0's row 16 has a missing Duration field)
FIRST = (
    "test_rank_0/ASCEND_PROFILER_OUTPUT/kernel_details.csv: row 16 (line 17): "
    "expected 32 fields as in the header, found 31"
)


def _gpt3(real: Path) -> Path:
    d = real / "gpt3_2rank_memoryl0"
    if not d.is_dir():
        pytest.skip("gpt3_2rank_memoryl0 not available")
    return d


def _csv(path: Path, rows: list[str]) -> Path:
    header = "Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim"
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def test_the_real_short_row_is_skipped_and_both_ranks_load(real_traces: Path) -> None:
    d = _gpt3(real_traces)
    profiles = load_profiles(d)
    assert [pr.rank for pr in profiles] == [0, 1] and not profiles.failures
    rank0 = profiles[0]
    # 21 data rows in the file, the short one skipped
    lines = (d / "test_rank_0/ASCEND_PROFILER_OUTPUT/kernel_details.csv").read_text().splitlines()
    assert len(lines) - 1 == 21 and len(rank0.kernels) == 20
    assert rank0.rows_skipped is not None and rank0.rows_skipped["count"] == 1
    assert rank0.rows_skipped["first"] == f"{d}/{FIRST}"
    # one note, first among the profile's notes, saying how to refuse instead
    assert rank0.warnings[0] == f"1 unreadable row skipped (first: {d}/{FIRST}); --strict refuses the file"
    assert profiles[1].rows_skipped is None


def test_strict_refuses_the_file_as_before(real_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _gpt3(real_traces)
    monkeypatch.setenv(STRICT_ENV, "1")
    profiles = load_profiles(d)
    assert [pr.rank for pr in profiles] == [1]
    (failure,) = profiles.failures
    assert isinstance(failure.error, ProfileFormatError) and failure.error.where == "row 16 (line 17)"


@pytest.mark.parametrize("command", ["analyze", "info", "kernels"])
def test_cli_exit_codes(real_traces: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    rank0 = _gpt3(real_traces) / "test_rank_0"
    code, _out, err = cli(capsys, command, str(rank0))
    assert code == 0, err
    code, out, err = cli(capsys, command, "--strict", str(rank0))
    assert code == 2 and out == ""
    assert err == f"tilescope: error: {rank0.parent}/{FIRST} (truncated row?)\n"


def test_kernels_file_output_says_it_on_stderr(
    real_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rank0 = _gpt3(real_traces) / "test_rank_0"
    code, _out, err = cli(capsys, "kernels", str(rank0), "-f", "csv", "-o", str(tmp_path / "k.csv"))
    assert code == 0
    assert (
        err == f"tilescope: warning: 1 unreadable row skipped (first: {rank0.parent}/{FIRST}); "
        "--strict refuses the file\n"
    )
    assert len((tmp_path / "k.csv").read_text().splitlines()) == 1 + 20


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_every_report_format_says_it(real_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _gpt3(real_traces)
    code, text, err = cli(capsys, "analyze", str(d), "-f", "json", "--no-cache", "-j", "1")
    assert code == 0, err  # no rank left out
    report = json.loads(text)
    out = {fmt: renderer(fmt)(report) for fmt in ("text", "md", "html")}
    validate_report(report)
    (rank0, rank1) = report["profiles"]
    assert rank0["rows_skipped"]["count"] == 1 and rank0["rows_skipped"]["first"] == f"{d}/{FIRST}"
    assert rank1["rows_skipped"] is None
    assert [r["kernels_loaded"] for r in report["cluster"]["ranks"]] == [True, True]
    assert "note: 1 unreadable row skipped" in out["text"]
    assert "> **Warning:** rank 0\\: 1 unreadable row skipped" in out["md"]
    assert '<p class="warning">rank 0: 1 unreadable row skipped' in out["html"]


def test_synthetic_counts_rows_and_names_the_first(tmp_path: Path) -> None:
    rows = [f"k{i},MatMul,AI_CORE,{1000 + i}.5,2.0,0,8" for i in range(6)]
    rows[2] = "k2,MatMul,AI_CORE,1002.5,2.0"  # short
    rows[4] = "k4,MatMul,AI_CORE,1004.5,2.0,0,8,extra"  # long
    (profile,) = load_profiles(_csv(tmp_path / "kernel_details.csv", rows))
    assert len(profile.kernels) == 4 and list(profile.kernels["name"]) == ["k0", "k1", "k3", "k5"]
    skipped = profile.rows_skipped
    assert skipped is not None and skipped["count"] == 2
    expected = "kernel_details.csv: row 3 (line 4): expected 7 fields as in the header, found 5"
    assert skipped["first"].endswith(expected)


def test_synthetic_mostly_unreadable_is_refused(tmp_path: Path) -> None:
    rows = ["a,MatMul,AI_CORE,1000.5,2.0", "b,MatMul,AI_CORE,1001.5,2.0", "c,MatMul,AI_CORE,1002.5,2.0,0,8"]
    with pytest.raises(
        ProfileFormatError,
        match=r"row 1 \(line 2\): expected 7 fields .* found 5 "
        r"\(2 of 3 rows unreadable\)",
    ):
        load_profiles(_csv(tmp_path / "kernel_details.csv", rows))
