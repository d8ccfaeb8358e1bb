"""TS505 intermediate-through-global-memory: a tile stored to GM and read back by the same/next kernel."""

from __future__ import annotations

from typing import Any

from tilescope.engine import RuleContext
from tilescope.findings import Finding, Severity
from tilescope.ir.rulekit import locations, lowered_kernels
from tilescope.profile import Profile
from tilescope.rules._findings import make_finding

CODE = "TS505"
SLUG = "intermediate-through-global-memory"
NEEDS = ("ir",)
KIND = "static"
THRESHOLDS: dict[str, Any] = {"min_bytes": 65536}


def _gm(k: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((t for t in k.get("gm_tensors", []) if t["name"] == name), None)


def check(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """
    ## What it does
    Finds GM tensors that one kernel writes and the same kernel, or a later kernel of the captured
    chain (`lint file.py:f1,f2,f3` or a builder returning several PrimFuncs), reads back — matched
    by tensor name, shape and dtype.

    ## Why is this bad?
    The intermediate (attention scores, softmax probabilities) makes a round trip through HBM:
    written by MTE3/FixPipe, read again by MTE2, plus a kernel launch in between. A fused kernel keeps
    it in L0C/UB/L1 (flash attention).

    ## Example
    `qk_scores` writes S[seq_q, seq_kv]; `softmax` reads S and writes P; `pv` reads P.

    ## What to do instead
    Fuse the producer and consumer: keep the tile on chip (L0C → UB via T.dual_copy, UB → L1 for the
    next GEMM), as in sample_traces/kernels/flash_attention.py.

    ## Thresholds
    `min_bytes` (65536): intermediates smaller than this are ignored. Severity: high when the
    round trip moves ≥ 64 MiB, medium otherwise. Static: est. saving 0 µs; the HBM bytes saved are
    in the evidence.

    ## Known limits
    A tilelang-ascend `@tilelang.jit(workspace_idx=...)` workspace is not an intermediate to fuse
    away: on A2/A3 the Cube cores hand L0C results to the Vector cores only through GM, and the
    author declared it for that. Kernels are matched by GM parameter names: a chain whose kernels
    name the tensor differently is not seen (a runtime fusion rule sees it from the profile instead).
    """
    ir = profile.ir or {}
    min_bytes = int(ctx.thresholds.get("min_bytes", 65536))
    kernels = list(lowered_kernels(ir))
    out: list[Finding] = []
    for i, k in enumerate(kernels):
        for name in k.get("gm_writes", []):
            if name in k.get("workspaces", []):
                continue  # a declared cross-core workspace: the A2/A3 Cube -> Vector path, by design
            t = _gm(k, name)
            if t is None or (t.get("bytes") or 0) < min_bytes:
                continue
            readers = []
            if name in k.get("gm_reads", []):
                readers.append(k)
            for later in kernels[i + 1 :]:
                u = _gm(later, name)
                if (
                    u
                    and u["shape"] == t["shape"]
                    and u["dtype"] == t["dtype"]
                    and name in later.get("gm_reads", [])
                ):
                    readers.append(later)
                    break
            if not readers:
                continue
            nbytes = int(t["bytes"])
            moved = 2 * nbytes
            reader = readers[0]
            store = next((c for c in k["copies"] if c["dst"] == name), None)
            load = next((c for c in reader["copies"] if c["src"] == name), None)
            shape = "×".join(map(str, t["shape"]))
            msg = (
                f"{name} [{shape}] {t['dtype']} ({nbytes} B) is written to GM by {k['name']} and read "
                f"back by {reader['name']}: an intermediate through global memory ({moved} B of HBM traffic)"
            )
            sev = Severity.HIGH if moved >= 64 * 1024 * 1024 else Severity.MEDIUM
            out.append(
                make_finding(
                    ctx,
                    code=CODE,
                    slug=SLUG,
                    severity=sev,
                    kernels=[k["name"], reader["name"]],  # one name when k reads its own store back
                    message=msg,
                    evidence={
                        "tensor": name,
                        "shape": t["shape"],
                        "dtype": t["dtype"],
                        "bytes": nbytes,
                        "round_trip_bytes": moved,
                        "producer": k["name"],
                        "consumer": reader["name"],
                        "min_bytes": min_bytes,
                        "chip": ctx.chip.name,
                        "gm_bandwidth_gbps": ctx.chip.hbm_bandwidth_gbps,
                        "gm_bandwidth_source": ctx.chip.hbm_bandwidth_source,
                    },
                    recommendation=(
                        f"fuse {k['name']} and {reader['name']}: keep {name} on chip "
                        "(L0C -> UB with T.dual_copy, UB -> L1 for the next T.gemm)"
                    ),
                    saving_us=0.0,
                    locations=locations(ir, k, store, f"store {name}")
                    + locations(ir, reader, load, f"load {name}"),
                )
            )
    return out
