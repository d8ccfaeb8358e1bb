"""How a set of ranks is written (`0-3, 5, 7`, `ranks 0-2, 4-7`), apart from the cross-rank model:
the report renderers say it without importing pandas, so a report answered from the cache
(`commands.analyze.cached_run`) prints without loading it."""

from __future__ import annotations

from collections.abc import Sequence


def rank_set_text(ranks: Sequence[int]) -> str:
    """`0-3, 5, 7`: sorted rank ids with runs collapsed."""
    ids = sorted(set(int(r) for r in ranks))
    parts: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ", ".join(parts)


def ranks_label(ranks: Sequence[int]) -> str:
    """`rank 3`, `ranks 0-2, 4-7`: the word, singular or plural, and the ids (rank_set_text)."""
    return f"rank{'s' if len(set(ranks)) > 1 else ''} {rank_set_text(ranks)}"
