"""Seeded damage and forgeries of the rank cache (issue #27 "Cache"; docs/reliability.md §8, §9).

Each case copies a cache written by `analyze` of a real 2-rank run (../shared/traces/real/
gpt3_2rank_memoryl0; a generated one where that is missing), changes one entry, and runs
`analyze -f json` and `-f text` on the run with that cache. Two kinds of change, two bars:

- **damaged** (bytes flipped, the file cut, a Parquet table swapped for another entry's, a file
  replaced by a link to the same bytes, `unit.json` written as `[]` without its seal): the entry
  must not be read — the report is byte for byte the one of `--no-cache` (its time stamp aside),
  the exit code the same;
- **forged** by someone who knows the format and seals the entry again (a hostile value in
  `unit.json`, a Parquet column of the right type holding hostile values, or of the wrong type):
  the trust model does not defend a forger with the user's account (§9: the checksums are
  integrity checks, not signatures), so a forged value may be reported, even outside its range
  (counted as `forged_value_shown`); the bar is that of every input: no traceback, no hang, a
  known exit code, one error line, valid JSON. A column of the wrong type must not be read (the
  shape check), as a damaged entry.

    .venv/bin/python -m tests.fuzz.cache --cases 200 --seed 1
"""

from __future__ import annotations

import argparse
import io
import json
import random
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.fuzz.oracle import FAILURES, judge, run_in_process

REPO = Path(__file__).resolve().parents[2]
REAL_RUN = REPO.parent / "shared" / "traces" / "real" / "gpt3_2rank_memoryl0"
# Example: "generated_at": "2026-12-06T23:25:41+00:00" (the one field two runs differ in)
_STAMP = re.compile(r'"generated_at": "[^"]*"')
HOSTILE_JSON: tuple[Any, ...] = (
    -1,
    -1e308,
    1e308,
    2**70,
    0,
    "",
    "x" * 70_000,
    None,
    [],
    {},
    True,
    "nan",
    1.5,
    "\x1b[2J",
    "<script>alert(1)</script>",
    "[link=https://evil.example]c[/link]",
)
HOSTILE_FLOATS = (-1.0, float("nan"), float("inf"), float("-inf"), 1e308, -1e308, 0.0)
HOSTILE_INTS = (-1, 2**62, -(2**62), 0)
HOSTILE_TEXT = ("", "x" * 70_000, "\x1b[2J", "<b>x</b>", None)


