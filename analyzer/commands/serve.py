"""`tilescope serve [PATH ...]`: the Dash dashboard on localhost.

Profiles come from the command line or from the `--root` directories only; the browser picks among
them by key and can never name another path, and no file is read whose real path (links followed)
lies outside them (dashboard/paths.py). Requests must name localhost or the `--host` address in
their Host header (dashboard/guard.py). The one line on stdout is the URL, printed once the socket
is bound, so scripts can start the server in the background and read where it listens (`--port 0`
picks a free port). The server's access log (a line per request, dozens per click) stays off the
terminal unless `--verbose`; its errors are always shown.
"""

from __future__ import annotations

import logging
import sys
import threading
import webbrowser
from pathlib import Path
from typing import Annotated, Any

import typer

from tilescope.commands import CHIP_HELP, STRICT_HELP, honours_strict
from tilescope.errors import UsageError
from tilescope.extras import require
from tilescope.text.escape import terminal_text

EPILOG = (
    "Examples:\n\n"
    "  tilescope serve sample_traces/attention_unfused\n\n"
    "  tilescope serve --root runs/ --no-browser --port 0 &   # URL on stdout\n\n"
    "  tilescope serve runs/fa-v1 runs/fa-v2 --check          # load everything, exit\n\n"
    "Binds 127.0.0.1 by default; the dashboard has no authentication, so bind another address only "
    "on a trusted network."
)
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _say_ranks(app: Any) -> None:
    """On stderr, per served path of several ranks: that the Ranks tab shows them, and each rank
    left out with its error (file, row, what was expected), as `analyze` warns about it; per run
    of several ranks under a --root, that the tab lists it (its ranks are read when it is picked)."""
    # deferred: the Dash app (plotly, dash: the `dashboard` extra) only when `serve` runs
    from tilescope.dashboard.app import store_of

    store = store_of(app)
    for _key, label, count in store.root_runs():
        _log(terminal_text(f"{label}: {count} ranks under --root, in the Ranks tab (read when picked)"))
    for run in store.clusters():
        ranks = run.section.get("ranks") or []
        left = [r for r in ranks if not r.get("kernels_loaded")]
        for r in left:
            _log(terminal_text(f"warning: {r.get('error')} — rank {r.get('rank')} left out"))
        _log(terminal_text(f"{run.label}: {len(ranks)} ranks side by side in the Ranks tab"
                           + (f" ({len(left)} without a readable kernel table)" if left else "")))


def _log(message: str) -> None:
    typer.echo(f"tilescope: {message}", err=True)


@honours_strict
def serve_command(
    paths: Annotated[
        list[Path] | None, typer.Argument(metavar="[PATH ...]", help="Profiles or bundles to open.")
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port (0 = any free port).")] = 8050,
    root: Annotated[
        list[Path] | None,
        typer.Option(
            "--root", help="Directory whose profiles the picker lists; repeatable. Nothing outside is read."
        ),
    ] = None,
    chip: Annotated[str | None, typer.Option("--chip", help=CHIP_HELP)] = None,
    strict: Annotated[bool, typer.Option("--strict", help=STRICT_HELP)] = False,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Do not open a browser tab.")] = False,
    check: Annotated[
        bool, typer.Option("--check", help="Load everything, say where it would listen, exit (no server).")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show the server's access log (a line per request).")
    ] = False,
) -> None:
    """Browse profiles, findings, roofline, timeline and IR in a local web dashboard."""
    if not paths and not root:
        raise UsageError("give at least one PATH or --root DIR to serve")
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port}: not a port number")
    for p in paths or []:
        if not p.exists():
            raise UsageError(f"{p}: no such file or directory")
    require("dashboard", "tilescope serve")
    # deferred: the Dash app (plotly, dash: the `dashboard` extra) only when `serve` runs
    from tilescope.dashboard.app import create_app

    if paths:
        _log(f"loading {len(paths)} path(s)…")
    app = create_app(list(paths or []), roots=list(root or []), chip=chip, hosts=[host])
    _say_ranks(app)
    if host not in LOOPBACK:
        _log(f"warning: binding {host}: anyone who can reach it can read the served profiles")
    if check:
        # deferred: the Dash app (plotly, dash: the `dashboard` extra) only when `serve` runs
        from tilescope.dashboard.app import store_of

        # profiles, not paths: a path of 8 ranks is 8 profiles in the picker
        store = store_of(app)
        count = len(store.loaded())
        loaded = (f"{count} profile(s) from {len(paths)} path(s) loaded" if paths
                  else "the --root directories can be listed")
        if root:  # listed, not loaded: a root's profiles and runs are read when picked
            # deferred: dashboard.paths only when this command runs; `tilescope --help` imports every command
            #   module
            from tilescope.dashboard.paths import discover_profiles

            listed, runs = len(discover_profiles(store.roots)), len(store.root_runs())
            loaded += f" ({listed} profile(s) and {runs} run(s) of several ranks under --root)"
        typer.echo(f"tilescope: check passed, {loaded}; not serving (--check): "
                   f"would listen on {_url(host, port)}")
        return
    # werkzeug logs every request at INFO on stderr (its own handler, added on first use);
    # WARNING keeps its errors
    logging.getLogger("werkzeug").setLevel(logging.INFO if verbose else logging.WARNING)
    # deferred: the Dash app (plotly, dash: the `dashboard` extra) only when `serve` runs
    from tilescope.dashboard.guard import make_http_server

    try:
        server = make_http_server(app, host, port)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from exc
    url = _url(host, server.server_port)
    typer.echo(f"tilescope: serving on {url}")
    sys.stdout.flush()
    if not no_browser:
        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    _log("press Ctrl+C to stop")
    try:
        server.serve_forever()
    finally:
        server.server_close()


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def register(app: typer.Typer) -> None:
    app.command("serve", epilog=EPILOG)(serve_command)
