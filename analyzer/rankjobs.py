"""The records of the per-rank work: what one input's job holds (`UnitJob`), and what comes back
(`UnitResult` with a `RankPart` per rank). Shared by the workers that produce them
(tilescope.rankwork), the cache that stores and returns them (tilescope.rank_cache) and `analyze`;
plain picklable dataclasses, so a Dask worker can receive a job and send a result."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilescope.config import Config
from tilescope.io.bad_rows import strict

if TYPE_CHECKING:
    from tilescope.cluster import RankTables
    from tilescope.io.detect import Detected
    from tilescope.io.failures import LoadFailure
    from tilescope.io.remote import RemoteLimits


@dataclass(frozen=True)
class UnitJob:
    """One input under PATH and how to analyse it: everything `run_unit` needs (picklable)."""

    index: int  # position among the inputs found under PATH
    det: Detected | None  # None: a rank folder at `url`, staged by the worker (tilescope.io.remote)
    chip: str | None
    manifest_dir: Path | None
    config: Config
    kernel_columns: tuple[str, ...] | None
    timeline_cap: int  # > 0: the first profile's launches for the timeline chart
    # a local worker stores its own summary (tilescope.rank_cache), in parallel with the others
    cache_root: Path | None = None
    cache_key: str | None = None
    url: str | None = None
    input_bytes: int = 0  # its files' bytes on disk, when listed (0: not known): the allocator's decay
    # `--strict` as the command had it: a forkserver's workers keep the environment it started with
    strict: bool = field(default_factory=strict)
    # a URL's deadline and byte cap as the command read them (TILESCOPE_URL_TIMEOUT, _MAX_BYTES)
    remote: RemoteLimits | None = None


@dataclass
class RankPart:
    """One rank of an input: its report part and its rows of the cross-rank model."""

    part: dict[str, Any]  # tilescope.report.data.profile_part
    rank: int | None
    path: Path | str  # str: the URL of a staged remote rank
    tables: RankTables

    @property
    def has_timeline(self) -> bool:
        return self.part.get("timeline") is not None


@dataclass
class UnitResult:
    index: int
    parts: list[RankPart] = field(default_factory=list)
    failure: LoadFailure | None = None
    failure_tables: RankTables | None = None  # a left-out input's summary files still count
    # what the work cost where it ran (benchmarks/bench_cluster.py): CPU seconds of this input,
    # and the worker process's peak RSS so far (KiB); not part of any report
    cpu_s: float = 0.0
    worker_peak_kib: int = 0
