"""The per-rank work of a multi-rank run, run where there is room: in process, in a local process
pool, or on a Dask distributed cluster.

`tilescope analyze PATH` on a path that holds several inputs (one `*_ascend_pt` per rank, rank
databases, `PROF_*` folders) reduces each input, in its own worker, to a `UnitResult`: per rank the
report's part (`tilescope.report.data.profile_part`: summary, findings, skipped rules; JSON) and its
rows of the cross-rank model (`tilescope.cluster.RankTables`: steps, communication operators,
links, per-kernel summary; small tables). Only those cross the process boundary — a rank's kernel
table never does — and `tilescope.rank_cache` keeps them as Parquet + JSON, so a second analysis of
the same run reads only the summaries. The driver then numbers the ranks (`load.resolve_ranks`, as
for inputs loaded in one process), builds the model (`cluster.assemble_cluster`) and runs the
cross-rank rules on it. The same `run_unit` runs everywhere, so the report does not depend on
where it ran (tests/cluster/test_rankwork.py compares serial, pool, Dask and cached runs byte for byte).

Where the work runs (`plan_executor`):
  --scheduler ADDRESS / TILESCOPE_SCHEDULER  a Dask distributed scheduler (`tcp://host:8786`); its
            workers need tilescope installed and the ranks' paths readable (a shared filesystem);
            tilescope.rankwork_dask bounds and words everything around the client
  --jobs N  N local worker processes (1: in this process); default: the cores this process may
            use, fewer when the ranks' estimated peak memory would not fit in what is available
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import resource
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilescope.analysis import analyze
from tilescope.arrowpool import arrow_returns_freed_memory
from tilescope.chips import CHIPS, family_chip
from tilescope.config import Config
from tilescope.engine import run_cluster_rules
from tilescope.errors import NoProfileFoundError, ProfileFormatError, TilescopeError, UsageError
from tilescope.gcpause import gc_paused
from tilescope.io.bad_rows import strict_rows
from tilescope.io.detect import PATH_MISSING, detect
from tilescope.io.failures import LoadFailure, left_out_warnings, rank_of_failed
from tilescope.io.load import load_unit, manifest_dir_of, resolve_ranks
from tilescope.io.remote import RemoteInputError, RemoteStageError, relabel, remote_limits, stage
from tilescope.lifeline import die_with_parent
from tilescope.rank_cache import RankCache, input_bytes, input_rows
from tilescope.rankjobs import RankPart, UnitJob, UnitResult
from tilescope.rankwork_dask import SCHEDULER_ENV, check_address, run_dask, workers_cannot_see

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from tilescope.cluster import RankTables
    from tilescope.io.detect import Detected

# A worker's peak memory, estimated from its input's bytes on disk: `analyze` on a 943 MB
# kernel_details.csv peaks at ~1.85 GB (docs/benchmarks.md), plus the interpreter and libraries.
PEAK_PER_INPUT_BYTE = 2.0
WORKER_BASE_BYTES = 250 * 2**20


def run_unit(job: UnitJob) -> UnitResult:
    """Load one input, run the per-profile rules on each of its ranks and reduce each to its
    report part and cross-rank rows. An input that cannot be read (its kernel table, its
    timeline) is a failure naming its file and row; its step and communication files still count."""
    arrow_returns_freed_memory(job.input_bytes)
    started = time.process_time()
    with strict_rows(job.strict):
        result = _run_remote(job) if job.url is not None else _run_unit(job)
    if job.cache_root is not None and job.cache_key is not None and cacheable(result):
        RankCache(job.cache_root).put(job.cache_key, result)
    result.cpu_s = time.process_time() - started
    result.worker_peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return result


def _run_remote(job: UnitJob) -> UnitResult:
    """A rank folder at a URL: copied here, analysed as a local input, every path in the result
    written back as the URL (tilescope.io.remote), the copy removed. A copy that fails (stage's
    one line) leaves this rank out, as an unreadable local rank is."""
    assert job.url is not None
    try:
        with stage(job.url, job.remote) as local:
            return _analyze_staged(job, local, job.url)
    except RemoteInputError as exc:
        return _left_out(job, job.url, exc)


def cacheable(result: UnitResult) -> bool:
    """Not a rank left out for how it was reached (a deadline, the byte cap, a failed read: the
    next run tries again), whatever it holds."""
    return result.failure is None or not isinstance(result.failure.error, RemoteStageError)


def _left_out(job: UnitJob, url: str, error: TilescopeError) -> UnitResult:
    # deferred: cluster (pandas) only where used
    from tilescope.cluster import RankTables

    return UnitResult(job.index, failure=LoadFailure(url, error, None), failure_tables=RankTables.empty())


def _analyze_staged(job: UnitJob, local: Path, url: str) -> UnitResult:
    try:
        found = detect(local)
        if len(found) != 1:
            raise NoProfileFoundError(url, f"{len(found)} inputs in one rank folder; one expected")
    except (ProfileFormatError, NoProfileFoundError) as exc:
        return _left_out(job, url, RemoteInputError(relabel(exc.one_line(), str(local), url)))
    result = _run_unit(dataclasses.replace(job, det=found[0], url=None))
    here = str(local)
    for rp in result.parts:
        rp.part = relabel(rp.part, here, url)
        rp.path = url
        rp.tables.relabel(here, url)
    if result.failure is not None:
        f = result.failure
        said = RemoteInputError(relabel(f.error.one_line(), here, url))
        result.failure = LoadFailure(url, said, f.rank)
        if result.failure_tables is not None:
            result.failure_tables.relabel(here, url)
    return result


def _run_unit(job: UnitJob) -> UnitResult:
    # deferred: cluster (pandas) and report.data (numpy) only where used
    from tilescope.cluster import rank_tables
    from tilescope.report.data import profile_part

    assert job.det is not None
    try:
        if not job.det.path.exists():  # as a Dask worker that does not mount the ranks' filesystem finds it
            raise NoProfileFoundError(job.det.path, PATH_MISSING)
        profiles = load_unit(job.det, job.chip, job.manifest_dir, True, job.kernel_columns)
        parts = []
        for j, prof in enumerate(profiles):
            result = analyze(prof, job.config)
            _ = prof.timeline  # a broken timeline no rule looked at is this input's error too
            with gc_paused():
                part = profile_part(prof, result, job.timeline_cap if j == 0 else 0)
            tables = rank_tables(prof.source.path, prof.kernels)
            parts.append(RankPart(part, prof.rank, prof.source.path, tables))
        return UnitResult(job.index, parts)
    except (ProfileFormatError, NoProfileFoundError) as exc:
        failure = LoadFailure(job.det.path, exc, rank_of_failed(job.det))
        return UnitResult(job.index, failure=failure, failure_tables=rank_tables(job.det.path, None))


# ---- where the work runs -------------------------------------------------------------------------


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def available_memory() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None where there is no such file)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def default_workers(input_bytes: Sequence[int]) -> int:
    """Local workers for inputs of these sizes: one per usable core, no more than inputs, and no
    more than the available memory holds at the largest input's estimated peak."""
    if not input_bytes:
        return 1
    workers = min(usable_cores(), len(input_bytes))
    free = available_memory()
    if free is not None:
        peak = WORKER_BASE_BYTES + PEAK_PER_INPUT_BYTE * max(input_bytes)
        workers = min(workers, max(1, int(free // peak)))
    return workers


@dataclass(frozen=True)
class Executor_:
    """Where `run_jobs` runs: `kind` "serial", "pool" (`workers` processes) or "dask" (`address`,
    given by `named`: the flag or the environment variable, as every message about it says)."""

    kind: str
    workers: int = 1
    address: str | None = None
    named: str = "--scheduler"


def plan_executor(jobs: int | None, scheduler: str | None, input_bytes: Sequence[int]) -> Executor_:
    """`--scheduler` (or TILESCOPE_SCHEDULER) wins; else `--jobs N` (1: this process); else
    `default_workers`. A single input always runs in this process."""
    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs {jobs}: expected a number of worker processes >= 1")
    if scheduler:
        return Executor_("dask", address=check_address(scheduler, "--scheduler"))
    from_env = os.environ.get(SCHEDULER_ENV)
    if from_env:
        return Executor_("dask", address=check_address(from_env, SCHEDULER_ENV), named=SCHEDULER_ENV)
    workers = jobs if jobs is not None else default_workers(input_bytes)
    workers = min(workers, len(input_bytes))
    return Executor_("pool", workers=workers) if workers > 1 else Executor_("serial")


def run_jobs(jobs: Sequence[UnitJob], where: Executor_) -> list[UnitResult]:
    """`run_unit` of every job, results in the jobs' order."""
    if not jobs:
        return []
    if where.kind == "dask":
        assert where.address is not None
        return run_dask(run_unit, jobs, where.address, where.named)
    if where.kind == "pool" and len(jobs) > 1:
        with _process_pool(min(where.workers, len(jobs))) as pool:
            return list(pool.map(run_unit, jobs))
    return [run_unit(j) for j in jobs]


def _process_pool(workers: int) -> Executor:
    """Worker processes that start with the analysis imported (pandas, pyarrow, the rules: ~1 s
    per worker otherwise). Forked from this process when it runs no other thread (the command
    line: it has imported the rules to check --select, and read no table yet); else forked from a
    server that imports them once (`tilescope.rankwork_preload`), since a fork would copy another
    thread's state (an Arrow reader's lock) mid-flight.

    Every worker ends with its parent (tilescope.lifeline): `kill -9` of `analyze` left them running.

    DuckDB's threads are native, not Python's: a process that has loaded it (the dashboard, a test
    run, an API caller; never `analyze` itself) may hold a connection whose copy in a forked child
    joins threads the child does not have when it is collected — a worker crashed so (SIGSEGV in
    duckdb::TaskScheduler::~TaskScheduler, the pool broken). Such a process uses the server too."""
    alone = threading.active_count() == 1 and "duckdb" not in sys.modules
    if alone and "fork" in mp.get_all_start_methods():
        # deferred: pandas, pyarrow and the rules, imported only when workers are forked from here
        import tilescope.rankwork_preload  # noqa: F401  (what the workers inherit)

        return ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("fork"),
                                   initializer=die_with_parent, initargs=(os.getpid(),))
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["tilescope.rankwork_preload"])
    # a worker is then the server's child: it watches this process (the server ends after it)
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=die_with_parent,
                               initargs=(os.getpid(),))


# ---- the driver ----------------------------------------------------------------------------------


@dataclass
class RankRun:
    """Every input under PATH, reduced: the loaded ranks' parts in input order, the inputs left
    out, and the cross-rank model with its rules' result."""

    parts: list[dict[str, Any]]
    failures: list[LoadFailure]
    cluster: Any  # tilescope.cluster.Cluster
    cluster_result: Any  # tilescope.engine.AnalysisResult
    cached: int = 0  # inputs read from the cache
    cpu_s: list[float] = field(default_factory=list)  # per input analysed now (not cached)
    worker_peak_kib: list[int] = field(default_factory=list)


def analyze_inputs(
    found: Sequence[Detected | str],
    path: Path | str,
    config: Config,
    chip: str | None,
    kernel_columns: Sequence[str] | None,
    where: Executor_,
    cache: Any = None,  # tilescope.rank_cache.RankCache or None
    timeline_cap: int | None = None,
    rows: Sequence[list[tuple[Any, ...]]] | None = None,
) -> RankRun:
    """Run `run_unit` on every input (cached ones read back), number the ranks, build the
    cross-rank model and run its rules. Raises the first input's error when none could be read.
    `rows`: each input's files (`rank_cache.input_rows`) when the caller listed them already."""
    # deferred: cluster (pandas) and report.data (numpy) only where used
    from tilescope.cluster import RankInfo, assemble_cluster
    from tilescope.report.data import TIMELINE_CAP

    cap = TIMELINE_CAP if timeline_cap is None else timeline_cap
    columns = tuple(kernel_columns) if kernel_columns is not None else None
    manifest_dir = manifest_dir_of(path) if isinstance(path, Path) else None
    jobs = [_job(i, d, chip, manifest_dir, config, columns, cap if i == 0 else 0)
            for i, d in enumerate(found)]
    if rows is not None:
        jobs = [dataclasses.replace(j, input_bytes=input_bytes(rows[j.index])) for j in jobs]
    results: dict[int, UnitResult] = {}
    keys: dict[int, str] = {}
    if cache is not None and not cache.usable():  # another user's or writable by others: warned
        cache = None
    if cache is not None:
        for job in jobs:
            listed = rows[job.index] if rows is not None else input_rows(job.det or str(job.url))
            keys[job.index] = cache.key(job, listed)
            # what the input's files could produce bounds what its entry may hold
            hit = cache.get(keys[job.index], input_bytes(listed))
            if hit is not None:
                hit.index = job.index
                results[job.index] = hit
    todo = [j for j in jobs if j.index not in results]
    local = where.kind != "dask"  # Dask workers may not see this machine's cache directory
    if cache is not None and local:
        todo = [dataclasses.replace(j, cache_root=cache.root, cache_key=keys[j.index]) for j in todo]
    fresh = run_jobs(todo, where)
    for res in fresh:
        results[res.index] = res
        if cache is not None and not local and cacheable(res):
            cache.put(keys[res.index], res)
    ordered = [results[j.index] for j in jobs]
    loaded = [(r.index, p) for r in ordered for p in r.parts]
    failed: list[tuple[int, LoadFailure]] = [(r.index, r.failure) for r in ordered if r.failure is not None]
    if where.kind == "dask":
        assert where.address is not None
        workers_cannot_see([f for _, f in failed], where.address, where.named)
    if not loaded:
        raise failed[0][1].error
    # the timeline chart shows the first loaded rank: when the first input failed, that rank's
    # input is run again for its launches (rare: a broken rank 0)
    if cap > 0 and not loaded[0][1].has_timeline:
        first = loaded[0][0]
        redo = run_unit(_job(first, found[first], chip, manifest_dir, config, columns, cap))
        loaded = [(i, p) for i, p in loaded if i != first]
        loaded = [(first, p) for p in redo.parts] + loaded
        loaded.sort(key=lambda t: t[0])
    resolve_ranks(loaded, failed, path_of=lambda p: Path(str(p.path)))
    failures = [f for _, f in failed]
    warnings = left_out_warnings(failures)
    parts = []
    for _, rp in loaded:
        entry = rp.part["entry"]
        entry["rank"] = rp.rank
        at = int(rp.part.get("load_warnings", len(entry["warnings"])))
        entry["warnings"] = [*entry["warnings"][:at], *warnings, *entry["warnings"][at:]]
        parts.append(rp.part)
    infos: list[tuple[RankInfo, RankTables]] = [
        (RankInfo(_rank_or(rp.rank, pos), rp.path, True), rp.tables) for pos, (_, rp) in enumerate(loaded)
    ]
    for j, (index, f) in enumerate(failed):
        tables = results[index].failure_tables
        assert tables is not None
        rank = f.rank if f.rank is not None else len(loaded) + j
        infos.append((RankInfo(rank, f.path, False, f.error.one_line()), tables))
    model = assemble_cluster(infos)
    result = run_cluster_rules(model, _chip_of(parts[0]), config)
    return RankRun(parts, failures, model, result, cached=len(jobs) - len(todo),
                   cpu_s=[r.cpu_s for r in fresh], worker_peak_kib=[r.worker_peak_kib for r in fresh])


def _job(index: int, found: Detected | str, chip: str | None, manifest_dir: Path | None, config: Config,
         columns: tuple[str, ...] | None, cap: int) -> UnitJob:
    """The job of one input: a detected local one, or the URL of a remote rank folder."""
    if isinstance(found, str):
        return UnitJob(index, None, chip, None, config, columns, cap, url=found, remote=remote_limits())
    return UnitJob(index, found, chip, manifest_dir, config, columns, cap)


def _chip_of(part: dict[str, Any]) -> Any:
    """The first rank's chip for the cross-rank rules' context, by the name its report part
    records (no TS6xx rule reads a chip figure: they compare the ranks with each other)."""
    name = str((part["entry"].get("chip") or {}).get("name") or "")
    return family_chip(name) or next(iter(CHIPS.values()))


def _rank_or(rank: int | None, position: int) -> int:
    return rank if rank is not None else position
