"""The one declarative table of canonical columns (design.md §3) and the renaming rules.

Every parser maps its source header through `canonical_name()`; nothing else in the code base spells
a profiler column name. A column the table does not know is still kept, renamed by
`generic_canonical()` (lowercase, units moved into the name), never dropped.

Source keys in `ColumnSpec.sources`:
  op_summary      msprof `op_summary_*.csv`
  kernel_details  torch_npu `kernel_details.csv` (op_summary with six columns renamed)
  msprof_op       `msprof op` OpBasicInfo.csv and per-block metric CSVs
  sqlite          msprof / torch_npu SQLite columns and raw `TASK_PMU_INFO` metric names
  coupled         un-prefixed PMU names of coupled chips (Atlas training/inference, 310P)

Coupled chips have one AI Core with Cube and Vector units inside and report un-prefixed PMU names.
We map them to the split-chip names so rules see one vocabulary: Cube-side and shared metrics
(`mac_ratio`, `total_cycles`, `mte2_ratio`, `scalar_ratio`, ...) become `aic_*`, while `vec*` metrics
keep their Vector meaning and become `aiv_*` (`vec_ratio` -> `aiv_vec_ratio`), because a rule asking
"is the Vector unit the bottleneck" reads `aiv_vec_ratio` on every chip. A `mac*` name never maps to
`aiv_*` and a `vec*` name never to `aic_*` (formats doc §3.2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    dtype: str  # "string" | "float64" | "Int64" (nullable int) | "int64_ns" (exact ns from a µs string)
    unit: str  # "", "us", "ns", "cycles", "ratio", "pct", "gbps", "kb", "count", "mhz"
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)
    doc: str = ""


def _c(name: str, dtype: str, unit: str, doc: str = "", **sources: tuple[str, ...]) -> ColumnSpec:
    return ColumnSpec(name, dtype, unit, dict(sources), doc)


_KT = ("op_summary", "kernel_details")

# The canonical `core_type` values (design.md §3; torch_npu's `Accelerator Core`, msprof's `Task
# Type`), named once for every reader, rule and view, and the side of the AI Core each runs on: a
# mix kernel runs on both, its Cube (MIX_AIC) or Vector (MIX_AIV) side leading.
AI_CORE, AI_VECTOR_CORE, AI_CPU = "AI_CORE", "AI_VECTOR_CORE", "AI_CPU"
MIX_AIC, MIX_AIV = "MIX_AIC", "MIX_AIV"
CUBE_TYPES = frozenset({AI_CORE, MIX_AIC})
VECTOR_TYPES = frozenset({AI_VECTOR_CORE, MIX_AIV})
MIX_TYPES = frozenset({MIX_AIC, MIX_AIV})
AICORE_TYPES = CUBE_TYPES | VECTOR_TYPES

COLUMNS: tuple[ColumnSpec, ...] = (
    # --- identity and launch columns -------------------------------------------------------------
    _c("step_id", "Int64", "", kernel_details=("Step Id", "Step ID")),
    _c("device_id", "Int64", "", op_summary=("Device_id",), msprof_op=("Device Id",), sqlite=("deviceId",)),
    _c("model_id", "Int64", "", "4294967295 (no model) is null", op_summary=("Model ID",)),
    _c("task_id", "Int64", "", op_summary=("Task ID",), sqlite=("taskId",)),
    _c("stream_id", "Int64", "", op_summary=("Stream ID",), sqlite=("streamId",)),
    _c("name", "string", "", op_summary=("Op Name",), kernel_details=("Name",), msprof_op=("Op Name",)),
    _c(
        "op_type",
        "string",
        "",
        op_summary=("OP Type",),
        kernel_details=("Type",),
        msprof_op=("Op Type",),
        sqlite=("opType",),
    ),
    _c("op_state", "string", "", op_summary=("OP State",), sqlite=("opState",)),
    _c(
        "core_type",
        "string",
        "",
        "AI_CORE, AI_VECTOR_CORE, MIX_AIC, MIX_AIV, AI_CPU, HCCL, ...",
        op_summary=("Task Type",),
        kernel_details=("Accelerator Core",),
        sqlite=("taskType",),
    ),
    _c(
        "start_ns",
        "int64_ns",
        "ns",
        "exact integer ns parsed from the µs decimal string",
        # `Task Start Time` (no unit): msprof's own header mapping (prof_header_mapping.json) names
        # it so, as coupled-chip op_summary files do; the values are µs all the same
        op_summary=("Task Start Time(us)", "Task Start Time"),
        kernel_details=("Start Time(us)",),
        sqlite=("startNs",),
    ),
    _c(
        "duration_us",
        "float64",
        "us",
        op_summary=("Task Duration(us)",),
        kernel_details=("Duration(us)",),
        msprof_op=("Task Duration(us)",),
    ),
    _c("wait_us", "float64", "us", op_summary=("Task Wait Time(us)",), kernel_details=("Wait Time(us)",)),
    _c(
        "block_dim",
        "Int64",
        "count",
        op_summary=("Block Dim", "Block Num"),
        msprof_op=("Block Dim",),
        sqlite=("blockDim", "blockNum"),
    ),
    _c(
        "mix_block_dim",
        "Int64",
        "count",
        op_summary=("Mix Block Dim", "Mix Block Num"),
        msprof_op=("Mix Block Dim",),
        sqlite=("mixBlockDim", "mixBlockNum"),
    ),
    _c("hf32_eligible", "string", "", op_summary=("HF32 Eligible",), sqlite=("hf32Eligible",)),
    _c(
        "input_shapes",
        "string",
        "",
        "';' between tensors, ',' between dims, literal quotes removed",
        op_summary=("Input Shapes",),
        sqlite=("inputShapes",),
    ),
    _c("input_dtypes", "string", "", op_summary=("Input Data Types",), sqlite=("inputDataTypes",)),
    _c("input_formats", "string", "", op_summary=("Input Formats",), sqlite=("inputFormats",)),
    _c("output_shapes", "string", "", op_summary=("Output Shapes",), sqlite=("outputShapes",)),
    _c("output_dtypes", "string", "", op_summary=("Output Data Types",), sqlite=("outputDataTypes",)),
    _c("output_formats", "string", "", op_summary=("Output Formats",), sqlite=("outputFormats",)),
    _c("context_id", "Int64", "", op_summary=("Context ID",), sqlite=("contextId",)),
    _c("model_name", "string", "", op_summary=("Model Name",)),
    _c("infer_id", "Int64", "", op_summary=("Infer ID",)),
    _c("pid", "Int64", "", msprof_op=("Pid",)),
    _c("current_freq_mhz", "float64", "mhz", msprof_op=("Current Freq",)),
    _c("rated_freq_mhz", "float64", "mhz", msprof_op=("Rated Freq",)),
    _c("block_id", "Int64", "", msprof_op=("block_id",)),
    _c("sub_block_id", "string", "", "cube0, vector0, vector1", msprof_op=("sub_block_id",)),
    # --- Cube side (AIC) ---------------------------------------------------------------------------
    _c(
        "aic_time_us",
        "float64",
        "us",
        "theoretical time, all blocks assumed to start together",
        op_summary=("aicore_time(us)",),
        msprof_op=("aic_time(us)",),
        sqlite=("aic_total_time",),
        coupled=("aicore_time(us)", "total_time(us)"),
    ),
    _c(
        "aic_total_cycles",
        "float64",
        "cycles",
        op_summary=("aic_total_cycles",),
        msprof_op=("aic_total_cycles",),
        sqlite=("aic_total_cycles",),
        coupled=("total_cycles",),
    ),
    _c(
        "aic_cube_time_us",
        "float64",
        "us",
        op_summary=("aic_mac_time(us)",),
        msprof_op=("aic_cube_time(us)",),
        sqlite=("aic_mac_time",),
        coupled=("mac_time(us)",),
    ),
    _c(
        "aic_cube_ratio",
        "float64",
        "ratio",
        op_summary=("aic_mac_ratio",),
        msprof_op=("aic_cube_ratio",),
        sqlite=("aic_mac_ratio",),
        coupled=("mac_ratio",),
    ),
    *(
        spec
        for pipe in ("scalar", "mte1", "mte2", "mte3", "fixpipe")
        for spec in (
            _c(
                f"aic_{pipe}_time_us",
                "float64",
                "us",
                op_summary=(f"aic_{pipe}_time(us)",),
                sqlite=(f"aic_{pipe}_time",),
                coupled=(f"{pipe}_time(us)",),
            ),
            _c(
                f"aic_{pipe}_ratio",
                "float64",
                "ratio",
                op_summary=(f"aic_{pipe}_ratio",),
                sqlite=(f"aic_{pipe}_ratio",),
                coupled=(f"{pipe}_ratio",),
            ),
        )
    ),
    _c(
        "aic_icache_miss_rate",
        "float64",
        "ratio",
        op_summary=("aic_icache_miss_rate",),
        coupled=("icache_miss_rate",),
    ),
    # --- Vector side (AIV) -------------------------------------------------------------------------
    _c(
        "aiv_time_us",
        "float64",
        "us",
        op_summary=("aiv_time(us)",),
        msprof_op=("aiv_time(us)",),
        sqlite=("aiv_total_time",),
    ),
    _c(
        "aiv_total_cycles",
        "float64",
        "cycles",
        op_summary=("aiv_total_cycles",),
        sqlite=("aiv_total_cycles",),
    ),
    _c(
        "aiv_vec_time_us",
        "float64",
        "us",
        op_summary=("aiv_vec_time(us)",),
        sqlite=("aiv_vec_time",),
        coupled=("vec_time(us)",),
    ),
    _c(
        "aiv_vec_ratio",
        "float64",
        "ratio",
        op_summary=("aiv_vec_ratio",),
        sqlite=("aiv_vec_ratio",),
        coupled=("vec_ratio",),
    ),
    *(
        spec
        for pipe in ("scalar", "mte2", "mte3")
        for spec in (
            _c(
                f"aiv_{pipe}_time_us",
                "float64",
                "us",
                op_summary=(f"aiv_{pipe}_time(us)",),
                sqlite=(f"aiv_{pipe}_time",),
            ),
            _c(
                f"aiv_{pipe}_ratio",
                "float64",
                "ratio",
                op_summary=(f"aiv_{pipe}_ratio",),
                sqlite=(f"aiv_{pipe}_ratio",),
            ),
        )
    ),
    _c("aiv_icache_miss_rate", "float64", "ratio", op_summary=("aiv_icache_miss_rate",)),
    # --- whole-kernel metrics ----------------------------------------------------------------------
    _c(
        "cube_utilization_pct",
        "float64",
        "pct",
        "cycles / (MHz x device AIC count x duration) x 100",
        op_summary=("cube_utilization(%)",),
    ),
    _c(
        "memory_bound",
        "float64",
        "ratio",
        "mte2_ratio / max(mac_ratio, vec_ratio); coupled chips only",
        coupled=("memory_bound",),
    ),
    _c("aic_main_mem_read_gbps", "float64", "gbps", op_summary=("aic_main_mem_read_bw(GB/s)",)),
    _c("aic_main_mem_write_gbps", "float64", "gbps", op_summary=("aic_main_mem_write_bw(GB/s)",)),
    _c("aiv_main_mem_read_gbps", "float64", "gbps", op_summary=("aiv_main_mem_read_bw(GB/s)",)),
    _c("aiv_main_mem_write_gbps", "float64", "gbps", op_summary=("aiv_main_mem_write_bw(GB/s)",)),
    _c("aic_cube_fops", "float64", "count", op_summary=("aic_cube_fops",)),
    _c("aiv_vector_fops", "float64", "count", op_summary=("aiv_vector_fops",)),
)

SPECS: dict[str, ColumnSpec] = {s.name: s for s in COLUMNS}

# The minimum kernel-table contract of design.md §3: every loader returns at least these columns
# (null where the input did not carry them), so rules can test `profile.has(col)` uniformly.
KERNEL_CONTRACT: tuple[str, ...] = (
    "name",
    "op_type",
    "core_type",
    "start_ns",
    "duration_us",
    "wait_us",
    "block_dim",
    "mix_block_dim",
    "step_id",
    "device_id",
    "stream_id",
    "task_id",
    "input_shapes",
    "input_dtypes",
    "output_shapes",
    "output_dtypes",
    "aic_time_us",
    "aic_total_cycles",
    "aic_cube_ratio",
    "aic_scalar_ratio",
    "aic_mte1_ratio",
    "aic_mte2_ratio",
    "aic_mte3_ratio",
    "aic_fixpipe_ratio",
    "aiv_time_us",
    "aiv_total_cycles",
    "aiv_vec_ratio",
    "aiv_scalar_ratio",
    "aiv_mte2_ratio",
    "aiv_mte3_ratio",
    "cube_utilization_pct",
)

# Shape strings parsed into list<list<int64>> beside the string form.
SHAPE_LIST_COLUMNS: dict[str, str] = {
    "input_shapes": "input_shape_list",
    "output_shapes": "output_shape_list",
}

COUPLED_MARKERS = frozenset({"total_cycles", "mac_ratio", "vec_ratio", "memory_bound", "mac_time(us)"})


def _alias_map(kinds: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for spec in COLUMNS:
        for kind in kinds:
            for src in spec.sources.get(kind, ()):
                out[src] = spec.name
    return out


# op_summary names double as kernel_details names for every column torch_npu does not rename.
_SPLIT_ALIASES = _alias_map(("op_summary", "kernel_details", "msprof_op"))
_COUPLED_ALIASES = _alias_map(("coupled",))
_SQLITE_ALIASES = _alias_map(("sqlite",))

# Example: "aic_mac_ratio" -> groups ("aic", "ratio"); "aic_mac_fp16_ratio" -> ("aic", "fp16_ratio")
_MAC_RE = re.compile(r"^(aic)_mac_(.+)$")
# Example: "GM_to_L1_bw_usage_rate(%)" non-identifier characters -> "_"
_NON_IDENT_RE = re.compile(r"[^0-9a-z]+")

_UNIT_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("(kb)(estimate)", "_kb_estimate"),
    ("(%)(estimate)", "_pct_estimate"),
    ("(gb/s)", "_gbps"),
    ("(us)", "_us"),
    ("(ms)", "_ms"),
    ("(kb)", "_kb"),
    ("(mb)", "_mb"),
    ("(%)", "_pct"),
    ("(mhz)", "_mhz"),
)


@lru_cache(maxsize=4096)
def generic_canonical(source: str) -> str:
    """Rename a column the spec table does not list: lowercase, units into the name, snake_case.

    `aic_l1_read_bw(GB/s)` -> `aic_l1_read_gbps` (the `bw` token is implied by `gbps`),
    `L1_to_GM_datas(KB)(estimate)` -> `l1_to_gm_datas_kb_estimate`, `aic_mac_fp16_ratio` ->
    `aic_cube_fp16_ratio` (the `mac` and `cube` spellings are one pipe), `aicore_time(us)` ->
    `aic_time_us`.
    """
    s = source.strip().lower()
    suffix = ""
    for unit, repl in _UNIT_SUFFIXES:
        if s.endswith(unit):
            s, suffix = s[: -len(unit)], repl
            break
    parts = [p for p in _NON_IDENT_RE.split(s) if p]
    if suffix == "_gbps":
        parts = [p for p in parts if p != "bw"]
    s = "_".join(parts)
    if s.startswith("aicore_"):
        s = "aic_" + s[len("aicore_") :]
    m = _MAC_RE.match(s)
    if m:
        s = f"{m.group(1)}_cube_{m.group(2)}"
    return s + suffix


def is_coupled_header(header: list[str]) -> bool:
    """A coupled-chip table has un-prefixed PMU names and no `aic_`/`aiv_` columns."""
    names = {h.strip() for h in header}
    has_split = any(h.startswith(("aic_", "aiv_")) for h in names)
    return not has_split and bool(names & COUPLED_MARKERS)


def canonical_name(source: str, coupled: bool = False) -> str:
    """Canonical name of one source column (any producer)."""
    src = source.strip()
    if src in _SPLIT_ALIASES:
        return _SPLIT_ALIASES[src]
    if coupled:
        if src in _COUPLED_ALIASES:
            return _COUPLED_ALIASES[src]
        low = src.lower()
        if not low.startswith(("aic_", "aiv_")) and _looks_like_pmu(low):
            prefix = "aiv_" if low.startswith("vec") else "aic_"
            return generic_canonical(prefix + src)
    return generic_canonical(src)


# Example: "mte2_ratio", "vec_time(us)", "ub_read_bw(gb/s)" look like PMU metrics (lowercased)
_PMU_RE = re.compile(r"(_ratio|_time\(us\)|_cycles|\(gb/s\)|_rate|_fops|_hit|_miss|_allocate)")


def _looks_like_pmu(low: str) -> bool:
    """Un-prefixed PMU metric of a coupled chip? `cube_utilization(%)` is a whole-kernel column."""
    return bool(_PMU_RE.search(low)) and not low.startswith("cube_utilization")


def canonical_header(header: list[str]) -> list[str]:
    """Canonical names for a whole header; duplicates after renaming get a numeric suffix."""
    coupled = is_coupled_header(header)
    out: list[str] = []
    seen: dict[str, int] = {}
    for h in header:
        name = canonical_name(h, coupled)
        if name in seen:
            seen[name] += 1
            name = f"{name}_{seen[name]}"
        else:
            seen[name] = 0
        out.append(name)
    return out


def sqlite_pmu_canonical(raw: str) -> tuple[str, float]:
    """Canonical name and scale factor of a raw `TASK_PMU_INFO` metric name.

    Raw names follow msprof's header rules (formats doc §3.2): `*_total_time` is the core time,
    a name containing `time` is a time (stored in ns in SQLite: scale 1e-3 to µs), `bw` is GB/s,
    `datas` is KB, and an `_extra` suffix is dropped.
    """
    name = raw.strip()
    if name.endswith("_extra"):
        name = name[: -len("_extra")]
    if name in _SQLITE_ALIASES:
        canon = _SQLITE_ALIASES[name]
        return canon, (1e-3 if canon.endswith("_us") else 1.0)
    if name == "total_time":
        return "aic_time_us", 1e-3
    if "time" in name:
        return generic_canonical(name + "(us)"), 1e-3
    if "bw" in name:
        return generic_canonical(name + "(GB/s)"), 1.0
    if "datas" in name:
        return generic_canonical(name + "(KB)"), 1.0
    return generic_canonical(name), 1.0


def dtype_of(name: str) -> str:
    """Declared dtype of a canonical column; unknown metric columns are float64."""
    spec = SPECS.get(name)
    if spec is not None:
        return spec.dtype
    return "float64"


# A column that only one `aic_metrics` group writes identifies the group (formats doc §3.2, §4).
METRIC_GROUP_MARKERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("PipeUtilization", ("aic_cube_time_us", "aiv_vec_time_us", "aic_mte2_time_us", "aiv_mte2_time_us")),
    (
        "ArithmeticUtilization",
        ("aic_cube_fp16_ratio", "aiv_vec_fp16_ratio", "aic_cube_fops", "aiv_vector_fops"),
    ),
    ("Memory", ("aic_main_mem_read_gbps", "aiv_main_mem_read_gbps", "aic_l1_read_gbps")),
    ("MemoryL0", ("aic_l0a_read_gbps", "aic_l0b_read_gbps")),
    ("MemoryUB", ("aiv_ub_read_vector_gbps", "aic_ub_read_scalar_gbps")),
    ("ResourceConflictRatio", ("aiv_vec_bank_cflt_ratio", "aiv_vec_bankgroup_cflt_ratio")),
    ("L2Cache", ("aic_write_cache_hit", "aiv_write_cache_hit", "aic_r0_read_cache_hit")),
    ("MemoryAccess", ("aic_read_main_memory_datas_kb", "aiv_read_main_memory_datas_kb")),
)


def metric_groups_of(columns: list[str]) -> list[str]:
    """The PMU metric groups a canonical column set carries, in the order of METRIC_GROUP_MARKERS."""
    present = set(columns)
    return [group for group, markers in METRIC_GROUP_MARKERS if present.intersection(markers)]


# The counters a kernel table may carry, by the `aic_metrics` group that writes them (formats doc
# §3.2); the side's time and total cycles come with every group. (group, test on the canonical name)
# in order: the first that matches names the group. The Kernel detail and Compare views list every
# counter a kernel has under its group (#28 item 6).
CORE_TIME_GROUP = "Core time and cycles (every group)"
OTHER_COUNTERS = "Other counters"
_COUNTER_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("L2Cache", ("_cache_hit", "_cache_miss", "_hit_rate")),
    ("ResourceConflictRatio", ("_cflt_", "_wait_ratio")),
    ("MemoryL0", ("_l0a_", "_l0b_", "_l0c_")),
    # MemoryUB's per-unit UB traffic; Memory's plain `aiv_ub_read_gbps` stays Memory's
    ("MemoryUB", ("_ub_read_vector", "_ub_write_vector", "_ub_read_scalar", "_ub_write_scalar")),
    ("MemoryAccess", ("_datas_kb",)),
    ("ArithmeticUtilization", ("_fp16_ratio", "_int8_ratio", "_fp32_ratio", "_int32_ratio", "_int16_ratio",
                               "_misc_ratio", "_fops", "_instr_number")),
    ("PipeUtilization", ("_active_gbps",)),  # msprof op's MTE rates while active
    ("Memory", ("_gbps", "_instructions")),
    ("PipeUtilization", ("_time_us", "_ratio", "_miss_rate")),
)
# `msprof op` Memory.csv's path columns carry no side prefix (`GM_to_L1_datas(KB)`)
_UNPREFIXED_MEMORY = ("_datas_kb", "_usage_rate_pct")
_COUNTER_UNITS: tuple[tuple[str, str], ...] = (
    ("_us", "µs"), ("_cycles", "cycles"), ("_gbps", "GB/s"), ("_kb", "KB"), ("_pct", "%"),
    ("_ratio", "ratio (0–1)"), ("_rate", "ratio (0–1)"), ("_fops", "FLOP"), ("_hit", "count"),
    ("_allocate", "count"), ("_miss", "count"), ("_instructions", "count"), ("_number", "count"),
)
_SPEC_UNITS = {"us": "µs", "cycles": "cycles", "gbps": "GB/s", "kb": "KB", "pct": "%", "ratio": "ratio (0–1)",
               "count": "count"}


def counter_group(column: str) -> str | None:
    """The metric group of a PMU counter column (`aic_l0a_read_gbps` -> "MemoryL0"); None for a
    column that is no counter: identity, launch and shape columns, and tilescope's derived ones
    (`*_share`, and every name without the `aic_`/`aiv_` side prefix: `cube_share`, `sol_pct`...)."""
    if not column.startswith(("aic_", "aiv_")):
        return "Memory" if any(m in column for m in _UNPREFIXED_MEMORY) else None
    if column.endswith("_share"):
        return None
    if column in ("aic_time_us", "aiv_time_us", "aic_total_cycles", "aiv_total_cycles"):
        return CORE_TIME_GROUP
    for group, marks in _COUNTER_GROUPS:
        if any(m in column or column.endswith(m.rstrip("_")) for m in marks):
            return group
    return OTHER_COUNTERS


def counter_unit(column: str) -> str:
    """The unit a counter column's name carries (`_gbps` GB/s, `_ratio` 0-1, cache hits a count),
    else the one the spec table declares."""
    named = next((unit for suffix, unit in _COUNTER_UNITS if column.endswith(suffix)), "")
    spec = SPECS.get(column)
    return named or (_SPEC_UNITS.get(spec.unit, "") if spec is not None else "")
