"""`tilescope diff BASE HEAD`: what changed between two runs, and a regression gate."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.cells import cell_len

from tilescope.atomic import write_text_atomic
from tilescope.commands import CHIP_HELP, STRICT_HELP, honours_strict
from tilescope.commands.analyze import build
from tilescope.commands.diff_words import finding_line, signed_pct, signed_us, term_text
from tilescope.diff import CROSSED, DiffResult, KernelDelta
from tilescope.diff_cluster import ClusterDiff, diff_paths
from tilescope.errors import GateTrippedError, UsageError
from tilescope.report.palette import PIPE_SERIES
from tilescope.text.escape import md_code_span, md_nowrap, md_text, one_line
from tilescope.text.terminal import WIDTH_HELP, console, cut_name, output_width, wrap, write_stdout
from tilescope.text.words import UNIT_LABELS, fmt_pct, fmt_us

if TYPE_CHECKING:
    from tilescope.io.failures import LoadFailure

SHOWN_KERNELS = 15
SHARE_LABELS = tuple((k, label) for k, label in UNIT_LABELS if k != "scalar")
# the per-kernel pipe columns diff compares: each pipe's share of the launch, as the report shows it
PIPE_LABELS = {column: label for column, label, _ in PIPE_SERIES}


def _spread_text(d: KernelDelta, side: str) -> str:
    s = d.base if side == "base" else d.head
    if s is None:
        return "–"
    p = s.per_launch
    if p.kind in ("one value", "unknown"):
        return f"{fmt_us(p.median)} (n={p.n})"
    return f"{fmt_us(p.median)} [{fmt_us(p.lo)}–{fmt_us(p.hi)}] (n={p.n})"


def _total_line(r: DiffResult) -> str:
    b, h = r.base_total, r.head_total
    head = (f"{fmt_us(b.median)} → {fmt_us(h.median)}  {signed_us(h.median - b.median)} "
            f"({signed_pct(r.total_delta_pct)}), {r.total_verdict}; ")
    if r.single_sample:
        return head + "1 launch per side: no spread to tell a change from noise"
    return head + (f"spread base {fmt_us(b.lo)}–{fmt_us(b.hi)}, head {fmt_us(h.lo)}–{fmt_us(h.hi)} "
                   f"over {b.kind}")


WHY_HEAD = "what changed with each kernel, the grid first, then by its part of the change"
_SHOWN = ("lowering:", "lines:")
WHY_VERDICTS = ("regressed", "improved", "within noise", "slower (no spread)", "faster (no spread)")


def shown_kernels(r: DiffResult) -> list[KernelDelta]:
    """The kernels the text and Markdown show: changes beyond the threshold first, each group by
    the size of its change per step (a −0.7 µs change within the threshold led a table sorted by
    base median); `--format json` keeps every kernel in the run's order."""
    ranked = sorted(r.kernels, key=lambda d: (d.verdict.startswith("within"), -abs(d.delta_us)))
    return ranked[:SHOWN_KERNELS]


def why_lines(r: DiffResult) -> list[tuple[str, str]]:
    """(kernel label, explanation) for each shown kernel whose time changed beyond the threshold:
    "+192.0 %: Block Dim 4 → 1 (...); time × blocks at once −26 %"."""
    repeated = _repeated_names(r)
    out = []
    for d in shown_kernels(r):
        # a changed lowering, or measured lines that moved, are shown even when the time held: the
        # reviewer asked for the change
        if d.causes and (d.verdict in WHY_VERDICTS or any(c.fact.startswith(_SHOWN) for c in d.causes)):
            out.append((kernel_label(d, repeated),
                        f"{signed_pct(d.median_delta_pct)}: " + "; ".join(c.text for c in d.causes)))
    return out


def _samples_text(r: DiffResult) -> str:
    if r.single_sample:
        return "threshold only: 1 launch per side"
    if min(r.samples) <= 1:  # one side's spread is a single value: only the other's noise is known
        return f"noise-aware on one side only: up to {r.samples[0]} vs {r.samples[1]} launches per kernel"
    return f"noise-aware: up to {r.samples[0]} vs {r.samples[1]} launches per kernel"


