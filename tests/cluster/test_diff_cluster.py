"""`tilescope diff` of two multi-rank runs (issue #16): generated runs with a known change, named
with the numbers read from their files; JSON reports give the same diff as folders; mismatched or
broken inputs exit 2 with one line; the bundled `cluster_8rank` sample finds what its manifest says."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from statistics import median
from types import ModuleType
from typing import Any

import pytest

from tilescope.cli import main

from support import REPO_ROOT

REPO = REPO_ROOT
SAMPLE = REPO / "sample_traces" / "cluster_8rank"
SINGLE = REPO / "sample_traces" / "attention_fused"


def _write(out: Path, **spec: Any) -> Path:
    from generator.cluster import ClusterSpec, write_cluster_run

    write_cluster_run(out, ClusterSpec(**spec))
    return out


def _rank_dir(run: Path, rank: int) -> Path:
    (d,) = [p for p in run.iterdir() if (p / f"profiler_info_{rank}.json").is_file()]
    return d / "ASCEND_PROFILER_OUTPUT"


def _kernel_median(run: Path, rank: int, name: str) -> float:
    with open(_rank_dir(run, rank) / "kernel_details.csv", newline="") as fh:
        return median(float(r["Duration(us)"]) for r in csv.DictReader(fh) if r["Name"] == name)


def _mean_step(run: Path, rank: int, column: str) -> float:
    """A column of the rank's step_trace_time.csv, mean per step (what the diff compares)."""
    with open(_rank_dir(run, rank) / "step_trace_time.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    if column == "step":
        return sum(float(r["Computing"]) + float(r["Communication(Not Overlapped)"]) + float(r["Free"])
                   for r in rows) / len(rows)
    return sum(float(r[column]) for r in rows) / len(rows)


def _link_gbps(run: Path, rank: int, dst: int) -> float:
    matrix = json.loads((_rank_dir(run, rank) / "communication_matrix.json").read_text())
    ops = next(iter(matrix.values()))["collective"]
    return float(next(iter(ops.values()))[f"{rank}-{dst}"]["Bandwidth(GB/s)"])


@pytest.fixture(scope="module")
def straggler_fixed(
    tmp_path_factory: pytest.TempPathFactory, sample_generator: ModuleType
) -> tuple[Path, Path]:
    """Base: rank 3 slow, every link fine. Head: rank 3 fixed, link 5->6 slow."""
    root = tmp_path_factory.mktemp("cluster_diff")
    return (_write(root / "base", ranks=8, slow_rank=3, slow_link=None),
            _write(root / "head", ranks=8, slow_rank=None, slow_link=(5, 6)))


def _diff_json(base: Path, head: Path, tmp_path: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "diff.json"
    code = main(["diff", str(base), str(head), "-f", "json", "-o", str(out), *flags])
    return code, json.loads(out.read_text())


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_fixed_straggler_and_slower_link_are_named(
    straggler_fixed: tuple[Path, Path], tmp_path: Path
) -> None:
    base, head = straggler_fixed
    code, d = _diff_json(base, head, tmp_path)
    assert code == 0 and d["kind"] == "cluster"
    assert d["straggler"] == {"base": 3, "head": None}
    status = {(c["code"], c["subject"]): c["status"] for c in d["cluster_findings"]}
    assert status[("TS601", "rank 3")] == "gone" and status[("TS603", "rank 3")] == "gone"
    assert status[("TS604", "link 5-6 HCCS")] == "new"
    ts604 = next(c for c in d["cluster_findings"] if c["code"] == "TS604")
    assert ts604["severity"] == {"base": None, "head": "high"}
    assert f"{_link_gbps(head, 5, 6):.1f} GB/s" in ts604["message"]["head"]  # 5.0 GB/s, from the matrix
    # rank 3's step split, mean per step as torch_npu's step_trace_time.csv has it
    r3 = next(s for s in d["step_time"] if s["rank"] == 3)
    assert r3["base"]["computing_us"] == _mean_step(base, 3, "Computing") == 1260.0
    assert r3["head"]["computing_us"] == _mean_step(head, 3, "Computing") == 990.0
    assert r3["base"]["step_us"] == _mean_step(base, 3, "step") and r3["delta_us"]["computing_us"] == -270.0
    # the kernel that made rank 3 slow, matched on rank 3 only; the other ranks' MatMulV2 unchanged
    mm = next(k for k in d["kernels_by_rank"]["3"]["kernels"] if k["key"][0] == "MatMulV2")
    assert mm["verdict"] == "improved"
    assert mm["base"]["median_us"] == _kernel_median(base, 3, "MatMulV2") == 270.0
    assert mm["head"]["median_us"] == _kernel_median(head, 3, "MatMulV2") == 180.0
    others = [k for r in ("0", "5", "7") for k in d["kernels_by_rank"][r]["kernels"]]
    assert others and all(k["verdict"] == "within threshold" for k in others)
    assert d["gate"]["tripped"] is False
    # link by link: 5->6 named first, with the bandwidths each run's matrix gives; every other link
    # of the ring within the threshold (the gates do not read links: TS604 and the step time do)
    first = d["links"][0]
    assert (first["src_rank"], first["dst_rank"], first["verdict"]) == (5, 6, "slower")
    assert first["bandwidth_gbps"] == {"base": _link_gbps(base, 5, 6), "head": _link_gbps(head, 5, 6)}
    assert (first["bandwidth_gbps"]["base"], first["bandwidth_gbps"]["head"]) == (20.0, 5.0)
    assert first["change_pct"] == -75.0 and first["transports"] == ["HCCS"]
    assert len(d["links"]) == 8 and all(x["verdict"] == "within threshold" for x in d["links"][1:])


def test_text_says_what_changed(
    straggler_fixed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base, head = straggler_fixed
    assert main(["diff", str(base), str(head), "--width", "400"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tilescope diff of two 8-rank runs:")
    assert "straggler (TS601 slow-rank): rank 3 → none (vanished)" in out
    assert "cross-rank findings (TS6xx): 2 gone, 1 new" in out
    new = [line for line in out.splitlines() if line.strip().startswith("new")]
    assert any("TS604 slow-link (link 5-6 HCCS)" in line for line in new), new
    assert "MatMulV2: improved on rank 3 — median per launch 270.0 µs → 180.0 µs (−33.3 %)" in out
    assert ("links (bandwidth per rank pair over the run, no spread): 8 in both runs, 1 slower and "
            "0 faster by 5 % or more") in out
    slower = [line.strip() for line in out.splitlines() if line.strip().startswith("slower ")]
    assert slower == ["slower      5→6 HCCS: 20.0 → 5.0 GB/s (−75.0 %), 56.0 → 56.0 MB moved"], slower
    assert ("regression gate (5 %, noise-aware; slowest rank's step time, each rank's top kernels): "
            "passed") in out


def test_new_high_cross_rank_finding_trips_fail_on_new(
    straggler_fixed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, head = straggler_fixed
    code, d = _diff_json(base, head, tmp_path, "--fail-on-new", "high")
    assert code == 1
    gated = [(f["code"], f["evidence"]["src_rank"], f["evidence"]["dst_rank"])
             for f in d["gate"]["new_findings"]]
    assert gated == [("TS604", 5, 6)]
    assert "new-findings gate tripped: 1 finding(s) at or above high new since the base (TS604)" in \
        capsys.readouterr().err
    ts605 = next(c for c in d["cluster_findings"] if c["code"] == "TS605")
    assert ts605["status"] == "still there" and ts605["severity"] == {"base": "high", "head": "medium"}
    # the other way round the straggler is new, but TS601/TS603 are low; TS605 is raised to high
    code, d = _diff_json(head, base, tmp_path, "--fail-on-new", "high")
    assert code == 1 and [f["code"] for f in d["gate"]["new_findings"]] == ["TS605"]


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_slowest_rank_step_time_regression_trips_the_gate(
    tmp_path: Path, sample_generator: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _write(tmp_path / "base", ranks=4, slow_rank=1, slow_link=None)
    head = _write(tmp_path / "head", ranks=4, slow_rank=1, slow_link=None, step_period_us=22_000.0)
    b, h = _mean_step(base, 1, "step"), _mean_step(head, 1, "step")
    assert main(["diff", str(base), str(head)]) == 0  # without the flag it only reports
    capsys.readouterr()
    assert main(["diff", str(base), str(head), "--fail-on-regression", "5"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tilescope: error: regression gate tripped: slowest rank's step time: "
                          f"rank 1 {b:,.1f} µs → rank 1 {h:,.1f} µs ({(h / b - 1) * 100:+.1f} %")
    assert main(["diff", str(base), str(head), "--fail-on-regression", "15"]) == 0  # +10 % is under 15 %


def test_json_reports_give_the_same_diff_as_folders(
    straggler_fixed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, head = straggler_fixed
    reports = []
    for name, src in (("base.json", base), ("head.json", head)):
        reports.append(tmp_path / name)
        assert main(["analyze", str(src), "-f", "json", "-o", str(reports[-1])]) == 0
    _, from_folders = _diff_json(base, head, tmp_path)
    _, from_reports = _diff_json(reports[0], reports[1], tmp_path)
    for d in (from_folders, from_reports):
        d.pop("base"), d.pop("head")
    assert from_reports == from_folders
    # and a report against a folder
    _, mixed = _diff_json(reports[0], head, tmp_path)
    mixed.pop("base"), mixed.pop("head")
    assert mixed == from_folders


def test_a_report_written_per_rank_gives_the_same_diff_as_a_grouped_one(
    straggler_fixed: tuple[Path, Path], tmp_path: Path
) -> None:
    """Schema 1.0 listed each rank's own findings once per rank; 1.1 groups them (`by_rank`). A
    base report kept from before the change is still compared rank by rank, with no finding
    counted new or gone because of the layout."""
    from tilescope.report.ranks import rank_findings

    base, head = straggler_fixed
    grouped = tmp_path / "base.json"
    assert main(["analyze", str(base), "-f", "json", "-o", str(grouped)]) == 0
    report = json.loads(grouped.read_text())
    assert any("by_rank" in f for f in report["findings"])
    ranks = [p["rank"] for p in report["profiles"]]
    cluster = [f for f in report["findings"] if f.get("scope") == "cluster"]
    per_rank = [f for r in ranks for f in rank_findings(report["findings"], r)]
    assert len(per_rank) > len(report["findings"]) - len(cluster)  # the groups span ranks
    old = tmp_path / "base-1.0.json"
    old.write_text(json.dumps({**report, "schema_version": "1.0", "findings": cluster + per_rank}))
    _, from_grouped = _diff_json(grouped, head, tmp_path)
    _, from_old = _diff_json(old, head, tmp_path)
    for d in (from_grouped, from_old):
        d.pop("base"), d.pop("head")
    assert from_old == from_grouped
    assert any(k["findings"] for k in from_grouped["kernels_by_rank"].values())


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_rank_sets_that_differ_are_said_plainly(
    tmp_path: Path, sample_generator: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _write(tmp_path / "eight", ranks=8)
    head = _write(tmp_path / "four", ranks=4, slow_rank=None, slow_link=None)
    code, d = _diff_json(base, head, tmp_path)
    assert code == 0
    assert d["ranks"]["only_in_base"] == [4, 5, 6, 7] and d["ranks"]["compared"] == [0, 1, 2, 3]
    assert sorted(d["kernels_by_rank"]) == ["0", "1", "2", "3"]
    assert {s["rank"]: s["verdict"] for s in d["step_time"]}[6] == "only in base"
    assert main(["diff", str(base), str(head), "--width", "300"]) == 0
    out = capsys.readouterr().out
    assert ("note: rank sets differ: base has 8 ranks (0-7), head has 4 (0-3); only in base: 4-7; "
            "compared: 0-3") in out


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_multi_rank_against_single_rank_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(SAMPLE), str(SINGLE)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and f"{SAMPLE} holds 8 ranks, {SINGLE} one" in lines[0]
    assert main(["diff", str(SINGLE), str(SAMPLE)]) == 2
    assert f"{SAMPLE} holds 8 ranks, {SINGLE} one" in capsys.readouterr().err


def test_multi_rank_report_without_cluster_section_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(SAMPLE), "-f", "json", "-o", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    del report["cluster"]  # as a report of several profiles written before the cluster section
    old = tmp_path / "old.json"
    old.write_text(json.dumps(report))
    assert main(["diff", str(old), str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tilescope: error: {old}: a report of 8 ranks without a 'cluster' section (written by an "
                   "older tilescope?); run tilescope analyze -f json on the run again"]


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_unreadable_rank_is_partial_exit_2(
    tmp_path: Path, sample_generator: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _write(tmp_path / "base", ranks=4, slow_rank=2, slow_link=None)
    head = _write(tmp_path / "head", ranks=4, slow_rank=2, slow_link=None)
    kd = _rank_dir(head, 2) / "kernel_details.csv"
    lines = kd.read_text().splitlines()
    # every row from row 3 on one field short: more unreadable rows than readable ones refuse
    # the table (one short row alone is skipped with a note: tests/io/test_bad_rows.py)
    lines[3:] = [line.rsplit(",", 1)[0] for line in lines[3:]]
    kd.write_text("\n".join(lines) + "\n")
    assert main(["diff", str(base), str(head), "--width", "300"]) == 2
    captured = capsys.readouterr()
    assert "row 3 (line 4)" in captured.err and "rank 2 left out" in captured.err
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith("tilescope: error: partial input: 1 of 8 profiles")
    assert "note: head: rank 2 without a readable kernel table (step time compared, kernels not)" \
        in captured.out
    assert "Traceback" not in captured.err


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_markdown_and_hostile_kernel_names(
    tmp_path: Path, sample_generator: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    from markdown_it import MarkdownIt

    base = _write(tmp_path / "base", ranks=2, slow_rank=None, slow_link=None)
    head = _write(tmp_path / "head", ranks=2, slow_rank=None, slow_link=None)
    kd = _rank_dir(head, 1) / "kernel_details.csv"
    evil = "<img src=x onerror=alert(1)>|@org/team\x1b[2J"
    kd.write_text(kd.read_text().replace("Gelu,Gelu", f'"{evil}",Gelu'))
    assert main(["diff", str(base), str(head), "--width", "300"]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text and "added on rank 1" in text
    md = tmp_path / "d.md"
    assert main(["diff", str(base), str(head), "-f", "md", "-o", str(md)]) == 0
    source = md.read_text()
    assert source.startswith("## tilescope diff of two 2-rank runs")
    assert "| ranks | step time base → head |" in source
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(source)
    assert "<img" not in rendered
    # the gate's verdict is the first paragraph (issue #28 item 9)
    first = re.search(r"<p>(.*?)</p>", rendered, re.DOTALL)
    assert first and first.group(1).startswith("✅ <strong>regression gate") and "passed" in first.group(1)


def test_bundled_sample_manifest_matches_analyze(capsys: pytest.CaptureFixture[str]) -> None:
    manifest = json.loads((SAMPLE / "manifest.json").read_text())
    assert manifest["generated"] is True and manifest["sample"] == "cluster_8rank"
    planted = manifest["contents"]["planted"]
    assert main(["analyze", str(SAMPLE), "-f", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["cluster"]["ranks_total"] == manifest["contents"]["ranks"] == 8
    assert report["cluster"]["slow_rank"] == planted["slow_rank"] == 3
    (link,) = [f for f in report["findings"] if f["code"] == "TS604"]
    ev = link["evidence"]
    assert [ev["src_rank"], ev["dst_rank"]] == planted["slow_link"] == [5, 6]
    assert ev["bandwidth_gbps"] == planted["slow_link_gbps"] == 5.0
    assert ev["transport_median_gbps"] == planted["link_gbps"] == 20.0
    (straggler,) = [f for f in report["findings"] if f["code"] == "TS603"]
    assert straggler["kernels"] == [planted["slow_kernel"]]
    assert straggler["evidence"]["slowdown"] == planted["slow_factor"]


def test_links_only_in_one_run_and_values_that_are_not_numbers() -> None:
    """compare_links on hand-written rows: the verdicts, the order, and rows a report may carry
    broken (a bool rank, NaN or text bandwidth) never raise or count as a change."""
    from tilescope.diff_links import compare_links

    def row(src: Any, dst: Any, gbps: Any, mb: float = 10.0) -> dict[str, Any]:
        return {"src_rank": src, "dst_rank": dst, "transports": ["HCCS"], "bandwidth_gbps": gbps,
                "size_mb": mb}

    base = [row(0, 1, 20.0), row(1, 2, 20.0), row(2, 3, 20.0), row(3, 0, 20.0), row(4, 5, float("nan")),
            row(True, 1, 5.0), row(6, 7, 20.0)]
    head = [row(0, 1, 19.5), row(1, 2, 10.0), row(2, 3, 30.0), row(5, 6, 20.0), row(4, 5, "fast"),
            row(6, 7, 18.0)]
    got = [(d.src_rank, d.dst_rank, d.verdict, None if d.pct is None else round(d.pct, 1))
           for d in compare_links(base, head, 5.0)]
    assert got == [
        (1, 2, "slower", -50.0), (6, 7, "slower", -10.0), (2, 3, "faster", 50.0),
        (5, 6, "only in head", None), (3, 0, "only in base", None),
        (0, 1, "within threshold", -2.5), (4, 5, "no bandwidth", None),
    ]
