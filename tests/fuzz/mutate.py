"""Seeded mutations of real profiler files: one hostile change per case, reproducible from its seed.

A case is a directory holding a mutated copy of one seed input (a kernel_details / op_summary CSV,
an `msprof op` folder, a trace_view.json, an msprof SQLite database) plus the argument the CLI is
given. Mutations are the ones real files and hostile users produce: cells replaced by impossible or
malformed values, rows repeated or cut, columns dropped or renamed, line endings and encodings
changed, bytes flipped or truncated, control characters and markup in names, odd directory names.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# Values a broken or hostile file puts in a cell
HOSTILE_VALUES = (
    "-1",
    "-0.5",
    "0",
    "1e308",
    "-1e308",
    "Infinity",
    "-inf",
    "NaN",
    "nan",
    "1e30",
    "5",
    "150",
    "1e14",
    "99999999999999999999999",
    "",
    " ",
    "N/A",
    "abc",
    "0x10",
    "1,5",
    "\t",
    '"',
    '=HYPERLINK("http://x")',
    "+1",
    "@SUM(A1)",
    "x[/bold]y",
    "[link=https://evil.example]c[/link]",
    "a\x1b[2Jb",
    "\x07",
    "é\u202e",
    "9223372036854775807",
    "-9223372036854775808",
    "1.7976931348623157e308",
    "4294967295",
)
# Directory names that a path-as-URI, glob or SQL reader would misread
ODD_NAMES = ("pct%41", "a?b", "a#b", "run[1]", "x*", "{a,b}", "q'uote", 'd"q', "sp ace", "new\nline", "ü-ñ")


@dataclass(frozen=True)
class Seed:
    """One input the fuzzer mutates: `root` is copied whole, `target` (relative) is what it mutates,
    `arg` (relative) is what the CLI is given."""

    name: str
    kind: str  # "csv" | "json" | "sqlite" | "msprof_op" | "bundle" | "jsondoc"
    root: Path
    target: str
    arg: str


@dataclass
class Case:
    seed: Seed
    mutation: str
    path: Path  # what the CLI is given
    twin: Path | None = None  # the same content under a plain name (odd-name cases)


def _csv_rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig", errors="replace"), newline="")))


def _write_rows(path: Path, rows: list[list[str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)


# ---- CSV mutations -------------------------------------------------------------------------------


def _cell(rng: random.Random, path: Path) -> str:
    rows = _csv_rows(path)
    if len(rows) < 2:
        return "cell: too few rows"
    r, c = rng.randrange(1, len(rows)), rng.randrange(len(rows[0]))
    value = rng.choice(HOSTILE_VALUES)
    if c < len(rows[r]):
        rows[r][c] = value
    _write_rows(path, rows)
    return f"cell row {r} col {rows[0][c]!r} = {value!r}"


def _repeat_row(rng: random.Random, path: Path) -> str:
    rows = _csv_rows(path)
    r = rng.randrange(1, len(rows)) if len(rows) > 1 else 0
    rows.insert(r, list(rows[r]))
    _write_rows(path, rows)
    return f"repeat row {r}"


def _drop_column(rng: random.Random, path: Path) -> str:
    rows = _csv_rows(path)
    c = rng.randrange(len(rows[0]))
    name = rows[0][c]
    _write_rows(path, [row[:c] + row[c + 1 :] for row in rows])
    return f"drop column {name!r}"


def _rename_header(rng: random.Random, path: Path) -> str:
    rows = _csv_rows(path)
    c = rng.randrange(len(rows[0]))
    old = rows[0][c]
    rows[0][c] = rng.choice([old.upper(), old + " ", "", "Name", "Duration(us)", old[::-1]])
    _write_rows(path, rows)
    return f"rename header {old!r} -> {rows[0][c]!r}"


def _short_row(rng: random.Random, path: Path) -> str:
    rows = _csv_rows(path)
    r = rng.randrange(1, len(rows)) if len(rows) > 1 else 0
    rows[r] = rows[r][: rng.randrange(len(rows[r]) or 1)]
    _write_rows(path, rows)
    return f"short row {r}"


def _line_endings(rng: random.Random, path: Path) -> str:
    data = path.read_bytes().replace(b"\r\n", b"\n")
    end = rng.choice([b"\r", b"\r\n", b"\n\n"])
    path.write_bytes(data.replace(b"\n", end))
    return f"line endings {end!r}"


def _bom_and_encoding(rng: random.Random, path: Path) -> str:
    data = path.read_bytes()
    how = rng.choice(["bom", "latin1", "utf16"])
    if how == "bom":
        path.write_bytes(b"\xef\xbb\xbf" + data.removeprefix(b"\xef\xbb\xbf"))
    elif how == "latin1":
        at = rng.randrange(len(data))
        path.write_bytes(data[:at] + b"\xe9\xff" + data[at:])
    else:
        path.write_bytes(data.decode("utf-8", errors="replace").encode("utf-16"))
    return f"encoding {how}"


def _quoted_newline_name(rng: random.Random, path: Path) -> str:
    rows = _csv_rows(path)
    if len(rows) < 2:
        return "quoted newline: too few rows"
    r = rng.randrange(1, len(rows))
    col = next((i for i, h in enumerate(rows[0]) if h in ("Name", "Op Name")), 0)
    rows[r][col] = rows[r][col] + rng.choice(["\nx", "\r\ny", "\x1b]8;;https://evil.example\x07z"])
    _write_rows(path, rows)
    return f"name with newline/escape row {r}"


# ---- byte mutations (any file) -------------------------------------------------------------------


def _flip_bytes(rng: random.Random, path: Path) -> str:
    data = bytearray(path.read_bytes())
    n = rng.choice([1, 8, 64])
    for _ in range(n):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    path.write_bytes(bytes(data))
    return f"flip {n} bytes"


def _truncate(rng: random.Random, path: Path) -> str:
    data = path.read_bytes()
    at = rng.randrange(len(data)) if data else 0
    path.write_bytes(data[:at])
    return f"truncate at {at}"


def _insert_nul(rng: random.Random, path: Path) -> str:
    data = path.read_bytes()
    at = rng.randrange(len(data)) if data else 0
    path.write_bytes(data[:at] + b"\x00" + data[at:])
    return f"NUL at {at}"


# ---- JSON timeline mutations ---------------------------------------------------------------------


def _json_field(rng: random.Random, path: Path) -> str:
    events = json.loads(path.read_text())
    items = events["traceEvents"] if isinstance(events, dict) else events
    xs = [e for e in items if isinstance(e, dict) and e.get("ph") == "X"] or items
    e = rng.choice(xs)
    key = rng.choice(["dur", "ts", "name", "pid", "tid", "args", "ph"])
    value: object = rng.choice([-3.5, 1e308, "NaN", None, "x", 2**70, "", {"a": 1}, [], "1e30", -1])
    if rng.random() < 0.2:
        e.pop(key, None)
        value = "<removed>"
    else:
        e[key] = value
    path.write_text(json.dumps(events))
    return f"event field {key} = {value!r}"


def _json_object_form(rng: random.Random, path: Path) -> str:
    events = json.loads(path.read_text())
    if isinstance(events, list):
        path.write_text(json.dumps({"displayTimeUnit": "ns", "traceEvents": events, "otherData": {"x": "]"}}))
    return "object form"


def _json_any(rng: random.Random, path: Path) -> str:
    """A run bundle's ir.json / manifest.json: one value anywhere in the document replaced or removed."""
    doc = json.loads(path.read_text())
    parents: list[tuple[object, object]] = []

    def collect(x: object) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                parents.append((x, k))
                collect(v)
        elif isinstance(x, list):
            for i, v in enumerate(x):
                parents.append((x, i))
                collect(v)

    collect(doc)
    if not parents:
        return "json: empty document"
    holder, key = rng.choice(parents)
    value: object = rng.choice(
        [
            -1,
            0,
            2**70,
            1e308,
            "NaN",
            None,
            "",
            "x[/bold]",
            "../../etc/passwd",
            [],
            {},
            "\x1b[2J",
            True,
            "/etc/passwd",
            -1e308,
        ]
    )
    if isinstance(holder, dict) and rng.random() < 0.25:
        del holder[key]
        value = "<removed>"
    else:
        holder[key] = value  # type: ignore[index]
    path.write_text(json.dumps(doc))
    return f"{path.name} [{key!r}] = {value!r}"


