"""Hardware tests: run only where an Ascend NPU, CANN and torch_npu are usable; skipped elsewhere.

Detection mirrors `tilescope collect`'s own preflight: `import torch_npu` and
`torch.npu.is_available()` in a child process (a failed torch_npu import must not poison the test
process), and `shutil.which("msprof")`. Each skip says which piece is missing.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from tilescope.collectors.preflight import probe_torch_npu

_PROBE: dict[str, Any] | None = None


def _probe() -> dict[str, Any]:
    global _PROBE
    if _PROBE is None:
        _PROBE = probe_torch_npu()
    return _PROBE


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/npu/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.npu)


@pytest.fixture(scope="session")
def npu_device() -> dict[str, Any]:
    """The probe result of a usable NPU, or skip naming what is missing."""
    found = _probe()
    if "import_error" in found:
        pytest.skip(f"no NPU: torch_npu cannot be imported ({found['import_error']})")
    if not found.get("available"):
        pytest.skip("no NPU: torch.npu.is_available() is False")
    return found


@pytest.fixture(scope="session")
def msprof_path(npu_device: dict[str, Any]) -> str:
    path = shutil.which("msprof")
    if path is None:
        pytest.skip("msprof not on PATH (source the CANN set_env.sh)")
    return path
