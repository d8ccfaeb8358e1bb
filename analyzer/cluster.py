"""The cross-rank model of a multi-rank run: what each rank carries, side by side.

`build_cluster` takes the ranks found under a path (the profiles that loaded and the ones that
failed) and reads, per rank:
  steps     per step: Computing / Communication (not overlapped) / Free (µs), from
            `step_trace_time.csv` where the rank has one, else analysis.db's StepTraceTime,
            recomputed from its kernel table (compute kernels vs HCCL tasks) otherwise; `source`
            says which
  comm_ops  per communication operator: elapse, transit and wait time, bandwidth (communication.json,
            else analysis.db's CommAnalyzerTime and CommAnalyzerBandwidth)
  links     per collective and link: transport, size, bandwidth (communication_matrix.json, else
            analysis.db's CommAnalyzerMatrix), each collective once (`collective_links`); every
            sum over links is `link_sums`
  kernels   per kernel name: launches, total and median duration, first input shapes
A rank whose kernel table could not be read still contributes its step and communication files;
it has no kernel rows. A broken summary file of one rank becomes a note; the rank keeps the rest.

Recomputed split (`steps_from_kernels`), per step id: Computing = the union of the compute kernels'
intervals, Communication = the union of the HCCL tasks', Communication(Not Overlapped) = the part of
the latter outside the former, Free = the step's span (first task start to last task end) with no
task. torch_npu measures the step from its step marks, so its Free also counts the host time
before the first and after the last task: the recomputed Free is a lower bound.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tilescope.errors import ProfileFormatError
from tilescope.io import analysis_db as adb
from tilescope.io import cluster_files as cf
from tilescope.metrics import as_str
from tilescope.summary import communication_mask, device_time

if TYPE_CHECKING:
    from tilescope.io.failures import LoadFailure
    from tilescope.profile import Profile

CLUSTER_TABLES = ("steps", "comm_ops", "links", "kernels")
STEP_SPLIT = ("computing_us", "communication_not_overlapped_us", "free_us")
SOURCE_STEP_TRACE = "step_trace_time.csv"
SOURCE_ANALYSIS_DB = "analysis.db"
SOURCE_KERNELS = "kernels"
STEP_STATS = ("step_min_us", "step_median_us", "step_max_us")  # a rank's step time over its steps
# The report keeps one row per rank and step up to this many rows (64 ranks x 1,258 steps are
# 80,000, ~13 MB of JSON); past it, consecutive steps are averaged in bins (`bin_steps`), at most
# MAX_STEP_COLUMNS of them per rank: a run of 4,096 ranks would otherwise write millions of rows.
STEP_ROWS_CAP = 100_000
# Bins per rank: what a rank x step heatmap can show side by side; the dashboard's heatmap bins to
# it too, so 64 ranks x 1,258 steps ship 64 x 180 values (~150 KB), not 80,000 (~1 MB with hover).
MAX_STEP_COLUMNS = 180


@dataclass
class RankInfo:
    rank: int
    path: Path | str  # str: the URL of a remote rank (tilescope.io.remote)
    loaded: bool  # its kernel table (profile) loaded
    error: str | None = None  # why its profile was left out
    files: list[Path | str] = field(default_factory=list)  # the summary files read (str: URLs)


@dataclass
class Cluster:
    ranks: list[RankInfo]
    steps: pd.DataFrame  # rank, step, STEP_SPLIT, overlapped_us, communication_us, step_us, source
    comm_ops: pd.DataFrame  # rank + read_communication's columns
    links: pd.DataFrame  # rank + read_communication_matrix's columns
    kernels: pd.DataFrame  # rank, name, launches, total_us, median_us, input_shapes
    notes: list[str] = field(default_factory=list)

    def has(self, need: str) -> bool:
        """A cluster rule input: "cluster.steps", "cluster.comm_ops", "cluster.links",
        "cluster.kernels": that table has rows from at least 2 ranks."""
        name = need.removeprefix("cluster.")
        table = getattr(self, name, None) if name in CLUSTER_TABLES else None
        return isinstance(table, pd.DataFrame) and len(table) > 0 and table["rank"].nunique() >= 2

    def rank_totals(self) -> pd.DataFrame:
        """Per rank, summed over its steps: the split, the step time and where it came from; and
        the step time's spread over those steps (STEP_STATS: min, median, max)."""
        if self.steps.empty:
            return pd.DataFrame(columns=["rank", *STEP_SPLIT, "step_us", "steps", "source", *STEP_STATS])
        g = self.steps.groupby("rank", sort=True)
        out = g[[*STEP_SPLIT, "step_us"]].sum()
        out["steps"] = g.size()
        out["source"] = g["source"].first()
        per_step = g["step_us"]
        out["step_min_us"], out["step_median_us"] = per_step.min(), per_step.median()
        out["step_max_us"] = per_step.max()
        return out.reset_index()