# ---- SQLite mutations ----------------------------------------------------------------------------


def _sqlite_edit(path: Path, sql: str, params: tuple[object, ...], said: str) -> str:
    """Run one statement on the copy; what it did, or why SQLite refused it (then the case is
    the unchanged database)."""
    con = sqlite3.connect(path)
    try:
        con.execute(sql, params)
        con.commit()
        return said
    except sqlite3.Error as exc:
        return f"{said}: refused ({exc})"
    finally:
        con.close()


def _sqlite_value(rng: random.Random, path: Path) -> str:
    table, col = rng.choice(
        [
            ("TASK", "endNs"),
            ("TASK", "startNs"),
            ("TASK", "globalTaskId"),
            ("COMPUTE_TASK_INFO", "blockDim"),
            ("COMPUTE_TASK_INFO", "name"),
            ("TASK_PMU_INFO", "value"),
            ("STRING_IDS", "value"),
        ]
    )
    value = rng.choice([-5, None, "text", 2**62, 1e308, "", "x[/bold]"])
    sql = f'UPDATE "{table}" SET "{col}" = ? WHERE rowid IN (SELECT rowid FROM "{table}" LIMIT 2)'
    return _sqlite_edit(path, sql, (value,), f"{table}.{col} = {value!r}")


def _sqlite_drop(rng: random.Random, path: Path) -> str:
    table = rng.choice(["STRING_IDS", "TASK_PMU_INFO", "NPU_INFO", "META_DATA"])
    return _sqlite_edit(path, f'DROP TABLE IF EXISTS "{table}"', (), f"drop table {table}")


