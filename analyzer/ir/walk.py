"""Walk a TileLang PrimFunc into plain dicts: allocations, loops, GEMMs, copies, elementwise loops.

Imports TVM lazily (callers have imported tilelang, which puts its bundled TVM on the path). Works on
the un-lowered IR of tilelang 0.1.15 (`tvm.tirx`: SBlock, flat AllocBuffer) and, through the class
map in `_nodes`, on the older `tvm.tir` of tilelang-ascend (Block, Allocate with a body) — the latter
is untested here because tilelang-ascend only ships for aarch64. The placements tilelang-ascend's
Ascend C records are read by `tilescope.ir.ascendc`.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from tilescope.ir.regions import IndexModel
from tilescope.ir.scopes import (
    ASCEND_0115,
    CUDA,
    PIPE_OF_DIRECTION,
    TILELANG_ASCEND,
    hardware_for,
    nbytes,
)

LOOP_KIND = {0: "serial", 1: "parallel", 2: "vectorized", 3: "unrolled", 4: "thread_binding"}
_COPY_OPS = (
    "tl.tileop.ascend_copy",
    "tl.tileop.copy",
    "tl.tileop.ascend_dual_copy",
    "tl.tileop.dual_copy",
    "tl.ascend_copy",
)
# "gemm_v0<half, float, 128, 256, 64, false, false>": in, accumulator, M, N, K, transpose A, B
_GEMM_V0_RE = re.compile(
    r"gemm_v0<\s*[\w ]+,\s*[\w ]+,\s*(?P<m>\d+),\s*(?P<n>\d+),\s*(?P<k>\d+),"
    r"\s*(?P<ta>true|false),\s*(?P<tb>true|false)"
)
_GEMM_OPS = ("tl.tileop.gemm", "tl.tileop.gemm_py", "tl.ascend_gemm_v0")


@dataclass
class _Nodes:
    """The node classes of one TVM flavour (None where the flavour has no such class)."""

    tir: ModuleType
    block: Any
    block_realize: Any
    alloc_flat: Any  # tirx.AllocBuffer (no body)
    allocate: Any  # tir.Allocate (with a body)


def tvm_ir_module() -> tuple[ModuleType, str]:
    """The TIR module of the installed stack and its name ('tvm.tirx' or 'tvm.tir')."""
    try:
        return importlib.import_module("tvm.tirx"), "tvm.tirx"
    except ImportError:
        return importlib.import_module("tvm.tir"), "tvm.tir"


def _nodes() -> _Nodes:
    tir, _ = tvm_ir_module()
    return _Nodes(
        tir=tir,
        block=getattr(tir, "SBlock", None) or getattr(tir, "Block", None),
        block_realize=getattr(tir, "SBlockRealize", None) or getattr(tir, "BlockRealize", None),
        alloc_flat=getattr(tir, "AllocBuffer", None),
        allocate=getattr(tir, "Allocate", None),
    )


def detect_dialect(func: Any, module_name: str) -> str:
    """Which dialect produced `func`: key on the TVM module, then on the scopes it allocates."""
    scopes: set[str] = set()
    nodes = _nodes()

    def grab(n: Any) -> None:
        if nodes.block is not None and isinstance(n, nodes.block):
            scopes.update(b.scope() for b in n.alloc_buffers)

    nodes.tir.stmt_functor.post_order_visit(func.body, grab)
    if module_name == "tvm.tir" or any(s.startswith("wmma.") for s in scopes):
        return TILELANG_ASCEND
    if any(s.startswith("shared.l") for s in scopes):
        return ASCEND_0115
    if "local.fragment" in scopes and not any(s.startswith("shared.l") for s in scopes):
        # A CUDA kernel: fragments at top level, no Ascend scopes. An Ascend vector kernel also
        # has fragments, but only inside T.SimtVF together with shared.dyn UB tiles and no threads.
        return CUDA if _has_threads(func, nodes) else ASCEND_0115
    return ASCEND_0115


def _has_threads(func: Any, nodes: _Nodes) -> bool:
    found = False

    def grab(n: Any) -> None:
        nonlocal found
        if (
            isinstance(n, nodes.tir.For)
            and n.thread_binding is not None
            and str(n.thread_binding.thread_tag).startswith("threadIdx")
        ):
            found = True
        # `T.Kernel(..., threads=128)` (GPU style) leaves `tl.launch_threads: [128, 1, 1]` on the root
        # block of the un-lowered IR; Ascend kernels take no threads= and never carry it.
        if nodes.block is not None and isinstance(n, nodes.block):
            launch = n.annotations.get("tl.launch_threads") if n.annotations else None
            if launch is not None and any(int(x) > 1 for x in launch):
                found = True

    nodes.tir.stmt_functor.post_order_visit(func.body, grab)
    return found


def _int_or_str(x: Any) -> int | str:
    try:
        return int(x)
    except (TypeError, ValueError):
        return str(x)


def _shape(buf: Any) -> list[int | str]:
    return [_int_or_str(d) for d in buf.shape]


def _region(arg: Any, tir: ModuleType) -> tuple[Any, str, list[int | str]] | None:
    """tl.region(BufferLoad, access_mask, *extents) -> (buffer, access, extents)."""
    if isinstance(arg, tir.Call) and getattr(arg.op, "name", "") in ("tl.region", "tl.tileop.region"):
        access = {1: "r", 2: "w", 3: "rw"}.get(int(arg.args[1]), "?")
        return arg.args[0].buffer, access, [_int_or_str(e) for e in arg.args[2:]]
    if isinstance(arg, tir.BufferLoad):
        return arg.buffer, "r", _shape(arg.buffer)
    if hasattr(arg, "shape") and hasattr(arg, "scope"):  # a bare Buffer
        return arg, "r", _shape(arg)
    return None


class _Walker:
    def __init__(self, func: Any, dialect: str) -> None:
        self.func = func
        self.dialect = dialect
        self.nodes = _nodes()
        self.tir = self.nodes.tir
        self.loops: list[dict[str, Any]] = []
        self.stack: list[tuple[Any, dict[str, Any]]] = []  # enclosing (For node, loop record)
        self.out: dict[str, list[dict[str, Any]]] = {
            "allocations": [],
            "loops": [],
            "gemms": [],
            "copies": [],
            "elementwise": [],
            "reduces": [],
            "fills": [],
        }
        self.vf_stack: list[int] = []
        self.buffers_by_data: dict[Any, Any] = {}  # buffer data Var -> Buffer (tvm_access_ptr args)
        self.launch: dict[str, Any] = {}  # `T.launch_thread("blockIdx.x", 32)`: tag -> extent
        self.index = IndexModel.of(func, self.tir)
        self.seq = 0  # program order of the tile ops (copies, GEMMs, elementwise loops, reduces, fills)

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    @property
    def vf_index(self) -> int | None:
        return self.vf_stack[-1] if self.vf_stack else None

    def hw(self, buf: Any) -> str:
        return hardware_for(buf.scope(), self.dialect)

    def visit(self, s: Any) -> None:
        tir, nodes = self.tir, self.nodes
        if s is None:
            return
        if isinstance(s, tir.SeqStmt):
            for x in s.seq:
                self.visit(x)
        elif nodes.block_realize is not None and isinstance(s, nodes.block_realize):
            self.visit(s.block)
        elif nodes.block is not None and isinstance(s, nodes.block):
            vf = s.annotations.get("tl.vf_source_index") if hasattr(s, "annotations") else None
            if vf is not None:  # a T.SimtVF / T.SimdVF region: becomes `<kernel>_simt_vf_<i>` in C
                self.vf_stack.append(int(vf))
            for b in s.alloc_buffers:
                self._alloc(b)
            self.visit(getattr(s, "init", None))
            self.visit(s.body)
            if vf is not None:
                self.vf_stack.pop()
        elif nodes.alloc_flat is not None and isinstance(s, nodes.alloc_flat):
            self._alloc(s.buffer)
        elif nodes.allocate is not None and isinstance(s, nodes.allocate):
            self.visit(s.body)
        elif isinstance(s, tir.For):
            self._loop(s)
        elif isinstance(s, tir.AttrStmt):
            if s.attr_key == "thread_extent" and hasattr(s.node, "thread_tag"):
                self.launch.setdefault(str(s.node.thread_tag), _int_or_str(s.value))
            self.visit(s.body)
        elif isinstance(s, tir.While):
            self.visit(s.body)
        elif isinstance(s, tir.IfThenElse):
            self.visit(s.then_case)
            self.visit(s.else_case)
        elif isinstance(s, tir.Evaluate) and isinstance(s.value, tir.Call):
            self._call(s.value)
        elif hasattr(s, "body"):  # LetStmt, Assert, Bind-with-body on older stacks
            self.visit(s.body)

    def _alloc(self, b: Any) -> None:
        self.buffers_by_data[b.data] = b
        shape = _shape(b)
        static = all(isinstance(d, int) for d in shape)
        self.out["allocations"].append(
            {
                "name": b.name,
                "scope": b.scope(),
                "hardware": self.hw(b),
                "shape": shape,
                "dtype": str(b.dtype),
                "bytes": nbytes([int(d) for d in shape], str(b.dtype)) if static else None,
                "vf_index": self.vf_index,
            }
        )

    def _loop(self, s: Any) -> None:
        kind = LOOP_KIND.get(int(s.kind), str(s.kind))
        ann = {str(k): v for k, v in s.annotations.items()}
        stages = ann.get("num_stages")
        rec: dict[str, Any] = {
            "id": f"L{len(self.out['loops'])}",
            "var": s.loop_var.name,
            "kind": kind,
            "extent": self.index.extent(s.extent),
            "num_stages": int(stages) if stages is not None else None,
            "thread": str(s.thread_binding.thread_tag) if s.thread_binding is not None else None,
            "parent": self.stack[-1][1]["id"] if self.stack else None,
            "writes": _written_buffers(s.body, self.tir),
        }
        self.index.add_loop(s.loop_var, rec["id"], s.min, s.extent)
        self.out["loops"].append(rec)
        if kind == "parallel" and not (self.stack and self.stack[-1][1]["kind"] == "parallel"):
            self._elementwise(s, rec)
        self.stack.append((s, rec))
        self.visit(s.body)
        self.stack.pop()

    def _elementwise(self, s: Any, rec: dict[str, Any]) -> None:
        tir = self.tir
        extents: list[int | str] = [rec["extent"]]
        inner = s.body
        while isinstance(inner, tir.For) and LOOP_KIND.get(int(inner.kind)) == "parallel":
            extents.append(_int_or_str(inner.extent))
            inner = inner.body
        written: set[str] = set()
        read: set[str] = set()
        calls: set[str] = set()
        accumulated: set[str] = set()

        def grab(n: Any) -> None:
            if isinstance(n, tir.BufferStore):
                written.add(n.buffer.name)
                if _adds_to_itself(n, tir):
                    accumulated.add(n.buffer.name)
            elif isinstance(n, tir.BufferLoad):
                read.add(n.buffer.name)
            elif isinstance(n, tir.Call) and hasattr(n.op, "name"):
                calls.add(str(n.op.name))

        tir.stmt_functor.post_order_visit(s.body, grab)
        self.out["elementwise"].append(
            {
                "loop": rec["id"],
                "vars": [rec["var"]],
                "extents": extents,
                "writes": sorted(written),
                "reads": sorted(read - written) + sorted(read & written),
                "intrinsics": sorted(calls),
                "accumulates": sorted(accumulated),
                "vf_index": self.vf_index,
                "enclosing_loops": self._enclosing(),
                "seq": self.next_seq(),
            }
        )

    def _enclosing(self) -> list[str]:
        return [rec["id"] for _, rec in self.stack]

    def _call(self, call: Any) -> None:
        name = str(getattr(call.op, "name", ""))
        if name == "tl.ascend_gemm_v0" and call.args and isinstance(call.args[0], self.tir.StringImm):
            self._gemm_v0(call)
        elif name in _GEMM_OPS:
            self._gemm(call)
        elif name in _COPY_OPS:
            self._copy(call, name)
        elif name == "tl.tileop.reduce":
            src, dst = (_region(a, self.tir) for a in call.args[:2])
            self.out["reduces"].append(
                {
                    "src": src[0].name if src else None,
                    "dst": dst[0].name if dst else None,
                    "kind": str(call.args[2]) if len(call.args) > 2 else None,
                    "vf_index": self.vf_index,
                    "enclosing_loops": self._enclosing(),
                    "seq": self.next_seq(),
                }
            )
        elif name == "tl.tileop.fill":
            dst = _region(call.args[0], self.tir)
            self.out["fills"].append(
                {
                    "dst": dst[0].name if dst else None,
                    "enclosing_loops": self._enclosing(),
                    "seq": self.next_seq(),
                }
            )

    def _copy(self, call: Any, op: str) -> None:
        src, dst = (_region(a, self.tir) for a in call.args[:2])
        if src is None or dst is None:
            return
        sh, dh = self.hw(src[0]), self.hw(dst[0])
        extents = src[2] if src[2] else dst[2]
        static = all(isinstance(e, int) for e in extents)
        src_region, dst_region = (self.index.region(a) for a in call.args[:2])
        self.out["copies"].append(
            {
                "op": "dual_copy" if "dual" in op else "copy",
                "src": src[0].name,
                "dst": dst[0].name,
                "src_level": sh,
                "dst_level": dh,
                "pipe": PIPE_OF_DIRECTION.get((sh, dh)),
                "extents": extents,
                "dtype": str(src[0].dtype),
                "bytes": nbytes([int(e) for e in extents], str(src[0].dtype)) if static else None,
                "vf_index": self.vf_index,
                "enclosing_loops": self._enclosing(),
                "seq": self.next_seq(),
                "src_region": src_region,
                "dst_region": dst_region,
            }
        )

    def _gemm(self, call: Any) -> None:
        tir = self.tir
        a, b, c = (_region(x, tir) for x in call.args[:3])
        if a is None or b is None or c is None:
            return
        trans_a, trans_b = bool(call.args[3]), bool(call.args[4])
        m, n, k = (_int_or_str(x) for x in call.args[5:8])
        clear = call.args[9] if len(call.args) > 9 else None
        self._gemm_record(a[0], b[0], c[0], trans_a, trans_b, m, n, k, clear)

    def _gemm_v0(self, call: Any) -> None:
        """tilelang-ascend's `T.gemm_v0(A, B, C, transpose_A, transpose_B, init)` reaches the IR as
        `T.ascend_gemm_v0("gemm_v0<half, float, 128, 256, 64, false, false>", access_ptr(A.data),
        access_ptr(B.data), access_ptr(C.data), init)`: the shape and transposes are the template's."""
        m = _GEMM_V0_RE.match(str(call.args[0].value))
        bufs = [self._buffer_of_ptr(x) for x in call.args[1:4]]
        if m is None or any(b is None for b in bufs):
            return
        init = call.args[4] if len(call.args) > 4 else None
        self._gemm_record(
            bufs[0],
            bufs[1],
            bufs[2],
            m["ta"] == "true",
            m["tb"] == "true",
            int(m["m"]),
            int(m["n"]),
            int(m["k"]),
            init,
        )

    def _buffer_of_ptr(self, arg: Any) -> Any:
        """The allocated buffer a `T.tvm_access_ptr(type, buf.data, offset, extent, rw)` points into."""
        if isinstance(arg, self.tir.Call) and str(getattr(arg.op, "name", "")) == "tir.tvm_access_ptr":
            return self.buffers_by_data.get(arg.args[1])
        return None

    def _gemm_record(
        self,
        a_buf: Any,
        b_buf: Any,
        c_buf: Any,
        trans_a: bool,
        trans_b: bool,
        m: Any,
        n: Any,
        k: Any,
        clear: Any,
    ) -> None:
        clear_text = str(clear) if clear is not None else "False"
        serial = [(node, rec) for node, rec in self.stack if rec["kind"] == "serial"]
        k_loop = serial[-1] if serial else None
        # The accumulator is carried across the innermost serial loop unless it is cleared on every
        # iteration (`clear_accum=True`); `clear_accum=(kk == 0)` or a T.clear before the loop both
        # carry it, so the reduction length is K x trip count (tilelang-notes §4.1). A condition
        # naming outer loops too (`kt == 0 and sk == 0`: L1 K tiles, then L0 sub-K steps) carries it
        # across each loop it names.
        always_cleared = clear_text in ("T.bool(True)", "True", "1")
        named = [rec for _, rec in serial if re.search(rf"\b{re.escape(rec['var'])}\b", clear_text)]
        carried = named if named else ([k_loop[1]] if k_loop is not None else [])
        trips: Any = 1
        for rec in [] if always_cleared else carried:
            known = isinstance(trips, int) and isinstance(rec["extent"], int)
            trips = trips * rec["extent"] if known else None
        total_k = k * trips if isinstance(k, int) and isinstance(trips, int) else None
        self.out["gemms"].append(
            {
                "a": a_buf.name,
                "b": b_buf.name,
                "c": c_buf.name,
                "a_level": self.hw(a_buf),
                "b_level": self.hw(b_buf),
                "c_level": self.hw(c_buf),
                "in_dtype": str(a_buf.dtype),
                "accum_dtype": str(c_buf.dtype),
                "m": m,
                "n": n,
                "k": k,
                "transpose_a": trans_a,
                "transpose_b": trans_b,
                "clear_accum": clear_text,
                "k_loop": k_loop[1]["id"] if k_loop else None,
                "k_loop_extent": k_loop[1]["extent"] if k_loop else None,
                "num_stages": k_loop[1]["num_stages"] if k_loop else None,
                "accumulates_over_loop": not always_cleared and k_loop is not None,
                # the serial loops whose trips the accumulator is carried across, innermost last
                # (TS507 looks among them for the one that loads the operand tiles)
                "carried_loops": [] if always_cleared else [rec["id"] for rec in carried],
                "total_k": total_k,
                "enclosing_loops": self._enclosing(),
                "seq": self.next_seq(),
            }
        )


