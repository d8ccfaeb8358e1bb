"""What the cluster tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="module")
def run2(tmp_path_factory: pytest.TempPathFactory, sample_generator: Any) -> Path:
    """A generated 2-rank run (sample_traces' cluster generator, documented formats); a module
    needing another layout defines its own."""
    from generator.cluster import ClusterSpec, write_cluster_run

    out = tmp_path_factory.mktemp("run2") / "run"
    out.mkdir()
    write_cluster_run(out, ClusterSpec(ranks=2, steps=2))
    return out
