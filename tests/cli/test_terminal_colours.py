"""Severity colours as a terminal receives them (issue #28 item 4): `analyze` on a pseudo-terminal
with TERM (and COLORTERM) set, the SGR codes before each severity read back.

rich picks 16 colours for TERM=xterm, 256 for xterm-256color and 24-bit with COLORTERM=truecolor;
its downgrade of the product's hex colours printed high in yellow and medium in red on 16 colours
and both in one orange on 256, and the fixes were dim."""

from __future__ import annotations

import functools
import re
from typing import Any

import pytest

from tilescope.analysis import analyze
from tilescope.io.load import load_profile
from tilescope.report import render_text
from tilescope.report.data import build_report

from support import SAMPLES
from support.terminal import on_pty

BUNDLE = SAMPLES / "tilelang_fa_bundle"

# Example: "\x1b[1;31mhigh  \x1b[0m": the style of a severity cell of the findings table
SEVERITY_SGR = re.compile(r"\x1b\[([0-9;]+)m(high|medium|low|info)\s*\x1b\[0m")
EXPECTED = {
    # 16 colours: bold red, yellow (the darker, orange-ish one), bright yellow
    ("xterm", None): {"high": "1;31", "medium": "33", "low": "93"},
    # 256: the colour cube's red 160, orange 208, gold 220
    ("xterm-256color", None): {"high": "1;38;5;160", "medium": "1;38;5;208", "low": "38;5;220"},
    # 24-bit: the product's #c0392b, #e67e22, #f1c40f (docs/product.md)
    ("xterm-256color", "truecolor"): {"high": "1;38;2;192;57;43", "medium": "1;38;2;230;126;34",
                                      "low": "38;2;241;196;15"},
}


def _styles(out: str) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for codes, severity in SEVERITY_SGR.findall(out):
        seen.setdefault(severity, set()).add(codes)
    return seen


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_severities_on_a_16_colour_terminal_and_the_fixes_at_full_weight() -> None:
    out = on_pty(["analyze", str(BUNDLE)], 200, "xterm", keep_sgr=True)
    # the bundle has 4 high, 2 medium and 1 low finding: each severity one style, its own
    assert _styles(out) == {s: {codes} for s, codes in EXPECTED[("xterm", None)].items()}
    # the fixes are what to read: printed at full weight (no SGR 2, dim)
    fixes = [line for line in out.splitlines() if re.match(r"(\x1b\[[0-9;]*m)*  TS\d+ → ", line)]
    assert len(fixes) == 5 and not any(re.search(r"\x1b\[(?:[0-9;]*;)?2(?:;[0-9;]*)?m", f) for f in fixes)


@pytest.mark.parametrize(("term", "colorterm"), list(EXPECTED))
def test_severities_keep_their_colours_whatever_the_colour_system(
    term: str, colorterm: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same renderer in this process, rich reading the same TERM / COLORTERM (one process
    on a pty above is the end-to-end check; each costs seconds)."""
    for name in ("COLORTERM", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", term)
    if colorterm is not None:
        monkeypatch.setenv("COLORTERM", colorterm)
    out = render_text.render(_report(), color=True, width=200)
    assert _styles(out) == {s: {codes} for s, codes in EXPECTED[(term, colorterm)].items()}


@functools.cache
def _report() -> dict[str, Any]:
    profile = load_profile(BUNDLE)
    return build_report(profile, analyze(profile))
