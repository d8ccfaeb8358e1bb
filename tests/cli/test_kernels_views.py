"""#28 item 7: `tilescope kernels` — a rank column for several ranks, operator statistics
(`--group-by`) as msprof's op_statistic.csv gives them, `--sort`, shares in one unit (per cent) on
the terminal, the columns kept at 80 columns, and `--limit 0`."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from rich.cells import cell_len

from support import SAMPLES, cli

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "real"
TWO_RANKS = REAL / "torch_2rank_pipeutil_text"  # torch_npu, op_statistic.csv per rank
GPT = REAL / "gpt_step_arith_591"
needs_real = pytest.mark.skipif(not TWO_RANKS.is_dir(), reason="needs ../shared/traces/real")


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:
    code, out, err = cli(capsys, "kernels", *args, "-f", "json")
    assert code == 0, err
    return list(json.loads(out))


@needs_real
@pytest.mark.slow
def test_group_by_op_type_is_msprofs_op_statistic(capsys: pytest.CaptureFixture[str]) -> None:
    """Every row of each rank's op_statistic.csv (written by torch_npu beside the kernel table) is
    a group here: the same count, total, min, max and mean, and share = its Ratio(%)."""
    groups = _json(capsys, str(TWO_RANKS), "--group-by", "op_type")
    assert {g["rank"] for g in groups} == {0, 1}
    for rank in (0, 1):
        path = TWO_RANKS / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv"
        with open(path, encoding="utf-8") as fh:
            expected = list(csv.DictReader(fh))
        ours = {g["op_type"]: g for g in groups if g["rank"] == rank}
        for row in expected:
            g = ours[row["OP Type"]]
            assert g["count"] == int(row["Count"])
            assert g["total_us"] == pytest.approx(float(row["Total Time(us)"]), abs=0.01)
            assert g["min_us"] == pytest.approx(float(row["Min Time(us)"]), abs=0.001)
            assert g["max_us"] == pytest.approx(float(row["Max Time(us)"]), abs=0.001)
            assert g["mean_us"] == pytest.approx(float(row["Avg Time(us)"]), abs=0.001)
            assert g["share"] * 100 == pytest.approx(float(row["Ratio(%)"]), abs=0.01)
        # communication is not in op_statistic.csv: listed here, with no share
        comm = [g for g in ours.values() if g["op_type"].startswith("hcom_")]
        assert comm and all(g["share"] is None for g in comm)
        assert len(ours) == len(expected) + len(comm)
    # largest total first, within each rank
    totals = [g["total_us"] for g in groups if g["rank"] == 0]
    assert totals == sorted(totals, reverse=True)


def test_several_ranks_get_a_rank_column(capsys: pytest.CaptureFixture[str]) -> None:
    run = SAMPLES / "cluster_8rank"
    code, out, _ = cli(capsys, "kernels", str(run), "--width", "200", "--limit", "0")
    assert code == 0
    header = next(line for line in out.splitlines() if "name" in line)
    assert header.split("┃")[1].strip() == "rank"
    rows = [line.split("│") for line in out.splitlines() if line.startswith("│")]
    assert {int(r[1]) for r in rows} == set(range(8))
    assert len(rows) == len(_json(capsys, str(run)))  # --limit 0: every row


def test_sort_orders_by_a_column_and_keeps_ranks_apart(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _json(capsys, str(SAMPLES / "cluster_8rank"), "--sort", "duration_us")
    keys = [(r["rank"], -r["duration_us"]) for r in rows]
    assert keys == sorted(keys)
    rows = _json(capsys, str(SAMPLES / "cluster_8rank"), "--sort", "name:desc")
    names = [r["name"] for r in rows if r["rank"] == 0]
    assert names == sorted(names, reverse=True)
    code, _, err = cli(capsys, "kernels", str(SAMPLES / "cluster_8rank"), "--sort", "nope")
    assert code == 2 and err.startswith("tilescope: error: --sort nope: no column 'nope'")
    assert len(err.strip().splitlines()) == 1


@needs_real
def test_shares_print_in_per_cent_and_files_keep_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    """Vector share 0.079 of ZerosLike46's launch (gpt_step_arith_591) prints as 7.9 under "Vector %";
    SoL, already per cent in the data, prints with the same one place."""
    first = _json(capsys, str(GPT), "--limit", "1")[0]
    assert first["name"] == "ZerosLike46" and 0 < first["vector_share"] < 1
    code, out, _ = cli(capsys, "kernels", str(GPT), "--limit", "1", "--width", "200")
    assert code == 0
    header = next(line for line in out.splitlines() if "name" in line)
    assert "Vector %" in header and "SoL %" in header and "share " not in header
    row = next(line for line in out.splitlines() if "ZerosLike46" in line)
    cells = [c.strip() for c in row.split("│")]
    assert f"{first['vector_share'] * 100:.1f}" in cells and f"{first['sol_pct']:.1f}" in cells


@needs_real
def test_at_80_columns_sol_and_core_type_stay_before_the_shares(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "kernels", str(REAL / "fa_pipeutil_29"), "--width", "80")
    assert code == 0
    lines = out.splitlines()
    assert all(cell_len(line) <= 80 for line in lines)
    head = " ".join(lines[1:5])
    assert "SoL" in head and "core" in head
    caption = " ".join(line for line in lines if line.startswith(("not shown", "(--width", "csv")))
    assert "Cube %" in caption or "Cube" not in head  # the shares went first


def test_limit_0_lists_everything_under_a_title_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    run = SAMPLES / "cluster_8rank"
    code, out, _ = cli(capsys, "kernels", str(run), "--limit", "0", "--width", "80")
    lines = out.splitlines()
    assert code == 0 and lines[0] == f"{run} — torch_npu, chip 910B2"  # not folded to 8 cells
    assert "showing" not in out
    rows = _json(capsys, str(run), "--limit", "0")
    assert len(rows) == 112  # 8 ranks x 14 launches
