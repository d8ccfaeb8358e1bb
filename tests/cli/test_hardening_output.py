"""Untrusted text stays inert in every output (issue #13, hardening: output).

A kernel table whose names are rich markup, terminal escape sequences, spreadsheet formulas, a
quoted CR/LF and a 5000-character name goes through the commands as a user runs them: a
subprocess whose stdout is a pipe, so rich adds no styling of its own and any ESC byte in the
output would have come from the trace. The table is the repository's own generated sample
(sample_traces/attention_unfused) with its names replaced.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tilescope.cli import main
from tilescope.errors import ProfileFormatError
from tilescope.findings import Finding, Severity
from tilescope.io import kernel_stream, tables
from tilescope.io.bad_rows import STRICT_ENV
from tilescope.io.kernel_csv import read_kernel_table
from tilescope.io.kernel_sink import TableSink, csv_table, large_strings
from tilescope.io.kernel_stream import StreamFallback, stream_kernel_csv
from tilescope.io.load import load_kernels_arrow
from tilescope.text.escape import csv_cell, md_html_text, terminal_text

from support import REPO_ROOT

REPO = REPO_ROOT
SAMPLE = REPO / "sample_traces" / "attention_unfused"
SAMPLE_CSV = next(SAMPLE.rglob("kernel_details.csv"))

LONG = "N" * 5000
HOSTILE = [
    "x[/bold]y",
    "[link=https://evil.example]click[/link]",
    "a\x1b[2Jb",
    "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07",
    '=HYPERLINK("http://evil.example","x")',
    "+1",
    "-cmd",
    "@SUM(A1)",
    "\tTAB",
    "name\x07bell",
    "evil\r\nname",
    LONG,
    "-2.5",
    "in\tside",
    "\u202eevil\u202c",
]
# The reader trims whitespace and literal quotes at both ends of every value (tables._TRIM_CHARS:
# torch_npu pads timestamps with a TAB), so the kernel "\tTAB" is read as "TAB".
READ_AS = {"\tTAB": "TAB"}
# What `kernels --format csv` writes for each name: control characters as visible escapes, a
# formula prefixed with ', a plain number left alone.
CSV_CELLS = {
    "x[/bold]y": "x[/bold]y",
    "[link=https://evil.example]click[/link]": "[link=https://evil.example]click[/link]",
    "a\x1b[2Jb": "a\\x1b[2Jb",
    "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07": "\\x1b]8;;https://evil.example\\x07click\\x1b]8;;\\x07",
    '=HYPERLINK("http://evil.example","x")': '\'=HYPERLINK("http://evil.example","x")',
    "+1": "+1",
    "-cmd": "'-cmd",
    "@SUM(A1)": "'@SUM(A1)",
    "\tTAB": "TAB",
    "name\x07bell": "name\\x07bell",
    "evil\r\nname": "evil\\r\\nname",
    LONG: LONG,
    "-2.5": "-2.5",
    "in\tside": "in\\tside",
    "\u202eevil\u202c": "\\u202eevil\\u202c",
}
BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _hostile_rows() -> tuple[list[str], list[list[str]]]:
    with open(SAMPLE_CSV, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    name, op_type = header.index("Name"), header.index("Type")
    for i, row in enumerate(body):
        row[name] = HOSTILE[i % len(HOSTILE)]
        if i % 5 == 0:  # op types are printed too (the kernels table)
            row[op_type] = HOSTILE[(i + 3) % len(HOSTILE)]
    return header, body


def _write(path: Path, header: list[str], body: list[list[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([header, *body])  # QUOTE_MINIMAL: "evil\r\nname" is quoted
    return path


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kernel_details.csv with the hostile names, under a hostile path (printed by every command):
    `.../run[/bold]<ESC>[2J/kernel_details.csv` (the slash makes it two folders)."""
    folder = tmp_path_factory.mktemp("out") / "run[/bold]\x1b[2J"
    return _write(folder / "kernel_details.csv", *_hostile_rows())


def _shown(path: Path) -> str:
    """How a terminal command prints the paths used here."""
    return str(path).replace("\x1b", "\\x1b").replace("\x07", "\\x07")


def _run(*args: str | Path) -> subprocess.CompletedProcess[bytes]:
    # wide enough that the kernels table never folds a name shorter than its 48-column limit
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "400", "TERM": "dumb"}
    cmd = [sys.executable, "-m", "tilescope.cli", *map(str, args)]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, timeout=300, check=False)


