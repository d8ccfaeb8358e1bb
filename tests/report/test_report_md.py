"""Markdown report: content, IR excerpts, hostile names, size limit, job summary."""

from __future__ import annotations

import copy
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tilescope.errors import UsageError
from tilescope.report import render_md
from tilescope.text.escape import md_text
from tilescope.text.words import fmt_us

from support import REPO_ROOT
from support.report_data import HOSTILE, hostile_report, make_bundle, sample_report

MD = MarkdownIt("commonmark", {"html": True}).enable("table")
# a finding's own <details>: its summary opens with the severity (the evidence and code ones do not)
FINDING_SUMMARY = re.compile(r"<summary>\S* ?<b>(?:HIGH|MEDIUM|LOW|INFO)</b>")



@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return make_bundle(tmp_path / "bundle")

def test_headline_shares_top_kernels_and_findings_in_saving_order(bundle: Path) -> None:
    out = render_md.render(sample_report(bundle))
    head = out.split("### Top kernels")[0]
    assert "**Device time 5,000.00 µs**" in head or "**Device time 5,000.0 µs**" in head
    assert "Cube 28 %" in head and "Vector 70 %" in head and "data movement (MTE) 12 %" in head
    assert "4 findings: 1 high, 1 medium, 1 low, 1 info" in head.replace("\\", "")
    assert "`BatchMatMul_1`" in out and "42.0\xa0%" in out  # a table cell: never wrapped from its unit
    codes = re.findall(r"<summary>.*?<code>(TS\d+)</code>", out)
    assert codes == ["TS101", "TS201", "TS402", "TS402"]
    assert out.count("<details>") == out.count("</details>")
    assert len(FINDING_SUMMARY.findall(out)) == 4  # the evidence and the code are <details> inside
    assert "**What to do:** Fuse QK^T" in out.replace("\\", "")
    assert "l2\\-cache\\-thrash" in out or "l2-cache-thrash" in out  # skipped rule listed
    assert "TS999" in out  # rule error listed


def test_excerpts_come_from_the_bundle_with_marked_lines(bundle: Path) -> None:
    out = render_md.render(sample_report(bundle))
    assert "> 12 |     T.copy(A[12], a_ub)  # src 12" in out
    assert "> 13 |" in out and ">  9 |" not in out
    assert "> 30 |     line_30 = T.op(30)  # tvm" in out
    assert "```cpp\n" in out and "> 20 |   pipe_barrier(PIPE_ALL); // cpp 20" in out


def test_excerpt_reads_are_confined_to_the_bundle(bundle: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET\n")
    report = sample_report(bundle)
    report["findings"][0]["locations"] = [
        {"file": "../secret.txt", "line": 1, "stage": "source"},
        {"file": str(secret), "line": 1, "stage": "source"},
        {"file": "/etc/hostname", "line": 1, "stage": "ascendc"},
    ]
    assert "TOP-SECRET" not in render_md.render(report)
    # an explicit source root widens the allowed set, on purpose
    assert "TOP-SECRET" in render_md.render(report, source_root=tmp_path)


def test_no_bundle_means_no_excerpt_but_locations_listed() -> None:
    out = render_md.render(sample_report(None))
    assert "```python" not in out
    assert "`kernels/attn.py:12` (source)" in out


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_names_are_inert_when_rendered(bundle: Path, hostile: str) -> None:
    out = render_md.render(hostile_report(bundle, hostile))
    rendered = MD.render(out)
    assert "<img" not in rendered and "<script" not in rendered
    assert not re.search(r"<a\s", rendered)
    # GitHub links mentions in text, not in code: outside code the @ is followed by a ZWSP
    outside_code = re.sub(r"<(code|pre)[^>]*>.*?</\1>", "", rendered, flags=re.DOTALL)
    assert "@org/team" not in outside_code
    # every table row keeps its column count
    for table in re.findall(r"<table>.*?</table>", rendered, re.DOTALL):
        header_cols = len(re.findall(r"<th[ >]", table.split("</thead>")[0]))
        for row in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], re.DOTALL):
            assert len(re.findall(r"<td[ >]", row)) == header_cols, row
    # every <details> is closed by us, not by the hostile text
    assert rendered.count("<details>") == rendered.count("</details>")
    assert len(FINDING_SUMMARY.findall(rendered)) == 4


def test_stays_under_the_github_comment_limit_and_says_what_was_dropped(bundle: Path) -> None:
    report = sample_report(bundle)
    base = report["findings"][0]
    report["findings"] = []
    for i in range(400):
        f = copy.deepcopy(base)
        f["code"] = f"TS{100 + i % 7}"
        f["evidence"] = {f"metric_{j}": "x" * 150 for j in range(12)}
        f["message"] = f"finding {i} " + "y" * 150
        report["findings"].append(f)
    out = render_md.render(report)
    assert len(out) <= render_md.GITHUB_COMMENT_LIMIT
    assert len(out) <= render_md.DEFAULT_MAX_CHARS
    note = re.search(r"\*\*Truncated\*\* to keep this report under 20,000 characters: of "
                     r"400 findings, (\d+) shown as one line, without evidence and code; "
                     r"(\d+) omitted \(", out)
    assert note, out[-1500:]
    full_blocks = len(FINDING_SUMMARY.findall(out))
    assert full_blocks + int(note.group(1)) + int(note.group(2)) == 400
    assert "TS100 ×" in out.split("**Truncated**")[1]


