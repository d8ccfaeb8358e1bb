"""Issue #15 item 9: the small things a user meets on the second day, each pinned by a test."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from analyzer.cli import main

REPO = Path(__file__).resolve().parent.parent
BUNDLE = REPO / "sample_traces" / "tilelang_fa_bundle"


# ------------------------------------------------------------------ --select that matches no rule

@pytest.mark.parametrize("args", [["--select", "TS9"], ["--select", "TS2,TS77"], ["--ignore", "XX1"]])
def test_a_rule_prefix_that_matches_no_rule_is_exit_2_naming_it(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`--select TS9` ran no rule and passed every gate: a typo disabled CI."""
    assert main(["analyze", str(BUNDLE), *args]) == 2
    err = capsys.readouterr().err
    bad = {"TS9": "TS9", "TS2,TS77": "TS77", "XX1": "XX1"}[args[1]]
    assert f"{args[0]} '{bad}' matches no rule" in err and "TS201" in err
    assert len(err.strip().splitlines()) == 1


def test_a_prefix_from_the_config_file_is_named_with_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "tilescope.toml"
    cfg.write_text('select = ["TS20", "TS0"]\n')
    assert main(["analyze", str(BUNDLE), "--config", str(cfg)]) == 2
    assert f"{cfg}: select 'TS0' matches no rule" in capsys.readouterr().err


def test_prefixes_that_match_rules_still_select(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(BUNDLE), "--select", "ts2,TS40", "-f", "json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert {f["code"] for f in findings} == {"TS201", "TS203", "TS401", "TS402"}
