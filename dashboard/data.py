"""The server-side data store: parsed profiles, their reports, and the tables the views page through.

Parse once, render many times (design.md §1): each profile is loaded and analysed once, then kept
here with a DuckDB copy of its kernel table so that a browser request for rows 4,000-4,100 of a
1,000,000-launch profile is one indexed SQL query, not a re-read. The diagnosis (findings, summary)
comes from `tilescope.report.data.build_report`; this module only reshapes it for display.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import pandas as pd

from tilescope.analysis import analyze
from tilescope.cluster import build_cluster
from tilescope.config import load_config
from tilescope.dashboard.paths import PathRejected, RootSet, discover_profiles, discover_runs, is_within
from tilescope.engine import run_cluster_rules
from tilescope.errors import UsageError
from tilescope.io.load import load_profiles, manifest_dir_of
from tilescope.metrics import with_derived_metrics
from tilescope.profile import Profile
from tilescope.report.data import build_report
from tilescope.report.ranks import SCOPE_CLUSTER, cluster_section

if TYPE_CHECKING:
    from tilescope.io.failures import LoadFailure

# Canonical columns shown in the Kernels grid, in this order when present (design.md §3 plus the
# derived metrics of analyzer/metrics.py). Anything else stays on the server.
GRID_COLUMNS = (
    "name",
    "op_type",
    "core_type",
    "stream_id",
    "start_us",
    "duration_us",
    "wait_us",
    "block_dim",
    "mix_block_dim",
    "bound_pipe",
    "sol_pct",
    "sol_bound",
    "cube_share",
    "vector_share",
    "aic_mte1_share",
    "aic_mte2_share",
    "aic_fixpipe_share",
    "aic_scalar_share",
    "aiv_mte2_share",
    "aiv_mte3_share",
    "aiv_scalar_share",
    "cube_utilization_pct",
    "achieved_tflops",
    "achieved_gbps",
    "arithmetic_intensity",
    "bytes_moved",
    "aic_main_mem_read_gbps",
    "aic_main_mem_write_gbps",
    "aiv_main_mem_read_gbps",
    "aiv_main_mem_write_gbps",
    "input_shapes",
    "input_dtypes",
)
# Per-name aggregation of the grouped grid; (output column, SQL aggregate over the launch table).
GROUP_AGGREGATES = (
    ("launches", "count(*)"),
    ("total_us", "sum(duration_us)"),
    ("mean_us", "avg(duration_us)"),
    ("min_us", "min(duration_us)"),
    ("max_us", "max(duration_us)"),
)
GROUP_MEANS = (
    "cube_utilization_pct",
    "cube_share",
    "vector_share",
    "aic_mte2_share",
    "aiv_mte2_share",
    "sol_pct",
    "achieved_tflops",
    "arithmetic_intensity",
)
MAX_LAZY_ENTRIES = 4  # profiles (and runs) picked from --root stay cached; least recently used are dropped
MAX_RANK_DIGITS = 9  # int() of a 5,000-digit text raises ValueError (Python's digit limit)
RANK_SEP = "#"  # a root profile key's rank suffix: "0:runs/r8#3" is rank 3 of what runs/r8 holds


@dataclass
class ProfileEntry:
    """One loaded profile with its report and its query tables."""

    key: str
    label: str
    profile: Profile
    report: dict[str, Any]
    kernels: pd.DataFrame  # canonical + derived columns, plus `_row` (launch index) and `start_us`
    cache: dict[str, Any] = field(default_factory=dict, repr=False)  # per-view derived data (timeline lanes)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _key_locks: dict[str, threading.Lock] = field(default_factory=dict, repr=False)

    def cached(self, key: str, compute: Callable[[], Any]) -> Any:
        """`compute()` once per key; a second caller (the warm-up thread, a request) waits for it."""
        with self._lock:
            lock = self._key_locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self.cache:
                self.cache[key] = compute()
            return self.cache[key]

    @cached_property
    def db(self) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB holding `k` (launches) and `g` (per-name aggregates)."""
        con = duckdb.connect(":memory:", config={"threads": 2})
        frame = self.kernels[[c for c in self.kernels.columns if c in self.grid_columns or c == "_row"]]
        con.register("k_src", frame)
        con.execute("CREATE TABLE k AS SELECT * FROM k_src")
        con.unregister("k_src")
        aggs = [f"{sql} AS {name}" for name, sql in GROUP_AGGREGATES]
        # duration-weighted, as the report's per-kernel rows (tilescope.report.data.kernel_group_stats)
        aggs += [
            f"sum({c} * duration_us) / nullif(sum(CASE WHEN {c} IS NOT NULL THEN duration_us END), 0) AS {c}"
            for c in GROUP_MEANS
            if c in frame.columns
        ]
        firsts = [f"any_value({c}) AS {c}" for c in ("op_type", "core_type") if c in frame.columns]
        con.execute(f"CREATE TABLE g AS SELECT name, {', '.join(firsts + aggs)} FROM k GROUP BY name")
        return con

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A per-request cursor: DuckDB connections are not shared between server threads."""
        with self._lock:
            return self.db.cursor()

    @cached_property
    def grid_columns(self) -> list[str]:
        return [c for c in GRID_COLUMNS if c in self.kernels.columns]

    @cached_property
    def group_columns(self) -> list[str]:
        cols = ["name"] + [c for c in ("op_type", "core_type") if c in self.kernels.columns]
        cols += [n for n, _ in GROUP_AGGREGATES]
        return cols + [c for c in GROUP_MEANS if c in self.kernels.columns]

    @cached_property
    def by_name(self) -> pd.DataFrame:
        """Per kernel name: total time, launches, core type, FLOPs and bytes (for roofline/top lists)."""
        k = self.kernels
        agg: dict[str, tuple[str, str]] = {
            "total_us": ("duration_us", "sum"),
            "launches": ("duration_us", "size"),
        }
        if "core_type" in k:
            agg["core_type"] = ("core_type", "first")
        frame = k
        if "flops" in k and "bytes_moved" in k:
            # a roofline point over the launches with both FLOPs and bytes, as the report's kernel rows
            both = k["flops"].notna() & k["bytes_moved"].notna()
            frame = k.assign(
                roof_flops=k["flops"].where(both), roof_bytes=k["bytes_moved"].where(both),
                roof_us=k["duration_us"].where(both),
            )
            agg.update(
                roof_flops=("roof_flops", "sum"), roof_bytes=("roof_bytes", "sum"), roof_us=("roof_us", "sum")
            )
        for col in ("flops", "bytes_moved"):
            if col in k:
                agg[col] = (col, "sum")
        out = frame.groupby("name", sort=False, observed=True).agg(**agg).reset_index()
        return out.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)

    @property
    def findings(self) -> list[dict[str, Any]]:
        return list(self.report.get("findings", []))

    @property
    def total_device_us(self) -> float:
        """Device time as the report's summary defines it (tilescope.summary), for every view."""
        summary = self.report.get("summary") or {}
        return float(summary.get("total_device_us") or 0.0)


