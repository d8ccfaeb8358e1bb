"""What one profile root yields before the chip and derived metrics are applied (`Parts`), and the
helpers the loaders of `tilescope.io.formats` share to fill it: the kernel-table contract, a kernel
table read from a CSV or taken from a timeline, the clock from `msprof op` OpBasicInfo rows.

Kept light at import (pandas and the readers are imported where used): `tilescope.io.load` imports
this module before it starts reading a timeline on its second thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilescope.columns import KERNEL_CONTRACT, canonical_header, dtype_of, is_coupled_header
from tilescope.errors import ProfileFormatError
from tilescope.profile import DeviceInfo

if TYPE_CHECKING:
    import pandas as pd

    from tilescope.profile import Timeline

COUPLED_NOTE = (
    "coupled-chip table (one AI Core with Cube and Vector inside): un-prefixed metrics mapped to aic_/aiv_"
)


def _new_device_info() -> DeviceInfo:
    return DeviceInfo()


@dataclass
class Parts:
    """What one profile root yielded before the chip and derived metrics are applied."""

    kernels: pd.DataFrame
    producer: str | None
    files: list[Path] = field(default_factory=list)
    metric_groups: list[str] = field(default_factory=list)
    device: DeviceInfo = field(default_factory=_new_device_info)
    blocks: pd.DataFrame | None = None
    launches: pd.DataFrame | None = None
    timeline: Timeline | None = None
    rank: int | None = None
    warnings: list[str] = field(default_factory=list)
    # a timeline still being read, for the caller to resolve on first use (`lazy_timeline`)
    pending_timeline: Callable[[], Timeline | None] | None = None
    # the kernel table came from a coupled chip (un-prefixed PMU names); Profile has no field yet
    coupled: bool = False
    # the one kernel CSV whose rows are read later, streamed into only the columns the caller
    # needs (`read_kernel_csv(defer=True)`); `kernels` stays empty until then
    kernel_csv: Path | None = None
    # the kernel table's unreadable rows, skipped (tilescope.io.bad_rows): {"count", "first", "note"}
    rows_skipped: dict[str, Any] | None = None
    # values outside their documented range, made null and flagged: {"count", "first", "note"}
    values_out_of_range: dict[str, Any] | None = None

    @property
    def has_kernel_table(self) -> bool:
        """A kernel table was read, or found and left to be streamed."""
        return self.kernel_csv is not None or bool(len(self.kernels.columns))


def kernels_from_timeline(tl: Timeline, warnings: list[str]) -> pd.DataFrame:
    """The kernel table of a profile that has only a timeline: its compute tasks (runtime tasks
    are left out and named in a note; the timeline's own table keeps every task for display)."""
    # deferred: pandas (~0.3 s) and io.timeline_facts (numpy) only where used
    import pandas as pd

    from tilescope.io.timeline_facts import kernel_tasks

    src = tl.kernels
    keep, core_type = kernel_tasks(src)
    k = pd.DataFrame(
        {c: src[c] for c in ("name", "start_ns", "duration_us", "stream_id", "task_id") if c in src}
    )
    k["core_type"] = core_type
    if not keep.all():
        dropped = src.loc[~keep, ["name", "start_ns"]].sort_values("start_ns", kind="stable")
        names = dropped["name"].astype("object").dropna().drop_duplicates().tolist()
        shown = ", ".join(map(str, names[:6])) + (", …" if len(names) > 6 else "")
        n = len(dropped)
        said = f"{n} runtime tasks ({shown}) are not kernels"
        warnings.append(said if n > 1 else f"1 runtime task ({shown}) is not a kernel")
        k = k.loc[keep].reset_index(drop=True)
    return ensure_contract(k)


def ensure_contract(k: pd.DataFrame) -> pd.DataFrame:
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    for col in KERNEL_CONTRACT:
        if col not in k:
            dt = dtype_of(col)
            k[col] = pd.Series(
                pd.NA if dt in ("Int64", "int64_ns") else None,
                index=k.index,
                dtype={"string": "str", "Int64": "Int64", "int64_ns": "Int64"}.get(dt, "float64"),
            )
    return k


def read_kernel_csv(parts: Parts, paths: Path | list[Path], defer: bool = False) -> None:
    """The kernel table (one file or the slices of one) into `parts`.

    With `defer`, one file is only checked by its header here (the errors a header gives are
    raised as before) and left in `parts.kernel_csv` for `load._build` to stream; its metric
    groups are known once it has been read.
    """
    # deferred: io.kernel_csv and io.tables (pyarrow) only where used
    from tilescope.io.csv_header import read_header
    from tilescope.io.kernel_csv import check_header, read_kernel_table

    files = paths if isinstance(paths, list) else [paths]
    if defer and len(files) == 1:
        header = read_header(files[0])
        parts.producer = check_header(files[0], header, canonical_header(header))
        parts.kernel_csv = files[0]
        parts.files.append(files[0])
        coupled = is_coupled_header(header)
    else:
        kt = read_kernel_table(paths)
        parts.files.extend(kt.files)
        parts.kernels, parts.producer, parts.metric_groups = kt.kernels, kt.producer, kt.metric_groups
        parts.rows_skipped, parts.values_out_of_range = kt.rows_skipped, kt.values_out_of_range
        coupled = kt.coupled
    parts.coupled = coupled
    if coupled:
        parts.warnings.append(COUPLED_NOTE)


def clock_from_launches(device: DeviceInfo, launches: pd.DataFrame) -> None:
    """OpBasicInfo's clock (its first launch): `Current Freq` is the clock the kernel ran at,
    `Rated Freq` the device's rated one."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    if not len(launches):
        return
    first = launches.iloc[0]
    for col, attr in (
        ("current_freq_mhz", "aic_frequency_mhz"),
        ("rated_freq_mhz", "rated_frequency_mhz"),
    ):
        if col in launches and pd.notna(first[col]):
            setattr(device, attr, float(first[col]))
    if "device_id" in launches and pd.notna(first["device_id"]):
        device.device_id = int(first["device_id"])


def _clock_text(device: DeviceInfo) -> str:
    rated, current = device.rated_frequency_mhz, device.aic_frequency_mhz
    said = [f"Current Freq {current:g} MHz"] if current is not None and current != rated else []
    said += [f"Rated Freq {rated:g} MHz"] if rated is not None else []
    return ", ".join(said) or "no frequency"


def read_basic_info(files: list[Path], warnings: list[str]) -> tuple[pd.DataFrame | None, list[Path]]:
    """The launches of the OpBasicInfo files beside other sources and the files that gave them. A
    broken one is a note in `warnings`, not a failed load (it is a side source, like info.json)."""
    # deferred: pandas (~0.3 s) and io.tables (pyarrow) only where used
    import pandas as pd

    from tilescope.io.tables import read_small_table

    frames: list[pd.DataFrame] = []
    used: list[Path] = []
    for f in files:
        try:
            frames.append(read_small_table(f))
        except ProfileFormatError as exc:
            warnings.append(f"{f.name} not used: {exc.one_line()}")
            continue
        used.append(f)
    if not frames:
        return None, used
    return (pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]), used


def add_basic_info(parts: Parts, files: list[Path]) -> str:
    """OpBasicInfo beside other sources: its rows become `launches`, its clock the device's."""
    launches, used = read_basic_info(files, parts.warnings)
    if launches is None:
        return ""
    parts.files.extend(used)
    parts.launches = launches
    clock_from_launches(parts.device, parts.launches)
    return f"clock from {file_names(used)} ({_clock_text(parts.device)})"


def file_names(paths: list[Path]) -> str:
    return ", ".join(p.name for p in paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
