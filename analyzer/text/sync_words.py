"""A sync line of the per-line report (tilescope.lines_sync) in the words every view uses — the
terminal, the report, the rules' evidence and the dashboard's heat labels. Kept apart from the
computation so that reading a stored report back (a cached multi-rank analysis) imports no pandas."""

from __future__ import annotations

from typing import Any


def where_words(row: dict[str, Any]) -> str:
    """Where a sync line is, in words every view uses: 'Ascend C 96 `asc_sync_wait(…)` before l.49
    (k_l1 (L1) -> k_l0 (L0B))', or its own TileLang line when the line map carries it."""
    text = f" `{row['text']}`" if row.get("text") else ""
    place = f"Ascend C {row['line']}{text}"
    if row.get("source_lines"):
        return f"{place} (l.{', '.join(str(n) for n in row['source_lines'])}: {row['what']})"
    before = row.get("before")
    if before and before.get("source_lines"):
        lines = ", ".join(str(n) for n in before["source_lines"])
        return f"{place} before l.{lines} ({before['what']})"
    return place


def amount_words(row: dict[str, Any]) -> str:
    """'WAIT_FLAG 64×, 1,920 cycles; SCALAR waited 1,920 cycles; its flags waited for by MTE1 (4)'."""
    parts = [
        ", ".join(
            f"{k} {row['sync'][k]:,.0f}×, {row['sync_cycles'].get(k, 0):,.0f} cycles" for k in row["sync"]
        )
    ]
    if row["wait_cycles"]:
        parts.append("waiting: " + ", ".join(f"{p} {c:,.0f} cycles" for p, c in row["wait_cycles"].items()))
    if row.get("waited_by"):
        parts.append(
            "its flags waited for by "
            + ", ".join(f"{p} ({n:,.0f} in the trace)" for p, n in row["waited_by"].items())
        )
    return "; ".join(p for p in parts if p)
