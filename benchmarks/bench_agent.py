"""Latency of `tilescope mcp` (issue #29) as an agent sees it: the server started by the MCP SDK's
stdio client, then one call after the other, each timed from the request to the result.

Usage:
    .venv/bin/python benchmarks/bench_agent.py

Calls: initialize (the server's start-up; its worker starts beside it), analyze of the FA bundle
(the first profile call), the same analyze's second page (the report the first call made), kernels,
analyze and info on real profiler output (../shared/traces/real, skipped when absent), and a cancelled
analyze followed by a call (the worker killed, a new one started).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "traces" / "real"

CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("analyze tilelang_fa_bundle (first call)", "analyze", {"path": "tilelang_fa_bundle"}),
    (
        "analyze tilelang_fa_bundle, findings 5-",
        "analyze",
        {"path": "tilelang_fa_bundle", "findings_offset": 5},
    ),
    ("rule TS401", "rule", {"code": "TS401"}),
]
REAL_CALLS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "kernels gpt_step_arith_591, AI_VECTOR_CORE top 5",
        "kernels",
        {"path": "gpt_step_arith_591", "core_type": "AI_VECTOR_CORE", "top": 5},
    ),
    ("analyze torch_2rank_pipeutil_text (2 ranks)", "analyze", {"path": "torch_2rank_pipeutil_text"}),
    ("info fa_pipeutil_29", "info", {"path": "fa_pipeutil_29"}),
]


async def _cancelled(session: ClientSession, path: str) -> float:
    """Cancel an analyze once it reports loading; the time until the next call has answered."""
    loading = anyio.Event()

    async def progress(done: float, total: float | None, message: str | None) -> None:
        if message and message.startswith("loading"):
            loading.set()

    async with anyio.create_task_group() as tg:
        # select: a request the worker has no report for yet (it keeps its last reports)
        arguments = {"path": path, "select": ["TS"]}
        tg.start_soon(lambda: session.call_tool("analyze", arguments, progress_callback=progress))
        with anyio.fail_after(120):
            await loading.wait()
        tg.cancel_scope.cancel()
    t = time.perf_counter()
    await session.call_tool("rule", {"code": "TS101"})
    return time.perf_counter() - t


async def main() -> None:
    args = ["mcp", "--root", str(ROOT / "sample_traces")]
    calls = list(CALLS)
    if REAL.is_dir():
        args += ["--root", str(REAL)]
        calls += REAL_CALLS
    tilescope = str(Path(sys.executable).with_name("tilescope"))
    params = StdioServerParameters(command=tilescope, args=args, cwd=str(ROOT))
    t0 = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            print(f"{'initialize':<55} {time.perf_counter() - t0:6.2f} s")
            for label, tool, arguments in calls:
                t = time.perf_counter()
                result = await session.call_tool(tool, arguments)
                assert not result.is_error, result.content
                print(f"{label:<55} {time.perf_counter() - t:6.2f} s")
            path = "torch_2rank_pipeutil_text" if REAL.is_dir() else "attention_unfused"
            after_cancel = await _cancelled(session, path)
            print(f"{'a cancelled analyze, then a call (new worker)':<55} {after_cancel:6.2f} s")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    anyio.run(main)