def test_tiny_limit_is_still_honoured(bundle: Path) -> None:
    out = render_md.render(sample_report(bundle), max_chars=600)
    assert len(out) <= 600 and "Truncated" in out


def test_append_github_summary_appends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "summary.md"
    target.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    render_md.append_github_summary("## one")
    render_md.append_github_summary("## two\n")
    assert target.read_text() == "# earlier step\n\n## one\n\n## two\n"
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    with pytest.raises(UsageError, match="GITHUB_STEP_SUMMARY"):
        render_md.append_github_summary("x")


BUNDLE = REPO_ROOT / "sample_traces" / "tilelang_fa_bundle"


@pytest.fixture(scope="module")
def fa_markdown() -> tuple[dict, str]:
    from tilescope.commands.analyze import build
    from tilescope.config import Config

    report = build(BUNDLE, Config(), None, False)
    return report, render_md.render(report)


def test_fa_bundle_report_fits_the_budget_with_every_finding_in_full(fa_markdown: tuple[dict, str]) -> None:
    """Issue #15 item 5: 59,491 characters for one kernel, three findings repeating 30 excerpts."""
    report, out = fa_markdown
    assert len(out) <= 20_000
    codes = re.findall(r"<summary>.*?<code>(TS\d+)</code>", out)
    assert codes == [f["code"] for f in report["findings"]]  # all six, each with its block
    assert "Truncated" not in out


def test_each_excerpt_line_is_shown_once_with_the_findings_that_point_at_it(
    fa_markdown: tuple[dict, str],
) -> None:
    _, out = fa_markdown
    blocks = re.findall(r"<summary><b>(E\d+)</b> · (\w+) · <code>([^<]+)</code> lines? (\d+)(?:–(\d+))? · "
                        r"([^\n]*)</summary>\n\n```\w*\n(.*?)```\n\n</details>", out, re.DOTALL)
    assert len(blocks) >= 4
    seen: set[tuple[str, int]] = set()
    for _eid, _stage, file, _first, _last, by, body in blocks:
        for m in re.finditer(r"^[> ]\s*(\d+) \|", body, re.MULTILINE):
            key = (file, int(m.group(1)))
            assert key not in seen, f"{file}:{key[1]} shown twice"
            seen.add(key)
        assert re.fullmatch(r"(TS\d+(?: ×\d+)?)(, TS\d+(?: ×\d+)?)*", by), by
    # the author's source first: read from the bundle's kernel/ copy
    assert blocks[0][1] == "source" and blocks[0][2].endswith("flash_attention.py")
    assert "T.Pipelined(seq_kv // block_N, num_stages=num_stages)" in out
    # a finding names the excerpts it points into instead of repeating them
    assert re.search(r"\*\*Code:\*\* E1, ", out)
    assert len(re.findall(r"T\.gemm\(q_l0, k_l0", out)) == 1


def test_evidence_is_tables_with_units_not_cut_json(fa_markdown: tuple[dict, str]) -> None:
    _, out = fa_markdown
    plain = out.replace("\\", "").replace("\xa0", " ")  # numbers keep their unit with a no-break space
    assert "| measured.core_efficiency | 33.3 % |" in plain
    assert "| total_us | 43.739 µs |" in plain
    assert "| needed_bytes.L0A | 131,072 B (128 KiB) |" in plain
    assert "{" not in plain.split("### Code the findings")[0].replace("{%", "")  # no JSON in evidence
    assert not re.search(r"\d\.\d+e[+-]\d", plain)  # no 7.858e+04


def test_occurrences_show_offsets_not_epoch_nanoseconds() -> None:
    from tilescope.commands.analyze import build
    from tilescope.config import Config

    unfused = BUNDLE.parent / "attention_unfused"
    out = render_md.render(build(unfused, Config(), None, False), max_chars=60_000).replace("\xa0", " ")
    assert "| 2 | \\+0 µs |" in out and "\\+18\\.823 ms" in out  # start (from the first)
    assert not re.search(r"^\|.*\d{16,}", out, re.MULTILINE)  # no epoch-ns start times in a table


def test_a_long_report_keeps_every_finding_as_a_line() -> None:
    from tilescope.commands.analyze import build
    from tilescope.config import Config

    report = build(BUNDLE.parent / "attention_unfused", Config(), None, False)
    out = render_md.render(report)
    assert len(out) <= 20_000
    codes = re.findall(r"^(?:<summary>|- ).*?<code>(TS\d+)</code>", out, re.MULTILINE)
    assert codes == [f["code"] for f in report["findings"]]
    assert "shown as one line" in out and "`--format html`" in out


