"""The Kernel detail view's figures and words (no callbacks here), and the raw counters of a
kernel, alone or beside a baseline (the Compare tab's counter table).

- The KPIs read the report's own per-kernel statistics (`kernel_group_stats`, the function behind
  the terminal's kernel rows), so "speed of light" and what bounds it are the terminal's words.
- The time share says what it is a share of and is never clamped: an HCCL all-reduce of 5.6 ms in
  a run of 2.5 ms of compute is 222 % of the compute time, and a share of the communication time.
- The counters are every PMU column the profile carries for the kernel, grouped by the
  `aic_metrics` group that writes them, with units (tilescope.columns.counter_group / _unit):
  MemoryL0, MemoryUB, L2Cache and bank-conflict counters are read by the loader and shown here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
from dash import html

from tilescope.columns import CORE_TIME_GROUP, OTHER_COUNTERS, counter_group, counter_unit
from tilescope.dashboard.data import ProfileEntry
from tilescope.dashboard.figures import no_counters_message
from tilescope.dashboard.views import kernel_rows, kpi, summary_of
from tilescope.report.data import kernel_group_stats
from tilescope.report.evidence import plain_number
from tilescope.summary import communication_mask
from tilescope.text.words import fmt_pct, fmt_us, num, sol_text

MAX_FINDING_CODES = 4  # codes named in the findings KPI; the rest are counted ("+2 more")
# the groups in the order a reader goes through them: where the time goes, then the memories
GROUP_ORDER = (CORE_TIME_GROUP, "PipeUtilization", "ArithmeticUtilization", "Memory", "MemoryL0", "MemoryUB",
               "MemoryAccess", "L2Cache", "ResourceConflictRatio", OTHER_COUNTERS)


def detail_kpis(entry: ProfileEntry, name: str | None) -> list[html.Div]:
    rows = kernel_rows(entry, name)
    if rows.empty:
        return [
            html.Div(
                "Pick a kernel (or click one in the Kernels grid, the roofline or the top-kernels chart).",
                className="muted",
            )
        ]
    total = float(rows["duration_us"].sum()) if "duration_us" in rows else 0.0
    out = [kpi("launches", f"{len(rows):,}"), kpi("total time", fmt_us(total)), *time_share_kpis(entry, rows)]
    out.append(kpi("mean", fmt_us(total / len(rows))))
    for col, label, fmt in (("core_type", "core type", "{}"), ("block_dim", "blocks", "{:.0f}")):
        if col in rows and rows[col].notna().any():
            out.append(kpi(label, fmt.format(rows[col].mode().iloc[0])))
    # the per-kernel figures of the report's top-kernel rows, from the same function
    stats = kernel_group_stats(rows)
    row: dict[str, Any] = {str(k): v for k, v in stats.iloc[0].items()} if len(stats) else {}
    if num(row.get("sol_pct")) is not None:
        # the terminal's words for it: `22 % (cube)`, the resource that bounds its speed of light
        out.append(kpi("speed of light (bound by)", sol_text(row)))
    for col, label, text in (
        ("cube_share", "Cube busy", lambda v: fmt_pct(v, 0)),
        ("vector_share", "Vector busy", lambda v: fmt_pct(v, 0)),
        ("achieved_tflops", "TFLOP/s", lambda v: f"{v:.2f}"),
        ("cube_utilization_pct", "AIC utilisation (profiler)", lambda v: f"{v:.1f} %"),
    ):
        v = num(row.get(col))
        if v is None or (col == "cube_utilization_pct" and v <= 0):
            continue  # a Vector-only kernel: 0 % AIC utilisation says nothing
        out.append(kpi(label, text(v)))
    codes = [str(f.get("code")) for f in entry.findings if name in f.get("kernels", [])]
    if codes:
        out.append(findings_kpi(codes))
    return out


def findings_kpi(codes: Sequence[str]) -> html.Div:
    """The kernel's finding codes, the first few named and the rest counted, all in the tooltip."""
    shown = ", ".join(codes[:MAX_FINDING_CODES])
    more = len(codes) - MAX_FINDING_CODES
    text = shown + (f" +{more} more" if more > 0 else "")
    return html.Div(
        [html.Div(text, className="kpi-value"), html.Div(f"findings ({len(codes)})", className="kpi-label")],
        className="kpi warn",
        title=", ".join(codes),
    )


def time_share_kpis(entry: ProfileEntry, rows: pd.DataFrame) -> list[html.Div]:
    """The kernel's summed time as a share of what it is part of, said and never clamped: a
    compute kernel's of the device time (the union of compute kernels, tilescope.summary), a
    communication task's of the communication time and of that compute time."""
    total = float(rows["duration_us"].sum()) if "duration_us" in rows else 0.0
    summary = summary_of(entry)
    device = num(summary.get("total_device_us"))
    comm = num((summary.get("device_time") or {}).get("communication_us"))
    shares = []
    if len(rows) and bool(communication_mask(rows).all()):
        shares.append(("of communication time", comm))
        shares.append(("of device time (compute kernels)", device))
    else:
        shares.append(("of device time", device))
    return [kpi(label, fmt_pct(total / whole)) for label, whole in shares if whole]


# --- counters ------------------------------------------------------------------------------------


