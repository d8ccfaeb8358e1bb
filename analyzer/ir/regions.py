"""Where a tile op's regions start: each start index as an affine form of the enclosing loop indices.

The walker (analyzer/ir/walk.py) hands every `tl.region` operand of a copy to `IndexModel.region`.
Scalar bindings (`m = tile // n_tiles * block_M` becomes a TIR `Bind`/`LetStmt`) are inlined, the
result is simplified with the loop ranges known (TVM's arith analyzer), and
`detect_linear_equation` splits it into `base + sum(coeff * i)` over loop indices `i` counted from 0.
The rules read the result from ir.json without TVM: which loops a copy's position depends on (a
loop-invariant copy depends on none of its loop) and which rows of a GM tensor the grid and loops
reach (a grid that does not cover the problem).

TVM is imported lazily (through the walker's node map); nothing here runs without TileLang.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

_REGION_OPS = ("tl.region", "tl.tileop.region")


@dataclass
class _Loop:
    var: Any  # tir.Var
    loop_id: str
    minimum: Any  # PrimExpr
    extent: Any  # PrimExpr


@dataclass
class IndexModel:
    """Scalar bindings and loop ranges of one PrimFunc, for reading region start indices."""

    tir: ModuleType
    binds: list[tuple[Any, Any]] = field(default_factory=list)  # (Var, value), in program order
    loops: list[_Loop] = field(default_factory=list)  # every loop met so far by the walker

    @classmethod
    def of(cls, func: Any, tir: ModuleType) -> IndexModel:
        model = cls(tir)

        # tvm.tirx has a flat Bind; the older tvm.tir of tilelang-ascend a LetStmt with a body.
        kinds = tuple(k for k in (getattr(tir, "Bind", None), getattr(tir, "LetStmt", None)) if k)

        def grab(n: Any) -> bool:
            if isinstance(n, kinds):
                model.binds.append((n.var, n.value))
            return True

        tir.stmt_functor.pre_order_visit(func.body, grab)
        return model

    def add_loop(self, var: Any, loop_id: str, minimum: Any, extent: Any) -> None:
        self.loops.append(_Loop(var, loop_id, minimum, extent))

    def _loop_of(self, var: Any) -> _Loop | None:
        # The innermost loop with that variable: TIR loop variables are distinct objects, but a
        # re-used Python name (`for i ...` twice) must not be matched by name.
        return next((lp for lp in reversed(self.loops) if lp.var.same_as(var)), None)

    def _inline(self, expr: Any) -> Any:
        if not self.binds:
            return expr
        vmap = dict(self.binds)
        for _ in range(16):  # bindings of bindings (tile -> m -> start), never cyclic
            nxt = self.tir.stmt_functor.substitute(expr, vmap)
            if nxt.same_as(expr):
                break
            expr = nxt
        return expr

    def extent(self, expr: Any) -> int | str:
        """A loop extent with the scalar bindings inlined and simplified: an int when it is constant
        (tilelang-ascend's published GEMMs bind `loop_k = T.ceildiv(K, block_K)` and loop over
        `T.serial(loop_k)`, which TIR keeps as a variable), else its text as written."""
        # deferred: tilelang/tvm are the optional `tilelang` extra (and seconds to import)
        import tvm  # imported after tilelang by the walker's caller

        try:
            value = _int(tvm.arith.Analyzer().simplify(self._inline(expr)))
        except Exception:  # TVM's arithmetic raising on an expression is no reason to fail the lint
            value = None
        return value if isinstance(value, int) else _int(expr)

    def region(self, arg: Any) -> dict[str, Any] | None:
        """Per dimension of a `tl.region(BufferLoad, mask, *extents)`: start (text), extent, and
        `base` + `terms` [[loop id, coefficient, trip count], ...] when the start is affine in loop
        indices (None otherwise); plus the loops it depends on and whether anything else (a value
        loaded from a buffer, a variable that is no loop index) decides it."""
        tir = self.tir
        if not isinstance(arg, tir.Call) or getattr(arg.op, "name", "") not in _REGION_OPS:
            return None
        load = arg.args[0]
        extents = list(arg.args[2:])
        if not isinstance(load, tir.BufferLoad) or len(extents) != len(load.indices):
            return None
        dims: list[dict[str, Any]] = []
        depends: set[str] = set()
        opaque = False
        try:
            for index, extent in zip(load.indices, extents, strict=True):
                dim, loops, dim_opaque = self._dim(index, extent)
                dims.append(dim)
                depends |= loops
                opaque = opaque or dim_opaque
        except Exception:  # TVM's arithmetic raising on an index form is no reason to fail the lint
            return None  # the region is unknown: every rule that reads it skips this copy
        return {"dims": dims, "loops": sorted(depends, key=_loop_order), "opaque": opaque}

    def _dim(self, index: Any, extent: Any) -> tuple[dict[str, Any], set[str], bool]:
        # deferred: tilelang/tvm are the optional `tilelang` extra (and seconds to import)
        import tvm  # imported after tilelang by the walker's caller

        tir = self.tir
        expr = self._inline(index)
        found: list[Any] = []
        has_load = False

        def grab(n: Any) -> None:
            nonlocal has_load
            if isinstance(n, tir.Var):
                found.append(n)
            elif isinstance(n, tir.BufferLoad):
                has_load = True

        tir.stmt_functor.post_order_visit(expr, grab)
        variables: list[Any] = []
        for v in found:
            if not any(v.same_as(x) for x in variables):
                variables.append(v)
        loops = [self._loop_of(v) for v in variables]
        ana = tvm.arith.Analyzer()
        for lp in loops:
            if lp is not None:
                ana.bind(lp.var, tvm.ir.Range.from_min_extent(lp.minimum, lp.extent))
        simple = ana.simplify(expr)
        # What is left after simplification (a loop of one trip folds away).
        left: list[Any] = []
        tir.stmt_functor.post_order_visit(
            simple, lambda n: left.append(n) if isinstance(n, tir.Var) else None
        )
        kept = [lp for lp in loops if lp is not None and any(lp.var.same_as(v) for v in left)]
        opaque = has_load or any(self._loop_of(v) is None for v in left)
        dim: dict[str, Any] = {"start": str(simple), "extent": _int(extent), "base": None, "terms": None}
        if not opaque:
            dim["base"], dim["terms"] = self._affine(simple, kept)
        return dim, {lp.loop_id for lp in kept}, opaque

    def _affine(self, expr: Any, loops: list[_Loop]) -> tuple[int | None, list[list[Any]] | None]:
        # deferred: tilelang/tvm are the optional `tilelang` extra (and seconds to import)
        import tvm

        coeffs = list(tvm.arith.detect_linear_equation(expr, [lp.var for lp in loops]))
        if len(coeffs) != len(loops) + 1 or not all(isinstance(_int(c), int) for c in coeffs):
            return None, None
        base = int(coeffs[-1])
        terms: list[list[Any]] = []
        for lp, c in zip(loops, coeffs[:-1], strict=False):
            lo, n = _int(lp.minimum), _int(lp.extent)
            if not isinstance(lo, int) or not isinstance(n, int):
                return None, None
            base += int(c) * lo  # count trips from 0
            if int(c) != 0:
                terms.append([lp.loop_id, int(c), n])
        return base, terms


def _int(x: Any) -> int | str:
    try:
        return int(x)
    except (TypeError, ValueError):
        return str(x)


def _loop_order(loop_id: str) -> int:
    return int(loop_id.lstrip("L") or 0)


def covered_interval(dim: dict[str, Any]) -> tuple[int, int] | None:
    """[first, end) of the indices one region dimension reaches over all its loop trips, when the
    trips tile it without gaps (each coefficient at most the span below it); None otherwise."""
    base, terms, extent = dim.get("base"), dim.get("terms"), dim.get("extent")
    if base is None or terms is None or not isinstance(extent, int):
        return None
    lo = int(base)
    span = extent
    for _, coeff, trips in sorted(terms, key=lambda t: abs(t[1])):
        if coeff < 0:  # walking backwards: the same set, starting lower
            lo += coeff * (trips - 1)
            coeff = -coeff
        if coeff > span:
            return None  # a gap between consecutive trips
        span += coeff * (trips - 1)
    return lo, lo + span