def test_the_html_report_shows_the_authors_source_and_evidence_tables(fa_markdown: tuple[dict, str]) -> None:
    """The bundle's locations name the kernel as it was given (outside the bundle); its copy in
    kernel/ is what both reports read, so the source excerpt is no longer missing."""
    from tilescope.report import render_html

    report, _ = fa_markdown
    page = render_html.render(report)
    assert 'data-stage="source"' in page and "T.Pipelined" in page
    assert "<td>measured.core_efficiency</td><td>33.3 %</td>" in page
    assert "<th>side</th><th>max_us</th>" in page  # TS402's per-side records as their own table


class _Nesting(HTMLParser):
    """Rendered Markdown walked as HTML: for every <table> and <pre>, the <summary> texts of the
    <details> it sits in (innermost last)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []  # one entry per open <details>: its summary's text
        self.in_summary = False
        self.found: list[tuple[str, list[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "details":
            self.stack.append("")
        elif tag == "summary":
            self.in_summary = True
        elif tag in ("table", "pre"):
            self.found.append((tag, list(self.stack)))

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self.stack.pop()
        elif tag == "summary":
            self.in_summary = False

    def handle_data(self, data: str) -> None:
        if self.in_summary and self.stack:
            self.stack[-1] += data


def test_the_first_screen_is_the_verdict_and_the_top_fixes(fa_markdown: tuple[dict, str]) -> None:
    """Issue #28 item 10: 'What to do' sat under evidence tables of 15-35 rows; a reviewer reads
    the verdict and the largest fixes before any table."""
    report, out = fa_markdown
    tokens = MD.parse(out)
    first_table = next(i for i, t in enumerate(tokens) if t.type == "table_open")
    before = tokens[:first_table]
    texts = [t.content for t in before if t.type == "inline"]
    assert texts[2].startswith("**7 findings\\: 4 high, 2 medium, 1 low — est\\. 38\\.3 µs")
    assert texts[3] == "What to do first"
    items = [t.content for t in before if t.type == "inline"][4:-1]  # the list, then "Top kernels"
    assert texts[-1] == "Top kernels"
    fixes = [f for f in report["findings"] if f.get("recommendation")][:3]
    assert len(items) == 3 and len(out[: out.index("### Top kernels")].splitlines()) <= 20
    for item, f in zip(items, fixes, strict=True):
        assert item.startswith(f"{render_md.SEVERITY_ICON[f['severity']]} **{f['code']}**")
        assert md_text(f["recommendation"], 600) in item and "\nat `" in item


def test_evidence_and_code_are_behind_details(fa_markdown: tuple[dict, str]) -> None:
    report, out = fa_markdown
    walk = _Nesting()
    walk.feed(MD.render(out))
    body = out.split("### Findings by estimated saving")[1]
    tables = [stack for tag, stack in walk.found if tag == "table"][1:]  # after the top kernels
    assert len(tables) >= len(report["findings"])
    assert all(len(s) == 2 and s[1].startswith("Evidence: ") for s in tables), tables
    pres = [stack for tag, stack in walk.found if tag == "pre"]
    assert pres and all(len(s) == 1 and re.match(r"E\d+ · ", s[0]) for s in pres), pres
    # in each finding its fix comes before its evidence
    for block in body.split("</summary>")[1:]:
        if "**What to do:**" in block and "Evidence: " in block:
            assert block.index("**What to do:**") < block.index("Evidence: ")


def test_each_findings_code_stays_together_and_ascend_c_is_shown(fa_markdown: tuple[dict, str]) -> None:
    """The excerpts were ordered source, then TVMScript, then Ascend C over all findings, so the
    length limit always dropped the Ascend C ones; now each finding's three stages come
    together, by saving, and what is left out is the least valuable finding's code."""
    _, out = fa_markdown
    shown = re.findall(r"<summary><b>E(\d+)</b> · (\w+) · ", out)
    stages = [stage for _, stage in shown]
    assert stages[:3] == ["source", "tvmscript", "ascendc"] and "ascendc" in stages
    first_code = re.search(r"\*\*Code:\*\* ((?:E\d+, )*E\d+)", out)
    assert first_code and first_code.group(1) == ", ".join(f"E{n}" for n, _ in shown[:3])
    left = re.search(r"(\d+) code excerpts? left out for length \(E(\d+) ", out)
    if left:
        assert int(left.group(2)) == len(shown) + 1


def test_number_cells_keep_their_units(fa_markdown: tuple[dict, str]) -> None:
    """`43.7 µs` wrapped as `43.7 / µs` in GitHub's narrow columns: a no-break space holds them."""
    report, out = fa_markdown
    row = next(line for line in out.splitlines() if line.startswith("| 1 | `flash_fwd_kernel_mix_aic`"))
    total = report["top_kernels"][0]["total_us"]
    assert f"| {fmt_us(total).replace(' ', chr(0xA0))} |" in row and " µs" not in row