@dataclass
class ClusterEntry:
    """The ranks of one served path side by side: the report's `cluster` section and its
    cross-rank (TS6xx) findings, computed once when the path is loaded (tilescope.cluster)."""

    key: str  # "c0", "c1", ... in the order the paths were given
    label: str
    section: dict[str, Any]  # report["cluster"] (tilescope.report.ranks.cluster_section), JSON values
    findings: list[dict[str, Any]]  # the TS6xx findings as the report lists them, largest saving first
    rank_keys: dict[int, str]  # rank id -> its profile's picker key (ranks that loaded)

    @property
    def slow_rank(self) -> int | None:
        slow = self.section.get("slow_rank")
        return int(slow) if isinstance(slow, int) else None


def build_cluster_entry(
    key: str, label: str, profiles: Sequence[Profile], failures: Sequence[LoadFailure], keys: Sequence[str]
) -> tuple[ClusterEntry, list[Path]]:
    """The cluster model of one path's ranks, its TS6xx rules and the report's `cluster` section
    (the same calls as `tilescope analyze`), and the summary files it read (for the root check).
    `keys[i]` is the picker key of `profiles[i]`."""
    model = build_cluster(profiles, failures)
    result = run_cluster_rules(model, profiles[0].chip, load_config())
    # the rank a profile stands for, as build_cluster numbers it (its position when it has none)
    pairs = enumerate(zip(profiles, keys, strict=True))
    rank_keys = {(p.rank if p.rank is not None else i): k for i, (p, k) in pairs}
    findings = [{**f.to_dict(), "rank": f.evidence.get("rank"), "scope": SCOPE_CLUSTER}
                for f in result.findings]
    findings.sort(key=lambda f: (-float(f.get("est_saving_us") or 0.0), str(f.get("code"))))
    section, findings = _plain(cluster_section(model, result)), _plain(findings)
    read = [Path(f) for info in model.ranks for f in info.files]  # local ranks only here
    return ClusterEntry(key, label, section, findings, rank_keys), read


