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
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from analyzer.errors import UsageError

# File names that mark a directory as something `analyzer.io.load` can read (design.md §1;
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

        The loaders (analyzer.io) open whatever a profile directory holds, through pyarrow, DuckDB
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
        index_ok = index_text.isascii() and index_text.isdigit()
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
