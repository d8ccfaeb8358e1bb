"""SARIF 2.1.0 log for GitHub code scanning: one result per finding, on the kernel's source line.

A result needs at least one location for GitHub to accept it. Findings with a source location
point there (IR files are related locations); the others point at the profile input, so they still
show up in code scanning without pretending to know a line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from importlib.metadata import version
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from tilescope.engine import get_rule
from tilescope.report.access import report_findings, report_input_path
from tilescope.text.escape import finite, sarif_text
from tilescope.text.words import num, saving_phrase

SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SCHEMA_PATH = Path(__file__).parent / "schema" / "sarif-2.1.0.json"
LEVEL = {"high": "error", "medium": "warning", "low": "note", "info": "note"}
SRCROOT = "%SRCROOT%"
INFORMATION_URI = "https://github.com/tilescope/tilescope"


def render(report: Mapping[str, Any], *, source_root: str | Path | None = None, **_opts: Any) -> str:
    root = Path(source_root or Path.cwd()).resolve()
    findings = report_findings(report)
    codes = sorted({str(f.get("code", "TS000")) for f in findings})
    rule_index = {code: i for i, code in enumerate(codes)}
    run: dict[str, Any] = {
        "tool": {"driver": {
            "name": "tilescope",
            "version": _tool_version(report),
            "informationUri": INFORMATION_URI,
            "rules": [_rule(code, findings) for code in codes],
        }},
        "results": [_result(f, rule_index, report, root) for f in findings],
        "columnKind": "unicodeCodePoints",
        "properties": {"reportSchemaVersion": str(report.get("schema_version", ""))},
    }
    notes = _notifications(report)
    run["invocations"] = [{"executionSuccessful": True, **notes}]
    log = {"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [run]}
    return json.dumps(log, indent=2, ensure_ascii=False, allow_nan=False, default=str) + "\n"


def _tool_version(report: Mapping[str, Any]) -> str:
    tool = report.get("tool")
    if isinstance(tool, Mapping) and tool.get("version"):
        return str(tool["version"])
    try:
        return version("tilescope")
    except Exception:
        return "0"


def _rule(code: str, findings: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    sample = next(f for f in findings if str(f.get("code")) == code)
    slug = str(sample.get("slug", code))
    summary, doc = slug, ""
    try:
        info = get_rule(code)
    except Exception:  # a rule module that fails to import must not lose the SARIF log
        info = None
    if info is not None:
        slug, summary, doc = info.slug, info.summary or info.slug, info.doc
    worst = max((f for f in findings if str(f.get("code")) == code),
                key=lambda f: {"high": 3, "medium": 2, "low": 1}.get(str(f.get("severity")), 0))
    rule: dict[str, Any] = {
        "id": code,
        "name": slug,
        "shortDescription": {"text": sarif_text(summary, 1000)},
        "fullDescription": {"text": sarif_text(doc or summary, None)},
        "defaultConfiguration": {"level": LEVEL.get(str(worst.get("severity")), "note")},
        "properties": {"tags": ["performance", "ascend", code[:4]], "precision": "medium"},
    }
    if doc:
        rule["help"] = {"text": doc, "markdown": doc}
    return rule


def _uri(path: str, root: Path) -> tuple[str, str | None]:
    """(uri, uriBaseId): relative to the checkout when possible, else an absolute file URI."""
    p = Path(path)
    if p.is_absolute():
        try:
            rel = p.resolve().relative_to(root)
        except (ValueError, OSError):
            return p.as_uri(), None
        return quote(PurePosixPath(rel).as_posix(), safe="/"), SRCROOT
    posix = PurePosixPath(path.replace("\\", "/")).as_posix()
    return quote(posix, safe="/"), SRCROOT


def _artifact(path: str, root: Path) -> dict[str, Any]:
    uri, base = _uri(path, root)
    return {"uri": uri, **({"uriBaseId": base} if base else {})}


def _physical(loc: Mapping[str, Any], root: Path, base_dir: str | None) -> dict[str, Any]:
    path = str(loc.get("file") or "")
    if loc.get("stage") not in (None, "", "source") and base_dir and not Path(path).is_absolute():
        path = str(Path(base_dir) / path)  # IR files live in the bundle
    phys: dict[str, Any] = {"artifactLocation": _artifact(path, root)}
    line = loc.get("line")
    if isinstance(line, int) and line >= 1:
        region: dict[str, Any] = {"startLine": line}
        end = loc.get("end_line")
        if isinstance(end, int) and end >= line:
            region["endLine"] = end
        phys["region"] = region
    return phys


def _finding_input_path(f: Mapping[str, Any], report: Mapping[str, Any]) -> str | None:
    """The profile a finding is about: its `input`'s path in a report of several ranks (a TS102
    on rank 5, TS601 naming rank 3, TS604 the source rank of its link), else the report's input."""
    profiles = report.get("profiles") or []
    index = f.get("input")
    if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(profiles):
        path = profiles[index].get("path") if isinstance(profiles[index], Mapping) else None
        if isinstance(path, str):
            return path
    return report_input_path(report)


