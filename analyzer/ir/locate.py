"""Map a runtime finding's topic to kernel source / TVMScript / Ascend C lines via ir.json.

Runtime rules call `locate(profile.ir, kernel_row_name, topic)` when a bundle carries IR. Profiler
kernel names are TileLang's entry `{prim_func}_kernel`, possibly with `_mix_aic`/`_mix_aiv`.
"""

from __future__ import annotations

from typing import Any

from analyzer.findings import Location
from analyzer.ir.model import find_kernel
from analyzer.ir.rulekit import locations

TOPICS = ("memory", "vector", "cube", "scalar")


def _most_loaded_copy(k: dict[str, Any]) -> dict[str, Any] | None:
    """The GM load into the buffer of the most loaded scope (by fill ratio), else the largest GM load."""
    loads = [c for c in k.get("copies", []) if c["src_level"] == "GM"]
    if not loads:
        return None
    fill = {
        hw: fp["bytes"] / fp["capacity_bytes"]
        for hw, fp in k.get("footprint", {}).items()
        if fp["capacity_bytes"]
    }
    return max(loads, key=lambda c: (fill.get(c["dst_level"], 0.0), c.get("bytes") or 0))


def locate(ir: dict[str, Any], kernel_name: str, topic: str) -> list[Location]:
    """Locations for topic "memory", "vector", "cube", "scalar" or "buffer:<name>"; [] if unknown."""
    k = find_kernel(ir, kernel_name)
    if k is None or "allocations" not in k:
        return []
    recs: list[tuple[dict[str, Any], str]] = []
    if topic == "memory":
        top = _most_loaded_copy(k)
        if top is not None:
            recs.append((top, f"GM load {top['src']} -> {top['dst']}"))
        recs += [
            (c, f"GM load {c['src']} -> {c['dst']}")
            for c in k["copies"]
            if c["src_level"] == "GM" and c is not top
        ]
    elif topic == "vector":
        recs += [(e, f"elementwise -> {','.join(e['writes'])}") for e in k.get("elementwise", [])]
        recs += [(r, f"reduce {r['kind']}({r['src']})") for r in k.get("reduces", [])]
        recs.sort(key=lambda x: x[0].get("source_line") or 0)
    elif topic == "cube":
        recs += [(g, f"gemm {g['c']} += {g['a']} @ {g['b']}") for g in k.get("gemms", [])]
    elif topic == "scalar":
        # Scalar time is index arithmetic and loop control: point at the loops around the tile ops.
        recs += [
            (lp, f"loop {lp['var']}")
            for lp in k.get("loops", [])
            if lp["kind"] == "serial" and lp.get("source_line")
        ]
    elif topic.startswith("buffer:"):
        name = topic.split(":", 1)[1]
        recs += [(a, f"alloc {name}") for a in k["allocations"] if a["name"] == name]
        recs += [(c, f"copy {c['src']} -> {c['dst']}") for c in k["copies"] if name in (c["src"], c["dst"])]
        recs += [(g, "gemm") for g in k.get("gemms", []) if name in (g["a"], g["b"], g["c"])]
    else:
        return []
    out: list[Location] = []
    for rec, label in recs:
        for loc in locations(ir, k, rec, label):
            if loc not in out:
                out.append(loc)
    return out
