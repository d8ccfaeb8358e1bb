"""Callback values are untrusted: whoever can reach the server can post any JSON for any of them.

Each helper returns the value in the type the view code expects, or raises UsageError naming the
input; the app answers that with a quiet 400 (tilescope.dashboard.guard). None ("not set yet") is always
accepted, since Dash sends it for components that have not been touched.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

from tilescope.errors import UsageError

MAX_TEXT = 10_000  # characters of one text input (a kernel name, a search); real ones are far shorter


def text(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise UsageError(f"{what}: expected a text of at most {MAX_TEXT:,} characters")
    return value


def text_list(value: Any, what: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{what}: expected a list of texts")
    return value


def choice(value: Any, allowed: Collection[str], what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in allowed:
        raise UsageError(f"{what}: expected one of {', '.join(sorted(allowed))}")
    return value


def index(value: Any, what: str) -> int | None:
    """A list position (a finding's index): a whole number >= 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{what}: expected a whole number >= 0")
    return value


def whole(value: Any, what: str, default: int, limit: int) -> int:
    """A whole number in [0, limit]; JSON numbers from JavaScript may arrive as 100.0."""
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise UsageError(f"{what}: expected a whole number from 0 to {limit:,}")
    return value


def number(value: Any, what: str) -> float:
    """A finite number (JSON allows no NaN, but Python's parser accepts `NaN` and `Infinity`)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UsageError(f"{what}: expected a finite number")
    return float(value)


def mapping(value: Any, what: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise UsageError(f"{what}: expected an object")
    return value
