"""Shared fixtures: the repository root and the real profiler traces (skipped when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
REAL_TRACES = REPO_ROOT.parent / "shared" / "traces" / "real"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def real_traces() -> Path:
    """../shared/traces/real (read-only third-party data; never copied into the repo)."""
    if not (REAL_TRACES / "fa_pipeutil_29" / "kernel_details.csv").is_file():
        pytest.skip(f"real traces not available at {REAL_TRACES}")
    return REAL_TRACES