def counter_columns(rows: pd.DataFrame) -> list[str]:
    """The PMU counter columns with a value on at least one of these launches, in group order."""
    cols = [c for c in rows.columns if counter_group(str(c)) is not None and rows[c].notna().any()]
    cols = [c for c in cols if pd.api.types.is_numeric_dtype(rows[c])]
    order = {g: i for i, g in enumerate(GROUP_ORDER)}
    return sorted(cols, key=lambda c: (order.get(counter_group(c) or OTHER_COUNTERS, len(order)), c))


def kernel_counters(rows: pd.DataFrame) -> pd.DataFrame:
    """Per counter of these launches: group, unit, mean, min and max over the launches with it."""
    records = []
    for c in counter_columns(rows):
        v = pd.to_numeric(rows[c], errors="coerce").dropna()
        records.append({"group": counter_group(c), "counter": c, "unit": counter_unit(c), "launches": len(v),
                        "mean": float(v.mean()), "min": float(v.min()), "max": float(v.max())})
    return pd.DataFrame(records, columns=["group", "counter", "unit", "launches", "mean", "min", "max"])


def counters_table(rows: pd.DataFrame, scope_text: str) -> list[Any]:
    """The Kernel detail's counter table: one row per counter under its group's heading."""
    table = kernel_counters(rows)
    title = html.H4(f"Counters as read — {scope_text}")
    if table.empty:
        return [title, html.Div(_no_counters(rows), className="muted")]
    several = int(table["launches"].max()) > 1
    head = ["counter", "unit", *(["mean", "min", "max", "launches"] if several else ["value"])]
    return [title, _table(head, table, lambda r: [
        *[_number(v) for v in ([r["mean"], r["min"], r["max"]] if several else [r["mean"]])],
        *([f"{int(r['launches']):,}"] if several else []),
    ])]


def compare_counters(base_rows: pd.DataFrame, head_rows: pd.DataFrame) -> pd.DataFrame:
    """Each counter either side has: its mean over the base launches and over the head launches,
    the change and the change in % of the base (None where the base is 0 or absent)."""
    base, head = kernel_counters(base_rows), kernel_counters(head_rows)
    both = base.merge(head, on=["group", "counter", "unit"], how="outer", suffixes=("_base", "_head"))
    order = {g: i for i, g in enumerate(GROUP_ORDER)}
    both["_order"] = both["group"].map(lambda g: order.get(g, len(order)))
    both = both.sort_values(["_order", "counter"], kind="stable")
    delta = both["mean_head"] - both["mean_base"]
    pct = delta / both["mean_base"].where(both["mean_base"] != 0) * 100.0
    return pd.DataFrame({"group": both["group"], "counter": both["counter"], "unit": both["unit"],
                         "base": both["mean_base"], "head": both["mean_head"], "delta": delta,
                         "delta_pct": pct}).reset_index(drop=True)


def compare_counters_table(base_rows: pd.DataFrame, head_rows: pd.DataFrame, title: str) -> list[Any]:
    """The Compare tab's counter table: base, head, change, one row per counter by group."""
    table = compare_counters(base_rows, head_rows)
    heading = html.H4(title)
    if table.empty:
        return [heading, html.Div(_no_counters(pd.concat([base_rows, head_rows])), className="muted")]
    head = ["counter", "unit", "base (mean)", "head (mean)", "change", "change (%)"]
    return [heading, _table(head, table, lambda r: [
        _number(r["base"]), _number(r["head"]), _signed(r["delta"]), _signed(r["delta_pct"], " %", 1),
    ])]


def _no_counters(rows: pd.DataFrame) -> str:
    # the figures' own words: a task off the AI Core has none, and no collection is advised for it
    return no_counters_message(rows, "PMU counters", "collect with aic_metrics (any group)")


def _table(head: list[str], table: pd.DataFrame, numbers: Callable[[Any], list[str]]) -> html.Div:
    """A counter table (one row per counter, `numbers` its cells after the name and unit) as data on
    one element, drawn by the page (dashboard/assets/counters_table.js): [group, [[counter, unit,
    number…], …]] per group. As Dash components (a Td per cell, ~400 for a msprof op kernel) the
    Dash renderer spent ~0.55 s of the tab's ~1.3 s of page CPU on them at every visit; drawn by the
    script, they take milliseconds, as the IR panes do (#15)."""
    groups = [[str(group), [[str(r["counter"]), str(r["unit"]), *numbers(r)]
                            for r in part.to_dict("records")]]
              for group, part in table.groupby("group", sort=False)]
    data: dict[str, Any] = {"data-table": json.dumps({"head": head, "groups": groups})}  # a data-* attribute
    return html.Div(className="counters-box", **data)


def _number(v: Any) -> str:
    x = num(v)
    return "–" if x is None else plain_number(x)


def _signed(v: Any, unit: str = "", digits: int | None = None) -> str:
    x = num(v)
    if x is None:
        return "–"
    text = f"{abs(x):,.{digits}f}" if digits is not None else plain_number(abs(x))
    if not text.strip("0.,"):  # a change that rounds to nothing carries no sign ("0.0 %", not "−0.0 %")
        return text + unit
    return ("+" if x > 0 else "−" if x < 0 else "") + text + unit
