"""The IR view: a bundle's stages as highlighted, line-numbered panes.

Code is tokenised with Pygments on the server and sent as data: per line, (css class, text) runs.
The page draws them (dashboard/assets/ir_view.js) as DOM nodes whose text is set with
`textContent`, so no HTML string from the bundle ever reaches the page. Drawing them as Dash
components instead cost the renderer 6-30 s for 3,000 nodes, on every visit of the tab (#15).
A file is read and highlighted once per content (functools caches keyed on its real path, mtime
and size, then on its text): re-opening the view or marking another finding costs no Pygments run.

File names listed in `ir.json` are taken relative to the bundle's `ir/` (or `kernel/`) directory
and read only when their real path is inside the directories being served (tilescope.dashboard.paths),
since a bundle is untrusted input.

Panes: TVMScript before lowering, after lowering ("final") and the generated Ascend C of one
kernel, side by side. A finding's locations mark lines in the files they name; the `ir.json` line
map (source <-> tvmscript <-> ascendc rows, analyzer/ir/linemap.py) carries marks across stages.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pygments.lexers import CppLexer, PythonLexer
from pygments.token import STANDARD_TYPES, _TokenType

from tilescope.dashboard.paths import PathRejected, RootSet, confine
from tilescope.dashboard.views import short

MAX_BYTES = 4_000_000  # read at most this much of one stage file
# Lines sent per pane: a window around the first marked line (about 60 bytes per line on the wire,
# so four panes stay near 0.25 MB whatever the file size).
WINDOW_LINES = 1000
# The three panes, left to right: (ir.json stage name, title, lexer). "final" is the last lowered
# TVMScript, the input of code generation (analyzer/ir/lowering.py STAGE_FILES).
PANES = (
    ("source", "Kernel source", "python"),
    ("tvmscript", "TVMScript (before lowering)", "python"),
    ("final", "TVMScript (after lowering)", "python"),
    ("ascendc", "Ascend C", "cpp"),
)
_LINE_MAP_KEYS = {"source": "source_line", "tvmscript": "tvmscript_line", "ascendc": "ascendc_lines"}


@dataclass
class Stage:
    stage: str
    title: str
    file: str  # name relative to ir/
    text: str
    lexer: str
    truncated: bool = False
    marked: set[int] = field(default_factory=set)
    # line -> (share of the kernel's measured total, its label): dashboard.ir_heat, per-line data
    heat: dict[int, tuple[float, str]] = field(default_factory=dict)


def ir_kernels(ir: dict[str, Any] | None) -> list[str]:
    """Kernel names listed in ir.json (one per PrimFunc of the captured chain)."""
    if not isinstance(ir, dict):
        return []
    return [str(k.get("name")) for k in ir.get("kernels", []) or [] if isinstance(k, dict) and k.get("name")]


def _stage_files(ir: dict[str, Any] | None, kernel: str | None) -> dict[str, str]:
    """Stage name → file under ir/ for one kernel (`kernels[i].stages: [{name, file}]`)."""
    if not isinstance(ir, dict):
        return {}
    for k in ir.get("kernels", []) or []:
        if isinstance(k, dict) and (kernel is None or k.get("name") == kernel):
            return {
                str(st.get("name")): str(st.get("file"))
                for st in k.get("stages", []) or []
                if isinstance(st, dict) and isinstance(st.get("file"), str)
            }
    return {}


def _read_confined(folder: Path, name: str, allowed: RootSet) -> tuple[str, bool] | None:
    """`name` (from ir.json) under `folder`, when its real path is inside the served directories."""
    try:
        path = confine(folder, name, allowed)
    except PathRejected:
        return None
    if not path.is_file():
        return None
    st = path.stat()
    return _read_text(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=32)
def _read_text(path: str, mtime_ns: int, size: int) -> tuple[str, bool]:
    """The text of a stage file (at most MAX_BYTES) and whether it was cut; read once per
    (real path, mtime, size), the same str object after, so the caches below hash it once."""
    del mtime_ns, size  # the cache key: a rewritten file is read again
    with open(path, "rb") as fh:
        raw = fh.read(MAX_BYTES + 1)
    return raw[:MAX_BYTES].decode("utf-8", errors="replace"), len(raw) > MAX_BYTES


def load_stages(
    ir_dir: Path | None, ir: dict[str, Any] | None, kernel: str | None, allowed: RootSet
) -> list[Stage]:
    """The before / after / Ascend C texts of one kernel of a bundle's ir/ directory.

    Every file is read only when its real path (links followed) is inside `allowed`, the
    directories the dashboard serves. Without an ir.json stage list the conventional single-kernel
    names are tried (tvmscript.py, final.py, kernel.cpp).
    """
    if ir_dir is None or not ir_dir.is_dir():
        return []
    listed = _stage_files(ir, kernel) or {
        "tvmscript": "tvmscript.py",
        "final": "final.py",
        "ascendc": "kernel.cpp",
    }
    stages: list[Stage] = []
    for stage, title, lexer in PANES:
        if stage == "source":
            src = _kernel_source(ir_dir, ir, allowed)
            if src is not None:
                stages.append(src)
            continue
        name = listed.get(stage)
        got = _read_confined(ir_dir, name, allowed) if name else None
        if got is not None and name is not None:
            stages.append(Stage(stage, title, name, got[0], lexer, got[1]))
    return stages


def _kernel_source(ir_dir: Path, ir: dict[str, Any] | None, allowed: RootSet) -> Stage | None:
    """The bundle's copy of the kernel file (`kernel/<name>.py` beside ir/).

    ir.json records where the kernel lived when it was captured (repo-relative, for SARIF); the
    dashboard reads only the bundle's own copy: a file directly in the bundle's kernel/ folder,
    whose real path must still be inside the served directories (kernel/ may be a link).
    """
    recorded = ir.get("kernel_file") if isinstance(ir, dict) else None
    if not isinstance(recorded, str) or not recorded:
        return None
    name = Path(recorded.replace("\\", "/")).name
    got = _read_confined(ir_dir.parent / "kernel", name, allowed) if name else None
    if got is None:
        return None
    return Stage("source", "Kernel source", name, got[0], "python", got[1])


def _norm(file: str) -> str:
    """Location files are relative to the bundle (`ir/pv/kernel.cpp`); stage files to ir/."""
    return file.removeprefix("./").removeprefix("ir/")


def _same_file(loc_file: str, stage: Stage) -> bool:
    # Source locations carry the kernel's recorded path (`sample_traces/kernels/fa.py`), the pane
    # shows the bundle's copy of the same file: compare names there.
    if stage.stage == "source":
        return Path(loc_file).name == stage.file
    return _norm(loc_file) == stage.file


def kernel_of_locations(ir: dict[str, Any] | None, locations: Iterable[dict[str, Any]]) -> str | None:
    """The first kernel whose stage files a finding's locations point into."""
    files = {_norm(str(loc.get("file", ""))) for loc in locations}
    for name in ir_kernels(ir):
        if files & set(_stage_files(ir, name).values()):
            return name
    return None


