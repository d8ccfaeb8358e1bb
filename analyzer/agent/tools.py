"""The agent's tools: each mirrors a command and returns that command's JSON, on top of the
command's own functions (`tilescope.commands.*`), inside an envelope that says which files the
result rests on and which values were assumed.

No MCP import here: `tilescope.agent.worker` runs these in a child process, and the server
(`tilescope.agent.server`) only lists them. Every path argument goes through `Scope.path`, the
dashboard's confinement (`tilescope.dashboard.paths.RootSet`): text with `..` is refused, links are
followed and judged by where they lead, and a folder's whole tree must stay inside the roots.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilescope.agent.schemas import INPUTS
from tilescope.dashboard.paths import PathRejected, RootSet, is_within, relative_name
from tilescope.errors import UsageError

Progress = Callable[[float, float, str], None]
PAGE_DEFAULT = 10
DETAILS = ("brief", "standard", "full")


@dataclass(frozen=True)
class Scope:
    """Where the tools may read (the roots, and the scratch folder with the results saved there)
    and the one folder they may write to."""

    roots: RootSet
    scratch: Path

    def path(self, text: object, what: str) -> Path:
        """The real path an agent's `text` names, inside the roots; PathRejected otherwise.

        Absolute paths are taken as they are; a relative one is looked up under each root in
        turn (as the dashboard's keys are relative to their root). `..` is refused as text
        before anything is resolved, as in a dashboard key."""
        if not isinstance(text, str) or not text.strip():
            raise UsageError(f"{what}: a path is required")
        if "\x00" in text:
            raise PathRejected(f"{what}: path contains a forbidden character")
        given = Path(text).expanduser()
        if any(part == ".." for part in given.parts):
            raise PathRejected(f"{text}: '..' is not accepted")
        if given.is_absolute():
            candidate = given
        else:
            rel = relative_name(text)
            under = [root / rel for root in self.roots.roots]
            candidate = next((p for p in under if p.exists() or p.is_symlink()), under[0])
        real = self.roots.check(candidate, text)
        if real.is_dir():
            self.roots.check_tree(real, text)
        return real


def _config(scope: Scope, start: Path) -> Any:
    """The rule settings for an input: tilescope.toml or pyproject.toml's [tool.tilescope] in the
    input's folder or the nearest folder above it inside the roots (the CLI reads the current
    directory's; the worker's is the scratch folder, so the input's project stands in for it)."""
    # deferred: a tool's modules load when it is called, so the server lists its tools at once
    from tilescope.config import Config, load_config

    folder = start if start.is_dir() else start.parent
    while any(is_within(folder, root) for root in scope.roots.roots):
        cfg = load_config(None, cwd=folder)
        if cfg.source is not None or folder.parent == folder:
            return cfg
        folder = folder.parent
    return Config()


def envelope(
    tool: str,
    payload: dict[str, Any],
    rests_on: list[str],
    assumed: list[str],
    notes: list[str],
    generated: bool | None,
) -> dict[str, Any]:
    """What every tool returns around its command's JSON (schema: tilescope.agent.schemas)."""
    return {
        "tool": tool,
        "rests_on": sorted(dict.fromkeys(rests_on)),
        "assumed": list(dict.fromkeys(assumed)),
        "notes": list(dict.fromkeys(notes)),
        "generated": generated,
        **payload,
    }


def _manifest_says(doc: object) -> bool | None:
    """What a manifest.json says of its profile: a run bundle's `profile.runs[].generated`, a
    sample's top-level `generated` / `hardware_measurement`; None when it says nothing."""
    if not isinstance(doc, dict):
        return None
    runs = [r for r in (doc.get("profile") or {}).get("runs") or [] if isinstance(r, dict)]
    if runs and any("generated" in r for r in runs):
        return any(bool(r.get("generated")) for r in runs)
    if isinstance(doc.get("generated"), bool):
        return bool(doc["generated"])
    if isinstance(doc.get("hardware_measurement"), bool):
        return not doc["hardware_measurement"]
    return None


def _generated(scope: Scope, paths: list[Path]) -> bool | None:
    """True when a manifest.json at or above an input (inside the roots: nothing outside them is
    read) says its profile came from a generator's model, False when it says it was measured,
    None when none says."""
    verdicts: list[bool] = []
    for p in paths:
        folder = p if p.is_dir() else p.parent
        while any(is_within(folder, root) for root in scope.roots.allowed):
            try:
                said = _manifest_says(json.loads((folder / "manifest.json").read_text(encoding="utf-8")))
            except (OSError, ValueError):
                said = None
            if said is not None:
                verdicts.append(said)
                break
            if folder.parent == folder:
                break
            folder = folder.parent
    return any(verdicts) if verdicts else None


def _report_facts(report: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """(files read, values assumed, notes) of a report (report.schema.json)."""
    files: list[str] = []
    assumed: list[str] = []
    notes: list[str] = []
    for p in report.get("profiles") or [report.get("inputs") or {}]:
        files += [str(f) for f in p.get("files") or []]
        chip = p.get("chip") or {}
        assumed += [str(a) for a in chip.get("assumptions") or []]
        figures = chip.get("assumed_figures") or []
        if figures:
            assumed.append(f"{chip.get('name')}: {', '.join(figures)} are the catalogue's, not the profile's")
        if chip.get("hbm_bandwidth_assumed"):
            assumed.append(str(chip.get("hbm_bandwidth_source")))
        notes += [str(w) for w in p.get("warnings") or []]
    for f in report.get("findings") or []:
        assumed += [str(a) for a in f.get("assumed") or []]
    return files, assumed, notes


# ---------------------------------------------------------------------------------------------- info


def info(scope: Scope, args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    # deferred: a tool's modules load when it is called, so the server lists its tools at once
    from tilescope.commands.info import profile_info
    from tilescope.io.load import load_profiles
    from tilescope.summary import SUMMARY_COLUMNS

    path = scope.path(args["path"], "path")
    progress(1, 2, f"reading {path.name}")
    profiles = load_profiles(path, chip=args.get("chip"), kernel_columns=SUMMARY_COLUMNS)
    infos = [profile_info(pr) for pr in profiles]
    failures = [f.warning_line() for f in getattr(profiles, "failures", [])]
    files = [f for i in infos for f in i["files"]]
    assumed = [a for i in infos for a in i["chip"]["assumptions"]]
    notes = [w for i in infos for w in i["warnings"]] + failures
    return envelope(
        "info", {"profiles": infos, "left_out": failures}, files, assumed, notes, _generated(scope, [path])
    )


# ------------------------------------------------------------------------------------------- analyze


def _page(items: list[Any], offset: int, limit: int) -> tuple[list[Any], dict[str, int]]:
    return items[offset : offset + limit], {"offset": offset, "limit": limit, "total": len(items)}


# The last reports analyze made, so that paging through findings does not analyse again: key ->
# (report, files, notes, each file's (mtime_ns, size) when it was read)
_REPORTS: dict[
    tuple[Any, ...], tuple[dict[str, Any], list[str], list[str], list[tuple[int, int] | None]]
] = {}
KEPT_REPORTS = 4


def _signature(files: list[str]) -> list[tuple[int, int] | None]:
    out: list[tuple[int, int] | None] = []
    for f in files:
        try:
            st = Path(f).stat()
        except OSError:
            out.append(None)
            continue
        out.append((st.st_mtime_ns, st.st_size))
    return out


def _kept_report(key: tuple[Any, ...]) -> tuple[dict[str, Any], list[str], list[str]] | None:
    kept = _REPORTS.get(key)
    if kept is None or not kept[1] or _signature(kept[1]) != kept[3]:
        return None
    return kept[0], kept[1], kept[2]


def _keep_report(key: tuple[Any, ...], report: dict[str, Any], files: list[str], notes: list[str]) -> None:
    _REPORTS[key] = (report, files, notes, _signature(files))
    while len(_REPORTS) > KEPT_REPORTS:
        del _REPORTS[next(iter(_REPORTS))]


def analyze(scope: Scope, args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    # deferred: a tool's modules load when it is called, so the server lists its tools at once
    from tilescope.commands.analyze import RankOptions, build, check_rule_prefixes
    from tilescope.report.data import validate_report

    path = scope.path(args["path"], "path")
    cfg = _config(scope, path)
    given = {key: [c.upper() for c in args.get(key) or []] for key in ("select", "ignore")}
    cfg.select = given["select"] or cfg.select
    cfg.ignore = [*cfg.ignore, *given["ignore"]]
    check_rule_prefixes(cfg, given)
    key = (str(path), args.get("chip"), tuple(cfg.select), tuple(cfg.ignore))
    kept = _kept_report(key)
    if kept is None:
        progress(1, 3, f"loading and analysing {path.name}")
        failures: list[Any] = []
        # the ranks of a multi-rank run in this process (jobs=1): a cancelled call kills this
        # process, which would leave a pool's workers running; the rank cache lives in the scratch
        # folder (TILESCOPE_CACHE_DIR, set by the server)
        report = build(path, cfg, args.get("chip"), False, failures, RankOptions(jobs=1))
        files, assumed, notes = _report_facts(report)
        notes += [f.warning_line() for f in failures]
        _keep_report(key, report, files, notes)
    else:
        report, files, notes = kept
        assumed = _report_facts(report)[1]
        progress(1, 3, f"the report of {path.name} made by the previous call (its files are unchanged)")
    progress(2, 3, "paging the report")
    detail = args.get("detail", "standard")
    paged = dict(report)
    paged["findings"], findings_page = _page(
        report["findings"], args.get("findings_offset", 0), args.get("findings_limit", PAGE_DEFAULT)
    )
    paged["top_kernels"], kernels_page = _page(
        report.get("top_kernels") or [],
        args.get("kernels_offset", 0),
        args.get("kernels_limit", PAGE_DEFAULT),
    )
    if detail != "full":
        for name in ("timeline", "timeline_info"):
            paged.pop(name, None)
    if detail == "brief":
        # the finding's headline, saving and fix; its evidence is one call away (detail "standard")
        paged["findings"] = [{**f, "evidence": {}} for f in paged["findings"]]
        paged.pop("lines", None)
    validate_report(paged)
    result = envelope(
        "analyze",
        {"report": paged, "detail": detail, "findings_page": findings_page, "kernels_page": kernels_page},
        files,
        assumed,
        notes,
        _generated(scope, [path]),
    )
    result["full_report"] = report  # saved whole in the scratch folder by the worker, not returned
    return result


# ------------------------------------------------------------------------------------------- kernels


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item"):  # numpy scalars
        return _json_value(v.item())
    if v is None or isinstance(v, bool | int | float | str):
        return v
    return str(v)


def _glob_regex(pattern: str) -> str:
    """A glob (`*`, `?`) as an anchored regular expression both Python's `re` and RE2 (pandas'
    Arrow strings) read; fnmatch.translate writes atomic groups RE2 refuses."""
    parts = [".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern]
    return "^" + "".join(parts) + "$"


def kernels(scope: Scope, args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    # deferred: a tool's modules load when it is called, so the server lists its tools at once
    import pandas as pd

    from tilescope.commands.kernels import TABLE_COLUMNS
    from tilescope.io.load import load_profile

    path = scope.path(args["path"], "path")
    progress(1, 2, f"reading {path.name}")
    profile = load_profile(path, chip=args.get("chip"))
    table: pd.DataFrame = profile.kernels
    total = len(table)
    mask = pd.Series(True, index=table.index)
    for column, pattern in (
        ("name", args.get("name")),
        ("op_type", args.get("op_type")),
        ("core_type", args.get("core_type")),
    ):
        if not pattern:
            continue
        if column not in table.columns:  # a filter that cannot apply would match every row
            raise UsageError(f"{column}: this profile has no {column} column")
        mask &= table[column].astype(str).str.match(_glob_regex(pattern)).fillna(False).astype(bool)
    table = table[mask]
    sort = args.get("sort", "duration_us")
    if sort not in table.columns:
        raise UsageError(f"sort: no column {sort!r}; the columns are {', '.join(map(str, table.columns))}")
    table = table.sort_values(sort, ascending=not args.get("descending", True), kind="stable")
    columns = args.get("columns") or [c for c in TABLE_COLUMNS if c in table.columns]
    unknown = [c for c in columns if c not in table.columns]
    if unknown:
        raise UsageError(
            f"columns: no column {unknown[0]!r}; the columns are {', '.join(map(str, table.columns))}"
        )
    top = table.head(args.get("top", 20))[list(columns)]
    rows = [
        {c: _json_value(v) for c, v in zip(columns, values, strict=True)}
        for values in top.itertuples(index=False, name=None)
    ]
    chip = profile.chip
    payload = {
        "kernels": rows,
        "columns": list(columns),
        "rows_total": total,
        "rows_matched": int(mask.sum()),
        "sorted_by": sort,
        "all_columns": [str(c) for c in profile.kernels.columns],
        "chip": chip.name,
    }
    return envelope(
        "kernels",
        payload,
        [str(f) for f in profile.source.files],
        list(chip.assumptions),
        list(profile.warnings),
        _generated(scope, [path]),
    )


# ---------------------------------------------------------------------------------------------- lint


def lint(scope: Scope, args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    # deferred: a tool's modules load when it is called, so the server lists its tools at once
    from tilescope.commands.analyze import check_rule_prefixes
    from tilescope.commands.lint import _chip, _stack_chip, lint_report
    from tilescope.ir.params import parse_param

    file_text, sep, function = str(args["kernel"]).partition(":")
    kernel_file = scope.path(file_text, "kernel")
    if not kernel_file.is_file():
        raise UsageError(f"{file_text}: not a kernel file (KERNEL.py[:FUNCTION])")
    kernel = f"{kernel_file}{sep}{function}"
    cfg = _config(scope, kernel_file)
    check_rule_prefixes(cfg)
    # the values as the CLI's -p NAME=VALUE reads them (a Python literal; NAME.FIELD for a field)
    params = dict(parse_param(f"{name}={value!r}") for name, value in (args.get("params") or {}).items())
    _chip(args.get("chip"), cfg)
    progress(1, 3, "importing the kernel's TileLang stack")
    spec = _stack_chip(kernel, args.get("chip"), cfg)
    progress(2, 3, f"lowering {kernel_file.name}")
    _cap, _result, _findings, doc = lint_report(kernel, params, spec, cfg)
    assumed = list(spec.assumptions)
    if spec.chosen_because:
        assumed.append(f"chip {spec.name}: {spec.chosen_because}")
    notes = ["static: nothing ran, so no time is measured or estimated"]
    return envelope("lint", {"lint": doc}, [str(kernel_file)], assumed, notes, None)


# ---------------------------------------------------------------------------------------------- diff


def diff(scope: Scope, args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    # deferred: a tool's modules load when it is called, so the server lists its tools at once
    from tilescope.commands.analyze import build
    from tilescope.commands.diff import _match_pair, why_lines
    from tilescope.diff import DiffResult
    from tilescope.diff_cluster import diff_reports, load_any

    base = scope.path(args["base"], "base")
    head = scope.path(args["head"], "head")
    threshold = float(args.get("threshold_pct", 5.0))
    pairs = [_match_pair(m) for m in args.get("match") or []]
    failures: list[Any] = []
    reports = []
    for i, side in enumerate((base, head)):
        progress(i + 1, 4, f"loading and analysing {side.name}")
        source = _config(scope, side).source  # each side's own project settings, as analyze reads them
        reports.append(load_any(side, args.get("chip"), source and str(source), failures, build))
    progress(3, 4, "comparing")
    result = diff_reports(
        reports[0], reports[1], args["base"], args["head"], threshold, args.get("fail_on_new"), pairs
    )
    files: list[str] = []
    assumed: list[str] = []
    notes = [f.warning_line() for f in failures]
    for side, report in zip((base, head), reports, strict=True):
        f, a, n = _report_facts(report)
        files += f or [str(side)]
        assumed += a
        notes += n
    why = [{"kernel": k, "why": w} for k, w in why_lines(result)] if isinstance(result, DiffResult) else []
    return envelope(
        "diff", {"diff": result.to_dict(), "why": why}, files, assumed, notes, _generated(scope, [base, head])
    )


# ---------------------------------------------------------------------------------------------- rule


def rule(scope: Scope, args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    # deferred: a tool's modules load when it is called, so the server lists its tools at once
    from tilescope.commands.rules_cmd import rule_markdown
    from tilescope.engine import get_rule

    text = rule_markdown(str(args["code"]))  # the CLI's error for an unknown rule
    info = get_rule(str(args["code"]))
    assert info is not None
    payload = {
        "rule": {
            "code": info.code,
            "slug": info.slug,
            "kind": info.kind,
            "needs": list(info.needs),
            "summary": info.summary,
            "thresholds": json.loads(json.dumps(info.thresholds, default=str)),
            "markdown": text,
        }
    }
    return envelope("rule", payload, [str(Path(info.module.__file__ or ""))], [], [], None)


def rules(scope: Scope, args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """The catalogue (the `tilescope://rules` resource, not a tool)."""
    # deferred: a tool's modules load when it is called, so the server lists its tools at once
    from tilescope.commands.rules_cmd import rules_table_rows

    rows = [
        dict(zip(("code", "slug", "kind", "needs", "summary"), r, strict=True)) for r in rules_table_rows()
    ]
    return {"rules": rows}


# --------------------------------------------------------------------------------------------- lines


def lines(scope: Scope, args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    # deferred: a tool's modules load when it is called, so the server lists its tools at once
    from tilescope.commands.lines import lines_report

    path = scope.path(args["path"], "path")
    progress(1, 2, f"reading the per-line data of {path.name}")
    report = lines_report(path)
    top = args.get("top", 15)
    shown = report["lines"][:top]
    payload = {
        "lines": {**report, "lines": shown},
        "lines_page": {"offset": 0, "limit": top, "total": len(report["lines"])},
    }
    notes = [str(n) for n in report.get("notes") or []]
    if report.get("metric") == "cycles":
        notes.append("cycles from msprof op simulator: a model of the chip, not a board measurement")
    # the simulator folder (or visualize_data.bin) read, and the bundle's line map and Ascend C
    read = [str(report["simulator"])]
    if report["mapped"]:
        read.append(str(path / "ir" / "ir.json"))
    if (path / "ir" / "kernel.cpp").is_file():
        read.append(str(path / "ir" / "kernel.cpp"))
    return envelope("lines", payload, read, [], notes, _generated(scope, [path]))


TOOLS: dict[str, Callable[[Scope, dict[str, Any], Progress], dict[str, Any]]] = {
    "info": info,
    "analyze": analyze,
    "kernels": kernels,
    "lint": lint,
    "diff": diff,
    "rule": rule,
    "lines": lines,
}
INTERNAL = {"rules": rules}
assert set(TOOLS) == set(INPUTS)
