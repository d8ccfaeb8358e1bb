"""Ranks of a multi-rank run at a URL fsspec understands (`s3://bucket/job64`, `gs://…`,
`file:///nfs/job64`, …): listed by the driver, each staged by the worker that analyses it.

`tilescope analyze URL` lists the URL's sub-folders (one per rank: `*_ascend_pt`, `PROF_*`, …);
each is one job of `tilescope.rankwork`. The worker copies its rank folder into a temporary local
directory (`stage`), analyses it as a local input, writes the URL back into every path the result
carries (`relabel`) and removes the copy, so a rank's files never pass through the driver and the
report names the object store, not a temporary directory. The cache key of a remote rank is the
name, size and modification time (or ETag) of each of its objects (`fingerprint`).

The filesystem's own package must be installed (s3fs for s3://, gcsfs for gs://, …; fsspec names
it when missing) and its credentials set up as fsspec reads them, on the machine that lists and on
every worker.

Every call into the filesystem (opening it, a listing, opening a file, each read of at most
`CHUNK` bytes) has a deadline (`RemoteLimits.timeout_s`, TILESCOPE_URL_TIMEOUT): a silent host is
one line, never a wait as long as the filesystem's own retries. A rank copies at most
`RemoteLimits.max_bytes` (TILESCOPE_URL_MAX_BYTES), checked on the listing before a byte is copied
and again on the bytes really read; a copy that stops for either leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from tilescope.errors import MissingComponentError, NoProfileFoundError, TilescopeError, UsageError
from tilescope.io.detect import PATH_MISSING
from tilescope.text.words import parse_size

# Example: "s3://bucket/run", "file:///nfs/run" (a scheme of 2+ letters: not a Windows drive "C:\")
_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")
# Example: "zip://a.csv::file:///tmp/x.zip" -> "zip", "file" (fsspec chains URLs with "::")
_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# What users of shared storage need, and nothing else: other fsspec protocols read archives
# (zip, tar), send requests to any host named (github, gist, jupyter, webhdfs, http), wait on a
# silent host (ftp) or read inline data (data), none of which holds a run of ranks. fsspec's own
# aliases of these are included (s3a, gcs, abfss).
ALLOWED_PROTOCOLS = ("file", "s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "hdfs")
ALLOWED_TEXT = "file:///path, s3://, gs://, az:// or abfs://, hdfs://"


URL_TIMEOUT_ENV = "TILESCOPE_URL_TIMEOUT"
URL_MAX_BYTES_ENV = "TILESCOPE_URL_MAX_BYTES"
# A remote store answers a listing or a read in well under a second; a minute is room for a slow
# one, and what a silent host costs before it is said (ftp waited 30 s or for ever, s3 retries)
DEFAULT_TIMEOUT_S = 60.0
# The largest real rank folders are a few GB (a 2 GB timeline, a 1 GB kernel table): 32 GiB is
# room for any of them, and stops a wrong URL (a whole dataset) long before a disk is full
DEFAULT_MAX_BYTES = 32 * 2**30
CHUNK = 8 * 2**20  # one read of a copied file, each under the deadline

T = TypeVar("T")


@dataclass(frozen=True)
class RemoteLimits:
    """How long one filesystem call may take, and how many bytes one rank may copy."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    max_bytes: int = DEFAULT_MAX_BYTES


def remote_limits(env: Mapping[str, str] | None = None) -> RemoteLimits:
    """The limits TILESCOPE_URL_TIMEOUT (seconds) and TILESCOPE_URL_MAX_BYTES (bytes, or with a
    K/M/G/T suffix, binary) set, the defaults where unset; UsageError (exit 2) naming the variable
    for a value that is no such number. Read by the driver and carried in each job, so a worker
    started earlier (a fork server, a Dask worker) uses the command's values."""
    env = os.environ if env is None else env
    limits = RemoteLimits()
    raw = env.get(URL_TIMEOUT_ENV, "").strip()
    if raw:
        try:
            seconds = float(raw)
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds > 0):
            raise UsageError(f"{URL_TIMEOUT_ENV} {raw!r}: expected a number of seconds > 0 "
                             f"(default {DEFAULT_TIMEOUT_S:g})")
        limits = RemoteLimits(seconds, limits.max_bytes)
    raw = env.get(URL_MAX_BYTES_ENV, "").strip()
    if raw:
        cap = parse_size(raw) or 0
        if cap < 1:
            raise UsageError(f"{URL_MAX_BYTES_ENV} {raw!r}: expected a number of bytes >= 1, such as "
                             f"500000, 64M or 32G (default {DEFAULT_MAX_BYTES // 2**30}G)")
        limits = RemoteLimits(limits.timeout_s, cap)
    return limits


class RemoteInputError(TilescopeError):
    """Why a remote rank was left out, its message naming the URL instead of the local copy."""


class RemoteStageError(RemoteInputError):
    """A rank left out for how it was reached, not what it holds (a deadline, the byte cap, the free
    disk, a failed read): never cached, so the next run tries again."""


