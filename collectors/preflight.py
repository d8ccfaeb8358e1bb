"""What must exist before any hardware work starts, checked first so a missing piece costs nothing.

torch_npu is probed in a child process: importing it without CANN fails inside its C extension
(`ImportError: libhccl.so: cannot open shared object file: ...`), and a half-initialised torch_npu
must not stay loaded in the collector. The error text is passed on verbatim because it names the
missing library.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from typing import Any

from tilescope.errors import MissingComponentError

PROBE_TIMEOUT_S = 180.0
SEE_DOCS = "see docs/collecting.md, or use --ir-only for a bundle without runtime metrics"

_PROBE = r"""
import importlib.util
import json
out = {}
try:
    # A package that is not installed is named without importing torch first (1-2 s of a `collect`
    # on a machine without an NPU; the answer is the same ModuleNotFoundError either way).
    for name in ("torch", "torch_npu"):
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    import torch
    import torch_npu  # noqa: F401
except BaseException as exc:
    # With torch_npu installed, `import torch` autoloads it and raises a RuntimeError whose cause
    # names the missing CANN library: report the root cause first, then the outer error.
    chain, e = [], exc
    while e is not None and len(chain) < 5:
        chain.append(f"{type(e).__name__}: {e}")
        e = e.__cause__ or e.__context__
    out["import_error"] = chain[-1] + ("" if len(chain) == 1 else " (from " + chain[0] + ")")
else:
    out["available"] = bool(torch.npu.is_available())
    out["device_count"] = int(torch.npu.device_count()) if out["available"] else 0
    if out["available"]:
        out["device_name"] = str(torch.npu.get_device_name())
print("TILESCOPE_PROBE " + json.dumps(out))
"""


def probe_torch_npu(python: str = sys.executable, timeout: float = PROBE_TIMEOUT_S) -> dict[str, Any]:
    """{"import_error": str} or {"available": bool, "device_count": int, "device_name": str}."""
    try:
        proc = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return {"import_error": f"importing torch_npu took more than {timeout:g} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("TILESCOPE_PROBE "):
            result: dict[str, Any] = json.loads(line.split(" ", 1)[1])
            return result
    last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    return {"import_error": f"the torch_npu probe crashed ({last})"}


def which_msprof() -> str | None:
    return shutil.which("msprof")


def require_tilelang() -> None:
    if importlib.util.find_spec("tilelang") is None:
        raise MissingComponentError(
            "tilelang is not installed: pip install 'tilescope[tilelang]' (torch==2.13.0 CPU build first)"
        )


def _torch_npu_message(probe: dict[str, Any]) -> str | None:
    err = probe.get("import_error")
    if err:
        if "No module named 'torch_npu'" in err:
            return ("no NPU: torch_npu is not installed (pip install torch-npu matching your torch, "
                    f"plus the CANN toolkit); {SEE_DOCS}")
        if "No module named 'torch'" in err:
            return f"no NPU: torch is not installed; {SEE_DOCS}"
        return (f"no NPU: torch_npu cannot be imported ({err}); is CANN installed and its set_env.sh "
                f"sourced? {SEE_DOCS}")
    if not probe.get("available"):
        return ("no NPU: torch_npu imports but torch.npu.is_available() is False (driver missing, "
                f"device busy, or ASCEND_RT_VISIBLE_DEVICES hides it); {SEE_DOCS}")
    return None


def check_backend(backend: str, probe: dict[str, Any] | None = None,
                  msprof: str | bool | None = False) -> dict[str, Any]:
    """Raise MissingComponentError (exit 3) naming the first missing piece; return the probe.

    msprof op needs `msprof` (checked first: it is what that backend is about) and torch_npu to run
    the kernel; the torch_npu backend needs torch_npu and `msprof`, which tensorboard_trace_handler
    shells out to when it parses the raw data into kernel_details.csv.
    """
    msprof_path = which_msprof() if msprof is False else msprof
    if backend in ("msprof-op", "msprof-op-simulator") and not msprof_path:
        raise MissingComponentError(
            f"no NPU toolchain: msprof not on PATH (the CANN toolkit provides it); {SEE_DOCS}"
        )
    found = probe_torch_npu() if probe is None else probe
    message = _torch_npu_message(found)
    if message:
        raise MissingComponentError(message)
    if backend == "torch_npu" and not msprof_path:
        raise MissingComponentError(
            "msprof not on PATH: torch_npu needs it to parse the profile (CANN toolkit, set_env.sh); "
            + SEE_DOCS
        )
    return found
