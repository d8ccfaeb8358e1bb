"""Writing sample files: text, JSON, and the manifest.json / README.md every sample carries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .model import (
    ASSUMPTIONS,
    GENERATOR_NAME,
    GENERATOR_VERSION,
    HBM_BANDWIDTH_GBPS_ASSUMED,
    SEED,
)


def write_file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        fh.write(text)


def json_text(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def write_manifest(root: Path, sample: str, fmt: str, contents: dict[str, Any]) -> None:
    write_file(
        root / "manifest.json",
        json_text(
            {
                "generated": True,
                "generator": {
                    "name": GENERATOR_NAME,
                    "version": GENERATOR_VERSION,
                    "script": "sample_traces/generate.py",
                },
                "seed": SEED,
                "sample": sample,
                "format": fmt,
                "hardware_measurement": False,
                "model_assumptions": ASSUMPTIONS,
                "contents": contents,
            }
        ),
    )


def write_readme(root: Path, title: str, body: str) -> None:
    write_file(
        root / "README.md",
        (
            f"# {title}\n\n"
            "**GENERATED** by `sample_traces/generate.py` (seed "
            f"{SEED}, generator {GENERATOR_VERSION}). This is **not a hardware "
            f"measurement**: every number comes "
            "from the generator's simple 910B2 model (24 AIC / 48 AIV cores, 1800 MHz, HBM bandwidth "
            f"**assumed** {HBM_BANDWIDTH_GBPS_ASSUMED:.0f} GB/s). Regenerate with "
            "`python sample_traces/generate.py`; do not edit by hand (a test compares it "
            "with a fresh run).\n\n"
            f"{body}\n"
        ),
    )