def _result(f: Mapping[str, Any], rule_index: Mapping[str, int], report: Mapping[str, Any],
            root: Path) -> dict[str, Any]:
    code = str(f.get("code", "TS000"))
    locs = [loc for loc in f.get("locations", []) or [] if isinstance(loc, Mapping) and loc.get("file")]
    source = [loc for loc in locs if loc.get("stage") in (None, "", "source")]
    others = [loc for loc in locs if loc not in source]
    input_path = _finding_input_path(f, report)
    primary = source[:1] or others[:1]
    related = source[1:] + (others if source else others[1:])
    if primary:
        locations = [{"physicalLocation": _physical(primary[0], root, input_path)}]
    else:
        locations = [{"physicalLocation": {"artifactLocation": _artifact(input_path or ".", root)},
                      "message": {"text": "profile input (the finding has no source line)"}}]
    kernels = [str(k) for k in f.get("kernels", []) or []]
    saving = num(f.get("est_saving_us")) or 0.0
    share = num(f.get("share_of_total")) or 0.0
    text = (f"{f.get('message', '')} — {saving_phrase(f)}"
            + (f"; kernels: {', '.join(kernels[:5])}" + (" …" if len(kernels) > 5 else "") if kernels else "")
            + (f". {f.get('recommendation')}" if f.get("recommendation") else ""))
    if f.get("by_rank"):  # one result for a problem found on several ranks, which it names
        text = f"{text} ({f.get('rank_text')}; the figures are rank {f.get('rank')}'s)"
    result: dict[str, Any] = {
        "ruleId": code,
        "ruleIndex": rule_index[code],
        "level": LEVEL.get(str(f.get("severity")), "note"),
        "message": {"text": sarif_text(text, 4000)},
        "locations": locations,
        "partialFingerprints": {
            "tilescopeFinding/v1": _fingerprint(f, len(report.get("profiles") or []) > 1)
        },
        "properties": {
            "severity": str(f.get("severity", "")), "slug": str(f.get("slug", "")),
            "kernels": kernels, "estSavingUs": round(saving, 3), "shareOfTotal": round(share, 6),
            "occurrences": f.get("occurrences", 1), "evidence": finite(f.get("evidence") or {}),
        },
    }
    if isinstance(f.get("ranks"), list):
        result["properties"]["ranks"] = [r for r in f["ranks"] if isinstance(r, int)]
    if related:
        result["relatedLocations"] = [
            {"id": i, "physicalLocation": _physical(loc, root, input_path),
             "message": {"text": sarif_text(_location_label(loc))}}
            for i, loc in enumerate(related)]
    return result


def _location_label(loc: Mapping[str, Any]) -> str:
    return f"{loc.get('stage') or 'source'} {loc.get('label') or ''}".strip()


def _fingerprint(f: Mapping[str, Any], multi_rank: bool = False) -> str:
    # Stable across runs while the problem is the same: code + normalised kernel names, so code
    # scanning tracks one alert instead of opening a new one on every push.
    # In a multi-rank report, what the finding names is part of it: a cross-rank finding's link or
    # rank (as `diff` matches them) — or two slow links would be one alert. A rank's own finding
    # is grouped across the ranks it was found on (`ranks`): one alert for the problem, whichever
    # ranks have it; in a report written ungrouped (schema 1.0) its rank is part of it.
    # deferred: diff and diff_cluster (pandas) only where used
    from tilescope.diff import finding_identity
    from tilescope.diff_cluster import cluster_identity, is_cluster_finding

    if is_cluster_finding(f):
        code, subject, kernels = cluster_identity(f)
        parts: tuple[str, ...] = (code, subject, *kernels)
    else:
        code, kernels = finding_identity(f)
        parts = (code, *kernels)
        if f.get("rank") is not None and multi_rank and "ranks" not in f:
            parts = (*parts, f"rank {f['rank']}")
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def _notifications(report: Mapping[str, Any]) -> dict[str, Any]:
    """Rule crashes become error notifications, rules that could not run become notes."""
    out: dict[str, Any] = {}
    errors = [{"level": "error", "message": {"text": sarif_text(e.get("message", ""), 2000)},
               "descriptor": {"id": str(e.get("code", "?"))}} for e in report.get("errors", []) or []]
    skipped = [{"level": "note",
                "message": {"text": sarif_text(f"{s.get('code')} {s.get('slug')} not run: needs "
                                               + ", ".join(map(str, s.get("missing") or [])), 2000)},
                "descriptor": {"id": str(s.get("code", "?"))}} for s in report.get("skipped", []) or []]
    if errors:
        out["toolExecutionNotifications"] = errors
    if skipped:
        out["toolConfigurationNotifications"] = skipped
    return out
