"""Built-in chip table and chip selection.

Figures come from shared docs/chips.md; for the 910B variants the clock, GM (HBM) and L2 bandwidths,
L2 size and the single-core path bandwidths are Huawei's own (the `msprof op` tool's source, chips.md
§2a). Every figure is a default the user can override with `--chip NAME`, `--chip NAME:cj` (the "CJ"
memory type) or a TOML file. What has no vendor source is listed in `ChipSpec.assumptions`, so that
every verdict depending on it can say so.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilescope.errors import UsageError

KIB = 1024
MIB = 1024 * 1024

# The memory types msopprof tells apart (`THEORY_BW_GM` vs `THEORY_BW_GM_CJ`); a profile does not
# record which one the device has, so the report names the one it used.
MEMORY_TYPES = ("default", "cj")
# The AI Core clock drops to this between runs (the timeline's `AI Core Freq` counter reads 800 MHz on
# an idle 910B2, chips.md §2): a clock inferred below it is arithmetic on the wrong core count.
IDLE_CLOCK_MHZ = 800.0
# The highest rated AI Core clock of any catalogued chip, with margin for rounding in the profiler's
# figures: an inferred clock above it is wrong too.
MAX_CLOCK_MHZ = 2000.0


def is_vendor_gm(gbps: float | None, memory_type: str, by_type: Mapping[str, float]) -> bool:
    """The GM bandwidth in use is the vendor's figure for the memory type (not a configured one)."""
    return gbps is not None and by_type.get(memory_type) == gbps


def gm_note(gbps: float | None, memory_type: str, by_type: Mapping[str, float]) -> str:
    """Where a GM bandwidth comes from, in short: "vendor, default memory type" or "configured"
    (ChipSpec.hbm_note; also read from a report's chip dict by tilescope.text.words)."""
    return f"vendor, {memory_type} memory type" if is_vendor_gm(gbps, memory_type, by_type) else "configured"