def _inert(out: bytes) -> str:
    """The output as text, after checking it holds no control character (newlines apart), no DEL,
    no C1 control and no bidi override."""
    text = out.decode("utf-8")
    bad = sorted({hex(ord(c)) for c in text if (c < " " and c != "\n") or "\x7f" <= c <= "\x9f" or c in BIDI})
    assert not bad, bad
    return text


# -- the one function ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("\x1b]8;;https://evil.example\x07click\x1b]8;;\x07", "\\x1b]8;;https://evil.example\\x07click\\x1b]8;;\\x07"),
        ("evil\r\nname\ttab", "evil\\r\\nname\\ttab"),
        ("nul\x00del\x7fcsi\x9b", "nul\\x00del\\x7fcsi\\x9b"),
        ("\u202eevil\u2066x\u2069", "\\u202eevil\\u2066x\\u2069"),
        ("line\u2028sep", "line\\u2028sep"),
        ("x[/bold]y [x30] C:\\path µs →", "x[/bold]y [x30] C:\\path µs →"),  # printable text unchanged
    ],
)
def test_terminal_text_shows_every_control_character_as_an_escape(raw: str, shown: str) -> None:
    assert terminal_text(raw) == shown


@pytest.mark.parametrize(
    ("raw", "cell"),
    [
        ('=HYPERLINK("http://evil.example","x")', '\'=HYPERLINK("http://evil.example","x")'),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("-cmd", "'-cmd"),
        ("+cmd", "'+cmd"),
        ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"),
        ("\tTAB", "\\tTAB"),  # made visible: it no longer starts with a TAB
        ("\r=1", "\\r=1"),
        ("-1", "-1"),  # numbers keep their sign
        ("+2.5", "+2.5"),
        ("-1e-3", "-1e-3"),
        ("-inf", "'-inf"),  # not a plain number: a spreadsheet would read a formula
        ("MatMulV2", "MatMulV2"),
        ("", ""),
    ],
)
def test_csv_cell_neutralises_formulas_but_not_numbers(raw: str, cell: str) -> None:
    assert csv_cell(raw) == cell


def test_markdown_html_keeps_entities_whole() -> None:
    # the apostrophe's entity was split by the zero-width space meant for "#123" references
    assert md_html_text("the matmul's epilogue, see #12") == "the matmul&#x27;s epilogue, see #\u200b12"


# -- the commands, as a user runs them -------------------------------------------------------------


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_analyze_text_prints_names_and_the_tools_own_brackets_as_text(hostile: Path) -> None:
    run = _run("analyze", hostile)
    assert run.returncode == 0, run.stderr
    out = _inert(run.stdout)
    assert out.startswith(f"{_shown(hostile)}: 289 launches")  # compute launches: its HCCL task is not one
    assert "run[/bold]\\x1b[2J/kernel_details.csv" in _shown(hostile)
    for shown in ("x[/bold]y", "a\\x1b[2Jb", "name\\x07bell", "evil\\r\\nname", "\\u202eevil\\u202c"):
        assert shown in out
    assert "[link=https://evil.exampl" in out  # folded in its column, but there
    assert re.search(r"\(\d+ occurrences\)", out)  # the occurrence suffix of grouped findings


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_analyze_json_and_markdown(hostile: Path) -> None:
    run = _run("analyze", hostile, "--format", "json")
    assert run.returncode == 0, run.stderr
    named = {k for f in json.loads(run.stdout)["findings"] for k in f["kernels"]}
    assert {"a\x1b[2Jb", "name\x07bell", "evil\r\nname", "x[/bold]y"} <= named  # JSON keeps the names
    run = _run("analyze", hostile, "--format", "md")
    assert run.returncode == 0, run.stderr
    md = _inert(run.stdout)
    assert "x\\[/bold\\]y" in md  # Markdown's own escaping, control characters flattened to spaces
    assert "&#\u200b" not in md


def test_markdown_of_the_clean_sample_has_whole_entities() -> None:
    run = _run("analyze", SAMPLE, "--format", "md")
    assert run.returncode == 0, run.stderr
    md = run.stdout.decode()
    assert "the matmul&#x27;s epilogue" in md
    assert "&#\u200bx27;" not in md


