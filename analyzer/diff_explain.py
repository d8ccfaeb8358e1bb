"""Why a kernel's time changed between two runs: the facts that changed with it, largest first.

A launch's time d is the work each core does over the cores that share it. With
waves = ceil(blocks / cores) and p = blocks / waves (the blocks running at once), d = (d x p) / p:
a new grid alone moves the time by p_base / p_head at the same work per core, and what is left,
the core time d x p, is what each block costs — its pipes, bytes, caches. The two factors
multiply to the whole change, so each gets its share of it in log terms: "Block Dim 4 -> 1" on a
Vector kernel explains a +300 % (four times fewer cores), and a core time -26 % the rest of a
+192 %. Pipe times (share x launch time), bytes moved and bandwidth, the L2 hit rate, UB bank
conflicts, shapes, dtypes and the core type follow, each only when it changed enough to matter.

The facts are medians over a kernel's launches (`KernelFacts`), read from the kernel table of a
profile; a saved JSON report carries fewer of them, and says less. Two bundles add what their
lowering changed (`lowering_facts`): grid, buffer bytes, versions, pipelining stages, syncs.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tilescope.columns import VECTOR_TYPES
from tilescope.report.palette import PIPE_SERIES
from tilescope.rules.ts302_ub_bank_conflict import CONFLICT_COLUMNS, conflict_share
from tilescope.rules.ts303_low_l2_hit_rate import L2_COLUMNS, hit_rate
from tilescope.text.words import fmt_bytes, fmt_us

# the numeric facts kept per kernel (medians over launches), beside the pipe shares
NUMERIC_FACTS = ("block_dim", "mix_block_dim", "bytes_moved", "l2_hit_rate", "bank_conflict_ratio")
TEXT_FACTS = ("core_type", "unit", "input_dtypes")
# the kernel-table columns KernelFacts reads
FACT_COLUMNS = frozenset(
    {"block_dim", "mix_block_dim", "bytes_moved", *TEXT_FACTS, *L2_COLUMNS, *CONFLICT_COLUMNS}
)
PIPE_LABEL = {col: label for col, label, _ in PIPE_SERIES}
# a fact is named when it moved the launch time by at least this share of the change, or (for rates
# and ratios that do not convert to time) by this much
MIN_PART = 0.25
MAX_PIPES = 3  # pipes named per kernel, largest part first
MIN_RATE_CHANGE = 0.05  # 5 points of L2 hit rate or bank-conflict ratio
MIN_BYTES_CHANGE = 0.05  # 5 % more or fewer bytes


@dataclass(frozen=True)
class Cause:
    """One fact that changed with a kernel's time: `part` is its share of the change (log terms;
    None where it does not convert to time), `text` says it for a reviewer."""

    fact: str  # grid, core_time, pipe:<column>, bytes, bandwidth, l2_hit_rate, bank_conflicts, ...
    text: str
    part: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "fact": self.fact,
            "text": self.text,
            "part": None if self.part is None else round(self.part, 3),
        }


class KernelFacts:
    """The facts of each kernel of one kernel table, read from the rows of its launches (positions
    in the table), medians where numeric: the columns are converted once for the whole table —
    per group, as before, a diff of 591 launches of 201 kernels spent 0.9 of its 2.3 s here. Each
    value is computed from the same rows by the same operation, so the facts are the same."""

    def __init__(self, table: pd.DataFrame) -> None:
        self._numeric = {
            col: pd.to_numeric(table[col], errors="coerce")
            for col in ("block_dim", "mix_block_dim", "bytes_moved") if col in table
        }
        if any(c in table for c in L2_COLUMNS):
            self._numeric["l2_hit_rate"] = hit_rate(table)
        if any(c in table for c in CONFLICT_COLUMNS):
            self._numeric["bank_conflict_ratio"] = conflict_share(table)
        self._text: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for col in TEXT_FACTS:
            if col in table:
                values = table[col].astype("str")
                keep = table[col].notna() & ~values.isin(("", "nan", "None", "<NA>"))
                self._text[col] = (values.to_numpy(dtype=object), keep.to_numpy(dtype=bool))

    def of(self, rows: np.ndarray) -> dict[str, Any]:
        """The facts of the launches at positions `rows`."""
        out: dict[str, Any] = {}
        for col, series in self._numeric.items():
            v = series.iloc[rows].dropna()
            if len(v):
                out[col] = float(v.median())
        for col, (values, keep) in self._text.items():
            counts = Counter(values[rows[keep[rows]]])
            if counts:
                most = max(counts.values())
                out[col] = str(min(v for v, n in counts.items() if n == most))  # Series.mode's first
        return out


def _parallel(facts: Mapping[str, Any], cores: Mapping[str, int | None]) -> tuple[int, int, int, int] | None:
    """(blocks, cores of its side, waves, blocks at once) of a kernel, None when unknown."""
    blocks = facts.get("block_dim")
    vector = facts.get("unit") == "vector" or facts.get("core_type") in VECTOR_TYPES
    n = cores.get("aiv" if vector else "aic")
    if not blocks or not n or blocks <= 0:
        return None
    b = round(blocks)
    waves = math.ceil(b / n)
    return b, int(n), waves, math.ceil(b / waves)


def _log_part(ratio: float, whole: float) -> float | None:
    """The share of a time ratio `whole` that a factor `ratio` accounts for, in log terms."""
    if ratio <= 0 or whole <= 0 or abs(math.log(whole)) < 1e-9:
        return None
    return math.log(ratio) / math.log(whole)


def signed_share(x: float) -> str:
    return f"{x * 100:+.0f} %".replace("-", "−")


def explain(
    base: Mapping[str, Any],
    head: Mapping[str, Any],
    base_us: float,
    head_us: float,
    cores: Mapping[str, int | None],
    shapes: tuple[str, str] = ("", ""),
    ratios: tuple[Mapping[str, float], Mapping[str, float]] = ({}, {}),
    cores_label: str = "",
) -> list[Cause]:
    """The causes of one kernel's change from `base_us` to `head_us` (median per launch), largest
    first: `base` / `head` are `KernelFacts.of`, `cores` the device's {"aic": n, "aiv": n},
    `ratios` the kernels' pipe shares of the launch (tilescope.diff KernelStats.ratios)."""
    if base_us <= 0 or head_us <= 0:
        return []
    whole = head_us / base_us
    causes: list[Cause] = []
    grid = _grid_causes(base, head, whole, cores, cores_label)
    causes += grid
    causes += _pipe_causes(ratios, base_us, head_us)
    causes += _data_causes(base, head, base_us, head_us)
    if shapes[0] != shapes[1] and (shapes[0] or shapes[1]):
        causes.append(Cause("shapes", f"input shapes {shapes[0] or '?'} → {shapes[1] or '?'}"))
    for col, label in (("input_dtypes", "input dtypes"), ("core_type", "core type")):
        if base.get(col) and head.get(col) and base[col] != head[col]:
            causes.append(Cause(col, f"{label} {base[col]} → {head[col]}"))
    # grid first (it changes everything after it), then the rest by the size of their part
    rest = sorted(causes[len(grid) :], key=lambda c: -(abs(c.part) if c.part is not None else 0.0))
    return [*grid, *rest]