@dataclass(frozen=True)
class CorePaths:
    """Vendor single-core data-path bandwidths in GB/s (msopprof `maxBwRateOf910B*`, chips.md §2a).

    A launch on N cores cannot move data faster than N x the path rate, whatever HBM could give.
    """

    gm_to_l1: float
    gm_to_ub: float
    ub_to_gm: float
    l1_to_l0a: float
    l0c_to_gm: float


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
    # GM (HBM) bandwidth in GB/s for `memory_type`; `gm_bandwidth_by_type` keeps every vendor figure
    hbm_bandwidth_gbps: float | None
    l2_bandwidth_gbps: float | None = None
    memory_type: str = "default"
    gm_bandwidth_by_type: dict[str, float] = field(default_factory=dict)
    l2_bandwidth_by_type: dict[str, float] = field(default_factory=dict)
    core_paths: CorePaths | None = None
    vector_flop_per_cycle_per_aiv: int = 256  # fp16 lanes x2; assumption, see assumptions
    flop_per_cycle_per_aic: dict[str, int] = field(
        default_factory=lambda: {"float16": 8192, "bfloat16": 8192, "float32": 4096, "int8": 16384}
    )
    assumptions: tuple[str, ...] = ()
    # the fields whose value is a default, neither recorded by the profile nor measured from it
    # ("aic_count", "aiv_count", "clock_mhz"): a finding that rests on one says so and is not high
    assumed_figures: tuple[str, ...] = ()
    # where the figures came from, one line each ("clock 1800 MHz: vendor rated clock of 910B2")
    provenance: tuple[str, ...] = ()
    # why this chip was chosen, shown beside its name: "--chip", "tilescope.toml", "the lowering
    # target of tilelang 0.1.15"; None where nobody chose (a profile's own device)
    chosen_because: str | None = None

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

    @property
    def hbm_bandwidth_source(self) -> str:
        """One line saying where the GM bandwidth comes from (shown beside every verdict using it)."""
        if self.hbm_bandwidth_gbps is None:
            return "GM bandwidth unknown for this chip: configure hbm_bandwidth_gbps"
        by_type = self.gm_bandwidth_by_type
        if is_vendor_gm(self.hbm_bandwidth_gbps, self.memory_type, by_type):
            others = ", ".join(f"{k}: {v:g} GB/s" for k, v in by_type.items() if k != self.memory_type)
            return (
                f"GM {self.hbm_bandwidth_gbps:g} GB/s: vendor figure for {self.base_name}, "
                f"{self.memory_type} memory type (the profile does not record the type"
                + (f"; {others}" if others else "")
                + ")"
            )
        return f"GM {self.hbm_bandwidth_gbps:g} GB/s: configured"

    @property
    def hbm_note(self) -> str:
        """A short label for the GM line of a chart: "vendor, default memory type" or "configured"."""
        return gm_note(self.hbm_bandwidth_gbps, self.memory_type, self.gm_bandwidth_by_type)

    @property
    def base_name(self) -> str:
        return self.name.split(" ")[0].removesuffix("-class")

    def with_overrides(self, **values: Any) -> ChipSpec:
        known = {f.name for f in dataclasses.fields(self)}
        unknown = set(values) - known
        if unknown:
            raise UsageError(f"unknown chip field(s): {', '.join(sorted(unknown))}")
        if "memory_type" in values:
            values = {**_memory_type_values(self, str(values["memory_type"])), **values}
        return dataclasses.replace(self, **values)

    @property
    def label(self) -> str:
        """The chip's name and why it was chosen: "950 (the lowering target of tilelang 0.1.15 ...)"."""
        return f"{self.name} ({self.chosen_because})" if self.chosen_because else self.name

    def assumed_value(self, name: str) -> str | None:
        """"40 Vector cores" when the figure `name` is assumed (`assumed_figures`), else None."""
        if name not in self.assumed_figures or getattr(self, name, None) is None:
            return None
        value = getattr(self, name)
        unit = {"aic_count": "AI Cores", "aiv_count": "Vector cores", "clock_mhz": "MHz"}.get(name, name)
        return f"{value:g} {unit}" if isinstance(value, float) else f"{value} {unit}"

    def unknown_figures(self, *names: str) -> tuple[str, ...]:
        """Which of the named figures (ChipSpec fields) this chip has no value for."""
        return tuple(n for n in names if getattr(self, n) is None)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["assumptions"] = list(self.assumptions)
        d["provenance"] = list(self.provenance)
        d["assumed_figures"] = list(self.assumed_figures)
        d["peak_fp16_tflops"] = (self.peak_flops() or 0) / 1e12 or None
        d["hbm_bandwidth_source"] = self.hbm_bandwidth_source
        return d


def _memory_type_values(chip: ChipSpec, memory_type: str) -> dict[str, Any]:
    kind = memory_type.strip().lower()
    if kind not in MEMORY_TYPES:
        raise UsageError(f"unknown memory type {memory_type!r}; known: {', '.join(MEMORY_TYPES)}")
    out: dict[str, Any] = {"memory_type": kind}
    if kind in chip.gm_bandwidth_by_type:
        out["hbm_bandwidth_gbps"] = chip.gm_bandwidth_by_type[kind]
    if kind in chip.l2_bandwidth_by_type:
        out["l2_bandwidth_gbps"] = chip.l2_bandwidth_by_type[kind]
    return out


