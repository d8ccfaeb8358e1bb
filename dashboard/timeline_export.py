"""The Timeline tab's lanes as a Chrome-trace JSON file (Perfetto, chrome://tracing and MindStudio
Insight open it), served at EXPORT_PATH for the tab's download link.

What it holds: every segment of every lane — not the merged window the tab draws — as complete
(`X`) events; one process for the host threads and one for the device (streams per engine, HCCL
groups), one thread per lane named by the lane's label and kept in the tab's order; each launch
link as a flow (`s` on the host op, `f` with `bp: "e"` on the kernel it launched). Times are µs
since the profile's first event, to the ns.

Names come from the profile: each string is written by `json.dumps` with every non-ASCII
character, `<`, `>` and `&` as a `\\u` escape, so the file is inert wherever it is pasted or
embedded; a viewer shows the characters. The file is streamed lane by lane (a million-kernel
profile is not built as one string in memory).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from urllib.parse import quote

import flask
import numpy as np

from tilescope.dashboard.data import DataStore, ProfileEntry
from tilescope.dashboard.timeline_lanes import Lane
from tilescope.text.escape import script_safe

EXPORT_PATH = "/_tilescope/timeline-trace"
HOST_PID, DEVICE_PID = 1, 2
CHUNK_EVENTS = 20_000  # events per streamed piece


@functools.lru_cache(maxsize=1 << 16)  # kernel and op names repeat: each is escaped once
def text(value: object) -> str:
    """A JSON string literal of `value` that holds no raw `<`, `>`, `&` or non-ASCII character."""
    return script_safe(json.dumps(str(value)))  # ensure_ascii: every non-ASCII character escaped


def export_url(key: str) -> str:
    return f"{EXPORT_PATH}?profile={quote(key, safe='')}"


def file_name(label: str) -> str:
    """`<label>.trace.json` with only [A-Za-z0-9._-] (the label is a path the user gave)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("._") or "timeline"
    return f"{stem[:80]}.trace.json"


def chrome_trace(lanes: list[Lane], title: str) -> Iterator[str]:
    """The trace as pieces of JSON text (concatenated: one object with `traceEvents`)."""
    tids = {ln.label: i + 1 for i, ln in enumerate(lanes)}
    pid = {ln.label: HOST_PID if ln.kind == "host" else DEVICE_PID for ln in lanes}
    yield '{"displayTimeUnit": "ns", "otherData": {"source": "tilescope", "profile": '
    yield text(title) + ', "time": "us since the first event"}, "traceEvents": [\n'
    meta = [
        f'{{"ph": "M", "name": "process_name", "pid": {HOST_PID}, "tid": 0, "args": {{"name": "Host"}}}}',
        f'{{"ph": "M", "name": "process_name", "pid": {DEVICE_PID}, "tid": 0, "args": {{"name": "NPU"}}}}',
    ]
    for ln in lanes:
        where = f'"pid": {pid[ln.label]}, "tid": {tids[ln.label]}'
        meta.append(f'{{"ph": "M", "name": "thread_name", {where}, "args": {{"name": {text(ln.label)}}}}}')
        meta.append(
            f'{{"ph": "M", "name": "thread_sort_index", {where}, "args": {{"sort_index": {tids[ln.label]}}}}}'
        )
    yield ",\n".join(meta)
    flow_id = 0
    for ln in lanes:
        where = f'"pid": {pid[ln.label]}, "tid": {tids[ln.label]}'
        for piece in _chunks(len(ln.start)):
            yield ",\n" + ",\n".join(_slices(ln, piece, where))
        if ln.link_start is not None and ln.link_lane is not None:
            linked = np.flatnonzero(~np.isnan(ln.link_start))
            linked = linked[[str(ln.link_lane[i]) in tids for i in linked]]
            for piece in _chunks(len(linked)):
                out = []
                for i in linked[piece]:
                    flow_id += 1
                    src = str(ln.link_lane[i])
                    out.append(
                        f'{{"ph": "s", "name": "launch", "cat": "launch", "id": {flow_id}, '
                        f'"pid": {pid[src]}, "tid": {tids[src]}, "ts": {_us(ln.link_start[i])}}}'
                    )
                    out.append(
                        f'{{"ph": "f", "bp": "e", "name": "launch", "cat": "launch", "id": {flow_id}, '
                        f'{where}, "ts": {_us(ln.start[i])}}}'
                    )
                yield ",\n" + ",\n".join(out)
    yield "\n]}\n"


def _chunks(n: int) -> Iterable[slice]:
    return (slice(i, min(i + CHUNK_EVENTS, n)) for i in range(0, n, CHUNK_EVENTS))


def _us(value: float) -> str:
    return f"{float(value):.3f}"


def _slices(ln: Lane, piece: slice, where: str) -> list[str]:
    starts, ends = ln.start[piece], ln.end[piece]
    names, cats = ln.names[piece], ln.category[piece]
    return [
        f'{{"ph": "X", "name": {text(n)}, "cat": {text(c)}, {where}, "ts": {_us(s)}, "dur": {_us(e - s)}}}'
        for n, c, s, e in zip(names, cats, starts, ends, strict=True)
    ]


def register(server: flask.Flask, store: DataStore, lanes_of: Callable[[ProfileEntry], list[Lane]]) -> None:
    """GET EXPORT_PATH?profile=KEY: the profile's timeline as an attachment (404: no such profile
    or nothing to place in time). The app's guard (Host allow-list) runs before it."""

    def export() -> flask.Response | tuple[str, int]:
        key = flask.request.args.get("profile", "")
        entry = store.get(key)
        if entry is None:
            return "no such profile", 404
        lanes = lanes_of(entry)
        if not lanes:
            return "nothing in this profile has a start time: no timeline to export", 404
        headers = {"Content-Disposition": f'attachment; filename="{file_name(entry.label)}"'}
        body = flask.stream_with_context(chrome_trace(lanes, entry.label))
        return flask.Response(body, mimetype="application/json", headers=headers)

    server.add_url_rule(EXPORT_PATH, "tilescope_timeline_trace", export, methods=["GET"])
