"""Map a runtime finding's topic to kernel source / TVMScript / Ascend C lines via ir.json.

Runtime rules call `locate(profile.ir, kernel_row_name, topic)` when a bundle carries IR. Profiler
kernel names are TileLang's entry `{prim_func}_kernel`, possibly with `_mix_aic`/`_mix_aiv`.

A location names what the author must change (#15): a grid finding the `with T.Kernel(...)` line
(topic "grid"), a pipe-time finding the body of the hot loop (`hot_loop`: the loop that runs the
kernel's work, not the initialisation before it), records inside it first.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from tilescope.findings import Location
from tilescope.ir.linemap import launch_sites, map_launch
from tilescope.ir.model import find_kernel
from tilescope.ir.rulekit import locations

_OPS = ("gemms", "copies", "elementwise", "reduces")
_NOT_SERIAL = ("thread_binding", "parallel", "vectorized")


def _loops(k: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {lp["id"]: lp for lp in k.get("loops", [])}


def trips(k: dict[str, Any], rec: dict[str, Any]) -> int:
    """How often one block runs a record: the product of its enclosing loops' extents (the grid's
    block loops excluded; a symbolic extent counts once)."""
    loops = _loops(k)
    n = 1
    for lid in rec.get("enclosing_loops", []):
        lp = loops.get(lid)
        if lp is not None and lp["kind"] != "thread_binding" and isinstance(lp.get("extent"), int):
            n *= max(1, lp["extent"])
    return n


def _depth(loops: dict[str, dict[str, Any]], lp: dict[str, Any]) -> int:
    d, parent = 0, lp.get("parent")
    while parent in loops and d < len(loops):
        d, parent = d + 1, loops[parent].get("parent")
    return d


def hot_loop(k: dict[str, Any]) -> dict[str, Any] | None:
    """The loop whose body does the kernel's work: the innermost serial/pipelined loop holding at
    least half of the block's trip-weighted work, counting GEMMs only when there are any (the Cube
    work of a GEMM or attention kernel is what its K/KV loop repeats); None without such a loop.

    Work is records x trips, so an initialisation loop run once never outweighs a loop body run
    16 times, and an outer tile loop loses to the inner K loop that holds the same GEMMs."""
    loops = _loops(k)
    recs = list(k.get("gemms", [])) or [r for kind in _OPS for r in k.get(kind, [])]
    if not recs:
        return None
    weight = [(r, trips(k, r)) for r in recs]
    total = sum(w for _, w in weight)
    best: dict[str, Any] | None = None
    for lp in loops.values():
        if lp["kind"] in _NOT_SERIAL:
            continue
        work = sum(w for r, w in weight if lp["id"] in r.get("enclosing_loops", []))
        if 2 * work >= total and (best is None or _depth(loops, lp) > _depth(loops, best)):
            best = lp
    return best


def in_loop(rec: dict[str, Any], loop: dict[str, Any] | None) -> bool:
    """`rec` runs inside `loop` (a loop record counts as inside itself)."""
    if loop is None:
        return False
    return loop["id"] in rec.get("enclosing_loops", []) or rec.get("id") == loop["id"]


Labelled = list[tuple[dict[str, Any], str]]


def _hot_first(k: dict[str, Any], recs: Labelled) -> Labelled:
    """Records inside the hot loop first (in their order), then the rest (initialisation, epilogue)."""
    hot = hot_loop(k)
    if hot is None:
        return recs
    return [x for x in recs if in_loop(x[0], hot)] + [x for x in recs if not in_loop(x[0], hot)]


def _vector_records(k: dict[str, Any]) -> Labelled:
    recs = [(e, f"elementwise -> {','.join(e['writes'])}") for e in k.get("elementwise", [])]
    recs += [(r, f"reduce {r['kind']}({r['src']})") for r in k.get("reduces", [])]
    return sorted(recs, key=lambda x: x[0].get("source_line") or 0)


def grid_loops(k: dict[str, Any]) -> list[dict[str, Any]]:
    """The block-index loops (the grid) of a kernel."""
    return [
        lp for lp in k.get("loops", [])
        if lp["kind"] == "thread_binding" and str(lp.get("thread") or "").startswith("blockIdx")
    ]


def grid_record(k: dict[str, Any]) -> dict[str, Any]:
    """A record whose lines are the grid's: the launch line (`with T.Kernel(...)`) in the source,
    the first block-index loop in TVMScript, the entry in Ascend C; the kernel def line when the
    launch line is unknown (an ir.json from before it was recorded, no kernel copy)."""
    rec: dict[str, Any] = dict(next(iter(grid_loops(k)), {}))
    rec["source_line"] = k.get("source_launch_line") or rec.get("source_line")
    return rec


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
    # bytes x trips: the K/V loads of the hot loop, not a Q load made once per block
    return max(loads, key=lambda c: (fill.get(c["dst_level"], 0.0), (c.get("bytes") or 0) * trips(k, c)))


def locate(ir: dict[str, Any], kernel_name: str, topic: str) -> list[Location]:
    """Locations for topic "memory", "vector", "cube", "scalar", "grid", "loop" (the hot loop, then
    its vector ops: where Cube/Vector overlap is decided) or "buffer:<name>"; [] if unknown."""
    k = find_kernel(ir, kernel_name)
    if k is None or "allocations" not in k:
        return []
    recs: list[tuple[dict[str, Any], str]] = []
    if topic == "grid":
        grid = k.get("grid") or []
        label = "T.Kernel grid" + (f" ({' x '.join(str(g) for g in grid)} blocks)" if grid else "")
        recs.append((grid_record(k), label))
    elif topic == "loop":
        hot = hot_loop(k)
        if hot is None:
            return locate(ir, kernel_name, "vector")
        recs.append((hot, f"hot loop {hot['var']}"))
        recs += [(r, label) for r, label in _vector_records(k) if in_loop(r, hot)]
    elif topic == "memory":
        top = _most_loaded_copy(k)
        if top is not None:
            recs.append((top, f"GM load {top['src']} -> {top['dst']}"))
        recs += [
            (c, f"GM load {c['src']} -> {c['dst']}")
            for c in k["copies"]
            if c["src_level"] == "GM" and c is not top
        ]
    elif topic == "vector":
        recs += _vector_records(k)
    elif topic == "cube":
        recs += [(g, f"gemm {g['c']} += {g['a']} @ {g['b']}") for g in k.get("gemms", [])]
    elif topic == "scalar":
        # Scalar time is index arithmetic and loop control: point at the loops around the tile ops.
        hot = hot_loop(k)
        serial = [lp for lp in k.get("loops", []) if lp["kind"] == "serial" and lp.get("source_line")]
        recs += [(lp, f"loop {lp['var']}") for lp in sorted(serial, key=lambda lp: lp is not hot)]
    elif topic.startswith("buffer:"):
        name = topic.split(":", 1)[1]
        recs += [(a, f"alloc {name}") for a in k["allocations"] if a["name"] == name]
        recs += [(c, f"copy {c['src']} -> {c['dst']}") for c in k["copies"] if name in (c["src"], c["dst"])]
        recs += [(g, "gemm") for g in k.get("gemms", []) if name in (g["a"], g["b"], g["c"])]
    else:
        return []
    if topic in ("memory", "vector"):
        recs = _hot_first(k, recs)
    out: list[Location] = []
    for rec, label in recs:
        for loc in locations(ir, k, rec, label):
            if loc not in out:
                out.append(loc)
    return out


def add_launch_lines(ir: dict[str, Any], ir_dir: Path, kernel_copy: Path | None) -> None:
    """Fill the grid's lines (`linemap.map_launch`) into an ir.json written before they were
    recorded, from the bundle's copy of the kernel file when its sha256 is the one the IR was
    captured from (other text could have other line numbers). In place; nothing when unknown."""
    todo = [k for k in ir.get("kernels", []) if "loops" in k and "source_launch_line" not in k]
    if not todo or kernel_copy is None or not kernel_copy.is_file():
        return
    try:
        data = kernel_copy.read_bytes()
    except OSError:
        return
    if hashlib.sha256(data).hexdigest() != ir.get("kernel_sha256"):
        return
    source = data.decode("utf-8", errors="replace")
    for k in todo:
        stages = {s["name"]: ir_dir / s["file"] for s in k.get("stages", [])}
        texts = {}
        for name in ("tvmscript", "ascendc"):
            try:
                texts[name] = stages[name].read_text(encoding="utf-8", errors="replace")
            except (KeyError, OSError):
                texts[name] = ""
        sites = launch_sites(source, k["name"])
        map_launch(k, sites, texts["tvmscript"], texts["ascendc"] or None, k.get("entry", ""))
