"""The MCP server of `tilescope mcp`, over stdio, on the official `mcp` SDK's low-level `Server`
(the `agent` extra): tools/list from the published schema/tools.json, tools/call run by the worker
process (tilescope.agent.worker), resources for the last results, the rule catalogue and
docs/metrics.md.

Arguments are checked against the tool's input schema here, before any work (a malformed call is
INVALID_PARAMS with one line). An error of the command is an MCP error whose message is the line
the CLI prints (`tilescope: error: ...`) and whose data holds the CLI's exit code. A cancelled call
(notifications/cancelled) ends the worker process, so its load or lowering stops; the next call
starts another.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from tilescope.agent.schemas import check_arguments, published
from tilescope.errors import UsageError

SERVER_NAME = "tilescope"
MAX_MESSAGE_BYTES = 512 * 1024 * 1024  # a report of a large multi-rank run, in one line
# the CLI's exit code -> the JSON-RPC error code of the MCP error
ERROR_CODES = {2: types.INVALID_PARAMS, 3: types.INTERNAL_ERROR}
METRICS_DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"  # a checkout's; absent in a wheel
INSTRUCTIONS = (
    "tilescope diagnoses Ascend NPU kernels from profiler output and lints TileLang kernels. Start with "
    "analyze (findings with measured evidence, bounded savings and the fix), lint a changed kernel, diff two "
    "runs. Each result lists the files it rests_on and what it assumed; generated=true marks a sample made "
    "by a model, not a measurement. Paths must lie under the server's --root folders."
)

Progress = Callable[[float, float, str], Awaitable[None]]


class WorkerError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Worker:
    """The one worker process, started on the first call and after a cancelled one; one call at
    a time (the work is CPU-bound: two calls at once would only share the cores)."""

    def __init__(self, roots: list[Path], scratch: Path) -> None:
        self.roots, self.scratch = roots, scratch
        self.proc: Process | None = None
        self.reader: BufferedByteReceiveStream | None = None
        self.lock = anyio.Lock()
        self.calls = 0
        self.started = 0

    async def _start(self) -> None:
        args = [sys.executable, "-m", "tilescope.agent.worker", "--scratch", str(self.scratch)]
        for root in self.roots:
            args += ["--root", str(root)]
        tmp = self.scratch / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        # every place the work writes is in the scratch folder: temporary files, the rank cache,
        # TileLang's kernel cache (~/.tilelang otherwise), other caches; and no .pyc beside the code
        env = {
            **os.environ,
            "TMPDIR": str(tmp),
            "TILESCOPE_CACHE_DIR": str(self.scratch / "cache"),
            "TILELANG_CACHE_DIR": str(self.scratch / "tilelang-cache"),
            "XDG_CACHE_HOME": str(self.scratch / "xdg-cache"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "OPENBLAS_NUM_THREADS": "1",
        }
        self.proc = await anyio.open_process(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, cwd=self.scratch, env=env
        )
        assert self.proc.stdout is not None
        self.reader = BufferedByteReceiveStream(self.proc.stdout)
        self.started += 1

    async def warm(self) -> None:
        """Start the process now, before the first call needs it."""
        async with self.lock:
            if self.proc is None:
                await self._start()

    async def stop(self) -> None:
        proc, self.proc, self.reader = self.proc, None, None
        if proc is None:
            return
        with anyio.CancelScope(shield=True):
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
            await proc.aclose()

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    async def call(self, tool: str, args: dict[str, Any], progress: Progress) -> dict[str, Any]:
        async with self.lock:
            if self.proc is None or self.proc.returncode is not None:
                await progress(0, 1, "starting the tilescope worker")
                await self._start()
            assert self.proc is not None and self.proc.stdin is not None and self.reader is not None
            self.calls += 1
            rid = self.calls
            try:
                line = json.dumps({"id": rid, "tool": tool, "args": args}) + "\n"
                await self.proc.stdin.send(line.encode("utf-8"))
                while True:
                    msg = json.loads(await self.reader.receive_until(b"\n", MAX_MESSAGE_BYTES))
                    if msg.get("id") != rid:
                        continue
                    if "progress" in msg:
                        await progress(*msg["progress"])
                    elif "error" in msg:
                        raise WorkerError(msg["error"]["message"], int(msg["error"]["exit_code"]))
                    else:
                        result: dict[str, Any] = msg["result"]
                        return result
            except anyio.get_cancelled_exc_class():
                await self.stop()  # the call was cancelled: its work ends with the process
                raise
            except (
                anyio.EndOfStream,
                anyio.IncompleteRead,
                anyio.BrokenResourceError,
                anyio.DelimiterNotFound,
            ) as exc:
                code = None if self.proc is None else self.proc.returncode
                await self.stop()
                raise WorkerError(
                    f"tilescope: error: the worker process ended during {tool} "
                    f"(exit code {code}; its stderr says why)",
                    1,
                ) from exc


def _tools() -> list[types.Tool]:
    return [
        types.Tool(
            name=name,
            description=t["description"],
            input_schema=t["inputSchema"],
            output_schema=t["outputSchema"],
        )
        for name, t in published().items()
    ]


class AgentServer:
    """The MCP handlers over one Worker, and the last result of each tool (resources)."""

    def __init__(self, roots: list[Path], scratch: Path) -> None:
        self.worker = Worker(roots, scratch)
        self.last: dict[str, Path] = {}
        self.server: Server[Any] = Server(
            SERVER_NAME,
            instructions=INSTRUCTIONS,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_read_resource=self.read_resource,
        )

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=_tools())

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            args = check_arguments(params.name, params.arguments or {})
        except UsageError as exc:
            raise MCPError(types.INVALID_PARAMS, exc.terminal_line(), {"exit_code": exc.exit_code}) from None

        async def progress(done: float, total: float, message: str) -> None:
            await ctx.session.report_progress(done, total, message)

        result = await self._run(params.name, args, progress)
        pid = self.worker.pid  # the process that computed it (a cancelled call ends its process)
        self.last[params.name] = Path(result["saved_path"])
        result["resource_uri"] = f"tilescope://last/{params.name}"
        text = json.dumps(result, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=result,
            _meta={"tilescope/worker_pid": pid},
        )

    async def _run(self, tool: str, args: dict[str, Any], progress: Progress) -> dict[str, Any]:
        try:
            return await self.worker.call(tool, args, progress)
        except WorkerError as exc:
            code = ERROR_CODES.get(exc.exit_code, types.INTERNAL_ERROR)
            raise MCPError(code, str(exc), {"exit_code": exc.exit_code}) from None

    async def list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        found = [
            types.Resource(
                uri="tilescope://rules",
                name="rules",
                mime_type="application/json",
                description="The rule catalogue: code, slug, kind, needs, summary.",
            )
        ]
        if METRICS_DOC.is_file():
            found.append(
                types.Resource(
                    uri="tilescope://docs/metrics.md",
                    name="metrics.md",
                    mime_type="text/markdown",
                    description="Every reported quantity: meaning, source columns, formula.",
                )
            )
        for tool, path in self.last.items():
            what = "the whole report (unpaged)" if tool == "analyze" else "the whole result"
            found.append(
                types.Resource(
                    uri=f"tilescope://last/{tool}",
                    name=f"last {tool}",
                    mime_type="application/json",
                    description=f"The last {tool} call's {what}, saved at {path}.",
                )
            )
        return types.ListResourcesResult(resources=found)

    async def read_resource(
        self, ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == "tilescope://rules":
            text = json.dumps(await self._run("rules", {}, _no_progress), ensure_ascii=False)
            mime = "application/json"
        elif uri == "tilescope://docs/metrics.md" and METRICS_DOC.is_file():
            text, mime = METRICS_DOC.read_text(encoding="utf-8"), "text/markdown"
        elif uri.startswith("tilescope://last/") and uri.removeprefix("tilescope://last/") in self.last:
            text = self.last[uri.removeprefix("tilescope://last/")].read_text(encoding="utf-8")
            mime = "application/json"
        else:
            raise MCPError(
                types.INVALID_PARAMS, f"tilescope: error: no resource {uri}; resources/list names them"
            )
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        )


async def _no_progress(done: float, total: float, message: str) -> None:
    return None


async def serve(roots: list[Path], scratch: Path) -> None:
    agent = AgentServer(roots, scratch)
    try:
        async with stdio_server() as (read_stream, write_stream):
            # the worker imports pandas, DuckDB and the rules while the client initialises
            await agent.worker.warm()
            await agent.server.run(read_stream, write_stream, agent.server.create_initialization_options())
    finally:
        await agent.worker.stop()


def run(roots: list[Path], scratch: Path) -> None:
    anyio.run(serve, roots, scratch)
