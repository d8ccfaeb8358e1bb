"""User configuration: `[tool.tilescope]` in pyproject.toml or a `tilescope.toml`.

```toml
[tool.tilescope]            # or top level of tilescope.toml
chip = "910B2"              # or a path to a chip TOML
select = ["TS1", "TS201"]   # code prefixes
ignore = ["TS110"]
severity = { high = 0.05, medium = 0.03 }
[tool.tilescope.rules.TS101]   # per-rule thresholds, by code or slug
min_chain_length = 3
```
Command-line flags override files.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilescope.errors import UsageError


@dataclass
class Config:
    chip: str | None = None
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    severity: dict[str, float] = field(default_factory=lambda: {"high": 0.05, "medium": 0.03, "low": 0.005})
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: Path | None = None

    def thresholds_for(self, code: str, slug: str) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        merged.update(self.rules.get(slug, {}))
        merged.update(self.rules.get(code, {}))
        return merged

    def selects(self, code: str) -> bool:
        if self.select and not any(code.startswith(p) for p in self.select):
            return False
        return not any(code.startswith(p) for p in self.ignore)


def _from_table(table: dict[str, Any], source: Path) -> Config:
    cfg = Config(source=source)
    if "chip" in table:
        cfg.chip = str(table["chip"])
    for key in ("select", "ignore"):
        val = table.get(key, [])
        if isinstance(val, str):
            val = [v.strip() for v in val.split(",") if v.strip()]
        if not isinstance(val, list):
            raise UsageError(f"{source}: [tool.tilescope] {key} must be a list of rule codes")
        setattr(cfg, key, [str(v) for v in val])
    sev = table.get("severity", {})
    if not isinstance(sev, dict):
        raise UsageError(f"{source}: [tool.tilescope] severity must be a table")
    cfg.severity.update({str(k): float(v) for k, v in sev.items()})
    rules = table.get("rules", {})
    if not isinstance(rules, dict):
        raise UsageError(f"{source}: [tool.tilescope.rules] must be a table")
    cfg.rules = {str(k): dict(v) for k, v in rules.items()}
    return cfg


def load_config(path: str | Path | None = None, cwd: str | Path | None = None) -> Config:
    """Read an explicit config file, else tilescope.toml, else pyproject.toml in `cwd`."""
    if path is not None:
        p = Path(path)
        candidates = [p]
        if not p.is_file():
            raise UsageError(f"{p}: config file not found")
    else:
        base = Path(cwd or Path.cwd())
        candidates = [base / "tilescope.toml", base / "pyproject.toml"]
    for cand in candidates:
        if not cand.is_file():
            continue
        try:
            data = tomllib.loads(cand.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise UsageError(f"{cand}: cannot read configuration ({exc})") from exc
        if cand.name == "pyproject.toml" and path is None:
            table = data.get("tool", {}).get("tilescope")
            if table is None:
                continue
        else:
            table = data.get("tool", {}).get("tilescope", data)
        return _from_table(table, cand)
    return Config()
