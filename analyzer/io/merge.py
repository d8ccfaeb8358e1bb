"""Merging the runs of one workload profiled once per metric group (a bundle's profile/<Group>/...).

torch_npu and msprof collect a single `aic_metrics` group per run, so a bundle holds one run per
group. Launches line up by name and order: the n-th launch of kernel X in one run is the n-th
launch of X in the others (same program, same launch sequence). Columns a run adds are joined on
(name, occurrence); columns already present (duration, aic_time_us, ...) are taken from the first.
"""

from __future__ import annotations

import pandas as pd

from tilescope.io.msprof_op import BLOCK_KEYS
from tilescope.text.words import count_text


def _occurrence_key(k: pd.DataFrame) -> pd.DataFrame:
    out = k.copy()
    order = out["start_ns"].astype("float64").rank(method="first") if "start_ns" in out else None
    if order is not None and order.notna().any():
        out = (
            out.assign(_order=order.fillna(float("inf")))
            .sort_values("_order", kind="stable")
            .drop(columns="_order")
        )
    out["_occurrence"] = out.groupby(out["name"].astype("str"), sort=False).cumcount()
    return out


def merge_kernel_tables(tables: list[pd.DataFrame]) -> tuple[pd.DataFrame, list[str]]:
    """One kernel table from several metric-group runs; notes say where rows did not line up."""
    notes: list[str] = []
    spreads: list[float] = []
    base = _occurrence_key(tables[0])
    for i, other in enumerate(tables[1:], start=2):
        o = _occurrence_key(other)
        # a column counts as new when the base lacks it or holds only nulls there (contract columns
        # are present everywhere, filled with nulls where a group did not measure them)
        new = [
            c
            for c in o.columns
            if c not in ("name", "_occurrence")
            and o[c].notna().any()
            and (c not in base.columns or not base[c].notna().any())
        ]
        base = base.drop(columns=[c for c in new if c in base.columns])
        if len(o) != len(base):
            notes.append(
                f"metric-group run {i} has {count_text(len(o), 'kernel')}, the first has {len(base)}; "
                "rows matched by name and launch order, unmatched rows keep null metrics"
            )
        if new:
            # a run's own side times, to carry its rates over as the bytes they stand for (below)
            times = [c for c in ("aic_time_us", "aiv_time_us", "duration_us") if c in o.columns]
            right = o[["name", "_occurrence", *new, *(c for c in times if c not in new)]].assign(
                name=o["name"].astype("str"))
            right = right.rename(columns={c: f"_own_{c}" for c in times if c not in new})
            base = (
                base.assign(_name=base["name"].astype("str"))
                .merge(right.rename(columns={"name": "_name"}), on=["_name", "_occurrence"], how="left")
                .drop(columns="_name")
            )
            base = _rates_as_bytes(base, [c for c in new if c.endswith("_gbps")], spreads)
    if spreads:
        notes.append(f"the other runs' launches took up to {max(spreads) * 100:.1f} % more or less time than "
                     "the first run's, whose durations are used (their rates are rescaled to give their own "
                     "bytes)")
    return base.drop(columns="_occurrence").reset_index(drop=True), notes


def _rates_as_bytes(base: pd.DataFrame, rates: list[str], spreads: list[float]) -> pd.DataFrame:
    """A rate column (GB/s) carried over from another run is scaled by (its run's side time / the
    base's side time), so that rate x the base's time gives the bytes that run measured: the runs
    of one workload move the same bytes, their times differ by a few per cent. Drops the `_own_`
    time columns `merge_kernel_tables` brought for this; the largest relative difference of a
    launch's duration from the base's goes to `spreads`."""
    own = [c for c in base.columns if c.startswith("_own_")]
    for c in rates:
        side = {"aic_": "aic_time_us", "aiv_": "aiv_time_us"}.get(c[:4], "duration_us")
        if f"_own_{side}" not in base.columns or side not in base.columns:
            continue
        own_time = pd.to_numeric(base[f"_own_{side}"], errors="coerce")
        factor = own_time / pd.to_numeric(base[side], errors="coerce")
        base[c] = pd.to_numeric(base[c], errors="coerce") * factor.where(factor > 0)
    if "_own_duration_us" in base.columns and "duration_us" in base.columns:
        d = pd.to_numeric(base["duration_us"], errors="coerce")
        spread = float(((pd.to_numeric(base["_own_duration_us"], errors="coerce") - d).abs() / d).max())
        if spread == spread and spread > 0:
            spreads.append(spread)
    return base.drop(columns=own)


def merge_blocks(tables: list[pd.DataFrame]) -> pd.DataFrame:
    base = tables[0]
    keys = [k for k in BLOCK_KEYS if k in base]
    for other in tables[1:]:
        new = [c for c in other.columns if c not in base.columns]
        if new:
            base = base.merge(other[[*keys, *new]], on=keys, how="outer")
    return base