def _grid_causes(
    base: Mapping[str, Any],
    head: Mapping[str, Any],
    whole: float,
    cores: Mapping[str, int | None],
    cores_label: str,
) -> list[Cause]:
    b, h = _parallel(base, cores), _parallel(head, cores)
    mix_changed = base.get("mix_block_dim") != head.get("mix_block_dim") and base.get("mix_block_dim")
    if b is None or h is None or (b[0] == h[0] and not mix_changed):
        return []
    grid = b[3] / h[3]  # the time ratio at the same work per core
    on = f" of {b[1]}{cores_label}" if b[1] == h[1] else ""
    text = (
        f"Block Dim {b[0]} → {h[0]} (cores used {min(b[0], b[1])} → {min(h[0], h[1])}{on}, "
        f"waves {b[2]} → {h[2]})"
    )
    if mix_changed:
        text += f", Mix Block Dim {base['mix_block_dim']:g} → {head.get('mix_block_dim', 0):g}"
    if abs(grid - 1) > 1e-9:
        text += f": at the same work per core the grid alone gives {signed_share(grid - 1)}"
    causes = [Cause("grid", text, _log_part(grid, whole))]
    core_time = whole / grid
    text = f"time × blocks at once (the work of each core) {signed_share(core_time - 1)}"
    causes.append(Cause("core_time", text, _log_part(core_time, whole)))
    return causes


