"""How wide terminal output is, and prose wrapped to it without splitting a number from its unit.

docs/product.md: terminal output is a tidy table. Tidy at any width means: the terminal's own width
when stdout is one (rich measures it, `COLUMNS` overrides), no wrapping at all when the output goes
to a pipe or a file (a log, `less -S`, `grep` want whole lines; nothing is cut), and `--width N` to
choose. Kernel names cut to a column are cut where they say least (`cut_name`, `fit_names`):
their shapes, then their middle, never the op at their head. Whatever the width, `29.2 µs` and
`66.7 %` stay on one line: the wrapping here treats a number and its unit as one word, and tables
keep numeric columns unwrapped.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
from typing import IO, Any

from rich.cells import cell_len, chop_cells

# Wide enough that no line of ours wraps: what "no width" means for a rich Console (which always
# has one). Rich pads nothing to it (tables are as wide as their content, prose is not justified).
UNLIMITED = 1_000_000
MIN_WIDTH = 20  # `--width` below this cannot hold a finding's first words
WIDTH_HELP = ("Wrap text output at N columns (default: the terminal's width; no wrapping when "
              "stdout is a pipe or a file).")

# A number and the unit after it, glued for wrapping.
# Example: "29.2 µs", "(66.7 %)", "1,750 GB/s", "−3.1 %", "131,072 B", "[43.1 µs–44.0 µs]"
_NUMBER_UNIT = re.compile(
    r"(?<![\w.])[-+−]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)? "
    r"(?=(?:%|µs|ms|ns|s|B|KiB|MiB|GiB|KB|MB|GB|GB/s|TB/s|MHz|GHz|TFLOP/s|cycles)(?!\w))"
)
# Example: "(< 80 %)", "≤ 100 %": a comparison stays with the number it compares to
_OPERATOR_NUMBER = re.compile(r"(?<!\w)[<>≤≥=≈~] (?=[-+−]?\d)")
_GLUE = "\u00a0"  # stands for the glued space while wrapping; printed as a plain space


def output_width(requested: int | None, stream: IO[str] | None = None) -> int | None:
    """The width to wrap at: `requested` (`--width`), else the terminal's when `stream` (stdout by
    default) is one, else None: no wrapping for a pipe or a file."""
    if requested is not None:
        return max(int(requested), MIN_WIDTH)
    out = sys.stdout if stream is None else stream
    try:
        tty = out.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        tty = False
    if not tty:
        return None
    # deferred: rich.console only for terminal output
    from rich.console import Console

    return max(Console(file=out).width, MIN_WIDTH)  # rich: the terminal's size, or $COLUMNS


def console(width: int | None, *, file: IO[str] | None = None, color: bool | None = None,
            stderr: bool = False) -> Any:
    """A rich Console that wraps at `width` (None: never). `color` None lets rich decide (a terminal
    gets colours, a pipe none); markup is never read from printed strings' highlights. When the
    reader of stdout goes away (`| head`) it goes quiet instead of exiting 1, so the command ends
    as it would have (its gate included)."""
    # deferred: rich.console only for terminal output
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich's own raises SystemExit(1)
            reader_gone()
            self.quiet = True

    opts: dict[str, Any] = {"width": width or UNLIMITED, "highlight": False, "stderr": stderr}
    if file is not None:
        opts["file"] = file
    if color is not None:
        opts["force_terminal"] = color
        opts["no_color"] = not color
    return _Console(**opts)


def reader_gone() -> None:
    """Point stdout at /dev/null after EPIPE: what is left to print goes nowhere, quietly, and the
    flush at exit cannot fail again (the reader, `head`, has what it wanted)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def write_stdout(text: str) -> None:
    """Write a whole output to stdout; a reader that left early (`| head`) is not an error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        reader_gone()


def wrap(text: str, width: int | None, indent: str = "", hang: str | None = None) -> list[str]:
    """`text` as lines of at most `width` terminal cells: the first starts with `indent` (and the
    text's own leading spaces), the rest with `hang` (default `indent`). Words move whole to the
    next line, a number with its unit; the spaces between words are kept (aligned columns stay
    aligned) except where a line breaks. Only a word wider than a whole line (a long kernel name,
    a path) is cut. `width` None: one line."""
    hang = indent if hang is None else hang
    stripped = text.lstrip(" ")
    indent += text[: len(text) - len(stripped)]
    if width is None:
        return [indent + stripped]
    glued = _NUMBER_UNIT.sub(lambda m: m.group(0)[:-1] + _GLUE, stripped)
    glued = _OPERATOR_NUMBER.sub(lambda m: m.group(0)[:-1] + _GLUE, glued)
    # Example: "a  b c" -> ["a", "  ", "b", " ", "c"]: words and the runs of spaces after them
    tokens = re.split(r"( +)", glued.rstrip(" "))
    lines: list[str] = []
    line = ""

    def room() -> int:
        return max(width - cell_len(hang if lines else indent), 1)

    def close() -> None:
        nonlocal line
        lines.append((hang if lines else indent) + line)
        line = ""

    for i in range(0, len(tokens), 2):
        word = tokens[i]
        space = tokens[i - 1] if i else ""
        candidate = line + space + word if line else word
        if cell_len(candidate) <= room():
            line = candidate
            continue
        if line:
            close()
        while cell_len(word) > room():
            head = chop_cells(word, room())[0]
            line = head
            close()
            word = word[len(head):]
        line = word
    if line or not lines:
        close()
    return [ln.replace(_GLUE, " ") for ln in lines]


# Where a kernel name's shapes or arguments start: "Mul [1,2048,32,128;…]", "MatMul(…)".
_SHAPE_TAIL = re.compile(r" ?[\[(]")
SUFFIX_MAX = 8  # cells of a name's last `_` part kept after a cut (`…_mix_aic`: which side of a mix)


def cut_name(text: str, width: int) -> str:
    """A kernel name in `width` cells, cut where it says least and marked with "…": its shapes
    first (`aclnnMul_MulAiCore_Mul [1,2048,…`), then the middle of the name itself, keeping its head
    (the op) and a short last part (`flash_fwd_ke…_mix_aic`: generated names share prefixes and
    differ in such suffixes). Never the head: a name cut to its tail is not recognisable."""
    if cell_len(text) <= width:
        return text
    if width < 2:
        return "…"[:width]
    shape = _SHAPE_TAIL.search(text, 1)
    base = text[: shape.start()] if shape else text
    if cell_len(base) + 1 <= width:  # the name fits: cut its shapes
        return chop_cells(text, width - 1)[0] + "…"
    last = base.rsplit("_", 1)
    suffix = "_" + last[1] if len(last) == 2 and last[0] and 0 < cell_len(last[1]) < SUFFIX_MAX else ""
    if cell_len(suffix) > (width - 1) // 2:  # the head keeps at least half
        suffix = ""
    head = chop_cells(base, width - 1 - cell_len(suffix))[0]
    return head + "…" + suffix


def fit_names(names: list[str], width: int, limit: int = 3) -> str:
    """`A, B +4`: the first names (at most `limit`) that fit `width` cells whole with the count of
    the others; the first one cut (`cut_name`) only when even it alone does not fit."""
    shown: list[str] = []
    for i, name in enumerate(names[:limit]):
        rest = len(names) - i - 1
        more = f" +{rest}" if rest else ""
        candidate = ", ".join([*shown, name]) + more
        if cell_len(candidate) <= width:
            shown.append(name)
            continue
        if not shown:  # the first name: cut it, keep the count
            return cut_name(name, max(width - cell_len(more), 1)) + more
        break
    rest = len(names) - len(shown)
    return ", ".join(shown) + (f" +{rest}" if rest else "")
