"""`tilescope lint --sweep`: lower every parameter combination and rank them.

Each combination is lowered in a worker process (a pool of 2) forked from a server that has imported
TileLang once (worker_pool). Rows hold per-scope footprints, whether the tiling fits
(and why not), fractal waste and the estimated Cube occupancy.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from tilescope.chips import ChipSpec
from tilescope.engine import run_rules
from tilescope.errors import UsageError
from tilescope.ir.capture import capture_ir, capture_many, import_tilelang
from tilescope.ir.deadline import LOWER_TIMEOUT_S
from tilescope.ir.dialect import detect
from tilescope.ir.footprint import padding_waste
from tilescope.ir.occupancy import (
    ATTENTION_FIGURES,
    GEMM_FIGURES,
    attention_score,
    gemm_score,
    is_attention,
    unknown_figures,
)
from tilescope.ir.params import parse_param, resolve_kernel
from tilescope.ir.scopes import TILELANG_ASCEND
from tilescope.lifeline import die_with_parent
from tilescope.profile import Profile, SourceInfo

# `--sweep autotune`: every config of the kernel's @autotune(configs=...) decorator
AUTOTUNE = "autotune"


def parse_sweep(specs: list[str]) -> dict[str, list[Any]]:
    """`--sweep block_M=64,128` (repeatable) -> {"block_M": [64, 128]} (values as Python literals);
    `--sweep autotune` is left out here (the configs come from the kernel: autotune_configs)."""
    grid: dict[str, list[Any]] = {}
    for spec in specs:
        if spec.strip() == AUTOTUNE:
            continue  # the kernel's own @autotune configs: autotune_configs
        name, _, raw = spec.partition("=")
        if not raw:
            raise UsageError(f"--sweep {spec!r}: expected NAME=V1,V2,... or autotune")
        grid[name.strip()] = [parse_param(f"{name.strip()}={v}")[1] for v in raw.split(",") if v.strip()]
    return grid


def combinations(
    base: dict[str, Any], grid: dict[str, list[Any]], configs: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Every grid point over the -p values; with @autotune `configs`, every config times them."""
    keys = list(grid)
    points = [dict(zip(keys, values, strict=True)) for values in itertools.product(*grid.values())]
    return [{**base, **c, **g} for c in (configs or [{}]) for g in points]


def config_columns(grid: dict[str, list[Any]], configs: list[dict[str, Any]] | None) -> dict[str, list[Any]]:
    """The sweep table's parameter columns: the autotune configs' keys, then the grid's."""
    cols: dict[str, list[Any]] = {}
    for c in configs or []:
        for k, v in c.items():
            cols.setdefault(k, []).append(v)
    return {**cols, **grid}


def summarise(ir: dict[str, Any], chip: ChipSpec, codes: list[str]) -> dict[str, Any]:
    """One sweep row from an ir.json document and the static finding codes it produced."""
    row: dict[str, Any] = {
        "lowered": ir["lowered"],
        "footprint": {},
        "why_not": [],
        "findings": codes,
        "waste_pct": 0.0,
        "occupancy": None,
        "score": None,  # "gemm" or "attention": which estimate `occupancy` is
        "not_checked": None,  # why the score that applies could not be computed on this chip
    }
    for k in ir["kernels"]:
        f = k.get("failure")
        if f:
            row["why_not"].append(f"{f.get('hardware', '')} {f['message'][:120]}".strip())
        for hw, fp in k.get("footprint", {}).items():
            cur = row["footprint"].get(hw, {"bytes": 0, "capacity_bytes": chip.capacity(hw)})
            cur["bytes"] = max(cur["bytes"], fp["bytes"])
            row["footprint"][hw] = cur
        for g in k.get("gemms", []):
            if not all(isinstance(g[x], int) for x in ("m", "n", "k")):
                continue
            row["waste_pct"] = max(
                row["waste_pct"], padding_waste(g["m"], g["n"], g["k"], g["in_dtype"])["waste_pct"]
            )
        if row["occupancy"] is None and row["score"] is None:
            _score(row, k, chip)
    for hw, fp in row["footprint"].items():
        fp["fits"] = fp["bytes"] <= fp["capacity_bytes"]
        if not fp["fits"]:
            row["why_not"].append(f"{hw} {fp['bytes']} B > {fp['capacity_bytes']} B")
    row["fits"] = row["lowered"] and not row["why_not"]
    return row


def _score(row: dict[str, Any], kernel: dict[str, Any], chip: ChipSpec) -> None:
    """The kernel's score: waves of Q tiles for flash attention, the GEMM occupancy otherwise; on a
    chip without the figures it needs, the reason instead of a number."""
    if is_attention(kernel):
        kind, figures = "attention", ATTENTION_FIGURES
    elif kernel.get("gemms"):
        kind, figures = "gemm", GEMM_FIGURES
    else:
        return
    why = unknown_figures(chip, figures)
    if why is not None:
        row.update(score=kind, not_checked=why)
        return
    if kind == "attention":
        est = attention_score(kernel, chip)
    else:
        est = next((e for g in kernel["gemms"] if (e := gemm_score(kernel, g, chip)) is not None), None)
    if est is not None:
        row.update(score=kind, occupancy=est["occupancy"])