def _pipe_causes(
    ratios: tuple[Mapping[str, float], Mapping[str, float]], base_us: float, head_us: float
) -> list[Cause]:
    """Pipes whose busy time per launch moved by MIN_PART of the change or more; the busiest pipe
    when it changed. Pipes overlap, so their parts need not add up to the whole."""
    b, h = ratios
    delta = head_us - base_us
    common = [c for c in PIPE_LABEL if c in b and c in h]
    if not common or abs(delta) < 1e-9:
        return []
    out: list[Cause] = []
    pipes: list[Cause] = []
    busiest = (max(common, key=lambda c: b[c]), max(common, key=lambda c: h[c]))
    if busiest[0] != busiest[1]:
        labels = (PIPE_LABEL[busiest[0]], PIPE_LABEL[busiest[1]])
        out.append(Cause("busiest_pipe", f"busiest pipe {labels[0]} → {labels[1]}"))
    for c in common:
        tb, th = b[c] * base_us, h[c] * head_us
        part = (th - tb) / delta
        if abs(part) >= MIN_PART and abs(th - tb) >= 0.01:
            pipes.append(
                Cause(
                    f"pipe:{c}",
                    f"{PIPE_LABEL[c]} busy {fmt_us(tb)} → {fmt_us(th)} per launch "
                    f"({b[c] * 100:.0f} → {h[c] * 100:.0f} % of it)",
                    part,
                )
            )
    pipes.sort(key=lambda c: -abs(c.part or 0.0))
    return out + pipes[:MAX_PIPES]


def _data_causes(
    base: Mapping[str, Any], head: Mapping[str, Any], base_us: float, head_us: float
) -> list[Cause]:
    out: list[Cause] = []
    bb, hb = base.get("bytes_moved"), head.get("bytes_moved")
    if bb and hb:
        if abs(hb / bb - 1) >= MIN_BYTES_CHANGE:
            out.append(
                Cause(
                    "bytes",
                    f"bytes moved {fmt_bytes(bb)} → {fmt_bytes(hb)} per launch",
                    _log_part(hb / bb, head_us / base_us),
                )
            )
        gb, gh = bb / base_us / 1e3, hb / head_us / 1e3  # bytes per µs / 1e3 = GB/s
        if abs(gh / gb - 1) >= MIN_BYTES_CHANGE:
            out.append(Cause("bandwidth", f"bandwidth {gb:,.0f} → {gh:,.0f} GB/s"))
    for col, label in (("l2_hit_rate", "L2 hit rate"), ("bank_conflict_ratio", "UB bank conflicts")):
        vb, vh = base.get(col), head.get(col)
        if vb is not None and vh is not None and abs(vh - vb) >= MIN_RATE_CHANGE:
            out.append(Cause(col, f"{label} {vb * 100:.0f} → {vh * 100:.0f} %"))
    return out


# Ascend C synchronisation calls counted in a bundle's generated kernel: barriers across a core's
# pipes, set/wait flags between them, cross-core flags (names of the AscendC API and of
# TileLang's generated intrinsics).
_SYNC = re.compile(
    r"\b(PipeBarrier|pipe_barrier|SetFlag|WaitFlag|set_flag|wait_flag|CrossCoreSetFlag|CrossCoreWaitFlag"
    r"|SyncAll|asc_sync_\w+)\s*[<(]"
)