def _plain(value: Any) -> Any:
    """JSON values only (numpy scalars -> Python, NaN -> None), as the report's JSON holds them."""
    def convert(x: Any) -> Any:
        return x.item() if isinstance(x, np.generic) else str(x)

    text = json.dumps(value, default=convert)
    return json.loads(text, parse_constant=lambda _c: None)


def prepare_kernels(profile: Profile) -> pd.DataFrame:
    """The kernel table with derived metrics, a stable launch index and a readable start time.

    Derived metrics come from `tilescope.metrics` (the one place that defines them); a profile
    missing a column simply lacks it in the views.
    """
    # The loader already derives them; a Profile built by hand (tests, API users) may not have.
    kernels = with_derived_metrics(profile.kernels, profile.chip).copy()
    kernels = kernels.reset_index(drop=True)
    kernels["_row"] = np.arange(len(kernels), dtype=np.int64)
    # An msprof op profile has no start times (start_ns all null): no empty Start column then.
    if "start_ns" in kernels and kernels["start_ns"].notna().any():
        start = kernels["start_ns"].astype("Int64")
        origin = start.min()
        kernels["start_us"] = ((start - origin).astype("float64") / 1000.0).round(3)
    if "name" not in kernels:
        kernels["name"] = kernels.get("op_type", pd.Series(["?"] * len(kernels)))
    kernels["name"] = kernels["name"].astype("string").fillna("?")
    return kernels


def analyse(profile: Profile) -> dict[str, Any]:
    """The versioned report dict for a profile, built by the analyzer (never by the dashboard)."""
    return build_report(profile, analyze(profile, load_config()))


def make_entry(key: str, label: str, profile: Profile, report: dict[str, Any] | None = None) -> ProfileEntry:
    return ProfileEntry(
        key=key,
        label=label,
        profile=profile,
        report=report if report is not None else analyse(profile),
        kernels=prepare_kernels(profile),
    )


def load_path(path: Path, chip: str | None) -> list[Profile]:
    return load_profiles(path, chip=chip)


