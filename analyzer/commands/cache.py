"""`tilescope cache info|prune|clear`: the per-rank summary cache of multi-rank analyses
(analyzer/rank_cache.py) and its size limit (analyzer/rank_cache_prune.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from tilescope.errors import UsageError
from tilescope.rank_cache import RankCache, default_cache_dir
from tilescope.rank_cache_prune import (
    SIZE_EXPECTED,
    PruneResult,
    Scan,
    limit_source,
    max_cache_bytes,
    parse_size,
    refuse_foreign,
)
from tilescope.text.escape import terminal_text
from tilescope.text.words import count_text

CacheDir = Annotated[
    Path | None,
    typer.Option("--cache-dir", metavar="DIR",
                 help="The cache (default: $TILESCOPE_CACHE_DIR or ~/.cache/tilescope/ranks)."),
]


def size_text(n: int) -> str:
    """`2.0 GiB`, `812.5 KiB`, `512 B`: powers of 1024, as TILESCOPE_CACHE_MAX_SIZE reads them."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} B"


def _when(ns: int | None) -> str | None:
    if ns is None:
        return None
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cache_info(found: Scan, exists: bool) -> dict[str, Any]:
    """JSON-serialisable description of one cache directory, as scanned."""
    used = [e.used_ns for e in found.entries]
    return {
        "directory": str(found.root),
        "exists": exists,
        "entries": len(found.entries),
        "unreachable_entries": sum(not e.reachable for e in found.entries),
        "bytes": found.bytes,
        "limit_bytes": max_cache_bytes(),
        "limit_source": limit_source(),
        "oldest_use": _when(min(used) if used else None),
        "newest_use": _when(max(used) if used else None),
        "temporary": len(found.temps),
        "temporary_bytes": sum(t.bytes for t in found.temps),
        "other": [str(p.relative_to(found.root)) for p in found.foreign],
    }


def _print_info(info: dict[str, Any]) -> None:
    # deferred: rich.text (and text.terminal) only for terminal output; `tilescope --help` imports every
    #   command module
    from rich.text import Text

    from tilescope.text.terminal import console

    c = console(None)

    def line(text: str, style: str = "") -> None:
        # the directory and foreign names are the user's: Text (never markup), control characters escaped
        c.print(Text(terminal_text(text), style=style), no_wrap=True, crop=False)

    line(info["directory"], "bold")
    if not info["exists"]:
        line("  no cache there yet: nothing has been written")
    stale = info["unreachable_entries"]
    stale_text = f" ({stale:,} unreachable: written by another tilescope or cache format)" if stale else ""
    line(f"  entries     {info['entries']:,}{stale_text}")
    line(f"  size        {size_text(info['bytes'])} ({info['bytes']:,} bytes) on disk")
    nothing = ": analyses store nothing" if info["limit_bytes"] == 0 else ""
    line(f"  limit       {size_text(info['limit_bytes'])} ({info['limit_source']}{nothing})")
    if info["entries"]:
        line(f"  last used   oldest {info['oldest_use']}, newest {info['newest_use']}")
    if info["temporary"]:
        line(f"  temporary   {count_text(info['temporary'], 'directory', 'directories')}, "
             f"{size_text(info['temporary_bytes'])}: being written, or abandoned (removed by a prune "
             "after an hour)")
    if info["other"]:
        line(f"  other       {count_text(len(info['other']), 'name')} tilescope does not write there, "
             f"left alone (first: {info['other'][0]}); `tilescope cache clear` refuses this directory")


def _removed_line(result: PruneResult, root: Path) -> str:
    stale = sum(not e.reachable for e in result.removed)
    stale_text = f", {stale:,} of them unreachable" if stale else ""
    n = result.temps_removed
    temps_text = f" and {n:,} abandoned temporary {'directory' if n == 1 else 'directories'}" if n else ""
    return (f"{terminal_text(root)}: removed {count_text(len(result.removed), 'entry', 'entries')} "
            f"({size_text(result.removed_bytes)}{stale_text}){temps_text}")


def _cache(cache_dir: Path | None) -> RankCache:
    root = cache_dir or default_cache_dir()
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root}: not a directory")
    return RankCache(root)


def info_command(
    cache_dir: CacheDir = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="text | json")] = "text",
) -> None:
    """Where the cache is, its entries and bytes on disk, its size limit, its oldest and newest use.

    Example: tilescope cache info --format json
    """
    if fmt not in ("text", "json"):
        raise UsageError(f"--format must be text or json, not {fmt!r}")
    max_cache_bytes()  # a bad TILESCOPE_CACHE_MAX_SIZE: one line, exit 2, before anything is read
    cache = _cache(cache_dir)
    info = cache_info(cache.scan(), cache.root.is_dir())
    if fmt == "json":
        typer.echo(json.dumps(info, indent=2, ensure_ascii=False))
    else:
        _print_info(info)


def prune_command(
    max_size: Annotated[
        str | None,
        typer.Option("--max-size", metavar="SIZE", help="Prune down to SIZE (500M, 2G, 0: everything; "
                     "default: $TILESCOPE_CACHE_MAX_SIZE or 2G)."),
    ] = None,
    cache_dir: CacheDir = None,
) -> None:
    """Remove entries until the cache fits: unreachable ones first, then the least recently used.

    Unreachable entries were written by another tilescope or cache format: no key finds them.
    Temporary directories abandoned for over an hour (a killed writer) go too.
    `tilescope analyze` does this by itself after a multi-rank analysis when the cache is over its
    limit (down to 90 % of it).

    Example: tilescope cache prune --max-size 500M
    """
    if max_size is None:
        limit = max_cache_bytes()
    else:
        parsed = parse_size(max_size)
        if parsed is None:
            raise UsageError(f"--max-size {max_size!r}: expected {SIZE_EXPECTED}")
        limit = parsed
    cache = _cache(cache_dir)
    refuse_foreign(cache.scan())  # before the ledger is created in a directory that is not a cache
    result = cache.prune(limit)
    left = 0 if result.left is None else len(result.left.entries) - len(result.removed)
    typer.echo(f"{_removed_line(result, cache.root)}; {count_text(left, 'entry', 'entries')}, "
               f"{size_text(result.left_bytes)} left (limit {size_text(limit)})")


def clear_command(cache_dir: CacheDir = None) -> None:
    """Remove every cache entry.

    A directory holding anything tilescope does not write there is refused (exit 2), so that a
    mistaken --cache-dir removes nothing. An entry being written meanwhile is left to finish.

    Example: tilescope cache clear --cache-dir /scratch/tilescope-cache
    """
    cache = _cache(cache_dir)
    result = cache.clear()
    writing = 0 if result.left is None else len(result.left.temps) - result.temps_removed
    kept = f"; {count_text(writing, 'entry', 'entries')} being written left alone" if writing else ""
    typer.echo(f"{_removed_line(result, cache.root)}{kept}")


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        name="cache",
        help="The per-rank summary cache of multi-rank analyses: info, prune, clear.",
        no_args_is_help=True,
    )
    group.command("info")(info_command)
    group.command("prune")(prune_command)
    group.command("clear")(clear_command)
    app.add_typer(group, name="cache")