def lowering_facts(ir: Mapping[str, Any] | None, ir_dir: Path | None) -> dict[str, dict[str, Any]]:
    """Per kernel of a bundle's IR (by its entry name, e.g. "flash_fwd_kernel"): the grid, each
    on-chip level's bytes, buffer versions, loops' pipelining stages, and the sync calls counted in
    the generated Ascend C (one file for the bundle: its counts go to every kernel of it)."""
    if not ir:
        return {}
    syncs: dict[str, int] = {}
    source = ir_dir / "kernel.cpp" if ir_dir is not None else None
    if source is not None and source.is_file():
        for name in _SYNC.findall(source.read_text(encoding="utf-8", errors="replace")):
            syncs[name] = syncs.get(name, 0) + 1
    out: dict[str, dict[str, Any]] = {}
    for k in ir.get("kernels") or []:
        if not isinstance(k, Mapping) or k.get("failure"):
            continue
        footprint = k.get("footprint") or {}
        out[str(k.get("entry") or k.get("name"))] = {
            "grid": list(k.get("grid") or []),
            "bytes": {str(level): int(v.get("bytes") or 0)
                      for level, v in footprint.items() if isinstance(v, Mapping)},
            "versions": {str(b): int(n) for b, n in (k.get("versions") or {}).items()},
            "stages": {f"{loop.get('var')} ({loop.get('id')})": loop.get("num_stages")
                       for loop in k.get("loops") or [] if loop.get("kind") == "serial"},
            "syncs": dict(syncs),
        }
    return out


def lowering_causes(base: Mapping[str, Any] | None, head: Mapping[str, Any] | None) -> list[Cause]:
    """What the lowering changed between two bundles of a kernel: grid, buffer bytes per level,
    versions, pipelining stages, sync calls. Not apportioned (nothing measures their part)."""
    if not base or not head:
        return []
    out: list[Cause] = []
    if base["grid"] != head["grid"]:
        out.append(Cause("lowering:grid", f"grid {base['grid']} → {head['grid']} in the IR"))
    levels = [lv for lv in dict.fromkeys((*base["bytes"], *head["bytes"]))
              if base["bytes"].get(lv, 0) != head["bytes"].get(lv, 0)]
    if levels:
        sizes = (f"{lv} {fmt_bytes(base['bytes'].get(lv, 0))} → {fmt_bytes(head['bytes'].get(lv, 0))}"
                 for lv in levels)
        out.append(Cause("lowering:bytes", "buffers " + ", ".join(sizes)))
    versions = [b for b in dict.fromkeys((*base["versions"], *head["versions"]))
                if base["versions"].get(b, 1) != head["versions"].get(b, 1)]
    if versions:
        out.append(Cause("lowering:versions", "buffer versions " + ", ".join(
            f"{b} {base['versions'].get(b, 1)} → {head['versions'].get(b, 1)}" for b in versions)))
    stages = [s for s in dict.fromkeys((*base["stages"], *head["stages"]))
              if base["stages"].get(s) != head["stages"].get(s)]
    if stages:
        out.append(Cause("lowering:stages", "num_stages " + ", ".join(
            f"loop {s} {base['stages'].get(s) or '–'} → {head['stages'].get(s) or '–'}" for s in stages)))
    b_sync, h_sync = sum(base["syncs"].values()), sum(head["syncs"].values())
    if base["syncs"] != head["syncs"]:
        moved = [n for n in dict.fromkeys((*base["syncs"], *head["syncs"]))
                 if base["syncs"].get(n, 0) != head["syncs"].get(n, 0)]
        detail = ", ".join(f"{n} {base['syncs'].get(n, 0)} → {head['syncs'].get(n, 0)}" for n in moved[:4])
        out.append(Cause("lowering:syncs", f"sync calls in the Ascend C {b_sync} → {h_sync} ({detail})"))
    return out