def mark_locations(
    stages: list[Stage],
    locations: Iterable[dict[str, Any]],
    line_map: list[dict[str, Any]] | None = None,
    kernel: str | None = None,
) -> None:
    """Mark the lines a finding points at in the shown files, then carry them across stages
    through the ir.json line map (tvmscript <-> ascendc rows of the same kernel)."""
    by_stage = {s.stage: s for s in stages}
    for loc in locations:
        stage = by_stage.get(str(loc.get("stage", "")))
        line = loc.get("line")
        if stage is None or not isinstance(line, int) or not _same_file(str(loc.get("file", "")), stage):
            continue
        end_line = loc.get("end_line")
        end = end_line if isinstance(end_line, int) else line
        stage.marked.update(range(line, max(line, end) + 1))
    for row in line_map or []:
        if kernel is not None and row.get("kernel") not in (None, kernel):
            continue
        if any(_row_lines(row, st) & by_stage[st].marked for st in _LINE_MAP_KEYS if st in by_stage):
            for st in _LINE_MAP_KEYS:
                if st in by_stage:
                    by_stage[st].marked |= _row_lines(row, st)
    # "final" has no line-map column: its marks come only from locations that name it.


def _row_lines(row: dict[str, Any], stage: str) -> set[int]:
    value = row.get(_LINE_MAP_KEYS[stage])
    if isinstance(value, int):
        return {value}
    if isinstance(value, list):
        return {v for v in value if isinstance(v, int)}
    return set()


