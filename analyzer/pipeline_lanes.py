"""The in-core pipeline timeline of a simulator run (issue #25): per core and pipe, when the pipe
was busy and on which source line, compressed for a lane chart (one lane per pipe per core).

From each core's `trace.json`, or the summary trace of all cores when no core has one (streamed
through tilescope.io.simulator_trace: DuckDB reads and reduces the events, Python gets the
compressed intervals only):
1. **Merge.** In each lane, in time order, an instruction joins the interval before it when it is
   of the same source line and starts no later than `MERGE_GAP_US` after the end of everything
   before it in the lane (touching or overlapping). An interval's `busy_us` is the sum of its
   instructions' durations (overlapping instructions count each), `instructions` their number.
2. **Cap.** A lane with more than `max_per_lane` merged intervals is downsampled: its span (first
   start to last end) is cut into `max_per_lane` equal buckets and the merged intervals of a bucket
   (by their start) become one, from their first start to their last end, named after the line
   with the most busy time among them (ties: the first file and line in sort order); `busy_us` and
   `instructions` stay sums, so `busy_us / (end_us - start_us)` says how busy the drawn bar was.
   A lane at or under the cap is exact.

Columns: core (the core folder's name), pipe, start_us, end_us (µs, the trace's clock), line
(Int64: the Ascend C line; <NA> for instructions without one, a build without `-g`), file,
busy_us, instructions. Sorted by core, pipe, start_us.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tilescope.errors import ProfileFormatError
from tilescope.io.msprof_op_layout import find_simulator, simulator_core_dirs
from tilescope.io.simulator_trace import CODE_RE, EVENTS, first_bad_event, lane_pipes, scan

MAX_PER_LANE = 2000  # a lane chart has ~1-2k pixels across: more bars than that are not seen
# Half the resolution of a trace written with 3 decimals of µs (1 ns): an instruction starting
# that close after the previous end is adjacent, not after a gap.
MERGE_GAP_US = 0.0005
LANE_COLUMNS = ("core", "pipe", "start_us", "end_us", "line", "file", "busy_us", "instructions")

# One read of the file (MATERIALIZED: the X and M events are kept in DuckDB, spilled to its temp
# directory when large, never in Python), then: runs of touching same-line instructions per lane
# (gaps and islands over the running end), the cap's buckets, the dominant line of each bucket.
_LANES_SQL = f"""
WITH ev AS MATERIALIZED (
    SELECT ph, pid, tid, TRY_CAST(ts AS DOUBLE) AS s, TRY_CAST(dur AS DOUBLE) AS d,
           CASE WHEN ph = 'X' THEN args->>'code' END AS code,
           CASE WHEN ph = 'M' THEN name END AS kind, CASE WHEN ph = 'M' THEN args->>'name' END AS meta
    FROM {EVENTS} WHERE ph = 'X' OR (ph = 'M' AND name IN ('process_name', 'thread_name'))),
x AS (SELECT pid, tid, coalesce(code, '') AS code, s, s + d AS e, d FROM ev
      WHERE ph = 'X' AND s IS NOT NULL AND d IS NOT NULL AND isfinite(s) AND isfinite(d) AND d >= 0),
