"""Benchmark: how long the dashboard's IR view takes to open, and to open again, in headless Chromium.

For each checkout (`--code NAME=DIR`, default `after=.`), a child process serves `create_app([BUNDLE])`
from DIR's code (DIR first on PYTHONPATH) and this process drives Debian's Chromium with Playwright:

  findings   click the Findings tab (the baseline: a light view, same page, same machine load)
  ir-open    click the IR tab for the first time
  ir-reopen  Findings, then IR again (`--repeat` times; the median is printed)
  show-in-ir Findings -> the last located finding -> "Show in IR"

A view counts as open when the page is quiet: no callback request in flight and no DOM mutation
for QUIET_MS, the time taken being that of the last mutation's next animation frame, measured in
the page (`performance.now()`) from the click. Callback payload bytes of each step are summed
from the responses. Each time is printed with its ratio to the findings baseline of the same run,
so runs on a loaded machine stay comparable; with two checkouts the after/before ratio of each
step is printed too.

    .venv/bin/python benchmarks/bench_ir_view.py --code before=/work/main --code after=.
    .venv/bin/python benchmarks/bench_ir_view.py --bundle sample_traces/tilelang_fa_bundle --repeat 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import checkout  # benchmarks/checkout.py: how another checkout's code is run

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
# the browser the suite's browser tests launch, with the same flags (one list for both)
from tests.browser.conftest import CHROMIUM, LAUNCH_ARGS  # noqa: E402

QUIET_MS = 600
TIMEOUT_S = 90.0

_SERVE = """
import logging, sys
from pathlib import Path
from werkzeug.serving import make_server
from tilescope.dashboard.app import create_app

logging.getLogger("werkzeug").setLevel(logging.ERROR)
app = create_app([Path(sys.argv[1])])
server = make_server("127.0.0.1", 0, app.server, threaded=True)
print(server.server_port, flush=True)
server.serve_forever()
"""

# In the page: the time of the last DOM change (after its next frame), for `settle`.
_OBSERVE = """
() => {
  window.__bench = {last: performance.now()};
  new MutationObserver(() => {
    requestAnimationFrame(() => { window.__bench.last = performance.now(); });
  }).observe(document.body, {childList: true, subtree: true, characterData: true, attributes: true});
}
"""


@contextmanager
def serve(code: Path, bundle: Path) -> Iterator[str]:
    env = checkout.env(code)
    proc = subprocess.Popen(
        [sys.executable, "-P", "-c", checkout.source(code, _SERVE), str(bundle.resolve())],
        cwd=code,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().strip()
        if not port.isdigit():
            raise SystemExit(f"server for {code} did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class Recorder:
    """Callback requests in flight and response bytes, from the page's network events."""

    def __init__(self, page: Any) -> None:
        self.pending = 0
        self.last_activity = time.perf_counter()
        self.bytes = 0
        page.on("request", self._start)
        page.on("requestfinished", self._end)
        page.on("requestfailed", self._end)

    def _start(self, req: Any) -> None:
        if "_dash-update-component" in req.url:
            self.pending += 1
            self.last_activity = time.perf_counter()

    def _end(self, req: Any) -> None:
        if "_dash-update-component" in req.url:
            self.pending -= 1
            self.last_activity = time.perf_counter()
            resp = req.response()
            if resp is not None and resp.status == 200:
                self.bytes += len(resp.body())


def timed_click(page: Any, rec: Recorder, selector: str, text: str | None = None) -> tuple[float, int]:
    """Click (in the page, so the clock starts there) and wait until quiet: (seconds, bytes)."""
    rec.bytes = 0
    page.evaluate(
        """([sel, text]) => {
            const all = [...document.querySelectorAll(sel)];
            const el = text === null ? all[0] : all.find(e => e.textContent.trim() === text);
            window.__bench.t0 = performance.now();
            window.__bench.last = window.__bench.t0;
            el.click();
        }""",
        [selector, text],
    )
    rec.last_activity = time.perf_counter()
    deadline = time.perf_counter() + TIMEOUT_S
    while time.perf_counter() < deadline:
        page.wait_for_timeout(50)
        quiet_net = rec.pending == 0 and time.perf_counter() - rec.last_activity > QUIET_MS / 1000
        since = page.evaluate("() => performance.now() - window.__bench.last")
        if quiet_net and since > QUIET_MS:
            took = page.evaluate("() => window.__bench.last - window.__bench.t0")
            return took / 1000.0, rec.bytes
    raise SystemExit(f"{selector} {text}: not quiet after {TIMEOUT_S:.0f} s")


def measure(url: str, repeat: int) -> dict[str, tuple[float, int]]:
    from playwright.sync_api import expect, sync_playwright

    out: dict[str, tuple[float, int]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        page = browser.new_context(viewport={"width": 1366, "height": 768}).new_page()
        page.set_default_timeout(TIMEOUT_S * 1000)
        rec = Recorder(page)
        page.goto(url + "/")
        expect(page.locator("#ov-kpis .kpi")).to_have_count(6, timeout=TIMEOUT_S * 1000)
        page.evaluate(_OBSERVE)
        tab = ".tab"
        out["findings"] = timed_click(page, rec, tab, "Findings")
        out["ir-open"] = timed_click(page, rec, tab, "IR")
        if page.locator("#ir-panes .ir-line").count() == 0:
            raise SystemExit("the IR view shows no code line")
        reopen = []
        for _ in range(repeat):
            timed_click(page, rec, tab, "Findings")
            reopen.append(timed_click(page, rec, tab, "IR"))
        out["ir-reopen"] = (
            statistics.median(t for t, _ in reopen),
            int(statistics.median(b for _, b in reopen)),
        )
        timed_click(page, rec, tab, "Findings")
        timed_click(page, rec, "#f-list .finding-item:last-child")
        out["show-in-ir"] = timed_click(page, rec, "#f-to-ir")
        browser.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", type=Path, default=REPO / "sample_traces" / "tilelang_fa_bundle")
    ap.add_argument("--code", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    codes = [(c.partition("=")[0], Path(c.partition("=")[2]).resolve()) for c in args.code] or [
        ("after", REPO)
    ]
    print(f"bundle {args.bundle}, load average {os.getloadavg()[0]:.2f}")
    results: dict[str, dict[str, tuple[float, int]]] = {}
    for name, code in codes:
        with serve(code, args.bundle) as url:
            results[name] = got = measure(url, args.repeat)
        base = got["findings"][0]
        print(f"\n{name} ({code}), load average {os.getloadavg()[0]:.2f}")
        for step, (secs, size) in got.items():
            print(f"  {step:<11} {secs:7.3f} s  {size / 1024:8.1f} KiB  ×{secs / base:6.1f} findings")
    if len(codes) == 2:
        (a, ra), (b, rb) = ((n, results[n]) for n, _ in codes)
        print(f"\n{b} / {a}:")
        for step in ra:
            time_ratio = rb[step][0] / ra[step][0]
            print(f"  {step:<11} time ×{time_ratio:.3f}   bytes ×{rb[step][1] / max(ra[step][1], 1):.3f}")


if __name__ == "__main__":
    main()