class RemoteMissingError(RemoteInputError):
    """A `file://` rank folder that does not exist where it is staged: on a Dask worker, a sign that
    the worker does not mount the filesystem the URL names (rankwork_dask.workers_cannot_see)."""


# What a rank's own folder holds at its top (torch_npu, msprof): a URL naming one is one rank
RANK_FOLDER_MARKS = frozenset({"ASCEND_PROFILER_OUTPUT", "mindstudio_profiler_output", "FRAMEWORK"})


def is_url(text: str) -> bool:
    return bool(_URL_RE.match(text))


def check_url(url: str) -> None:
    """UsageError unless every protocol of `url` is in ALLOWED_PROTOCOLS, and a file:// URL names
    an absolute path (`file://` alone would be the current directory)."""
    for part in url.split("::"):
        m = _SCHEME_RE.match(part)
        protocol = m.group(1).lower() if m else None
        if protocol not in ALLOWED_PROTOCOLS:
            shown = f"protocol {protocol!r}" if protocol else f"{part!r}"
            raise UsageError(f"{url}: {shown} is not read; a run of ranks is read from {ALLOWED_TEXT} URLs")
        if protocol == "file" and not part[len("file://") :].startswith("/"):
            raise UsageError(f"{url}: expected file:///absolute/path (three slashes)")


def _fs(url: str, limits: RemoteLimits) -> tuple[Any, str]:
    check_url(url)
    # deferred: fsspec (~0.1 s) only for a remote (URL) input
    import fsspec

    try:  # a filesystem may ask a host already (gcsfs its credentials)
        fs, root = bounded(limits, url, "open", fsspec.core.url_to_fs, url)
    except Exception as exc:  # fsspec and its filesystems raise anything: one line, never a traceback
        raise fs_error(url, "open", exc) from None
    return fs, str(root)


def bounded(limits: RemoteLimits, url: str, doing: str, call: Callable[..., T], *args: Any) -> T:
    """`call(*args)`, or RemoteStageError when it has not returned within `limits.timeout_s`. The call
    runs in a daemon thread: one that never returns (a host that accepts and never answers) is
    left behind, blocked on its socket, and ends with the process; fsspec's own timeouts differ
    per filesystem and some retry for minutes."""
    box: dict[str, Any] = {}

    def attempt() -> None:
        try:
            box["value"] = call(*args)
        except BaseException as exc:  # re-raised below, in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=attempt, name="tilescope-url", daemon=True)
    thread.start()
    thread.join(limits.timeout_s)
    if "error" in box:
        raise box["error"]
    if "value" not in box:
        raise RemoteStageError(f"{url}: cannot {doing} it (no answer within {limits.timeout_s:g} s; "
                               f"{URL_TIMEOUT_ENV} sets the deadline)")
    return box["value"]


def fs_error(url: str, doing: str, exc: Exception) -> TilescopeError:
    """One line for whatever a filesystem raised while `doing` `url`: a missing package is a
    component to install (exit 3), a missing path no profile, anything else bad input (exit 2)."""
    if isinstance(exc, TilescopeError):
        return exc
    if isinstance(exc, ImportError):  # the protocol's package (s3fs, gcsfs, ...) is not installed
        return MissingComponentError(f"{url}: {exc}")
    if isinstance(exc, FileNotFoundError):
        return NoProfileFoundError(url, PATH_MISSING)
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    detail = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return UsageError(f"{url}: cannot {doing} it ({detail})")


def list_inputs(url: str, limits: RemoteLimits | None = None) -> list[str]:
    """The URLs of the rank folders under `url`, sorted; NoProfileFoundError when there are none."""
    limits = remote_limits() if limits is None else limits
    fs, root = _fs(url, limits)
    try:
        entries = bounded(limits, url, "list", fs.ls, root, True)
    except Exception as exc:
        raise fs_error(url, "list", exc) from None
    names = {str(e["name"]).rstrip("/").rsplit("/", 1)[-1] for e in entries}
    if names & RANK_FOLDER_MARKS or any(n.startswith("profiler_info") for n in names):
        return [url]  # the URL is one rank's folder itself
    dirs = sorted(str(e["name"]) for e in entries if e.get("type") == "directory")
    if not dirs:
        raise NoProfileFoundError(url, "no rank folders under it (one sub-folder per rank expected)")
    return [_unstrip(fs, d) for d in dirs]


def _unstrip(fs: Any, path: str) -> str:
    return str(fs.unstrip_protocol(path))


def _find(fs: Any, root: str, withdirs: bool) -> dict[str, Any]:
    return dict(fs.find(root, detail=True, withdirs=withdirs))


def fingerprint(url: str, limits: RemoteLimits | None = None) -> list[tuple[str, Any, Any]]:
    """(name, size, modification time or ETag) of every object under `url`, sorted (a cache key)."""
    limits = remote_limits() if limits is None else limits
    fs, root = _fs(url, limits)
    try:
        found = bounded(limits, url, "list", _find, fs, root, False)
    except Exception as exc:
        raise fs_error(url, "list", exc) from None
    rows = []
    for name, info in found.items():
        stamp = info.get("mtime") or info.get("LastModified") or info.get("ETag") or info.get("etag")
        rows.append((str(name), info.get("size"), str(stamp)))
    return sorted(rows)