def sweep_not_checked(rows: list[dict[str, Any]]) -> list[str]:
    """The distinct reasons rows have no score (for the "not checked" line under the table)."""
    return sorted({f"{r['score']} score: {r['not_checked']}" for r in rows if r.get("not_checked")})


def sweep_one(
    kernel_ref: str, params: dict[str, Any], chip: ChipSpec, timeout_s: float | None = LOWER_TIMEOUT_S
) -> dict[str, Any]:
    """Worker: capture one combination and run the static rules (top-level so spawn can pickle it).
    One past its deadline is a row saying so (the UsageError of capture_ir), as a failing one is."""
    return _row(capture_ir(kernel_ref, params, chip, timeout_s), params, chip)


def _row(cap: Any, params: dict[str, Any], chip: ChipSpec) -> dict[str, Any]:
    """One captured combination's table row: the static rules' codes, footprints, occupancy."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    prof = Profile(
        source=SourceInfo(path=cap.kernel_file, format="ir"), kernels=pd.DataFrame(), chip=chip, ir=cap.ir
    )
    res = run_rules(prof, kinds=("static",))
    row = summarise(cap.ir, chip, sorted({f.code for f in res.findings}))
    row["params"] = {k: v for k, v in params.items()}
    row["lower_s"] = round(cap.timings.get("lower_s", 0.0), 3)
    return row


def _tilelang_ascend_sweep(
    kernel_ref: str, combos: list[dict[str, Any]], chip: ChipSpec, timeout_s: float | None = LOWER_TIMEOUT_S
) -> list[dict[str, Any]] | None:
    """A tilelang-ascend kernel sweeps in one worker of its own interpreter (importing tilelang
    there costs ~17 s under emulation, each lowering under 1 s); None for the other dialects."""
    _, _, tree = resolve_kernel(kernel_ref)
    if detect(tree).dialect != TILELANG_ASCEND:
        return None
    caps = capture_many(kernel_ref, combos, chip, timeout_s=timeout_s)
    return [_row(cap, p, chip) for cap, p in zip(caps, combos, strict=True)]


def _init_worker(parent: int) -> None:
    die_with_parent(parent)
    import_tilelang()


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """Worker processes forked from a server that imports TileLang once (multiprocessing's
    forkserver, preloading `tilescope.ir.sweep_preload`): spawned workers imported it each, 3.7 s
    of CPU apiece here. The server has done nothing but import, so no TVM thread pool exists to be
    lost in a fork (a pool made by lowering would not survive one: never fork a process that has
    lowered). A server already running in this process (the dashboard's or analyze's, with other
    modules preloaded) serves as well: its workers import TileLang in `_init_worker`.

    Every worker ends with this process (`kill -9` of lint left them lowering): it is the server's
    child and watches its grandparent (tilescope.lifeline)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tilescope.ir.sweep_preload"])
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                               initargs=(os.getpid(),))


def run_sweep(
    kernel_ref: str,
    base: dict[str, Any],
    grid: dict[str, list[Any]],
    chip: ChipSpec,
    workers: int = 2,
    progress: bool = True,
    configs: list[dict[str, Any]] | None = None,
    timeout_s: float | None = LOWER_TIMEOUT_S,
) -> list[dict[str, Any]]:
    """All combinations (times the @autotune `configs`), best first: fitting rows by estimated
    occupancy, then the rest. Each lowering may take `timeout_s` seconds."""
    # deferred: rich.console, rich.progress only for terminal output
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    combos = combinations(base, grid, configs)
    done: list[tuple[int, dict[str, Any]]] = []  # (position of the combination in the sweep, row)
    foreign = _tilelang_ascend_sweep(kernel_ref, combos, chip, timeout_s)
    if foreign is not None:
        done = list(enumerate(foreign))
        combos = []
    console = Console(stderr=True)
    with (
        Progress(
            TextColumn("lowering"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=not (progress and console.is_terminal),
        ) as bar,
        worker_pool(workers) as pool,
    ):
        task = bar.add_task("sweep", total=len(combos))
        futures = {
            pool.submit(sweep_one, kernel_ref, p, chip, timeout_s): (i, p) for i, p in enumerate(combos)
        }
        for fut in as_completed(futures):
            i, p = futures[fut]
            try:
                row = fut.result()
            except Exception as exc:  # a bad combination (e.g. a builder assertion) is a row, not a crash
                row = {
                    "params": p,
                    "lowered": False,
                    "fits": False,
                    "footprint": {},
                    "findings": [],
                    "why_not": [f"{type(exc).__name__}: {str(exc)[:160]}"],
                    "waste_pct": None,
                    "occupancy": None,
                    "score": None,
                    "not_checked": None,
                }
            done.append((i, row))
            bar.advance(task)
    # Ties (same fit, occupancy and waste) keep the sweep's own order, not whichever worker
    # finished first: the table must be the same on every run.
    def rank(item: tuple[int, dict[str, Any]]) -> tuple[bool, float, float, int]:
        pos, r = item
        return (not r["fits"], -(r["occupancy"] or 0.0), r.get("waste_pct") or 0.0, pos)

    return [row for _, row in sorted(done, key=rank)]
