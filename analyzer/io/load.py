"""Input detection and loading: any Ascend profiler output -> list[Profile] (one per rank).

Accepted (reported in `profile.source.format`):
  torch_npu        a `*_ascend_pt` dir, or its ASCEND_PROFILER_OUTPUT/
  msprof           a `PROF_*` dir, or its mindstudio_profiler_output/ (old: device_N/summary/)
  msprof_op        an `OPPROF_*` single-operator dir (OpBasicInfo + per-block metric CSVs), or one
                   OpBasicInfo.csv; msprof_op_multi for {Op}/{launch}/ layouts
  kernel_csv       a single kernel table (op_summary / kernel_details header, any file name)
  timeline_json    a single timeline (Chrome-trace JSON, any file name; kernels taken from it)
  sqlite           a single SQLite export (by its magic bytes)
  folder           a plain folder of such files, each used for what it holds: kernels from its
                   kernel table (else its timeline), the timeline, the clock from OpBasicInfo.csv
  bundle           manifest.json + profile/ (+ ir/); several metric-group runs under profile/ merge
A parent dir of several of the above (e.g. one `*_ascend_pt` per rank) gives one Profile each; one
that cannot be read is left out and reported in `LoadedProfiles.failures` (detection:
`tilescope.io.detect`).

Here: the entry points, a Profile built from what its root yielded (the chip, the derived metrics)
and the numbering of ranks. Beside it in `tilescope.io`: `formats` (one detected profile read by
its format), `bundle` (run bundles: merged runs, manifest.json, ir.json), `prefetch` (the timeline
read on a second thread), `column_stream` (a kernel CSV streamed to the columns a command reads)
and `failures` (the profiles left out).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilescope.columns import is_coupled_header
from tilescope.errors import NoProfileFoundError, ProfileFormatError, UsageError
from tilescope.gcpause import gc_paused
from tilescope.io.bundle import attach_bundle, load_bundle
from tilescope.io.column_stream import read_whole_csv, stream_columns
from tilescope.io.detect import Detected, FolderSources, detect
from tilescope.io.failures import LoadFailure, left_out_warnings, rank_of_failed
from tilescope.io.formats import (
    ReadOptions,
    Sources,
    add_info_json,
    load_single,
    msprof_sources,
    torch_sources,
)
from tilescope.io.parts import clock_from_launches, ensure_contract, read_basic_info
from tilescope.io.prefetch import clear_prefetched, import_readers, prefetch_timeline
from tilescope.profile import DeviceInfo, Profile, SourceInfo
from tilescope.text.escape import terminal_text

# The readers and pandas are imported inside the functions that use them:
# `load_profiles` first starts reading the timeline on a second thread (DuckDB needs neither),
# and only then pays for those imports (~0.15 s, pandas most of it) on the main thread.
if TYPE_CHECKING:
    import pyarrow as pa

    from tilescope.chips import ChipSpec
    from tilescope.io.parts import Parts


__all__ = [
    "Detected",
    "LoadedProfiles",
    "detect",
    "load_profile",
    "load_profiles",
]


# ---- loading one root --------------------------------------------------------------------------------


def _build(
    det: Detected,
    chip: str | None,
    manifest_dir: Path | None,
    lazy_timeline: bool = False,
    kernel_columns: Sequence[str] | None = None,
) -> Profile:
    # deferred: io.msprof_op (pandas) and io.device and metrics (pyarrow) only where used
    from tilescope.io import device as dev
    from tilescope.io.msprof_op import per_core_times
    from tilescope.metrics import add_derived_metrics

    options = ReadOptions(lazy_timeline, defer_csv=kernel_columns is not None)
    # a bundle's runs and an msprof output folder of one run per metric group are merged alike
    parts = load_bundle(det) if det.format in ("bundle", "msprof_groups") else load_single(det, options)
    if parts.timeline is not None and parts.device.timeline_max_frequency_mhz is None:
        # a timeline still being read (`pending_timeline`) is not waited for: no value then
        # deferred: io.timeline_facts (numpy) only where used
        from tilescope.io.timeline_facts import counter_max

        parts.device.timeline_max_frequency_mhz = counter_max(parts.timeline)
    warnings = list(parts.warnings)
    streamed = stream_columns(parts, chip, warnings, kernel_columns) if kernel_columns is not None else None
    if streamed is not None and _needs_timeline_clock(parts, chip, streamed[1]):
        warnings, streamed = list(parts.warnings), None  # chosen again below, with the counter
    if streamed is not None:
        kernels, selected = streamed
    else:
        if parts.kernel_csv is not None:  # the stream gave up: the whole file, as without columns
            read_whole_csv(parts)
        said: list[str] = []
        selected = dev.choose_chip(chip, parts.device, parts.kernels, said, parts.coupled)
        if _needs_timeline_clock(parts, chip, selected):
            said = []
            selected = dev.choose_chip(chip, parts.device, parts.kernels, said, parts.coupled)
        warnings.extend(said)
        # `msprof op` times are per block until the core count is known (io/msprof_op.py)
        per_core = per_core_times(parts.kernels, selected.aic_count, selected.aiv_count)
        kernels = add_derived_metrics(ensure_contract(per_core), selected, coupled=parts.coupled)
    # one note each, first: they say what the table lacks
    for left_out in (parts.values_out_of_range, parts.rows_skipped):
        if left_out is not None:
            warnings.insert(0, left_out["note"])
    source = SourceInfo(
        det.path, det.format, parts.producer, parts.files, parts.metric_groups, coupled=parts.coupled
    )
    profile = Profile(
        source=source,
        kernels=kernels,
        chip=selected,
        device=parts.device,
        blocks=parts.blocks,
        launches=parts.launches,
        timeline=parts.timeline,
        rank=parts.rank if det.rank is None else det.rank,
        warnings=warnings,
        rows_skipped=parts.rows_skipped,
        values_out_of_range=parts.values_out_of_range,
    )
    if parts.pending_timeline is not None:
        profile.defer_timeline(parts.pending_timeline)
    bundle = det.path if det.format == "bundle" else manifest_dir
    if bundle is not None:
        attach_bundle(profile, bundle)
    return profile


def _needs_timeline_clock(parts: Parts, chip: str | None, selected: ChipSpec) -> bool:
    """The chip's clock is a default while a timeline still being read may record it: read the
    timeline now (its AI Core Freq counter is `choose_chip`'s last source for the clock), so
    `analyze`, which reads the timeline beside the rules, chooses what `info` chooses. True when
    the counter was read and gives a clock (choose again), False otherwise."""
    if chip or "clock_mhz" not in selected.assumed_figures or parts.pending_timeline is None:
        return False
    # deferred: io.timeline_facts (numpy) only where used
    from tilescope.io.timeline_facts import counter_max

    parts.timeline, parts.pending_timeline = parts.pending_timeline(), None
    if parts.timeline is None:
        return False
    parts.device.timeline_max_frequency_mhz = counter_max(parts.timeline)
    return parts.device.timeline_max_frequency_mhz is not None


@contextlib.contextmanager
def _progress(enabled: bool, total: int) -> Iterator[Callable[[str], None]]:
    """A rich progress bar on stderr, only when asked for and stderr is a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield lambda _desc: None
        return
    # deferred: rich.table, rich.text only for terminal output
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("loading", total=total)

        def step(desc: str) -> None:
            # a file or folder name: the default description column reads markup
            bar.update(task, advance=1, description=escape(terminal_text(desc)))

        yield step


class LoadedProfiles(list["Profile"]):
    """What `load_profiles` returns: a list of the profiles that loaded, and in `failures` the
    ones under the same path that could not be read (empty unless the path held several)."""

    def __init__(self, profiles: Iterable[Profile] = (), failures: Iterable[LoadFailure] = ()) -> None:
        super().__init__(profiles)
        self.failures: list[LoadFailure] = list(failures)


def load_profiles(
    path: str | Path,
    chip: str | None = None,
    progress: bool = False,
    lazy_timeline: bool = False,
    kernel_columns: Sequence[str] | None = None,
) -> LoadedProfiles:
    """Every profile under `path` (one per rank / profiler directory), fully parsed.

    When the path holds several profiles and some cannot be read (ProfileFormatError,
    NoProfileFoundError), the others are returned: the result's `failures` name the ones left
    out (file, row, what was expected) and every loaded profile carries a note about them. When
    none can be read, or the path holds one, its error is raised as before.

    With `lazy_timeline` a torch_npu directory's trace_view.json (or a folder's timeline beside a
    kernel table) may still be being read when this returns: `profile.timeline` waits for it, and
    raises its ProfileFormatError, on first use. The caller must use it before reporting
    (`analyze` does), or a broken timeline would go unnoticed.

    With `kernel_columns`, a profile whose kernel table is one CSV file gets a kernel table of only
    those columns, streamed from the file (`info` reads its counts and summary from ~16 columns);
    every other part of the profile is read as without them.
    """
    p = Path(path)
    imported = threading.Event()
    # Importing the readers creates ~100,000 objects: without a pause their allocation triggers
    # full collections over everything loaded so far (~0.03 s of ~0.17 s).
    try:
        with gc_paused():
            prefetch_timeline(p, imported)
            import_readers()
    finally:
        imported.set()
    try:
        return _load_found(p, chip, progress, lazy_timeline, kernel_columns)
    finally:
        clear_prefetched()  # a prefetched timeline that detection did not pick is dropped


def split_devices(profile: Profile) -> list[Profile]:
    """An msprof `PROF_*` run of several devices (`device_N/`, one op_summary with a Device_id
    column per device) as one profile per device, its rank the device id; any other profile as is.
    The devices share the run's timeline and device facts, each gets its own kernel rows."""
    k = profile.kernels
    if profile.source.format != "msprof" or "device_id" not in k.columns or profile.rank is not None:
        return [profile]
    ids = sorted(int(d) for d in k["device_id"].dropna().unique())
    if len(ids) < 2:
        return [profile]
    out = []
    for dev_id in ids:
        part = profile.with_kernels(k[k["device_id"] == dev_id].reset_index(drop=True))
        part.rank = dev_id
        part.warnings = [*profile.warnings, f"device {dev_id} of {len(ids)} in {profile.source.path.name}"]
        out.append(part)
    return out


def manifest_dir_of(p: Path) -> Path | None:
    """A plain directory with a manifest.json next to the profiler output (sample dirs) keeps it."""
    return p if p.is_dir() and (p / "manifest.json").is_file() else None


def load_unit(
    det: Detected,
    chip: str | None,
    manifest_dir: Path | None,
    lazy_timeline: bool = False,
    kernel_columns: Sequence[str] | None = None,
) -> list[Profile]:
    """The profiles of one detected input (one per device of an msprof run of several devices),
    ranks as the input itself names them; raises its ProfileFormatError / NoProfileFoundError."""
    return split_devices(_build(det, chip, manifest_dir, lazy_timeline, kernel_columns))


def resolve_ranks(
    loaded: Sequence[tuple[int, Any]],
    failed: Sequence[tuple[int, LoadFailure]],
    path_of: Callable[[Any], Path] = lambda pr: pr.source.path,
) -> None:
    """Number the ranks of several inputs found under one path (`i` = position among them), in
    place (`loaded` holds Profiles, or anything with `.rank` whose path `path_of` gives): a rank
    named by its input stays; else the folder's name may say it (rank_3); when no
    input names one, ranks follow the position, so a left-out input keeps its number."""
    if len(loaded) + len(failed) <= 1:
        return
    # deferred: io.device (pyarrow) only where used
    from tilescope.io.device import rank_from_name

    for _, pr in loaded:  # no profiler_info_N.json: the folder's name may say it (rank_3)
        pr.rank = pr.rank if pr.rank is not None else rank_from_name(path_of(pr))
    if all(pr.rank is None for _, pr in loaded) and all(f.rank is None for _, f in failed):
        for i, pr in loaded:
            pr.rank = i
        for i, f in failed:
            f.rank = i


def _load_found(
    p: Path,
    chip: str | None,
    progress: bool,
    lazy_timeline: bool = False,
    kernel_columns: Sequence[str] | None = None,
) -> LoadedProfiles:
    found = detect(p)
    manifest_dir = manifest_dir_of(p)
    loaded: list[tuple[int, Profile]] = []
    failed: list[tuple[int, LoadFailure]] = []
    with _progress(progress, len(found)) as step:
        for i, det in enumerate(found):
            try:
                found_here = load_unit(det, chip, manifest_dir, lazy_timeline, kernel_columns)
                loaded += [(i, pr) for pr in found_here]
            except (ProfileFormatError, NoProfileFoundError) as exc:
                if len(found) == 1:
                    raise
                failed.append((i, LoadFailure(det.path, exc, rank_of_failed(det))))
            step(det.path.name)
    if not loaded:
        raise failed[0][1].error  # nothing could be read: the first error, as for a single input
    resolve_ranks(loaded, failed)
    failures = [f for _, f in failed]
    for _, pr in loaded:
        pr.warnings.extend(left_out_warnings(failures))
    return LoadedProfiles((pr for _, pr in loaded), failures)


@dataclass
class KernelCsv:
    """A profile whose kernels are one CSV file (`kernel_csv_profile`): the file, the profile's
    detected format, and the device facts recorded beside the file, which the chip is chosen from."""

    path: Path
    format: str  # kernel_csv, torch_npu, msprof or folder (as `Profile.source.format` says)
    device: DeviceInfo


def kernel_csv_profile(path: str | Path) -> KernelCsv | None:
    """The kernel CSV of `path` when the one profile there takes its kernels from exactly that file:
    a kernel table itself, a torch_npu `*_ascend_pt` (or msprof `PROF_*`) directory whose kernel
    table is one kernel_details.csv (one op_summary), or a plain folder of loose files with one
    kernel table. None otherwise (several profiles, op_summary slices, a database, msprof op, a
    bundle, kernels taken from a timeline): those are loaded whole by `load_profiles`.

    Of everything beside the file, the kernel table of such a profile depends only on the device
    facts that choose its chip: info.json, OpBasicInfo's clock, and the timeline's AI Core Freq
    counter when nothing else records the clock. They are read here the way the loaders read them,
    so the table streamed from the file equals `load_profiles(path)[0].kernels`; a timeline is read
    only for that counter, and nothing else is read.
    """
    found = detect(path)
    if len(found) != 1 or found[0].format not in ("kernel_csv", "torch_npu", "msprof", "folder"):
        return None
    det = found[0]

    device = DeviceInfo()
    if det.format == "kernel_csv":
        return KernelCsv(det.path, det.format, device)
    if det.format == "folder":
        folder = det.sources or FolderSources()
        src = Sources(folder.kernel_tables, None, folder.timelines)
    else:
        src = torch_sources(det.path) if det.format == "torch_npu" else msprof_sources(det.path)
        add_info_json(det.path, device, [])
    if len(src.tables) != 1:
        return None
    if det.format == "folder" and det.sources is not None and det.sources.basic_info:
        launches, _used = read_basic_info(det.sources.basic_info, [])
        if launches is not None:
            clock_from_launches(device, launches)
    if src.timelines:
        _add_timeline_clock(device, src.timelines[0])
    return KernelCsv(src.tables[0], det.format, device)


def _add_timeline_clock(device: DeviceInfo, timeline: Path) -> None:
    """The timeline's highest AI Core Freq into `device`, read only when nothing else recorded the
    clock (`device.recorded_clock` prefers those): what `_build` takes from a loaded timeline."""
    # deferred: io.device (pyarrow) only where used
    from tilescope.io import device as dev

    if dev.recorded_clock(device)[0] is not None:
        return
    try:
        # deferred: io.timeline (duckdb) and io.timeline_facts (numpy) only where used
        from tilescope.io.timeline import read_timeline
        from tilescope.io.timeline_facts import counter_max
    except ImportError:  # no timeline reader: the loaders skip the timeline too
        return
    device.timeline_max_frequency_mhz = counter_max(read_timeline(timeline))


def load_kernels_arrow(csv_path: Path, chip: str | None = None, device: DeviceInfo | None = None) -> pa.Table:
    """The canonical kernel table with derived metrics as Arrow, for one kernel CSV file (as found
    by `kernel_csv_profile`, with the device facts it found beside the file).

    The file-output path of `tilescope kernels`: the same columns and values as
    `load_profiles(path)[0].kernels` without building a DataFrame.
    """
    # deferred: io.device, io.kernel_csv, io.tables and metrics (pyarrow) only where used
    from tilescope.io import device as dev
    from tilescope.io.csv_header import read_header
    from tilescope.io.kernel_csv import read_kernel_arrow
    from tilescope.metrics import add_derived_metrics_arrow

    table, _producer, _files = read_kernel_arrow(csv_path)
    said = table.schema.metadata  # kept in the result's metadata: the command says it on stderr
    coupled = is_coupled_header(read_header(csv_path))
    selected = dev.choose_chip(chip, device or DeviceInfo(), table, [], coupled)
    out = add_derived_metrics_arrow(table, selected, coupled=coupled)
    return out.replace_schema_metadata({**(out.schema.metadata or {}), **(said or {})})


def load_profile(path: str | Path, chip: str | None = None, progress: bool = False) -> Profile:
    """Exactly one profile; UsageError when the path holds several (pick one rank's directory),
    the first error when one of them cannot be read."""
    profiles = load_profiles(path, chip, progress)
    if profiles.failures:
        raise profiles.failures[0].error
    if len(profiles) != 1:
        names = ", ".join(str(pr.source.path.name) for pr in profiles[:5])
        raise UsageError(f"{path}: holds {len(profiles)} profiles ({names}); pass one of them")
    return profiles[0]