def _leaves(x: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(x, dict):
        return [p for k, v in x.items() for p in _leaves(v, (*path, k))]
    if isinstance(x, list):
        return [p for i, v in enumerate(x) for p in _leaves(v, (*path, i))]
    return [path]


def _set(x: Any, path: tuple[Any, ...], value: Any) -> None:
    for step in path[:-1]:
        x = x[step]
    x[path[-1]] = value


def _unsealed(meta: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(meta.read_bytes())
    data.pop("sum")
    return data


def _reseal(meta: Path, data: dict[str, Any]) -> None:
    import msgspec

    from tilescope.rank_cache_trust import seal

    meta.write_bytes(seal(msgspec.json.encode(data)))


def damage(rng: random.Random, entry: Path, other: Path) -> str:
    """Change `entry` without sealing it again: it must not be read."""
    files = [*sorted(entry.glob("*.parquet")), entry / "unit.json"]
    target = rng.choice(files)
    how = rng.choice(("flip", "cut", "swap", "link", "list"))
    if how == "swap" and target.suffix == ".parquet" and (other / target.name).exists():
        shutil.copyfile(other / target.name, target)  # another rank's table, whole and valid
        return f"{target.name} swapped for the other entry's"
    if how == "link":
        moved = entry.parent / f".{entry.name}-{target.name}"
        target.rename(moved)
        target.symlink_to(moved)
        return f"{target.name} is a link to its own bytes"
    if how == "list" and target.name == "unit.json":
        target.write_bytes(b"[]")
        return "unit.json is []"
    data = bytearray(target.read_bytes())
    if how == "cut":
        at = rng.randrange(len(data))
        target.write_bytes(bytes(data[:at]))
        return f"{target.name} cut at {at}"
    at = rng.randrange(len(data))
    data[at] ^= 1 << rng.randrange(8)
    target.write_bytes(bytes(data))
    return f"{target.name} bit flipped at byte {at}"


def forge(rng: random.Random, entry: Path) -> tuple[str, bool]:
    """Change `entry` and seal it again, as someone who knows the format would; (what was done,
    whether the entry's shape check must refuse it: a column of the wrong type)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tilescope.rank_cache_trust import sha256

    meta = entry / "unit.json"
    data = _unsealed(meta)
    refused = False
    if rng.random() < 0.5:
        paths = [p for p in _leaves(data) if p and p[0] not in ("format", "code", "sha256")]
        path, value = rng.choice(paths), rng.choice(HOSTILE_JSON)
        _set(data, path, value)
        what = f"unit.json {'/'.join(map(str, path))} = {str(value)[:40]!r}"
    else:
        table_file = rng.choice(sorted(entry.glob("*.parquet")))
        table = pq.read_table(table_file)
        if table.num_rows == 0:
            return "an empty table left alone", False
        column = rng.choice(table.column_names)
        kind = table.schema.field(column).type
        n = table.num_rows
        numeric = pa.types.is_floating(kind) or pa.types.is_integer(kind)
        if rng.random() < 0.2:  # a column of the wrong type: the shape check must refuse it
            array = pa.array(["1"] * n) if numeric else pa.array([1.5] * n)
            refused = True
        elif pa.types.is_floating(kind):
            array = pa.array([rng.choice(HOSTILE_FLOATS)] * n, kind)
        elif pa.types.is_integer(kind):
            array = pa.array([rng.choice(HOSTILE_INTS)] * n, kind)
        else:
            array = pa.array([rng.choice(HOSTILE_TEXT)] * n, pa.large_string())
        table = table.set_column(table.column_names.index(column), pa.field(column, array.type), array)
        buf = io.BytesIO()
        pq.write_table(table, buf)
        table_file.write_bytes(buf.getvalue())
        name = table_file.stem.split("-", 1)[-1]
        if name in data.get("sha256", {}):
            data["sha256"][name] = sha256(buf.getvalue())
        what = f"{table_file.name} column {column} = {array[0].as_py()!r:.40}"
    _reseal(meta, data)
    return what, refused


def forge_at(entry: Path, path: tuple[Any, ...], value: Any) -> None:
    """`unit.json` of `entry` with `value` at `path`, sealed again (a found case, replayed as is)."""
    meta = entry / "unit.json"
    data = _unsealed(meta)
    _set(data, path, value)
    _reseal(meta, data)


def judged(source: Path, root: Path, fmt: str) -> str:
    """The oracle's outcome of `analyze -f fmt` on `source` with the cache at `root`."""
    from tilescope import rank_cache_trust

    rank_cache_trust._WARNED.clear()
    code, out, err, tb = _analyze(source, fmt, root)
    return judge("analyze", code, out if fmt == "json" else "{}", err, tb, str(source)).outcome


def change(rng: random.Random, root: Path) -> tuple[str, bool]:
    """One entry of the cache at `root` damaged or forged; (what was done, whether the entry must
    not be read: damaged, or forged of the wrong shape)."""
    entries = sorted(p.parent for p in root.glob("??/*/unit.json"))
    entry = rng.choice(entries)
    other = next(e for e in entries if e != entry)
    if rng.random() < 0.5:
        return damage(rng, entry, other), True
    return forge(rng, entry)


def _analyze(run: Path, fmt: str, cache: Path | None) -> tuple[int | None, str, str, str]:
    where = ["--cache-dir", str(cache)] if cache is not None else ["--no-cache"]
    return run_in_process(["analyze", str(run), "-j", "1", "-f", fmt, *where])


def seed_run(work: Path) -> Path:
    if REAL_RUN.is_dir():
        return REAL_RUN
    sys.path.insert(0, str(REPO / "sample_traces"))
    from generator.cluster import ClusterSpec, write_cluster_run

    out = work / "run"
    write_cluster_run(out, ClusterSpec(ranks=2, steps=2))
    return out


def prepare(work: Path) -> tuple[Path, Path, dict[str, tuple[int | None, str, str, str]]]:
    """The seed run, a cache of its ranks under `work` (no whole-run entry) and its --no-cache
    reports in both formats."""
    source = seed_run(work)
    pristine = work / "pristine"
    _analyze(source, "json", pristine)
    for stored in pristine.glob("??/*/run.json"):  # the whole run's entry would answer first
        shutil.rmtree(stored.parent)
    return source, pristine, {fmt: _analyze(source, fmt, None) for fmt in ("json", "text")}


def check(seed: int, i: int, work: Path, prepared: Any) -> tuple[str, bool, list[tuple[str, str, str]]]:
    """Case `i` of run `seed`: (what was changed, whether it must not be read, per format its
    (format, outcome, detail))."""
    from tilescope import rank_cache_trust

    source, pristine, plain = prepared
    results = []
    what, unread = "", False
    for fmt in ("json", "text"):  # each on a fresh copy: a damaged entry is rewritten when seen
        root = work / f"case{i:05d}-{fmt}"
        shutil.copytree(pristine, root, symlinks=True)
        what, unread = change(random.Random(f"{seed}:{i}:cache"), root)
        rank_cache_trust._WARNED.clear()  # each case a process of its own, as a user's run
        code, out, err, tb = _analyze(source, fmt, root)
        result = judge("analyze", code, out if fmt == "json" else "{}", err, tb, str(source))
        outcome, detail = result.outcome, result.detail
        if not unread and outcome == "out_of_range":  # a forged value shown as forged: §9
            outcome = "forged_value_shown"
        if unread and outcome in ("accepted", "rejected"):
            want_code, want_out = plain[fmt][0], plain[fmt][1]
            if code != want_code or _STAMP.sub("", out) != _STAMP.sub("", want_out):
                outcome, detail = "cache_trusted", "the report differs from --no-cache"
        results.append((fmt, outcome, detail))
        shutil.rmtree(root)
    return what, unread, results


def run(cases: int, seed: int, log: bool = False) -> dict[str, Any]:
    counts: dict[str, int] = {}
    kinds = {"not to be read": 0, "forged and sealed": 0}
    failures: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tilescope-cachefuzz-") as tmp:
        work = Path(tmp)
        prepared = prepare(work)
        for i in range(cases):
            what, unread, results = check(seed, i, work, prepared)
            kinds["not to be read" if unread else "forged and sealed"] += 1
            for fmt, outcome, detail in results:
                counts[outcome] = counts.get(outcome, 0) + 1
                if outcome in FAILURES or outcome == "cache_trusted":
                    failures.append(
                        {"case": i, "change": what, "format": fmt, "outcome": outcome, "detail": detail}
                    )
                    if log:
                        print(f"FAIL case {i} {what!r} -f {fmt}: {outcome} {detail}", file=sys.stderr)
    return {"cases": cases, "seed": seed, "kinds": kinds, "counts": counts, "failures": failures}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    report = run(args.cases, args.seed, log=True)
    print(json.dumps({k: v for k, v in report.items() if k != "failures"}, indent=1))
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