def _sqlite_drop_column(rng: random.Random, path: Path) -> str:
    table, col = rng.choice([("TASK", "endNs"), ("TASK", "startNs"), ("COMPUTE_TASK_INFO", "globalTaskId")])
    return _sqlite_edit(path, f'ALTER TABLE "{table}" DROP COLUMN "{col}"', (), f"drop column {table}.{col}")


def _sqlite_pages(rng: random.Random, path: Path) -> str:
    data = bytearray(path.read_bytes())
    at = rng.randrange(100, max(101, len(data)))
    for i in range(at, min(len(data), at + 64)):
        data[i] = rng.randrange(256)
    path.write_bytes(bytes(data))
    return f"corrupt 64 bytes at {at}"


Mutator = Callable[[random.Random, Path], str]
MUTATORS: dict[str, tuple[Mutator, ...]] = {
    "csv": (
        _cell,
        _cell,
        _cell,
        _repeat_row,
        _drop_column,
        _rename_header,
        _short_row,
        _line_endings,
        _bom_and_encoding,
        _quoted_newline_name,
        _flip_bytes,
        _truncate,
        _insert_nul,
    ),
    "msprof_op": (_cell, _cell, _repeat_row, _drop_column, _short_row, _flip_bytes, _truncate),
    "json": (_json_field, _json_field, _json_field, _json_object_form, _flip_bytes, _truncate, _insert_nul),
    "bundle": (_json_any, _json_any, _json_any, _truncate, _flip_bytes),
    "jsondoc": (_json_any, _json_any, _truncate, _flip_bytes),
    "sqlite": (_sqlite_value, _sqlite_value, _sqlite_drop, _sqlite_drop_column, _sqlite_pages, _truncate),
}


# A text value just past the one cap every reader holds text to (analyzer/io/validate.py)
LONG_TEXT = "L" * ((1 << 20) + 1)
# One case in this many also gets a long text, drawn from a stream of its own so that the other
# mutations, and the cases FOUND replays, are those of the runs before it was added (the salt:
# none of FOUND is touched, and CI's 42 cases include a CSV, a timeline and a SQLite one)
LONG_TEXT_ONE_IN = 20
LONG_TEXT_SALT = "text-cap-6"


