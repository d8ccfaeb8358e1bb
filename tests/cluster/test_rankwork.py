"""The per-rank work of a multi-rank run (analyzer/rankwork.py) and its cache (analyzer/rank_cache.py):
the report is the same wherever the work ran — in this process, in a local process pool, on a Dask
`LocalCluster`, read back from the cache — and the same as the in-process model built from every
profile at once (`load_profiles` + `build_report` + `build_cluster`, the path single inputs take)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tilescope.analysis import analyze, kernel_columns_read
from tilescope.cli import main
from tilescope.cluster import build_cluster
from tilescope.commands.analyze import RankOptions, build
from tilescope.config import Config
from tilescope.engine import run_cluster_rules
from tilescope.errors import MissingComponentError, UsageError
from tilescope.io.detect import detect
from tilescope.io.load import load_profiles
from tilescope.rank_cache import RankCache
from tilescope.rankwork import Executor_, analyze_inputs, default_workers, plan_executor
from tilescope.report.data import build_report, validate_report


def _json(report: dict[str, Any]) -> str:
    report = dict(report)
    report.pop("generated_at")
    return json.dumps(report, sort_keys=True)


def _legacy(path: Path) -> str:
    """The report as `analyze` made it before per-rank workers: every profile in this process."""
    profiles = load_profiles(path, lazy_timeline=True, kernel_columns=kernel_columns_read())
    pairs = [(p, analyze(p, Config())) for p in profiles]
    model = build_cluster(profiles, profiles.failures)
    return _json(build_report(pairs, cluster=(model, run_cluster_rules(model, profiles[0].chip, Config()))))


def _report(path: Path, tmp: Path, **opts: Any) -> tuple[str, list[Any]]:
    failures: list[Any] = []
    ranks = RankOptions(cache_dir=tmp / "cache", **opts)
    report = build(path, Config(), None, False, failures, ranks)
    validate_report(report)
    return _json(report), failures


@pytest.fixture(scope="module")
def run8(tmp_path_factory: pytest.TempPathFactory, sample_generator: Any) -> Path:
    """A generated 8-rank run (slow rank 3, slow link 5->6) whose rank 6 has a truncated kernel row."""
    from generator.cluster import ClusterSpec, write_cluster_run

    out = tmp_path_factory.mktemp("run8")
    roots = write_cluster_run(out, ClusterSpec(ranks=8, steps=3))
    table = roots[6] / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = table.read_text().splitlines()
    # every row from row 5 on one field short: more unreadable rows than readable ones refuse
    # the table (one short row alone is skipped with a note: tests/io/test_bad_rows.py)
    lines[5:] = [line.rsplit(",", 1)[0] for line in lines[5:]]
    table.write_text("\n".join(lines) + "\n")
    return out


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_same_report_in_process_pool_cache_and_legacy(run8: Path, tmp_path: Path) -> None:
    serial, failures = _report(run8, tmp_path / "a", jobs=1, use_cache=False)
    assert [f.rank for f in failures] == [6]
    assert serial == _legacy(run8)
    pooled, _ = _report(run8, tmp_path / "b", jobs=2)  # computes and writes the cache
    assert pooled == serial
    again, failures = _report(run8, tmp_path / "b", jobs=2)  # every input from the cache
    assert again == serial
    assert [f.rank for f in failures] == [6]
    report = json.loads(serial)
    assert report["cluster"]["slow_rank"] == 3
    assert {f["code"] for f in report["findings"] if f.get("scope") == "cluster"} >= {"TS601", "TS604"}


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_real_two_rank_run_same_everywhere(real_traces: Path, tmp_path: Path) -> None:
    run = real_traces / "gpt3_2rank_memoryl0"
    serial, _ = _report(run, tmp_path, jobs=1, use_cache=False)
    assert serial == _legacy(run)
    assert _report(run, tmp_path, jobs=2)[0] == serial
    assert _report(run, tmp_path, jobs=1)[0] == serial  # from the cache
    ranks = json.loads(serial)["cluster"]["ranks"]
    # torch_npu's own step_trace_time.csv values for rank 1 (the run's README)
    rank1 = next(r for r in ranks if r["rank"] == 1)
    assert (rank1["computing_us"], rank1["communication_not_overlapped_us"], rank1["free_us"]) == (
        75422.22, 151303.54, 67860.8)


@pytest.mark.slow
def test_dask_local_cluster_gives_the_same_report(run8: Path, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    serial, _ = _report(run8, tmp_path, jobs=1, use_cache=False)
    url = f"file://{run8}"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        on_dask, failures = _report(run8, tmp_path, scheduler=cluster.scheduler_address, use_cache=False)
        # ranks at a URL: each Dask worker stages its own rank folder
        staged = build(url, Config(), None, False, [], RankOptions(scheduler=cluster.scheduler_address,
                                                                    use_cache=False))
    assert on_dask == serial
    assert [f.rank for f in failures] == [6]
    assert _as_local(_json(staged), url, run8) == serial


def test_second_analysis_reads_only_the_cached_summaries(run8: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    found = detect(run8)
    cache = RankCache(tmp_path / "cache")
    first = analyze_inputs(found, run8, Config(), None, kernel_columns_read(), Executor_("serial"), cache)
    assert first.cached == 0
    import tilescope.rankwork as rw

    def no_work(job: Any) -> Any:
        raise AssertionError(f"input {job.index} was analysed again")

    monkeypatch.setattr(rw, "run_unit", no_work)
    second = analyze_inputs(found, run8, Config(), None, kernel_columns_read(), Executor_("serial"), cache)
    assert second.cached == len(found) == 8
    assert second.parts == first.parts
    for name in ("steps", "comm_ops", "links", "kernels"):
        a, b = getattr(first.cluster, name), getattr(second.cluster, name)
        assert a.astype(str).equals(b.astype(str)), name


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_a_changed_input_or_setting_is_analysed_again(run8: Path, tmp_path: Path) -> None:
    found = detect(run8)
    cache = RankCache(tmp_path / "cache")
    analyze_inputs(found, run8, Config(), None, kernel_columns_read(), Executor_("serial"), cache)
    again = analyze_inputs(found, run8, Config(), None, kernel_columns_read(), Executor_("serial"), cache)
    assert again.cached == 8
    # another threshold: every input's rules ran with other settings
    cfg = Config(rules={"TS102": {"min_occurrences": 1000}})
    other = analyze_inputs(found, run8, cfg, None, kernel_columns_read(), Executor_("serial"), cache)
    assert other.cached == 0
    # one rank's step trace rewritten (same size, later time): that rank only
    step_trace = found[2].path / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    st = step_trace.stat()
    os.utime(step_trace, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    touched = analyze_inputs(found, run8, Config(), None, kernel_columns_read(), Executor_("serial"), cache)
    assert touched.cached == 7


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_a_damaged_cache_entry_is_recomputed(run8: Path, tmp_path: Path) -> None:
    found = detect(run8)
    cache = RankCache(tmp_path / "cache")
    first = analyze_inputs(found, run8, Config(), None, kernel_columns_read(), Executor_("serial"), cache)
    for meta in sorted((tmp_path / "cache").rglob("unit.json"))[:3]:
        meta.write_bytes(meta.read_bytes()[:40])  # truncated
    again = analyze_inputs(found, run8, Config(), None, kernel_columns_read(), Executor_("serial"), cache)
    assert again.cached == 5
    assert again.parts == first.parts


def test_no_cache_writes_nothing(run8: Path, tmp_path: Path) -> None:
    _report(run8, tmp_path, jobs=1, use_cache=False)
    assert not (tmp_path / "cache").exists()


def test_executor_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    import tilescope.rankwork as rw

    monkeypatch.delenv("TILESCOPE_SCHEDULER", raising=False)
    monkeypatch.setattr(rw, "usable_cores", lambda: 8)
    monkeypatch.setattr(rw, "available_memory", lambda: 64 * 2**30)
    assert plan_executor(None, None, [10**6] * 3) == Executor_("pool", workers=3)  # no more than inputs
    assert plan_executor(1, None, [10**6] * 3) == Executor_("serial")
    assert plan_executor(None, None, [10**6]) == Executor_("serial")
    # ranks of 5 GB on disk (~10.3 GB at peak each): 64 GiB holds 6 workers, not 8
    assert default_workers([5 * 10**9] * 16) == 6
    monkeypatch.setattr(rw, "available_memory", lambda: 2**30)
    assert default_workers([5 * 10**9] * 16) == 1
    monkeypatch.setenv("TILESCOPE_SCHEDULER", "tcp://10.0.0.1:8786")
    assert plan_executor(None, None, [1, 1]) == Executor_("dask", address="tcp://10.0.0.1:8786",
                                                          named="TILESCOPE_SCHEDULER")
    assert plan_executor(2, "tcp://h:1", [1, 1]).address == "tcp://h:1"  # the flag wins
    with pytest.raises(UsageError, match="--jobs 0"):
        plan_executor(0, None, [1, 1])


@pytest.mark.slow
def test_unreachable_scheduler_is_exit_3_with_one_line(
    run8: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("distributed")
    import tilescope.rankwork_dask as rd

    monkeypatch.setattr(rd, "CONNECT_DEADLINE_S", 2)  # nothing listens on port 9: refused until then
    with pytest.raises(MissingComponentError, match="cannot reach the Dask scheduler"):
        _report(run8, tmp_path, scheduler="tcp://127.0.0.1:9", use_cache=False)
    assert main(["analyze", str(run8), "--scheduler", "tcp://127.0.0.1:9", "--no-cache"]) == 3
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines[-1].startswith("tilescope: error: --scheduler tcp://127.0.0.1:9: cannot reach")
    assert "Traceback" not in err


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_cli_partial_run_through_the_pool(
    run8: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(run8), "-j", "2", "--cache-dir", str(tmp_path), "-f", "json"]) == 2
    captured = capsys.readouterr()
    assert "row 5 (line 6): expected" in captured.err and "rank 6 left out" in captured.err
    assert json.loads(captured.out)["cluster"]["ranks_loaded"] == 7
    assert any(p.name == "unit.json" for p in tmp_path.rglob("*"))


def test_rank_parts_survive_a_round_trip_unchanged(run8: Path, tmp_path: Path) -> None:
    """What a worker hands back is plain data: equal after the cache's JSON and Parquet."""
    found = detect(run8)[:2]
    cache = RankCache(tmp_path / "c")
    fresh = analyze_inputs(found, run8, Config(), None, kernel_columns_read(), Executor_("serial"), cache)
    back = analyze_inputs(found, run8, Config(), None, kernel_columns_read(), Executor_("serial"), cache)
    assert back.cached == 2
    assert [dataclasses.asdict(r) for r in back.cluster.ranks] == [
        dataclasses.asdict(r) for r in fresh.cluster.ranks
    ]