# ---- recomputation from the kernel table ---------------------------------------------------------


def steps_from_kernels(kernels: pd.DataFrame) -> pd.DataFrame:
    """The step split recomputed from a kernel table (module docstring), one row per step id (a
    table without step ids is one step, `step` <NA>)."""
    cols = ["step", *STEP_SPLIT, "overlapped_us", "communication_us", "step_us"]
    if kernels is None or len(kernels) == 0 or "start_ns" not in kernels.columns:
        return pd.DataFrame(columns=cols)
    groups: list[tuple[Any, pd.DataFrame]] = [(pd.NA, kernels)]
    if "step_id" in kernels.columns and kernels["step_id"].notna().any():
        groups = list(kernels.groupby(kernels["step_id"].astype("Int64"), sort=True))
    rows = []
    for step, k in groups:
        dt = device_time(k)
        wall = dt.wall_us or 0.0
        busy = wall - (dt.idle_us or 0.0)  # union of every task
        rows.append({
            "step": step,
            "computing_us": dt.device_us,
            "communication_not_overlapped_us": max(0.0, busy - dt.device_us),
            "free_us": dt.idle_us or 0.0,
            "overlapped_us": max(0.0, dt.device_us + dt.communication_us - busy),
            "communication_us": dt.communication_us,
            "step_us": wall,
        })
    out = pd.DataFrame(rows, columns=cols)
    out["step"] = out["step"].astype("Int64")
    return out


