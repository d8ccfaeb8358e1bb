"""The headless-Chromium tests' fixtures; what they share besides is `support.browser`.

- `browser`: one headless Chromium per test module (pytest-playwright's session-wide one would
  stay alive into the next module's own sync Playwright).
- `browser_type_launch_args`: pytest-playwright's hook, pointed at Debian's /usr/bin/chromium with
  the verified flags.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from support.browser import CHROMIUM, LAUNCH_ARGS


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": str(CHROMIUM), "args": LAUNCH_ARGS}