def _long_text(rng: random.Random, path: Path, kind: str) -> str:
    """A cell, header field, event name or interned string 1 MiB + 1 byte long."""
    if kind in ("csv", "msprof_op"):
        rows = _csv_rows(path)
        r, c = rng.randrange(len(rows)), rng.randrange(len(rows[0]))
        if c < len(rows[r]):
            rows[r][c] = LONG_TEXT
        _write_rows(path, rows)
        return f"long text at row {r} col {c}"
    if kind == "json":
        events = json.loads(path.read_text())
        items = events["traceEvents"] if isinstance(events, dict) else events
        events_x = [e for e in items if isinstance(e, dict) and e.get("ph") == "X"] or items
        rng.choice(events_x)["name"] = LONG_TEXT
        path.write_text(json.dumps(events))
        return "long text as an event name"
    sql = 'UPDATE "STRING_IDS" SET "value" = ? WHERE rowid IN (SELECT rowid FROM "STRING_IDS" LIMIT 2)'
    return _sqlite_edit(path, sql, (LONG_TEXT,), "long text in STRING_IDS.value")


# Issue #27's probes of the input itself, in one case of this many, from a stream of their own (as
# LONG_TEXT: earlier runs and FOUND replay unchanged): a header of MAX_COLUMNS + 1 columns (a
# valid 10^6-column CSV took 1.4 GB and blamed the wrong line) or of 2,000 (read as any other),
# and a FIFO, a link to /dev/zero or a link loop as the input or beside it (a traceback, or a read
# that never ends). Cases with an odd-named twin are left alone: copying a FIFO would block.
ISSUE27_ONE_IN = 15
ISSUE27_SALT = "issue27-10"  # the first salt that touches none of FOUND


def _wide_header(rng: random.Random, path: Path) -> str:
    # deferred: the fuzzer's other mutations need nothing of tilescope
    from tilescope.io.csv_header import MAX_COLUMNS

    rows = _csv_rows(path)
    width = rng.choice((MAX_COLUMNS + 1, 2000))
    extra = width - len(rows[0])
    rows = [rows[0] + [f"extra_{i}" for i in range(extra)]] + [r + [""] * extra for r in rows[1:]]
    _write_rows(path, rows)
    return f"header of {width} columns"


def _plant(at: Path, how: str) -> None:
    if how == "fifo":
        os.mkfifo(at)
    else:
        at.symlink_to("/dev/zero")


def _special_entries(rng: random.Random, folder: Path, arg: Path) -> str:
    how = rng.choice(("fifo", "link to /dev/zero"))
    if arg.is_file() and rng.random() < 0.5:  # the input itself
        arg.unlink()
        _plant(arg, how)
        return f"the input is a {how}"
    for name in ("trace_view.json", "msprof_0.db", "kernel_details.csv", "op_summary_0.csv"):
        at = folder / name
        if not at.exists() and not at.is_symlink():
            _plant(at, how)
            (folder / "loop").symlink_to(".")
            return f"a {how} named {name} and a link loop beside the input"
    return "no free name for a special file"


def _issue27(rng: random.Random, seed: Seed, folder: Path, target: Path) -> str:
    if seed.kind in ("csv", "msprof_op") and rng.random() < 0.5:
        try:
            return _wide_header(rng, target)
        except (ValueError, UnicodeDecodeError, csv.Error, IndexError):
            return "wide header skipped (the mutated file no longer parses)"
    return _special_entries(rng, folder, folder / seed.arg)


