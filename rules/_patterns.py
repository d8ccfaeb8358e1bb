"""Fusible-pattern matching for TS102 (and TS101, which leaves matched kernels to TS102).

Each kernel's op type becomes one code point; a stream's kernels become a string; each pattern
becomes a regular expression over those code points. One `re.finditer` per pattern then scans a
million-launch table in linear time, with no per-row Python.
"""

from __future__ import annotations

import fnmatch
import functools
import itertools
import re
import tomllib
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tilescope.columns import AICORE_TYPES
from tilescope.errors import UsageError
from tilescope.rules._columns import NON_COMPUTE_TYPES, core_type_codes, num, op_type_codes, text_codes
from tilescope.rules._intervals import end_ns, start_ns, stream_key, stream_ordered
from tilescope.rules._shapes import _tensor_elems

# ---------------------------------------------------------------------------------------------
# fusible-pattern matching (TS102, and TS101 to avoid reporting the same kernels twice)
# ---------------------------------------------------------------------------------------------

BUILTIN_PATTERNS = Path(__file__).with_name("patterns.toml")
_REPEATS = {"1": "", "?": "?", "*": "{0,8}", "+": "{1,8}"}
_SEP, _OTHER, _CLAIMED, _BASE = 0x0A, 0x20, 0x21, 0x100


@dataclass(frozen=True)
class PatternStep:
    name: str
    ops: tuple[str, ...]
    repeat: str = "1"


@dataclass(frozen=True)
class Pattern:
    id: str
    title: str
    replacement: str
    steps: tuple[PatternStep, ...]
    host_steps: tuple[PatternStep, ...] = ()
    keep: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    require_one_of: tuple[str, ...] = ()
    tilelang: str = ""
    linked: bool = False  # each kernel must consume a tensor the previous one produced (same elements)
    source: str = ""


@dataclass(slots=True)  # ~200,000 of them for a million kernels: no __dict__ each
class PatternMatch:
    pattern: Pattern
    rows: list[int]  # positional rows of the kernel table, in stream order
    # (step name, first, end) offsets into rows; one list shared by the matches of one shape
    spans: list[tuple[str, int, int]]
    interleaved: list[int] = field(default_factory=list)

    @property
    def roles(self) -> list[str]:
        return [name for name, a, b in self.spans for _ in range(b - a)]

    def kept_offsets(self) -> list[int]:
        return [i for name, a, b in self.spans if name in self.pattern.keep for i in range(a, b)]


def _steps(raw: Any, where: str) -> tuple[PatternStep, ...]:
    out = []
    for i, s in enumerate(raw or ()):
        rep = str(s.get("repeat", "1"))
        if rep not in _REPEATS or not s.get("ops"):
            raise UsageError(f"{where}: step {i + 1} needs 'ops' and a repeat of 1, ?, * or +")
        out.append(PatternStep(str(s.get("name", f"step{i + 1}")), tuple(str(o) for o in s["ops"]), rep))
    return tuple(out)


def _pattern_table(path: Path) -> list[dict[str, Any]]:
    """The `[[pattern]]` entries of one file, parsed once per version of the file: TS101 and
    TS102 load them for every profile, and a multi-rank run has hundreds (tomllib: ~5 ms a file)."""
    try:
        st = path.stat()
        return _parsed_patterns(str(path), st.st_size, st.st_mtime_ns)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: cannot read pattern file ({exc})") from exc


@functools.lru_cache(maxsize=32)
def _parsed_patterns(path: str, _size: int, _mtime_ns: int) -> list[dict[str, Any]]:
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    return list(data.get("pattern", []))


