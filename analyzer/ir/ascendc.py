"""What tilelang-ascend's memory planning placed on chip, read from the Ascend C it generates
(`ascendc_placements`): ir.json's `lowered_allocations` for that stack. The worker prefers it to the
lowered module's allocations (`tilescope.ir.walk.lowered_allocations`), which overstate what
buffers with disjoint lifetimes take when they share offsets.

Standard library only: the tilelang-ascend worker imports this module inside its own interpreter.
"""

from __future__ import annotations

import re
from typing import Any

# tilelang-ascend's Ascend C: `AscendC::TBuf<AscendC::TPosition::CO1> ascend_l0c;` then, after its
# memory planning, `auto acc_o_l0c = ascend_l0c.GetWithOffset<float>(32768, 0);` (count in
# elements, offset in bytes). Buffers whose lifetimes do not overlap share offsets.
_TBUF_RE = re.compile(r"TBuf<\s*(?:AscendC::)?TPosition::(?P<pos>\w+)\s*>\s+(?P<tbuf>\w+)\s*;")
_PLACED_RE = re.compile(
    r"auto\s+(?P<name>\w+)\s*=\s*(?P<tbuf>\w+)\.GetWithOffset<\s*(?P<type>[\w:]+)\s*>\(\s*(?P<count>\d+)\s*,"
    r"\s*(?P<offset>\d+)\s*\)"
)
_POSITION_HARDWARE = {
    "A1": "L1",
    "B1": "L1",
    "A2": "L0A",
    "B2": "L0B",
    "CO1": "L0C",
    "VECCALC": "UB",
    "VECIN": "UB",
    "VECOUT": "UB",
}
_C_TYPE_BYTES = {
    "half": 2,
    "bfloat16_t": 2,
    "float": 4,
    "int32_t": 4,
    "uint32_t": 4,
    "int16_t": 2,
    "uint16_t": 2,
    "int8_t": 1,
    "uint8_t": 1,
    "int64_t": 8,
    "uint64_t": 8,
    "bool": 1,
}


def ascendc_placements(source: str) -> list[dict[str, Any]]:
    """What tilelang-ascend's memory planning placed, read from its Ascend C: one record per on-chip
    buffer position (like 0.1.15's merged `buf_dyn_*` arrays) whose `bytes` is the highest end of
    any buffer placed in it, with the buffers and their offsets; `[]` for other Ascend C."""
    positions = {m["tbuf"]: m["pos"] for m in _TBUF_RE.finditer(source)}
    merged: dict[str, dict[str, Any]] = {}
    for m in _PLACED_RE.finditer(source):
        hw = _POSITION_HARDWARE.get(positions.get(m["tbuf"], ""))
        size = _C_TYPE_BYTES.get(m["type"].split("::")[-1])
        if hw is None or size is None:
            continue
        nbytes_ = int(m["count"]) * size
        rec = merged.setdefault(
            m["tbuf"],
            {"name": m["tbuf"], "scope": positions[m["tbuf"]], "hardware": hw, "bytes": 0, "placed": []},
        )
        rec["placed"].append({"name": m["name"], "offset": int(m["offset"]), "bytes": nbytes_})
        rec["bytes"] = max(rec["bytes"], int(m["offset"]) + nbytes_)
    return list(merged.values())
