"""A stand-in for the Python a collection runs its workers with."""

from __future__ import annotations

import sys
from pathlib import Path

FAKE_PY = """
# Stands in for `python run_module.py tilescope.collectors.worker JOB`:
# writes what tensorboard_trace_handler would.
import json, pathlib, sys
job = json.load(open(sys.argv[3]))
out = pathlib.Path(job["profiler"]["on_trace_ready"]["dir_name"]) / "host_123_20260101_ascend_pt"
(out / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
pathlib.Path(job["result"]).write_text("{}")
"""


def write_fake_python(path: Path) -> Path:
    path.write_text(f"#!{sys.executable}\n" + FAKE_PY)
    path.chmod(0o755)
    return path
