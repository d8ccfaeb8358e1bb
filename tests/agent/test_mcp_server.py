"""`tilescope mcp` driven by the MCP SDK's own client over stdio: one real protocol session for the
module (`tilescope mcp` started as a process, `mcp.client.stdio.stdio_client` + `ClientSession`),
every tool on the bundled samples and real profiler output, the published schemas, path
confinement, malformed calls, errors worded as the CLI's, and cancellation."""

from __future__ import annotations

import csv
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
import jsonschema
import mcp_types as types
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from tilescope.agent.schemas import published
from tilescope.report.data import validate_report

from support import REAL_TRACES, REPO_ROOT, SAMPLES, cli
from support.simulator import CORES, core_cycles, write_fa_simulator

BUNDLE = SAMPLES / "tilelang_fa_bundle"
MATMUL = REPO_ROOT / "sample_traces" / "kernels" / "matmul.py"
OUTSIDE = "leads outside the directories being served"


class Session:
    """The module's one client session, called from the (synchronous) tests through a portal."""

    def __init__(self, portal: BlockingPortal, session: ClientSession, root: Path, scratch: Path) -> None:
        self.portal, self.session, self.root, self.scratch = portal, session, root, scratch
        self.progress: list[tuple[float, float | None, str | None]] = []

    def call(self, tool: str, **args: Any) -> types.CallToolResult:
        async def record(done: float, total: float | None, message: str | None) -> None:
            self.progress.append((done, total, message))

        async def go() -> types.CallToolResult:
            return await self.session.call_tool(tool, args, progress_callback=record)

        return self.portal.call(go)

    def result(self, tool: str, **args: Any) -> dict[str, Any]:
        """A tool's structured result, checked against the tool's published output schema."""
        r = self.call(tool, **args)
        assert not r.is_error, r.content
        jsonschema.validate(r.structured_content, published()[tool]["outputSchema"])
        # the text content is the same JSON, for hosts that show text only
        assert json.loads(r.content[0].text) == r.structured_content  # type: ignore[union-attr]
        return dict(r.structured_content)

    def error(self, tool: str, **args: Any) -> MCPError:
        with pytest.raises(MCPError) as caught:
            self.call(tool, **args)
        return caught.value

    def run(self, fn: Callable[[], Any]) -> Any:
        return self.portal.call(fn)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root of the server's: a copy of the FA bundle with simulator output, an empty folder, and
    links that lead out of the roots."""
    top = tmp_path_factory.mktemp("agent-root")
    shutil.copytree(BUNDLE, top / "fa_sim")
    write_fa_simulator(top / "fa_sim" / "profile")
    (top / "empty").mkdir()
    # the project's settings, found above the input as the CLI finds them in its directory
    (top / "tilescope.toml").write_text('ignore = ["TS401"]\n', encoding="utf-8")
    (top / "etc_link").symlink_to("/etc")
    (top / "holds_link").mkdir()  # a folder inside the root holding a link out of it
    (top / "holds_link" / "passwd").symlink_to("/etc/passwd")
    return top


@pytest.fixture(scope="module")
def mcp_session(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    scratch = tmp_path_factory.mktemp("agent-scratch")
    errlog = scratch.parent / "server-stderr.txt"
    args = ["-m", "tilescope", "mcp", "--root", str(SAMPLES), "--root", str(root), "--scratch", str(scratch)]
    if REAL_TRACES.is_dir():
        args += ["--root", str(REAL_TRACES)]
    params = StdioServerParameters(
        command=sys.executable, args=args, cwd=str(REPO_ROOT), env=dict(os.environ)
    )
    with (
        open(errlog, "w") as err,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(stdio_client(params, errlog=err)) as (read, write),
        portal.wrap_async_context_manager(ClientSession(read, write)) as session,
    ):
        portal.call(session.initialize)
        yield Session(portal, session, root, scratch)


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_the_tools_and_their_published_schemas(mcp_session: Session) -> None:
    tools = mcp_session.run(mcp_session.session.list_tools).tools
    assert [t.name for t in tools] == ["info", "analyze", "kernels", "lint", "diff", "rule", "lines"]
    for t in tools:
        spec = published()[t.name]
        assert t.input_schema == spec["inputSchema"] and t.output_schema == spec["outputSchema"]
        jsonschema.Draft202012Validator.check_schema(t.input_schema)
        jsonschema.Draft202012Validator.check_schema(t.output_schema)
        # each description says what the tool needs and what it returns
        assert "Needs:" in (t.description or "") and "Returns:" in (t.description or "")
    analyze = next(t for t in tools if t.name == "analyze")
    assert analyze.input_schema["required"] == ["path"]
    assert analyze.input_schema["properties"]["detail"]["enum"] == ["brief", "standard", "full"]


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_analyze_diagnoses_the_flash_attention_bundle(mcp_session: Session) -> None:
    r = mcp_session.result("analyze", path=str(BUNDLE), findings_limit=3, kernels_limit=1)
    report = r["report"]
    validate_report(report)  # the page is a valid report
    assert r["findings_page"]["limit"] == 3 and len(report["findings"]) == 3
    assert r["findings_page"]["total"] == 7  # the README's example: 7 findings on this bundle
    assert report["findings"][0]["code"] == "TS401" and report["findings"][0]["kernels"] == [
        "flash_fwd_kernel_mix_aic"
    ]
    assert report["summary"]["total_device_us"] == pytest.approx(43.739)
    assert "timeline" not in report and r["detail"] == "standard"
    # what it rests on, what it assumed, and that the sample was generated, not measured
    assert str(BUNDLE / "manifest.json") in r["rests_on"] and str(BUNDLE / "ir" / "ir.json") in r["rests_on"]
    assert any(p.endswith("PipeUtilization.csv") for p in r["rests_on"])
    assert any("24 AI Cores" in a for a in r["assumed"]) and r["generated"] is True
    assert "clock 1800 MHz from OpBasicInfo Rated Freq" in r["notes"]
    # the whole report, unpaged, is the last-analyze resource
    whole = mcp_session.run(lambda: mcp_session.session.read_resource("tilescope://last/analyze"))
    full = json.loads(whole.contents[0].text)
    validate_report(full)
    assert len(full["findings"]) == 7 and full["findings"][:3] == report["findings"]
    assert r["resource_uri"] == "tilescope://last/analyze" and Path(r["saved_path"]).is_file()
    brief = mcp_session.result("analyze", path=str(BUNDLE), detail="brief", findings_offset=6)
    validate_report(brief["report"])
    assert [f["evidence"] for f in brief["report"]["findings"]] == [{}]
    assert brief["report"]["findings"][0]["code"] == full["findings"][6]["code"]
    # progress was reported while it ran; the second page came from the report the first call made
    messages = [m or "" for _d, _t, m in mcp_session.progress]
    assert any(m.startswith("loading and analysing") for m in messages)
    assert messages[-2].startswith("the report of tilelang_fa_bundle made by the previous call")


@pytest.mark.tilelang
def test_lint_of_a_kernel_variant(mcp_session: Session) -> None:
    pytest.importorskip("tilelang")
    r = mcp_session.result(
        "lint", kernel=f"{MATMUL}:matmul", params={"block_M": 256, "block_N": 256}, chip="910B2"
    )
    doc = r["lint"]
    # 256x256 fp32 = 262144 B of L0C, twice a 910B2's (tests/cli/test_lint_cli.py)
    assert doc["lowered"] is True and doc["chip"] == "910B2"
    assert doc["params"]["block_M"] == 256 and doc["findings"][0]["code"] == "TS501"
    assert r["rests_on"] == [str(MATMUL)] and r["generated"] is None
    # TileLang's kernel cache went to the scratch folder, not ~/.tilelang
    assert (mcp_session.scratch / "tilelang-cache").is_dir()


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_diff_of_two_runs_and_of_two_saved_reports(
    mcp_session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    base, head = SAMPLES / "attention_unfused", SAMPLES / "attention_fused"
    r = mcp_session.result("diff", base=str(base), head=str(head))
    # sample_traces/README.md: the fused model's attention takes ~7.5 ms instead of ~79 ms
    assert r["diff"]["total"]["verdict"] == "improved" and r["diff"]["total"]["delta_pct"] < -50
    assert {"SoftmaxV2", "DropOutDoMask"} <= {
        k["key"][1] for k in r["diff"]["kernels"] if k["verdict"] == "removed"
    }
    assert r["diff"]["findings"]["resolved"] and isinstance(r["why"], list)
    assert any(p.startswith(f"{base}/") for p in r["rests_on"]) and any(
        p.startswith(f"{head}/") for p in r["rests_on"]
    )
    assert r["generated"] is True  # their manifest.json: "generated": true, "hardware_measurement": false
    # two saved reports instead of two folders (analyze saves each whole): the command's own JSON
    saved = [
        mcp_session.result("analyze", path=str(p))["saved_path"]
        for p in (SAMPLES / "tilelang_fa_msprof_op", BUNDLE)
    ]
    reports = mcp_session.result("diff", base=saved[0], head=saved[1])
    code, out, err = cli(capsys, "diff", saved[0], saved[1], "-f", "json")
    assert code == 0, err
    assert reports["diff"] == json.loads(out)
    assert any("/tilelang_fa_msprof_op/" in p and p.endswith("OpBasicInfo.csv") for p in reports["rests_on"])


def test_kernels_filter_sort_and_top_on_a_real_profile(mcp_session: Session, real_traces: Path) -> None:
    path = real_traces / "gpt_step_arith_591" / "kernel_details.csv"
    r = mcp_session.result("kernels", path=str(path), core_type="AI_VECTOR_CORE", top=5)
    # README of the real traces: 520 AI_VECTOR_CORE rows of 591
    assert r["rows_total"] == 591 and r["rows_matched"] == 520 and len(r["kernels"]) == 5
    durations = [k["duration_us"] for k in r["kernels"]]
    assert durations == sorted(durations, reverse=True)
    assert {k["core_type"] for k in r["kernels"]} == {"AI_VECTOR_CORE"}
    # the files read, by their real path (../shared may be a link, as in a fresh clone beside it)
    assert [str(Path(p).resolve()) for p in r["rests_on"]] == [str(path.resolve())]
    cols = mcp_session.result(
        "kernels", path=str(path), columns=["name", "block_dim"], sort="block_dim", descending=False, top=1
    )
    assert list(cols["kernels"][0]) == ["name", "block_dim"]
    # a name glob, counted against the file itself
    with open(path, newline="", encoding="utf-8") as fh:
        gelu = sum(1 for row in csv.DictReader(fh) if "Gelu" in row["Name"])
    g = mcp_session.result("kernels", path=str(path), name="*Gelu*", top=1000)
    assert g["rows_matched"] == gelu > 0 and all("Gelu" in k["name"] for k in g["kernels"])


def test_info_and_analyze_of_a_real_folder(mcp_session: Session, real_traces: Path) -> None:
    path = real_traces / "fa_pipeutil_29"
    info = mcp_session.result("info", path=str(path))["profiles"][0]
    # README: 20-core device at 1800 MHz, 29 kernels
    assert (info["chip"]["aic_count"], info["chip"]["clock_mhz"], info["rows"]["kernels"]) == (20, 1800.0, 29)
    r = mcp_session.result("analyze", path=str(path), findings_limit=200)
    validate_report(r["report"])
    assert [str(Path(p).resolve()) for p in r["rests_on"]] == [str((path / "kernel_details.csv").resolve())]
    assert r["generated"] is None
    assert r["findings_page"]["total"] == len(r["report"]["findings"])


def test_rule_and_the_resources(mcp_session: Session) -> None:
    r = mcp_session.result("rule", code="TS401")["rule"]
    assert (r["code"], r["slug"]) == ("TS401", "wasted-cores") and r["markdown"].startswith(
        "# TS401 wasted-cores"
    )
    listed = {x.uri for x in mcp_session.run(mcp_session.session.list_resources).resources}
    assert {"tilescope://rules", "tilescope://docs/metrics.md", "tilescope://last/rule"} <= listed
    rules = json.loads(
        mcp_session.run(lambda: mcp_session.session.read_resource("tilescope://rules")).contents[0].text
    )["rules"]
    assert any(x["code"] == "TS401" and x["slug"] == "wasted-cores" for x in rules)
    metrics = mcp_session.run(lambda: mcp_session.session.read_resource("tilescope://docs/metrics.md"))
    assert metrics.contents[0].text == (REPO_ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")


def test_lines_of_a_bundle_with_simulator_output(mcp_session: Session) -> None:
    r = mcp_session.result("lines", path=str(mcp_session.root / "fa_sim"), top=2)
    lines = r["lines"]
    assert lines["mapped"] is True and len(lines["lines"]) == 2 and r["lines_page"]["total"] > 2
    top = lines["lines"][0]
    # tests/lines/test_lines.py: l.50 (mmad, Ascend C line 101) is the hottest
    assert top["source_lines"] == [50] and top["cycles"] == sum(core_cycles(c, 101) for c in CORES)
    assert any("not a board measurement" in n for n in r["notes"])
    bundle = mcp_session.root / "fa_sim"
    assert r["rests_on"] == sorted(
        [lines["simulator"], str(bundle / "ir" / "ir.json"), str(bundle / "ir" / "kernel.cpp")]
    )
    assert r["generated"] is True  # the bundle's manifest: a generated profile


def test_analyze_reads_the_settings_above_the_input(mcp_session: Session) -> None:
    r = mcp_session.result("analyze", path=str(mcp_session.root / "fa_sim"), findings_limit=50)
    validate_report(r["report"])
    codes = {f["code"] for f in r["report"]["findings"]}
    assert "TS401" not in codes and "TS203" in codes and r["findings_page"]["total"] == 6
    assert r["report"]["lines"]["mapped"] is True  # the bundle's simulator output, in the report too


def test_paths_outside_the_roots_are_refused(mcp_session: Session) -> None:
    root = mcp_session.root
    cases = {
        "/etc": f"tilescope: error: /etc: {OUTSIDE}",
        str(root / "etc_link"): f"tilescope: error: {root / 'etc_link'}: {OUTSIDE}",
        "etc_link": f"tilescope: error: etc_link: {OUTSIDE}",
        str(root / "holds_link"): f"tilescope: error: {root / 'holds_link'}/passwd: {OUTSIDE}",
        "../etc": "tilescope: error: ../etc: '..' is not accepted",
        f"{root}/../{root.name}/fa_sim": f"tilescope: error: {root}/../{root.name}/fa_sim: '..' is not "
        "accepted",
    }
    cases["x\x00y"] = "tilescope: error: path: path contains a forbidden character"
    for path, line in cases.items():
        e = mcp_session.error("info", path=path)
        assert (e.code, e.message, e.data) == (types.INVALID_PARAMS, line, {"exit_code": 2}), path
    e = mcp_session.error("diff", base=str(BUNDLE), head="/etc/passwd")
    assert e.message == f"tilescope: error: /etc/passwd: {OUTSIDE}"
    e = mcp_session.error("lint", kernel="/etc/passwd:main")
    assert e.message == f"tilescope: error: /etc/passwd: {OUTSIDE}"


def test_malformed_calls_are_refused_before_any_work(mcp_session: Session) -> None:
    e = mcp_session.error("analyze", path=str(BUNDLE), findings_limit="ten")
    assert e.code == types.INVALID_PARAMS
    assert e.message == "tilescope: error: analyze: findings_limit: 'ten' is not of type 'integer'"
    e = mcp_session.error("info")
    assert e.message == "tilescope: error: info: arguments: 'path' is a required property"
    e = mcp_session.error("nope", path="x")
    assert e.message.startswith("tilescope: error: unknown tool 'nope'; the tools are info, analyze")
    e = mcp_session.error("lint", kernel=str(MATMUL), params={"1bad": 2})
    assert e.code == types.INVALID_PARAMS and "params" in e.message


def test_errors_are_the_cli_line(mcp_session: Session, capsys: pytest.CaptureFixture[str]) -> None:
    empty = mcp_session.root / "empty"
    e = mcp_session.error("analyze", path=str(empty))
    code, _out, err = cli(capsys, "analyze", str(empty))
    assert code == 2 and e.data == {"exit_code": 2}
    assert e.message == err.strip()  # "tilescope: error: ...: no Ascend profile found (...)"
    e = mcp_session.error("rule", code="TS999")
    code, _out, err = cli(capsys, "rule", "TS999")
    assert e.message == err.strip() and code == 2


def test_a_cancelled_call_ends_its_work(mcp_session: Session, real_traces: Path) -> None:
    before = mcp_session.call("rule", code="TS101").meta["tilescope/worker_pid"]  # type: ignore[index]
    path = real_traces / "torch_2rank_pipeutil_text"

    async def cancel_once_loading() -> None:
        loading = anyio.Event()

        async def progress(done: float, total: float | None, message: str | None) -> None:
            if message and message.startswith("loading"):
                loading.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: mcp_session.session.call_tool(
                    # select: arguments no other call used, so the worker has no report kept for them
                    "analyze",
                    {"path": str(path), "select": ["TS"]},
                    progress_callback=progress,
                )
            )
            with anyio.fail_after(60):
                await loading.wait()
            tg.cancel_scope.cancel()  # the client sends notifications/cancelled

    mcp_session.run(cancel_once_loading)
    # the worker that was loading is gone (killed and reaped), and the next call gets a new one
    after = mcp_session.call("rule", code="TS101")
    assert not after.is_error
    assert after.meta["tilescope/worker_pid"] != before  # type: ignore[index]
    with pytest.raises(ProcessLookupError):
        os.kill(before, 0)


def test_the_registration_snippets_of_the_docs_start_this_server() -> None:
    text = (REPO_ROOT / "docs" / "agents.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in text.split("```json\n")[1:]]
    # the host configurations (the example session's results are trimmed with "…", not JSON)
    hosts = [json.loads(b) for b in blocks if '"mcpServers"' in b or '"servers"' in b]
    assert len(hosts) == 2
    for b in hosts:
        server = (b.get("mcpServers") or b["servers"])["tilescope"]
        assert server["command"].endswith("tilescope") and server["args"][:2] == ["mcp", "--root"]
