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
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tilescope.errors import MissingComponentError, NoProfileFoundError, TilescopeError, UsageError
from tilescope.io.detect import PATH_MISSING

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


class RemoteInputError(TilescopeError):
    """Why a remote rank was left out, its message naming the URL instead of the local copy."""


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


def _fs(url: str) -> tuple[Any, str]:
    check_url(url)
    # deferred: fsspec (~0.1 s) only for a remote (URL) input
    import fsspec

    try:
        return fsspec.core.url_to_fs(url)
    except Exception as exc:  # fsspec and its filesystems raise anything: one line, never a traceback
        raise fs_error(url, "open", exc) from None


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


def list_inputs(url: str) -> list[str]:
    """The URLs of the rank folders under `url`, sorted; NoProfileFoundError when there are none."""
    fs, root = _fs(url)
    try:
        entries = fs.ls(root, detail=True)
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


def fingerprint(url: str) -> list[tuple[str, Any, Any]]:
    """(name, size, modification time or ETag) of every object under `url`, sorted (a cache key)."""
    fs, root = _fs(url)
    try:
        found = fs.find(root, detail=True)
    except Exception as exc:
        raise fs_error(url, "list", exc) from None
    rows = []
    for name, info in found.items():
        stamp = info.get("mtime") or info.get("LastModified") or info.get("ETag") or info.get("etag")
        rows.append((str(name), info.get("size"), str(stamp)))
    return sorted(rows)


@contextmanager
def stage(url: str) -> Iterator[Path]:
    """A local copy of the folder at `url` (the rank folder keeps its name), removed afterwards."""
    fs, root = _fs(url)
    if url.startswith("file://") and not Path(root).exists():
        raise RemoteMissingError(NoProfileFoundError(url, PATH_MISSING).one_line())
    tmp = Path(tempfile.mkdtemp(prefix="tilescope-rank-"))
    try:
        local = tmp / Path(root.rstrip("/")).name
        try:
            _check_before_copy(url, fs, root, tmp)
            fs.get(root.rstrip("/") + "/", str(local) + "/", recursive=True)
        except Exception as exc:
            raise RemoteInputError(fs_error(url, "copy", exc).one_line()) from None
        yield local
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# Every format tilescope reads is one of these (kernel tables, timelines and summaries, exports):
# a folder without any is no rank, whatever its files' contents
PROFILE_SUFFIXES = (".csv", ".json", ".db")


def _free_bytes(folder: Path) -> int:
    return shutil.disk_usage(folder).free


def _check_before_copy(url: str, fs: Any, root: str, into: Path) -> None:
    """From one listing of the rank folder, before a byte is copied: refuse anything that is
    neither a file nor a folder (a FIFO blocked the copy for ever, a link to /dev/zero filled the
    disk), a folder with no file tilescope could read (`file:///usr/share` copied 716 MB before
    saying so), and more bytes than the staging folder's disk has free."""
    files = 0
    total = 0
    readable = False
    for name, info in fs.find(root, detail=True, withdirs=True).items():
        kind = info.get("type")
        if kind == "directory":
            continue
        if kind != "file":
            what = "a FIFO, device or socket" if kind == "other" else repr(kind)
            raise UsageError(f"{url}: {name}: expected files and folders, found {what} (not copied)")
        files += 1
        total += int(info.get("size") or 0)
        readable = readable or str(name).lower().endswith(PROFILE_SUFFIXES)
    if not readable:
        raise NoProfileFoundError(url, f"{files} file(s), none .csv, .json or .db; nothing copied")
    free = _free_bytes(into)
    if total > free:
        raise UsageError(f"{url}: {total:,} bytes to copy, more than the {free:,} free where ranks are "
                         f"staged ({into.parent}, TMPDIR); nothing copied")


def relabel(value: Any, local: str, url: str) -> Any:
    """`value` (JSON-like) with the local copy's path written as its URL in every string."""
    if isinstance(value, str):
        return value.replace(local, url) if local in value else value
    if isinstance(value, dict):
        return {k: relabel(v, local, url) for k, v in value.items()}
    if isinstance(value, list):
        return [relabel(v, local, url) for v in value]
    return value
