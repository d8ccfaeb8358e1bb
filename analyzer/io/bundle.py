"""A run bundle (manifest.json + profile/ + ir/, collectors/bundle.py): its profiler runs under
profile/ read and merged (`load_bundle`, one per metric group), and its manifest.json and ir.json
read, held to their types, into the built profile (`attach_bundle`).

Kept light at import, as `tilescope.io.load` is: pandas and the readers are imported inside the
functions that use them.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilescope.columns import metric_groups_of
from tilescope.errors import ProfileFormatError, UsageError
from tilescope.io.detect import Detected
from tilescope.io.formats import load_single
from tilescope.io.parts import Parts, ensure_contract

if TYPE_CHECKING:
    from tilescope.profile import Profile


def load_bundle(det: Detected) -> Parts:
    # deferred: pandas (~0.3 s) (and io.merge) and io.device (pyarrow) only where used
    import pandas as pd

    from tilescope.io import device as dev
    from tilescope.io.merge import merge_blocks, merge_kernel_tables

    if not det.children:
        empty = ensure_contract(pd.DataFrame(index=pd.RangeIndex(0)))
        return Parts(empty, None, warnings=["bundle has no profiler output: runtime metrics are absent"])
    loaded = [load_single(c) for c in det.children]
    groups = [list(p.metric_groups) for p in loaded]  # each run's own, before the merge
    parts = loaded[0]
    if len(loaded) > 1:
        parts.kernels, notes = merge_kernel_tables([p.kernels for p in loaded])
        parts.warnings.extend(notes)
        blocks = [p.blocks for p in loaded if p.blocks is not None]
        parts.blocks = merge_blocks(blocks) if blocks else None
        for other in loaded[1:]:
            parts.files.extend(other.files)
            parts.warnings.extend(other.warnings)
            dev.merge_device(parts.device, other.device)
            parts.timeline = parts.timeline or other.timeline
            parts.launches = parts.launches if parts.launches is not None else other.launches
            parts.coupled = parts.coupled or other.coupled
        parts.metric_groups = metric_groups_of(list(parts.kernels.columns))
        if det.format == "msprof_groups":  # said first: the table is several runs' (#26)
            parts.warnings.insert(0, (
                f"{len(loaded)} msprof runs of one device, one per --aic-metrics group "
                f"({', '.join(g for run in groups for g in run)}), not ranks: one kernel table, "
                f"launches matched by name and order; durations and pipe times from the "
                f"{groups[0][0] if groups[0] else 'first'} run"))
    return parts


def _read_json_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProfileFormatError(path, None, f"expected a JSON object ({exc})") from exc
    if not isinstance(data, dict):
        raise ProfileFormatError(path, None, f"expected a JSON object, found a JSON {type(data).__name__}")
    bad = _beyond_int64(data, ())
    if bad is not None:  # found by the fuzzer: a source_line of 2**70 printed as a location
        keys, found = bad
        raise ProfileFormatError(path, _json_path(keys), f"expected a number within 64 bits, found {found}")
    return data


def _json_path(keys: Iterable[str | int]) -> str | None:
    """`kernels[0].versions.s_ub` for the keys ("kernels", 0, "versions", "s_ub"); None for the root."""
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys).lstrip(".") or None


def _beyond_int64(x: Any, keys: tuple[str | int, ...]) -> tuple[tuple[str | int, ...], str] | None:
    """The keys to, and the text of, the first number no reader can take back: an integer beyond
    int64, or 1e400 (which Python's json reads as inf)."""
    if isinstance(x, dict):
        for k, v in x.items():
            found = _beyond_int64(v, (*keys, str(k)))
            if found:
                return found
    elif isinstance(x, list):
        for i, v in enumerate(x):
            found = _beyond_int64(v, (*keys, i))
            if found:
                return found
    elif isinstance(x, bool):
        return None
    elif isinstance(x, int) and not -(2**63) <= x < 2**63:
        return keys, str(x)[:40]
    elif isinstance(x, float) and not math.isfinite(x):
        return keys, repr(x)
    return None


def _read_ir(path: Path) -> dict[str, Any]:
    """A bundle's ir.json, held to its schema (analyzer/ir/schema/ir.schema.json): the TS5xx rules
    and the IR view trust its types (a buffer's versions of -1e308 became a 300-digit integer in a
    finding), so a value of the wrong type or range is refused here, naming where it is."""
    # deferred: ir.model only when used; `info` runs without it
    from tilescope.ir.model import ir_schema_error

    doc = _read_json_file(path)
    error = ir_schema_error(doc)
    if error is not None:
        expected = f"{error.message[:160]}; expected ir.json of schema 1.x"
        raise ProfileFormatError(path, _json_path(error.absolute_path), expected)
    return doc


def _add_launch_lines(ir: dict[str, Any], bundle: Path, manifest: dict[str, Any] | None) -> None:
    """An older ir.json has no grid line (`with T.Kernel(...)`): take it from the bundle's copy of
    the kernel (manifest `kernel.source`, collectors/bundle.py), so grid findings point at it."""
    # deferred: ir.locate only when used; `info` runs without it
    from tilescope.ir.locate import add_launch_lines

    kernel = (manifest or {}).get("kernel")
    rel = kernel.get("source") if isinstance(kernel, dict) else None
    copy = (bundle / rel).resolve() if isinstance(rel, str) else None
    if copy is not None and not copy.is_relative_to(bundle.resolve()):
        copy = None  # a manifest naming a file outside its bundle
    add_launch_lines(ir, bundle / "ir", copy)


def attach_bundle(profile: Profile, bundle: Path) -> None:
    """The bundle's manifest.json and ir/ (its ir.json, with the kernel's launch lines) into
    `profile`, the files read into its source."""
    if (bundle / "manifest.json").is_file():
        profile.manifest = _read_json_file(bundle / "manifest.json")
        profile.source.files.append(bundle / "manifest.json")
        stale = stale_kernel(profile.manifest)
        if stale is not None:
            profile.warnings.append(stale)
            profile.stale_kernel = stale
    if (bundle / "ir").is_dir():
        profile.ir_dir = bundle / "ir"
        if (bundle / "ir" / "ir.json").is_file():
            profile.ir = _read_ir(bundle / "ir" / "ir.json")
            profile.source.files.append(bundle / "ir" / "ir.json")
            _add_launch_lines(profile.ir, bundle, profile.manifest)
    _attach_simulator(profile, bundle)


# a kernel file larger than this is not hashed (a TileLang kernel is a few KB)
MAX_KERNEL_BYTES = 16 << 20


def stale_kernel(manifest: Any) -> str | None:
    """The warning for a bundle whose kernel has changed since it was collected (#28): the manifest
    records the kernel file (repo-relative) and its sha256; when that file is here, under the
    current folder, and hashes otherwise, the profile and IR are of the earlier kernel. Only a
    relative path without `..` is looked at, and the file is hashed, never read into a report."""
    kernel = manifest.get("kernel") if isinstance(manifest, dict) else None
    file, digest = (kernel.get("file"), kernel.get("sha256")) if isinstance(kernel, dict) else (None, None)
    if not isinstance(file, str) or not isinstance(digest, str) or not file:
        return None
    rel = Path(file.replace("\\", "/"))
    if rel.is_absolute() or ".." in rel.parts:
        return None
    here = Path.cwd() / rel
    try:
        if not here.is_file() or here.stat().st_size > MAX_KERNEL_BYTES:
            return None
        actual = hashlib.sha256(here.read_bytes()).hexdigest()
    except OSError:
        return None
    if actual == digest.lower():
        return None
    return (f"{file} has changed since this bundle was collected (sha256 {actual[:12]}…, the bundle's "
            f"{digest[:12]}…): its profile and IR are of the earlier kernel; collect it again")


def stale_bundles(root: Path) -> list[str]:
    """The stale-kernel warning of every bundle at `root` or one level under it (a folder of ranks),
    worked out now from the manifests and the kernel files under the current folder: the gate of
    `analyze --fail-on-stale` must not take a cached report's word for a file edited since. A
    manifest that cannot be read is the analysis's error to report, not this check's."""
    if not root.is_dir():
        return []
    candidates = [root, *sorted(p for p in root.iterdir() if p.is_dir())]
    said = []
    for folder in candidates:
        if not (folder / "manifest.json").is_file():
            continue
        try:
            manifest = _read_json_file(folder / "manifest.json")
        except ProfileFormatError:
            continue
        stale = stale_kernel(manifest)
        if stale is not None:
            said.append(f"{folder}: {stale}")
    return said


def _attach_simulator(profile: Profile, bundle: Path) -> None:
    """A bundle's per-line data (`msprof op simulator` output or a visualize_data.bin), when its
    profile/ folder holds some. A broken file costs the per-line evidence, not the analysis: it
    becomes a warning."""
    if not (bundle / "profile").is_dir():
        return
    # deferred: the per-line readers import pandas; this module stays light at import (above)
    from tilescope.io.line_data import has_line_data, read_line_data

    if not has_line_data(bundle / "profile"):
        return
    try:
        profile.simulator = read_line_data(bundle / "profile")
    except (ProfileFormatError, UsageError) as exc:
        profile.warnings.append(f"per-line data not read, so no finding names a measured line: {exc}")
        return
    profile.source.files.extend(profile.simulator.files)
