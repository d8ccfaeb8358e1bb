"""Analysis entry points: run the rules on one or many profiles, and explain skipped rules.

`analyze()` is `engine.run_rules` plus what the engine does not know about: the user's extra
fusible-pattern files (`[tool.tilescope] patterns = [...]`) and the mapping from missing kernel
columns to the `aic_metrics` group that would provide them ("needs aic_metrics=Memory").
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilescope.config import Config
from tilescope.engine import discover_rules, rule_columns, run_rules
from tilescope.gcpause import gc_paused

# The engine imports the profile model and with it pandas: imported when the rules run, so that
# `tilescope analyze` can start reading a timeline before pandas is loaded (see io/prefetch.py).
if TYPE_CHECKING:
    from tilescope.engine import AnalysisResult, SkippedRule
    from tilescope.profile import Profile

# Which collection setting provides a kernel column (formats doc §3.2, §4). Prefixes are matched
# after the exact names; a column not listed is reported by name.
METRIC_GROUP_OF: dict[str, str] = {
    "aic_cube_ratio": "PipeUtilization",
    "aiv_vec_ratio": "PipeUtilization",
    "aic_scalar_ratio": "PipeUtilization",
    "aiv_scalar_ratio": "PipeUtilization",
    "aic_mte1_ratio": "PipeUtilization",
    "aic_mte2_ratio": "PipeUtilization",
    "aic_mte3_ratio": "PipeUtilization",
    "aic_fixpipe_ratio": "PipeUtilization",
    "aiv_mte2_ratio": "PipeUtilization",
    "aiv_mte3_ratio": "PipeUtilization",
    "aic_time_us": "PipeUtilization",
    "aiv_time_us": "PipeUtilization",
    "aic_main_mem_read_gbps": "Memory",
    "aic_main_mem_write_gbps": "Memory",
    "aiv_main_mem_read_gbps": "Memory",
    "aiv_main_mem_write_gbps": "Memory",
    "aic_read_main_memory_datas_kb": "MemoryAccess",
    "aiv_read_main_memory_datas_kb": "MemoryAccess",
    "read_main_memory_datas_kb": "Memory",
    "aiv_vec_bank_cflt_ratio": "ResourceConflictRatio",
    "aiv_vec_bankgroup_cflt_ratio": "ResourceConflictRatio",
    "aiv_vec_resc_cflt_ratio": "ResourceConflictRatio",
    "aic_cube_fops": "ArithmeticUtilization",
    "aiv_vector_fops": "ArithmeticUtilization",
}
_PREFIX_GROUPS = (
    ("aic_write_cache", "L2Cache"),
    ("aiv_write_cache", "L2Cache"),
    ("aic_r0_", "L2Cache"),
    ("aiv_r0_", "L2Cache"),
    ("aic_total_hit_rate", "L2Cache"),
    ("aiv_total_hit_rate", "L2Cache"),
    ("aic_l0", "MemoryL0"),
    ("aiv_ub_", "MemoryUB"),
    ("aic_l1_", "Memory"),
    ("aiv_l2_", "Memory"),
)
_CAPABILITY_HINTS = {
    "kernels": "a kernel table (op_summary / kernel_details / msprof op)",
    "timeline": "a timeline (trace_view.json / msprof_*.json)",
    "blocks": "msprof op per-block data (msprof op --aic-metrics=...)",
    "launches": "msprof op OpBasicInfo.csv",
    "ir": "a run bundle with IR (tilescope collect)",
    "input_shapes": "shapes (torch_npu record_shapes / profiler level >= Level1)",
    "output_shapes": "shapes (torch_npu record_shapes / profiler level >= Level1)",
    "op_type": "op types (profiler level >= Level1)",
    "core_type": "task types (profiler level >= Level1)",
    "block_dim": "block dims (profiler level >= Level1)",
    "wait_us": "task wait times (op_summary / kernel_details)",
    # TS206: a launch's speed of light needs its bytes or FLOPs (docs/metrics.md §3.4-3.5)
    "sol_us": "a speed of light per launch (tensor shapes: profiler level >= Level1; or aic_metrics=Memory)",
    "timeline.counters:AI Core Freq": "the timeline's 'AI Core Freq' counter (msprof --sys-hardware-mem / "
    "torch_npu with the AI Core frequency lane)",
    "cluster.steps": "step_trace_time.csv or a kernel table on at least 2 ranks",
    "cluster.comm_ops": "communication.json on at least 2 ranks",
    "cluster.links": "communication_matrix.json on at least 2 ranks",
    "cluster.kernels": "a readable kernel table on at least 2 ranks",
    "chip.aic_count": "the chip's AIC core count (--chip NAME or a chip TOML with aic_count)",
    "chip.aiv_count": "the chip's AIV core count (--chip NAME or a chip TOML with aiv_count)",
}


# The same needs in the words of `msprof op`, a single-operator run: its metric groups are options
# of that command, and what it never records (a timeline, host waits, shapes) comes from another tool.
_MSPROF_OP_HINTS = {
    "timeline": "a timeline (msprof op records none: profile the application with msprof or torch_npu)",
    "wait_us": "task wait times (a whole-application msprof or torch_npu profile; msprof op times one "
    "operator)",
    "input_shapes": "shapes (a tilescope collect bundle records them; msprof op does not)",
    "output_shapes": "shapes (a tilescope collect bundle records them; msprof op does not)",
    "blocks": "msprof op per-block data (any msprof op --aic-metrics group)",
    "sol_us": "a speed of light per launch (shapes: a tilescope collect bundle records them; or msprof "
    "op --aic-metrics=Memory)",
}


def explain_need(need: str, producer: str | None = None, loaded: Sequence[str] = ()) -> str:
    """One human phrase for a missing rule input, e.g. "aic_metrics=Memory" for a Memory column;
    in the words of the tool that wrote the profile where they differ (`producer` "msprof_op":
    "msprof op --aic-metrics=Memory"). A column whose metric group is among the `loaded` ones was
    collected and is still absent: the kernels have no such side, which asking for the group again
    would not change, and the phrase says so."""
    alternatives = [n.strip() for n in need.split("|")]
    phrases = list(dict.fromkeys(_explain_one(n, producer, loaded) for n in alternatives))
    return " or ".join(phrases)


def _explain_one(need: str, producer: str | None, loaded: Sequence[str] = ()) -> str:
    col = need.split(".", 1)[1] if need.startswith("blocks.") else need
    # a derived share of the launch comes from the pipe ratio/time columns of its metric group
    col = {"cube_share": "aic_cube_ratio", "vector_share": "aiv_vec_ratio"}.get(col, col)
    if col.endswith("_share") and col.startswith(("aic_", "aiv_")):
        col = col.removesuffix("_share") + "_ratio"
    group = METRIC_GROUP_OF.get(col) or next((g for p, g in _PREFIX_GROUPS if col.startswith(p)), None)
    if group and group in loaded:
        side = {"aic_": "Cube", "aiv_": "Vector"}.get(col[:4])
        if side:
            return f"{side}-side {group} data ({col}): {group} was collected, no kernel ran on the {side}"
        return f"{col}: {group} was collected without it"
    if producer == "msprof_op":
        if group:
            return f"msprof op --aic-metrics={group}"
        if need in _MSPROF_OP_HINTS:
            return _MSPROF_OP_HINTS[need]
    if group:
        return f"aic_metrics={group}"
    return _CAPABILITY_HINTS.get(need, need)


def pattern_files(config: Config) -> list[str]:
    """`patterns = [...]` from the configuration file, resolved against the file's directory."""
    if config.source is None or not Path(config.source).is_file():
        return list(getattr(config, "patterns", []) or [])
    try:
        data = tomllib.loads(Path(config.source).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return []
    table = data.get("tool", {}).get("tilescope", data)
    raw = table.get("patterns", [])
    if isinstance(raw, str):
        raw = [raw]
    base = Path(config.source).parent
    return [str(p if Path(p).is_absolute() else base / p) for p in raw]


def with_patterns(config: Config, extra: Sequence[str] = ()) -> Config:
    """A copy of `config` whose TS102/TS101 thresholds carry the extra pattern files."""
    files = [*pattern_files(config), *extra]
    if not files:
        return config
    cfg = copy.deepcopy(config)
    for code in ("TS102", "TS101"):
        cfg.rules.setdefault(code, {})["pattern_files"] = files
    return cfg


def kernel_columns_read() -> tuple[str, ...]:
    """Every kernel-table column `analyze` reads: the rules' (their NEEDS and READS) and the
    report's. `tilescope analyze` loads only these (`load_profiles(kernel_columns=...)`): a wide
    table's other columns (pipe times, cycle counts, ids, formats) would only take memory."""
    # deferred: summary (numpy) only where used
    from tilescope.summary import REPORT_COLUMNS

    return tuple(dict.fromkeys((*rule_columns(discover_rules()), *REPORT_COLUMNS)))


def analyze(
    profile: Profile,
    config: Config | None = None,
    kinds: tuple[str, ...] = ("runtime", "static"),
    extra_patterns: Sequence[str] = (),
) -> AnalysisResult:
    """Run every selected rule whose inputs the profile has."""
    cfg = with_patterns(config or Config(), extra_patterns)
    with gc_paused():
        return run_rules(profile, cfg, kinds)


def skipped_to_dict(
    s: SkippedRule, producer: str | None = None, loaded: Sequence[str] = ()
) -> dict[str, Any]:
    """A skipped rule and what it needs, in words (`explain_need`; `loaded`: the metric groups the
    profile holds)."""
    needs = dict.fromkeys(explain_need(m, producer, loaded) for m in s.missing)
    return {**s.to_dict(), "needs": list(needs)}
