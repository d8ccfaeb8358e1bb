"""Launches that ran faster than their speed of light (issue #26): shown, flagged, never clamped.

A launch's speed of light (`sol_us`, tilescope.metrics) is its work or traffic at the chip's
ceiling for the cores it used. A measured time below it — `sol_pct` above 100, e.g. 1,864 GB/s
against a 1,800 GB/s GM ceiling, or 763 TFLOP/s against a 354 TFLOP/s Cube peak — cannot happen
if the chip figure and the byte/FLOP model are right for that kernel: one of them is wrong (data
served from L2 counted as GM traffic, a FLOP count from shapes that ignores a mask, a clock or core
count assumed too low). Such a launch keeps its value in every table (103.6 %), is left out of the
speed-of-light total (`summary.speed_of_light`), and the profile gets one note naming how many and
the furthest over, its kernel and which ceiling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

# The kernel columns the note reads besides duration and speed of light: the quantity of each bound
QUANTITY = {"memory": "bytes_moved", "cube": "cube_flops", "vector": "vector_flops"}
COLUMNS: tuple[str, ...] = ("name", "sol_bound", *QUANTITY.values())


def _shown(x: float) -> str:
    """1,864 / 354 / 2.31: whole numbers from 100 up, three significant digits below."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _floats(k: pd.DataFrame, col: str) -> np.ndarray:
    if col not in k.columns:
        return np.full(len(k), np.nan)
    return np.asarray(k[col].to_numpy(dtype="float64", na_value=np.nan), dtype="float64")


def over_ceiling(
    k: pd.DataFrame, over: np.ndarray, dur: np.ndarray, sol: np.ndarray
) -> dict[str, Any] | None:
    """What `over` (a mask of launches of `k` with sol > dur) holds: counts, the launch furthest
    over its ceiling and the note every report prints; None when no launch is over."""
    n = int(over.sum())
    if not n:
        return None
    ratio = np.where(over, sol / np.where(dur > 0, dur, np.nan), -np.inf)
    i = int(np.nanargmax(ratio))
    names = k["name"].astype("object") if "name" in k.columns else None
    name = str(names.iloc[i]) if names is not None else "?"
    kernels = int(names[over].nunique()) if names is not None else 0
    bound = str(k["sol_bound"].iloc[i]) if "sol_bound" in k.columns else ""
    pct = float(ratio[i] * 100.0)
    first: dict[str, Any] = {"kernel": name, "bound": bound or None, "sol_pct": round(pct, 2)}
    said = f"{name} at {pct:.1f} % of its speed of light"
    column = QUANTITY.get(bound)
    if column is not None:
        q = float(_floats(k, column)[i])
        achieved, ceiling = q / float(dur[i]), q / float(sol[i])  # per µs
        if bound == "memory":
            a, c, unit, what = achieved / 1e3, ceiling / 1e3, "GB/s", "GM ceiling"
        else:
            a, c, unit, what = achieved / 1e6, ceiling / 1e6, "TFLOP/s", f"{bound.capitalize()} peak"
        first.update({"achieved": round(a, 3), "ceiling": round(c, 3), "unit": unit})
        said = f"{name}: {_shown(a)} {unit} is {pct:.1f} % of its {what} of {_shown(c)} {unit}"
    launches = "1 launch" if n == 1 else f"{n:,} launches"
    of = f" of {kernels:,} kernel{'s' if kernels != 1 else ''}" if kernels > 1 else ""
    note = (
        f"{launches}{of} ran faster than {'its' if n == 1 else 'their'} speed of light (furthest: "
        f"{said}): the chip figure or the byte/FLOP model is wrong for "
        f"{'it' if n == 1 else 'them'}; shown as measured, left out of the speed-of-light total"
    )
    return {"launches": n, "kernels": kernels, "furthest": first, "note": note}