_A2_BUFFERS: dict[str, Any] = dict(
    l0a_bytes=64 * KIB,
    l0b_bytes=64 * KIB,
    l0c_bytes=128 * KIB,
    l1_bytes=512 * KIB,
    ub_bytes=192 * KIB,
)
# msopprof `maxBwRateOf910B*` (chips.md §2a): 910B1, 910B2/B3 share one table, 910B4 its own
_PATHS_B1 = CorePaths(gm_to_l1=264.0, gm_to_ub=220.06, ub_to_gm=186.8, l1_to_l0a=437.5, l0c_to_gm=209.32)
_PATHS_B2 = CorePaths(gm_to_l1=256.86, gm_to_ub=214.11, ub_to_gm=181.75, l1_to_l0a=425.68, l0c_to_gm=203.66)
_PATHS_B4 = CorePaths(gm_to_l1=222.0, gm_to_ub=195.27, ub_to_gm=176.75, l1_to_l0a=368.2, l0c_to_gm=190.7)
_VECTOR_ASSUMED = (
    "Vector peak assumes 256 FLOP per cycle per AIV (128 fp16 lanes, multiply-add): no vendor figure"
)


def _a2(
    name: str,
    aic: int,
    aiv: int,
    clock: float,
    hbm_gb: int | None,
    gm: tuple[float, float],
    l2_bw: tuple[float, float],
    l2_mib: int,
    paths: CorePaths,
    extra: tuple[str, ...] = (),
) -> ChipSpec:
    """A 910B variant: clock, GM/L2 bandwidth (default, CJ), L2 size and core paths are vendor figures."""
    return ChipSpec(
        name=name,
        family="910B",
        split=True,
        aic_count=aic,
        aiv_count=aiv,
        clock_mhz=float(clock),
        l2_bytes=l2_mib * MIB,
        hbm_bytes=hbm_gb * 1024**3 if hbm_gb else None,
        hbm_bandwidth_gbps=float(gm[0]),
        l2_bandwidth_gbps=float(l2_bw[0]),
        gm_bandwidth_by_type={"default": float(gm[0]), "cj": float(gm[1])},
        l2_bandwidth_by_type={"default": float(l2_bw[0]), "cj": float(l2_bw[1])},
        core_paths=paths,
        assumptions=(*extra, _VECTOR_ASSUMED),
        **_A2_BUFFERS,
    )


