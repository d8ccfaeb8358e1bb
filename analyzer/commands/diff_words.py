"""The words both renderings of `tilescope diff` share (two runs: commands/diff.py; two multi-rank
runs: commands/diff_cluster.py): signed changes and a finding's line, escaped for where it goes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tilescope.text.escape import MAX_INLINE, terminal_text
from tilescope.text.words import fmt_us, saving_phrase


def signed_us(v: float) -> str:
    return ("+" if v > 0 else "−" if v < 0 else "±") + fmt_us(abs(v))


def signed_pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.1f} %".replace("-", "−")


def finding_line(f: Mapping[str, Any], esc: Callable[[object], str]) -> str:
    kernels = [str(k) for k in f.get("kernels", []) or []]
    shown = " → ".join(kernels[:6]) + (f" (+{len(kernels) - 6})" if len(kernels) > 6 else "")
    # a finding on no kernel (TS404's idle gaps, the cross-rank ones) names none, not an empty one
    on = f": {esc(shown)}" if shown else ""
    rule = f"{esc(f.get('severity', ''))} {esc(f.get('code', '?'))} {esc(f.get('slug', ''))}"
    return f"{rule}{on} — {saving_phrase(f)}"


def term_text(text: object, limit: int | None = MAX_INLINE) -> str:
    return terminal_text(text, limit)