def _as_local(report_json: str, url: str, path: Path) -> str:
    return report_json.replace(url, str(path))


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_a_url_of_rank_folders_gives_the_local_report(run8: Path, tmp_path: Path) -> None:
    """`analyze file:///…/run8` (any fsspec URL): each rank folder is staged by its worker and every
    path of the result names the URL — the report is the local one with the URL for the path, in
    this process, through 2 workers and from the cache (keyed by the objects' sizes and times)."""
    url = f"file://{run8}"
    local, _ = _report(run8, tmp_path / "l", jobs=1, use_cache=False)
    runs = [RankOptions(jobs=1, use_cache=False), RankOptions(jobs=2, cache_dir=tmp_path / "c"),
            RankOptions(jobs=2, cache_dir=tmp_path / "c")]  # the last from the cache
    for opts in runs:
        failures: list[Any] = []
        report = build(url, Config(), None, False, failures, opts)
        validate_report(report)
        text = _json(report)
        assert "tilescope-rank-" not in text  # no path of the worker's temporary copy
        assert _as_local(text, url, run8) == local
        assert [str(f.path) for f in failures] == [f"{url}/node0_1006_20260101000000000_ascend_pt"]
    assert len(list((tmp_path / "c").rglob("unit.json"))) == 8


def test_url_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["analyze", "foo://bucket/run"]) == 2
    assert capsys.readouterr().err.strip() == (
        "tilescope: error: foo://bucket/run: protocol 'foo' is not read; a run of ranks is read from "
        "file:///path, s3://, gs://, az:// or abfs://, hdfs:// URLs"
    )
    assert main(["analyze", f"file://{tmp_path}/missing"]) == 2
    assert "no Ascend profile found (path does not exist)" in capsys.readouterr().err
    try:
        import s3fs  # noqa: F401
    except ImportError:  # the protocol's package missing: a component to install, exit 3
        assert main(["analyze", "s3://bucket/run"]) == 3
        said = capsys.readouterr().err.strip()
        assert said == "tilescope: error: s3://bucket/run: Install s3fs to access S3"


