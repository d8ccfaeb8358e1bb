"""`tilescope lint KERNEL.py[:FUNCTION[,F2...]]`: static diagnosis of a TileLang kernel, no NPU needed."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import typer
from rich import box

from tilescope.atomic import atomic_dir
from tilescope.chips import chosen_chip
from tilescope.commands import CHIP_HELP
from tilescope.commands.analyze import check_rule_prefixes
from tilescope.config import load_config
from tilescope.engine import run_rules
from tilescope.errors import GateTrippedError, UsageError
from tilescope.findings import Finding, Severity
from tilescope.ir.deadline import LOWER_TIMEOUT_S, WORKER_START_S
from tilescope.profile import Profile, SourceInfo
from tilescope.text.escape import terminal_text as term
from tilescope.text.terminal import UNLIMITED, WIDTH_HELP, console, output_width, wrap


def _chip(name: str | None, cfg: Any, tilelang: Any = None, dialect: str | None = None) -> Any:
    """--chip, else the configuration's chip, else the chip the kernel's stack lowers for.

    tilelang 0.1.15's built-in backend targets the 950: judging its code by a 910B's buffers
    reported L0C 262144 > 131072 on kernels that fit their target. tilelang-ascend lowers for
    the A2/A3 platform of TL_PLATFORM (its default A3).
    """
    # deferred: ir.scopes only when this command runs; `tilescope --help` imports every command module
    from tilescope.ir.scopes import TILELANG_ASCEND

    if dialect == TILELANG_ASCEND:
        platform = os.environ.get("TL_PLATFORM")
        return chosen_chip(name, cfg.chip, cfg.source, dialect=dialect, platform=platform)
    version = str(getattr(tilelang, "__version__", "")) or None
    return chosen_chip(name, cfg.chip, cfg.source, version=version)


def _stack_chip(kernel: str, name: str | None, cfg: Any) -> Any:
    """The chip, after checking that the kernel's own stack is here (exit 3 naming it if not):
    tilelang-ascend's interpreter for its dialect, tilelang 0.1.15 for the rest."""
    # deferred: ir.capture, ir.dialect, ir.params and ir.scopes only when this command runs;
    #   `tilescope --help` imports every command module
    from tilescope.ir.capture import import_tilelang
    from tilescope.ir.dialect import detect
    from tilescope.ir.params import resolve_kernel
    from tilescope.ir.scopes import TILELANG_ASCEND

    path, _, tree = resolve_kernel(kernel)
    found = detect(tree)
    if found.dialect == TILELANG_ASCEND:
        # deferred: ir.foreign only when this command runs; `tilescope --help` imports every command module
        from tilescope.ir.foreign import require_interpreter

        require_interpreter(f"{path} is written for {found.describe()}")
        return _chip(name, cfg, dialect=TILELANG_ASCEND)
    return _chip(name, cfg, import_tilelang())


def _loc_text(f: Finding) -> str:
    # deferred: report.render_text (rich) only for terminal output; `tilescope --help` imports every command
    #   module
    from tilescope.report.render_text import where_text

    return where_text([loc.to_dict() for loc in f.locations])


