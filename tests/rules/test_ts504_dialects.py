"""TS504 judges the buffer versions a lowering reports; tilelang-ascend's reports none, so on that
dialect it stays quiet instead of reading every buffer as one version (both real pipelined
flash-attention kernels of tilelang-ascend got a false "num_stages=2 requested but k_l1=1 ...
version(s) chosen" before). The record is the bundled FA sample's real lowering (tilelang 0.1.15,
whose scheduler gave every buffer one version), as ir.json holds it."""

from __future__ import annotations

import copy

from tilescope.engine import run_rules
from tilescope.io.load import load_profile
from tilescope.ir.scopes import TILELANG_ASCEND
from tilescope.profile import Profile

from support import SAMPLES


def _ts504(prof: Profile, ir: dict) -> list[str]:
    prof.ir = ir
    res = run_rules(prof, kinds=("static",))
    return [f.message for f in res.findings if f.code == "TS504"]


def test_ts504_reads_versions_where_the_lowering_reports_them_and_not_where_it_reports_none() -> None:
    prof = load_profile(SAMPLES / "tilelang_fa_bundle")
    ir = prof.ir
    assert ir is not None
    fired = _ts504(prof, copy.deepcopy(ir))
    assert fired and all("num_stages=2 requested" in m for m in fired)

    ascend = copy.deepcopy(ir)
    for k in ascend["kernels"]:
        assert k["lowered_allocations"]  # the lowering ran: only the versions are missing
        k["dialect"] = TILELANG_ASCEND
        k["versions"] = {}
    assert _ts504(prof, ascend) == []