# Token classes the stylesheet colours (dashboard/assets/tilescope.css). Every other token (names,
# punctuation, whitespace) is plain text and merges into its neighbours, which keeps a pane at a
# few spans per line instead of one per token (the payload of a real kernel dropped ~4x).
COLOURED = frozenset(
    {
        "k",
        "kn",
        "kd",
        "kr",
        "kc",
        "kt",
        "ow",
        "s",
        "s1",
        "s2",
        "sa",
        "sb",
        "se",
        "si",
        "sd",
        "dl",
        "c",
        "c1",
        "cm",
        "cs",
        "ch",
        "cp",
        "cpf",
        "m",
        "mi",
        "mf",
        "mh",
        "mo",
        "mb",
        "nf",
        "fm",
        "nd",
        "nb",
        "bp",
    }
)


def _css_class(ttype: _TokenType) -> str:
    """Pygments' short class ('k', 'nf', 's2'...) when we colour it, else '' (plain text)."""
    while ttype not in STANDARD_TYPES and ttype.parent is not None:
        ttype = ttype.parent
    cls = STANDARD_TYPES.get(ttype, "")
    return cls if cls in COLOURED else ""


def highlight_lines(text: str, lexer: str) -> list[list[tuple[str, str]]]:
    """Per line, (css class, text) runs with adjacent same-class tokens merged."""
    lex = (
        CppLexer(stripnl=False, ensurenl=False)
        if lexer == "cpp"
        else PythonLexer(stripnl=False, ensurenl=False)
    )
    lines: list[list[tuple[str, str]]] = [[]]
    for ttype, value in lex.get_tokens(text):
        cls = _css_class(ttype)
        parts = value.split("\n")
        for i, part in enumerate(parts):
            if i:
                lines.append([])
            if not part:
                continue
            run = lines[-1]
            if run and run[-1][0] == cls:
                run[-1] = (cls, run[-1][1] + part)
            else:
                run.append((cls, part))
    if lines and not lines[-1] and text.endswith("\n"):
        lines.pop()
    return lines


def line_window(total: int, marked: set[int], size: int = WINDOW_LINES) -> tuple[int, int]:
    """1-based inclusive [first, last] lines to render: all of them, or `size` around the first mark."""
    if total <= size:
        return 1, total
    centre = min(marked) if marked else 1
    first = max(1, min(centre - size // 3, total - size + 1))
    return first, first + size - 1


@functools.lru_cache(maxsize=32)
def _split(text: str) -> tuple[str, ...]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return tuple(lines)


@functools.lru_cache(maxsize=64)
def _highlighted(text: str, lexer: str, first: int, last: int) -> tuple[tuple[str, ...], ...]:
    """Lines first..last (1-based, inclusive) as flat (class, text, class, text, ...) runs.

    Highlighting only the window keeps big files cheap; a string or comment opened above the
    window may be coloured as code, an accepted cost. A file of at most WINDOW_LINES lines has
    one window, so it is highlighted once whatever finding is marked."""
    lines = _split(text)[first - 1 : last]
    runs = highlight_lines("\n".join(lines), lexer)
    runs += [[] for _ in range(len(lines) - len(runs))]  # trailing empty lines yield no runs
    return tuple(tuple(part for run in line for part in run) for line in runs)


def stage_data(stage: Stage, pane_id: str) -> dict[str, Any]:
    """One pane as the page draws it (dashboard/assets/ir_view.js): its title, file, a summary of
    its marks, and the window of highlighted lines starting at line `first`."""
    total = len(_split(stage.text))
    hottest = {max(stage.heat, key=lambda n: stage.heat[n][0])} if stage.heat else set()
    first, last = line_window(total, stage.marked or hottest)
    notes = []
    if first > 1 or last < total:
        notes.append(f"lines {first}–{last} of {total} shown")
    if stage.truncated:
        notes.append(f"file cut at {MAX_BYTES:,} bytes")
    marked = sorted(stage.marked)
    summary = f"lines {marked[0]}–{marked[-1]} marked" if marked else "no line marked"
    if stage.heat:
        summary += f" · {len(stage.heat)} line{'s' if len(stage.heat) != 1 else ''} measured"
    if notes:
        summary += " · " + "; ".join(notes)
    return {
        "id": pane_id,
        "title": stage.title,
        "file": short(stage.file),
        "path": stage.file,
        "summary": summary,
        "first": first,
        "lines": _highlighted(stage.text, stage.lexer, first, last) if total else (),
        "marked": [n for n in marked if first <= n <= last],
        # [line, share, label] of the measured lines shown (ir_view.js draws the bars)
        "heat": [[n, round(v[0], 6), v[1]] for n, v in sorted(stage.heat.items()) if first <= n <= last],
    }