def test_kernels_table(hostile: Path) -> None:
    run = _run("kernels", hostile, "--limit", str(len(HOSTILE)))
    assert run.returncode == 0, run.stderr
    out = _inert(run.stdout)
    assert "run[/bold]\\x1b[2J/kernel_details.csv — kernel_csv, chip 910B2" in out  # the title
    for shown in ("x[/bold]y", "[link=https://evil.example]click[/link]", "a\\x1b[2Jb", "name\\x07bell"):
        assert shown in out


@pytest.mark.parametrize("to_file", [False, True])
def test_kernels_csv_cells_are_neutralised(hostile: Path, tmp_path: Path, to_file: bool) -> None:
    # stdout: the whole-table writer; -o: the streaming pipeline's sink
    out = tmp_path / "k.csv"
    extra: list[str | Path] = ["-o", out] if to_file else []
    run = _run("kernels", hostile, "--format", "csv", *extra)
    assert run.returncode == 0, run.stderr
    text = _inert(out.read_bytes() if to_file else run.stdout)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 290
    expected = [CSV_CELLS[HOSTILE[i % len(HOSTILE)]] for i in range(290)]
    assert [r["name"] for r in rows] == expected
    assert float(rows[0]["duration_us"]) == 184.849  # numbers untouched


def test_kernels_json_has_the_original_names(hostile: Path) -> None:
    run = _run("kernels", hostile, "--format", "json")
    assert run.returncode == 0, run.stderr
    names = [r["name"] for r in json.loads(run.stdout)]
    assert names == [READ_AS.get(n, n) for n in (HOSTILE[i % len(HOSTILE)] for i in range(290))]


def test_info_prints_the_path_as_text(hostile: Path) -> None:
    run = _run("info", hostile)
    assert run.returncode == 0, run.stderr
    out = _inert(run.stdout)
    assert out.startswith(f"{_shown(hostile)}\n")


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_diff_text(hostile: Path) -> None:
    run = _run("diff", SAMPLE, hostile)
    assert run.returncode == 0, run.stderr
    out = _inert(run.stdout)
    assert "run[/bold]\\x1b[2J" in out and "a\\x1b[2Jb" in out


def test_error_line_shows_the_path_inert(hostile: Path) -> None:
    header, body = _hostile_rows()
    body[2] = body[2][:-3]  # a truncated row
    broken = _write(hostile.parents[2] / "bad\x1b]0;title\x07" / "kernel_details.csv", header, body)
    run = _run("kernels", "--strict", broken)  # by default the row is skipped with a note
    assert run.returncode == 2 and run.stdout == b""
    err = _inert(run.stderr)
    assert err == (
        f"tilescope: error: {hostile.parents[2]}/bad\\x1b]0;title\\x07/kernel_details.csv: row 3 (line 4): "
        f"expected {len(header)} fields as in the header, found {len(header) - 3} (truncated row?)\n"
    )


def test_lint_text_keeps_the_kernel_list(capsys: pytest.CaptureFixture[str]) -> None:
    # `tilescope lint` printed "[matmul_kernel]" as markup: it vanished, and "[/bold]" would crash it
    from tilescope.commands.lint import _print_text

    ir = {"kernel_file": "k[/bold].py", "function": "f", "lowered": True, "kernels": [{"name": "x[/bold]y"}]}
    finding = Finding("TS501", "buffer-over-capacity", Severity.HIGH, ("x[/bold]y", "a\x1b[2Jb"), "over [x2]")
    _print_text(ir, [finding], "910B2")
    out = _inert(capsys.readouterr().out.encode())
    assert "k[/bold].py:f  kernels: x[/bold]y  chip: 910B2" in out
    assert "high   TS501 buffer-over-capacity [x[/bold]y, a\\x1b[2Jb] over [x2]" in out


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bars_print_file_names_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # on a terminal `kernels 'x[/bold].csv'` died with a MarkupError from the progress bar
    from tilescope.commands.kernels import _read_progress
    from tilescope.io.load import _progress

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with _read_progress("x[/bold]\x1b[2J.csv") as update:
        assert update is not None
        update(1, 2)
    with _progress(True, 2) as step:
        step("run[/bold]\x1b]8;;https://evil.example\x07")
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal.getvalue())  # rich's own cursor and colours
    assert "\x1b" not in shown and "\x07" not in shown
    assert "reading x[/bold]\\x1b[2J.csv" in shown
    assert "run[/bold]\\x1b]8;;https://evil.example\\x07" in shown


# -- a quoted newline is legal CSV ----------------------------------------------------------------


