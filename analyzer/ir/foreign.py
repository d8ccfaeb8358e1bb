"""Run the tilelang-ascend worker in tilelang-ascend's own interpreter and read its answer.

Where that interpreter is: `$TILESCOPE_ASCEND_ROOT` (default `~/.cache/tilescope/tilelang-ascend`),
made by `scripts/setup-tilelang-ascend.sh`, which writes its kind into `.tilescope-kind`:
- `native` (an aarch64 host): `ROOT/venv/bin/python`;
- on an Atlas host whose own environment has tilelang-ascend installed, this interpreter itself;
- `emulated` (x86_64): an arm64 Debian root whose `/opt/tla/bin/python` runs under qemu-user
  (binfmt_misc), chrooted inside a private mount namespace (`unshare -m`; `-r` too when not root)
  where the root is read-only and `ROOT/host` holds only the kernels' folders and this package's,
  read-only (`host_folders`: the host's `/` is not there), `/tmp` and `/dev` (a few devices) are
  empty tmpfs, `/root` the root's own with changes kept in memory, and `/proc` is mounted; the
  mounts vanish with the process. `/sys` is deliberately not mounted: torch's cpuinfo reads the x86
  host's CPU topology from it and crashes under emulation (`qemu-aarch64-static -L ROOT`, which
  shows the host's /sys, crashes the same way).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilescope.errors import MissingComponentError, UsageError
from tilescope.ir.ascend_worker import answer as lower_here
from tilescope.ir.deadline import WORKER_START_S, timeout_error
from tilescope.lifeline import Preexec
from tilescope.run_module import command, package_folders

SETUP_HINT = (
    "bash scripts/setup-tilelang-ascend.sh (x86_64: an emulated arm64 root, about 10 minutes and "
    "6.5 GB; an aarch64 host: a venv with pip install torch==2.13.0 tilelang-ascend==0.1.4)"
)
WORKER = "tilescope.ir.ascend_worker"  # run through tilescope.run_module: nothing is installed there


def ascend_root() -> Path:
    env = os.environ.get("TILESCOPE_ASCEND_ROOT")
    return Path(env) if env else Path.home() / ".cache" / "tilescope" / "tilelang-ascend"


@dataclass(frozen=True)
class Interpreter:
    argv: list[str]
    kind: str  # "native" or "emulated"
    root: Path


def installed_here() -> bool:
    """Is the `tilelang` of this interpreter tilelang-ascend (an Atlas host's own environment)?"""
    # deferred: importlib.metadata (email, zipfile, csv: ~60 ms) only to look a version up
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("tilelang-ascend")
    except PackageNotFoundError:
        return False
    return True


def find_interpreter() -> Interpreter | None:
    """tilelang-ascend's interpreter, or None when it is not set up here."""
    if installed_here():
        return Interpreter([sys.executable], "in-process", Path(sys.prefix))
    root = ascend_root()
    try:
        kind = (root / ".tilescope-kind").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if kind == "native":
        python = root / "venv" / "bin" / "python"
        return Interpreter([str(python)], kind, root) if python.exists() else None
    if kind == "emulated":
        unshare = shutil.which("unshare")
        if unshare is None or not (root / "opt" / "tla" / "bin" / "python").exists():
            return None
        if not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists():
            return None  # after a reboot: the setup script registers qemu again
        return Interpreter([unshare], kind, root)
    return None


HOST = "/host"  # where the host's folders the worker reads appear inside the emulated root
# the host's devices the worker sees in its /dev (a tmpfs, with a /dev/shm of its own)
DEVICES = ("null", "zero", "full", "random", "urandom")
# every host folder bound into the root: read-only, and nothing in it runs as a program
READ_ONLY = "remount,bind,ro,nosuid,nodev,noexec"


def _inside(path: Path, interp: Interpreter) -> str:
    """A host path as the emulated root's worker sees it."""
    return HOST + str(path) if interp.kind == "emulated" else str(path)


def host_folders(kernel_dirs: list[Path]) -> list[Path]:
    """What the emulated worker sees of the host, read-only: the kernels' folders (a kernel may
    import its neighbours) and tilescope's own package folders (the worker runs this tilescope:
    tilescope.run_module). A folder inside another is seen through it."""
    wanted = sorted({*(d.resolve() for d in kernel_dirs), *(Path(f) for f in package_folders().values())})
    kept: list[Path] = []
    for folder in wanted:
        if not any(folder.is_relative_to(k) for k in kept):
            kept.append(folder)
    return kept


def _command(interp: Interpreter, env: dict[str, str], kernel_dirs: list[Path] | None = None) -> list[str]:
    if interp.kind != "emulated":
        return command(interp.argv, WORKER)
    root = str(interp.root)
    q = shlex.quote
    assignments = " ".join(q(f"{k}={v}") for k, v in env.items())
    worker = shlex.join(command(["/opt/tla/bin/python"], WORKER, where=lambda p: _inside(Path(p), interp)))
    steps = [
        # the root itself read-only: nothing a kernel's code writes persists in it
        f"mount --bind {q(root)} {q(root)}",
        f"mount -o remount,bind,ro,nosuid,nodev {q(root)}",
        f"mount -t proc proc {q(root + '/proc')}",
        # /host: an empty folder of its own, holding only the folders bound below
        f"mount -t tmpfs -o mode=0755 tmpfs {q(root + HOST)}",
    ]
    for folder in host_folders(kernel_dirs or []):
        inside = q(root + HOST + str(folder))
        steps += [f"mkdir -p {inside}", f"mount --bind {q(str(folder))} {inside}",
                  f"mount -o {READ_ONLY} {inside}"]
    steps += [f"mount -o remount,ro {q(root + HOST)}"]
    # what Python and TileLang write goes to memory, gone with the process: an empty /tmp, and HOME
    # (/root) as the root has it — TileLang's cache there (its cython adapter, built once by the
    # setup script) — with the changes on top in /tmp (overlayfs; an empty HOME where it fails)
    steps += [f"mount -t tmpfs tmpfs {q(root + '/tmp')}", _home(root)]
    steps += [f"mount -t tmpfs tmpfs {q(root + '/dev')}"]
    for dev in DEVICES:
        steps += [f"touch {q(root + '/dev/' + dev)}", f"mount --bind /dev/{dev} {q(root + '/dev/' + dev)}"]
    steps += [f"mkdir {q(root + '/dev/shm')}", f"mount -t tmpfs tmpfs {q(root + '/dev/shm')}"]
    script = " && ".join(steps) + f" && exec chroot {q(root)} /usr/bin/env -i {assignments} {worker}"
    flags = (
        ["-m", "--propagation", "private"] if os.geteuid() == 0 else ["-r", "-m", "--propagation", "private"]
    )
    return [*interp.argv, *flags, "sh", "-c", script]


def _home(root: str) -> str:
    """The shell step that makes the worker's HOME (/root) writable without writing to the root."""
    q = shlex.quote
    empty = f"mount -t tmpfs tmpfs {q(root + '/root')}"
    if any(c in root for c in ",:"):  # overlayfs options cannot hold these
        return empty
    upper, work = f"{root}/tmp/.home-changes", f"{root}/tmp/.home-work"
    overlay = f"lowerdir={root}/root,upperdir={upper},workdir={work}"
    mount = f"mount -t overlay overlay -o {q(overlay)} {q(root + '/root')}"
    return f"mkdir {q(upper)} {q(work)} && {{ {mount} || {empty}; }}"


def require_interpreter(why: str) -> Interpreter:
    found = find_interpreter()
    if found is None:
        raise MissingComponentError(
            f"{why}; lint lowers it with tilelang-ascend 0.1.4, which is not set up here "
            f"(looked in {ascend_root()}): {SETUP_HINT}"
        )
    return found


def run_worker(
    interp: Interpreter, path: Path, names: list[str], runs: list[dict[str, Any]], debug: bool = False,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """One worker process lowers every run (parameter set); its answer as a dict."""
    found = run_jobs(interp, [(path, names, runs)], debug, timeout_s)[0]
    if "usage_error" in found:
        raise UsageError(str(found["usage_error"]))
    return found


def run_jobs(
    interp: Interpreter, jobs: list[tuple[Path, list[str], list[dict[str, Any]]]], debug: bool = False,
    timeout_s: float | None = None,
) -> list[dict[str, Any]]:
    """Several kernel files in one worker (one import of tilelang): one answer per job, in order.
    With `timeout_s` (per lowering), the worker is killed after WORKER_START_S + `timeout_s` × its
    lowerings: UsageError naming the first kernel (tilescope.ir.deadline)."""
    requests: list[dict[str, Any]] = [
        {"path": _inside(p.resolve(), interp), "names": n, "runs": r} for p, n, r in jobs
    ]
    if interp.kind == "in-process":
        return [lower_here(r) for r in requests]
    emulated = interp.kind == "emulated"
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin" if emulated else os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/root" if emulated else os.environ.get("HOME", "/tmp"),
        "PYTHONDONTWRITEBYTECODE": "1",
        # torch would import torch_npu, which needs CANN's libhccl.so
        "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
        "TILELANG_DISABLE_CACHE": "1",
    }
    for name in ("TL_PLATFORM", "LANG") if emulated else ("TL_PLATFORM", "TMPDIR", "LANG"):
        if name in os.environ:
            env[name] = os.environ[name]
    request = json.dumps({"jobs": requests}, default=str)
    try:
        proc = subprocess.Popen(
            _command(interp, env, [p.resolve().parent for p, _, _ in jobs]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**env, "PATH": os.environ.get("PATH", "/usr/bin:/bin")} if emulated else env,
            cwd=str(jobs[0][0].resolve().parent),
            start_new_session=True,  # Ctrl-C reaches tilescope, which stops the worker itself
            preexec_fn=Preexec(),  # and `kill -9` of tilescope, which cannot, ends it too
        )
    except OSError as exc:
        raise MissingComponentError(
            f"cannot start tilelang-ascend's interpreter ({exc}): {SETUP_HINT}"
        ) from None
    lowerings = sum(len(runs) for _, _, runs in jobs)
    allowed = WORKER_START_S + timeout_s * lowerings if timeout_s else None
    try:
        out, err = proc.communicate(request.encode("utf-8"), timeout=allowed)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert timeout_s is not None
        raise timeout_error(jobs[0][0], timeout_s) from None
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    stderr = err.decode("utf-8", "replace")
    if debug and stderr:
        sys.stderr.write(stderr)
    try:
        answers: list[dict[str, Any]] = json.loads(out.decode("utf-8"))["jobs"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        tail = [ln for ln in stderr.splitlines() if ln.strip()][-1:] or [f"exit status {proc.returncode}"]
        raise MissingComponentError(
            f"tilelang-ascend's interpreter failed before answering ({tail[0][:300]}); "
            f"run with --debug for its output, or redo {SETUP_HINT}"
        ) from None
    return answers