@contextmanager
def stage(url: str, limits: RemoteLimits | None = None) -> Iterator[Path]:
    """A local copy of the folder at `url` (the rank folder keeps its name), removed afterwards,
    also when the copy stops part way (a deadline, the byte cap, a read error)."""
    limits = remote_limits() if limits is None else limits
    fs, root = _fs(url, limits)  # a missing package: exit 3 for the run; past the deadline: this rank
    if url.startswith("file://") and not Path(root).exists():
        raise RemoteMissingError(NoProfileFoundError(url, PATH_MISSING).one_line())
    tmp = Path(tempfile.mkdtemp(prefix="tilescope-rank-"))
    try:
        local = tmp / PurePosixPath(root.rstrip("/")).name
        try:
            files = _check_before_copy(url, fs, root, tmp, limits)
            _copy(url, fs, root, files, local, limits)
        except RemoteInputError:
            raise
        except (NoProfileFoundError, UsageError) as exc:  # what the rank holds: said as such
            raise RemoteInputError(exc.one_line()) from None
        except Exception as exc:
            raise RemoteStageError(fs_error(url, "copy", exc).one_line()) from None
        yield local
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _copy(url: str, fs: Any, root: str, files: list[str], local: Path, limits: RemoteLimits) -> None:
    """Each of `files` (as listed under `root`) into `local`, one bounded read at a time, stopping
    at `limits.max_bytes` of bytes really read (a listing may understate a size)."""
    top = root.rstrip("/")
    copied = 0
    local.mkdir()
    for name in files:
        rel = PurePosixPath(name[len(top):].lstrip("/"))
        if not name.startswith(top + "/") or ".." in rel.parts or not rel.parts:  # a listing's own word
            raise UsageError(f"{url}: {name}: listed outside the rank folder (not copied)")
        dest = local.joinpath(*rel.parts)
        dest.parent.mkdir(parents=True, exist_ok=True)
        src = bounded(limits, url, "read", fs.open, name, "rb")
        try:
            with open(dest, "xb") as out:
                while chunk := bounded(limits, url, "read", src.read, CHUNK):
                    copied += len(chunk)
                    if copied > limits.max_bytes:
                        raise RemoteStageError(_over_cap(url, limits, "while copying; nothing kept"))
                    out.write(chunk)
        finally:
            with contextlib.suppress(Exception):
                bounded(limits, url, "read", src.close)


def _over_cap(url: str, limits: RemoteLimits, found: str) -> str:
    return (f"{url}: more than the {limits.max_bytes:,} bytes a rank may copy ({URL_MAX_BYTES_ENV}) "
            f"{found}")


# Every format tilescope reads is one of these (kernel tables, timelines and summaries, exports):
# a folder without any is no rank, whatever its files' contents
PROFILE_SUFFIXES = (".csv", ".json", ".db")


def _free_bytes(folder: Path) -> int:
    return shutil.disk_usage(folder).free


def _check_before_copy(url: str, fs: Any, root: str, into: Path, limits: RemoteLimits) -> list[str]:
    """From one listing of the rank folder, before a byte is copied: refuse anything that is
    neither a file nor a folder (a FIFO blocked the copy for ever, a link to /dev/zero filled the
    disk), a folder with no file tilescope could read (`file:///usr/share` copied 716 MB before
    saying so), more bytes than a rank may copy (`limits.max_bytes`) and more than the staging
    folder's disk has free. Returns the files to copy."""
    files: list[str] = []
    total = 0
    readable = False
    for name, info in sorted(bounded(limits, url, "list", _find, fs, root, True).items()):
        kind = info.get("type")
        if kind == "directory":
            continue
        if kind != "file":
            what = "a FIFO, device or socket" if kind == "other" else repr(kind)
            raise UsageError(f"{url}: {name}: expected files and folders, found {what} (not copied)")
        files.append(str(name))
        total += int(info.get("size") or 0)
        readable = readable or str(name).lower().endswith(PROFILE_SUFFIXES)
    if not readable:
        raise NoProfileFoundError(url, f"{len(files)} file(s), none .csv, .json or .db; nothing copied")
    if total > limits.max_bytes:
        raise RemoteStageError(_over_cap(url, limits, f"in its files, {total:,} listed; nothing copied"))
    free = _free_bytes(into)
    if total > free:
        raise RemoteStageError(f"{url}: {total:,} bytes to copy, more than the {free:,} free where ranks "
                               f"are staged ({into.parent}, TMPDIR); nothing copied")
    return files


def relabel(value: Any, local: str, url: str) -> Any:
    """`value` (JSON-like) with the local copy's path written as its URL in every string."""
    if isinstance(value, str):
        return value.replace(local, url) if local in value else value
    if isinstance(value, dict):
        return {k: relabel(v, local, url) for k, v in value.items()}
    if isinstance(value, list):
        return [relabel(v, local, url) for v in value]
    return value