def load_patterns(extra_files: Sequence[str | Path] = ()) -> list[Pattern]:
    """The user's patterns first (they are tried, and claim kernels, before the built-in ones), then
    the built-in patterns; a user pattern with a built-in id replaces it."""
    by_id: dict[str, Pattern] = {}
    for path in [*[Path(p) for p in extra_files], BUILTIN_PATTERNS]:
        for j, p in enumerate(_pattern_table(path)):
            where = f"{path}: pattern {j + 1}"
            if "id" not in p or "steps" not in p:
                raise UsageError(f"{where}: needs 'id' and 'steps'")
            if str(p["id"]) in by_id:
                continue  # already defined by a user file
            by_id[str(p["id"])] = Pattern(
                id=str(p["id"]),
                title=str(p.get("title", p["id"])),
                replacement=str(p.get("replacement", "")),
                steps=_steps(p["steps"], where),
                host_steps=_steps(p.get("host_steps"), where),
                keep=tuple(p.get("keep", ())),
                exclude=tuple(p.get("exclude", ())),
                require_one_of=tuple(p.get("require_one_of", ())),
                tilelang=str(p.get("tilelang", "")),
                linked=bool(p.get("linked", False)),
                source="builtin:rules/patterns.toml" if path == BUILTIN_PATTERNS else str(path),
            )
    return list(by_id.values())


def _glob_codes(vocab: dict[str, int], globs: Sequence[str], exclude: Sequence[str]) -> list[int]:
    lowered = [g.lower() for g in globs]
    ex = [g.lower() for g in exclude]
    return [
        code
        for op, code in vocab.items()
        if any(fnmatch.fnmatchcase(op.lower(), g) for g in lowered)
        and not any(fnmatch.fnmatchcase(op.lower(), g) for g in ex)
    ]


def _pattern_regex(
    pattern: Pattern, steps: tuple[PatternStep, ...], vocab: dict[str, int]
) -> re.Pattern[str] | None:
    parts = []
    for i, step in enumerate(steps):
        codes = _glob_codes(vocab, step.ops, pattern.exclude)
        if not codes:
            if step.repeat in ("?", "*"):
                parts.append(f"(?P<s{i}>)")
                continue
            return None  # a mandatory step no op type of this profile can play
        cls = "[" + "".join(re.escape(chr(c)) for c in codes) + "]"
        parts.append(f"(?P<s{i}>{cls}{_REPEATS[step.repeat]})")
    return re.compile("".join(parts))


_Found = tuple[Pattern, int, int, list[tuple[str, int, int]]]


def _run_matches(
    codes: np.ndarray, patterns: Sequence[Pattern], vocab: dict[str, int], host: bool
) -> list[_Found]:
    """Match every pattern over one code-point sequence; earlier patterns claim their kernels."""
    out: list[_Found] = []
    codes = codes.copy()
    for pat in patterns:
        steps = pat.host_steps if host else pat.steps
        if not steps:
            continue
        rx = _pattern_regex(pat, steps, vocab)
        if rx is None:
            continue
        text_ = codes.astype("<u4").tobytes().decode("utf-32-le")
        names = [st.name for st in steps]
        # Group i + 1 is step i (the regex has only the named groups s0, s1, ...).
        required = [i + 1 for i, st in enumerate(steps) if st.name in pat.require_one_of]
        claimed: list[tuple[int, int]] = []
        # matches of one shape (the same steps over the same offsets) share one spans list: a
        # million kernels give ~200,000 matches of a few shapes, ~80 MB as a list each
        shapes: dict[tuple[tuple[int, int], ...], list[tuple[str, int, int]]] = {}
        for m in rx.finditer(text_):
            regs = m.regs
            a, b = regs[0]
            if b == a:
                continue
            if required and not any(regs[g][1] > regs[g][0] for g in required):
                continue
            offsets = tuple((s - a, e - a) for s, e in regs[1:])
            spans = shapes.get(offsets)
            if spans is None:
                spans = shapes[offsets] = [(n, s, e) for n, (s, e) in zip(names, offsets, strict=True)]
            out.append((pat, a, b, spans))
            claimed.append((a, b))
        # Matches of one pattern never overlap: claiming them after the scan is the same as during it.
        if claimed:
            bounds = np.array(claimed, dtype=np.int64)
            n = len(codes) + 1
            delta = np.bincount(bounds[:, 0], minlength=n) - np.bincount(bounds[:, 1], minlength=n)
            codes[np.cumsum(delta[:-1]) > 0] = _CLAIMED
    return out


