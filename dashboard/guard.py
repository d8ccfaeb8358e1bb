"""The dashboard's HTTP boundary: who may ask, what a callback request must look like, how a
rejected request is answered, and what the server says about itself.

- Host allow-list. A page on another site can make the browser resolve its own name to 127.0.0.1
  (DNS rebinding) and then read the dashboard as same-origin; the one thing it cannot forge is the
  `Host` header, which still carries its name. Only the localhost names and the `--host` address
  are answered.
- Origin. A request that says where it comes from (browsers send `Origin` on every POST) must come
  from the page's own origin, so another page (even one on localhost) cannot drive callbacks.
- Callback envelope. Dash indexes the `/_dash-update-component` body without checking it (an
  unknown output or a missing key is a KeyError, i.e. a 500 with a traceback); the shape is checked
  here first against the app's own callback map.
- Errors. A TilescopeError raised while answering (a rejected key, a malformed grid request, a
  profile that cannot be read) becomes a 400 with its one line: no traceback, nothing logged but
  the server's access line.
- Version. The `Server` header names no software version.
- Depth. JSON parsers (the standard library's, msgspec) recurse once per nesting level: a 50 KB
  body of `[` raised RecursionError, a 500. Every request body is measured first (`json_depth`) and
  one nested deeper than `MAX_JSON_DEPTH` is a 400, as is a pattern id in `changedPropIds`.
- Time. Every connection has a read timeout (`READ_TIMEOUT_S`): a client that connects and sends
  nothing, or stops in the middle of its headers or body, is dropped instead of holding a thread.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import dash
import numpy as np
from flask import Response, request
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from tilescope.errors import TilescopeError, UsageError

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
# A callback request is a few KB (ids, a grid block request, a zoom range); anything near this
# limit is not from the page.
MAX_REQUEST_BYTES = 1024 * 1024
SERVER_NAME = "tilescope"
# The page's deepest body (a grid request with its filter model, a pattern-matching input list) is
# ~8 levels; Python's parsers fail near 1,000 less the server's own stack
MAX_JSON_DEPTH = 64
# Seconds a connection may stay silent while the server waits for its request line, headers or
# body (and for it to take the response). The page sends a request at once; 30 s also covers a
# loaded machine. A keep-alive connection idle that long is closed; the browser opens another.
READ_TIMEOUT_S = 30.0
# Example: b'"a \\" [ b"' (a JSON string: its brackets are text, not nesting)
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth(data: bytes) -> int:
    """How deeply `data` (JSON text, well-formed or not) nests arrays and objects, measured
    without parsing it: its strings removed, +1 per opening and -1 per closing bracket, the
    highest running total (numpy: one pass over at most the 1 MiB a body may be)."""
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def host_name(header: str) -> str | None:
    """The name in a `Host` header, without its port; None when the header is malformed.

    Examples: 'localhost:8050' -> 'localhost'; '[::1]:8050' -> '::1'; 'LocalHost' -> 'localhost';
    'evil.example:80' -> 'evil.example'; 'localhost:80x' -> None.
    """
    text = header.strip().lower()
    if text.startswith("["):  # an IPv6 literal: "[::1]" or "[::1]:8050"
        name, sep, rest = text[1:].partition("]")
        if not sep:
            return None
    else:
        name, colon, port = text.partition(":")
        rest = colon + port
    if rest and not (rest.startswith(":") and rest[1:].isascii() and rest[1:].isdigit()):
        return None
    return name or None


def allowed_hosts(extra: Iterable[str] = ()) -> frozenset[str]:
    """The localhost names plus the addresses the server was told to bind (`--host`)."""
    names = {*LOCAL_HOSTS}
    for host in extra:
        names.add(host.strip().lower().removeprefix("[").removesuffix("]"))
    return frozenset(names)


def check_callback_request(body: Any, callbacks: Mapping[str, Any]) -> None:
    """The shape Dash's dispatcher relies on, checked against the registered callbacks.

    Raises UsageError (answered with a 400) instead of letting Dash raise KeyError/TypeError deep
    in its dispatcher. Values are not judged here: each callback validates its own
    (tilescope.dashboard.inputs).
    """
    if not isinstance(body, dict):
        raise UsageError("callback request: expected a JSON object")
    output = body.get("output")
    if not isinstance(output, str):
        raise UsageError("callback request: no such callback")
    spec = callbacks.get(output)
    if not isinstance(spec, dict) or "callback" not in spec:  # a clientside callback has none
        raise UsageError("callback request: no such callback")
    for kind in ("inputs", "state"):
        items = body.get(kind, [])
        wanted = spec.get(kind) or []
        if not isinstance(items, list) or len(items) != len(wanted):
            raise UsageError(f"callback request: expected {len(wanted)} {kind}")
        for item, want in zip(items, wanted, strict=True):
            _check_dependency(item, want, kind)
    outputs = body.get("outputs")
    if output.startswith(".."):
        count = output.count("...") + 1
        if not isinstance(outputs, list) or len(outputs) != count or not all(map(_is_prop, outputs)):
            raise UsageError(f"callback request: expected {count} outputs")
    elif not _is_prop(outputs):
        raise UsageError("callback request: expected one output")
    changed = body.get("changedPropIds", [])
    if not isinstance(changed, list) or not all(_is_prop_id(c) for c in changed):
        raise UsageError("callback request: malformed changedPropIds")


def _is_prop(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and isinstance(item.get("id"), str | dict)
        and isinstance(item.get("property"), str)
    )


def _check_dependency(item: Any, want: Mapping[str, Any], kind: str) -> None:
    """One input/state entry: the component and property the callback declares; a pattern
    (`{"type": ..., "index": ALL}`) input is a list of matching components."""
    want_id = str(want.get("id"))
    if want_id.startswith("{"):  # pattern-matching: Dash stores the id as JSON text
        if not isinstance(item, list) or not all(
            _is_prop(i) and isinstance(i["id"], dict) and i["property"] == want.get("property") for i in item
        ):
            raise UsageError(f"callback request: malformed pattern {kind}")
        return
    if not _is_prop(item) or item["id"] != want_id or item["property"] != want.get("property"):
        raise UsageError(f"callback request: {kind} do not match the callback")


def _is_prop_id(value: Any) -> bool:
    """`"id.property"`; a pattern id is JSON text, which Dash parses when the callback reads it."""
    if not isinstance(value, str) or "." not in value:
        return False
    component = value.rsplit(".", 1)[0]
    if not component.startswith("{"):
        return True
    if json_depth(component.encode("utf-8", "surrogatepass")) > MAX_JSON_DEPTH:
        return False
    try:
        return isinstance(json.loads(component), dict)
    except ValueError:
        return False


def _same_origin(origin: str, host: str) -> bool:
    """`Origin: http://localhost:8050` sent to `Host: localhost:8050`."""
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.strip().lower()


def install(app: dash.Dash, hosts: Iterable[str] = ()) -> None:
    """Put the checks above in front of every route of `app`."""
    server = app.server
    names = allowed_hosts(hosts)
    update_path = app.config.routes_pathname_prefix + "_dash-update-component"
    server.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES

    def guard() -> Response | tuple[str, int] | None:
        host = request.headers.get("Host", "")
        if host_name(host) not in names:
            return "unknown host", 400
        origin = request.headers.get("Origin")
        if origin is not None and not _same_origin(origin, host):
            return "cross-origin request refused", 403
        # a body is read here once (cached for Dash) under the read timeout; one cut short by it
        # is werkzeug's 400 (ClientDisconnected)
        has_body = request.method not in ("GET", "HEAD", "OPTIONS")
        if has_body and json_depth(request.get_data(cache=True)) > MAX_JSON_DEPTH:
            return f"request body nested deeper than {MAX_JSON_DEPTH} levels", 400
        if request.method == "POST" and request.path == update_path:
            check_callback_request(request.get_json(silent=True), app.callback_map)
        return None

    def rejected(exc: TilescopeError) -> tuple[str, int, dict[str, str]]:
        return exc.one_line(), 400, {"Content-Type": "text/plain; charset=utf-8"}

    # First in line: Dash's own before_request hooks need not run for a request refused here.
    server.before_request_funcs.setdefault(None, []).insert(0, guard)
    server.register_error_handler(TilescopeError, rejected)


class QuietRequestHandler(WSGIRequestHandler):
    """Werkzeug's handler without the `Server: Werkzeug/x.y Python/3.z` version banner, with a
    read timeout on its connection (socketserver.StreamRequestHandler applies `timeout`)."""

    timeout = READ_TIMEOUT_S

    def version_string(self) -> str:
        return SERVER_NAME

    def log_error(self, format: str, *args: Any) -> None:
        # a connection dropped at its timeout is the defence working, not a server error
        if format.startswith("Request timed out"):
            self.log("info", format, *args)
        else:
            super().log_error(format, *args)


def make_http_server(app: dash.Dash, host: str, port: int) -> BaseWSGIServer:
    """The threaded server `tilescope serve` runs (raises OSError when it cannot listen)."""
    return make_server(host, port, app.server, threaded=True, request_handler=QuietRequestHandler)