def _print_text(
    ir: dict[str, Any],
    findings: list[Finding],
    chip_label: str,
    skipped: tuple[Any, ...] | list[Any] = (),
    width: int | None = None,
) -> None:
    # deferred: rich.text (and report.render_text) only for terminal output; `tilescope --help` imports every
    #   command module
    from rich.text import Text

    from tilescope.report.palette import severity_style
    from tilescope.report.render_text import not_checked_lines

    # Kernel, file and parameter names are the user's and messages quote them: every line is a
    # Text (a markup string would swallow `[x]` and crash on `[/bold]`), controls made visible;
    # lines wrap at the terminal's width (none when piped), a number with its unit.
    con = console(width)

    def say(text: str, hang: str, style: str = "", styled: int = 0) -> None:
        for i, line in enumerate(wrap(text, width, "", hang)):
            out = Text(line)
            if i == 0 and style:
                out.stylize(style, 0, styled)
            con.print(out, no_wrap=True, crop=False)

    names = ", ".join(k["name"] for k in ir["kernels"])
    file = term(ir["kernel_file"])
    say(f"{file}" + term(f":{ir['function']}  kernels: {names}  chip: {chip_label}  ")
        + f"lowered: {'yes' if ir['lowered'] else 'NO'}", "  ", "bold", len(file))
    for k in ir["kernels"]:
        fps = k.get("footprint", {})
        if fps:
            sizes = "  ".join(f"{hw} {fp['bytes']}/{fp['capacity_bytes']} B" for hw, fp in fps.items())
            say(term(f"  {k['name']}: {sizes}"), "    ")
    for f in findings:
        # Linter-style: one line per finding, then where it points (wide tables fold badly in CI logs).
        sev = f"{f.severity.value:<6}"
        say(sev + term(f" {f.code} {f.slug} [{', '.join(f.kernels)}] {f.message}"), " " * 7,
            severity_style(f.severity.value, con.color_system), len(sev))
        where = _loc_text(f)
        if where:
            say(term(f"       at {where}"), " " * 10)
        if f.recommendation:
            say(term(f"       fix: {f.recommendation}"), " " * 12)
    if os.environ.get("TILESCOPE_DEBUG"):  # --debug: the toolchain's whole message, not its cause line
        for k in ir["kernels"]:
            detail = (k.get("failure") or {}).get("detail")
            if detail:
                say(term(f"  {k['name']}: full message from the lowering:"), "    ", "bold", 10**6)
                for line in detail.splitlines():
                    say(term(f"    {line}"), "      ")
    for line in not_checked_lines([s.to_dict() for s in skipped]):
        say(term(line), "    ")
    counts = {s.value: sum(1 for f in findings if f.severity == s) for s in Severity}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    say(f"{len(findings)} finding{'s' if len(findings) != 1 else ''}"
        + (f": {summary}" if summary else "") + " (static: nothing ran, so no time estimate)", "  ")


def _kib(n: int) -> str:
    """131072 -> `128`, 50176 -> `49`: KiB, one decimal only when it is not whole."""
    v = n / 1024
    return f"{v:,.0f}" if v == int(v) else f"{v:,.1f}"


def _print_sweep(
    rows: list[dict[str, Any]], fmt: str, grid: dict[str, list[Any]], chip: Any, width: int | None
) -> None:
    """One row per combination: footprints in KiB (red when over capacity), whether it fits, waste,
    occupancy and finding codes; why a point does not fit is said under the table, wrapped to the
    width, since a reason folded into a narrow cell splits its numbers from their units."""
    # deferred: sweep only when this command runs; `tilescope --help` imports every command module
    from tilescope.sweep import sweep_not_checked

    unscored = sweep_not_checked(rows)
    if fmt == "json":
        doc = {"chip": chip.name, "chip_reason": chip.chosen_because, "sweep": rows,
               "not_checked": unscored}
        sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
        return
    # deferred: rich.text only for terminal output; `tilescope --help` imports every command module
    from rich.text import Text

    con = console(width)
    scopes = [hw for hw in ("UB", "L1", "L0A", "L0B", "L0C") if any(hw in r["footprint"] for r in rows)]
    t = _sweep_table(rows, grid, scopes, fold=False)
    if width is not None and _min_width(con, t) > width:
        # long parameter names (`accumulator_dtype`, `tiling.block_q`) on their own lines at `.`/`_`
        t = _sweep_table(rows, grid, scopes, fold=True)
    for line in wrap(term(f"chip: {chip.label}"), width, "", "  "):
        con.print(Text(line), no_wrap=True, crop=False)
    if width is not None and _min_width(con, t) > width:
        # still wider than the terminal: a block per point, wrapped, rather than cells cut to "…"
        for r in rows:
            for line in wrap(term(_sweep_point_text(r, grid, scopes)), width, "", "    "):
                con.print(Text(line), no_wrap=True, crop=False)
    else:
        con.print(t, crop=False)
    for r in rows:
        if not r["fits"]:
            point = " ".join(f"{k}={r['params'].get(k)}" for k in grid)
            for line in wrap(term(f"{point} does not fit: {'; '.join(r['why_not'])}"), width, "", "  "):
                con.print(Text(line), no_wrap=True, crop=False)
    if unscored:
        con.print(Text("not checked:", style="bold"))
        for why in unscored:
            for line in wrap(term(f"  est. Cube occ. ({why})"), width, "", "    "):
                con.print(Text(line), no_wrap=True, crop=False)


