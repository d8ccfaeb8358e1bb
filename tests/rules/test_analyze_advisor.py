"""--with-msprof-advisor: output parsing, de-duplication, exit 3 when absent, and (when msprof-analyze
is installed) a real run side by side."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import tilescope.msprof_advisor as msa
from tilescope.cli import main
from tilescope.findings import Finding, Severity

from support import REPO_ROOT

REAL = REPO_ROOT.parent / "shared" / "traces" / "real"
AGENT_OUT = json.dumps(
    {
        "status": "success",
        "code": 0,
        "message": {
            "problems": {
                "headers": [
                    "category",
                    "description",
                    "suggestion",
                    "problem count",
                    "total_time(us)",
                    "time ratio",
                    "income(us)",
                    "income ratio",
                ],
                "data": [
                    [
                        "AICPU Issues",
                        "Some operators and task duration exceed 20 us, such as :\nCast",
                        "1. Modify code to avoid aicpu operator",
                        7,
                        396807.04,
                        0.002,
                        "",
                        "",
                    ],
                    [
                        "Operator Dynamic Shape Issues",
                        "Found all operators are dynamic shape",
                        "1. disable jit",
                        1,
                        "",
                        "",
                        "",
                        "",
                    ],
                ],
            }
        },
    }
)


def _ours(code: str) -> Finding:
    return Finding(code=code, slug="x", severity=Severity.LOW, kernels=("k",), message="m")


def test_parse_agent_output_and_dedupe() -> None:
    parsed = msa.parse_agent_output("banner line\n" + AGENT_OUT)
    assert parsed["status"] == "success" and len(parsed["problems"]) == 2
    found, dup = msa.to_findings(parsed, [_ours("TS405")])
    assert dup == 1  # the AICPU problem is TS405's
    assert [f.source for f in found] == ["msprof-analyze"]
    assert found[0].slug == "operator-dynamic-shape-issues"
    found, dup = msa.to_findings(msa.parse_agent_output(AGENT_OUT), [])
    assert dup == 0 and len(found) == 2 and found[0].occurrences == 7


def test_unparseable_output_is_reported() -> None:
    assert msa.parse_agent_output("Traceback ...")["problems"] == []


@pytest.mark.skipif(not REAL.is_dir(), reason="real traces not found")
def test_missing_advisor_exits_3(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(msa, "find_advisor", lambda: None)
    code = main(["analyze", str(REAL / "gpt_step_arith_591"), "--with-msprof-advisor"])
    assert code == 3
    assert "pip install msprof-analyze" in capsys.readouterr().err


def _advisor_available() -> bool:
    extra = os.environ.get("TILESCOPE_MSPROF_ANALYZE_BIN", "/tmp/msa-venv/bin")
    return shutil.which("msprof-analyze") is not None or (Path(extra) / "msprof-analyze").exists()


@pytest.mark.skipif(not (REAL.is_dir() and _advisor_available()), reason="msprof-analyze not installed")
def test_real_advisor_side_by_side(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = os.environ.get("TILESCOPE_MSPROF_ANALYZE_BIN", "/tmp/msa-venv/bin")
    monkeypatch.setenv("PATH", f"{extra}{os.pathsep}{os.environ.get('PATH', '')}")
    code = main(["analyze", str(REAL / "gpt_step_arith_591"), "-f", "json", "--with-msprof-advisor"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    adv = report["advisor"]
    assert adv["status"] == "success"
    cats = [p["category"] for p in adv["problems"]]
    assert "AICPU Issues" in cats
    assert adv["duplicates"] >= 1  # AICPU Issues = TS405
    assert any(f["source"] == "msprof-analyze" for f in report["findings"])