def _adds_to_itself(store: Any, tir: ModuleType) -> bool:
    """`x[i] = x[i] * a + b` (or `x[i] - ...`): the stored value reads the same buffer and adds or
    subtracts — a running sum, whose rounding compounds; `x[i] = max(x[i], y)` is exact and is not."""
    loads_itself = False
    adds = False

    def grab(n: Any) -> None:
        nonlocal loads_itself, adds
        if isinstance(n, tir.BufferLoad) and n.buffer.same_as(store.buffer):
            loads_itself = True
        elif isinstance(n, (tir.Add, tir.Sub)):
            adds = True

    tir.stmt_functor.post_order_visit(store.value, grab)
    return loads_itself and adds


def _written_buffers(body: Any, tir: ModuleType) -> list[str]:
    """Buffers an op inside `body` may write: element stores, tile-op regions with the write bit
    (copy destinations, GEMM accumulators, fills, reduce outputs) and SIMD access pointers opened
    for writing (`T.access_ptr(buf[...], n, 2)` handed to `vsts`)."""
    names: set[str] = set()

    def grab(n: Any) -> None:
        if isinstance(n, tir.BufferStore):
            names.add(n.buffer.name)
        elif isinstance(n, tir.Call) and len(n.args) >= 2:
            op = getattr(n.op, "name", "")
            target = n.args[0]
            if op in ("tl.region", "tl.tileop.region"):
                mask = n.args[1]
            elif op == "tl.access_ptr" and len(n.args) >= 3:
                mask = n.args[2]
            else:
                return
            if isinstance(target, tir.BufferLoad) and isinstance(mask, tir.IntImm) and int(mask) & 2:
                names.add(target.buffer.name)

    tir.stmt_functor.post_order_visit(body, grab)
    return sorted(names)