# TS101 and TS102 match the same table with the same patterns: keep the last result per table.
_CACHE: dict[int, tuple[weakref.ref[pd.DataFrame], tuple[Pattern, ...], list[PatternMatch]]] = {}


def match_patterns(df: pd.DataFrame, patterns: Sequence[Pattern]) -> list[PatternMatch]:
    """Find every occurrence of every pattern in the AI Core kernel sequence of each stream."""
    if df.empty or not patterns:
        return []
    hit = _CACHE.get(id(df))
    if hit is not None and hit[0]() is df and hit[1] == tuple(patterns):
        return hit[2]
    result = _match_patterns(df, patterns)
    _CACHE.clear()  # one table at a time: a long-lived process must not pin old profiles
    _CACHE[id(df)] = (weakref.ref(df), tuple(patterns), result)
    return result


def forget_matches(df: pd.DataFrame) -> None:
    """Drop the cached matches of `df` once their last reader (TS102, after TS101 in every rule
    order) is done: ~0.8 KB per match, 150 MB on a million kernels, that would otherwise stay
    alive through the report until another table is matched."""
    hit = _CACHE.get(id(df))
    if hit is not None and hit[0]() is df:
        del _CACHE[id(df)]


def _match_patterns(df: pd.DataFrame, patterns: Sequence[Pattern]) -> list[PatternMatch]:
    # Core and op types and shapes as codes into their distinct strings (`text_codes`): a string
    # column per row of a 3 M-kernel table, held while the matches are built, set TS101's peak.
    core, core_labels = core_type_codes(df)
    in_seq_label = np.asarray([c in AICORE_TYPES or c == "" for c in core_labels], dtype=bool)
    in_seq = in_seq_label[core]
    order = stream_ordered(df)
    order = order[in_seq[order["_row"].to_numpy()]].reset_index(drop=True)
    if order.empty:
        return []
    rows = order["_row"].to_numpy()
    stream_change = np.diff(order["_stream"].to_numpy()) != 0
    del order
    op, op_labels = op_type_codes(df)
    # factorize numbers the op types in order of first appearance, as pd.unique lists them (equal
    # codes are equal op types: numbering the codes numbers the types)
    op_codes, uniq_codes = pd.factorize(op[rows])
    del op
    vocab = {str(op_labels[c]): _BASE + i for i, c in enumerate(uniq_codes)}
    seq_codes = op_codes.astype("int64") + _BASE
    del op_codes
    # A separator between streams keeps a match inside one stream.
    boundaries = np.flatnonzero(stream_change) + 1
    codes = np.insert(seq_codes, boundaries, _SEP)
    pos_rows = np.insert(rows, boundaries, -1)
    del seq_codes, rows, stream_change, boundaries
    found = _run_matches(codes, patterns, vocab, host=False)
    del codes
    if not found:
        return []
    ins, outs = text_codes(df, "input_shapes"), text_codes(df, "output_shapes")
    result = []
    pos_list = pos_rows.tolist()  # list slices: no array per match
    del pos_rows
    for pat, a, b, spans in found:
        krows = pos_list[a:b]
        if pat.linked and not _linked(krows, ins, outs):
            continue
        result.append(PatternMatch(pat, krows, spans))
    del found, pos_list, ins, outs
    if not result:
        return result
    # Kernels outside the sequence (other streams, AI_CPU, DSA_SQE) that ran inside a match's window.
    starts, ends = start_ns(df).to_numpy(), end_ns(df).to_numpy()
    streams = stream_key(df).to_numpy()
    compute_label = np.asarray([c not in NON_COMPUTE_TYPES for c in core_labels], dtype=bool)
    others = np.flatnonzero(compute_label[core])
    del core
    others_sorted = others[np.argsort(starts[others], kind="stable")]
    del others
    other_starts = starts[others_sorted]
    # Interleaved kernels for all matches at once: windows -> searchsorted; lists only where non-empty.
    firsts = np.array([m.rows[0] for m in result])
    lasts = np.array([m.rows[-1] for m in result])
    lo = np.searchsorted(other_starts, starts[firsts], "left")
    hi = np.searchsorted(other_starts, ends[lasts], "right")
    # A window's own sequence kernels (same stream, in the sequence) are not interleaved: count
    # what is left per window with prefix sums, one pass per stream, and list only those windows.
    left = hi - lo
    own_stream, seq_other = streams[firsts], in_seq[others_sorted]
    other_streams = streams[others_sorted]
    for s in np.unique(own_stream):
        sel = np.flatnonzero(own_stream == s)
        own = np.concatenate([[0], np.cumsum((other_streams == s) & seq_other)])
        left[sel] -= own[hi[sel]] - own[lo[sel]]
    for j in np.flatnonzero(left > 0):
        cand = others_sorted[lo[j] : hi[j]]
        cand = cand[(streams[cand] != streams[firsts[j]]) | ~in_seq[cand]]
        result[j].interleaved = cand.tolist()
    return result


