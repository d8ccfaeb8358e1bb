"""The headless-Chromium tests' fixtures; what they share besides is `support.browser`.

- `browser`: one headless Chromium per test module (pytest-playwright's session-wide one would
  stay alive into the next module's own sync Playwright), for pages that need nothing kept: each
  `browser.new_page()` / `new_context()` is a fresh incognito context.
- `dashboard_browser`: for the dashboard's pages, one Chromium per test module on a profile kept on
  disk for the whole test process (one module after another, never two at once). A dashboard page
  loads ~5 MB of script (Plotly, the AG Grid, dash-renderer); an incognito context keeps no V8 code
  cache, so each load compiled all of it again: ~3 CPU s of Chromium's renderer a load, 1.5 s from
  the third load on with the cache (#23). Its responses that could go stale are not cached:
  /_dash-layout and /_dash-dependencies carry no cache headers, and the scripts' URLs are
  fingerprinted. Pages share its cookies and storage; the dashboard keeps nothing in either.
- `browser_type_launch_args`: pytest-playwright's hook, pointed at Debian's /usr/bin/chromium with
  the verified flags.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.browser import CHROMIUM, LAUNCH_ARGS, VIEWPORT


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def _chromium_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("chromium-profile")


@pytest.fixture(scope="module")
def dashboard_browser(_chromium_profile: Path) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(_chromium_profile), executable_path=str(CHROMIUM), args=LAUNCH_ARGS, viewport=VIEWPORT,
            accept_downloads=True,
        )
        yield context
        context.close()


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": str(CHROMIUM), "args": LAUNCH_ARGS}