def gm_tensors(func: Any) -> list[dict[str, Any]]:
    """The kernel's GM tensor parameters (name, shape, dtype) in signature order."""
    out = []
    for p in func.params:
        buf = func.buffer_map.get(p)
        if buf is None:
            continue
        shape = _shape(buf)
        static = all(isinstance(d, int) for d in shape)
        out.append(
            {
                "name": buf.name,
                "shape": shape,
                "dtype": str(buf.dtype),
                "bytes": nbytes([int(d) for d in shape], str(buf.dtype)) if static else None,
            }
        )
    return out


def walk_primfunc(func: Any, dialect: str | None = None) -> dict[str, Any]:
    """Everything tilescope reads from one un-lowered PrimFunc (plain JSON-able dicts)."""
    _, module_name = tvm_ir_module()
    dialect = dialect or detect_dialect(func, module_name)
    w = _Walker(func, dialect)
    w.visit(func.body)
    out: dict[str, Any] = dict(w.out)
    out["dialect"] = dialect
    out["tvm_module"] = module_name
    out["gm_tensors"] = gm_tensors(func)
    grid = [
        lp["extent"]
        for lp in out["loops"]
        if lp["kind"] == "thread_binding" and str(lp["thread"]).startswith("blockIdx")
    ]
    if not grid and "blockIdx.x" in w.launch:
        # tilelang-ascend's `T.Kernel(n, is_npu=True) as (cid, vid)`: blockIdx.x is the grid of AI
        # cores, blockIdx.y the vector sub-core index (2 AIV per AIC on A2/A3), not more blocks
        grid = [w.launch["blockIdx.x"]]
        out["sub_blocks"] = w.launch.get("blockIdx.y")
    out["grid"] = grid
    out["explicit_versions"] = explicit_versions(func)
    return out