class DataStore:
    """Every profile the app can show: preloaded ones and those picked from the roots."""

    def __init__(self, roots: RootSet | None = None, chip: str | None = None) -> None:
        self.roots = roots or RootSet(())
        self.chip = chip
        self._fixed: dict[str, ProfileEntry] = {}
        self._lazy: OrderedDict[str, ProfileEntry] = OrderedDict()
        self._clusters: dict[str, ClusterEntry] = {}  # one per command-line path holding several ranks
        # runs under the roots, built when first picked in the Ranks tab, and the picker options of
        # their ranks (key, label), which discovery does not list
        self._root_clusters: OrderedDict[str, tuple[ClusterEntry, list[tuple[str, str]]]] = OrderedDict()
        self._lock = threading.Lock()
        # one root run built at a time: the tab's three views ask for the same run at once, and the
        # second and third then find it built rather than load every rank again
        self._build_lock = threading.Lock()
        # Called in a background thread for each new entry, so that the one-time work of the
        # heavier views (DuckDB copy, timeline lanes, diff stats) is done before the first click.
        self.on_load: Callable[[ProfileEntry], None] | None = None

    def _loaded(self, entry: ProfileEntry) -> ProfileEntry:
        if self.on_load is not None:
            # Not a daemon: the interpreter waits for it at exit, since a thread killed inside
            # DuckDB aborts the process ("terminate called without an active exception").
            threading.Thread(
                target=self.on_load, args=(entry,), name=f"warm-{entry.key}", daemon=False
            ).start()
        return entry

    def add(self, entry: ProfileEntry) -> ProfileEntry:
        self._fixed[entry.key] = entry
        return self._loaded(entry)

    def add_profile(
        self, profile: Profile, label: str | None = None, report: dict[str, Any] | None = None
    ) -> ProfileEntry:
        """A profile handed over in-process (tests, API users), trusted like the command line: its
        bundle directory, where the IR view reads, is served."""
        if profile.ir_dir is not None:
            self.roots = self.roots.with_given(profile.ir_dir.parent)
        key = f"p{len(self._fixed)}"
        return self.add(make_entry(key, label or profile.label, profile, report))

    def add_path(self, path: Path) -> list[ProfileEntry]:
        """A profile named on the command line: it, and nothing its links lead to outside it (or
        outside a --root), is served."""
        self.roots = self.roots.with_given(path)
        profiles = self._load(path, str(path))
        out = []
        for profile in profiles:
            out.append(self.add_profile(profile, label=_short_label(profile)))
        failures = list(getattr(profiles, "failures", []))
        if len(profiles) + len(failures) > 1:
            self._add_cluster(path, profiles, failures, [e.key for e in out])
        return out

    def _add_cluster(self, path: Path, profiles: Sequence[Profile], failures: Sequence[LoadFailure],
                     keys: Sequence[str]) -> ClusterEntry:
        key = f"c{len(self._clusters)}"
        label = path.name or str(path)
        if any(c.label == label for c in self._clusters.values()):  # runs/a/r8 and runs/b/r8
            label = str(path)
        entry, read = build_cluster_entry(key, label, profiles, failures, keys)
        for file in read:  # the ranks' step and communication files, checked as the kernel tables are
            self.roots.check(file, file.name)
        self._clusters[key] = entry
        return entry

    def clusters(self) -> list[ClusterEntry]:
        """The multi-rank paths given on the command line (root runs: `runs`)."""
        return list(self._clusters.values())

    def runs(self) -> list[dict[str, str]]:
        """The Ranks tab's run picker: the command-line clusters, then the runs of several ranks
        found under the roots (empty: no Ranks tab)."""
        opts = [{"label": c.label, "value": c.key} for c in self._clusters.values()]
        opts += [{"label": f"{label} ({ranks} ranks, root)", "value": key}
                 for key, label, ranks in self.root_runs()]
        return opts

    def root_runs(self) -> list[tuple[str, str, int]]:
        """(key, label, ranks) of the runs of several ranks under the roots, listed, not loaded."""
        return discover_runs(self.roots)

    def cluster(self, key: object) -> ClusterEntry | None:
        """The cluster for a Ranks-tab key (any JSON value a request sends): a command-line one, or
        a root run (`"<root index>:<relative path>"`), built on first use; None when unknown.

        Raises what `get` raises for a root key that escapes the roots or cannot be loaded, and
        UsageError for a path that holds one rank only.
        """
        if not isinstance(key, str):
            return None
        if key in self._clusters:
            return self._clusters[key]
        if ":" not in key:
            return None
        return self._root_cluster(key)

    def _root_cluster(self, key: str) -> ClusterEntry:
        """A run under the roots, loaded and checked as `get` loads a profile (the tree before the
        loaders, every file they read after, the cluster's own step and communication files too)."""
        path = self.roots.resolve_key(key)
        key = self.roots.key_for(path) or key  # one entry however the request spells the path
        with self._build_lock:
            with self._lock:
                if key in self._root_clusters:
                    self._root_clusters.move_to_end(key)
                    return self._root_clusters[key][0]
            shown = key.partition(":")[2] or path.name
            profiles = self._load(path, shown)
            failures = list(getattr(profiles, "failures", []))
            if len(profiles) + len(failures) < 2:
                raise UsageError(f"{shown}: holds one rank, not a run of several")
            # a rank opens through the run's own key, so that it is loaded exactly as in the run
            # (its rank numbered among the others, the run's manifest.json attached)
            keys = [f"{key}{RANK_SEP}{p.rank if p.rank is not None else i}" for i, p in enumerate(profiles)]
            label = self._root_label(key)
            entry, read = build_cluster_entry(key, label, profiles, failures, keys)
            for file in read:
                self.roots.check(file, file.name)
            options = [(k, f"{_short_label(p)} (root)") for p, k in zip(profiles, keys, strict=True)]
            with self._lock:
                self._root_clusters[key] = (entry, options)
                while len(self._root_clusters) > MAX_LAZY_ENTRIES:
                    self._root_clusters.popitem(last=False)
            return entry

    def _root_label(self, key: str) -> str:
        """What the run picker calls a root run (`key` is `key_for`'s: a valid index)."""
        index, _, rel = key.partition(":")
        root = self.roots.roots[int(index)]
        return f"{root.name}/{rel}" if rel not in ("", ".") else root.name

    def _load(self, path: Path, shown: str) -> list[Profile]:
        """Load `path` for the browser: its tree is checked before the loaders open anything, and
        the files they report having read are checked again after (a link swapped in between)."""
        self.roots.check_tree(path, shown)
        try:
            profiles = load_path(path, self.chip)
        except OSError as exc:  # unreadable file under a root: a one-line answer, not a traceback
            name = Path(exc.filename).name if exc.filename else shown
            raise UsageError(f"{name}: cannot be read ({exc.strerror or exc})") from None
        for profile in profiles:
            read = [*profile.source.files, *([profile.ir_dir] if profile.ir_dir is not None else [])]
            for file in read:
                self.roots.check(file, file.name)
        return profiles

    def options(self) -> list[dict[str, str]]:
        """Picker options: loaded profiles first, then profiles found under the roots."""
        opts = [{"label": e.label, "value": e.key} for e in self._fixed.values()]
        opts += [{"label": f"{label} (root)", "value": key} for key, label in discover_profiles(self.roots)]
        listed = {o["value"] for o in opts}
        with self._lock:  # the ranks of the root runs opened in the Ranks tab, so a click can pick them
            ranks = [o for _entry, options in self._root_clusters.values() for o in options]
        opts += [{"label": label, "value": key} for key, label in ranks if key not in listed]
        return opts

    def loaded(self) -> list[ProfileEntry]:
        return [*self._fixed.values(), *self._lazy.values()]

    def get(self, key: object) -> ProfileEntry | None:
        """The entry for a picker key; loads (confined to the roots) on first use.

        Raises PathRejected for a key (any JSON value a request sends) that is not one, escapes the
        roots or leads to a profile with a link out of them, and the loader's typed errors for a
        directory that is not a profile.
        """
        if key is None or key == "":
            return None
        if not isinstance(key, str):  # a request can send any JSON value
            raise PathRejected("unknown profile key")
        if key in self._fixed:
            return self._fixed[key]
        with self._lock:
            if key in self._lazy:
                self._lazy.move_to_end(key)
                return self._lazy[key]
        base_key, sep, rank_text = key.partition(RANK_SEP)
        if sep and not (rank_text.isascii() and rank_text.isdigit() and len(rank_text) <= MAX_RANK_DIGITS):
            raise PathRejected("unknown profile key")
        path = self.roots.resolve_key(base_key)
        shown = base_key.partition(":")[2] or path.name
        profile = self._rank_alone(base_key, path, int(rank_text), shown) if sep else None
        if profile is None:
            profiles = self._load(path, shown)
            profile = _rank_of(profiles, int(rank_text), shown) if sep else profiles[0]
        entry = make_entry(key, _short_label(profile), profile)
        with self._lock:
            self._lazy[key] = entry
            while len(self._lazy) > MAX_LAZY_ENTRIES:
                self._lazy.popitem(last=False)
        return self._loaded(entry)

    def _rank_alone(self, run_key: str, run: Path, rank: int, shown: str) -> Profile | None:
        """Rank `rank` of a root run already built, loaded from its own folder only (the path its
        row in the rank table names) instead of every rank of the run: a click on one row of a
        64-rank run of large ranks would otherwise hold all 64 kernel tables at once. None (load
        the whole run) when the run is not built, the rank's folder is the run itself (the devices
        of one PROF_), the run folder carries a manifest.json its ranks share (a sample), or the
        folder alone does not name itself that rank (a rank numbered by its position)."""
        with self._lock:
            built = self._root_clusters.get(run_key)
        if built is None:
            return None
        row = next((r for r in built[0].section.get("ranks") or []
                    if r.get("rank") == rank and r.get("kernels_loaded")), None)
        if row is None or not isinstance(row.get("path"), str):
            return None

        own = Path(row["path"])
        if manifest_dir_of(run) is not None or own.resolve() == run.resolve() \
                or not is_within(own.resolve(), run.resolve()):
            return None
        mine = [p for p in self._load(own, shown) if p.rank == rank]
        return mine[0] if len(mine) == 1 else None

    def first_key(self) -> str | None:
        return next(iter(self._fixed), None)


def _rank_of(profiles: Sequence[Profile], rank: int, shown: str) -> Profile:
    """The profile of `rank` among those one path holds, as the loader numbers them (a root
    run's rank rows name their ranks so); a profile without a rank stands for its position."""
    for profile in profiles:
        if profile.rank == rank:
            return profile
    if rank < len(profiles) and profiles[rank].rank is None:  # build_cluster numbers it so
        return profiles[rank]
    raise PathRejected(f"{shown}: no rank {rank} there")


def _short_label(profile: Profile) -> str:
    path = profile.source.path
    name = path.name or str(path)
    # Profiler-generated directory names (host_pid_time_ascend_pt, PROF_..., OPPROF_...) say
    # little; the directory the user named is one level up.
    if name.endswith("_ascend_pt") or name.startswith(("PROF_", "OPPROF_")):
        name = path.parent.name or name
    elif path.suffix and path.parent.name:
        # a file: its name is the profiler's (kernel_details.csv, msprof_0.db), the folder says which
        name = f"{path.parent.name}/{name}"
    return f"{name} (rank {profile.rank})" if profile.rank is not None else name
