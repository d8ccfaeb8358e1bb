"""The Kernel detail view on real profiles, through Dash's own callback endpoint (#28 item 6).

A page session (support.dash_session) opens the tab as the page does. The expected numbers are read
from the real files with the csv module (../shared/traces/real/, hand-checked values in its
README), not from the code under test:
- an HCCL all-reduce's time is said as a share of the communication time and of the compute time,
  never clamped (79.09 ms is 891 % of rank 0's 8,873.737 µs of compute), and no view advises
  collecting pipe or memory counters for it;
- "bound by" is the terminal's (the report's kernel row, `sol_text`), never "none" beside a speed of
  light; the findings KPI counts the codes it does not name;
- every PMU counter the kernel has is listed under its metric group with its unit: MemoryL0 on
  gpt3_2rank_memoryl0, L2Cache and bank conflicts on vllm_moe_lora_5groups.
"""

from __future__ import annotations

import contextlib
import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tilescope.columns import canonical_name, counter_unit
from tilescope.dashboard.app import create_app, store_of
from tilescope.report.access import report_kernels
from tilescope.report.evidence import plain_number
from tilescope.text.words import sol_text

from support import REAL_TRACES, SAMPLES
from support.dash_session import DashSession

TORCH = REAL_TRACES / "torch_2rank_pipeutil_text"
GPT3 = REAL_TRACES / "gpt3_2rank_memoryl0"
VLLM = REAL_TRACES / "vllm_moe_lora_5groups"
pytestmark = pytest.mark.slow  # each test loads real profiles (3-25 s)
needs_real = pytest.mark.skipif(not REAL_TRACES.is_dir(), reason="../shared/traces/real is absent")


_APPS: dict[tuple[Path, ...], Any] = {}


def app_of(*paths: Path) -> Any:
    """One app per set of served paths for the module: the store keeps each profile's analysis, so
    the tests that open the same real run (the 2-rank torch export: ~4 s to analyse) share it. A
    session's clicks live in its own DashSession, not in the app."""
    if paths not in _APPS:
        _APPS[paths] = create_app(list(paths))
    return _APPS[paths]


def csv_rows(path: Path) -> list[dict[str, str]]:
    """The rows with every field (gpt3 rank 0's row 16 lacks one: the loader skips it, and says so)."""
    with path.open(newline="", encoding="utf-8") as fh:
        return [r for r in csv.DictReader(fh) if None not in r.values()]


def floats(rows: list[dict[str, str]], column: str) -> list[float]:
    out = []
    for r in rows:
        with contextlib.suppress(ValueError, KeyError):
            out.append(float(r[column].strip()))
    return out


def union_us(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for s, e in sorted(spans):
        if e > end:
            total += e - max(s, end)
            end = e
    return total


def open_kernel(page: DashSession, profile: str, kernel: str) -> None:
    page.set("profile.value", profile)
    page.set("tabs.value", "detail")
    page.set("d-kernel.value", kernel)
    assert page.bad == []


def kpis(page: DashSession) -> dict[str, str]:
    """label -> value of the KPI cards the view holds."""
    out = {}
    for card in page.value("d-info.children") or []:
        value, label = (c["props"]["children"] for c in card["props"]["children"])
        out[label] = value
    return out


def table_rows(children: Any) -> Iterator[tuple[str, list[str]]]:
    """(group, cells) of every counter row of a counters table, as the page receives it: the data on
    its box (`data-table`), which dashboard/assets/counters_table.js draws (the browser tests read
    the drawn rows)."""
    for node in _walk(children):
        table = node["props"].get("data-table")
        if table is None:
            continue
        for group, rows in json.loads(table)["groups"]:
            for cells in rows:
                yield group, cells


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, list):
        for n in node:
            yield from _walk(n)
    elif isinstance(node, dict) and "props" in node:
        yield node
        yield from _walk(node["props"].get("children"))


