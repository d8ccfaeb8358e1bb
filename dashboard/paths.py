"""Root confinement: the only way a browser request can name a file on the server.

The dashboard reads profiles given on the command line and profiles found under the allowed
`--root` directories. A request never carries a path to open; it carries a *key* (a root index and
a path relative to that root) which is resolved here and rejected unless the real path — after
URL-decoding, `..` collapsing and symlink resolution — stays inside the roots. The same check
(`RootSet.check`) guards every other file opened on a browser's behalf: the whole tree of a profile
before the loaders read it (`RootSet.check_tree`), and the IR and kernel-source files a bundle's
`ir.json` names, because a profile is as untrusted as a request. Containment is always judged on
the path with its links followed, against the served directories, never against a link's target.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from tilescope.errors import UsageError
from tilescope.io.detect import MSPROF_OUT, TORCH_OUT

# File names that mark a directory as something `tilescope.io.load` can read (design.md §1;
# ascend-profiler-formats.md §2). Detection proper is the loader's job: this only builds the
# picker list cheaply, without parsing anything.
PROFILE_MARKERS = (
    "manifest.json",
    "kernel_details.csv",
    "OpBasicInfo.csv",
    "trace_view.json",
    "profiler_info.json",
)
PROFILE_GLOB_MARKERS = ("op_summary_*.csv", "msprof_*.json", "ascend_pytorch_profiler_*.db", "msprof_*.db")
MAX_SCAN_DEPTH = 6
MAX_PROFILES_LISTED = 500
MAX_RUNS_LISTED = 100  # multi-rank runs the Ranks tab's run picker lists from the roots
# The names by which the loader (tilescope.io.detect, tilescope.io.load.resolve_ranks) tells the
# inputs of a multi-rank run apart; discovery uses names only, never file contents.
# Example: "device_3" (an msprof PROF_'s per-device folder)
DEVICE_DIR_RE = re.compile(r"^device_\d+$")
# Example: "ascend_pytorch_profiler_3.db" (tilescope.io.sqlite.RANK_DB_RE)
RANK_DB_RE = re.compile(r"^ascend_pytorch_profiler_\d+\.db$")
# Example: "rank_3", "test_rank_1", "RANK7" (tilescope.io.device.RANK_NAME_RE)
RANK_NAME_RE = re.compile(r"(?:^|[^a-z0-9])rank[_-]?\d+(?![0-9])", re.IGNORECASE)
KERNEL_TABLE_NAMES = ("kernel_details.csv",)
KERNEL_TABLE_GLOBS = ("op_summary_*.csv",)
MAX_TREE_ENTRIES = 100_000  # files and directories checked under one profile before it is refused


class PathRejected(UsageError):
    """A requested path escapes its root (or is malformed); the message never echoes file contents."""


@dataclass(frozen=True)
class RootSet:
    """The directories the dashboard may read from, resolved (links followed) once.

    `roots` are the `--root` directories: the picker lists their profiles and a key addresses them
    by index. `given` are the paths named on the command line (or Profile objects handed to
    `create_app`): readable, but not listed. Every file opened on a browser's behalf is checked
    against both by `check`, after its links are followed.
    """

    roots: tuple[Path, ...]
    given: tuple[Path, ...] = ()

    @staticmethod
    def of(dirs: Iterable[str | Path]) -> RootSet:
        resolved: list[Path] = []
        for d in dirs:
            p = Path(d).expanduser().resolve(strict=False)
            if not p.is_dir():
                raise UsageError(f"--root {d}: not a directory")
            resolved.append(p)
        return RootSet(tuple(resolved))

    def with_given(self, *paths: Path) -> RootSet:
        """This set plus `paths` (resolved), e.g. a profile named on the command line."""
        added = (p.resolve() for p in paths)
        return RootSet(self.roots, tuple(dict.fromkeys((*self.given, *added))))

    @property
    def allowed(self) -> tuple[Path, ...]:
        return self.roots + self.given

    def check(self, path: Path, shown: str | None = None) -> Path:
        """The one confinement check: `path` with every link followed, when that real path exists
        and lies inside an allowed root; PathRejected otherwise.

        The containment test runs on the resolved path, never on the link or on its directory's
        resolution, so a link anywhere on the way (a bundle's `kernel/` pointing at /etc) is judged
        by where it finally leads.
        """
        label = shown or str(path)
        try:
            real = path.resolve(strict=True)
        except RuntimeError:  # a link loop (Python 3.11 raises this rather than OSError)
            raise PathRejected(f"{label}: link loop") from None
        except OSError:
            raise PathRejected(f"{label}: no such file or directory") from None
        if not any(is_within(real, root) for root in self.allowed):
            raise PathRejected(f"{label}: leads outside the directories being served")
        return real

    def check_tree(self, top: Path, shown: str) -> None:
        """Everything under `top` that a loader might open stays inside the allowed roots.

        The loaders (tilescope.io) open whatever a profile directory holds, through pyarrow, DuckDB
        and sqlite, so the check runs before them, over the whole tree: every link is followed and
        judged by `check`; special files (FIFOs, devices, sockets), which would block or never end
        a read, are refused; linked directories inside the roots are walked once each.
        """
        start = self.check(top, shown)
        seen = {start}
        pending = [(start, shown)]
        count = 0
        while pending:
            real, label = pending.pop()
            if not real.is_dir():
                _require_plain(real, label)
                continue
            try:
                entries = list(os.scandir(real))
            except OSError as exc:
                raise PathRejected(f"{label}: cannot be listed ({exc.strerror or exc})") from None
            count += len(entries)
            if count > MAX_TREE_ENTRIES:
                raise PathRejected(f"{shown}: holds more than {MAX_TREE_ENTRIES:,} files; not opened")
            for entry in entries:
                name = f"{label}/{entry.name}"
                target = self.check(Path(entry.path), name) if entry.is_symlink() else Path(entry.path)
                if target.is_dir():
                    if target not in seen:
                        seen.add(target)
                        pending.append((target, name))
                else:
                    _require_plain(target, name)

    def resolve_key(self, key: object) -> Path:
        """`"<root index>:<relative path>"` → a real path inside the roots, or PathRejected."""
        if not isinstance(key, str):
            raise PathRejected("unknown profile key")
        index_text, sep, rel = key.partition(":")
        # isascii: '²'.isdigit() is true but int('²') fails
        # and short: int() of a 5,000-digit text raises ValueError (Python's digit limit), a 500
        index_ok = index_text.isascii() and index_text.isdigit() and len(index_text) <= 6
        if not sep or not index_ok or int(index_text) >= len(self.roots):
            raise PathRejected("unknown profile key")
        return confine(self.roots[int(index_text)], rel, self)

    def key_for(self, path: Path) -> str | None:
        """The key a picker uses for a path under one of the roots (None when outside all)."""
        real = path.resolve()
        for i, root in enumerate(self.roots):
            if is_within(real, root):
                return f"{i}:{real.relative_to(root).as_posix() or '.'}"
        return None


def _require_plain(path: Path, shown: str) -> None:
    """A regular file (a FIFO or a device would hang or never end the reader that opens it)."""
    if not path.is_file():
        raise PathRejected(f"{shown}: not a regular file or directory")


def is_within(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def relative_name(requested: str) -> str:
    """An untrusted relative name (a key's path, a file named in ir.json), checked as text.

    Decoding is repeated until stable so that `%252e%252e` cannot smuggle a `..` past one decode;
    absolute paths, NUL bytes and backslash separators are refused outright rather than
    normalised, since a legitimate name never contains them.
    """
    text = requested
    for _ in range(4):
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    else:
        raise PathRejected("path is encoded too many times")
    if "\x00" in text or "\\" in text:
        raise PathRejected("path contains a forbidden character")
    if text.startswith(("/", "~")) or os.path.isabs(text) or (len(text) > 1 and text[1] == ":"):
        raise PathRejected("absolute paths are not accepted")
    if any(part == ".." for part in Path(text).parts):
        raise PathRejected("'..' is not accepted")
    return text


def confine(base: Path, requested: str, allowed: RootSet) -> Path:
    """`requested` (untrusted text) under `base`, as a real path inside `allowed`; else PathRejected.

    The text is checked first (`relative_name`), then the joined path goes through the one
    containment check, `RootSet.check`, with its links followed.
    """
    text = relative_name(requested)
    return allowed.check(base / text, text or ".")


def looks_like_profile(directory: Path) -> bool:
    if any((directory / m).exists() for m in PROFILE_MARKERS):
        return True
    return any(next(directory.glob(g), None) is not None for g in PROFILE_GLOB_MARKERS)


def discover_profiles(roots: RootSet, limit: int = MAX_PROFILES_LISTED) -> list[tuple[str, str]]:
    """(key, label) for each profile directory under the roots, without following symlinks out.

    A directory that is a profile is not descended into (its subdirectories are parts of it), and
    symlinked directories are skipped so the scan itself cannot wander outside a root.
    """
    found: list[tuple[str, str]] = []
    for index, root in enumerate(roots.roots):
        stack: list[tuple[Path, int]] = [(root, 0)]
        while stack and len(found) < limit:
            directory, depth = stack.pop()
            if looks_like_profile(directory):
                rel = directory.relative_to(root).as_posix()
                label = f"{root.name}/{rel}" if rel != "." else root.name
                found.append((f"{index}:{rel}", label))
                continue
            if depth >= MAX_SCAN_DEPTH:
                continue
            try:
                children = sorted(os.scandir(directory), key=lambda e: e.name, reverse=True)
            except OSError:
                continue
            for entry in children:
                if entry.is_dir(follow_symlinks=False) and not entry.name.startswith("."):
                    stack.append((Path(entry.path), depth + 1))
    return sorted(found, key=lambda kv: kv[1])


# --- multi-rank runs ------------------------------------------------------------------------------


def _is_dir(path: Path) -> bool:
    """A real directory, not a link to one (lstat: the scan never follows a link)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _listing(directory: Path) -> tuple[list[str], list[str]]:
    """The names of the real subdirectories and of the regular files directly in `directory`
    (links of either kind left out); empty when it cannot be listed."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return [], []
    dirs = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
    files = sorted(e.name for e in entries if e.is_file(follow_symlinks=False))
    return dirs, files


def _devices(directory: Path) -> int:
    """How many `device_N` folders an msprof PROF_ holds (the loader makes a rank of each)."""
    return sum(1 for name in _listing(directory)[0] if DEVICE_DIR_RE.match(name))


def _is_torch_root(directory: Path) -> bool:
    return directory.name.endswith("_ascend_pt") or _is_dir(directory / TORCH_OUT)


def _holds_kernel_table(directory: Path) -> bool:
    files = _listing(directory)[1]
    return any(n in KERNEL_TABLE_NAMES for n in files) or any(
        Path(n).match(g) for n in files for g in KERNEL_TABLE_GLOBS
    )


def rank_inputs(directory: Path) -> tuple[list[int], bool]:
    """The ranks of each input the loader would find under `directory`, and whether it is one
    profile itself, judged from names and folder layout only, the way tilescope.io.detect walks a
    directory:

    - a torch_npu rank folder (`*_ascend_pt`, or one holding ASCEND_PROFILER_OUTPUT), a run bundle,
      an `OPPROF_*`, or a profiler's own output folder is one profile of one rank;
    - an msprof `PROF_*` is one profile of a rank per `device_N` folder (split_devices);
    - otherwise its inputs are its subfolders that are rank folders, PROF_s and OPPROF_s, else its
      `ascend_pytorch_profiler_N.db` files, else its subfolders whose name spells a rank (`rank_3`,
      resolve_ranks) and that hold a kernel table.

    Empty when none of these: the loader might still find something by content (a renamed CSV),
    which the listing does not sniff for; any path under a root can still be opened by key.
    """
    dirs, files = _listing(directory)
    bundle = "manifest.json" in files and ("profile" in dirs or "ir" in dirs)
    if bundle or directory.name in (TORCH_OUT, MSPROF_OUT) or directory.name.startswith("OPPROF_"):
        return [1], True
    if _is_torch_root(directory):
        return [1], True
    if directory.name.startswith("PROF_") or MSPROF_OUT in dirs:
        return [max(1, _devices(directory))], True
    inputs: list[int] = []
    for name in dirs:
        child = directory / name
        if _is_torch_root(child) or name.startswith("OPPROF_"):
            inputs.append(1)
        elif name.startswith("PROF_"):
            inputs.append(max(1, _devices(child)))
    if inputs:
        return inputs, False
    inputs = [1 for name in files if RANK_DB_RE.match(name)]
    if inputs or any(n in KERNEL_TABLE_NAMES for n in files):
        return inputs, False  # a kernel table of its own: the loader does not look into subfolders
    return [1 for n in dirs if RANK_NAME_RE.search(n) and _holds_kernel_table(directory / n)], False


def discover_runs(roots: RootSet, limit: int = MAX_RUNS_LISTED) -> list[tuple[str, str, int]]:
    """(key, label, ranks) for each directory under the roots that holds two or more ranks
    (`rank_inputs`), found without reading any file and without following a link.

    Unlike `discover_profiles` the scan goes on below a directory whose files mark a profile (the
    bundled 8-rank sample keeps a manifest.json beside its rank folders), but not into a directory
    that is one profile (a rank folder, a PROF_): its subfolders are parts of it. A folder whose
    ranks all come from one PROF_ is not listed besides that PROF_ (the same ranks twice).
    """
    found: list[tuple[str, str, int]] = []
    for index, root in enumerate(roots.roots):
        stack: list[tuple[Path, int]] = [(root, 0)]
        while stack and len(found) < limit:
            directory, depth = stack.pop()
            inputs, single = rank_inputs(directory)
            if sum(inputs) >= 2 and (single or len(inputs) >= 2):
                rel = directory.relative_to(root).as_posix()
                label = f"{root.name}/{rel}" if rel != "." else root.name
                found.append((f"{index}:{rel}", label, sum(inputs)))
            if single or depth >= MAX_SCAN_DEPTH:
                continue
            for name in reversed(_listing(directory)[0]):
                if not name.startswith("."):
                    stack.append((directory / name, depth + 1))
    return sorted(found, key=lambda run: run[1])
