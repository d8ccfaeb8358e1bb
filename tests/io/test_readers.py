"""Every format detection can name has its reader (tilescope.io.formats.READERS), and a format
without one is refused with one line, not a traceback."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tilescope.errors import NoProfileFoundError
from tilescope.io.detect import Detected
from tilescope.io.formats import READERS, load_single

from support import REPO_ROOT


def _formats_detect_names() -> set[str]:
    tree = ast.parse((REPO_ROOT / "analyzer" / "io" / "detect.py").read_text(encoding="utf-8"))
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Detected"
        and node.args and isinstance(node.args[0], ast.Constant)
    }


def test_every_detected_format_has_a_reader() -> None:
    named = _formats_detect_names()
    assert {"torch_npu", "msprof", "msprof_op", "sqlite", "kernel_csv", "timeline_json"} <= named
    # a bundle is several profiles, each read by its own format's reader (tilescope.io.bundle), and
    # so are one device's msprof runs of several metric groups (merged alike, #26 item 4)
    assert named - {"bundle", "msprof_groups"} == set(READERS)


def test_a_format_without_a_reader_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(NoProfileFoundError, match="unsupported format nonesuch"):
        load_single(Detected("nonesuch", tmp_path))
