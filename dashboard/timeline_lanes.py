"""The Timeline tab's lanes and the window of them a view draws.

Lanes (`build_lanes`), top to bottom:
- host: one per process and thread of the timeline (Python, ..., then CANN), named by the thread;
- device: one per stream and engine — Cube, Vector, Mix (MIX_AIC / MIX_AIV, coloured apart),
  AI_CPU, HCCL, any other kernel type by its name, then the stream's runtime tasks (event records,
  SQE tasks, PROFILING_ENABLE, ...: `timeline_facts.kernel_tasks` says which tasks are kernels);
- communication: the timeline's HCCL groups (torch_npu writes them in an `HCCL` process: one
  thread per group, plus one per plane whose tasks are the hardware stream's own, left out), or,
  when the timeline has none, the kernel table's HCCL rows (they carry no stream).
Without a timeline the kernel table alone gives the device and communication lanes.

The engine of a timeline task is the kernel table's core type for its name when the profile has a
kernel table (torch_npu's timeline says AI_CORE for vector kernels too), else its `Task Type`.

Launch links (host op → kernel or collective) come from the timeline's flows (a kernel with two
prefers the CANN `HostToDevice` one: that is the launch) and, where no flow reaches, from an equal
`connection_id` on a host op (msprof timelines write the flow ends only). Which row goes in which
lane, and its link, is tilescope.dashboard.timeline_rows; this module cuts the rows into lanes.

`timeline_window` cuts every lane to the visible x range within a budget of segments, merging
neighbouring ones into "N kernels" bars when more than fit; `fit_window` is the first view's range:
the kernels and collectives, not the host's whole capture (a sparse run's 11 kernels sit in 2.6 ms
of a 5.5 s capture).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tilescope.dashboard import timeline_rows
from tilescope.dashboard.data import ProfileEntry

MAX_LINKS = 150  # host-to-kernel launch lines drawn in one window (more is a hairball)
FIT_MARGIN = 0.02  # of the kernels' span, each side of the first view


@dataclass
class Lane:
    """One timeline row, sorted by start (µs since the profile's first event)."""

    label: str
    kind: str  # "host" | "kernel" | "comm" (collectives) | "task" (runtime tasks)
    start: np.ndarray
    end: np.ndarray
    names: np.ndarray  # object array of str
    category: np.ndarray  # the colour's category per segment ("Cube", "Mix (Cube)", "HCCL", "Host", ...)
    # For kernel lanes with launch links: start (µs), lane label and name of the launching host op.
    link_start: np.ndarray | None = None
    link_lane: np.ndarray | None = None
    launcher: np.ndarray | None = None

    @property
    def fits(self) -> bool:
        """Whether the first view is fitted to this lane (kernels and collectives)."""
        return self.kind in ("kernel", "comm")


@dataclass
class Segments:
    """What the timeline figure draws for one view window."""

    lane: list[str]
    start: list[float]
    end: list[float]
    text: list[str]
    category: list[str]
    merged: bool  # True when neighbouring kernels were merged to fit the budget
    total_in_window: int
    # host op start, host lane, kernel start, kernel lane: drawn only when few enough to read
    links: list[tuple[float, str, float, str]] = field(default_factory=list)


def window_lane(
    lane: Lane, x0: float, x1: float, bins: int
) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray, bool, np.ndarray | None]:
    """Segments of one lane intersecting [x0, x1], merged into at most `bins` buckets if needed."""
    # Segments are sorted by start; those ending before x0 may still overlap, so search by start
    # from x0 minus the longest segment of the lane.
    longest = float((lane.end - lane.start).max()) if len(lane.start) else 0.0
    lo = int(np.searchsorted(lane.start, x0 - longest, side="left"))
    hi = int(np.searchsorted(lane.start, x1, side="right"))
    s, e = lane.start[lo:hi], lane.end[lo:hi]
    keep = e >= x0
    s, e, names, cats = s[keep], e[keep], lane.names[lo:hi][keep], lane.category[lo:hi][keep]
    if len(s) <= bins:
        if lane.launcher is None:
            return s, e, [str(n) for n in names], cats, False, lo + np.flatnonzero(keep)
        by = lane.launcher[lo:hi][keep]
        text = [str(n) if b is None else f"{n} ← launched by {b}" for n, b in zip(names, by, strict=True)]
        return s, e, text, cats, False, lo + np.flatnonzero(keep)
    width = (x1 - x0) / bins if x1 > x0 else 1.0
    bucket = np.clip(((s - x0) // width).astype(np.int64), 0, bins - 1)
    edges = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    ms = np.minimum.reduceat(s, edges)
    me = np.maximum.reduceat(e, edges)
    counts = np.diff(np.r_[edges, len(s)])
    busy = np.add.reduceat(e - s, edges)
    what = "host ops" if lane.kind == "host" else "tasks" if lane.kind == "task" else "kernels"
    text = [
        f"{n} {what}, {b:,.1f} µs busy" if n > 1 else str(names[i])
        for n, b, i in zip(counts, busy, edges, strict=True)
    ]
    return ms, me, text, cats[edges], True, None


def whole_window(lanes: list[Lane]) -> tuple[float, float]:
    """From the first start to the last end of every lane."""
    starts = [ln.start[0] for ln in lanes if len(ln.start)]
    ends = [ln.end.max() for ln in lanes if len(ln.end)]
    return (float(min(starts)) if starts else 0.0, float(max(ends)) if ends else 1.0)


def fit_window(lanes: list[Lane]) -> tuple[float, float]:
    """The first view: the span of the kernels and collectives with a small margin; the whole
    run when there are none."""
    fitted = [ln for ln in lanes if ln.fits and len(ln.start)]
    if not fitted:
        return whole_window(lanes)
    x0, x1 = whole_window(fitted)
    pad = max((x1 - x0) * FIT_MARGIN, 1.0)
    return x0 - pad, x1 + pad


def timeline_window(
    lanes: list[Lane], x0: float | None = None, x1: float | None = None, budget: int = 6000
) -> Segments:
    """All lanes cut to the window (None: the whole run), within `budget` segments in total."""
    if x0 is None or x1 is None:
        x0, x1 = whole_window(lanes)
    bins = max(budget // max(len(lanes), 1), 50)
    seg = Segments([], [], [], [], [], False, 0)
    for lane in lanes:
        s, e, text, cats, merged, idx = window_lane(lane, x0, x1, bins)
        if idx is not None and lane.link_start is not None and lane.link_lane is not None:
            has = ~np.isnan(lane.link_start[idx])
            for i in idx[has]:
                seg.links.append(
                    (float(lane.link_start[i]), str(lane.link_lane[i]), float(lane.start[i]), lane.label)
                )
        seg.lane += [lane.label] * len(s)
        seg.start += s.tolist()
        seg.end += e.tolist()
        seg.text += text
        seg.category += [str(c) for c in cats]
        seg.merged |= merged
        seg.total_in_window += len(s)
    if len(seg.links) > MAX_LINKS:
        seg.links = []
    return seg


# --- building the lanes -----------------------------------------------------------------------


def build_lanes(entry: ProfileEntry) -> list[Lane]:
    """The profile's lanes (see the module's docstring); [] when nothing has a start."""
    parts, hosts = timeline_rows.rows(entry)
    if not parts:
        return []  # `timeline_gap` says why
    origin = min(int(p.start_ns.min()) for p in parts)
    lanes: list[Lane] = []
    for part in parts:  # host, device, communication; within each, lanes in their `order`
        start = (part.start_ns - origin) / 1000.0
        by_lane = np.argsort(part.lane, kind="stable")  # each lane's rows together, in row order
        codes, first = np.unique(part.lane[by_lane], return_index=True)
        bounds = dict(
            zip(
                codes.tolist(),
                zip(first.tolist(), [*first[1:].tolist(), len(by_lane)], strict=True),
                strict=True,
            )
        )
        for code in sorted(bounds, key=lambda c: part.order[c]):
            idx = by_lane[bounds[code][0] : bounds[code][1]]
            idx = idx[np.argsort(start[idx], kind="stable")]
            s = start[idx]
            lane = Lane(
                part.labels[code],
                part.kinds[code],
                s,
                s + part.duration_us[idx],
                part.name[idx],
                part.category[idx],
            )
            if part.link_host is not None and hosts is not None:
                _link(lane, part.link_host[idx], hosts, origin)
            lanes.append(lane)
    return lanes


def _link(lane: Lane, src: np.ndarray, hosts: timeline_rows.Hosts, origin: int) -> None:
    """The lane's launch links from the index of each row's launching host op (-1: none)."""
    has = src >= 0
    if not has.any():
        return
    lane.link_start = np.full(len(src), np.nan)
    lane.link_start[has] = (hosts.start_ns[src[has]] - origin) / 1000.0
    lane.link_lane = np.full(len(src), None, dtype=object)
    lane.link_lane[has] = hosts.lane[src[has]]
    lane.launcher = np.full(len(src), None, dtype=object)
    lane.launcher[has] = hosts.name[src[has]]


def timeline_gap(entry: ProfileEntry) -> str:
    """Why the timeline of `entry` is empty, in the words the view shows."""
    profile = entry.profile
    if not len(entry.kernels):
        return (
            "Nothing to place on a timeline: this input holds no kernel launches "
            "(IR only, nothing was profiled)."
        )
    if profile.source.producer == "msprof_op":
        return (
            "No start times in this profile: `msprof op` measures one kernel in isolation, launch by "
            "launch, with no clock shared between launches. Its per-block numbers are in Kernel detail."
        )
    return (
        f"No start times in this profile ({profile.source.format} input): nothing to place on a "
        "timeline. Profile with torch_npu or msprof to see kernels in time."
    )