def test_a_url_of_one_rank_folder_is_that_rank(run8: Path, tmp_path: Path) -> None:
    """A URL naming a rank's own folder (ASCEND_PROFILER_OUTPUT at its top) is one rank: the same
    report as the local folder's, with the URL for the path, and no cluster section."""
    rank3 = run8 / "node0_1003_20260101000000000_ascend_pt"
    url = f"file://{rank3}"
    local = _json(build(rank3, Config(), None, False, [], RankOptions(use_cache=False)))
    remote = build(url, Config(), None, False, [], RankOptions(use_cache=False))
    assert "cluster" not in remote and remote["profiles"][0]["rank"] == 3
    assert _as_local(_json(remote), url, rank3) == local


# ---- a whole run answered from the cache (commands.analyze.cached_run) ----------------------------


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_a_repeated_analysis_is_answered_from_the_stored_report(
    run8: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tilescope.commands.analyze as A

    cmd = ["analyze", str(run8), "-j", "1", "--cache-dir", str(tmp_path), "-f", "json"]
    assert main(cmd) == 2  # rank 6 left out
    first = capsys.readouterr()
    assert len(list(tmp_path.rglob("run.json"))) == 1

    def no_work(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("analysed again")

    monkeypatch.setattr(A, "build", no_work)
    monkeypatch.setattr(A, "check_rule_prefixes", no_work)
    assert main(cmd) == 2  # the same partial result: the left-out rank is stored with the report
    again = capsys.readouterr()
    assert again.err == first.err and "rank 6 left out" in again.err
    assert _json(json.loads(again.out)) == _json(json.loads(first.out))
    # another format of the same run: rendered from the stored report too
    assert main([*cmd[:-1], "md"]) == 2
    assert "slow" in capsys.readouterr().out  # the rank table, rendered without analysing
    # a setting that changes the analysis is not answered from it
    with pytest.raises(AssertionError, match="analysed again"):
        main([*cmd, "--ignore", "TS102"])
    monkeypatch.undo()
    # one rank's file touched: the run is assembled again, its other ranks from their summaries
    rank2 = run8 / "node0_1002_20260101000000000_ascend_pt"
    step_trace = rank2 / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    st = step_trace.stat()
    os.utime(step_trace, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    try:
        assert main(cmd) == 2
        assert _json(json.loads(capsys.readouterr().out)) == _json(json.loads(first.out))
        assert len(list(tmp_path.rglob("run.json"))) == 2
    finally:
        os.utime(step_trace, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_a_stored_report_imports_neither_pandas_nor_the_rules(run8: Path, tmp_path: Path) -> None:
    """The point of the whole-run entry: ~0.5 s of a cached 64-rank analysis was importing pandas
    and the rules, which a report read back does not need."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from tilescope.cli import main\n"
        f"code = main(['analyze', {str(run8)!r}, '-j', '1', '--cache-dir', {str(tmp_path)!r}, "
        f"'-o', {str(tmp_path / 'out.txt')!r}])\n"
        "print(code, 'pandas' in sys.modules, any(m.startswith('tilescope.rules.ts') for m in sys.modules))\n"
    )
    runs = [subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
            for _ in range(2)]
    assert [r.stdout.split() for r in runs] == [["2", "True", "True"], ["2", "False", "False"]]


def test_another_numeric_library_is_another_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Summaries written with one pandas are not read by another: the fingerprint in every key
    holds the versions of the libraries the numbers go through."""
    import tilescope.rank_cache as rc

    rc._code_fingerprint.cache_clear()
    before = rc._code_fingerprint()
    real = rc._version_of
    monkeypatch.setattr(rc, "_version_of", lambda name: "0.0" if name == "pandas" else real(name))
    rc._code_fingerprint.cache_clear()
    try:
        assert rc._code_fingerprint() != before
    finally:
        monkeypatch.undo()
        rc._code_fingerprint.cache_clear()
    assert rc._code_fingerprint() == before


def test_a_process_that_loaded_duckdb_does_not_fork_its_workers() -> None:
    """DuckDB's native threads do not survive a fork (a forked worker crashed collecting an
    inherited connection): the pool then starts from the preloading server. A fresh process, as
    `analyze` is, still forks."""
    import subprocess
    import sys

    import duckdb

    import tilescope.rankwork as rw

    duckdb.connect().execute("select 1").fetchall()
    pool = rw._process_pool(1)
    try:
        assert pool._mp_context.get_start_method() == "forkserver"  # type: ignore[attr-defined]
    finally:
        pool.shutdown()
    probe = ("import tilescope.rankwork as rw; p = rw._process_pool(1); "
             "print(p._mp_context.get_start_method()); p.shutdown()")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["fork"], out.stderr
