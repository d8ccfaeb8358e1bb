"""Run the tilelang-ascend worker in tilelang-ascend's own interpreter and read its answer.

Where that interpreter is: `$TILESCOPE_ASCEND_ROOT` (default `~/.cache/tilescope/tilelang-ascend`),
made by `scripts/setup-tilelang-ascend.sh`, which writes its kind into `.tilescope-kind`:
- `native` (an aarch64 host): `ROOT/venv/bin/python`;
- `emulated` (x86_64): an arm64 Debian root whose `/opt/tla/bin/python` runs under
  `qemu-aarch64-static -L ROOT` — the root's libraries first, the host's files (the kernel, this
  package) at their own paths, no chroot and no root privileges needed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analyzer.errors import MissingComponentError, UsageError

SETUP_HINT = (
    "bash scripts/setup-tilelang-ascend.sh (x86_64: an emulated arm64 root, about 10 minutes and "
    "6.5 GB; an aarch64 host: a venv with pip install torch==2.13.0 tilelang-ascend==0.1.4)"
)
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory holding analyzer/


def ascend_root() -> Path:
    env = os.environ.get("TILESCOPE_ASCEND_ROOT")
    return Path(env) if env else Path.home() / ".cache" / "tilescope" / "tilelang-ascend"


@dataclass(frozen=True)
class Interpreter:
    argv: list[str]
    kind: str  # "native" or "emulated"
    root: Path


def find_interpreter() -> Interpreter | None:
    """tilelang-ascend's interpreter, or None when it is not set up here."""
    root = ascend_root()
    try:
        kind = (root / ".tilescope-kind").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if kind == "native":
        python = root / "venv" / "bin" / "python"
        return Interpreter([str(python)], kind, root) if python.exists() else None
    if kind == "emulated":
        qemu = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
        python = root / "opt" / "tla" / "bin" / "python3"
        if qemu is None or not python.exists():
            return None
        return Interpreter([qemu, "-L", str(root), str(python)], kind, root)
    return None


def require_interpreter(why: str) -> Interpreter:
    found = find_interpreter()
    if found is None:
        raise MissingComponentError(
            f"{why}; lint lowers it with tilelang-ascend 0.1.4, which is not set up here "
            f"(looked in {ascend_root()}): {SETUP_HINT}"
        )
    return found


def run_worker(
    interp: Interpreter, path: Path, names: list[str], runs: list[dict[str, Any]], debug: bool = False
) -> dict[str, Any]:
    """One worker process lowers every run (parameter set); its answer as a dict."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": str(PACKAGE_ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        # torch would import torch_npu, which needs CANN's libhccl.so
        "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
        "TILELANG_DISABLE_CACHE": "1",
    }
    for name in ("TL_PLATFORM", "TMPDIR", "LANG"):
        if name in os.environ:
            env[name] = os.environ[name]
    request = json.dumps({"path": str(path.resolve()), "names": names, "runs": runs}, default=str)
    try:
        proc = subprocess.Popen(
            [*interp.argv, "-m", "analyzer.ir.ascend_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=str(path.resolve().parent),
            start_new_session=True,  # Ctrl-C reaches tilescope, which stops the worker itself
        )
    except OSError as exc:
        raise MissingComponentError(
            f"cannot start tilelang-ascend's interpreter ({exc}): {SETUP_HINT}"
        ) from None
    try:
        out, err = proc.communicate(request.encode("utf-8"))
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    stderr = err.decode("utf-8", "replace")
    if debug and stderr:
        sys.stderr.write(stderr)
    try:
        answer: dict[str, Any] = json.loads(out.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        tail = [ln for ln in stderr.splitlines() if ln.strip()][-1:] or [f"exit status {proc.returncode}"]
        raise MissingComponentError(
            f"tilelang-ascend's interpreter failed before answering ({tail[0][:300]}); "
            f"run with --debug for its output, or redo {SETUP_HINT}"
        ) from None
    if "usage_error" in answer:
        raise UsageError(str(answer["usage_error"]))
    return answer
