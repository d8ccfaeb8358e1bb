"""`tilescope analyze PATH`: run every rule whose inputs the profile has and report the findings."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tilescope.arrowpool import arrow_returns_freed_memory
from tilescope.atomic import write_text_atomic
from tilescope.commands import CHIP_HELP, STRICT_HELP, honours_strict
from tilescope.config import Config, load_config
from tilescope.engine import discover_rules, run_cluster_rules
from tilescope.errors import GateTrippedError, UsageError
from tilescope.extras import require
from tilescope.findings import SEVERITY_RANK, Finding, Severity
from tilescope.text.terminal import WIDTH_HELP, output_width, write_stdout

if TYPE_CHECKING:  # tilescope.profile imports pandas: not needed for `analyze --help`
    from tilescope.io.failures import LoadFailure
    from tilescope.profile import Profile

FORMATS = ("text", "json", "md", "html", "sarif")
_NOT_A_TERMINAL = io.StringIO()  # -o FILE: wrapped only at --width, like a pipe


def load_profiles(path: Path, chip: str | None) -> list[Profile]:
    """All profiles under PATH (one per rank); tests replace this to feed canonical tables.

    The result is `tilescope.io.load.LoadedProfiles`: its `failures` name the profiles under PATH
    that could not be read (a plain list from a test means none)."""
    # deferred: analysis and io.load only when this command runs; `tilescope --help` imports every command
    #   module
    from tilescope.analysis import kernel_columns_read
    from tilescope.io.load import load_profiles as _load

    arrow_returns_freed_memory()
    # the kernel-table rules run while a large trace_view.json is still being read; `build` makes
    # sure every timeline is resolved (a broken one is bad input, exit 2) before any report.
    # Only the kernel columns the rules and the report read are kept (streamed from a kernel CSV)
    return _load(path, chip=chip, lazy_timeline=True, kernel_columns=kernel_columns_read())


def _codes(value: str | None) -> list[str]:
    return [c.strip().upper() for c in (value or "").split(",") if c.strip()]


def check_rule_prefixes(cfg: Config, given: dict[str, list[str]] | None = None) -> None:
    """Exit 2 naming a `select`/`ignore` code prefix that matches no rule: `--select TS9` (a typo,
    or a rule that does not exist) would otherwise run no rule at all and pass every CI gate.
    `given` holds the prefixes typed on the command line (named as flags in the message); the
    others came from the configuration file."""
    codes = [r.code for r in discover_rules()]
    for key in ("select", "ignore"):
        for prefix in getattr(cfg, key):
            if any(code.startswith(prefix) for code in codes):
                continue
            where = f"--{key}" if prefix in (given or {}).get(key, []) else f"{cfg.source}: {key}"
            raise UsageError(f"{where} {prefix!r} matches no rule; the rules are {', '.join(codes)} "
                             "('tilescope rules' describes them)")


def also_outputs(specs: list[str] | None, output: Path | None) -> list[tuple[str, Path]]:
    """`--also FORMAT=FILE` values as (format, file), checked before the analysis: a known format,
    a file, and no two reports (`-o` among them) written to one file."""
    out: list[tuple[str, Path]] = []
    for spec in specs or []:
        fmt, eq, file = spec.partition("=")
        if not eq or not file or fmt not in FORMATS:
            raise UsageError(f"--also {spec!r}: expected FORMAT=FILE with FORMAT one of {', '.join(FORMATS)}")
        out.append((fmt, Path(file)))
    targets = [*([output] if output is not None else []), *(f for _, f in out)]
    seen: set[Path] = set()
    for target in targets:
        key = Path(os.path.abspath(target))
        if key in seen:
            raise UsageError(f"{target}: two reports would be written to this one file")
        seen.add(key)
    return out


def write_reports(report: dict[str, Any], outputs: list[tuple[str, Path | None, Any]],
                  width: int | None) -> str | None:
    """Render `report` once per (format, file, renderer) and write each atomically (file None: to
    stdout); the Markdown written, if one was, for the job summary (not rendered twice)."""
    md = None
    for fmt, file, render in outputs:
        opts: dict[str, Any] = {}
        if fmt == "text":  # a file is no terminal: no colour, wrapped only at --width, like a pipe
            opts["color"] = file is None and sys.stdout.isatty()
            opts["width"] = output_width(width, None if file is None else _NOT_A_TERMINAL)
        text = render(report, **opts)
        if fmt == "md":
            md = text
        if file is not None:
            write_text_atomic(file, text)
        else:
            write_stdout(text)  # `| head` is no error, and --fail-on still decides
    return md


def renderer(fmt: str) -> Any:
    """`tilescope.report.render_<fmt>.render`; exit 2 when that renderer is not installed yet."""
    name = f"tilescope.report.render_{fmt}"
    if importlib.util.find_spec(name) is None:
        raise UsageError(f"format {fmt} not available yet")
    if fmt == "html":  # the report's charts are plotly's, and so is the script it embeds
        require("html", "--format html")
    return importlib.import_module(name).render


@dataclass
class RankOptions:
    """Where the per-rank work of a multi-rank PATH runs and whether its summaries are cached
    (tilescope.rankwork, tilescope.rank_cache); a single profile always runs in this process."""

    jobs: int | None = None
    scheduler: str | None = None
    cache_dir: Path | None = None
    use_cache: bool = True
    # the cache's size limit in bytes (0: store nothing); None: $TILESCOPE_CACHE_MAX_SIZE or 2 GiB
    cache_max_bytes: int | None = None
    # set by `cached_run`, so that `build` lists nothing twice: the inputs under PATH (`inputs_of`);
    # when it found no stored report for several, their files and the key the report goes under
    found: list[Any] | None = None
    rows: list[list[tuple[Any, ...]]] | None = None
    run_key: str | None = None


def inputs_of(path: Path | str) -> list[Any]:
    """What PATH holds, one item per input: the rank folders at a URL (`tilescope.io.remote`; a
    str here is a URL), the detected inputs of a local folder, none for a file (one input)."""
    if isinstance(path, str):
        # deferred: io.remote only when this command runs; `tilescope --help` imports every command module
        from tilescope.io.remote import list_inputs

        return list_inputs(path)
    # deferred: io.detect only when this command runs; `tilescope --help` imports every command module
    from tilescope.io.detect import detect

    return list(detect(path)) if path.is_dir() else []


def cached_run(
    path: Path | str, cfg: Config, chip: str | None, with_advisor: bool, ranks: RankOptions
) -> tuple[dict[str, Any], list[LoadFailure]] | None:
    """The stored report of a multi-rank PATH analysed before with nothing changed (its files,
    the configuration, `--chip`, tilescope itself: `RankCache.run_key`), and the inputs it left
    out; None otherwise (then `ranks` carries the inputs, their files and the key for `build`).

    Why a whole-run entry beside the per-input ones: a repeated analysis (another `--format`,
    a CI re-run) then imports neither pandas nor the rules, which alone cost ~0.5 s of a 0.9 s
    analysis of 64 ranks from their summaries. Only `generated_at` is new."""
    if not ranks.use_cache or with_advisor:
        return None
    # deferred: rank_cache and report.meta only when this command runs; `tilescope --help` imports every
    #   command module
    from tilescope.rank_cache import RankCache, default_cache_dir, input_bytes, input_rows
    from tilescope.report.meta import TIMELINE_CAP, now_stamp

    found = ranks.found = inputs_of(path)
    if len(found) < 2:
        return None
    rows = [input_rows(d) for d in found]
    cache = RankCache(ranks.cache_dir or default_cache_dir())
    key = cache.run_key(path, found, rows, cfg, chip or cfg.chip, TIMELINE_CAP)
    hit = cache.get_run(key, sum(input_bytes(r) for r in rows))
    if hit is None:
        ranks.rows, ranks.run_key = rows, key
        return None
    hit.report["generated_at"] = now_stamp()
    return hit.report, hit.failures


def build(
    path: Path | str,
    cfg: Config,
    chip: str | None,
    with_advisor: bool,
    failures: list[LoadFailure] | None = None,
    ranks: RankOptions | None = None,
) -> dict[str, Any]:
    """The report of every profile under PATH; the ones that could not be read (when PATH holds
    several) are appended to `failures`. Several inputs under PATH (ranks) are each analysed by
    a worker (`tilescope.rankwork`); one input, in this process. A URL (`s3://bucket/job`, fsspec)
    is a folder of rank folders, each staged by its worker (`tilescope.io.remote`)."""
    if isinstance(path, str):
        # deferred: io.remote only when this command runs; `tilescope --help` imports every command module
        from tilescope.io.remote import is_url

        if not is_url(path):
            path = Path(path)
        elif with_advisor:
            raise UsageError(f"{path}: --with-msprof-advisor reads local folders only")
    ranks = ranks or RankOptions()
    found = ranks.found if ranks.found is not None else inputs_of(path)
    if isinstance(path, str) or len(found) > 1:  # a URL may hold one rank: it is staged all the same
        return _build_ranks(path, found, cfg, chip, with_advisor, failures, ranks)
    # deferred: report.data (numpy) only where used; analysis only when this command runs; `tilescope --help`
    #   imports every command module
    from tilescope.analysis import analyze
    from tilescope.report.data import build_report

    profiles = load_profiles(path, chip or cfg.chip)
    if failures is not None:
        failures.extend(getattr(profiles, "failures", []))
    pairs = [(p, analyze(p, cfg)) for p in profiles]
    for p in profiles:
        _ = p.timeline  # raises the ProfileFormatError of a broken timeline no rule looked at
    extra, advisor = _advisor(path, with_advisor, [f for _p, r in pairs for f in r.findings])
    cluster = None
    ranks_found = len(profiles) + len(getattr(profiles, "failures", []))
    if ranks_found > 1:  # an msprof run of several devices: the ranks side by side, the TS6xx rules
        # deferred: cluster (pandas) only where used; `tilescope --help` imports every command module
        from tilescope.cluster import build_cluster

        model = build_cluster(profiles, getattr(profiles, "failures", []))
        cluster = (model, run_cluster_rules(model, profiles[0].chip, cfg))
    return build_report(pairs, extra_findings=extra, advisor=advisor, cluster=cluster)


def _advisor(
    path: Path, with_advisor: bool, ours: list[Finding]
) -> tuple[list[Finding], dict[str, Any] | None]:
    if not with_advisor:
        return [], None
    # deferred: msprof_advisor only when this command runs; `tilescope --help` imports every command module
    from tilescope.msprof_advisor import run_advisor, to_findings

    advisor = run_advisor(path)
    extra, dup = to_findings(advisor, ours)
    advisor["duplicates"] = dup
    return extra, advisor


def _build_ranks(
    path: Path | str,
    found: list[Any],
    cfg: Config,
    chip: str | None,
    with_advisor: bool,
    failures: list[LoadFailure] | None,
    opts: RankOptions,
) -> dict[str, Any]:
    # deferred: report.data (numpy) only where used; analysis, gcpause, rank_cache, rank_cache_prune and
    #   rankwork only when this command runs; `tilescope --help` imports every command module
    from tilescope.analysis import kernel_columns_read
    from tilescope.gcpause import gc_paused
    from tilescope.rank_cache import RankCache, default_cache_dir, input_bytes, input_rows
    from tilescope.rank_cache_prune import max_cache_bytes
    from tilescope.rankwork import analyze_inputs, plan_executor
    from tilescope.report.data import add_cluster, assemble_report

    # listed once: the memory estimate and the cache keys
    rows = opts.rows if opts.rows is not None else [input_rows(d) for d in found]
    where = plan_executor(opts.jobs, opts.scheduler, [input_bytes(r) for r in rows])
    limit = 0 if not opts.use_cache else (
        opts.cache_max_bytes if opts.cache_max_bytes is not None else max_cache_bytes())
    cache = RankCache(opts.cache_dir or default_cache_dir()) if limit > 0 else None
    run = analyze_inputs(found, path, cfg, chip or cfg.chip, kernel_columns_read(), where, cache, rows=rows)
    if failures is not None:
        failures.extend(run.failures)
    # the advisor's findings are matched against ours: rebuilt as Finding objects only for it
    ours = [Finding.from_dict(f) for p in run.parts for f in p["findings"]] if with_advisor else []
    extra, advisor = _advisor(Path(path), with_advisor, ours)
    with gc_paused():
        report = assemble_report(run.parts, extra, advisor)
        if len(run.parts) + len(run.failures) > 1:  # a URL may hold one rank
            add_cluster(report, run.cluster, run.cluster_result)
    if cache is not None:
        # deferred: io.remote only when this command runs; `tilescope --help` imports every command module
        from tilescope.io.remote import RemoteStageError

        staged_ok = not any(isinstance(f.error, RemoteStageError) for f in run.failures)
        if opts.run_key is not None and not with_advisor and staged_ok:  # a deadline: try again next run
            cache.put_run(opts.run_key, report, run.failures)
        # after every entry of this run is written (workers, this process for Dask, the run's own
        # report); the report is built from results in memory, so pruning this run's entries
        # changes nothing. A cache that cannot be pruned is skipped, as one that cannot be written.
        with contextlib.suppress(OSError):
            cache.prune_if_over(limit)
    return report


def register(app: typer.Typer) -> None:
    @app.command("analyze")
    @honours_strict
    def analyze_cmd(
        path: Annotated[
            str, typer.Argument(help="Profiler output directory, kernel table, timeline or bundle; or "
                                "a URL fsspec reads (s3://bucket/job) holding one folder per rank "
                                "(each listing and read within $TILESCOPE_URL_TIMEOUT, default 60 s; "
                                "at most $TILESCOPE_URL_MAX_BYTES per rank, default 32G).")
        ],
        fmt: Annotated[str, typer.Option("--format", "-f", help="text, json, md, html or sarif.")] = "text",
        output: Annotated[
            Path | None, typer.Option("-o", "--output", help="Write to FILE (atomically).")
        ] = None,
        also: Annotated[
            list[str] | None,
            typer.Option("--also", metavar="FORMAT=FILE", help="Also write the report as FORMAT to FILE "
                         "(atomically), from the same analysis; repeat for more (md=report.md "
                         "--also sarif=tilescope.sarif)."),
        ] = None,
        chip: Annotated[str | None, typer.Option("--chip", help=CHIP_HELP)] = None,
        config: Annotated[
            Path | None, typer.Option("--config", help="tilescope.toml / pyproject.toml.")
        ] = None,
        select: Annotated[
            str | None, typer.Option("--select", help="Only these code prefixes, comma-separated.")
        ] = None,
        ignore: Annotated[str | None, typer.Option("--ignore", help="Skip these code prefixes.")] = None,
        fail_on: Annotated[
            str | None, typer.Option("--fail-on", help="Exit 1 on a finding at/above high|medium|low.")
        ] = None,
        fail_on_stale: Annotated[
            bool,
            typer.Option("--fail-on-stale", help="Exit 1 when a bundle's kernel file (under the current "
                         "folder) no longer has the sha256 its manifest recorded: the run is of an earlier "
                         "kernel."),
        ] = False,
        with_msprof_advisor: Annotated[
            bool, typer.Option("--with-msprof-advisor", help="Also run msprof-analyze's advisor.")
        ] = False,
        width: Annotated[
            int | None, typer.Option("--width", metavar="N", min=20, help=WIDTH_HELP)
        ] = None,
        jobs: Annotated[
            int | None,
            typer.Option("--jobs", "-j", metavar="N", help="Ranks analysed by N local worker processes "
                         "(1: in this process; default: one per core, fewer if memory is short)."),
        ] = None,
        scheduler: Annotated[
            str | None,
            typer.Option("--scheduler", metavar="ADDRESS", help="Run the per-rank work on this Dask "
                         "distributed scheduler (tcp://host:8786; or set TILESCOPE_SCHEDULER)."),
        ] = None,
        cache_dir: Annotated[
            Path | None,
            typer.Option("--cache-dir", metavar="DIR", help="Where per-rank summaries are cached "
                         "(default: $TILESCOPE_CACHE_DIR or ~/.cache/tilescope/ranks)."),
        ] = None,
        no_cache: Annotated[
            bool, typer.Option("--no-cache", help="Neither read nor write per-rank summaries (the cache's "
                               "size limit: $TILESCOPE_CACHE_MAX_SIZE, default 2G; `tilescope cache info`).")
        ] = False,
        github_summary: Annotated[
            bool,
            typer.Option(
                "--github-summary",
                help="Also append the Markdown report to $GITHUB_STEP_SUMMARY (GitHub Actions job summary).",
            ),
        ] = False,
        strict: Annotated[bool, typer.Option("--strict", help=STRICT_HELP)] = False,
    ) -> None:
        """Diagnose a profile: findings ordered by estimated saving, and the rules that could not run.

        When PATH holds several profiles (ranks) and some cannot be read, the others are reported,
        each unreadable one gets a warning line on stderr, and the exit code is 2 (partial: some
        inputs could not be read), also when --fail-on trips on the others.

        Several reports of one analysis: --also FORMAT=FILE, once per report (the gates decide
        once, for all of them).

        Example: tilescope analyze runs/fa-v1 --format md -o report.md --fail-on high --github-summary
        """
        if fmt not in FORMATS:
            raise UsageError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
        if fail_on is not None and fail_on not in ("high", "medium", "low"):
            raise UsageError("--fail-on takes high, medium or low")
        render = renderer(fmt)
        # a missing extra exits 3 before any work
        extra = [(f, file, renderer(f)) for f, file in also_outputs(also, output)]
        if github_summary and not os.environ.get("GITHUB_STEP_SUMMARY"):
            # checked before the analysis: a CI step should fail at once, not after minutes of work
            raise UsageError(
                "--github-summary: GITHUB_STEP_SUMMARY is not set (it is set inside GitHub Actions)"
            )
        # deferred: io.remote only when this command runs; `tilescope --help` imports every command module
        from tilescope.io.remote import is_url

        target: Path | str = path if is_url(path) else Path(path)
        if isinstance(target, Path) and not target.exists():
            raise UsageError(f"{path}: no such file or directory")
        cfg = load_config(config)
        if select:
            cfg.select = _codes(select)
        if ignore:
            cfg.ignore = [*cfg.ignore, *_codes(ignore)]
        failures: list[LoadFailure] = []
        # deferred: rank_cache_prune only when this command runs; `tilescope --help` imports every command
        #   module
        from tilescope.rank_cache_prune import max_cache_bytes

        # a bad $TILESCOPE_CACHE_MAX_SIZE is said before the analysis, not after it; 0: no cache
        limit = None if no_cache else max_cache_bytes()
        ranks = RankOptions(jobs=jobs, scheduler=scheduler, cache_dir=cache_dir,
                            use_cache=not no_cache and limit != 0, cache_max_bytes=limit)
        # a run stored under this configuration passed the prefix check when it was analysed
        stored = cached_run(target, cfg, chip, with_msprof_advisor, ranks)
        if stored is not None:
            report, failures = stored
        else:
            check_rule_prefixes(cfg, {"select": _codes(select), "ignore": _codes(ignore)})
            report = build(target, cfg, chip, with_msprof_advisor, failures, ranks)
        for failure in failures:
            typer.echo(failure.warning_line(), err=True)
        md = write_reports(report, [(fmt, output, render), *extra], width)
        if github_summary:
            # deferred: report.render_md only when this command runs; `tilescope --help` imports every command
            #   module
            from tilescope.report.render_md import append_github_summary

            append_github_summary(md if md is not None else renderer("md")(report))
        gate: GateTrippedError | None = None
        if fail_on is not None:
            cut = SEVERITY_RANK[fail_on]
            hits = [f for f in report["findings"] if SEVERITY_RANK.get(f["severity"], 0) >= cut]
            if hits:
                gate = GateTrippedError(
                    f"{len(hits)} finding(s) at or above {fail_on} "
                    f"(first: {hits[0]['code']} {hits[0]['slug']})"
                )
        if fail_on_stale and gate is None and isinstance(target, Path):
            gate = _stale_gate(target)
        if failures:
            # deferred: io.failures only when this command runs; `tilescope --help` imports every command
            #   module
            from tilescope.io.failures import PartialLoadError

            # bad input outranks the gate: the report covers only part of PATH
            if gate is not None:
                typer.echo(gate.terminal_line(), err=True)
            raise PartialLoadError(failures, len(report["profiles"]))
        if gate is not None:
            raise gate


def _stale_gate(target: Path) -> GateTrippedError | None:
    """`--fail-on-stale`: the gate for a bundle (at `target` or one folder under it) collected from
    an earlier version of its kernel file (docs/ci.md, Stale bundles)."""
    # deferred: io.bundle only when this command runs; `tilescope --help` imports every command module
    from tilescope.io.bundle import stale_bundles

    stale = stale_bundles(target)
    if not stale:
        return None
    more = f" (and {len(stale) - 1} more)" if len(stale) > 1 else ""
    return GateTrippedError(f"stale bundle: {stale[0]}{more}")


__all__ = ["Severity", "arrow_returns_freed_memory", "build", "load_profiles", "register", "renderer"]