def _sweep_table(
    rows: list[dict[str, Any]], grid: dict[str, list[Any]], scopes: list[str], fold: bool
) -> Any:
    """The sweep table; `fold` puts a long parameter name on several header lines."""
    # deferred: rich.table, rich.text only for terminal output; `tilescope --help` imports every command
    #   module
    from rich.table import Table
    from rich.text import Text

    # folded for a narrow terminal: two spaces between columns instead of three, no edge spaces
    t = Table(show_header=True, header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False,
              padding=(0, 1, 0, 0) if fold else (0, 1), show_edge=not fold)
    numeric = [*grid, *(f"{hw} KiB" for hw in scopes), "waste %", "est. Cube occ."]
    for col in (*grid, *(f"{hw} KiB" for hw in scopes), "fits", "waste %", "est. Cube occ.", "findings"):
        # numbers never wrap; the list of codes wraps between codes
        # a header line per word: the numbers under it are narrower than "est. Cube occ."
        if col in grid and fold:
            values = max((len(term(r["params"].get(col))) for r in rows), default=1)
            header = Text(_fold_name(term(col), values))
        else:
            header = Text(term(col).replace(" ", "\n"))
        t.add_column(header, no_wrap=col != "findings", justify="right" if col in numeric else "left")
    for r in rows:
        # cells are Text: parameter values and the reasons a point does not fit are not markup
        cells = [Text(term(r["params"].get(k))) for k in grid]
        for hw in scopes:
            fp = r["footprint"].get(hw)
            if fp is None:
                cells.append(Text(""))
            else:
                cells.append(Text(_kib(fp["bytes"]), style="" if fp["fits"] else "red"))
        cells.append(Text("yes" if r["fits"] else "no"))
        cells.append(Text("" if r.get("waste_pct") is None else f"{r['waste_pct']:.1f}"))
        cells.append(Text("" if r.get("occupancy") is None else f"{r['occupancy']:.2f}"))
        cells.append(Text(term(", ".join(r["findings"]))))
        t.add_row(*cells)
    return t


def _fold_name(name: str, values: int) -> str:
    """`accumulator_dtype_name` -> `accumulator_` / `dtype_name`: lines broken after `.` or `_`,
    each as long as the longest piece or the column's values."""
    pieces = re.split(r"(?<=[._])", name)
    limit = max(values, *(len(p) for p in pieces))
    lines = [""]
    for piece in pieces:
        if lines[-1] and len(lines[-1]) + len(piece) > limit:
            lines.append("")
        lines[-1] += piece
    return "\n".join(lines)


def _min_width(con: Any, table: Any) -> int:
    """The fewest columns `table` needs without cutting a cell."""
    # deferred: rich.measure only for terminal output; `tilescope --help` imports every command module
    from rich.measure import Measurement

    # measured as if the terminal were unlimited: rich clamps a measurement to the console's width
    return int(Measurement.get(con, con.options.update_width(UNLIMITED), table).minimum)


def _sweep_point_text(r: dict[str, Any], grid: dict[str, list[Any]], scopes: list[str]) -> str:
    """One sweep point as a line (for terminals too narrow for the table): its parameters, then
    what the table's columns say."""
    point = " ".join(f"{k}={r['params'].get(k)}" for k in grid)
    sizes = [f"{hw} {_kib(fp['bytes'])} KiB" for hw in scopes if (fp := r["footprint"].get(hw)) is not None]
    parts = [f"fits {'yes' if r['fits'] else 'no'}", *sizes]
    if r.get("waste_pct") is not None:
        parts.append(f"waste {r['waste_pct']:.1f} %")
    if r.get("occupancy") is not None:
        parts.append(f"est. Cube occ. {r['occupancy']:.2f}")
    if r["findings"]:
        parts.append(f"findings {', '.join(r['findings'])}")
    return f"{point}: {', '.join(parts)}"