def kernel_label(d: KernelDelta, repeated: set[str]) -> str:
    """The kernel's name, plus its input shapes when several rows share the name."""
    s = d.head or d.base
    if d.matched_by == "--match" and d.base is not None and d.head is not None:
        return f"{d.base.name} → {d.head.name}"  # two different kernels, paired by the user
    if s is None or d.name not in repeated or not s.shapes:
        return d.name
    return f"{d.name} [{s.shapes}]"


def _repeated_names(r: DiffResult) -> set[str]:
    counts: dict[str, int] = {}
    for d in shown_kernels(r):
        counts[d.name] = counts.get(d.name, 0) + 1
    return {n for n, c in counts.items() if c > 1}


def _kernel_groups(r: DiffResult) -> tuple[list[KernelDelta], list[KernelDelta], list[KernelDelta]]:
    matched = [d for d in r.kernels if d.base is not None and d.head is not None]
    removed = [d for d in r.kernels if d.verdict == "removed"]
    added = [d for d in r.kernels if d.verdict == "added"]
    return matched, removed, added


def render_text(r: DiffResult, width: int | None = None) -> str:
    """The terminal view, wrapped at `width` (None: no wrapping). The kernel table keeps its
    numbers unwrapped; when even a folded name leaves them no room, each kernel is a short block."""
    esc = term_text  # control characters shown as escapes: a kernel name must not drive the terminal
    matched, removed, added = _kernel_groups(r)
    out: list[str] = []

    def say(text: str, indent: str = "", hang: str = "  ") -> None:
        out.extend(wrap(text, width, indent, hang))

    say(f"tilescope diff: {esc(r.base_label)} → {esc(r.head_label)}")
    say(f"device time per step: {_total_line(r)}")
    shares = ", ".join(f"{label} {fmt_pct(r.shares[k][0], 0)} → {fmt_pct(r.shares[k][1], 0)}"
                       for k, label in SHARE_LABELS if r.shares[k] != (None, None))
    if shares:
        say(f"busy (of device time): {shares}")
    say(f"kernels: {len(matched)} matched, {len(removed)} removed "
        f"({signed_us(-sum(d.base_per_step_us for d in removed))} per step), {len(added)} added "
        f"({signed_us(sum(d.head_per_step_us for d in added))} per step)")
    out.append("")
    out += _kernel_lines(r, width)
    if len(r.kernels) > SHOWN_KERNELS:
        say(f"… {len(r.kernels) - SHOWN_KERNELS} more kernels (--format json has all)")
    why = why_lines(r)
    if why:
        out.append("")
        say(f"why ({WHY_HEAD}):")
        for label, text in why:
            say(f"{esc(label)} {text}", "  ", "    ")
    out.append("")
    crossed = f", {len(r.crossed)} crossed a threshold" if r.crossed else ""
    say(f"findings: {len(r.resolved)} resolved, {len(r.new)} new{crossed}, {r.persisting} persisting")
    for f in r.resolved:
        say(f"resolved {finding_line(f, esc)}", "  ", "    ")
    for f in r.new:
        say(f"new      {finding_line(f, esc)}", "  ", "    ")
    for f in r.crossed:
        say(f"crossed  {finding_line(f, esc)} ({CROSSED})", "  ", "    ")
    out.append("")
    say(_gate_line(r, esc))
    new_gate = _new_gate_line(r, esc)
    if new_gate is not None:
        say(new_gate)
    return "\n".join(out) + "\n"


KERNEL_HEADERS = ("kernel", "verdict", "Δ per step", "Δ median", "base median per launch [IQR]",
                  "head median per launch [IQR]")
KERNEL_FLOOR = 24  # cells a folded kernel name keeps in the table; fewer: one block per kernel