def make_case(seed: Seed, index: int, base_seed: int, work: Path) -> Case:
    """Case `index` of a run: a mutated copy of `seed` under `work`; reproducible from (base_seed, index)."""
    rng = random.Random(f"{base_seed}:{index}:{seed.name}")
    odd = rng.random() < 0.1
    folder = work / f"case{index:05d}" / (rng.choice(ODD_NAMES) if odd else "p")
    shutil.copytree(seed.root, folder, ignore=shutil.ignore_patterns("*-shm", "*-wal"))
    for p in folder.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)  # the real corpus is read-only
    target = folder / seed.target
    if seed.kind == "msprof_op":
        files = sorted(p for p in (folder / seed.target).rglob("*.csv"))
        target = rng.choice(files)
    elif seed.kind == "bundle":
        target = folder / rng.choice(["ir/ir.json", "ir/ir.json", "manifest.json"])
    mutator = rng.choice(MUTATORS[seed.kind])
    what = mutator(rng, target)
    extra = random.Random(f"{base_seed}:{index}:{seed.name}:{LONG_TEXT_SALT}")
    if seed.kind in ("csv", "msprof_op", "json", "sqlite") and extra.randrange(LONG_TEXT_ONE_IN) == 0:
        try:
            what += "; " + _long_text(extra, target, seed.kind)
        except (ValueError, UnicodeDecodeError, csv.Error, IndexError, KeyError, TypeError, AttributeError):
            what += "; long text skipped (the mutated file no longer parses)"
    twin = None
    if odd:  # the same bytes under a plain name: the odd name must read exactly these
        twin = work / f"case{index:05d}" / "plain"
        shutil.copytree(folder, twin)
        decoy = (
            folder.parent / folder.name.replace("%41", "A").replace("[1]", "1").split("?")[0].split("#")[0]
        )
        if decoy != folder and not decoy.exists():
            shutil.copytree(seed.root, decoy)  # what a URI/glob reader would open instead
    probe = random.Random(f"{base_seed}:{index}:{seed.name}:{ISSUE27_SALT}")
    if twin is None and probe.randrange(ISSUE27_ONE_IN) == 0:
        what += "; " + _issue27(probe, seed, folder, target)
    return Case(
        seed,
        f"{mutator.__name__.lstrip('_')}: {what}" + (f" in {folder.name!r}" if odd else ""),
        folder / seed.arg,
        twin / seed.arg if twin else None,
    )


def seeds(repo: Path) -> list[Seed]:
    """The seed inputs: real profiles from ../shared (when present) and the bundled samples."""
    real = repo.parent / "shared" / "traces" / "real"
    out = [
        Seed("sample_msprof_op", "msprof_op", repo / "sample_traces" / "tilelang_fa_msprof_op", ".", "."),
        Seed("sample_bundle", "bundle", repo / "sample_traces" / "tilelang_fa_bundle", "ir/ir.json", "."),
    ]
    if (real / "fa_pipeutil_29" / "kernel_details.csv").is_file():
        out += [
            Seed(
                "fa_pipeutil_29", "csv", real / "fa_pipeutil_29", "kernel_details.csv", "kernel_details.csv"
            ),
            Seed(
                "triton_opsum",
                "csv",
                real / "triton_matmul_bd1024_opsum" / "mindstudio_profiler_output",
                "op_summary_20260402160352.csv",
                ".",
            ),
            Seed("sigmoid_app", "csv", real / "tilelang_sigmoid_app" / "trace_data", "op_summary.csv", "."),
            Seed("msprof_db", "sqlite", real / "msprof_db_2023", "msprof_0.db", "msprof_0.db"),
            Seed(
                "torch_timeline", "json", real / "torch_timeline_3670", "trace_view.json", "trace_view.json"
            ),
        ]
    return out


def seeds_from(roots: list[Path]) -> list[Seed]:
    """Seeds from any folder of inputs (another corpus run the same way): every CSV, JSON
    timeline and SQLite file, every `msprof op` folder and run bundle found under `roots`."""
    out: list[Seed] = []
    for root in roots:
        for p in sorted(root.rglob("*")) if root.is_dir() else [root]:
            name = f"{p.parent.name}/{p.name}"
            if p.is_dir() and (p / "ir" / "ir.json").is_file():
                out.append(Seed(name, "bundle", p, "ir/ir.json", "."))
            elif p.is_dir() and any(p.glob("OpBasicInfo*.csv")):
                out.append(Seed(name, "msprof_op", p, ".", "."))
            elif p.is_file() and p.suffix == ".csv" and not p.name.startswith("OpBasicInfo"):
                out.append(Seed(name, "csv", p.parent, p.name, p.name))
            elif p.is_file() and p.suffix == ".json" and p.name not in ("manifest.json", "ir.json"):
                # a timeline is given itself; any other JSON (info.json, profiler_info_N.json, ...)
                # is mutated in place and its folder given
                head = p.read_bytes()[:4096].lstrip()
                timeline = head.startswith(b"[") or b'"traceEvents"' in head
                out.append(
                    Seed(
                        name, "json" if timeline else "jsondoc", p.parent, p.name, p.name if timeline else "."
                    )
                )
            elif p.is_file() and p.suffix == ".db":
                out.append(Seed(name, "sqlite", p.parent, p.name, p.name))
    return out
