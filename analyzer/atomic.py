"""Atomic output: the new content is written aside and put in place only when it is complete.

A crash, Ctrl-C, SIGTERM or even `kill -9` never leaves a half-written report, and an existing
file is replaced only by a complete new one:

- on Linux the content goes to an anonymous file in the target's directory (`O_TMPFILE`): it has
  no name, so a process killed in mid-write leaves nothing behind; it is linked into the
  directory only once complete. Replacing an existing file links it under a hidden temporary name
  and renames that over the target, the only moment (microseconds) a `kill -9` could leave a
  visible `.NAME.*.tmp`;
- elsewhere (or on a file system without O_TMPFILE) a hidden `.NAME.*.tmp` beside the target is
  written and renamed; an exception or signal removes it, `kill -9` cannot.

A symlink is followed: the file behind it receives the output and the link stays. A target that
is not a regular file (a character device such as /dev/stdout, a FIFO) is written in place: a
rename would replace the device node.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tilescope.errors import UsageError
from tilescope.interrupt import check as check_interrupted
from tilescope.interrupt import hold_point

# file systems that cannot make anonymous files say so with one of these (EISDIR: a kernel
# without O_TMPFILE opens the directory itself)
_NO_TMPFILE = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOSYS)


@contextlib.contextmanager
def atomic_path(target: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a path to write the output to (open it as often as needed); when the block ends
    without an exception (and no signal arrived) the content becomes `target`.

    Raises UsageError (exit 2, one line) when the target's directory does not exist (none is
    made up), the target is a directory, or nothing can be created there.
    """
    given = Path(target)
    final = _destination(given)
    if final is None:  # not a regular file: written in place
        yield given
        return
    dfd = _open_dir(given, final.parent)
    try:
        anon = _anonymous_file(given, dfd)
        if anon is None:
            with _named_temp(given, final, suffix) as tmp:
                yield tmp
                _before_commit(tmp, final)
                os.replace(tmp, final)
            return
        try:
            tmp = Path(f"/proc/self/fd/{anon}")
            yield tmp
            _commit_anonymous(tmp, final, dfd)
        finally:
            os.close(anon)
    finally:
        os.close(dfd)


def _destination(given: Path) -> Path | None:
    """The regular file to replace: `given`, or the file a symlink leads to; None for a device,
    FIFO or socket (or a link we cannot name, like /dev/stdout of a pipe), written in place."""
    try:
        st = os.stat(given)  # follows links, the magic ones of /proc included
    except FileNotFoundError:
        # a new file, or a link to one yet to be made: the link's end receives the output
        return Path(os.path.realpath(given)) if os.path.islink(given) else given
    except OSError as exc:
        raise UsageError(f"{given}: cannot write the output there ({exc.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{given}: is a directory (-o takes a file name)")
    if not stat.S_ISREG(st.st_mode):
        return None
    if not os.path.islink(given):
        return given
    real = Path(os.path.realpath(given))
    with contextlib.suppress(OSError):
        rst = os.stat(real)
        if (rst.st_dev, rst.st_ino) == (st.st_dev, st.st_ino):
            return real
    return None  # a link whose end has no name we can rename onto (through /proc/PID/fd)


def _open_dir(given: Path, directory: Path) -> int:
    """A descriptor of the target's directory, which must exist (no directories are made up)."""
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        raise UsageError(f"{given}: directory {directory} does not exist") from None
    except OSError as exc:
        raise UsageError(f"{given}: cannot write to {directory} ({exc.strerror})") from None


def _anonymous_file(given: Path, dfd: int) -> int | None:
    """An unnamed file in the directory (Linux O_TMPFILE), or None where there is none."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not os.path.isdir("/proc/self/fd"):  # linked into place through /proc
        return None
    try:
        fd = os.open(".", flag | os.O_WRONLY, 0o666, dir_fd=dfd)  # 0666 minus the umask
    except OSError as exc:
        if exc.errno in _NO_TMPFILE:
            return None
        raise UsageError(f"{given}: cannot write the output there ({exc.strerror})") from None
    return fd


def _commit_anonymous(tmp: Path, final: Path, dfd: int) -> None:
    _before_commit(tmp, final)
    # linkat through /proc/self/fd names the anonymous file; it cannot replace an existing one
    with contextlib.suppress(FileExistsError):
        os.link(tmp, final.name, dst_dir_fd=dfd, follow_symlinks=True)
        return
    hidden = f".{final.name}.{secrets.token_hex(4)}.tmp"
    os.link(tmp, hidden, dst_dir_fd=dfd, follow_symlinks=True)
    try:
        os.replace(hidden, final.name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(hidden, dir_fd=dfd)
        raise


@contextlib.contextmanager
def _named_temp(given: Path, final: Path, suffix: str) -> Iterator[Path]:
    """The portable fallback: a hidden temporary file beside the target, removed when the block
    (the writing and the commit) fails."""
    try:
        fd, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=suffix + ".tmp", dir=final.parent)
    except OSError as exc:
        raise UsageError(f"{given}: cannot write the output there ({exc.strerror})") from None
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def _before_commit(tmp: Path, final: Path) -> None:
    hold_point("output")  # tests signal the process here, the content written but not in place
    # a signal some library swallowed on the way still stops the old file from being replaced
    check_interrupted()
    os.chmod(tmp, _target_mode(final))


def _target_mode(target: Path) -> int:
    """The replaced file's mode, or what a plain open() would give (0666 minus the umask); the
    temporary files are made 0600 (mkstemp) or with a mode we choose here."""
    try:
        return target.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_text_atomic(target: str | Path, text: str) -> None:
    """UTF-8 text to `target` atomically. Reports arrive as valid Unicode (report.data._valid_text);
    any other text holding a lone surrogate (a non-UTF-8 path) is written with it escaped rather
    than failing after the work is done."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8", errors="backslashreplace")


@contextlib.contextmanager
def atomic_dir(target: str | Path, force: bool = False) -> Iterator[Path]:
    """Build a directory in a temporary sibling and rename it into place when complete.

    An existing `target` is kept unless `force`; with `force` it is replaced only after the new one
    is complete.
    """
    target = Path(target)
    if target.exists() and not force:
        raise UsageError(f"{target}: already exists (use --force to replace it)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield tmp
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