def _kernel_lines(r: DiffResult, width: int | None) -> list[str]:
    """The top kernels: a table (box-less, numbers unwrapped) when it fits `width`, else a block
    per kernel (its name, then the verdict and the medians, wrapped without splitting a number)."""

    # deferred: rich.table, rich.text only for terminal output; `tilescope --help` imports every command
    #   module
    from rich.table import Table
    from rich.text import Text

    repeated = _repeated_names(r)
    rows = []
    for d in shown_kernels(r):
        pipes = [f"{PIPE_LABELS.get(col, col)} {fmt_pct(a, 0)} → {fmt_pct(b, 0)}"
                 for col, (a, b) in d.pipe_changes.items()]
        label = term_text(kernel_label(d, repeated), None)
        cells = [label if width is None else cut_name(label, 48), d.verdict, signed_us(d.delta_us),
                 signed_pct(d.median_delta_pct), _spread_text(d, "base"), _spread_text(d, "head")]
        rows.append((cells, pipes))
    if not rows:
        return []
    natural = [max(cell_len(h), *(cell_len(cells[i]) for cells, _ in rows))
               for i, h in enumerate(KERNEL_HEADERS)]
    pipe_width = max((cell_len(p) + 2 for _, pipes in rows for p in pipes), default=0)
    natural[0] = max(natural[0], pipe_width)
    gaps = 2 * (len(KERNEL_HEADERS) - 1)
    if width is not None and sum(natural[1:]) + gaps + min(natural[0], KERNEL_FLOOR) > width:
        lines: list[str] = []
        for cells, pipes in rows:
            name, verdict, per_step, median, base, head = cells
            lines += wrap(name, width, "", "  ")
            lines += wrap(f"{verdict} · Δ per step {per_step} · Δ median {median}", width, "    ", "      ")
            lines += wrap(f"median per launch [IQR]: base {base} → head {head}", width, "    ", "      ")
            for p in pipes:
                lines += wrap(p, width, "    ", "      ")
        return lines
    table = Table(box=None, pad_edge=False, show_header=True, header_style="", expand=False)
    for i, header in enumerate(KERNEL_HEADERS):
        table.add_column(header, justify="left" if i in (0, 1) else "right",
                         no_wrap=i != 0, overflow="fold")
    for cells, pipes in rows:
        table.add_row(*(Text(c) for c in cells))
        for p in pipes:
            table.add_row(Text("  " + p))
    buf = io.StringIO()
    console(width, file=buf, color=False).print(table, crop=False)
    return [line.rstrip() for line in buf.getvalue().splitlines()]


def _gate_line(r: DiffResult, esc: Callable[[object], str] = one_line) -> str:
    if not r.regressions:
        return f"regression gate ({r.threshold_pct:g} %, {_samples_text(r)}): passed"
    return f"regression gate ({r.threshold_pct:g} %, {_samples_text(r)}): TRIPPED — " + "; ".join(
        esc(x) for x in r.regressions)


def _new_gate_line(r: DiffResult, esc: Callable[[object], str] = one_line) -> str | None:
    """The --fail-on-new verdict, or None when that gate is off."""
    if r.fail_on_new is None:
        return None
    head = f"new-findings gate ({r.fail_on_new} and above, new since the base)"
    if not r.new_over_gate:
        return f"{head}: passed"
    shown = "; ".join(f"{esc(f.get('severity', ''))} {esc(f.get('code', '?'))} {esc(f.get('slug', ''))} "
                      f"on {esc(', '.join(str(k) for k in (f.get('kernels') or [])[:2]))}"
                      for f in r.new_over_gate[:5])
    more = f" (+{len(r.new_over_gate) - 5} more)" if len(r.new_over_gate) > 5 else ""
    return f"{head}: TRIPPED — {len(r.new_over_gate)} finding(s): {shown}{more}"


def render_md(r: DiffResult) -> str:
    """The pull-request comment: the gates' verdict first, then device time, unit shares, the
    kernels by the size of their change (columns no row fills left out, so the Δ columns stay in
    view at GitHub's width), why they changed, and the findings new and resolved."""
    matched, removed, added = _kernel_groups(r)
    icon = "❌" if r.tripped else "✅"
    out = [f"## tilescope diff — {md_code_span(r.base_label, 100)} → {md_code_span(r.head_label, 100)}", "",
           f"{icon} **{md_text(_gate_line(r), None)}**"]
    new_gate = _new_gate_line(r)
    if new_gate is not None:
        out += ["", f"{'❌' if r.new_over_gate else '✅'} **{md_text(new_gate, None)}**"]
    out += ["", f"**Device time per step: {md_text(_total_line(r), None)}**", ""]
    out += ["| unit share | base | head |", "|---|--:|--:|"]
    out += [f"| {label} | {fmt_pct(r.shares[k][0])} | {fmt_pct(r.shares[k][1])} |"
            for k, label in SHARE_LABELS]
    out += ["", f"**Kernels:** {len(matched)} matched, {len(removed)} removed "
            f"({signed_us(-sum(d.base_per_step_us for d in removed))} per step), {len(added)} added "
            f"({signed_us(sum(d.head_per_step_us for d in added))} per step)", ""]
    out += _kernel_table_md(r)
    if len(r.kernels) > SHOWN_KERNELS:
        out.append(f"\n_{len(r.kernels) - SHOWN_KERNELS} more kernels in `--format json`._")
    why = why_lines(r)
    if why:
        out += ["", f"**Why** ({WHY_HEAD}):", ""]
        out += [f"- {md_code_span(label, 120)} {md_text(text, None)}" for label, text in why]
    crossed = f", {len(r.crossed)} crossed a threshold" if r.crossed else ""
    out += ["", f"**Findings:** {len(r.resolved)} resolved, {len(r.new)} new{crossed}, "
                f"{r.persisting} persisting", ""]
    out += [f"- ✅ resolved {finding_line(f, md_text)}" for f in r.resolved]
    out += [f"- 🆕 new {finding_line(f, md_text)}" for f in r.new]
    out += [f"- ↗ crossed a threshold {finding_line(f, md_text)} ({CROSSED})" for f in r.crossed]
    return "\n".join(out) + "\n"