@functools.lru_cache(maxsize=65536)
def _elem_set(shapes: str) -> set[int]:
    return {n for n in (_tensor_elems(t) for t in shapes.split(";")) if n > 1}


def _linked(
    rows: list[int], ins: tuple[np.ndarray, np.ndarray], outs: tuple[np.ndarray, np.ndarray]
) -> bool:
    """Each kernel reads a tensor with as many elements as one its predecessor wrote (views allowed).
    `ins` and `outs` are the shape columns as (codes, labels) (`tilescope.rules._columns.text_codes`).

    Unknown shapes do not veto a match: TileLang and level-0 tables carry none.
    """
    (in_codes, in_labels), (out_codes, out_labels) = ins, outs
    for a, b in itertools.pairwise(rows):
        out_s, in_s = str(out_labels[out_codes[a]]), str(in_labels[in_codes[b]])
        if out_s and in_s and not _elem_set(out_s) & _elem_set(in_s):
            return False
    return True


_HOST_IGNORE = (
    "aten::view",
    "aten::as_strided",
    "aten::empty*",
    "aten::unsqueeze",
    "aten::squeeze",
    "aten::t",
    "aten::transpose",
    "aten::reshape",
    "aten::_reshape_alias",
    "aten::expand",
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::to",
    "aten::_to_copy",
    "aten::copy_",
    "aten::detach",
    "aten::contiguous",
    "aten::permute",
    "aten::slice",
    "aten::select",
)


