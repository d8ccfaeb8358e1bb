"""The published description, input schema and output schema of each tool
(`schema/tools.json`), and the checks of a call's arguments and of a result against them."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from tilescope.errors import UsageError

TOOLS_PATH = Path(__file__).with_name("schema") / "tools.json"


@cache
def published() -> dict[str, dict[str, Any]]:
    """name -> {"description", "inputSchema", "outputSchema"}."""
    tools: dict[str, dict[str, Any]] = json.loads(TOOLS_PATH.read_text(encoding="utf-8"))["tools"]
    return tools


INPUTS = tuple(published())


def _first_error(schema: dict[str, Any], value: Any) -> Any:
    # deferred: jsonschema (~0.1 s) only when a call is checked
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    return jsonschema.exceptions.best_match(validator.iter_errors(value))


def check_arguments(tool: str, args: object) -> dict[str, Any]:
    """`args` when they follow the tool's input schema; else UsageError naming the argument and
    what was expected, one line (the same words a wrong CLI option gets: exit 2)."""
    if tool not in published():
        raise UsageError(f"unknown tool {tool!r}; the tools are {', '.join(INPUTS)}")
    if not isinstance(args, dict):
        raise UsageError(f"{tool}: the arguments must be a JSON object")
    error = _first_error(published()[tool]["inputSchema"], args)
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "arguments"
        raise UsageError(f"{tool}: {where}: {error.message[:200]}")
    return args


def check_result(tool: str, result: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when a result breaks its published output schema."""
    error = _first_error(published()[tool]["outputSchema"], result)
    if error is not None:
        raise error