def _kernel_table_md(r: DiffResult) -> list[str]:
    """The shown kernels as a Markdown table: kernel, verdict, the changes, the medians, then op
    type and pipe changes only when some row has one."""
    repeated = _repeated_names(r)
    rows = []
    for d in shown_kernels(r):
        s = d.head or d.base
        pipes = ", ".join(f"{PIPE_LABELS.get(c, c)} {fmt_pct(a, 0)} → {fmt_pct(b, 0)}"
                          for c, (a, b) in d.pipe_changes.items())
        numbers = (signed_us(d.delta_us), signed_pct(d.median_delta_pct), _spread_text(d, "base"),
                   _spread_text(d, "head"))
        rows.append([md_code_span(kernel_label(d, repeated), 120), d.verdict, *map(md_nowrap, numbers),
                     md_text(s.op_type if s else "", 40), md_text(pipes, None)])
    if not rows:
        return []
    header = ["kernel", "verdict", "Δ per step", "Δ median", "base median [spread]", "head median [spread]",
              "op type", "pipe changes"]
    align = ["---", "---", "--:", "--:", "--:", "--:", "---", "---"]
    keep = [i for i in range(len(header)) if i < 6 or any(row[i] for row in rows)]
    out = ["| " + " | ".join(header[i] for i in keep) + " |", "|" + "|".join(align[i] for i in keep) + "|"]
    out += ["| " + " | ".join(row[i] for i in keep) + " |" for row in rows]
    return out


