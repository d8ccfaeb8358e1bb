"""Neutralise untrusted text (kernel names, shapes, paths from trace files) for every output.

Everything a profiler writes can be chosen by whoever produced the trace, and reports are posted
into pull requests and opened in browsers. Each helper here targets one output context; callers
pick the helper for the context they write into and never concatenate raw strings.
"""

from __future__ import annotations

import html
import json
import math
import re
from typing import Any

# CommonMark lets any ASCII punctuation be backslash-escaped. We escape every character that can
# start markup in an inline context: emphasis, code, links and images, HTML tags and entities,
# table cells, strikethrough, GitHub math (`$`), and the `:` and `.` of autolinks
# (`http://`, `www.`). Values are always placed after other text on a line, so characters that are
# special only at the start of a line (`-`, `=`, `1.`) are escaped only there.
_MD_PUNCT = frozenset("\\`*_{}[]()#+.!|<>~:&$")
_MD_LINE_START = frozenset("-=+>")

# GitHub turns `@user`, `@org/team` and `#123` into mentions and cross-references even after
# backslash escapes (it works on the rendered text). A zero-width space after the sigil breaks
# the reference while the text still reads the same — the approach Dependabot uses for
# release notes.
_ZWSP = "\u200b"

# Characters that act rather than show: C0 controls (ESC starts a terminal's CSI/OSC sequences:
# clear screen, OSC 8 hyperlinks, window titles; BEL, BS and CR overwrite what was printed), DEL, C1
# controls (U+009B is a one-character CSI on some terminals), the Unicode line/paragraph
# separators, and the bidi embeddings, overrides and isolates that reorder what is displayed
# (CVE-2021-42574, "Trojan Source").
_UNSAFE_CHARS = r"\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"

# Example: "line\nbreak\ttab\x00nul" -> control characters and newlines (which would end a table
# row or start a new Markdown block) become single spaces.
_CONTROL = re.compile(f"[{_UNSAFE_CHARS}]+")

MAX_INLINE = 200  # characters of one untrusted value shown inline before it is shortened


def one_line(text: object, limit: int | None = MAX_INLINE) -> str:
    """Flatten `text` to one line and shorten it (with an ellipsis) beyond `limit` characters."""
    return _shorten(_CONTROL.sub(" ", str(text)), limit)


def _shorten(s: str, limit: int | None) -> str:
    """`s` cut to `limit` characters, its last one an ellipsis, when it is longer."""
    return s[: max(limit - 1, 0)] + "…" if limit is not None and len(s) > limit else s


def _break_mentions(s: str) -> str:
    # Example: "@org/team" -> "@\u200borg/team"; "#12" -> "#\u200b12"
    return re.sub(r"([@#])(?=[\w-])", "\\1" + _ZWSP, s)


_TERMINAL_UNSAFE = re.compile(f"[{_UNSAFE_CHARS}]")
_NAMED_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _visible_escape(match: re.Match[str]) -> str:
    ch = match.group()
    code = ord(ch)
    return _NAMED_ESCAPES.get(ch) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def terminal_text(text: object, limit: int | None = None) -> str:
    r"""Untrusted text made inert for a terminal: every character of `_TERMINAL_UNSAFE` is shown as
    the Python-style escape that names it (`\x1b`, `\x07`, `\t`, `\n`, `\r`, `\x9b`, `\u202e`),
    so the result is one line and nothing in it drives the terminal; beyond `limit` characters it
    is shortened with an ellipsis.

    Example: "a" ESC "[2Jb" -> `a\x1b[2Jb`; "evil" CR LF "name" -> `evil\r\nname`.

    Backslash escapes rather than the Control Pictures (U+2400 block): those exist for C0 and DEL
    only, not for C1 or the bidi controls, and `\x1b` reads the same in every font. A backslash
    already in the text is left alone (paths keep their look); the JSON output has the exact text.
    Rich markup is a separate matter: callers print the result as a `rich.text.Text`, never as a
    markup string, so `[/bold]` or `[link=...]` in a name is printed as those characters.
    """
    return _shorten(_TERMINAL_UNSAFE.sub(_visible_escape, str(text)), limit)


# OWASP "CSV Injection": a spreadsheet runs a cell that starts with one of these as a formula
# (`=HYPERLINK(...)`, `@SUM(...)`, `-2+3+cmd|...`). OWASP also lists TAB and CR; `csv_cell` has
# already made those visible (`\t`, `\r`), so no cell can start with them.
_FORMULA_START = frozenset("=+-@")
# Example: "-1", "+2.5", "1e-3" are numbers: a spreadsheet reads them as values and runs nothing,
# so they keep their sign; "-1+cmd", "+1)" and "-inf" are not numbers.
_PLAIN_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def csv_cell(text: object) -> str:
    r"""An untrusted text cell of a CSV we write: inert in a spreadsheet and in a terminal.

    Control characters become visible escapes (`terminal_text`: `kernels --format csv` prints to
    the terminal unless -o is given), then a cell a spreadsheet would run as a formula gets a
    leading `'` (OWASP's neutralisation; Excel and LibreOffice do not show it). Numeric columns
    are never passed here, and a text cell that is a plain number keeps its sign.

    Example: `=HYPERLINK("http://x","y")` -> `'=HYPERLINK("http://x","y")`; `@SUM(A1)` ->
    `'@SUM(A1)`; `-cmd` -> `'-cmd`; `-1` -> `-1`; "name" BEL -> `name\x07`.
    """
    s = terminal_text(text)
    if s[:1] in _FORMULA_START and not _PLAIN_NUMBER.fullmatch(s):
        return "'" + s
    return s


