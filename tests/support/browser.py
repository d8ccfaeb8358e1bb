"""What the headless-Chromium tests share (recipe: ../shared/docs/browser-testing.md); their
fixtures are in tests/browser/conftest.py. Imported as `support.browser`, never through
`conftest`: that module name is every folder's conftest, whichever pytest imported last.

- `CHROMIUM`, `LAUNCH_ARGS`, `needs_chromium`: Debian's /usr/bin/chromium with the verified flags
  (never `playwright install`); `VIEWPORT`, the size the pages open at.
- `new_page(context, timeout_ms, viewport)`: a page of the shared dashboard Chromium
  (tests/browser/conftest.py `dashboard_browser`) with its own timeout and size.
- `record_events(page, base_url)`: dialogs (Playwright dismisses them silently), page errors,
  console errors and requests leaving the app, so a test can assert none happened.
- `serve_wsgi(app)`: an in-process werkzeug server on a free port; `serve_folder(root)`: the same
  for the files of a folder (the HTML reports). At exit each checks its port is closed again.
"""

from __future__ import annotations

import functools
import http.server
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
]
VIEWPORT = {"width": 1366, "height": 768}
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium chromium-driver)"
)


@dataclass
class PageEvents:
    dialogs: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    outside_requests: list[str] = field(default_factory=list)

    def assert_clean(self) -> None:
        assert self.dialogs == [], f"dialogs fired: {self.dialogs}"
        assert self.page_errors == [], f"page errors: {self.page_errors}"
        assert self.console_errors == [], f"console errors: {self.console_errors}"
        assert self.outside_requests == [], f"requests left the app: {self.outside_requests}"


def record_events(page: Any, base_url: str) -> PageEvents:
    events = PageEvents()

    def on_dialog(dialog: Any) -> None:
        events.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda exc: events.page_errors.append(str(exc)))
    page.on("console", lambda msg: events.console_errors.append(msg.text) if msg.type == "error" else None)
    page.on(
        "request",
        lambda req: (
            None
            if req.url.startswith((base_url, "data:", "blob:", "about:"))
            else events.outside_requests.append(req.url)
        ),
    )
    return events


def _port_closed(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) != 0


@contextmanager
def _serving(server: Any) -> Iterator[str]:
    """Serve `server` (bound to a free port of 127.0.0.1) from a thread; its URL. At exit it is
    shut down and its port checked closed."""
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        assert _port_closed(port), f"port {port} still accepts connections"


@contextmanager
def serve_wsgi(wsgi_app: Callable[..., Any]) -> Iterator[str]:
    import logging

    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request drowns the failures
    with _serving(make_server("127.0.0.1", 0, wsgi_app, threaded=True)) as url:
        yield url


class _QuietFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        pass


@contextmanager
def serve_folder(root: Path) -> Iterator[str]:
    """The files under `root` over HTTP on a free port, as `serve_wsgi` serves an app."""
    handler = functools.partial(_QuietFiles, directory=str(root))
    with _serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)) as url:
        yield url


def new_page(context: Any, timeout_ms: float, viewport: dict[str, int] | None = None) -> Any:
    """A page of `context` with the test's timeout, at `viewport` (VIEWPORT if not given): the
    pages of one context share its size and timeout unless each sets its own."""
    page = context.new_page()
    page.set_default_timeout(timeout_ms)
    page.set_viewport_size(viewport or VIEWPORT)
    return page
