"""Large benchmark inputs (only on request): the unfused run replayed to N rows / BYTES of trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .kernel_table import (
    KD_HEADER,
    PMU_TIME_COLS,
    format_kernel_rows,
    launches_to_table,
)
from .layer import (
    schedule,
    training_plan,
)
from .model import (
    COMPUTE_STREAM,
    N_STEPS,
    SEED,
    Launch,
)
from .trace_view import (
    Shift,
    metadata_events,
    template_events,
)


def _template() -> tuple[list[Launch], list[dict[str, Any]], int]:
    launches, extra = schedule(training_plan(False))
    launches.sort(key=lambda la: la.start_ns)
    first = min(min(la.host_start_ns for la in launches), min(x["start"] for x in extra)) - 1_000_000
    last = max(max(la.start_ns + la.dur_ns for la in launches), max(x["end"] for x in extra))
    return launches, extra, last - first + 2_000_000


def write_large_kernel_details(path: Path, n_rows: int, chunk_rows: int = 100_000) -> None:
    """A kernel_details.csv with ``n_rows`` rows: the unfused 2-step run replayed with jitter.

    Columns are built with numpy per chunk (no per-row Python), so 1M rows take seconds.
    """
    import numpy as np

    launches, _, period = _template()
    t = launches_to_table(launches)
    n_t = len(launches)
    tasks_per_rep = int(t["task"].max() - t["task"][t["task"] >= 0].min() + 1)
    rng = np.random.default_rng(SEED)
    idx = np.arange(n_rows, dtype=np.int64) % n_t
    rep = np.arange(n_rows, dtype=np.int64) // n_t
    factor = rng.uniform(0.97, 1.0, n_rows)  # only shrink, so replayed kernels never overlap
    start = t["start_ns"][idx] + rep * period
    dur = np.rint(t["dur_ns"][idx] * factor).astype(np.int64)
    stream = t["stream"][idx]
    wait = np.zeros(n_rows, dtype=np.int64)
    for s in np.unique(stream):
        pos = np.nonzero(stream == s)[0]
        wait[pos[1:]] = start[pos[1:]] - (start[pos[:-1]] + dur[pos[:-1]])
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        fh.write(",".join(KD_HEADER) + "\n")
        for a in range(0, n_rows, chunk_rows):
            b = min(a + chunk_rows, n_rows)
            ii, f = idx[a:b], factor[a:b]
            c = {k: v[ii] for k, v in t.items()}
            c["step"] = c["step"] + 2 * rep[a:b]
            c["task"] = np.where(c["task"] >= 0, c["task"] + rep[a:b] * tasks_per_rep, -1)
            c["start_ns"], c["dur_ns"], c["wait_ns"] = start[a:b], dur[a:b], wait[a:b]
            for col in [*PMU_TIME_COLS, "aic_total_cycles", "aiv_total_cycles"]:
                c[col] = c[col] * f
            fh.write("\n".join(format_kernel_rows(c).tolist()) + "\n")


def write_large_trace_view(path: Path, target_bytes: int) -> int:
    """A trace_view.json of about ``target_bytes``, streamed one replayed run at a time; returns bytes."""
    launches, extra, period = _template()
    conn_span = max(la.conn_id for la in launches) + 2
    task_span = max(la.task_id for la in launches) + 1
    seq_span = max(la.seq for la in launches) + 1
    last_end = max(la.start_ns + la.dur_ns for la in launches if la.stream == COMPUTE_STREAM)
    written = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        text = "[\n" + ",\n".join(metadata_events())
        rep = 0
        while True:
            fh.write(text)
            written += len(text)
            if written >= target_bytes:
                break
            sh = Shift(
                ns=rep * period,
                conn=rep * conn_span,
                task=rep * task_span,
                seq=rep * seq_span,
                step=N_STEPS * rep,
            )
            prev = last_end - period if rep else None
            text = ",\n" + ",\n".join(template_events(launches, extra, sh, prev))
            rep += 1
        fh.write("\n]\n")
    return written + 3