def md_text(text: object, limit: int | None = MAX_INLINE) -> str:
    """Untrusted text as inert inline Markdown (safe in paragraphs, list items and table cells)."""
    flat = one_line(text, limit)
    escaped = "".join("\\" + ch if ch in _MD_PUNCT else ch for ch in flat)
    if escaped[:1] in _MD_LINE_START:
        escaped = "\\" + escaped
    return _break_mentions(escaped)


def md_code_span(text: object, limit: int | None = MAX_INLINE) -> str:
    """Untrusted text as an inline code span, safe inside a GFM table cell.

    The delimiter is a backtick run longer than any run inside; `|` still needs a backslash
    because GFM splits table cells before it parses code spans.
    """
    flat = one_line(text, limit).replace("|", "\\|")
    longest = max((len(m) for m in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    # A space pad stops a leading/trailing backtick from merging with the delimiter.
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat.strip() else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def md_code_block(code: str, lang: str = "") -> str:
    """A fenced code block whose fence is longer than any backtick run inside `code`.

    Mentions, HTML and link syntax are inert inside a fence, so the content is kept verbatim
    (newlines included); only the info string is restricted, since it comes from a file suffix.
    """
    longest = max((len(m) for m in re.findall(r"`{3,}", code)), default=0)
    fence = "`" * max(3, longest + 1)
    # Example: "c++" ok, "py`x" or "py onclick" -> "" (an info string may not hold backticks/spaces)
    info = lang if re.fullmatch(r"[A-Za-z0-9_+-]{0,20}", lang) else ""
    body = code if code.endswith("\n") else code + "\n"
    return f"{fence}{info}\n{body}{fence}"


def html_text(text: object, limit: int | None = None) -> str:
    """Untrusted text for an HTML text node or a quoted attribute value."""
    s = str(text) if limit is None else one_line(text, limit)
    return html.escape(s, quote=True)


def md_html_text(text: object, limit: int | None = MAX_INLINE) -> str:
    """Untrusted text inside raw HTML that GitHub renders (e.g. a `<details><summary>`).

    Markdown is not parsed there, so backslashes would show; HTML escaping is what applies, and
    mentions are still linked by GitHub, so they are broken too.
    """
    # mentions first: broken after escaping, the `#` of an entity such as `&#x27;` (html.escape's
    # apostrophe) would be split from its `x27;` and the page would show the raw entity
    return html.escape(_break_mentions(one_line(text, limit)), quote=True)


def plotly_text(text: object, limit: int | None = MAX_INLINE) -> str:
    """Untrusted text for a plotly label, title or hover text.

    Plotly interprets a subset of HTML in labels (`<b>`, `<br>`, `<a href>`); it decodes `&lt;`,
    `&gt;` and `&amp;` back into characters as plain SVG text, so escaping those three makes the
    label show the literal string.
    """
    return one_line(text, limit).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def json_for_script(value: Any) -> str:
    """JSON that is safe inside an HTML `<script>` element.

    `</script>` or `<!--` in a string would end or confuse the script element, so `<`, `>` and
    `&` are written as \\u escapes (still the same JSON value); U+2028/U+2029 are escaped because
    older JavaScript parsers treat them as line terminators inside string literals.
    """
    return script_safe(json.dumps(finite(value), ensure_ascii=False, allow_nan=False, default=str))


def script_safe(json_text: str) -> str:
    """Make already-serialised JSON safe inside `<script>` (see `json_for_script`).

    In JSON text `<`, `>`, `&` and the two separators can only occur inside strings, where the
    \\u escape denotes the same character, so the replacement never changes the value.
    """
    return (
        json_text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def finite(value: Any) -> Any:
    """`value` with NaN/Infinity floats replaced by None (JSON has neither; a metric the profile
    did not collect becomes null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def sarif_text(text: object, limit: int | None = 2000) -> str:
    """Untrusted text for a SARIF `message.text`.

    SARIF plain-text messages turn `[text](target)` into embedded links (SARIF 2.1.0 §3.11.6);
    the spec's escape for literal brackets (and the backslash itself) is a backslash.
    """
    s = str(text) if limit is None else one_line(text, limit)
    return s.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def md_nowrap(cell: str) -> str:
    """A Markdown table cell kept on one line: GitHub wraps a narrow column at every space, which
    put `43.7 µs` over two lines and `1,285.9 µs [1,274.3 µs–1,299.2 µs] (n=16)` over five;
    no-break spaces keep it whole. Apply to escaped text (the space is all it changes)."""
    return cell.replace(" ", "\u00a0")
