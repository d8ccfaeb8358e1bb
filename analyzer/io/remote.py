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

# Example: "s3://bucket/run", "file:///nfs/run" (a scheme of 2+ letters: not a Windows drive "C:\")
_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")


class RemoteInputError(TilescopeError):
    """Why a remote rank was left out, its message naming the URL instead of the local copy."""


# What a rank's own folder holds at its top (torch_npu, msprof): a URL naming one is one rank
RANK_FOLDER_MARKS = frozenset({"ASCEND_PROFILER_OUTPUT", "mindstudio_profiler_output", "FRAMEWORK"})


def is_url(text: str) -> bool:
    return bool(_URL_RE.match(text))


def _fs(url: str) -> tuple[Any, str]:
    # deferred: fsspec (~0.1 s) only for a remote (URL) input
    import fsspec

    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as exc:  # the protocol's package (s3fs, gcsfs, ...) is not installed
        raise MissingComponentError(f"{url}: {exc}") from None
    except ValueError as exc:  # an unknown protocol
        raise UsageError(f"{url}: {exc}") from None


def list_inputs(url: str) -> list[str]:
    """The URLs of the rank folders under `url`, sorted; NoProfileFoundError when there are none."""
    fs, root = _fs(url)
    try:
        entries = fs.ls(root, detail=True)
    except FileNotFoundError:
        raise NoProfileFoundError(url, "path does not exist") from None
    except OSError as exc:
        raise UsageError(f"{url}: cannot list it ({exc})") from None
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
    found = fs.find(root, detail=True)
    rows = []
    for name, info in found.items():
        stamp = info.get("mtime") or info.get("LastModified") or info.get("ETag") or info.get("etag")
        rows.append((str(name), info.get("size"), str(stamp)))
    return sorted(rows)


@contextmanager
def stage(url: str) -> Iterator[Path]:
    """A local copy of the folder at `url` (the rank folder keeps its name), removed afterwards."""
    fs, root = _fs(url)
    tmp = Path(tempfile.mkdtemp(prefix="tilescope-rank-"))
    try:
        local = tmp / Path(root.rstrip("/")).name
        fs.get(root.rstrip("/") + "/", str(local) + "/", recursive=True)
        yield local
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def relabel(value: Any, local: str, url: str) -> Any:
    """`value` (JSON-like) with the local copy's path written as its URL in every string."""
    if isinstance(value, str):
        return value.replace(local, url) if local in value else value
    if isinstance(value, dict):
        return {k: relabel(v, local, url) for k, v in value.items()}
    if isinstance(value, list):
        return [relabel(v, local, url) for v in value]
    return value
