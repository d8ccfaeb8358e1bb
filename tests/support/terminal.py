"""The CLI on a pseudo-terminal of a given width, and piped."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import sys
import termios

from support import REPO_ROOT

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_pty(args: list[str], columns: int, term: str = "xterm-256color", colorterm: str | None = None,
           keep_sgr: bool = False) -> str:
    """stdout of `tilescope ARGS` on a pseudo-terminal `columns` wide (stderr, where progress
    bars go, on a pipe), as plain text, or with its SGR escapes (`keep_sgr`); `term` and
    `colorterm` are TERM and COLORTERM, from which rich picks 16, 256 or 24-bit colour."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    drop = ("COLUMNS", "LINES", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["TERM"] = term
    if colorterm is not None:
        env["COLORTERM"] = colorterm
    proc = subprocess.Popen([sys.executable, "-m", "tilescope.cli", *args], stdout=slave,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=REPO_ROOT, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the pty
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    text = b"".join(chunks).decode("utf-8").replace("\r", "")
    return text if keep_sgr else ANSI.sub("", text)


def piped(args: list[str]) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    r = subprocess.run([sys.executable, "-m", "tilescope.cli", *args], capture_output=True, text=True,
                       cwd=REPO_ROOT, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout
