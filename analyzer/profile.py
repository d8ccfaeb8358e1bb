"""The canonical Profile: what every parser returns and every rule, report and view reads.

Tables are pandas DataFrames with the canonical column names of design.md §3 (see
`tilescope.columns`). Missing metrics are NaN/None; a table the input did not carry is `None`, never
an empty stand-in.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is imported by whoever builds a Profile, not by this module
    import pandas as pd

from tilescope.chips import ChipSpec


@dataclass
class SourceInfo:
    """Where a profile came from and what was detected."""

    path: Path
    # "torch_npu", "msprof", "msprof_op", "msprof_op_multi", "kernel_csv", "timeline_json", "sqlite",
    # "folder" (several sources side by side), "bundle", "msprof_groups" (one device's msprof runs,
    # one per metric group, merged: io.detect._metric_group_runs)
    format: str
    producer: str | None = None  # "torch_npu" | "msprof" | "msprof_op"
    files: list[Path] = field(default_factory=list)
    metric_groups: list[str] = field(default_factory=list)  # e.g. ["PipeUtilization"]
    # a coupled-chip table (one AI Core with Cube and Vector inside, un-prefixed PMU names)
    coupled: bool = False


@dataclass
class DeviceInfo:
    device_id: int | None = None
    ai_core_num: int | None = None
    aiv_num: int | None = None
    aic_frequency_mhz: float | None = None
    rated_frequency_mhz: float | None = None
    # the highest value of the timeline's `AI Core Freq` counter (the idle clock reads lower, so the
    # maximum, not the value under a kernel, is the evidence for the rated clock)
    timeline_max_frequency_mhz: float | None = None
    model_name: str | None = None
    cann_version: str | None = None
    # set when the core counts and clock are another run's record, not this run's: which file
    # (an msprof run without info.json takes its sibling runs', `io.formats.sibling_info_json`)
    borrowed_from: str | None = None


@dataclass
class Timeline:
    """Timeline tables (from trace_view.json / msprof_*.json / SQLite), all times exact int64 ns.

    kernels:  name, pid, tid, stream_id, task_id, start_ns, duration_us, connection_id, task_type
    host_ops: lane ("Python"|"CANN"|...), name, cat, pid, tid, start_ns, duration_us[, connection_id]
    counters: name, pid, start_ns, series, value       (e.g. "AI Core Freq", "MHz", 1800.0)
    flows:    cat, flow_id, host_index, kernel_index  (indexes into host_ops / kernels; -1 unresolved)
    lanes:    {pid: process name}; threads: {(pid, tid): thread name} ("Stream 2", "Group 0 Communication")
    """

    kernels: pd.DataFrame
    host_ops: pd.DataFrame
    counters: pd.DataFrame
    flows: pd.DataFrame
    lanes: dict[int, str] = field(default_factory=dict)
    source_file: Path | None = None
    threads: dict[tuple[int, int], str] = field(default_factory=dict)
    # events left out for a time outside its range: {"count", "first", "note"} (io.validate.screen_frame)
    rows_skipped: dict[str, Any] | None = None


@dataclass
class Profile:
    source: SourceInfo
    kernels: pd.DataFrame  # one row per kernel launch, canonical columns
    chip: ChipSpec
    device: DeviceInfo = field(default_factory=DeviceInfo)
    blocks: pd.DataFrame | None = None  # msprof op per-block rows (block_id, sub_block_id, ...)
    launches: pd.DataFrame | None = None  # msprof op OpBasicInfo rows
    timeline: Timeline | None = None
    rank: int | None = None
    ir: dict[str, Any] | None = None  # a bundle's ir/ir.json, when present
    ir_dir: Path | None = None
    manifest: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    # a bundle whose kernel file changed since collection: the warning (also among `warnings`),
    # which every report format leads with (tilescope.io.bundle.stale_kernel)
    stale_kernel: str | None = None
    # the kernel table's unreadable rows, skipped: {"count", "first", "note"} (tilescope.io.bad_rows)
    rows_skipped: dict[str, Any] | None = None
    # values outside their documented range, made null and flagged on their rows (io.validate)
    values_out_of_range: dict[str, Any] | None = None
    # a bundle's `msprof op simulator` output (tilescope.io.simulator.SimulatorData; typed loosely
    # because io sits above this module): the measured cost per line rules name (docs/lines.md)
    simulator: Any = None

    def has(self, need: str) -> bool:
        """True when the profile can satisfy one rule input.

        A need is a capability token ("kernels", "timeline", "blocks", "ir", "launches") or a
        kernel-table column that must exist and hold at least one value.
        """
        if need == "kernels":
            return len(self.kernels) > 0
        if need == "timeline":
            return self.timeline is not None and len(self.timeline.kernels) > 0
        if need == "blocks":
            return self.blocks is not None and len(self.blocks) > 0
        if need == "launches":
            return self.launches is not None and len(self.launches) > 0
        if need == "ir":
            return self.ir is not None
        if need.startswith("blocks."):
            col = need.split(".", 1)[1]
            return self.blocks is not None and col in self.blocks and bool(self.blocks[col].notna().any())
        return need in self.kernels.columns and bool(self.kernels[need].notna().any())

    def with_kernels(self, kernels: pd.DataFrame) -> Profile:
        """This profile with another kernel table (a rule's working columns added); everything else
        is shared, including a timeline still being read (it is not waited for here)."""
        clone = copy.copy(self)
        clone.kernels = kernels
        return clone

    def defer_timeline(self, resolve: Callable[[], Timeline | None]) -> None:
        """Let `timeline` be read on first use: `resolve()` (e.g. a reader thread's Future.result)
        runs then, and its ProfileFormatError surfaces there. `analyze` uses this to run the
        kernel-table rules while a large trace_view.json is still being read."""
        self.__dict__["_timeline_pending"] = resolve

    @property
    def timeline_pending(self) -> bool:
        """True while the timeline is still being read (looking at it would wait for it)."""
        return self.__dict__.get("_timeline_pending") is not None

    @property
    def label(self) -> str:
        r = f" rank {self.rank}" if self.rank is not None else ""
        return f"{self.source.path}{r}"


def _get_timeline(self: Profile) -> Timeline | None:
    pending = self.__dict__.get("_timeline_pending")
    if pending is not None:
        self.__dict__["_timeline"] = pending()  # raises for a broken file, then and every time after
        self.__dict__["_timeline_pending"] = None
    return self.__dict__.get("_timeline")


def _set_timeline(self: Profile, value: Timeline | None) -> None:
    self.__dict__["_timeline"] = value
    self.__dict__["_timeline_pending"] = None


# `timeline` stays a dataclass field (constructor argument, repr, eq) but is read through a
# property, so that a deferred timeline is resolved wherever it is first used.
Profile.timeline = property(_get_timeline, _set_timeline)  # type: ignore[assignment]
