"""JSON output: the report dict itself, stable key order, UTF-8."""

from __future__ import annotations

import json
from typing import Any


def render(report: dict[str, Any], **opts: Any) -> str:
    clean = {k: v for k, v in report.items() if not k.startswith("_")}
    return json.dumps(clean, indent=opts.get("indent", 2), ensure_ascii=False) + "\n"