def lowered_allocations(mod: Any, dialect: str) -> list[dict[str, Any]]:
    """Per-buffer allocations of the lowered device module (merged `buf_dyn_*` arrays included)."""
    nodes = _nodes()
    out: list[dict[str, Any]] = []
    for _, fn in mod.functions.items():
        if not hasattr(fn, "body"):
            continue

        def grab(n: Any) -> None:
            buf = None
            if nodes.alloc_flat is not None and isinstance(n, nodes.alloc_flat):
                buf = n.buffer
            if buf is None:
                return
            shape = _shape(buf)
            if not all(isinstance(d, int) for d in shape):
                return
            out.append(
                {
                    "name": buf.name,
                    "scope": buf.scope(),
                    "hardware": hardware_for(buf.scope(), dialect),
                    "bytes": nbytes([int(d) for d in shape], str(buf.dtype)),
                }
            )

        nodes.tir.stmt_functor.post_order_visit(fn.body, grab)
    return out


def _versions_map(body: Any, versions: dict[str, int]) -> None:
    """Add every `tl.buffer_versions_map` block annotation under `body` to `versions` (by name)."""
    nodes = _nodes()

    def grab(n: Any) -> None:
        annotated = nodes.block is not None and isinstance(n, nodes.block)
        if annotated and "tl.buffer_versions_map" in n.annotations:
            for var, count in n.annotations["tl.buffer_versions_map"].items():
                versions[str(getattr(var, "name", var))] = int(count)

    nodes.tir.stmt_functor.post_order_visit(body, grab)


def buffer_versions(mod: Any) -> dict[str, int]:
    """`tl.buffer_versions_map` after tl.AutoSchedule: buffer name -> versions the scheduler chose."""
    versions: dict[str, int] = {}
    for _, fn in mod.functions.items():
        if hasattr(fn, "body"):
            _versions_map(fn.body, versions)
    return versions


def explicit_versions(func: Any) -> dict[str, int]:
    """The versions the author fixed with `T.annotate_buffer_versions({buf: n})` (the same
    annotation, read before tl.AutoSchedule replaces it with its own choice): the author's intent."""
    versions: dict[str, int] = {}
    _versions_map(func.body, versions)
    return versions