CHIPS: dict[str, ChipSpec] = {
    "910B1": _a2(
        "910B1", 24, 48, 1850, 64, (1800, 1340), (8000, 7400), 192, _PATHS_B1,
        ("910B1 core count (24 AIC / 48 AIV) is not a vendor figure: it matches a 24-core 1850 MHz trace",),
    ),
    "910B2": _a2("910B2", 24, 48, 1800, 64, (1750, 1300), (7780, 7200), 192, _PATHS_B2),
    "910B3": _a2("910B3", 20, 40, 1800, 64, (1750, 1300), (7780, 7200), 192, _PATHS_B2),
    "910B4": _a2(
        "910B4", 20, 40, 1650, 32, (800, 1250), (4000, 6300), 96, _PATHS_B4,
        ("910B4 core count (20 AIC) is third-party (HAMi) only; 40 AIV assumed (2 per AIC)",),
    ),
    "A3": dataclasses.replace(
        _a2(
            "A3", 20, 40, 1800, 64, (1750, 1300), (7780, 7200), 192, _PATHS_B2,
            (
                "A3 core count is third-party (HAMi) only; verify on hardware",
                "A3 clock, bandwidths and paths assumed equal to 910B2/B3 (no A3 vendor table)",
            ),
        ),
        family="A3",
    ),
    # The Ascend 950 (the target of tilelang 0.1.15's built-in backend, `dav-3510`): the figures with a
    # source in shared docs/chips.md, each with its section. No source gives its core counts, clock,
    # L2 or HBM size, or GM/L2 bandwidth (chips.md §2, §5, §10: "unknown — configure"): they stay
    # None, and what needs them is "not checked" rather than computed from a guess.
    "950": ChipSpec(
        name="950",
        family="950",
        split=True,  # §1: split AIC/AIV; mixed kernels launch `__mix__(1, 2)`, 1 AIC : 2 AIV (§2)
        aic_count=None,  # §2: unknown
        aiv_count=None,  # §2: unknown (2 per AIC)
        clock_mhz=None,  # §2: unknown
        l0a_bytes=64 * KIB,  # §3 [vendor]; tilelang 0.1.15 enforces 65536 (§8)
        l0b_bytes=64 * KIB,  # §3 [vendor]; enforced 65536 (§8)
        l0c_bytes=256 * KIB,  # §3 [vendor]; not enforced by tilelang 0.1.15 (§8)
        l1_bytes=512 * KIB,  # §3 [vendor]; enforced 524288 (§8)
        ub_bytes=248 * KIB,  # §3: newer catlass `Ascend950` (older `AtlasA5`: 256 KiB); §10 default
        l2_bytes=None,  # §3: unknown
        hbm_bytes=None,  # §2: unknown
        hbm_bandwidth_gbps=None,  # §6/§10: configuration only
        assumptions=(
            "950 core count, clock and bandwidth are unknown: configure them",
            "950 UB 248 KiB (catlass Ascend950); tilelang 0.1.15 itself checks 221184 B",
            "950 Cube FLOP per cycle assumed equal to the 910B's (8192 fp16, chips.md §10)",
        ),
        provenance=(
            "buffers L0A/L0B 64 KiB, L0C 256 KiB, L1 512 KiB, UB 248 KiB: catlass arch.hpp (chips.md §3)",
            "split AIC/AIV, 1 AIC : 2 AIV: tilelang 0.1.15 `__mix__(1, 2)` on dav-3510 (chips.md §1-§2)",
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

# The catalogued 910B variants by rated clock: what a clock read from the profile (or inferred from
# its cycle counts) tells about the chip.
VARIANTS_BY_CLOCK: dict[float, tuple[str, ...]] = {}
for _name in ("910B2", "910B3", "910B1", "910B4"):
    _clock = CHIPS[_name].clock_mhz
    if _clock is not None:
        VARIANTS_BY_CLOCK.setdefault(_clock, ())
        VARIANTS_BY_CLOCK[_clock] += (_name,)

ALIASES = {
    "ascend910b1": "910B1", "ascend910b2": "910B2", "ascend910b2c": "910B2", "ascend910b3": "910B3",
    "ascend910b4": "910B4", "ascend910b4-1": "910B4", "910c": "A3", "910_93": "A3", "ascend910_93": "A3",
    "a3": "A3", "ascend950": "950", "910_95": "950", "ascend310p3": "310P", "310p3": "310P",
    "310p": "310P",
}


# tilelang-ascend's platforms (`TL_PLATFORM`, else the device name; A3 when neither says) and the
# catalogued chip each lowers for (chips.md §1): A2 is the 910B family, whose usual entry here is the
# 910B2; A5 is the 950 (tilelang-ascend compiles it for dav-c310).
TL_ASCEND_PLATFORMS = {"A2": "910B2", "A3": "A3", "A5": "950"}
TL_ASCEND_DEFAULT_PLATFORM = "A3"


def tl_ascend_platform_of_device(device_name: str | None) -> str | None:
    """The platform tilelang-ascend 0.1.4 compiles for on this device when TL_PLATFORM is unset.

    Its `tilelang.utils.target.determine_platform("auto")` reads the NPU's name: "910B" -> A2,
    "910_93"/"910C" -> A3, "950"/"910_95" -> A5, any other "910" -> A2, else its default A3. The
    collector pins TL_PLATFORM to this value so the IR it captures (lowered without a device) and
    the binary it profiles are built for the same platform. None: no device name to go by.
    """
    if not device_name:
        return None
    name = device_name.upper()
    if "910B" in name:
        return "A2"
    if "910_93" in name or "910C" in name:
        return "A3"
    if "950" in name or "910_95" in name:
        return "A5"
    if "910" in name:
        return "A2"
    return TL_ASCEND_DEFAULT_PLATFORM


def lowering_target_chip(
    dialect: str, platform: str | None = None, version: str | None = None
) -> tuple[str, str]:
    """The catalogued chip a kernel is lowered for, and why, from the stack that lowers it.

    `dialect` is an ir.json dialect id (tilescope.ir.scopes): "tilelang-ascend" lowers for its
    platform (`platform`: the `TL_PLATFORM` value, None when unset: tilelang-ascend's own default,
    A3); every other dialect goes through tilelang 0.1.15's built-in backend, whose only target is
    the 950 (`dav-3510`, chips.md §1). `version` names the stack's version in the reason.
    """
    if dialect == "tilelang-ascend":
        key = (platform or TL_ASCEND_DEFAULT_PLATFORM).strip().upper()
        name = TL_ASCEND_PLATFORMS.get(key)
        if name is None:
            raise UsageError(
                f"TL_PLATFORM={platform!r}: tilelang-ascend knows {', '.join(TL_ASCEND_PLATFORMS)}; "
                "or give --chip"
            )
        stack = f"tilelang-ascend {version}" if version else "tilelang-ascend"
        said = f"TL_PLATFORM={key}" if platform else f"TL_PLATFORM unset: its default {key}"
        if key == "A2":
            said += ", whose usual variant is the 910B2"
        return name, f"the lowering target of {stack}, {said}"
    return "950", f"the lowering target of tilelang {version or '0.1.15'}"


def chosen_chip(
    requested: str | None,
    config_chip: str | None = None,
    config_source: Path | None = None,
    dialect: str = "tilelang-0.1.15-ascend",
    platform: str | None = None,
    version: str | None = None,
) -> ChipSpec:
    """The chip `lint`, `collect` and `sweep` judge a kernel by, saying why (ChipSpec.label).

    --chip wins, then the configuration's `chip`, then the lowering target of the stack that lowers
    the kernel (lowering_target_chip): capacities are those of the chip the code is compiled for.
    """
    if requested:
        return requested_chip(requested).with_overrides(chosen_because="--chip")
    if config_chip:
        where = config_source.name if config_source is not None else "configuration"
        return requested_chip(config_chip).with_overrides(chosen_because=f"chip in {where}")
    name, why = lowering_target_chip(dialect, platform, version)
    return get_chip(name).with_overrides(chosen_because=why)


def get_chip(name: str) -> ChipSpec:
    """A catalogued chip by name or alias; `NAME:cj` selects the CJ memory type's bandwidths."""
    key, _, memory = name.strip().partition(":")
    key = key.strip()
    chip = CHIPS.get(key)
    if chip is None:
        alias = ALIASES.get(key.lower()) or next((k for k in CHIPS if k.lower() == key.lower()), None)
        if alias is None:
            raise UsageError(
                f"unknown chip {name!r}: a chip is a name, one of {', '.join(CHIPS)} (optionally "
                "NAME:cj), or a chip file ending in .toml or .json"
            )
        chip = CHIPS[alias]
    return chip.with_overrides(memory_type=memory) if memory else chip


def family_chip(model_name: str) -> ChipSpec | None:
    """The chip a device model string names exactly ("Ascend910B2"), None for a family-only name
    ("Ascend910B": the variant is not recorded)."""
    try:
        return get_chip(model_name)
    except UsageError:
        return None


def load_chip_toml(path: str | Path) -> ChipSpec:
    """A user chip file: `base = "910B2"` plus any ChipSpec field to override (`memory_type = "cj"`);
    TOML, or the same table as JSON when the name ends in .json (`{"base": "910B2", ...}`)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
        data = json.loads(text) if p.suffix.lower() == ".json" else tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{p}: cannot read chip file ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("chip", data), dict):
        raise UsageError(f"{p}: a chip file holds a table of chip fields (base = NAME and overrides)")
    data = dict(data.get("chip", data))
    base = get_chip(str(data.pop("base", "910B2")))
    name = str(data.pop("name", f"{base.name} (custom)"))
    if isinstance(data.get("core_paths"), dict):
        data["core_paths"] = CorePaths(**data["core_paths"])
    return base.with_overrides(name=name, **data)


def requested_chip(requested: str) -> ChipSpec:
    """--chip: a chip file (.toml or .json) or a catalogued name."""
    is_file = requested.lower().endswith((".toml", ".json"))
    return load_chip_toml(requested) if is_file else get_chip(requested)


def resolve_chip(
    requested: str | None,
    ai_core_num: int | None = None,
    aiv_num: int | None = None,
    freq_mhz: float | None = None,
    model_name: str | None = None,
    coupled: bool = False,
) -> ChipSpec:
    """Pick the chip: --chip (name or TOML) wins, then the device's model name, then clock and cores
    (a coupled table's chip is the catalogue's coupled one, 310P, never a split 910B).

    Core count and frequency measured from the profile always override the table's defaults,
    because utilisation formulas divide by the device's own figures.
    """
    if requested:
        chip = requested_chip(requested)
    else:
        chip = (family_chip(model_name) if model_name else None) or (
            CHIPS["310P"] if coupled else catalogue_match(ai_core_num, freq_mhz)
        )
    overrides: dict[str, Any] = {}
    if ai_core_num and ai_core_num != chip.aic_count:
        overrides["aic_count"] = int(ai_core_num)
    if aiv_num and aiv_num != chip.aiv_count:
        overrides["aiv_count"] = int(aiv_num)
    elif ai_core_num and ai_core_num != chip.aic_count and chip.split:
        overrides["aiv_count"] = 2 * int(ai_core_num)  # 1 AIC : 2 AIV on every split chip
    if freq_mhz and freq_mhz != chip.clock_mhz:
        overrides["clock_mhz"] = float(freq_mhz)
    if ai_core_num:
        # the count is the device's own (recorded or inferred): the table's caveats about it go
        kept = tuple(a for a in chip.assumptions if "core count" not in a)
        if not any(c.aic_count == ai_core_num for c in CHIPS.values()):
            kept += (
                f"{ai_core_num} AI Cores: no catalogued chip has this count; the other "
                f"figures (buffers, bandwidths) are {chip.name}'s",
            )
        if kept != chip.assumptions:
            chip = chip.with_overrides(assumptions=kept)
    if overrides and not requested:  # figures differ from the catalogued chip's
        return chip.with_overrides(name=f"{chip.name}-class", **overrides)
    return chip.with_overrides(**overrides) if overrides else chip


def fewest_cores_at_least(bound: int, freq_mhz: float | None, coupled: bool = False) -> ChipSpec | None:
    """The catalogued chip with the fewest AI Cores not below `bound` (a count the data proves the
    device has at least), among those rated at `freq_mhz` (any when None), coupled or split as
    the table is; None when no catalogued chip has that many."""
    names = ("310P",) if coupled else ("910B2", "910B3", "910B1", "910B4")

    def rated_at(chip: ChipSpec) -> bool:
        return freq_mhz is None or (
            chip.clock_mhz is not None and abs(chip.clock_mhz - freq_mhz) <= 0.01 * freq_mhz
        )

    fits = [CHIPS[n] for n in names if (CHIPS[n].aic_count or 0) >= bound and rated_at(CHIPS[n])]
    return min(fits, key=lambda c: c.aic_count or 0) if fits else None


def catalogue_match(ai_core_num: int | None, freq_mhz: float | None) -> ChipSpec:
    """The catalogued 910B variant that fits a core count and clock best (910B2 when nothing is known).

    A clock names the variants rated at it (1650: 910B4; 1850: 910B1; 1800: 910B2/B3), and the core
    count picks among those; a core count alone picks the first variant with it.
    """
    candidates = [CHIPS[n] for n in ("910B2", "910B3", "910B1", "910B4")]
    if freq_mhz:
        at_clock = [c for c in candidates if c.clock_mhz and abs(c.clock_mhz - freq_mhz) <= 0.01 * freq_mhz]
        candidates = at_clock or candidates
    if ai_core_num:
        with_cores = [c for c in candidates if c.aic_count == ai_core_num]
        candidates = with_cores or candidates
    return candidates[0]
