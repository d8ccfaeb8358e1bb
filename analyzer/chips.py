"""Built-in chip table (from shared docs/chips.md) and chip selection.

Every figure is a default that the user can override with `--chip` or a TOML file. Figures with no
authoritative source are listed in `ChipSpec.assumptions` so that every verdict depending on them can
say so (e.g. HBM bandwidth: no vendor figure exists for any 910B variant).
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analyzer.errors import UsageError

KIB = 1024
MIB = 1024 * 1024


@dataclass(frozen=True)
class ChipSpec:
    name: str
    family: str  # "910B", "A3", "950", "310P"
    split: bool  # separate AIC/AIV cores (A2/A3/950) vs coupled (310P)
    aic_count: int | None
    aiv_count: int | None
    clock_mhz: float | None
    l0a_bytes: int
    l0b_bytes: int
    l0c_bytes: int
    l1_bytes: int
    ub_bytes: int
    l2_bytes: int | None
    hbm_bytes: int | None
    hbm_bandwidth_gbps: float | None
    l2_bandwidth_gbps: float | None = None
    vector_flop_per_cycle_per_aiv: int = 256  # fp16 lanes x2; assumption, see assumptions
    flop_per_cycle_per_aic: dict[str, int] = field(
        default_factory=lambda: {"float16": 8192, "bfloat16": 8192, "float32": 4096, "int8": 16384}
    )
    assumptions: tuple[str, ...] = ()

    def peak_flops(self, dtype: str = "float16") -> float | None:
        """Peak Cube FLOP/s: cores x clock x FLOP/cycle/core (formats doc §10.4)."""
        if self.aic_count is None or self.clock_mhz is None:
            return None
        per_cycle = self.flop_per_cycle_per_aic.get(dtype, self.flop_per_cycle_per_aic["float16"])
        return self.aic_count * self.clock_mhz * 1e6 * per_cycle

    def peak_vector_flops(self) -> float | None:
        if self.aiv_count is None or self.clock_mhz is None:
            return None
        return self.aiv_count * self.clock_mhz * 1e6 * self.vector_flop_per_cycle_per_aiv

    def ridge_point(self, dtype: str = "float16") -> float | None:
        """Arithmetic intensity (FLOP/byte) where the roofline's two limits meet."""
        peak = self.peak_flops(dtype)
        if peak is None or not self.hbm_bandwidth_gbps:
            return None
        return peak / (self.hbm_bandwidth_gbps * 1e9)

    def capacity(self, buffer: str) -> int:
        """Capacity in bytes of 'UB', 'L1', 'L0A', 'L0B' or 'L0C'."""
        return {
            "UB": self.ub_bytes,
            "L1": self.l1_bytes,
            "L0A": self.l0a_bytes,
            "L0B": self.l0b_bytes,
            "L0C": self.l0c_bytes,
        }[buffer.upper()]

    def with_overrides(self, **values: Any) -> ChipSpec:
        known = {f.name for f in dataclasses.fields(self)}
        unknown = set(values) - known
        if unknown:
            raise UsageError(f"unknown chip field(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **values)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["assumptions"] = list(self.assumptions)
        d["peak_fp16_tflops"] = (self.peak_flops() or 0) / 1e12 or None
        return d


_HBM_ASSUMED = (
    "hbm_bandwidth_gbps=1600 is an assumption: no vendor figure exists (third-party pages give "
    "0.77-1.6 TB/s); set your own in a chip TOML (base = \"910B2\", hbm_bandwidth_gbps = ...) "
    "passed as --chip FILE.toml"
)

_A2_BUFFERS: dict[str, Any] = dict(
    l0a_bytes=64 * KIB,
    l0b_bytes=64 * KIB,
    l0c_bytes=128 * KIB,
    l1_bytes=512 * KIB,
    ub_bytes=192 * KIB,
    l2_bytes=192 * MIB,
)


def _a2(name: str, aic: int | None, aiv: int | None, clock: float | None, hbm_gb: int | None,
        extra: tuple[str, ...] = ()) -> ChipSpec:
    return ChipSpec(
        name=name,
        family="910B",
        split=True,
        aic_count=aic,
        aiv_count=aiv,
        clock_mhz=clock,
        hbm_bytes=hbm_gb * 1024**3 if hbm_gb else None,
        hbm_bandwidth_gbps=1600.0,
        assumptions=(_HBM_ASSUMED, *extra),
        **_A2_BUFFERS,
    )


CHIPS: dict[str, ChipSpec] = {
    "910B1": _a2("910B1", 24, 48, 1800, 64, ("910B1 core count and clock assumed equal to 910B2",)),
    "910B2": _a2("910B2", 24, 48, 1800, 64),
    "910B3": _a2(
        "910B3", 20, 40, 1800, 64, ("910B3 clock 1800 MHz from a 20-core trace, model not recorded",)
    ),
    "910B4": _a2("910B4", 20, 40, 1800, 32, ("910B4 figures are third-party (HAMi) only",)),
    "A3": dataclasses.replace(
        _a2("A3", 20, 40, 1800, 64, ("A3 core count is third-party (HAMi) only; verify on hardware",)),
        family="A3",
    ),
    "950": ChipSpec(
        name="950",
        family="950",
        split=True,
        aic_count=None,
        aiv_count=None,
        clock_mhz=None,
        l0a_bytes=64 * KIB,
        l0b_bytes=64 * KIB,
        l0c_bytes=256 * KIB,
        l1_bytes=512 * KIB,
        ub_bytes=248 * KIB,
        l2_bytes=None,
        hbm_bytes=None,
        hbm_bandwidth_gbps=None,
        assumptions=(
            "950 core count, clock and bandwidth are unknown: configure them",
            "950 UB 248 KiB (catlass Ascend950); tilelang 0.1.15 itself checks 221184 B",
        ),
    ),
    "310P": ChipSpec(
        name="310P",
        family="310P",
        split=False,
        aic_count=8,
        aiv_count=None,
        clock_mhz=None,
        l0a_bytes=64 * KIB,
        l0b_bytes=64 * KIB,
        l0c_bytes=256 * KIB,
        l1_bytes=512 * KIB,
        ub_bytes=256 * KIB,
        l2_bytes=8 * MIB,
        hbm_bytes=24 * 1024**3,
        hbm_bandwidth_gbps=None,
        assumptions=("310P buffer sizes from tilelang-ascend CHIP_SPECS, unverified",),
    ),
}

ALIASES = {
    "ascend910b1": "910B1", "ascend910b2": "910B2", "ascend910b3": "910B3", "ascend910b4": "910B4",
    "ascend910b4-1": "910B4", "910c": "A3", "910_93": "A3", "ascend910_93": "A3", "a3": "A3",
    "ascend950": "950", "910_95": "950", "ascend310p3": "310P", "310p3": "310P", "310p": "310P",
}


def get_chip(name: str) -> ChipSpec:
    key = name.strip()
    if key in CHIPS:
        return CHIPS[key]
    alias = ALIASES.get(key.lower()) or next((k for k in CHIPS if k.lower() == key.lower()), None)
    if alias is None:
        raise UsageError(f"unknown chip {name!r}; known: {', '.join(CHIPS)} (or a TOML file)")
    return CHIPS[alias]


def load_chip_toml(path: str | Path) -> ChipSpec:
    """A user chip file: `base = "910B2"` plus any ChipSpec field to override."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{p}: cannot read chip file ({exc})") from exc
    data = dict(data.get("chip", data))
    base = get_chip(str(data.pop("base", "910B2")))
    name = str(data.pop("name", f"{base.name} (custom)"))
    return base.with_overrides(name=name, **data)


def resolve_chip(
    requested: str | None,
    ai_core_num: int | None = None,
    aiv_num: int | None = None,
    freq_mhz: float | None = None,
    model_name: str | None = None,
) -> ChipSpec:
    """Pick the chip: --chip (name or TOML) wins, then the device's model name, then core counts.

    Core count and frequency measured from the profile always override the table's defaults,
    because utilisation formulas divide by the device's own figures.
    """
    if requested:
        chip = load_chip_toml(requested) if requested.endswith(".toml") else get_chip(requested)
    elif model_name:
        try:
            chip = get_chip(model_name)
        except UsageError:
            chip = CHIPS["910B2"]
    elif ai_core_num == 20:
        chip = CHIPS["910B3"]
    else:
        chip = CHIPS["910B2"]
    overrides: dict[str, Any] = {}
    if ai_core_num and ai_core_num != chip.aic_count:
        overrides["aic_count"] = int(ai_core_num)
    if aiv_num and aiv_num != chip.aiv_count:
        overrides["aiv_count"] = int(aiv_num)
    if freq_mhz and freq_mhz != chip.clock_mhz:
        overrides["clock_mhz"] = float(freq_mhz)
    if overrides and not requested:
        return chip.with_overrides(name=f"{chip.name}-class", **overrides)
    return chip.with_overrides(**overrides) if overrides else chip
