"""`tilescope info PATH`: what a profile holds — format, producer, metric groups, device, chip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from tilescope.commands import CHIP_HELP, STRICT_HELP, honours_strict
from tilescope.errors import UsageError
from tilescope.profile import Profile
from tilescope.summary import SUMMARY_COLUMNS, summarize
from tilescope.text.escape import terminal_text
from tilescope.text.terminal import WIDTH_HELP, console, output_width, wrap
from tilescope.text.words import count_text


def profile_info(pr: Profile) -> dict[str, Any]:
    """JSON-serialisable description of one loaded profile."""
    d = pr.device
    tl = pr.timeline
    return {
        "path": str(pr.source.path),
        "format": pr.source.format,
        "producer": pr.source.producer,
        "metric_groups": list(pr.source.metric_groups),
        "rank": pr.rank,
        "device": {
            "device_id": d.device_id,
            "model_name": d.model_name,
            "ai_core_num": d.ai_core_num,
            "aiv_num": d.aiv_num,
            "aic_frequency_mhz": d.aic_frequency_mhz,
            "rated_frequency_mhz": d.rated_frequency_mhz,
            "timeline_max_frequency_mhz": d.timeline_max_frequency_mhz,
            "cann_version": d.cann_version,
            "borrowed_from": d.borrowed_from,
        },
        "chip": {
            "name": pr.chip.name,
            "aic_count": pr.chip.aic_count,
            "aiv_count": pr.chip.aiv_count,
            "clock_mhz": pr.chip.clock_mhz,
            "memory_type": pr.chip.memory_type,
            "hbm_bandwidth_gbps": pr.chip.hbm_bandwidth_gbps,
            "hbm_bandwidth_source": pr.chip.hbm_bandwidth_source,
            "assumptions": list(pr.chip.assumptions),
            "assumed_figures": list(pr.chip.assumed_figures),
        },
        "rows": {
            "kernels": len(pr.kernels),
            "blocks": None if pr.blocks is None else len(pr.blocks),
            # the distinct blocks of those rows (one row per block and sub-core: 8 blocks x 3)
            "block_ids": None if pr.blocks is None or "block_id" not in pr.blocks
            else int(pr.blocks["block_id"].nunique()),
            "launches": None if pr.launches is None else len(pr.launches),
            "timeline_kernels": None if tl is None else len(tl.kernels),
            "timeline_host_ops": None if tl is None else len(tl.host_ops),
            "timeline_flows": None if tl is None else len(tl.flows),
        },
        "has_ir": pr.ir is not None,
        "has_manifest": pr.manifest is not None,
        "summary": summarize(pr),
        "warnings": list(pr.warnings),
        "files": [str(f) for f in pr.source.files],
    }


def _print_text(info: dict[str, Any], width: int | None) -> None:
    # deferred: rich.text only for terminal output; `tilescope --help` imports every command module
    from rich.text import Text

    c = console(width)

    def line(text: str, style: str = "") -> None:
        # paths, device strings and notes come from the profile: Text (never markup), and control
        # characters shown as escapes; a long value wraps under its column, numbers with their units
        for part in wrap(terminal_text(text), width, "", " " * 16):
            c.print(Text(part, style=style), no_wrap=True, crop=False)

    rank = f" (rank {info['rank']})" if info["rank"] is not None else ""
    line(f"{info['path']}{rank}", "bold")
    line(f"  format        {info['format']}  (producer: {info['producer'] or 'unknown'})")
    line(f"  metric groups {', '.join(info['metric_groups']) or 'none (no PMU columns)'}")
    d = info["device"]
    dev = ", ".join(f"{k}={v}" for k, v in d.items() if v is not None and k != "borrowed_from")
    if d.get("borrowed_from"):
        dev += " (another run's record, see the notes)"
    dev = dev or "not recorded"
    line(f"  device        {dev}")
    ch = info["chip"]
    cores = f"{ch['aic_count']} AIC / {ch['aiv_count']} AIV @ {ch['clock_mhz']} MHz"
    if ch["assumed_figures"]:
        cores += f" (assumed: {', '.join(ch['assumed_figures'])}; see the notes)"
    line(f"  chip          {ch['name']}: {cores}")
    line(f"                {ch['hbm_bandwidth_source']}")
    for a in ch["assumptions"]:
        line(f"                assumption: {a}")
    line(f"  rows          {_rows_text(info['rows'])}")
    s = info["summary"]
    dt = s["device_time"]
    launches = count_text(s["kernel_count"], "launch", "launches")
    line(f"  device time   {dt['device_us']:,.3f} µs over {launches}")
    line(f"                ({dt['definitions']['device_us']})")
    if dt["communication_us"]:
        tasks = count_text(s.get("communication_tasks") or 0, "communication task", "communication tasks")
        line(f"                {dt['with_communication_us']:,.3f} µs with communication ({tasks})")
    if dt["wall_us"] is not None:
        span = f"{dt['wall_us']:,.3f} µs from first start to last end, {dt['idle_us']:,.3f} µs idle"
        line(f"                {span}")
    for w in info["warnings"]:
        line(f"  note          {w}")
    line(f"  files read    {len(info['files'])}")
    for f in info["files"]:
        line(f"                {f}")


@honours_strict
def info_command(
    path: Annotated[Path, typer.Argument(help="Profiler output directory or file")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="text | json")] = "text",
    chip: Annotated[str | None, typer.Option("--chip", help=CHIP_HELP)] = None,
    width: Annotated[int | None, typer.Option("--width", metavar="N", min=20, help=WIDTH_HELP)] = None,
    strict: Annotated[bool, typer.Option("--strict", help=STRICT_HELP)] = False,
) -> None:
    """Describe a profile: format, producer, metric groups, ranks, device, chip, table sizes, files.

    When PATH holds several profiles (ranks) and some cannot be read, the others are described,
    each unreadable one gets a warning line on stderr, and the exit code is 2 (partial: some
    inputs could not be read).

    Example: tilescope info ./localhost_123_ascend_pt --format json
    """
    # deferred: io.failures and io.load only when this command runs; `tilescope --help` imports every command
    #   module
    from tilescope.io.failures import PartialLoadError
    from tilescope.io.load import load_profiles

    if fmt not in ("text", "json"):
        raise UsageError(f"--format must be text or json, not {fmt!r}")
    # the kernel table is read for its counts and summary only: those columns, streamed
    profiles = load_profiles(path, chip=chip, progress=True, kernel_columns=SUMMARY_COLUMNS)
    failures = getattr(profiles, "failures", [])
    for failure in failures:
        typer.echo(failure.warning_line(), err=True)
    infos = [profile_info(pr) for pr in profiles]
    if fmt == "json":
        typer.echo(json.dumps(infos[0] if len(infos) == 1 else infos, indent=2, ensure_ascii=False))
    else:
        for info in infos:
            _print_text(info, output_width(width))
    if failures:
        raise PartialLoadError(failures, len(profiles))


# what each row count of `info` counts: "blocks 24" read as 24 blocks beside analyze's 8 (it
# counted the per-block table's rows, one per block and sub-core)
_ROW_LABELS = {"kernels": "kernel table", "blocks": "per-block table", "launches": "launches",
               "timeline_kernels": "timeline kernels", "timeline_host_ops": "timeline host ops",
               "timeline_flows": "timeline flows"}


def _rows_text(rows: dict[str, Any]) -> str:
    """`kernel table 1, per-block table 24 (8 blocks, a row per sub-core), launches 1`."""
    parts = []
    for key, value in rows.items():
        if value is None or key == "block_ids":
            continue
        text = f"{_ROW_LABELS.get(key, key)} {value:,}"
        if key == "blocks" and rows.get("block_ids") and rows["block_ids"] != value:
            text += f" ({count_text(rows['block_ids'], 'block')}, a row per sub-core)"
        parts.append(text)
    return ", ".join(parts)


def register(app: typer.Typer) -> None:
    app.command("info")(info_command)