RENDERERS: dict[str, Callable[[DiffResult], str]] = {
    "text": render_text,  # the command passes the terminal's width
    "md": render_md,
    "json": lambda r: json.dumps(r.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n",
}


_OUT_HELP = "Write here (atomically) instead of stdout."
_GATE_HELP = "Exit 1 when device time or a top kernel's median is PCT % slower, beyond the spread."
_NEW_HELP = ("Exit 1 when the head has a finding at or above high|medium|low that the base did not "
             "(new since the base, or raised to that severity).")
_CONFIG_HELP = "tilescope.toml / pyproject.toml with rule settings."
_MATCH_HELP = ("Compare kernel BASE of the base run with kernel HEAD of the head run (names, normalised "
               "names or globs), e.g. your TileLang kernel against the vendor's operator on the same shapes; "
               "repeatable; the two paths may be the same run.")


def _match_pair(text: str) -> tuple[str, str]:
    a, sep, b = text.partition("=")
    if not sep or not a.strip() or not b.strip():
        raise UsageError(f"--match {text!r}: expected BASE_KERNEL=HEAD_KERNEL")
    return a.strip(), b.strip()


def register(app: typer.Typer) -> None:
    @app.command("diff")
    @honours_strict
    def diff_cmd(
        base: Annotated[Path, typer.Argument(help="Base run: profiler directory, bundle, or JSON report.")],
        head: Annotated[Path, typer.Argument(help="Head run (the change under review).")],
        fmt: Annotated[str, typer.Option("--format", "-f", help="text, md or json.")] = "text",
        output: Annotated[Path | None, typer.Option("-o", "--output", help=_OUT_HELP)] = None,
        fail_on_regression: Annotated[float | None, typer.Option(
            "--fail-on-regression", metavar="PCT", help=_GATE_HELP)] = None,
        fail_on_new: Annotated[str | None, typer.Option(
            "--fail-on-new", metavar="SEVERITY", help=_NEW_HELP)] = None,
        chip: Annotated[str | None, typer.Option("--chip", help=CHIP_HELP)] = None,
        config: Annotated[str | None, typer.Option("--config", help=_CONFIG_HELP)] = None,
        width: Annotated[int | None, typer.Option("--width", metavar="N", min=20, help=WIDTH_HELP)] = None,
        match: Annotated[list[str] | None, typer.Option(
            "--match", metavar="BASE=HEAD", help=_MATCH_HELP)] = None,
        strict: Annotated[bool, typer.Option("--strict", help=STRICT_HELP)] = False,
    ) -> None:
        """Compare two runs: device time, kernels, pipes and findings.

        Two multi-rank runs: step time per rank, slowest rank, TS6xx changes (docs/cluster.md).

        A multi-rank run against a single-rank one exits 2.

        Example: tilescope diff runs/fa-v1 runs/fa-v2 --format md -o diff.md --fail-on-regression 5
        --fail-on-new high
        """
        if fmt not in RENDERERS:
            raise UsageError(f"--format {fmt!r}: choose one of {', '.join(RENDERERS)}")
        if fail_on_regression is not None and fail_on_regression < 0:
            raise UsageError("--fail-on-regression must be a percentage >= 0")
        if fail_on_new is not None and fail_on_new not in ("high", "medium", "low"):
            raise UsageError(f"--fail-on-new {fail_on_new!r}: expected high, medium or low")
        threshold = 5.0 if fail_on_regression is None else fail_on_regression
        for p in (base, head):
            if not p.exists():
                raise UsageError(f"{p}: no such file or directory")
        failures: list[LoadFailure] = []

        pairs = [_match_pair(m) for m in match or ()]
        result = diff_paths(base, head, threshold, chip, config, fail_on_new, failures, build, pairs)
        for failure in failures:  # a multi-rank folder's unreadable ranks: named, the rest compared
            typer.echo(failure.warning_line(), err=True)
        text = _render(result, fmt, output_width(width) if output is None else width)
        if output is not None:
            write_text_atomic(output, text)
        else:
            write_stdout(text)  # `| head` is no error, and --fail-on-regression below still decides
        tripped = []
        if fail_on_regression is not None and result.regressions:
            tripped.append("regression gate tripped: " + "; ".join(one_line(x) for x in result.regressions))
        if result.new_over_gate:
            codes = ", ".join(one_line(f.get("code", "?")) for f in result.new_over_gate)
            tripped.append(f"new-findings gate tripped: {len(result.new_over_gate)} finding(s) at or above "
                           f"{fail_on_new} new since the base ({codes})")
        gate = GateTrippedError("; ".join(tripped)) if tripped else None
        if failures:
            # deferred: io.failures only when this command runs; `tilescope --help` imports every command
            #   module
            from tilescope.io.failures import PartialLoadError

            # bad input outranks the gate, as in analyze: the diff covers only the ranks that loaded
            if gate is not None:
                typer.echo(gate.terminal_line(), err=True)
            raise PartialLoadError(failures, _loaded_ranks(result))
        if gate is not None:
            raise gate


def _render(result: DiffResult | ClusterDiff, fmt: str, width: int | None) -> str:
    """The diff in `fmt`, rendered in full before anything is written; `width` for text only."""
    if isinstance(result, ClusterDiff):
        # deferred: commands.diff_cluster only when this command runs; `tilescope --help` imports every
        #   command module
        from tilescope.commands import diff_cluster

        if fmt == "text":
            return diff_cluster.render_text(result, width)
        return diff_cluster.RENDERERS[fmt](result)
    return render_text(result, width) if fmt == "text" else RENDERERS[fmt](result)


def _loaded_ranks(result: DiffResult | ClusterDiff) -> int:
    """How many profiles (ranks of both runs) loaded, for the partial-input line."""
    if isinstance(result, ClusterDiff):
        return sum(1 for d in result.ranks for s in (d.base, d.head) if s is not None and s.kernels_loaded)
    return 2