def kernel_summary(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per kernel name of one rank: launches, total and median duration (µs), first input shapes.
    Communication tasks are left out (their time is the communication files' subject)."""
    cols = ["name", "launches", "total_us", "median_us", "input_shapes"]
    if kernels is None or len(kernels) == 0 or "name" not in kernels.columns:
        return pd.DataFrame(columns=cols)
    k = kernels.loc[~communication_mask(kernels)]
    dur = pd.to_numeric(k["duration_us"], errors="coerce")
    names = as_str(k["name"])
    g = dur.groupby(names, sort=True)
    out = pd.DataFrame({"launches": g.size(), "total_us": g.sum(), "median_us": g.median()})
    if "input_shapes" in k.columns:
        out["input_shapes"] = k["input_shapes"].groupby(names, sort=True).first()
    else:
        out["input_shapes"] = None
    return out.rename_axis("name").reset_index()[cols]


# ---- building ------------------------------------------------------------------------------------


def _with_rank(table: pd.DataFrame, rank: int) -> pd.DataFrame:
    table = table.copy()
    table.insert(0, "rank", rank)
    return table


@dataclass
class RankTables:
    """One rank's share of the model: its rows of each table (no `rank` column yet), the summary
    files read, and a note per summary file left out (without the rank, which may not be known
    yet where this is computed: a per-rank worker, `tilescope.rankwork`). A table read back from
    the cache is Arrow, converted when the ranks are assembled (`_concat`)."""

    steps: pd.DataFrame | pa.Table
    comm_ops: pd.DataFrame | pa.Table
    links: pd.DataFrame | pa.Table
    kernels: pd.DataFrame | pa.Table
    files: list[Path | str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def empty(cls) -> RankTables:
        """No rows yet (a rank none of whose files could be read, or the start of `rank_tables`)."""
        empty = pd.DataFrame()
        return cls(empty, empty, empty, empty)

    def relabel(self, local: str, url: str) -> None:
        """Name `url` wherever the files and notes name `local` (a remote rank's staged copy)."""
        # deferred: io.remote only when used; `diff` runs without it
        from tilescope.io.remote import relabel

        self.files = [relabel(str(f), local, url) for f in self.files]
        self.notes = relabel(self.notes, local, url)


def rank_tables(root: Path, kernels: pd.DataFrame | None) -> RankTables:
    """What one rank contributes, from its summary files under `root` and its kernel table (None:
    the table could not be read): steps from step_trace_time.csv (else analysis.db's
    StepTraceTime), else recomputed from the kernels; communication operators and links (the JSON
    files, else analysis.db); per-kernel summary."""
    out = RankTables.empty()
    step_trace, ops, matrix, from_db = _read_rank_files(root, out)
    if step_trace is not None and len(step_trace):
        s = step_trace.copy()
        s["step_us"] = s[list(STEP_SPLIT)].sum(axis=1)
        s["source"] = SOURCE_ANALYSIS_DB if 0 in from_db else SOURCE_STEP_TRACE
        out.steps = s
    elif kernels is not None:
        s = steps_from_kernels(kernels)
        if len(s):
            s["source"] = SOURCE_KERNELS
            out.steps = s
    if ops is not None and len(ops):
        out.comm_ops = ops
    if matrix is not None and len(matrix):
        out.links = collective_links(matrix)
    if kernels is not None:
        out.kernels = kernel_summary(kernels)
    return out


def _read_rank_files(
    root: Path, into: RankTables
) -> tuple[pd.DataFrame | None, pd.DataFrame | None, pd.DataFrame | None, set[int]]:
    """Steps, communication operators and links of one rank (None: not there or unreadable), and
    which of the three (0, 1, 2) came from analysis.db."""
    out = cf.output_dir(root)
    read: list[pd.DataFrame | None] = []
    absent: list[int] = []
    from_db: dict[int, pd.DataFrame] = {}
    for i, (name, reader) in enumerate((
        (cf.STEP_TRACE, cf.read_step_trace),
        (cf.COMMUNICATION, cf.read_communication),
        (cf.COMMUNICATION_MATRIX, cf.read_communication_matrix),
    )):
        path = out / name
        if not path.is_file():
            read.append(None)
            absent.append(i)
            continue
        try:
            read.append(reader(path))
            into.files.append(path)
        except ProfileFormatError as exc:
            into.notes.append(f"{exc.one_line()} — {name} left out")
            read.append(None)
    db = out / adb.ANALYSIS_DB
    # A database export (export_type=db) holds the same summaries in analysis.db. The text files
    # win where both exist (export_type=[Text, Db] writes both from the same data): only what no
    # text file gave is read from the database.
    if absent and db.is_file():
        from_db = _read_analysis_db(db, absent, into)
        for i, table in from_db.items():
            read[i] = table
    return read[0], read[1], read[2], set(from_db)


# what stands in analysis.db for each text file of _read_rank_files, by position
_DB_READERS = (
    (adb.STEP_TRACE_TABLE, adb.read_db_step_trace),
    (f"{adb.TIME_TABLE}/{adb.BANDWIDTH_TABLE}", adb.read_db_communication),
    (adb.MATRIX_TABLE, adb.read_db_communication_matrix),
)


def _read_analysis_db(db: Path, wanted: list[int], into: RankTables) -> dict[int, pd.DataFrame]:
    """The tables of analysis.db standing for the text files at `wanted`; each one that cannot be
    read is a note (file, table, what was expected) and left out, like a broken text file."""
    try:
        con = adb.open_analysis_db(db)
    except ProfileFormatError as exc:
        into.notes.append(f"{exc.one_line()} — {adb.ANALYSIS_DB} left out")
        return {}
    got: dict[int, pd.DataFrame] = {}
    try:
        for i in wanted:
            what, reader = _DB_READERS[i]
            try:
                got[i] = reader(con, db)
            except ProfileFormatError as exc:
                into.notes.append(f"{exc.one_line()} — {what} left out")
    finally:
        con.close()
    if got:
        into.files.append(db)
    return got


def _rank_of(profile: Profile, position: int) -> int:
    return profile.rank if profile.rank is not None else position


def build_cluster(profiles: Sequence[Profile], failures: Sequence[LoadFailure] = ()) -> Cluster:
    """The cross-rank model of the ranks under one path (module docstring)."""
    infos: list[tuple[RankInfo, Profile | None]] = []
    for i, p in enumerate(profiles):
        infos.append((RankInfo(_rank_of(p, i), p.source.path, True), p))
    for j, f in enumerate(failures):
        rank = f.rank if f.rank is not None else len(profiles) + j
        infos.append((RankInfo(rank, f.path, False, f.error.one_line()), None))
    return assemble_cluster(
        [(info, rank_tables(Path(info.path), None if prof is None else prof.kernels)) for info, prof in infos]
    )


def assemble_cluster(ranks: Sequence[tuple[RankInfo, RankTables]]) -> Cluster:
    """The model from each rank's tables, ranks in order of their id."""
    ordered = sorted(ranks, key=lambda t: t[0].rank)
    notes: list[str] = []
    # (rank, its rows): a pandas frame, or an Arrow table read back from the cache
    steps: list[tuple[int, Any]] = []
    comm: list[tuple[int, Any]] = []
    links: list[tuple[int, Any]] = []
    kernels: list[tuple[int, Any]] = []
    for info, t in ordered:
        info.files = [*info.files, *t.files]
        notes += [f"rank {info.rank}: {n}" for n in t.notes]
        for table, into in ((t.steps, steps), (t.comm_ops, comm), (t.links, links), (t.kernels, kernels)):
            if len(table):
                into.append((info.rank, table))
    return Cluster(
        ranks=[i for i, _ in ordered],
        steps=_concat(steps),
        comm_ops=_concat(comm),
        links=_concat(links),
        kernels=_concat(kernels),
        notes=notes,
    )


def _concat(tables: list[Any]) -> pd.DataFrame:
    """The ranks' rows of one table, `rank` first. Tables read back from the cache are Arrow
    (`tilescope.rank_cache`): when every rank's is, they are joined as Arrow and converted to
    pandas once. One `to_pandas` per rank and table cost ~1 ms of pandas' metadata handling, a
    third of a cached 64-rank analysis; the frames are the same (tests/cluster/test_rankwork.py compares
    cached and fresh reports byte for byte)."""
    tables = [(rank, t) for rank, t in tables if len(t)]
    if not tables:
        return pd.DataFrame(columns=["rank"])

    if all(isinstance(t, pa.Table) for _, t in tables):
        # a rank whose kernel table was streamed keeps its text dictionary-encoded, one read whole
        # (a file with a skipped row falls back to that) as plain text: Arrow merges no such pair
        decode = len({t.schema for _, t in tables}) > 1
        joined = pa.concat_tables(
            [_arrow_with_rank(t, rank, decode) for rank, t in tables], promote_options="permissive"
        )
        return joined.to_pandas()
    frames = [_with_rank(t.to_pandas() if isinstance(t, pa.Table) else t, rank) for rank, t in tables]
    return pd.concat(frames, ignore_index=True)


def _arrow_with_rank(table: pa.Table, rank: int, decode: bool = False) -> pa.Table:
    """`table` with its `rank` column first; with `decode`, dictionary text as plain text."""
    for i, f in enumerate(table.schema):
        if decode and pa.types.is_dictionary(f.type):
            table = table.set_column(i, f.name, table.column(i).cast(pa.large_string()))
    return table.add_column(0, "rank", pa.array(np.full(len(table), rank, dtype=np.int64)))


# ---- links: each collective once ------------------------------------------------------------------

# Example: "allreduce-top1@17522688603477080586" -> family "allreduce", group "1752…"; the summary
# keys torch_npu writes beside (or instead of) one key per collective: top/middle/bottom name one
# collective each (two of them may name the same one), "total" sums every collective of the family
_SUMMARY_KEY_RE = re.compile(r"^(?P<family>.+)-(?:top\d*|middle\d*|bottom\d*|total)$", re.IGNORECASE)
_LINK = ["step", "kind", "family", "group", "src_rank", "dst_rank", "transport"]
# An aggregate larger than the collectives listed under it by more than this share holds
# collectives the file does not list one by one (the summary keys name five at most)
AGGREGATE_SLACK = 1e-3


def collective_links(matrix: pd.DataFrame) -> pd.DataFrame:
    """One rank's communication-matrix rows with each collective read once per link (#26):
    rows naming the same collective (`collective`, cluster_files) on the same link and step are
    one; an aggregate (`allreduce-total@group`, collective None) is a check, not an addend: it is
    dropped when the collectives listed under it (same family, group, step and link) add up to
    it, and only the part they do not cover stays (a row with collective None) when it holds
    collectives the file does not list. torch_2rank_pipeutil_text rank 0 -> 1: 4 collectives,
    61.21 MB in 3,884 µs (the aggregate's own figures), not the 124.9 MB of every key summed."""
    if matrix.empty or "collective" not in matrix.columns:
        return matrix
    m = matrix.copy()
    parts = m["op"].astype(str).str.split("@", n=1, expand=True).reindex(columns=[0, 1])
    m["group"] = parts[1].fillna("")
    m["family"] = parts[0].str.extract(_SUMMARY_KEY_RE, expand=False).fillna(parts[0])
    key = [c for c in _LINK if c in m.columns]
    named = m[m["collective"].notna()].drop_duplicates([*key, "collective"], keep="first")
    totals = m[m["collective"].isna()]
    if not totals.empty:
        listed = named.groupby(key, dropna=False, sort=False).agg(
            size_mb_listed=("size_mb", "sum"), transit_us_listed=("transit_us", "sum"))
        agg = totals.groupby(key, dropna=False, sort=False).agg(
            size_mb=("size_mb", "sum"), transit_us=("transit_us", "sum"), op=("op", "first"))
        agg = agg.join(listed).fillna({"size_mb_listed": 0.0, "transit_us_listed": 0.0})
        rest_mb = agg["size_mb"] - agg["size_mb_listed"]
        rest_us = agg["transit_us"] - agg["transit_us_listed"]
        unlisted = (rest_mb > AGGREGATE_SLACK * agg["size_mb"]) | (
            rest_us > AGGREGATE_SLACK * agg["transit_us"])
        rest = agg.loc[unlisted, ["op"]].assign(
            size_mb=rest_mb[unlisted].clip(lower=0.0), transit_us=rest_us[unlisted].clip(lower=0.0))
        rest["bandwidth_gbps"] = (rest["size_mb"] / rest["transit_us"].where(rest["transit_us"] > 0)) * 1000.0
        rest["collective"] = None
        named = pd.concat([named, rest.reset_index()], ignore_index=True)
    return named.drop(columns=["family", "group"]).reset_index(drop=True)[list(matrix.columns)]


def link_sums(links: pd.DataFrame, by: Sequence[str] = ("src_rank", "dst_rank"),
              min_size_mb: float = 0.0) -> pd.DataFrame:
    """THE sum over `cluster.links` (the report's link table, TS604, the Ranks tab through the
    report): per `by`, `size_mb` and `transit_us` summed over steps, collectives, transports and
    reporting ranks, `collectives` (rows naming one: each once per rank, `collective_links`),
    `unlisted` (an aggregate held collectives the file does not list), `transports`. LOCAL copies
    (a rank to itself), rows without a transit time and rows under `min_size_mb` are left out."""
    cols = [*by, "size_mb", "transit_us", "collectives", "unlisted", "transports"]
    if links.empty or "src_rank" not in links.columns:
        return pd.DataFrame(columns=cols).set_index(list(by))
    keep = (links["transport"].astype("string") != "LOCAL") & (links["src_rank"] != links["dst_rank"])
    keep &= (pd.to_numeric(links["transit_us"], errors="coerce") > 0) & (links["size_mb"] >= min_size_mb)
    rows = links.loc[keep.fillna(False)]
    named = rows["collective"].notna() if "collective" in rows.columns else pd.Series(True, index=rows.index)
    g = rows.assign(named=named, unnamed=~named).groupby(list(by), sort=True)
    out = g[["size_mb", "transit_us"]].sum()
    out["collectives"] = g["named"].sum().astype("int64")
    out["unlisted"] = g["unnamed"].any()
    out["transports"] = g["transport"].agg(lambda t: sorted({str(x) for x in t}))  # once per group
    return out


# ---- steps, binned -------------------------------------------------------------------------------

STEP_VALUES = (*STEP_SPLIT, "step_us")


def bin_steps(steps: pd.DataFrame, columns: int) -> tuple[pd.DataFrame, int]:
    """Per-step rows (rank, step, STEP_VALUES, source) with at most `columns` steps per rank:
    past that, the step ids (sorted; a step without an id counts as -1) are cut into equal runs of
    `width` consecutive ids and each rank's values are averaged over the steps it has in a run.
    A bin row's `step` and `step_last` are the bin's first and last id (the same for every rank)
    and `steps` says how many of the rank's steps it averages. Returns the rows and `width` (1:
    the rows as given, one per step).

    Means, not sums, so that a binned heatmap keeps a step's scale and a rank missing a step is
    not shown as faster; the same function bins the report (`report_steps`) and the dashboard."""
    if steps.empty or "step" not in steps.columns or "rank" not in steps.columns:
        return steps, 1
    step = pd.to_numeric(steps["step"], errors="coerce").fillna(-1).astype("int64")
    ids = np.unique(step.to_numpy())
    width = max(1, -(-len(ids) // max(1, columns)))  # ceil
    if width == 1:
        return steps, 1
    bins = np.searchsorted(ids, step.to_numpy()) // width
    keys = [steps["rank"].astype("int64").rename("rank"), pd.Series(bins, index=steps.index, name="bin")]
    values = [c for c in STEP_VALUES if c in steps.columns]
    g = steps[values].apply(pd.to_numeric, errors="coerce").groupby(keys, sort=True)
    out = g.mean()
    out.insert(0, "steps", step.groupby(keys, sort=True).size())
    if "source" in steps.columns:
        out["source"] = steps["source"].groupby(keys, sort=True).first()
    out = out.reset_index()
    # the bin's range of ids, the same for every rank: a rank missing a step stays in its column
    first = ids[out["bin"].to_numpy() * width]
    last = ids[np.minimum((out["bin"].to_numpy() + 1) * width, len(ids)) - 1]
    out.insert(1, "step", pd.Series(first, index=out.index).where(first >= 0).astype("Int64"))  # -1: no id
    out.insert(2, "step_last", pd.Series(last, index=out.index).where(last >= 0).astype("Int64"))
    return out.drop(columns="bin"), width


def report_steps(steps: pd.DataFrame, max_rows: int | None = None) -> tuple[pd.DataFrame, int]:
    """The report's `cluster.steps`: one row per rank and step up to `max_rows` rows, else
    `bin_steps` with as many bins per rank as keep the rows under the cap (at most
    MAX_STEP_COLUMNS). The per-rank spread (STEP_STATS) is in the rank table either way."""
    if max_rows is None:
        max_rows = STEP_ROWS_CAP
    if len(steps) <= max_rows:
        return steps, 1
    ranks = max(1, int(steps["rank"].nunique())) if "rank" in steps.columns else 1
    return bin_steps(steps, max(1, min(MAX_STEP_COLUMNS, max_rows // ranks)))


# ---- the rank table ------------------------------------------------------------------------------


def rank_table(cluster: Cluster, slow: int | None = None) -> list[dict[str, Any]]:
    """One row per rank for the reports: the step split (µs, summed over steps), where it came
    from, whether its kernel table loaded, and `slow` on the slow rank (the one TS601 named)."""
    totals = {int(r["rank"]): r for r in cluster.rank_totals().to_dict("records")}
    rows = []
    for info in cluster.ranks:
        row: dict[str, Any] = {"rank": info.rank, "path": str(info.path), "kernels_loaded": info.loaded,
                               "error": info.error, "slow": info.rank == slow}
        if info.rank in totals:
            t = totals[info.rank]
            for c in (*STEP_SPLIT, "step_us", *STEP_STATS):
                row[c] = None if pd.isna(t[c]) else round(float(t[c]), 3)
            row["steps"] = int(t["steps"])
            row["source"] = str(t["source"])
        else:
            row.update(dict.fromkeys((*STEP_SPLIT, "step_us", *STEP_STATS)) | {"steps": 0, "source": None})
        rows.append(row)
    return rows


def others_median(table: pd.DataFrame) -> pd.DataFrame:
    """Per cell, the median of the other cells of its row that hold a number (NaN where fewer
    than one other does): each rank's "the others' typical value", for every rank at once.

    Per row the values are sorted once and each cell's median read around its own position:
    O(ranks log ranks) per row instead of a median over the other ranks for each rank (4,096
    ranks: 16 M values per kernel). Same values as `row.drop(rank).median()`."""
    vals = table.to_numpy(dtype=float)
    out = np.full_like(vals, np.nan)
    for i, row in enumerate(vals):  # rows are kernel names (a few hundred), columns the ranks
        ok = ~np.isnan(row)
        v = row[ok]
        n = len(v)
        if n < 2:
            continue
        order = np.argsort(v, kind="stable")
        s = v[order]
        pos = np.empty(n, dtype=np.intp)
        pos[order] = np.arange(n)

        def pick(j: int, s: np.ndarray = s, pos: np.ndarray = pos) -> np.ndarray:
            # element j of the sorted row without each cell's own value
            return np.where(j < pos, s[j], s[min(j + 1, len(s) - 1)])

        m = n - 1
        out[i, ok] = pick(m // 2) if m % 2 else (pick(m // 2 - 1) + pick(m // 2)) / 2
    return pd.DataFrame(out, index=table.index, columns=table.columns)