o AS (SELECT *, max(e) OVER (PARTITION BY pid, tid ORDER BY s, e, code
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end,
             lag(code) OVER (PARTITION BY pid, tid ORDER BY s, e, code) AS prev_code FROM x),
r AS (SELECT *, sum(CASE WHEN prev_end IS NULL OR s > prev_end + __GAP__ OR code <> prev_code
                         THEN 1 ELSE 0 END)
                OVER (PARTITION BY pid, tid ORDER BY s, e, code ROWS UNBOUNDED PRECEDING) AS run FROM o),
runs AS (SELECT pid, tid, run, code, min(s) AS s, max(e) AS e, fsum(d) AS busy, count(*) AS n
         FROM r GROUP BY pid, tid, run, code),
lanes AS (SELECT *, count(*) OVER w AS k, min(s) OVER w AS t0, max(e) OVER w AS t1 FROM runs
          WINDOW w AS (PARTITION BY pid, tid)),
b AS (SELECT *, CASE WHEN k <= __CAP__ THEN run
                     WHEN t1 > t0 THEN least(floor((s - t0) / (t1 - t0) * __CAP__), __CAP__ - 1)
                     ELSE 0 END AS bucket FROM lanes),
lines AS (SELECT pid, tid, bucket, code, fsum(busy) AS busy FROM b GROUP BY ALL),
top AS (SELECT pid, tid, bucket, code FROM lines
        QUALIFY row_number() OVER (PARTITION BY pid, tid, bucket ORDER BY busy DESC, code) = 1)
SELECT 'X' AS ph, b.pid, b.tid, top.code, NULL AS kind, NULL AS meta, min(b.s) AS start_us,
       max(b.e) AS end_us, fsum(b.busy) AS busy_us, sum(b.n) AS instructions,
       (SELECT count(*) FROM ev WHERE ph = 'X' AND (s IS NULL OR d IS NULL OR NOT isfinite(s)
                                                   OR NOT isfinite(d) OR d < 0)) AS bad
FROM b JOIN top USING (pid, tid, bucket) GROUP BY b.pid, b.tid, b.bucket, top.code
UNION ALL
SELECT 'M', pid, tid, NULL, kind, meta, NULL, NULL, NULL, NULL, 0 FROM ev WHERE ph = 'M'
"""


def trace_lanes(path: Path, core: str | None, max_per_lane: int = MAX_PER_LANE) -> pd.DataFrame:
    """The compressed busy intervals of one core's trace (module docstring); `core` None: a trace
    of several cores (the simulator's summary trace), each core named by its process."""
    if max_per_lane < 1:
        raise ValueError("max_per_lane must be at least 1")
    sql = _LANES_SQL.replace("__CAP__", str(int(max_per_lane))).replace("__GAP__", repr(MERGE_GAP_US))
    got = scan(path, sql).to_pandas()
    if len(got) and got["bad"].max() > 0:
        raise first_bad_event(path)
    x = got[got["ph"] == "X"]
    if x.empty:
        return _empty()
    where = x["code"].str.extract(CODE_RE)
    out = pd.DataFrame(
        {
            "core": core if core is not None else _core_names(x, got[got["ph"] == "M"]),
            "pipe": lane_pipes(x, got[got["ph"] == "M"]),
            "start_us": x["start_us"].astype("float64"),
            "end_us": x["end_us"].astype("float64"),
            "line": pd.to_numeric(where["line"]).astype("Int64"),
            "file": where["file"].astype("object").where(where["file"].notna(), None),
            "busy_us": x["busy_us"].astype("float64"),
            "instructions": x["instructions"].astype("int64"),
        }
    )
    return out.sort_values(["pipe", "start_us", "end_us"], kind="stable").reset_index(drop=True)


def pipeline_lanes(path: Path, max_per_lane: int = MAX_PER_LANE) -> pd.DataFrame:
    """Every core's compressed busy intervals of the simulator run at or below `path` (a bundle,
    an OPPROF_* folder, its simulator/ folder); cores without a trace.json have no rows."""
    root = find_simulator(path)
    if root is None:
        raise ProfileFormatError(path, None, "a msprof op simulator folder (simulator/core*.veccore*/ ...)")
    parts = [
        trace_lanes(d / "trace.json", d.name, max_per_lane)
        for d in simulator_core_dirs(root)
        if (d / "trace.json").is_file()
    ]
    parts = [p for p in parts if len(p)]
    if not parts and (root / "trace.json").is_file():
        # no per-core trace (an output trimmed of them): the summary trace holds every core's events
        every = trace_lanes(root / "trace.json", None, max_per_lane)
        order = ["core", "pipe", "start_us", "end_us"]
        parts = [every.sort_values(order, kind="stable").reset_index(drop=True)] if len(every) else []
    if not parts:
        return _empty()
    return pd.concat(parts, ignore_index=True)


def _core_names(x: pd.DataFrame, meta: pd.DataFrame) -> pd.Series:
    """Each row's core in a trace of several: its process's name (a process_name event), else
    its pid as written (the simulator's summary trace writes the core's name there)."""
    names = {p: n for k, p, n in zip(meta["kind"], meta["pid"], meta["meta"], strict=True)
             if k == "process_name" and isinstance(n, str)}
    return pd.Series([names.get(p, str(p)) for p in x["pid"]], index=x.index)


def _empty() -> pd.DataFrame:
    types = {"start_us": "float64", "end_us": "float64", "line": "Int64", "busy_us": "float64"}
    return pd.DataFrame({c: pd.Series(dtype=types.get(c, "object")) for c in LANE_COLUMNS}).astype(
        {"instructions": "int64"}
    )
