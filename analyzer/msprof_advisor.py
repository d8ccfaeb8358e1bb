"""--with-msprof-advisor: run msprof-analyze's advisor on the same input and merge its problems.

The advisor is an optional, separately installed tool (`pip install msprof-analyze`). We call its
CLI (`msprof-analyze advisor all -d DIR -l en --agent`), whose stdout is one JSON object with a
`problems` table (headers + rows), and turn each row into a Finding with source "msprof-analyze".
Rows that repeat a tilescope finding (same category and an overlapping kernel or rule family) are
marked as duplicates instead of being listed twice.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tilescope.errors import MissingComponentError
from tilescope.findings import Finding, Severity
from tilescope.scratch import scratch_dir

INSTALL_HINT = (
    "msprof-analyze is not installed: install it with `pip install msprof-analyze` (or "
    "`pip install tilescope[msprof]`), or put `msprof-analyze` on PATH"
)
# advisor category -> the tilescope codes that cover the same problem
CATEGORY_CODES = {
    "aicpu issues": ("TS405",),
    "operator dynamic shape issues": (),
    "fusible operator": ("TS101", "TS102"),
    "fusion issues": ("TS102",),
    "operator no bound issues": ("TS203",),
    "block dim issues": ("TS401",),
    "cube operator bound": ("TS202",),
    "vector operator bound": ("TS202",),
    "ai core frequency": ("TS403",),
    "operator dispatch issues": ("TS404",),
    "affinity api issues": ("TS102",),
    "bandwidth contention": ("TS202",),
    "cube operator perf analysis": ("TS202", "TS203", "TS204", "TS401"),
    "fa operator perf analysis": ("TS201", "TS204"),
    "vector operator perf analysis": ("TS202", "TS203"),
}


def find_advisor() -> list[str] | None:
    exe = shutil.which("msprof-analyze")
    if exe:
        return [exe]
    try:
        # deferred: msprof-analyze is optional (the `msprof` extra)
        import msprof_analyze  # noqa: F401
    except ImportError:
        return None
    return [sys.executable, "-m", "msprof_analyze.cli.entrance"]


def advisor_input_dir(path: Path, scratch: Path) -> Path:
    """The advisor wants a profiler directory; a lone kernel_details.csv is placed in a layout
    built in `scratch` (an empty directory the caller removes)."""
    if path.is_dir() and ((path / "ASCEND_PROFILER_OUTPUT").is_dir() or any(path.glob("PROF_*"))
                          or any(path.glob("*_ascend_pt"))):
        return path
    # A bare kernel_details.csv / trace_view.json (or a folder of them): the advisor only looks
    # inside ASCEND_PROFILER_OUTPUT/, so give it that layout with symlinks.
    files = [path] if path.is_file() else [p for p in path.iterdir() if p.suffix in (".csv", ".json")]
    out = scratch / "ASCEND_PROFILER_OUTPUT"
    out.mkdir()
    for f in files:
        (out / f.name).symlink_to(f.resolve())
    return scratch


def run_advisor(path: Path, timeout: float = 900.0) -> dict[str, Any]:
    """Run the advisor; return {status, command, returncode, duration_s, problems: [{...}]}."""
    cmd = find_advisor()
    if cmd is None:
        raise MissingComponentError(INSTALL_HINT)
    # both removed afterwards, also on Ctrl-C (the layout was left in /tmp on every run before)
    with scratch_dir("tilescope-msa-") as layout, scratch_dir("tilescope-msa-out-") as out:
        d = advisor_input_dir(path, layout)
        # absolute: the advisor runs in `out`, where a relative path means something else, and a
        # relative name starting with '-' would be read as an option
        full = [*cmd, "advisor", "all", "-d", str(d.absolute()), "-l", "en", "--agent", "-o", str(out)]
        t0 = time.perf_counter()
        proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout, cwd=out, check=False)
        dt = time.perf_counter() - t0
    return {
        "command": full,
        "returncode": proc.returncode,
        "duration_s": round(dt, 3),
        **parse_agent_output(proc.stdout),
    }


def parse_agent_output(stdout: str) -> dict[str, Any]:
    """Parse `--agent` stdout: {"status", "message": {"problems": {"headers": [...], "data": [[...]]}}}."""
    start = stdout.find("{")
    try:
        data = json.loads(stdout[start:]) if start >= 0 else {}
    except json.JSONDecodeError:
        return {"status": "unparsed", "problems": [], "raw": stdout[-2000:]}
    msg = data.get("message") or {}
    table = msg.get("problems") or {} if isinstance(msg, dict) else {}
    headers = [str(h) for h in table.get("headers", [])]
    rows = [dict(zip(headers, r, strict=False)) for r in table.get("data", [])]
    return {"status": data.get("status", "unknown"), "problems": rows}


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return 0.0


def to_findings(advisor: dict[str, Any], ours: list[Finding]) -> tuple[list[Finding], int]:
    """Advisor problems as findings, minus those a tilescope finding already covers (count returned)."""
    our_codes = {f.code for f in ours}
    out: list[Finding] = []
    dup = 0
    for i, p in enumerate(advisor.get("problems", []), start=1):
        cat = str(p.get("category", "")).strip()
        codes = CATEGORY_CODES.get(cat.lower(), ())
        covered = bool(codes) and any(c in our_codes for c in codes)
        p["duplicate_of"] = [c for c in codes if c in our_codes]
        if covered:
            dup += 1
            continue
        out.append(
            Finding(
                code=f"MSA{i:03d}",
                slug=cat.lower().replace(" ", "-") or "advisor",
                severity=Severity.INFO,
                kernels=(),
                message=f"msprof-analyze: {cat}: {' '.join(str(p.get('description', '')).split())}",
                evidence={k: v for k, v in p.items() if k != "duplicate_of"},
                recommendation=" ".join(str(p.get("suggestion", "")).split()),
                est_saving_us=max(_num(p.get("income(us)")), 0.0),
                source="msprof-analyze",
                occurrences=int(_num(p.get("problem count")) or 1),
            )
        )
    return out, dup
