"""Which TileLang a kernel file is written in, read from its source before anything is imported.

Three dialects share the import name `tilelang` and cannot live in one environment:
- tilelang 0.1.15's built-in Ascend backend (`tilelang.ascend.language`, target 950, `dav-3510`);
- tilelang-ascend 0.1.4, the A2/A3 (910B) stack: `T.Kernel(..., is_npu=True)`, `T.alloc_L1/L0A/L0B/
  L0C/ub`, `T.gemm_v0`, `T.Scope("C")`, `PassConfigKey.TL_ASCEND_*`, `jit(workspace_idx=)`;
- upstream TileLang's CUDA dialect (`threads=`, `alloc_fragment`), which does not lower for Ascend.
The evidence (line and construct) is kept so that every message can say why.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from tilescope.ir.scopes import ASCEND_0115, CUDA, TILELANG_ASCEND

# `T.<attr>` of tilelang-ascend's language that neither other dialect has.
_ASCEND_ATTRS = frozenset(
    {
        "alloc_L1",
        "alloc_L0A",
        "alloc_L0B",
        "alloc_L0C",
        "alloc_ub",
        "gemm_v0",
        "Scope",
        "set_cross_flag",
        "wait_cross_flag",
        "barrier_all",
    }
)
_ASCEND_KEYWORDS = frozenset({"is_npu", "workspace_idx"})
_CUDA_ATTRS = frozenset({"alloc_fragment", "use_swizzle"})
# Newer tilelang moves the 950 allocations into `tilelang.language` (lower case, unlike tilelang-ascend).
_ASCEND_0115_ATTRS = frozenset({"alloc_l1", "alloc_l0a", "alloc_l0b", "alloc_l0c", "dual_copy", "SimtVF"})

DIALECT_NAMES = {
    TILELANG_ASCEND: "tilelang-ascend (A2/A3, 910B)",
    ASCEND_0115: "tilelang 0.1.15's Ascend backend (950)",
    CUDA: "TileLang's CUDA dialect",
}


@dataclass(frozen=True)
class SourceDialect:
    dialect: str | None  # TILELANG_ASCEND, ASCEND_0115, CUDA or None (nothing dialect-specific)
    line: int  # where the deciding construct is (0: nowhere)
    evidence: str  # e.g. "T.Kernel(..., is_npu=True)"

    @property
    def name(self) -> str:
        return DIALECT_NAMES.get(self.dialect or "", "no dialect-specific construct")

    def describe(self) -> str:
        where = f" (line {self.line}: {self.evidence})" if self.line else ""
        return f"{self.name}{where}"


def detect(tree: ast.Module) -> SourceDialect:
    """The dialect a kernel file is written in; tilelang-ascend wins over the others because its
    files also import `tilelang.language`, the CUDA dialect's module."""
    ascend_0115: tuple[int, str] | None = None
    ascend: tuple[int, str] | None = None
    cuda: tuple[int, str] | None = None
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                if a.name.startswith("tilelang.ascend") and ascend_0115 is None:
                    ascend_0115 = (n.lineno, f"import {a.name}")
        elif isinstance(n, ast.ImportFrom):
            mod = n.module or ""
            if (
                mod.startswith("tilelang.ascend")
                or (mod == "tilelang" and any(a.name == "ascend" for a in n.names))
            ) and ascend_0115 is None:
                ascend_0115 = (n.lineno, f"from {mod} import …")
        elif isinstance(n, ast.keyword) and n.arg in _ASCEND_KEYWORDS and ascend is None:
            ascend = (getattr(n, "lineno", 0) or getattr(n.value, "lineno", 0), f"{n.arg}=…")
        elif isinstance(n, ast.Attribute):
            if n.attr in _ASCEND_ATTRS and ascend is None:
                ascend = (n.lineno, f"T.{n.attr}")
            elif n.attr.startswith("TL_ASCEND_") and ascend is None:
                ascend = (n.lineno, f"PassConfigKey.{n.attr}")
            elif n.attr in _ASCEND_0115_ATTRS and ascend_0115 is None:
                ascend_0115 = (n.lineno, f"T.{n.attr}")
            elif n.attr in _CUDA_ATTRS and cuda is None:
                cuda = (n.lineno, f"T.{n.attr}")
        elif (
            isinstance(n, ast.Call)
            and cuda is None
            and any(k.arg == "threads" for k in n.keywords)
            and ast.unparse(n.func).endswith("Kernel")
        ):
            cuda = (n.lineno, "T.Kernel(..., threads=…)")
    for dialect, found in ((TILELANG_ASCEND, ascend), (ASCEND_0115, ascend_0115), (CUDA, cuda)):
        if found is not None:
            return SourceDialect(dialect, found[0], found[1])
    # plain `tilelang.language` with nothing dialect-specific (a 1-D grid, T.serial): the installed
    # tilelang decides, as importing it would
    return SourceDialect(None, 0, "")