@dataclass(frozen=True)
class HostMatches:
    """Occurrences of the patterns' `host_steps` over the sequenced host ops (torch ops without the
    view and nested ones, per thread in time order). Occurrence i is sequenced ops `first[i]` up to
    `stop[i]`: a match never crosses a thread, so its ops are consecutive in that order."""

    names: list[str]  # op name of each code in `name_codes`
    name_codes: np.ndarray  # int64 per sequenced op: index into `names`
    start_ns: np.ndarray  # int64 per sequenced op
    end_ns: np.ndarray  # int64 per sequenced op
    patterns: list[Pattern]  # per occurrence, in match order
    first: np.ndarray  # int64 per occurrence
    stop: np.ndarray  # int64 per occurrence

    def windows(self) -> tuple[np.ndarray, np.ndarray]:
        """(earliest start, latest end) of each occurrence's ops, in ns."""
        if not self.patterns:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        # reduceat over the [first, stop) pairs; the appended sentinel keeps stop == len a valid index
        idx = np.column_stack([self.first, self.stop]).ravel()
        lo = np.minimum.reduceat(np.append(self.start_ns, 0), idx)[::2]
        hi = np.maximum.reduceat(np.append(self.end_ns, 0), idx)[::2]
        return lo, hi

    def op_names(self) -> list[list[str]]:
        """The op names of each occurrence (one gather over the matched ops only)."""
        if not self.patterns:
            return []
        lengths = self.stop - self.first
        rows = np.repeat(self.first - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
        flat = [self.names[c] for c in self.name_codes[rows].tolist()]
        ends = np.cumsum(lengths).tolist()
        return [flat[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]


def _no_host_matches() -> HostMatches:
    none = np.empty(0, np.int64)
    return HostMatches([], none, none, none, [], none, none)


def _host_kept(name: str) -> bool:
    """Whether the host patterns see an op of this name: torch ops (aten::*, npu_*) but no views."""
    if not name.startswith(("aten::", "npu_")):
        return False
    low = name.lower()
    return not any(fnmatch.fnmatchcase(low, g) if "*" in g else low == g for g in _HOST_IGNORE)


def _name_codes(df: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """`text(df, "name")` factorised: a code per row and the distinct names ("" for missing).

    Factorising the column itself (a categorical in a timeline) skips making a string per row."""
    if "name" not in df.columns:
        return np.zeros(len(df), np.int64), [""]
    codes, uniq = pd.factorize(df["name"], use_na_sentinel=True)
    names = [str(u) for u in uniq]
    codes = np.asarray(codes, dtype=np.int64)
    missing = codes < 0
    if missing.any():
        codes = np.where(missing, len(names), codes)
        names.append("")
    return codes, names


def match_host_patterns(host_ops: pd.DataFrame | None, patterns: Sequence[Pattern]) -> HostMatches:
    """Match `host_steps` on torch ops (aten::*) of the timeline, per thread, ignoring view ops and
    ops nested inside the previous kept op (aten::softmax encloses aten::_softmax).

    A timeline repeats a few hundred names millions of times: names are judged once per distinct
    name and the rest is whole-array work, with no Python per op or per occurrence."""
    if host_ops is None or host_ops.empty or not any(p.host_steps for p in patterns):
        return _no_host_matches()
    codes, names = _name_codes(host_ops)
    rows = np.flatnonzero(np.array([_host_kept(n) for n in names], dtype=bool)[codes])
    if not len(rows):
        return _no_host_matches()
    tid = num(host_ops, "tid").fillna(-1).astype("int64").to_numpy()[rows]
    start = start_ns(host_ops).to_numpy()[rows]
    end = end_ns(host_ops).to_numpy()[rows]
    order = np.lexsort((start, tid))  # by thread, then start; stable
    rows, tid, start, end = rows[order], tid[order], start[order], end[order]
    # Nested: on the same thread as the op before it, and ending no later than the latest end so far
    # on that thread (an enclosing op starts first, so it comes first in this order).
    run_end = pd.Series(end).groupby(tid).cummax().to_numpy()
    same_tid = np.concatenate([[False], tid[1:] == tid[:-1]])
    nested = same_tid & (end <= np.concatenate([[0], run_end[:-1]]))
    op_codes, tid, start, end = codes[rows[~nested]], tid[~nested], start[~nested], end[~nested]
    # regex code points numbered in order of first appearance, one per distinct name
    seen = pd.unique(op_codes)
    point = np.zeros(len(names), dtype=np.int64)
    point[seen] = _BASE + np.arange(len(seen))
    vocab = {names[c]: int(point[c]) for c in seen.tolist()}
    boundaries = np.flatnonzero(np.diff(tid) != 0) + 1
    seq = np.insert(point[op_codes], boundaries, _SEP)
    pos = np.insert(np.arange(len(op_codes), dtype=np.int64), boundaries, -1)
    found = _run_matches(seq, patterns, vocab, host=True)
    first = np.array([pos[a] for _pat, a, _b, _spans in found], dtype=np.int64)
    stop = first + np.array([b - a for _pat, a, b, _spans in found], dtype=np.int64)
    return HostMatches(names, op_codes, start, end, [f[0] for f in found], first, stop)
