"""How the rules write numbers: rounded for a finding's evidence (`r3`, `r4`: JSON-safe), and in its
message (`pct`). Times and bytes in messages are `tilescope.text.words.fmt_us` and `fmt_bytes`, as
in every view."""

from __future__ import annotations

from typing import Any

from tilescope.text.words import fmt_pct
from tilescope.text.words import num as finite


def r3(x: Any) -> float | None:
    """Round for evidence; NaN/None become None so JSON stays valid."""
    f = finite(x)  # the views' own test for a number: None when missing, not numeric, NaN or inf
    return None if f is None else round(f, 3)


def r4(x: Any) -> float | None:
    v = r3(x)
    return None if v is None else round(float(x), 4)


def pct(x: float) -> str:
    """A 0-1 share in a rule's message, rounded as every view rounds shares (tilescope.text.words)."""
    return fmt_pct(x, 0)


