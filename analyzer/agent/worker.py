"""The process that runs the agent's tools: `python -m tilescope.agent.worker --scratch DIR --root
DIR ...`, started by the MCP server (tilescope.agent.server) with its working directory, TMPDIR and
rank cache in the scratch folder.

Why a process of its own: a cancelled call must stop its work, and a load or a lowering cannot be
stopped from another thread; the server ends this process instead and starts another for the next
call. Pandas, DuckDB and the rules stay imported between calls.

Protocol, one JSON object per line: requests `{"id", "tool", "args"}` on stdin; on stdout
`{"id", "progress": [done, total, message]}` any number of times, then `{"id", "result": {...}}`
or `{"id", "error": {"message": <the CLI's one line>, "exit_code": n}}`. Nothing else reaches
stdout: file descriptor 1 is pointed at stderr once the protocol has its own copy of it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import traceback
from pathlib import Path
from typing import IO, Any

from tilescope.agent.schemas import check_result
from tilescope.agent.tools import INTERNAL, TOOLS, Scope
from tilescope.atomic import write_text_atomic
from tilescope.dashboard.paths import RootSet
from tilescope.errors import TilescopeError

INTERNAL_ERROR_EXIT = 1


def _protocol_stream() -> IO[str]:
    """A private copy of stdout for the protocol; fd 1 then goes to stderr, so a library that
    prints (TileLang's lowering, a warning) cannot break a message."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def _save(scope: Scope, tool: str, number: int, doc: dict[str, Any]) -> Path:
    """The whole result (for analyze: the unpaged report) in the scratch folder's reports/."""
    folder = scope.scratch / "reports"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{tool}-{number}.json"
    write_text_atomic(target, json.dumps(doc, ensure_ascii=False, allow_nan=False, default=str))
    return target


def run_one(scope: Scope, request: dict[str, Any], number: int, send: Any) -> dict[str, Any]:
    rid = request.get("id")

    def progress(done: float, total: float, message: str) -> None:
        send({"id": rid, "progress": [done, total, message]})

    tool = str(request.get("tool"))
    args = request.get("args") or {}
    if tool in INTERNAL:
        return INTERNAL[tool](scope, args, progress)
    result = TOOLS[tool](scope, args, progress)
    full = result.pop("full_report", None)
    check_result(tool, result)
    saved = _save(scope, tool, number, full if full is not None else result)
    result["saved_path"] = str(saved)
    return result


def serve(scope: Scope, requests: IO[str], out: IO[str]) -> None:
    def send(message: dict[str, Any]) -> None:
        out.write(json.dumps(message, ensure_ascii=False, allow_nan=False, default=str) + "\n")
        out.flush()

    for number, line in zip(itertools.count(1), requests, strict=False):
        try:
            request = json.loads(line)
            rid = request.get("id")
        except (ValueError, AttributeError):
            continue  # the server writes these lines; nothing else does
        try:
            send({"id": rid, "result": run_one(scope, request, number, send)})
        except TilescopeError as exc:
            send({"id": rid, "error": {"message": exc.terminal_line(), "exit_code": exc.exit_code}})
        except Exception as exc:  # a bug: its traceback on stderr, one line to the agent
            traceback.print_exc()
            message = (
                f"tilescope: internal error: {type(exc).__name__}: {str(exc)[:300]} (traceback on stderr)"
            )
            send(
                {"id": rid, "error": {"message": " ".join(message.split()), "exit_code": INTERNAL_ERROR_EXIT}}
            )


def _preload() -> None:
    """Import what every profile tool needs before the first request arrives: the server starts
    this process when it starts, so these imports overlap the client's handshake."""
    # deferred: this is the point of the function (the modules the commands import when they run)
    import tilescope.analysis
    import tilescope.io.load
    import tilescope.report.data  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tilescope.agent.worker")
    parser.add_argument("--scratch", required=True)
    parser.add_argument("--root", action="append", default=[])
    ns = parser.parse_args(argv)
    out = _protocol_stream()
    scratch = Path(ns.scratch).resolve()
    scope = Scope(RootSet.of(ns.root).with_given(scratch), scratch)
    _preload()
    serve(scope, sys.stdin, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
