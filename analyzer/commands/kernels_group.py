"""`tilescope kernels --group-by` and `--sort`: the operator statistics kernel engineers know from
msprof's `op_statistic.csv` (one row per op type: count, total, mean, min, max, ratio), per rank,
over the canonical kernel table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilescope.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

GROUP_KEYS = ("op_type", "name", "core_type")
MISSING_KEY = "(none)"  # a launch without the key (no op type recorded) is a group of its own


def group_kernels(df: pd.DataFrame, key: str) -> pd.DataFrame:
    """One row per `key` value (and rank, when the table has several): `count` launches, `total_us`,
    `mean_us`, `min_us`, `max_us` of their durations and `share`, the group's total over its rank's
    compute time (0-1; the terminal prints it as per cent). As in msprof's op_statistic.csv, whose
    Ratio(%) this reproduces, communication tasks (HCCL) are not compute: their groups are listed
    with their times and no share, and their time is not in the others' denominator. Largest
    total first."""
    # deferred: pandas (~0.3 s) only when this builds a frame; `tilescope --help` imports every command module
    import pandas as pd

    # deferred: summary (pyarrow) only when this command runs
    from tilescope.summary import communication_mask

    if key not in df.columns:
        raise UsageError(f"--group-by {key}: the kernel table has no {key} column")
    ranks = ["rank"] if "rank" in df.columns else []
    duration = pd.to_numeric(df["duration_us"], errors="coerce")
    comm = communication_mask(df)
    frame = pd.DataFrame({
        **{r: df[r].to_numpy() for r in ranks},
        key: df[key].astype("string").fillna(MISSING_KEY).to_numpy(),
        "duration_us": duration.to_numpy(),
        "compute_us": duration.where(~comm, 0.0).to_numpy(),
        "communication": comm,
    })
    grouped = frame.groupby([*ranks, key], sort=False, observed=True)
    stats = pd.DataFrame(grouped["duration_us"].agg(
        count="size", total_us="sum", mean_us="mean", min_us="min", max_us="max"
    ))
    stats["communication"] = grouped["communication"].all()
    out = stats.reset_index()
    compute = frame.groupby(ranks)["compute_us"].sum() if ranks else pd.Series([frame["compute_us"].sum()])
    whole = out[ranks[0]].map(compute) if ranks else pd.Series(compute.iloc[0], index=out.index)
    whole = whole.astype(float)
    out["share"] = (out["total_us"] / whole).where((whole > 0) & ~out["communication"])
    return out.drop(columns="communication")


def sort_rows(df: pd.DataFrame, spec: str | None) -> pd.DataFrame:
    """`df` ordered by `spec`, `COLUMN[:asc|desc]`: numbers largest first and text A-Z unless said;
    a multi-rank table keeps its ranks apart (rank first, then the column). None: as it is."""
    if spec is None:
        return df
    column, _, order = spec.partition(":")
    if column not in df.columns:
        names = [str(c) for c in df.columns]
        more = f", … ({len(names)} in all; --format csv lists them)" if len(names) > 12 else ""
        choices = ", ".join(names[:12]) + more
        raise UsageError(f"--sort {spec}: no column {column!r} in this table (columns: {choices})")
    if order not in ("", "asc", "desc"):
        raise UsageError(f"--sort {spec}: the order after ':' is asc or desc, not {order!r}")
    numeric = df[column].dtype.kind in "iufb"
    ascending = order == "asc" if order else not numeric
    by = ["rank", column] if "rank" in df.columns and column != "rank" else [column]
    return df.sort_values(by, ascending=[True, ascending][-len(by):], kind="stable", na_position="last")