def _multiline_names(tmp_path: Path) -> tuple[Path, list[str]]:
    header, body = _hostile_rows()
    name = header.index("Name")
    for i, row in enumerate(body):
        row[name] = f"k{i}\nline {i}" if i % 2 else f"k{i}\r\nline {i}"
    return _write(tmp_path / "kernel_details.csv", header, body), [r[name] for r in body]


def test_quoted_newlines_across_read_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src, names = _multiline_names(tmp_path)
    monkeypatch.setattr(tables, "READ_BLOCK_SIZE", 4096)  # ~25 blocks, cut inside names
    header = tables.read_header(src)
    strings = {f"c{i}": pa.string() for i in range(len(header))}
    with pytest.raises(pa.ArrowInvalid):  # what the reader met before: rejected as malformed
        tables._read_typed(src, list(strings), strings, False)
    assert read_kernel_table(src).kernels["name"].tolist() == names
    assert main(["kernels", str(src), "--format", "json"]) == 0


def test_error_names_the_line_a_row_starts_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    header, body = _hostile_rows()
    body[0][header.index("Name")] = "two\nlines"
    body[2] = body[2][:-1]
    src = _write(tmp_path / "kernel_details.csv", header, body)
    skipped = read_kernel_table(src).rows_skipped  # by default the row is skipped, named the same
    assert skipped is not None and skipped["first"].startswith(f"{src}: row 3 (line 5): expected")
    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(ProfileFormatError, match=r": row 3 \(line 5\): expected"):
        read_kernel_table(src)


def test_stream_cut_inside_a_crafted_quoted_value_falls_back(tmp_path: Path) -> None:
    """A group cut on a quoted newline parses without an error on both sides when the rest of the
    value holds the commas of a row: the stream gave one row too many (an empty name, the tail of
    the value as its output dtype). It must fall back to the whole-file table."""
    header = "Name,Type,Accelerator Core,Start Time(us),Duration(us),Block Dim,Output Data Types\n"
    row = 'K{i},Add,AI_VECTOR_CORE,"17000000000000{i:02d}.000\t",10.5,48,{last}\n'
    tail = "," * 6 + "x"
    rows = [row.format(i=i, last="FLOAT") for i in range(6)]
    rows[3] = row.format(i=3, last=f'"FLOAT\n{tail}"')
    src = tmp_path / "kernel_details.csv"
    src.write_text(header + "".join(rows))
    cut = src.read_bytes().index(b"FLOAT\n,") + len("FLOAT") - len(header)
    with pytest.raises(StreamFallback, match="inside a quoted value"):
        stream_kernel_csv(src, "910B2", lambda t: None, lambda t: t, group_bytes=cut)
    whole = load_kernels_arrow(src, chip="910B2")
    assert whole.column("name").to_pylist() == ["K0", "K1", "K2", "K3", "K4", "K5"]
    assert whole.column("output_dtypes").to_pylist()[3] == f"FLOAT\n{tail}"


def test_kernels_file_output_keeps_quoted_newlines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`kernels -o` (the streaming pipeline, which falls back on them) writes the names as read."""
    src, names = _multiline_names(tmp_path)
    monkeypatch.setattr(kernel_stream, "GROUP_BYTES", 3000)
    out = tmp_path / "k.parquet"
    assert main(["kernels", str(src), "--format", "parquet", "-o", str(out)]) == 0
    assert pq.read_table(out).column("name").to_pylist() == names


def test_csv_table_keeps_numbers_and_decodes(tmp_path: Path) -> None:
    table = pa.table(
        {
            "name": pa.array(["=1+1", "ok", "=1+1"]).dictionary_encode(),
            "op_type": pa.array(["@x", None, "-1"], pa.large_string()),
            "delta": pa.array([-1.5, 2.0, None]),
        }
    )
    out = csv_table(table)
    assert out.column("name").type == pa.string()
    assert out.to_pylist() == [
        {"name": "'=1+1", "op_type": "'@x", "delta": -1.5},
        {"name": "ok", "op_type": None, "delta": 2.0},
        {"name": "'=1+1", "op_type": "-1", "delta": None},
    ]
    sink = TableSink("csv", tmp_path / "t.csv")
    sink(large_strings(table))
    sink.close()
    assert (tmp_path / "t.csv").read_text().splitlines()[1] == "\"'=1+1\",\"'@x\",-1.5"
