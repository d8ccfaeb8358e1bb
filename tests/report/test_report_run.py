"""A multi-rank report leads with the run, in every format (issue #28 item 1): its folder (not its
first rank's), the ranks, the slow rank, the spread of step time over the ranks and the cross-rank
findings, then the per-rank summaries."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from tilescope.commands.analyze import RankOptions, build
from tilescope.config import Config
from tilescope.report import render_html, render_json, render_md, render_text
from tilescope.text.words import fmt_us

from support import SAMPLES

MD = MarkdownIt("commonmark", {"html": True}).enable("table")
EIGHT = SAMPLES / "cluster_8rank"


def _report(path: Path) -> dict[str, Any]:
    return build(path, Config(), None, False, [], RankOptions(jobs=1, use_cache=False))


@pytest.fixture(scope="module")
def eight() -> dict[str, Any]:
    return _report(EIGHT)


def _step_times(run_dir: Path) -> dict[int, float]:
    """Step time per rank from torch_npu's own step_trace_time.csv: Computing + Communication
    (Not Overlapped) + Free, summed over the rank's steps."""
    out: dict[int, float] = {}
    for i, csv_path in enumerate(sorted(run_dir.rglob("step_trace_time.csv"))):
        with csv_path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        out[i] = sum(float(r["Computing"]) + float(r["Communication(Not Overlapped)"]) + float(r["Free"])
                     for r in rows)
    return out


def test_the_json_run_section_comes_first_and_names_the_slow_rank(eight: dict[str, Any]) -> None:
    keys = list(json.loads(render_json.render(eight)))
    assert keys.index("run") < keys.index("inputs") < keys.index("summary")
    run = eight["run"]
    assert run["path"] == str(EIGHT) and run["ranks_total"] == 8 and run["ranks_loaded"] == 8
    assert run["slow_rank"] == 3  # the generator's planted slow rank, named by TS601
    computing = {r["rank"]: r["computing_us"] for r in eight["cluster"]["ranks"]}
    assert run["computing_us"]["max"] == max(computing.values()) and run["computing_us"]["max_rank"] == 3
    codes = [f["code"] for f in eight["findings"] if f.get("scope") == "cluster"]
    assert [f["code"] for f in run["cross_rank_findings"]] == codes and "TS601" in codes


def test_text_leads_with_the_run_then_the_ranks_own(eight: dict[str, Any]) -> None:
    out = render_text.render(eight, width=None)
    lines = out.splitlines()
    assert lines[0] == f"{EIGHT}: 8 ranks"
    assert lines[1].startswith("  slow rank: 3 (TS601), Computing 2,520.0 µs")
    order = [out.index(s) for s in ("slow rank: 3", "step time per rank:", "cross-rank findings: 4",
                                    "across ranks:", "\nper rank:", "ranks 0-2, 4-7: 12 launches",
                                    "on the ranks:", "TS102")]
    assert order == sorted(order)


def test_markdown_is_titled_with_the_run_and_keeps_rank_0_out_of_the_headline(eight: dict[str, Any]) -> None:
    out = render_md.render(eight)
    tokens = MD.parse(out)
    headings = ["".join(c.content for c in tokens[i + 1].children or [])
                for i, t in enumerate(tokens) if t.type == "heading_open"]
    title = headings[0]
    assert title == f"tilescope performance report — {EIGHT} · 8 ranks"
    head = out.split("### ")[0]  # the title and the lead, before any section
    assert "slow rank\\: 3 \\(TS601\\)" in head and "node0_" not in head and "Device time" not in head
    assert "### Top kernels" not in out  # no one rank's kernels as the run's
    assert headings[1:4] == ["What to do first", "Ranks (8 of 8 with a readable kernel table; times summed "
                             "over the profiled steps)", "Per rank"]
    slow_row = next(line for line in out.splitlines() if line.startswith("| **3** |"))
    assert "| 2,520\\.0\xa0µs |" in slow_row  # a time keeps its unit in a narrow column
    per_rank = out.split("### Per rank")[1].split("###")[0]
    html = MD.render(per_rank)
    rows = re.findall(r"<tr>\s*<td>([^<]*)</td>\s*<td[^>]*>([^<]*)</td>", html)
    assert [(r, d.replace("\xa0", " ")) for r, d in rows] == [("0-2, 4-7", "1,980.0 µs"), ("3", "2,520.0 µs")]
    # the cross-rank findings are the first findings listed
    codes = re.findall(r"<summary>\S* ?<b>\w+</b> <code>(TS\d+)</code>", out)
    assert codes[:4] == ["TS604", "TS605", "TS601", "TS603"] and codes[4:] == ["TS102", "TS102", "TS206"]


def test_html_is_titled_with_the_run(eight: dict[str, Any]) -> None:
    page = render_html.render(eight)
    assert f"<h1>tilescope report — {EIGHT}</h1>" in page
    assert page.index('<ul id="run">') < page.index('id="ranks"') < page.index('id="per-rank"')
    assert "<li>slow rank: 3 (TS601)" in page and "Where the time goes — rank 0" in page


@pytest.mark.parametrize("folder", ["torch_2rank_pipeutil_text", "gpt3_2rank_memoryl0"])
@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_real_two_rank_runs_lead_with_their_step_spread(real_traces: Path, folder: str) -> None:
    run_dir = real_traces / folder
    report = _report(run_dir)
    steps = _step_times(run_dir)
    run = report["run"]
    assert run["path"] == str(run_dir) and run["ranks_total"] == 2
    assert run["step_us"]["min"] == pytest.approx(min(steps.values()), abs=1e-3)
    assert run["step_us"]["max"] == pytest.approx(max(steps.values()), abs=1e-3)
    longest = max(steps, key=lambda r: steps[r])
    assert run["longest_step_rank"] == longest
    assert run["slow_rank"] is None  # TS601 does not fire on either run
    text = render_text.render(report, width=None)
    assert text.splitlines()[0].startswith(f"{run_dir}: 2 ranks")
    assert f"the longest step is rank {longest}'s" in text
    shortest = min(steps, key=lambda r: steps[r])
    spread = f"{fmt_us(steps[shortest])} (rank {shortest}) to {fmt_us(steps[longest])} (rank {longest})"
    md = render_md.render(report)
    for out in (text, md.replace("\\", ""), render_html.render(report)):
        assert spread in out