def lint(
    kernel: str = typer.Argument(
        ...,
        help="KERNEL.py[:FUNCTION[,F2,...]] — a builder, a @tilelang.jit kernel "
        "or several PrimFuncs of a chain.",
    ),
    param: list[str] = typer.Option(  # noqa: B008
        [], "--param", "-p", help="NAME=VALUE (Python literal, else string); repeatable."
    ),
    chip: str | None = typer.Option(None, "--chip", help=CHIP_HELP),
    fmt: str = typer.Option("text", "--format", "-f", help="text or json."),
    out: Path | None = typer.Option(  # noqa: B008
        None,
        "--out",
        help="Write an IR-only run bundle (manifest.json, ir/, kernel/, empty profile/) in the format of "
        "`tilescope collect --ir-only`, which writes the same bundle plus a CPU correctness check.",
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing --out bundle."),
    fail_on: str | None = typer.Option(
        None, "--fail-on", help="Exit 1 if a finding of this severity or higher: high, medium or low."
    ),
    sweep: list[str] = typer.Option(  # noqa: B008
        [], "--sweep", help="NAME=V1,V2,... ; repeatable: lower every combination. "
        "`--sweep autotune`: each config of the kernel's @autotune(configs=...), never running the autotuner."
    ),
    config: Path | None = typer.Option(None, "--config", help="tilescope.toml / pyproject.toml to read."),  # noqa: B008
    width: int | None = typer.Option(None, "--width", metavar="N", min=20, help=WIDTH_HELP),
    timeout: float = typer.Option(
        LOWER_TIMEOUT_S, "--timeout", metavar="SECONDS", min=0.001,
        help=f"Stop a lowering (the kernel's module, builder and TileLang's passes) after this long: "
        f"exit 2 (default {LOWER_TIMEOUT_S:g}; each --sweep combination alike; a tilelang-ascend worker "
        f"gets {WORKER_START_S:g} s more to start).",
    ),
) -> None:
    """Lower a TileLang kernel for Ascend and report static problems (capacity, fractals, pipelining).

    lint imports and runs the kernel's module — its imports, decorators, default arguments and
    builder — as `python` would: lint only files you trust. It never calls the compiled kernel.

    Example: tilescope lint sample_traces/kernels/matmul.py:matmul -p block_M=100 -p accum_dtype=float16
    """
    # deferred: ir.params only when this command runs; `tilescope --help` imports every command module
    from tilescope.ir.params import parse_param, validate_sweep

    if fmt not in ("text", "json"):
        raise UsageError(f"--format {fmt!r}: expected text or json")
    if fail_on is not None and fail_on not in ("high", "medium", "low"):
        raise UsageError(f"--fail-on {fail_on!r}: expected high, medium or low")
    cfg = load_config(config)

    check_rule_prefixes(cfg)  # a select in the config file that matches no rule would lint nothing
    params = dict(parse_param(p) for p in param)
    _chip(chip, cfg)  # an unknown --chip is exit 2 whether or not TileLang is installed
    spec = _stack_chip(kernel, chip, cfg)  # exit 3 with the install hint before anything else
    if sweep:
        # deferred: ir.capture and sweep only when this command runs; `tilescope --help` imports every command
        #   module
        from tilescope.ir.capture import autotune_configs
        from tilescope.sweep import AUTOTUNE, config_columns, parse_sweep, run_sweep

        grid = parse_sweep(sweep)
        configs = autotune_configs(kernel, params) if any(s.strip() == AUTOTUNE for s in sweep) else None
        validate_sweep(kernel, params, grid, configs)
        rows = run_sweep(kernel, params, grid, spec, configs=configs, timeout_s=timeout)
        _print_sweep(rows, fmt, config_columns(grid, configs), spec, output_width(width))
        return
    findings = _lint_once(kernel, params, spec, cfg, fmt, out, force, output_width(width), timeout)
    if fail_on is not None:
        level = Severity(fail_on).rank
        tripped = [f for f in findings if f.severity.rank >= level]
        if tripped:
            raise GateTrippedError(f"--fail-on {fail_on}: {len(tripped)} finding(s) at or above {fail_on}")


def _lint_once(
    kernel: str, params: dict[str, Any], spec: Any, cfg: Any, fmt: str, out: Path | None, force: bool,
    width: int | None = None, timeout: float | None = None,
) -> list[Finding]:
    cap, result, findings, doc = lint_report(kernel, params, spec, cfg, timeout)
    if out is not None:
        _write_bundle(cap, out, force, params)
    if fmt == "json":
        sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
    else:
        _print_text(cap.ir, findings, spec.label, result.skipped, width)
    return findings


def lint_report(
    kernel: str, params: dict[str, Any], spec: Any, cfg: Any, timeout: float | None = None
) -> tuple[Any, Any, list[Finding], dict[str, Any]]:
    """Lower `kernel` with `params` for `spec` and run the static rules: the capture, the engine's
    result, the findings (most severe first) and the `--format json` document (also what the
    agent's `lint` tool returns). `timeout`: seconds allowed for loading, building and lowering."""
    # deferred: pandas (~0.3 s) only when this builds a frame; ir.capture only when this command runs;
    #   `tilescope --help` imports every command module
    import pandas as pd

    from tilescope.ir.capture import capture_ir

    cap = capture_ir(kernel, params, spec, timeout)
    profile = Profile(
        source=SourceInfo(path=cap.kernel_file, format="ir"), kernels=pd.DataFrame(), chip=spec, ir=cap.ir
    )
    result = run_rules(profile, cfg, kinds=("static",))
    findings = sorted(result.findings + result.errors, key=lambda f: (-f.severity.rank, f.code))
    doc = {
        "schema_version": "1.0",
        "kernel_file": str(cap.kernel_file),
        "function": cap.function,
        "params": cap.ir["params"],
        "chip": spec.name,
        "chip_reason": spec.chosen_because,
        "lowered": cap.ok,
        "kernels": [
            {
                "name": k["name"],
                "entry": k["entry"],
                "footprint": k.get("footprint", {}),
                "failure": k.get("failure"),
            }
            for k in cap.ir["kernels"]
        ],
        "findings": [f.to_dict() for f in findings],
        "skipped": [s.to_dict() for s in result.skipped],
        "timings": cap.ir.get("timings", {}),
    }
    return cap, result, findings, doc


LINT_CORRECTNESS = {
    "status": "not_run",
    "device": None,
    "reason": "tilescope lint does not run the kernel (tilescope collect --ir-only adds the CPU check)",
}


def _write_bundle(cap: Any, out: Path, force: bool, params: dict[str, Any]) -> None:
    """An IR-only run bundle in the collectors' format (collectors/schema/manifest.schema.json).

    The same bundle as `tilescope collect --ir-only` minus its correctness check and collect/ logs:
    manifest.json, ir/ (written by the same tilescope.ir.capture code), kernel/ (the source linted),
    profile/ (empty: no runtime metrics).
    """

    # deferred: collectors.bundle and ir.capture only when this command runs; `tilescope --help` imports every
    #   command module
    from tilescope.collectors import bundle
    from tilescope.ir.capture import write_ir_dir

    entries = [k.get("entry") for k in cap.ir["kernels"] if k.get("entry")]
    manifest = bundle.ir_only_manifest(
        cap.kernel_file, cap.function, entries[0] if len(entries) == 1 else None, params,
        cap.chip.name, cap.ok, dict(LINT_CORRECTNESS),
    )
    manifest["resolved_parameters"] = bundle.jsonable(cap.ir["params"])
    with atomic_dir(out, force=force) as tmp:
        write_ir_dir(cap, tmp / "ir")
        (tmp / "kernel").mkdir()
        shutil.copy2(cap.kernel_file, tmp / "kernel" / cap.kernel_file.name)
        (tmp / "profile").mkdir()
        bundle.write_manifest(tmp, manifest)


def register(app: typer.Typer) -> None:
    app.command("lint")(lint)
