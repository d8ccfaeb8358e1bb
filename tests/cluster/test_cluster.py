"""Multi-rank runs (issue #16): the cross-rank model (analyzer/cluster.py), the TS6xx rules, and
what `analyze` reports, on the real 2-rank GPT-3 run and on generated N-rank runs."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tilescope.cli import main
from tilescope.cluster import Cluster, build_cluster, steps_from_kernels
from tilescope.config import Config
from tilescope.engine import run_cluster_rules
from tilescope.findings import Finding
from tilescope.io.cluster_files import read_communication, read_step_trace
from tilescope.io.load import load_profiles
from tilescope.ranksets import rank_set_text

from support.profiles import write_two_device_prof

# torch_npu's own step_trace_time.csv values (traces/real/README.md): Computing,
# Communication(Not Overlapped), Free in µs
TORCH_NPU_SPLIT = {
    0: (75174.57464453117, 146614.02034375005, 69909.50350390615),
    1: (75422.22, 151303.54, 67860.80000000012),
}


def _gpt3(real: Path) -> Path:
    d = real / "gpt3_2rank_memoryl0"
    if not d.is_dir():
        pytest.skip("gpt3_2rank_memoryl0 not available")
    return d


# ---- the real 2-rank run -------------------------------------------------------------------------


def test_real_step_split_is_torch_npus_own(real_traces: Path) -> None:
    d = _gpt3(real_traces)
    profiles = load_profiles(d)
    cluster = build_cluster(profiles, profiles.failures)
    # rank 0's short kernel row is skipped: both ranks load (tests/io/test_bad_rows.py)
    assert [(r.rank, r.loaded) for r in cluster.ranks] == [(0, True), (1, True)]
    for rank, (computing, comm, free) in TORCH_NPU_SPLIT.items():
        (row,) = cluster.steps[cluster.steps["rank"] == rank].to_dict("records")
        assert row["step"] == 2 and row["source"] == "step_trace_time.csv"
        split = (row["computing_us"], row["communication_not_overlapped_us"], row["free_us"])
        assert split == (computing, comm, free)
    assert set(cluster.comm_ops["rank"]) == {0, 1} and set(cluster.kernels["rank"]) == {0, 1}


def test_real_recomputed_split_vs_torch_npu(real_traces: Path) -> None:
    """Recomputed from rank 1's kernel table, the split is far below torch_npu's: the published
    kernel_details.csv is an excerpt (22 tasks of a ~295 ms step). Every recomputed part is a lower
    bound of torch_npu's, and Computing is exactly the kernels' device time."""
    d = _gpt3(real_traces)
    rank1 = load_profiles(d)[1]
    assert rank1.rank == 1
    (row,) = steps_from_kernels(rank1.kernels).to_dict("records")
    assert row["step"] == 2
    assert round(row["computing_us"], 3) == 2016.84  # = `analyze`'s device time of rank 1
    assert round(row["communication_not_overlapped_us"], 3) == 9497.76  # the 3 HCCL tasks, nothing overlaps
    assert round(row["free_us"], 3) == 4905.6
    assert round(row["step_us"], 3) == 16420.2  # first task start to last task end
    computing, comm, free = TORCH_NPU_SPLIT[1]
    assert row["computing_us"] < computing and row["free_us"] < free
    assert row["communication_not_overlapped_us"] < comm


def test_real_communication_wait_matches_torch_npus_ratio(real_traces: Path) -> None:
    d = _gpt3(real_traces)
    ops = read_communication(d / "test_rank_0" / "ASCEND_PROFILER_OUTPUT" / "communication.json")
    coll = ops[ops["kind"] == "collective"]
    assert len(coll) == 27 and len(ops[ops["kind"] == "p2p"]) == 1
    wait, transit = coll["wait_us"].sum(), coll["transit_us"].sum()
    assert round(wait, 3) == 116636.175 and round(transit, 3) == 5413.852
    assert round(wait / (wait + transit), 4) == 0.9556  # "Wait Time Ratio" of its Total Op Info


def test_real_analyze_json_has_the_rank_table(real_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _gpt3(real_traces)
    # partial under --strict: rank 0's kernel table has a short row (by default skipped)
    assert main(["analyze", str(d), "-f", "json", "--strict"]) == 2
    report = json.loads(capsys.readouterr().out)
    ranks = report["cluster"]["ranks"]
    assert [(r["rank"], r["kernels_loaded"], r["computing_us"]) for r in ranks] == [
        (0, False, 75174.575), (1, True, 75422.22)]
    assert "row 16 (line 17)" in ranks[0]["error"]
    assert report["cluster"]["slow_rank"] is None  # 0.3 % apart: no slow rank
    (ts602,) = [f for f in report["findings"] if f["code"] == "TS602"]
    assert ts602["scope"] == "cluster" and ts602["evidence"]["rank"] == 0
    assert ts602["evidence"]["wait_share_by_rank"] == {"0": 0.9556, "1": 0.9551}
    assert ts602["evidence"]["last_to_arrive_counts"] == {"0": 19, "1": 5}
    assert [s["code"] for s in report["skipped"] if s.get("scope") == "cluster"] == ["TS603"]


def test_real_analyze_text_says_not_checked_once(
    real_traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _gpt3(real_traces)
    main(["analyze", str(d), "--strict"])  # rank 0's table refused for its short row
    out = capsys.readouterr().out
    assert "0     291.70 ms   75.17 ms" in out and "kernel table unreadable" in out
    assert out.count("TS403 aicore-frequency-drop") == 1
    assert "TS603 rank-kernel-straggler: needs a readable kernel table on at least 2 ranks" in out


# ---- generated runs --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def eight_ranks(tmp_path_factory: pytest.TempPathFactory, sample_generator: ModuleType) -> Path:
    from generator.cluster import write_cluster_run

    out = tmp_path_factory.mktemp("cluster8")
    write_cluster_run(out)  # slow rank 3 (MatMulV2 x1.5), slow link 5-6 (5 of 20 GB/s)
    return out


def _cluster_findings(path: Path) -> tuple[Cluster, list[Finding]]:
    profiles = load_profiles(path)
    cluster = build_cluster(profiles, profiles.failures)
    return cluster, run_cluster_rules(cluster, profiles[0].chip, Config()).findings


def test_generated_slow_rank_and_link_are_named(eight_ranks: Path) -> None:
    _cluster, findings = _cluster_findings(eight_ranks)
    by_code = {f.code: f for f in findings}
    slow = by_code["TS601"]
    assert slow.evidence["rank"] == 3 and slow.kernels == ("MatMulV2",)
    # 3 MatMulV2 launches x 90 µs more, 2 steps; the others wait exactly that much longer
    assert slow.evidence["gap_us"] == 540.0 and slow.evidence["kernel_gap_us"] == {"MatMulV2": 540.0}
    assert slow.evidence["others_extra_wait_us"] == 540.0
    straggler = by_code["TS603"]
    assert straggler.evidence["rank"] == 3 and straggler.evidence["same_shapes"] is True
    assert straggler.evidence["slowdown"] == 1.5
    link = by_code["TS604"]
    assert (link.evidence["src_rank"], link.evidence["dst_rank"]) == (5, 6)
    assert link.evidence["bandwidth_gbps"] == 5.0 and link.evidence["transport_median_gbps"] == 20.0
    assert "TS602" not in by_code  # transfer, not wait, dominates: the slow link
    # the model's all-reduce follows all compute: nothing overlaps, every rank could hide some
    overlap = by_code["TS605"]
    assert overlap.evidence["ranks"] == list(range(8)) and overlap.evidence["rank"] == 3
    assert overlap.evidence["hideable_us_by_rank"]["3"] == 2520.0  # bounded by its Computing


def test_generated_balanced_run_is_quiet(tmp_path: Path, sample_generator: ModuleType) -> None:
    from generator.cluster import ClusterSpec, write_cluster_run

    write_cluster_run(tmp_path, ClusterSpec(ranks=4, slow_rank=None, slow_link=None))
    _cluster, findings = _cluster_findings(tmp_path)
    assert [f.code for f in findings] == ["TS605"]  # the model never overlaps: only that remains


def test_generated_recomputed_split_matches_step_trace(eight_ranks: Path) -> None:
    profiles = load_profiles(eight_ranks)
    rank3 = next(p for p in profiles if p.rank == 3)
    mine = steps_from_kernels(rank3.kernels)
    out = eight_ranks / rank3.source.path.name / "ASCEND_PROFILER_OUTPUT"
    theirs = read_step_trace(out / "step_trace_time.csv")
    assert list(mine["computing_us"].round(3)) == list(theirs["computing_us"].round(3)) == [1260.0, 1260.0]
    assert list(mine["communication_not_overlapped_us"].round(3)) == list(
        theirs["communication_not_overlapped_us"].round(3))
    # the step trace's Free also counts the time after the all-reduce until the next step
    assert (mine["free_us"] < theirs["free_us"]).all()


def test_generated_analyze_groups_findings_across_ranks(
    eight_ranks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(eight_ranks), "--width", "250"]) == 0
    out = capsys.readouterr().out
    assert "ranks: 8 (8 with a readable kernel table)" in out
    lines = out.splitlines()
    # the rank table: the 7 alike ranks share a row, the slow one has its own
    assert any(ln.startswith("3 ") and "40.00 ms  2,520.0 µs" in ln and ln.rstrip().endswith("slow rank")
               for ln in lines)
    assert any(ln.startswith("0-2, 4-7 ") and "1,980.0 µs" in ln for ln in lines)
    # one header line per group of alike ranks, not one per rank; 14 rows of 6 names each, of
    # which 2 HCCL tasks: the launches are the 12 compute ones device time is over (#26)
    assert "  ranks 0-2, 4-7: 12 launches of 4 kernels, device time 1,980.0 µs" in out
    assert "  rank 3: 12 launches of 4 kernels, device time 2,520.0 µs" in out
    assert "0-7 (8 of 8)" in out and out.count("known-fusible-pattern") == 2  # not 16
    assert out.count("TS403 aicore-frequency-drop") == 1
    assert "(all 8 ranks)" in out


def test_generated_broken_rank_keeps_its_step_trace(
    tmp_path: Path, sample_generator: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    from generator.cluster import ClusterSpec, write_cluster_run

    roots = write_cluster_run(tmp_path, ClusterSpec(ranks=4, slow_rank=2, slow_link=None))
    kd = roots[2] / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = kd.read_text().splitlines()
    # every row from row 3 on one field short: more unreadable rows than readable ones refuse
    # the table (one short row alone is skipped with a note: tests/io/test_bad_rows.py)
    lines[3:] = [line.rsplit(",", 1)[0] for line in lines[3:]]
    kd.write_text("\n".join(lines) + "\n")
    assert main(["analyze", str(tmp_path), "-f", "json"]) == 2
    captured = capsys.readouterr()
    assert "row 3 (line 4)" in captured.err and "rank 2 left out" in captured.err
    report = json.loads(captured.out)
    assert report["cluster"]["slow_rank"] == 2 and report["cluster"]["ranks_loaded"] == 3
    (ts601,) = [f for f in report["findings"] if f["code"] == "TS601"]
    assert "rank 2's kernel table is not available" in ts601["message"]


def test_broken_communication_file_is_a_note(tmp_path: Path, sample_generator: ModuleType) -> None:
    from generator.cluster import ClusterSpec, write_cluster_run

    roots = write_cluster_run(tmp_path, ClusterSpec(ranks=2, slow_rank=None, slow_link=None))
    (roots[1] / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text("{\"step1\": [")
    profiles = load_profiles(tmp_path)
    cluster = build_cluster(profiles)
    (note,) = cluster.notes
    assert note.startswith("rank 1: ") and "expected JSON" in note
    assert note.endswith("communication.json left out")
    assert set(cluster.comm_ops["rank"]) == {0} and set(cluster.steps["rank"]) == {0, 1}


def test_rank_set_text() -> None:
    assert rank_set_text([7, 0, 1, 2, 5, 4]) == "0-2, 4-5, 7"
    assert rank_set_text([3]) == "3"


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_generated_rank_table_in_md_and_html(
    eight_ranks: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(eight_ranks), "-f", fmt]) == 0
    out = capsys.readouterr().out
    if fmt == "md":
        assert "### Ranks (8 of 8 with a readable kernel table" in out
        # the times keep their units with a no-break space (GitHub's narrow columns)
        assert "| **3** | 40\\.00 ms | 2,520\\.0 µs |" in out.replace("\xa0", " ") and "slow rank |" in out
        assert "on 8 of 8 ranks: 0-7" in out and out.count("### Rules not run") == 1
        assert out.count("TS403 aicore-frequency-drop") == 1
    else:
        assert '<section id="ranks">' in out and out.count('<tr class="slow-rank">') == 1
        # 4 cross-rank + 2 grouped TS102 + 1 grouped TS206 (#26 item 6), not 4 + 24
        assert out.count('class="finding ') == 7
        assert "on 8 of 8 ranks: 0-7" in out


def test_generated_json_groups_each_rank_finding_across_ranks(
    eight_ranks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Schema 1.1: one entry per problem with the ranks it was found on and each rank's figures,
    not one per rank; a rank's own findings come back from it (as `diff` reads them)."""
    assert main(["analyze", str(eight_ranks), "-f", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    from tilescope.report.data import validate_report

    validate_report(report)
    assert report["cluster"]["slow_rank"] == 3
    assert [r["slow"] for r in report["cluster"]["ranks"]] == [r == 3 for r in range(8)]
    ts102 = [f for f in report["findings"] if f["code"] == "TS102"]
    assert len(ts102) == 2  # two chains, each on the 8 ranks, not 16 entries
    for f in ts102:
        assert f["ranks"] == list(range(8)) and f["rank_text"] == "on 8 of 8 ranks: 0-7"
        assert [m["rank"] for m in f["by_rank"]] == list(range(8))
        assert [m["input"] for m in f["by_rank"]] == list(range(8))
        # every rank's own saving (the sample's ranks carry the same chains)
        assert {m["est_saving_us"] for m in f["by_rank"]} == {f["est_saving_us"]}
    assert sorted(f["est_saving_us"] for f in ts102) == [40.0, 60.0]
    from tilescope.report.ranks import rank_findings

    five = rank_findings(report["findings"], 5)
    # and TS206 (#26 item 6): the sample's FlashAttentionScore, 40 % of each rank's device time, far
    # below its speed of light
    assert [(f["code"], f["rank"], f["input"]) for f in five] == [("TS102", 5, 5)] * 2 + [("TS206", 5, 5)]
    five = five[:2]
    assert all("by_rank" not in f and "ranks" not in f for f in five)
    for f, group in zip(five, ts102, strict=True):  # rank 0 is shown: rank 5 keeps its own words
        own = next(m for m in group["by_rank"] if m["rank"] == 5)
        assert f["message"] == own["message"] and f["est_saving_us"] == own["est_saving_us"]
        assert f["evidence"] == {} and f["evidence_rank"] == group["rank"] == 0
    assert rank_findings(report["findings"], 0)[0]["evidence"] == ts102[0]["evidence"] != {}
    # "not checked" once per rule and missing input, with the ranks it holds for
    per_rank = [s for s in report["skipped"] if s.get("scope") != "cluster"]
    keys = [(s["code"], tuple(s["needs"])) for s in per_rank]
    assert per_rank and len(keys) == len(set(keys))
    assert all(s["ranks"] == list(range(8)) for s in per_rank)
    across = {f["code"] for f in report["findings"] if f.get("scope") == "cluster"}
    assert across == {"TS601", "TS603", "TS604", "TS605"}


# ---- input: ranks from folder names, msprof runs of several devices ------------------------------


def test_msprof_run_of_two_devices_is_two_ranks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_two_device_prof(tmp_path)
    profiles = load_profiles(tmp_path)
    assert [(p.rank, len(p.kernels)) for p in profiles] == [(0, 4), (1, 4)]
    cluster = build_cluster(profiles)
    # no step_trace_time.csv: the split is recomputed from each device's kernels and HCCL task
    assert list(cluster.steps["source"]) == ["kernels", "kernels"]
    assert list(cluster.steps["computing_us"]) == [380.0, 560.0]
    assert list(cluster.steps["communication_not_overlapped_us"]) == [500.0, 500.0]
    assert list(cluster.steps["free_us"]) == [30.0, 30.0]
    assert main(["analyze", str(tmp_path), "-f", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["cluster"]["slow_rank"] == 1
    # `analyze` and `info` load only the kernel columns they read; the loader keeps device_id
    # whatever they ask for, so both still see one rank per device
    from tilescope.summary import SUMMARY_COLUMNS

    assert [p.rank for p in load_profiles(tmp_path, kernel_columns=SUMMARY_COLUMNS)] == [0, 1]


def test_rank_from_the_folder_name(tmp_path: Path, sample_generator: ModuleType) -> None:
    from generator.cluster import ClusterSpec, write_cluster_run

    roots = write_cluster_run(tmp_path / "gen", ClusterSpec(ranks=3, slow_rank=None, slow_link=None))
    for rank, root in zip((5, 6, 7), roots, strict=True):  # no profiler_info: the name says the rank
        for info in root.glob("profiler_info_*.json"):
            info.unlink()
        root.rename(tmp_path / "gen" / f"job_rank_{rank}_ascend_pt")
    assert sorted(p.rank or -1 for p in load_profiles(tmp_path / "gen")) == [5, 6, 7]


def test_real_poor_overlap_excludes_the_wait(real_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _gpt3(real_traces)
    main(["analyze", str(d), "-f", "json"])
    report = json.loads(capsys.readouterr().out)
    (ts605,) = [f for f in report["findings"] if f["code"] == "TS605"]
    ev = ts605["evidence"]
    # torch_npu's Overlapped / Communication: 6987.30 / 153601.32 and 7129.46 / 158433.0
    assert ev["overlap_ratio_by_rank"] == {"0": 0.0455, "1": 0.045}
    # Communication(Not Overlapped) minus the collective wait: 146614.02 - 116636.175, 151303.54 - 114879.88
    assert ev["hideable_us_by_rank"] == {"0": 29977.846, "1": 36423.66} and ev["rank"] == 1


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_others_median_equals_dropping_each_rank() -> None:
    """TS603's "the other ranks' median", for all ranks at once, equals the median over the other
    columns computed one rank at a time (random tables with gaps and ties)."""
    import numpy as np
    import pandas as pd

    from tilescope.cluster import others_median

    rng = np.random.default_rng(16)
    for _ in range(300):
        rows, cols = int(rng.integers(1, 6)), int(rng.integers(2, 10))
        values = rng.integers(0, 5, size=(rows, cols)).astype(float)
        values[rng.random((rows, cols)) < 0.3] = np.nan
        table = pd.DataFrame(values, columns=range(cols))
        got = others_median(table)
        for col in table.columns:
            expected = table.drop(columns=[col]).median(axis=1, skipna=True)
            mine = table[col].notna() & (table.notna().sum(axis=1) >= 2)
            assert np.allclose(got[col][mine], expected[mine], equal_nan=True)
            assert got[col][~mine].isna().all()


def test_sarif_points_each_finding_at_its_rank(
    eight_ranks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A multi-rank SARIF: a finding's location is the rank it is about (not rank 0's folder);
    alike findings of different links are distinct alerts (fingerprints differ), while one problem
    found on the 8 ranks is one alert that names them, not 8."""
    assert main(["analyze", str(eight_ranks), "-f", "sarif"]) == 0
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]

    def where(r: dict[str, object]) -> str:
        return str(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])  # type: ignore[index]

    by_code: dict[str, list[dict[str, object]]] = {}
    for r in results:
        by_code.setdefault(str(r["ruleId"]), []).append(r)
    assert where(by_code["TS601"][0]).endswith("node0_1003_20260101000000000_ascend_pt")  # rank 3
    assert where(by_code["TS604"][0]).endswith("node0_1005_20260101000000000_ascend_pt")  # link 5-6's source
    ts102 = by_code["TS102"]
    assert len(ts102) == 2  # two chains, each found on every rank
    for r in ts102:
        assert r["properties"]["ranks"] == list(range(8))  # type: ignore[index]
        assert "(on 8 of 8 ranks: 0-7; the figures are rank 0's)" in r["message"]["text"]  # type: ignore[index]
        assert where(r).endswith("node0_1000_20260101000000000_ascend_pt")  # rank 0's folder
    prints = [r["partialFingerprints"]["tilescopeFinding/v1"] for r in results]
    assert len(set(prints)) == len(prints)


# ---- the communication matrix: each collective once (#26 item 3) ---------------------------------


def _matrix_aggregate(real: Path, export: str) -> dict[tuple[int, int], tuple[float, float]]:
    """(MB, µs) per link of rank 0's own aggregate entry (`allreduce-total@…`), read here from
    communication_matrix.json or analysis.db's CommAnalyzerMatrix."""
    import sqlite3

    out = real / export / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    if export.endswith("_text"):
        data = json.loads((out / "communication_matrix.json").read_text())
        ((_key, links),) = [(k, v) for k, v in data["step50"]["collective"].items() if "-total@" in k]
        return {tuple(map(int, link.split("-"))): (info["Transit Size(MB)"], 1000 * info["Transit Time(ms)"])
                for link, info in links.items()}  # type: ignore[misc]
    con = sqlite3.connect(f"file:{out / 'analysis.db'}?mode=ro", uri=True)
    rows = con.execute("SELECT src_rank, dst_rank, transit_size, transit_time FROM CommAnalyzerMatrix "
                       "WHERE hccl_op_name LIKE '%-total'").fetchall()
    con.close()
    return {(int(s), int(d)): (mb, 1000 * ms) for s, d, mb, ms in rows}


@pytest.mark.parametrize("export", ["torch_2rank_pipeutil_text", "torch_2rank_pipeutil_db"])
def test_real_links_read_each_collective_once(real_traces: Path, export: str) -> None:
    """The matrix of torch_2rank_pipeutil holds the four all-reduces under summary keys (top1,
    middle, bottom1-3: two name the same collective) and their aggregate (`allreduce-total`):
    each link sums the four collectives once, which is the aggregate's own figure (rank 0 -> 1 of
    the text export: 61.21 MB in 3,884 µs). Before, every key was summed: 124.9 MB, 6 transfers."""
    from tilescope.cluster import rank_tables
    from tilescope.report.ranks import link_totals

    if not (real_traces / export).is_dir():
        pytest.skip(f"{export} not available")
    links = {(r["src_rank"], r["dst_rank"]): r
             for r in link_totals(rank_tables(real_traces / export / "rank0_ascend_pt", None).links)}
    aggregate = {k: v for k, v in _matrix_aggregate(real_traces, export).items() if k[0] != k[1]}
    assert set(links) == set(aggregate) and len(links) == 7
    for pair, (mb, us) in aggregate.items():
        assert links[pair]["collectives"] == 4 and not links[pair]["unlisted"]
        assert links[pair]["size_mb"] == pytest.approx(mb, abs=1e-5)
        assert links[pair]["transit_us"] == pytest.approx(us, rel=1e-3)
    if export.endswith("_text"):
        expected = (pytest.approx(61.210624), pytest.approx(3883.938))
        assert (links[0, 1]["size_mb"], links[0, 1]["transit_us"]) == expected


def test_an_aggregate_over_unlisted_collectives_keeps_their_part(tmp_path: Path) -> None:
    """Past five collectives the summary keys name a few of them; the aggregate's remainder is
    counted once (and said: `unlisted`), the named ones once each."""
    from tilescope.cluster import rank_tables
    from tilescope.report.ranks import link_totals

    def entry(mb: float, ms: float, op: str | None) -> dict[str, object]:
        e: dict[str, object] = {"Transport Type": "HCCS", "Transit Size(MB)": mb, "Transit Time(ms)": ms,
                                "Bandwidth(GB/s)": mb / ms}
        return e if op is None else {**e, "Op Name": op}

    keys = {"allreduce-top1@g": entry(8.0, 0.4, "hcom_allReduce__1_5_1"),
            "allreduce-middle@g": entry(2.0, 0.1, "hcom_allReduce__1_2_1"),
            "allreduce-bottom1@g": entry(1.0, 0.05, "hcom_allReduce__1_0_1"),
            "allreduce-bottom2@g": entry(2.0, 0.1, "hcom_allReduce__1_2_1"),  # the middle one again
            "allreduce-total@g": entry(20.0, 1.0, None)}
    out = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    matrix = {"step1": {"collective": {k: {"0-1": v} for k, v in keys.items()}}}
    (out / "communication_matrix.json").write_text(json.dumps(matrix))
    (link,) = link_totals(rank_tables(out.parent, None).links)
    assert link["collectives"] == 3 and link["unlisted"]
    assert (link["size_mb"], link["transit_us"]) == (pytest.approx(20.0), pytest.approx(1000.0))


# ---- what the TS6xx messages claim (#26 item 8) ----------------------------------------------------


def test_real_wait_share_says_what_it_is_a_share_of(real_traces: Path) -> None:
    """torch_2rank_pipeutil_text rank 0 waits 5.9 ms and transfers 3.7 ms in collectives that
    take 106 ms: 62 % is wait / (wait + transit), not "of collective time"."""
    from tilescope.text.words import fmt_us

    run = real_traces / "torch_2rank_pipeutil_text"
    if not run.is_dir():
        pytest.skip("torch_2rank_pipeutil_text not available")
    ops = json.loads((run / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
    collectives = ops["step50"]["collective"]
    times = [e["Communication Time Info"] for op, e in collectives.items() if op != "Total Op Info"]
    wait, transit, elapse = (1000 * sum(t[k] for t in times)
                             for k in ("Wait Time(ms)", "Transit Time(ms)", "Elapse Time(ms)"))
    columns = ("name", "core_type", "start_ns", "duration_us")
    cluster = build_cluster(load_profiles(run, kernel_columns=columns))
    (f,) = [f for f in run_cluster_rules(cluster, Config()).findings if f.code == "TS602"]
    assert f"wait is {wait / (wait + transit):.0%} of wait + transit" in f.message and "62%" in f.message
    assert f"rank 0: {fmt_us(wait)} waiting, {fmt_us(transit)} transferring" in f.message
    assert f"elapsed time is {fmt_us(elapse)}" in f.message and "of collective time" not in f.message
    assert f.evidence["elapse_us_by_rank"]["0"] == pytest.approx(elapse, abs=1e-3)


@pytest.fixture(scope="module")
def two_models(real_traces: Path) -> Cluster:
    """Two real kernel tables side by side as ranks 0 and 1, their step split recomputed from the
    kernels and no communication.json: gpt_step_arith_591 computes 49.17 ms, gpt3 rank 1 far less."""
    import pandas as pd

    from tilescope.cluster import RankInfo, RankTables, assemble_cluster, kernel_summary

    tables = [real_traces / "gpt_step_arith_591" / "kernel_details.csv",
              _gpt3(real_traces) / "test_rank_1" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"]
    ranks = []
    for rank, path in enumerate(tables):
        k = load_profiles(path)[0].kernels
        steps = steps_from_kernels(k).assign(source="kernels")
        ranks.append((RankInfo(rank, path, True),
                      RankTables(steps, pd.DataFrame(), pd.DataFrame(), kernel_summary(k))))
    return assemble_cluster(ranks)


def test_slow_rank_says_how_much_of_the_gap_its_kernels_explain(two_models: Cluster) -> None:
    """Per kernel name, the slow rank's summed time minus the others' median, added up: the part
    of the Computing gap the kernel tables explain, said with the kernels named (before: "most of
    it in …", whatever share they held)."""
    from tilescope.text.words import fmt_us

    (f,) = [f for f in run_cluster_rules(two_models, Config()).findings if f.code == "TS601"]
    k = two_models.kernels
    slow = k[k["rank"] == 0].set_index("name")["total_us"]
    other = k[k["rank"] == 1].set_index("name")["total_us"]
    explained = float(slow.sub(other, fill_value=0.0).sum())  # the other rank's total is the median
    assert f.evidence["rank"] == 0 and f.evidence["kernels_explain_us"] == pytest.approx(explained, abs=1e-2)
    assert f"the kernel tables explain {fmt_us(explained)} of it" in f.message
    assert "most of it in" not in f.message


def test_poor_overlap_says_when_no_wait_was_known(two_models: Cluster) -> None:
    """Neither rank has communication.json: no wait was subtracted, and the message says so
    instead of "(wait excluded)"."""
    (f,) = [f for f in run_cluster_rules(two_models, Config()).findings if f.code == "TS605"]
    assert f.evidence["wait_subtracted"] is False and "wait excluded" not in f.message
    assert f"rank {f.evidence['rank']}'s collective wait is not known without communication.json" in f.message
