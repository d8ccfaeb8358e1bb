"""What a timeline says beyond its tables: which tasks of its hardware lane are kernels
(`kernel_tasks`) and the highest value of a counter (`counter_max`, the AI Core clock).

numpy only at import; pandas is imported where the frames are read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from tilescope.profile import Timeline

FREQ_COUNTER = "AI Core Freq"

# Which `Ascend Hardware` events are kernels (formats doc §3.4, §7). That lane holds every hardware
# task, runtime tasks included: TASK_TIMEOUT_SET, PROFILING_ENABLE/DISABLE in msprof timelines
# (tilelang_sigmoid_app), MEMCPY_ASYNC in torch_npu ones (torch_timeline_3670), EVENT_RECORD,
# notify waits, ... A kernel is an event whose `Task Type`
#   - is a kernel-table type, i.e. a value op_summary's `Task Type` / kernel_details' `Accelerator
#     Core` holds (msprof timelines repeat them), or the runtime's name for one (KERNEL_AICORE, ...);
#   - or is `Other` or absent (torch_npu labels its compute kernels `Other`) while the event is not
#     named after a runtime task.
# Every other type (runtime tasks, SQE tasks, types we have not seen) is not a kernel. The doc's
# warning that the timeline's Task Type does not classify kernels holds for `Other`: such kernels
# get no core type here; a kernel table, when there is one, says more.
KERNEL_TASK_TYPES = frozenset(
    {"AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU", "HCCL", "DSA_SQE"}
)
_RUNTIME_KERNEL_TYPES = {
    "KERNEL_AICORE": "AI_CORE",
    "KERNEL_AIVEC": "AI_VECTOR_CORE",
    "KERNEL_MIX_AIC": "MIX_AIC",
    "KERNEL_MIX_AIV": "MIX_AIV",
    "KERNEL_AICPU": "AI_CPU",
}
UNTYPED_TASK = "Other"
# The CANN runtime's names of its non-kernel tasks (its task-type name table), which are also the
# names such tasks carry on the timeline.
RUNTIME_TASK_NAMES = frozenset({
    "ACTIVE_AICPU_STREAM", "ADC_PROF", "AICPU_INFO_LOAD", "CAPTURE_CONDITION", "CAPTURE_RECORD",
    "CAPTURE_RECORD_EXTERNAL", "CAPTURE_WAIT", "CAPTURE_WAIT_EXTERNAL", "CCU_LAUNCH", "CMO_TASK",
    "COMMON_CMD", "CREATE_L2_ADDR", "CREATE_STREAM", "DATADUMP_LOADINFO", "DATA_DUMP", "DEBUG_REGISTER",
    "DEBUG_REGISTER_FOR_STREAM", "DEBUG_UNREGISTER", "DEBUG_UNREGISTER_FOR_STREAM",
    "DEVICE_RINGBUFFER_CONTROL", "DIRECT_SEND", "EVENT_RECORD", "EVENT_RESET", "EVENT_WAIT",
    "GET_DEVICE_MSG", "GET_STARS_VERSION", "HOSTFUNC_CALLBACK", "IPC_EVENT_RECORD", "IPC_EVENT_WAIT",
    "IPC_INT_NOTICE", "LABEL_GOTO", "LABEL_SET", "LABEL_SWITCH", "MAINTENANCE", "MEMCPY_ASYNC",
    "MEM_WAIT_VALUE", "MEM_WRITE_VALUE", "MODEL_END_GRAPH", "MODEL_EXECUTE", "MODEL_EXIT_GRAPH",
    "MODEL_LOAD", "MODEL_MAINTAINCE", "MODEL_TASK_UPDATE", "MODEL_TO_AICPU", "MULTIPLE_TASK", "NOP",
    "NOTIFY_RECORD", "NOTIFY_WAIT", "NPU_CLEAR_FLOAT_STATUS", "NPU_GET_FLOAT_STATUS", "ONLINE_PROF_DISABLE",
    "ONLINE_PROF_ENABLE", "OVERFLOW_SWTICH_SET", "PC_TRACE", "PROFILER_DYNAMIC_DISABLE",
    "PROFILER_DYNAMIC_ENABLE", "PROFILER_TRACE", "PROFILER_TRACE_EX", "PROFILING_DISABLE",
    "PROFILING_ENABLE", "RDMA_DB_SEND", "RDMA_PI_VALUE_MODIFY", "RDMA_SEND", "REDUCE_ASYNC_V2",
    "REMOTE_EVENT_WAIT", "SET_STREAM_MODE", "SQE_UPDATE_TASK", "SQ_LOCK_UNLOCK", "STARS_COMMON",
    "STREAM_ACTIVE", "STREAM_LABEL_GOTO", "STREAM_LABEL_SWITCH_BY_INDEX", "STREAM_SWITCH",
    "STREAM_SWITCH_N", "STREAM_TAG_SET", "TASK_FLIP", "TASK_TIMEOUT_SET", "UB_DB_SEND", "UPDATE_ADDRESS",
    "WRITE_VALUE",
})


def kernel_tasks(kernels: pd.DataFrame) -> tuple[np.ndarray, pd.Series]:
    """Which rows of a timeline's kernel table (its hardware lane) are kernels, by the rule above,
    and each row's kernel-table core type (null where the timeline does not say)."""
    # deferred: pandas (~0.3 s) only when this builds a frame
    import pandas as pd

    if "task_type" not in kernels:
        named = kernels["name"].isin(RUNTIME_TASK_NAMES).to_numpy(dtype=bool)
        return ~named, pd.Series(None, index=kernels.index, dtype="str")
    tt = kernels["task_type"].astype("object")
    typed = tt.isin(KERNEL_TASK_TYPES | _RUNTIME_KERNEL_TYPES.keys())
    untyped = tt.isna() | (tt == UNTYPED_TASK)
    keep = typed | (untyped & ~kernels["name"].isin(RUNTIME_TASK_NAMES))
    return keep.to_numpy(dtype=bool), tt.replace(_RUNTIME_KERNEL_TYPES).where(typed).astype("str")


def counter_max(timeline: Timeline, name: str = FREQ_COUNTER) -> float | None:
    """The highest value of one counter (e.g. `AI Core Freq` in MHz), None when it is absent."""
    c = timeline.counters
    if c is None or not len(c) or "name" not in c:
        return None
    peak = c.loc[(c["name"] == name).to_numpy(dtype=bool), "value"].max()
    return float(peak) if np.isfinite(peak) else None  # NaN: no such counter, or no numeric value
