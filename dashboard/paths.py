"""Root confinement: the only way a browser request can name a file on the server.

The dashboard reads profiles given on the command line and profiles found under the allowed
`--root` directories. A request never carries a path to open; it carries a *key* (a root index and
a path relative to that root) which is resolved here and rejected unless the real path — after
URL-decoding, `..` collapsing and symlink resolution — stays inside the root. IR files named inside
a bundle's `ir.json` go through the same check against the bundle directory, because that file is
as untrusted as anything else the profile contains.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
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


class PathRejected(UsageError):
    """A requested path escapes its root (or is malformed); the message never echoes file contents."""


@dataclass(frozen=True)
class RootSet:
    """The allowed directories, resolved once at start-up."""

    roots: tuple[Path, ...]

    @staticmethod
    def of(dirs: Iterable[str | Path]) -> RootSet:
        resolved: list[Path] = []
        for d in dirs:
            p = Path(d).expanduser().resolve(strict=False)
            if not p.is_dir():
                raise UsageError(f"--root {d}: not a directory")
            resolved.append(p)
        return RootSet(tuple(resolved))

    def resolve_key(self, key: str) -> Path:
        """`"<root index>:<relative path>"` → a real path inside that root, or PathRejected."""
        index_text, sep, rel = key.partition(":")
        if not sep or not index_text.isdigit() or int(index_text) >= len(self.roots):
            raise PathRejected("unknown profile key")
        return confine(self.roots[int(index_text)], rel)

    def key_for(self, path: Path) -> str | None:
        """The key a picker uses for a path under one of the roots (None when outside all)."""
        real = path.resolve()
        for i, root in enumerate(self.roots):
            if is_within(real, root):
                return f"{i}:{real.relative_to(root).as_posix() or '.'}"
        return None


def is_within(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def confine(root: Path, requested: str) -> Path:
    """Resolve `requested` relative to `root`; raise PathRejected when it leaves the root.

    Decoding is repeated until stable so that `%252e%252e` cannot smuggle a `..` past one decode;
    absolute paths, NUL bytes and backslash separators are refused outright rather than
    normalised, since a legitimate picker key never contains them.
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
    real = (root / text).resolve(strict=False)
    if not is_within(real, root.resolve()):
        raise PathRejected("path leaves the allowed root")
    if not real.exists():
        raise PathRejected("no such profile under the root")
    return real


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


def confine_all(root: Path, names: Sequence[str]) -> list[Path]:
    """Confine several names under one root, dropping (not raising on) those that escape."""
    out: list[Path] = []
    for name in names:
        try:
            out.append(confine(root, name))
        except PathRejected:
            continue
    return out
