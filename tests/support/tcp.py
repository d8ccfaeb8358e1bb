"""A local TCP port that accepts every connection and answers with fixed bytes or never: the silent
or confused peer the hardening tests aim clients at (a Dask scheduler address, a remote store)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def accepting_host(answer: bytes | None = None) -> Iterator[tuple[str, int]]:
    """(host, port) on 127.0.0.1; every connection gets `answer` (None: nothing) and is held
    open. Closed at the end, so calls still waiting on it return."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            held.append(conn)
            if answer is not None:
                conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield sock.getsockname()
    finally:
        sock.close()
        for conn in held:
            conn.close()