@needs_real
def test_an_all_reduce_is_a_share_of_what_it_is_part_of_and_gets_no_pipe_advice() -> None:
    rows = csv_rows(TORCH / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    hccl = [r for r in rows if r["Accelerator Core"] == "HCCL"]
    starts = [float(r["Start Time(us)"].strip()) for r in hccl]
    spans = [(s, s + float(r["Duration(us)"])) for s, r in zip(starts, hccl, strict=True)]
    biggest = max(hccl, key=lambda r: float(r["Duration(us)"]))
    assert biggest["Name"] == "hcom_allReduce__586_0_1" and float(biggest["Duration(us)"]) == 79089.52
    page = DashSession(app_of(TORCH))
    open_kernel(page, "p0", biggest["Name"])
    shown = kpis(page)
    assert shown["total time"] == "79.09 ms"
    # README: rank 0's compute (union of compute kernels) is 8,873.737 µs; 891 %, never "100.0 %"
    assert shown["of device time (compute kernels)"] == f"{79089.52 / 8873.737 * 100:.1f} %" == "891.3 %"
    assert shown["of communication time"] == f"{79089.52 / union_us(spans) * 100:.1f} %"
    assert "100.0 %" not in shown.values()
    said = json.dumps([page.value(f"{g}.figure") for g in ("d-pipes", "d-split", "d-bw", "d-blocks")])
    said += json.dumps(page.value("d-counters.children"))
    assert "PipeUtilization" not in said and "aic_metrics=Memory" not in said and "msprof op" not in said
    assert said.count("HCCL tasks do not run on the AI Core") == 5  # four figures and the counters


def test_bound_by_is_the_terminals_and_the_findings_kpi_counts_the_rest() -> None:
    app = app_of(SAMPLES / "tilelang_fa_bundle")
    entry = store_of(app).get("p0")
    assert entry is not None
    name = "flash_fwd_kernel_mix_aic"
    page = DashSession(app)
    open_kernel(page, "p0", name)
    shown = kpis(page)
    # the report's own kernel row, which the terminal, Markdown and HTML print with sol_text
    row = next(r for r in report_kernels(entry.report) if r["name"] == name)
    assert shown["speed of light (bound by)"] == sol_text(row)
    assert row["sol_bound"] == "cube" and "(cube)" in shown["speed of light (bound by)"]
    assert "none" not in shown.values() and "bound by" not in shown  # the pipe label is gone
    codes = [f["code"] for f in entry.findings if name in f.get("kernels", [])]
    assert len(codes) == 5
    assert shown[f"findings ({len(codes)})"] == ", ".join(codes[:4]) + " +1 more"


@needs_real
def test_memory_l0_counters_of_a_kernel_with_units_and_means() -> None:
    rank = GPT3 / "test_rank_0"
    rows = [r for r in csv_rows(rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
            if r["Name"] == "FlashAttentionScore"]
    assert len(rows) == 3
    page = DashSession(app_of(GPT3))
    open_kernel(page, "p0", "FlashAttentionScore")
    shown = {cells[0]: (group, cells[1:]) for group, cells in table_rows(page.value("d-counters.children"))}
    l0 = [h for h in rows[0] if "_l0" in h]
    assert len(l0) == 8  # aic_l0a/l0b read/write, aic_l0c read/write (cube), aiv_l0c read/write
    for header in [*l0, "aicore_time(us)", "aiv_total_cycles"]:
        values = floats(rows, header)
        group, (unit, mean, low, high, launches) = shown[canonical_name(header)]
        assert group == ("MemoryL0" if "_l0" in header else "Core time and cycles (every group)")
        assert unit == counter_unit(canonical_name(header)) == ("cycles" if "cycles" in header else
                                                                "µs" if "(us)" in header else "GB/s")
        assert (mean, low, high, launches) == (plain_number(sum(values) / len(values)),
                                              plain_number(min(values)), plain_number(max(values)), "3")
    # only what the profile has: no pipe, L2 or bank-conflict rows on a MemoryL0 run
    assert {g for g, _ in shown.values()} == {"Core time and cycles (every group)", "MemoryL0"}


@needs_real
@pytest.mark.parametrize("group", ["L2Cache", "ResourceConflictRatio"])
def test_l2_cache_and_bank_conflict_counters(group: str) -> None:
    run = VLLM / f"PROF_{group}"
    (summary,) = run.rglob("op_summary_*.csv")
    rows = [r for r in csv_rows(summary) if r["Op Name"].startswith("aclnnInplaceOne")]
    assert len(rows) == 2  # two launches of one OnesLike kernel
    name = rows[0]["Op Name"]
    app = app_of(run)
    page = DashSession(app)
    open_kernel(page, "p0", name)
    shown = {cells[0]: (g, cells[1:]) for g, cells in table_rows(page.value("d-counters.children"))}
    # a Vector kernel: its Cube side's counters are read as absent (the loader's reading of a side
    # that did not run), its Vector side's are listed
    marks = ("cache",) if group == "L2Cache" else ("cflt",)
    headers = [h for h in rows[0] if any(m in h for m in marks) and h.startswith("aiv_")]
    assert len(headers) == (6 if group == "L2Cache" else 3)
    assert not any(c.startswith("aic_") for c in shown if c not in ("aic_time_us", "aic_total_cycles"))
    for header in headers:
        values = floats(rows, header)
        g, (unit, mean, *_rest) = shown[canonical_name(header)]
        assert g == group and unit == ("count" if group == "L2Cache" else "ratio (0–1)")
        assert mean == plain_number(sum(values) / len(values))
    if group == "L2Cache":  # the Vector side's write misses of the two launches: 32 and 1,024 in the file
        assert shown["aiv_write_cache_miss_allocate"][1][1:4] == ["528", "32", "1,024"]


@needs_real
def test_compare_shows_a_kernels_counters_beside_the_base() -> None:
    """Rank 0 against rank 1 of one run: the top compute kernel's counters, each rank's mean."""
    page = DashSession(app_of(TORCH))
    page.set("tabs.value", "compare")
    assert (page.value("c-base.value"), page.value("c-head.value")) == ("p0", "p1")
    name = page.value("c-counter-kernel.value")
    assert name and not name.startswith("hcom_")  # both ranks ran it; HCCL tasks have no counters
    means = []
    for rank in ("rank0_ascend_pt", "rank1_ascend_pt"):
        rows = [r for r in csv_rows(TORCH / rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
                if r["Name"] == name]
        means.append({h: sum(v) / len(v) for h in rows[0] if (v := floats(rows, h)) and "_" in h})
    shown = {cells[0]: (g, cells[1:]) for g, cells in table_rows(page.value("c-counters.children"))}
    for header in ("aiv_vec_time(us)", "aiv_mte2_ratio", "aiv_total_cycles"):
        g, (_unit, base, head, _change, _pct) = shown[canonical_name(header)]
        assert g in ("PipeUtilization", "Core time and cycles (every group)")
        assert (base, head) == (plain_number(means[0][header]), plain_number(means[1][header]))
    title = page.texts(["c-counters"])[0]
    assert title.startswith(f"Counters — base torch_2rank_pipeutil_text (rank 0): {name[:40]}")
    assert page.bad == []


def test_one_profile_is_never_compared_with_itself_and_a_pair_still_can_be() -> None:
    app = app_of(SAMPLES / "attention_unfused")
    page = DashSession(app)
    page.set("tabs.value", "compare")
    assert page.value("c-base.value") == "p0" and page.value("c-head.value") is None
    said = " ".join(page.texts(["c-kpis"]))
    assert said.startswith("Nothing to compare with") and "only profile served" in said
    assert page.value("c-grid.rowData") == []
    assert "Nothing to compare with" in " ".join(page.texts(["c-counters"]))
    # the pair pickers are offered: two kernels of this one run, compared with each other
    options = [o["value"] for o in page.value("c-match-base.options")]
    assert options and options == [o["value"] for o in page.value("c-match-head.options")]
    base, head = "aclnnMean_ReduceMeanAiCore_ReduceMean", "aclnnRsqrt_RsqrtAiCore_Rsqrt"
    assert base in options and head in options
    page.set("c-match-base.value", base)
    page.set("c-match-head.value", head)
    assert [r["name"] for r in page.value("c-grid.rowData")] == [f"{base} → {head}"]
    assert "Nothing to compare" not in json.dumps(page.value("c-kpis.children"))
    # and their counters side by side, the base kernel's beside the head kernel's
    assert page.texts(["c-counters"])[0].startswith(f"Counters — base attention_unfused: {base}")
    assert page.bad == []


def test_clearing_base_clears_the_comparison() -> None:
    page = DashSession(app_of(SAMPLES / "attention_unfused", SAMPLES / "attention_fused"))
    page.set("tabs.value", "compare")
    assert len(page.value("c-kpis.children")) == 5 and page.value("c-grid.rowData")
    assert page.texts(["c-counters"])
    page.set("c-base.value", None)
    assert page.texts(["c-kpis"]) == ["Pick a base profile: the run the head is compared with."]
    assert page.value("c-grid.rowData") == [] and page.value("c-findings.children") == []
    assert page.value("c-delta.figure")["data"] == [] and page.value("c-counters.children") == []
    assert page.value("c-match-base.options") == [] and page.value("c-counter-kernel.options") == []
    assert page.bad == []
