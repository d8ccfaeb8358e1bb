"""The Timeline tab of a bundle with a simulator run: the kernel's in-core pipeline (#25).

An `msprof op` board run has no timeline (each launch is measured alone, with no shared clock);
its bundle's simulator run has one inside the kernel: per core and pipe, when the pipe was busy
and on which line (tilescope.pipeline_lanes, from each core's trace.json). This draws one lane per
core and pipe, coloured by pipe, each bar named by its Ascend C line and the TileLang line the line
map carries it to. Lanes are capped at pipeline_lanes.MAX_PER_LANE bars (buckets named after their
busiest line), which the info line says.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from tilescope.dashboard.data import ProfileEntry
from tilescope.dashboard.figures_timeline import timeline_figure
from tilescope.errors import TilescopeError
from tilescope.io.simulator import SimulatorData
from tilescope.lines import compact_lines, profile_lines
from tilescope.pipeline_lanes import MAX_PER_LANE, pipeline_lanes

# the simulator's pipe names -> the palette's categories (dashboard.figures.COLOURS)
PIPE_CATEGORY = {
    "CUBE": "Cube",
    "VECTOR": "Vector",
    "MTE1": "MTE1",
    "MTE2": "MTE2",
    "MTE3": "MTE3",
    "FIXP": "FixPipe",
    "FIXPIPE": "FixPipe",
    "SCALAR": "Scalar",
}
PIPE_ORDER = ("SCALAR", "MTE2", "MTE1", "CUBE", "FIXP", "FIXPIPE", "VECTOR", "MTE3")


def pipeline_of(entry: ProfileEntry) -> pd.DataFrame | str | None:
    """The profile's in-core lanes (computed once per entry); a string says why they could not
    be read; None: the profile has no simulator run."""
    sim = entry.profile.simulator
    if not isinstance(sim, SimulatorData) or "cycles" not in sim.measures:
        return None  # a board's Source mode measures no time inside the kernel

    def compute() -> pd.DataFrame | str:
        try:
            return pipeline_lanes(sim.root)
        except TilescopeError as exc:
            return f"The simulator's traces could not be read: {exc.one_line()}"

    got: pd.DataFrame | str = entry.cached("pipeline", compute)
    return got


def pipeline_view(entry: ProfileEntry, lanes: pd.DataFrame) -> tuple[go.Figure, str]:
    """The lane chart and the info line above it."""
    names = _line_names(entry)
    lanes = lanes.assign(
        lane=lanes["core"] + " · " + lanes["pipe"],
        rank=lanes["pipe"].map({p: i for i, p in enumerate(PIPE_ORDER)}).fillna(len(PIPE_ORDER)),
    )
    order = lanes.drop_duplicates("lane").sort_values(["core", "rank", "pipe"])["lane"].tolist()
    texts = [
        _hover(pipe, line, busy, n, names)
        for pipe, line, busy, n in zip(
            lanes["pipe"], lanes["line"], lanes["busy_us"], lanes["instructions"], strict=True
        )
    ]
    capped = bool(lanes.groupby("lane").size().max() >= MAX_PER_LANE)
    fig = timeline_figure(
        lanes["lane"].tolist(),
        lanes["start_us"].tolist(),
        lanes["end_us"].tolist(),
        texts,
        [PIPE_CATEGORY.get(str(p).upper(), "Other") for p in lanes["pipe"]],
        order,
        False,
        title="In-core pipeline (msprof op simulator) — one lane per core and pipe"
        + (" (long lanes bucketed: zoom in for detail)" if capped else ""),
    )
    cores = lanes["core"].nunique()
    info = (
        f"The kernel inside, as the simulator ran it: {cores} core{'s' if cores != 1 else ''}, "
        f"{len(order)} pipe lanes, {len(lanes):,} busy intervals (touching instructions of one line merged"
        + (
            f"; lanes over {MAX_PER_LANE:,} intervals cut into equal buckets named after their busiest line"
            if capped
            else ""
        )
        + "). Hover a bar for its Ascend C and TileLang line. `msprof op` board runs have no timeline "
        "between launches; these are the simulator's cycles, not the board's time. Drag to zoom."
    )
    return fig, info


def _line_names(entry: ProfileEntry) -> dict[int, str]:
    """Ascend C line -> the TileLang line(s) it was lowered from, as `tilescope lines` groups them."""
    report = profile_lines(entry.profile)
    names: dict[int, str] = {}
    for g in report.lines if report is not None else []:
        if not g.source_lines:
            continue
        where = compact_lines(g.source_lines)
        for a in g.ascendc:
            names[int(a["line"])] = f"TileLang {where} {g.what}"
    return names


def _hover(pipe: Any, line: Any, busy: float, n: int, names: dict[int, str]) -> str:
    if pd.isna(line):
        where = "no source line (built without -g)"
    else:
        where = f"Ascend C l.{int(line)}" + (f" · {names[int(line)]}" if int(line) in names else "")
    return f"{pipe}: {where} · {n:,} instr, busy {busy:,.3f} µs"
