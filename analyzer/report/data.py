"""THE versioned JSON report: every format, the dashboard and diff render from this dict.

`build_report(profile, result)` for one profile, or `build_report([(profile, result), ...])` for
several (one per rank). The schema is `schema/report.schema.json`; `validate_report()` checks a dict
against it. Top-level `inputs`, `summary` and `top_kernels` describe the first profile (what a
single-input renderer reads); `profiles` has one entry per profile and every finding, skipped rule
and error carries the `rank` / `input` it belongs to.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from analyzer.analysis import skipped_to_dict
from analyzer.engine import AnalysisResult
from analyzer.findings import Finding
from analyzer.profile import Profile

SCHEMA_VERSION = "1.0"
SCHEMA_PATH = Path(__file__).with_name("schema") / "report.schema.json"


def tool_version() -> str:
    try:
        return importlib.metadata.version("tilescope")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0+unknown"


def _jsonable(x: Any) -> Any:
    """Numpy/pandas scalars and NaN made JSON-safe (NaN/inf become null)."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating | float):
        f = float(x)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, Path):
        return str(x)
    return x


def _summary(profile: Profile, result: AnalysisResult) -> dict[str, Any]:
    try:
        from analyzer.metrics import profile_summary

        s = dict(profile_summary(profile))
    except ImportError:  # metrics module not installed: the minimum the renderers need
        dur = profile.kernels["duration_us"].fillna(0) if "duration_us" in profile.kernels else None
        s = {
            "kernel_count": len(profile.kernels),
            "total_kernel_us": float(dur.sum()) if dur is not None else 0.0,
            "device_busy_us": float(dur.sum()) if dur is not None else 0.0,
            "time_by_core_type_us": {},
            "shares": {},
            "top_kernels": [],
        }
    s["compute_us"] = round(result.total_device_us, 3)
    s["total_device_us"] = round(result.total_device_us, 3)
    counts = Counter(f.severity.value for f in result.findings)
    saving = sum(f.est_saving_us for f in result.findings)
    s["findings"] = {
        "count": len(result.findings),
        "by_severity": {k: counts.get(k, 0) for k in ("high", "medium", "low", "info")},
        "est_saving_us": round(saving, 3),
        "est_saving_share": round(saving / result.total_device_us, 6) if result.total_device_us > 0 else 0.0,
    }
    s["rules_run"] = list(result.rules_run)
    return s


def _input(profile: Profile, index: int) -> dict[str, Any]:
    src, dev = profile.source, profile.device
    return {
        "id": index,
        "path": str(src.path),
        "format": src.format,
        "producer": src.producer,
        "files": [str(f) for f in src.files],
        "metric_groups": list(src.metric_groups),
        "rank": profile.rank,
        "chip": profile.chip.to_dict(),
        "device": {
            k: getattr(dev, k)
            for k in (
                "device_id",
                "ai_core_num",
                "aiv_num",
                "aic_frequency_mhz",
                "rated_frequency_mhz",
                "model_name",
                "cann_version",
            )
        },
        "has_timeline": profile.timeline is not None,
        "has_blocks": profile.blocks is not None,
        "has_ir": profile.ir is not None,
        "warnings": list(profile.warnings),
    }


def _tag(d: dict[str, Any], index: int, rank: int | None) -> dict[str, Any]:
    return {**d, "input": index, "rank": rank}


def _pair(p: Any) -> tuple[Profile, AnalysisResult]:
    return (p.profile, p.result) if hasattr(p, "profile") else (p[0], p[1])


def build_report(
    profiles: Profile | Sequence[tuple[Profile, AnalysisResult]] | Sequence[Any],
    result: AnalysisResult | None = None,
    *,
    extra_findings: Sequence[Finding] = (),
    advisor: dict[str, Any] | None = None,
    generated_at: str | None = None,
) -> dict[str, Any]:
    """The report dict for one `(profile, result)` or a list of pairs (objects with .profile/.result work)."""
    if isinstance(profiles, Profile):
        assert result is not None, "build_report(profile, result)"
        pairs: list[tuple[Profile, AnalysisResult]] = [(profiles, result)]
    else:
        pairs = [_pair(p) for p in profiles]
    if not pairs:
        raise ValueError("build_report needs at least one profile")
    entries, findings, skipped, errors = [], [], [], []
    for i, (prof, res) in enumerate(pairs):
        entry = _input(prof, i)
        entry["summary"] = _summary(prof, res)
        entries.append(entry)
        findings += [_tag(f.to_dict(), i, prof.rank) for f in res.findings]
        skipped += [_tag(skipped_to_dict(s), i, prof.rank) for s in res.skipped]
        errors += [_tag(e.to_dict(), i, prof.rank) for e in res.errors]
    findings += [_tag(f.to_dict(), 0, pairs[0][0].rank) for f in extra_findings]
    findings.sort(key=lambda f: (-f["est_saving_us"], f["code"]))
    first = entries[0]
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "tilescope", "version": tool_version()},
        "generated_at": generated_at or _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "inputs": {k: v for k, v in first.items() if k != "summary"},
        "summary": first["summary"],
        "top_kernels": first["summary"].get("top_kernels", []),
        "profiles": entries,
        "findings": findings,
        "skipped": skipped,
        "errors": errors,
    }
    if advisor is not None:
        report["advisor"] = advisor
    return _jsonable(report)


def load_schema() -> dict[str, Any]:
    return dict(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def validate_report(report: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when the report does not match the schema."""
    import jsonschema

    jsonschema.validate(report, load_schema())
