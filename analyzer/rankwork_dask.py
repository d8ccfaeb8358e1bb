"""The per-rank jobs on a Dask distributed scheduler (`--scheduler` / TILESCOPE_SCHEDULER), bounded
in time and said in one line whatever goes wrong around the client (docs/reliability.md §11).

What was probed (issue #27): a port that accepts and never answers hung past 300 s (Dask's own
connect timeout does not bound its handshake); one that sends other bytes made Dask try to allocate
6.5 EiB, then a traceback; `tls://` without a TLS configuration and `ucx://` without ucx raised
TypeError; a scheduler with no workers waited in `gather` for ever; port 99999 waited 20 s.
So: the address is checked before Dask is imported (exit 2 naming where it came from), the
connection has one overall deadline (`CONNECT_DEADLINE_S`, in a thread of its own, since Dask's
timeout is per attempt), the scheduler must show a worker within `NO_WORKERS_WAIT_S`, and any
failure of the connection or the cluster is `MissingComponentError` (exit 3), one line.

Mid-run (issue #27, tests/cluster/test_dask_midrun.py): a worker killed while it analyses a rank
sends its rank back to the scheduler, which gives it to another worker (Dask's own retry, up to
`distributed.scheduler.allowed-failures` deaths per rank, then KilledWorker); with no worker left
the ranks waited in `gather` for ever, so the run is watched and ends when the scheduler has had no
worker for `NO_WORKERS_WAIT_S`. A scheduler killed mid-run cancels the futures (exit 3); Dask's
own log line about it is held back, so the error is one line.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tilescope.errors import MissingComponentError, NoProfileFoundError, TilescopeError, UsageError
from tilescope.extras import install_line
from tilescope.io.detect import PATH_MISSING
from tilescope.io.failures import LoadFailure
from tilescope.io.remote import RemoteMissingError
from tilescope.rankjobs import UnitJob, UnitResult

SCHEDULER_ENV = "TILESCOPE_SCHEDULER"
CONNECT_DEADLINE_S = 30.0  # the whole connection (TCP, Dask's handshake, retries) to the scheduler
NO_WORKERS_WAIT_S = 30.0  # for the scheduler to have one worker, once connected
CLOSE_WAIT_S = 5.0
WATCH_S = 0.5  # how often a running analysis asks the scheduler whether it still has a worker
PROTOCOLS = ("tcp", "tls", "ucx", "ws", "wss")  # Dask's comm protocols with a HOST:PORT address
# Example: tcp://10.0.0.1:8786, tls://head.cluster:8786, 10.0.0.1:8786, tcp://[::1]:8786
_ADDRESS_RE = re.compile(r"^(?:(?P<proto>[a-z]+)://)?(?P<host>\[[0-9a-fA-F:.]+\]|[\w.-]+):(?P<port>\d{1,5})$")


def check_address(address: str, named: str) -> str:
    """`address` when it is a Dask scheduler address with a port Dask can reach; UsageError (exit 2)
    naming `named` (`--scheduler` or TILESCOPE_SCHEDULER) otherwise — before anything connects."""
    m = _ADDRESS_RE.match(address.strip())
    expected = (
        f"expected a Dask scheduler address such as tcp://HOST:8786 ({', '.join(PROTOCOLS)}; port 1-65535)"
    )
    if m is None or (m["proto"] is not None and m["proto"] not in PROTOCOLS):
        raise UsageError(f"{named} {address!r}: {expected}")
    if not 1 <= int(m["port"]) <= 65535:
        raise UsageError(f"{named} {address!r}: port {m['port']} is out of range; {expected}")
    return address.strip()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _connect(address: str, named: str, deadline_s: float) -> Any:
    """A connected distributed.Client, or MissingComponentError within `deadline_s` whatever the
    other end does. The attempt runs in a daemon thread: one that never ends is left behind (its
    socket is closed with this process), and its client never closes itself at exit (a failed
    client's `__del__` waited 2× its timeout and printed a traceback)."""
    try:
        # deferred: Dask distributed is the optional `cluster` extra (--scheduler)
        from distributed import Client
    except ImportError:
        raise MissingComponentError(
            f"{named} {address}: Dask distributed is not installed "
            f"({install_line('cluster')}, or distributed==2026.8.0)"
        ) from None

    class _Client(Client):
        def __del__(self) -> None:  # closed by run_dask, or abandoned by a failed connect
            pass

    box: dict[str, Any] = {}

    def attempt() -> None:
        try:
            box["client"] = _Client(address, timeout=f"{deadline_s}s", set_as_default=False)
        except BaseException as exc:  # whatever Dask raises becomes one line below
            box["error"] = exc

    thread = threading.Thread(target=attempt, name="tilescope-dask-connect", daemon=True)
    thread.start()
    thread.join(deadline_s)
    if "client" in box:
        return box["client"]
    why = _first_line(box["error"]) if "error" in box else f"no answer within {deadline_s:g} s"
    raise MissingComponentError(f"{named} {address}: cannot reach the Dask scheduler ({why})")


def run_dask(
    fn: Callable[[UnitJob], UnitResult],
    jobs: Sequence[UnitJob],
    address: str,
    named: str = "--scheduler",
    connect_s: float | None = None,
    workers_s: float | None = None,
) -> list[UnitResult]:
    """`fn` of every job on the scheduler's workers, results in the jobs' order."""
    connect_s = CONNECT_DEADLINE_S if connect_s is None else connect_s
    workers_s = NO_WORKERS_WAIT_S if workers_s is None else workers_s
    client = _connect(address, named, connect_s)
    with _dask_logs_held_back():
        return _run(client, fn, jobs, address, named, workers_s)


def _run(client: Any, fn: Callable[[UnitJob], UnitResult], jobs: Sequence[UnitJob], address: str,
         named: str, workers_s: float) -> list[UnitResult]:
    try:
        try:
            client.wait_for_workers(1, timeout=workers_s)
        except TimeoutError:
            raise MissingComponentError(
                f"{named} {address}: the scheduler has no workers (none joined within {workers_s:g} s); "
                "start some with `dask worker ADDRESS`"
            ) from None
        futures = client.map(fn, list(jobs), pure=False)
        _watch(client, futures, f"{named} {address}", workers_s)
        results: list[UnitResult] = client.gather(futures)
        return results
    except TilescopeError:
        raise
    except Exception as exc:
        if not _cluster_failure(exc):
            raise  # the jobs' own error: a bug, reported as one
        said = f"{named} {address}: the Dask cluster failed ({_cluster_said(exc)})"
        raise MissingComponentError(said) from None
    finally:
        with contextlib.suppress(Exception):  # a scheduler gone mid-run: nothing left to close
            client.close(timeout=CLOSE_WAIT_S)


def _watch(client: Any, futures: list[Any], named: str, workers_s: float) -> None:
    """Return once every future is done (or failed, or cancelled); MissingComponentError when the
    scheduler has had no worker for `workers_s` meanwhile (the ranks would wait for ever)."""
    # deferred: Dask distributed is the optional `cluster` extra (--scheduler)
    from distributed import wait

    alone_since: float | None = None
    while True:
        try:
            with client.as_current():  # `wait` asks for the current client; ours is no default
                wait(futures, timeout=WATCH_S)
            return
        except TimeoutError:
            pass
        workers = _workers(client)
        if workers != 0:  # some, or not known now (a scheduler gone: its futures are cancelled)
            alone_since = None
            continue
        alone_since = time.monotonic() if alone_since is None else alone_since
        if time.monotonic() - alone_since >= workers_s:
            left = sum(1 for f in futures if not f.done())
            raise MissingComponentError(
                f"{named}: the Dask cluster lost its workers mid-run (none for {workers_s:g} s; "
                f"{left} of {len(futures)} ranks unfinished); start some with `dask worker ADDRESS`"
            )


def _workers(client: Any) -> int | None:
    """How many workers the scheduler has now; None when it does not say within a few seconds."""
    try:
        return len(client.sync(client.scheduler.ncores, callback_timeout=4 * WATCH_S))
    except Exception:  # a scheduler lost or slow: its futures say so, or the next look does
        return None


@contextlib.contextmanager
def _dask_logs_held_back() -> Any:
    """Dask's own log lines (`distributed.client - ERROR - Failed to reconnect to scheduler`) held
    back while tilescope runs the jobs: what failed is tilescope's one line."""
    names = ["distributed", *(n for n in logging.root.manager.loggerDict if n.startswith("distributed."))]
    levels = {n: logging.getLogger(n).level for n in names}  # Dask's config sets some children's own
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _cluster_failure(exc: BaseException) -> bool:
    """A failure of the connection or of the cluster (a lost scheduler, a worker killed), as
    opposed to an error raised by the job itself on a worker."""
    # deferred: Dask distributed is the optional `cluster` extra, imported only on this error path
    from distributed import KilledWorker
    from distributed.comm.core import CommClosedError

    return isinstance(exc, KilledWorker | CommClosedError | OSError | TimeoutError) or type(exc).__name__ in (
        "FutureCancelledError",
        "FuturesCancelledError",  # `wait` on several futures a lost scheduler cancelled
        "CancelledError",
    )


# Example: "... 2 Futures cancelled for reason: scheduler-connection-lost." -> scheduler-connection-lost
_REASON_RE = re.compile(r"reason: ([\w-]+)")


def _cluster_said(exc: BaseException) -> str:
    """What failed, in one line: a cancelled future's reason (Dask's message is a list of them)."""
    reason = _REASON_RE.search(str(exc)) if "Cancelled" in type(exc).__name__ else None
    if reason is not None:
        return f"{type(exc).__name__}: the ranks were cancelled, {reason.group(1)}"
    return _first_line(exc)


def _seen_here_not_there(f: LoadFailure) -> bool:
    """A rank a worker found missing (`run_unit` says PATH_MISSING for a local path, `stage` raises
    RemoteMissingError for a file:// URL) that exists on this machine."""
    if (
        isinstance(f.error, NoProfileFoundError)
        and f.error.detail == PATH_MISSING
        and isinstance(f.path, Path)
    ):
        return f.path.exists()
    here = str(f.path)[len("file://") :] if str(f.path).startswith("file://") else None
    return isinstance(f.error, RemoteMissingError) and here is not None and Path(here).exists()


def workers_cannot_see(failed: Sequence[LoadFailure], address: str, named: str = "--scheduler") -> None:
    """Ranks this machine reads that the Dask workers found missing (`_seen_here_not_there`): the
    workers do not share this machine's
    filesystem (or mount it elsewhere). One line (exit 2) instead of one "no profile" per rank."""
    unseen = [f for f in failed if _seen_here_not_there(f)]
    if unseen:
        raise UsageError(
            f"{unseen[0].path}: the Dask workers of {named} {address} cannot read it "
            f"({len(unseen)} of the ranks): the ranks must be on a filesystem every worker mounts "
            "under the same path"
        )
