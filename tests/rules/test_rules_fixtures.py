"""Every runtime rule: a firing and a quiet fixture, compared with the expected findings snapshot.

Fixtures: tests/fixtures/rules/<code>_{firing,quiet}.json (canonical tables, built by
build_fixtures.py). Snapshots: <code>_{firing,quiet}.expected.json. Regenerate snapshots with
`TILESCOPE_UPDATE_SNAPSHOTS=1 pytest tests/rules/test_rules_fixtures.py`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tilescope.chips import get_chip
from tilescope.columns import KERNEL_CONTRACT
from tilescope.config import Config
from tilescope.engine import DOC_SECTIONS, discover_rules, run_rules
from tilescope.io.simulator import SimulatorData
from tilescope.profile import Profile, SourceInfo, Timeline

from support import TESTS

FIXTURES = TESTS / "fixtures" / "rules"
UPDATE = os.environ.get("TILESCOPE_UPDATE_SNAPSHOTS") == "1"
RUNTIME_CODES = sorted(r.code for r in discover_rules() if r.kind == "runtime")


def _frame(rows: list[dict[str, Any]], contract: bool = True) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    if contract:
        for col in KERNEL_CONTRACT:
            if col not in df:
                df[col] = (
                    None
                    if col
                    in (
                        "name",
                        "op_type",
                        "core_type",
                        "input_shapes",
                        "output_shapes",
                        "input_dtypes",
                        "output_dtypes",
                    )
                    else float("nan")
                )
    if "start_ns" in df:
        df["start_ns"] = df["start_ns"].astype("Int64")
    return df


def fixture_profile(path: Path) -> Profile:
    data = json.loads(path.read_text())
    tl = None
    if "timeline" in data:
        t = data["timeline"]
        tl = Timeline(
            kernels=_frame(t.get("kernels", []), False),
            host_ops=pd.DataFrame(),
            counters=_frame(t.get("counters", []), False),
            flows=pd.DataFrame(),
        )
    blocks = _frame(data["blocks"], False) if "blocks" in data else None
    prof = Profile(
        source=SourceInfo(path, "fixture"),
        kernels=_frame(data["kernels"]),
        chip=get_chip(data.get("chip", "910B2")),
        blocks=blocks,
        timeline=tl,
    )
    if "simulator" in data:  # a bundle's per-line data, as tilescope.io.simulator's tables (TS205)
        sim = data["simulator"]
        prof.ir = data.get("ir")
        prof.simulator = SimulatorData(
            path,
            pd.DataFrame(sim["code"]),
            pd.DataFrame(sim["instr"]),
            pd.DataFrame(columns=["core", "file", "line", "pipe", "busy_us", "instructions"]),
            list(sim["cores"]),
            addr_lines=pd.DataFrame(sim["addr_lines"]),
        )
    return prof


def _normalise(x: Any) -> Any:
    """Drop chip assumption texts: they belong to analyzer/chips.py and change with its wording."""
    if isinstance(x, dict):
        return {k: _normalise(v) for k, v in x.items() if k != "assumptions"}
    if isinstance(x, list):
        return [_normalise(v) for v in x]
    return x


def findings_for(path: Path, code: str) -> list[dict[str, Any]]:
    result = run_rules(fixture_profile(path), Config(select=[code]), kinds=("runtime",))
    assert not result.errors, result.errors
    assert code in result.rules_run, f"{code} was skipped: {result.skipped}"
    return [f.to_dict() for f in result.findings]


@pytest.mark.parametrize("code", RUNTIME_CODES)
@pytest.mark.parametrize("kind", ["firing", "quiet"])
def test_fixture_matches_snapshot(code: str, kind: str) -> None:
    fixture = FIXTURES / f"{code.lower()}_{kind}.json"
    assert fixture.is_file(), f"missing fixture {fixture.name}"
    got = _normalise(findings_for(fixture, code))
    if kind == "firing":
        assert got and all(f["code"] == code for f in got)
    else:
        assert got == []
    snap = FIXTURES / f"{code.lower()}_{kind}.expected.json"
    text = json.dumps(got, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    if UPDATE or not snap.exists():
        if not UPDATE:
            pytest.fail(f"no snapshot {snap.name}; run with TILESCOPE_UPDATE_SNAPSHOTS=1")
        snap.write_text(text)
    assert json.loads(snap.read_text()) == json.loads(text)


def test_every_rule_documents_every_section() -> None:
    for info in discover_rules():
        missing = [s for s in DOC_SECTIONS if f"## {s}" not in info.doc]
        assert not missing, f"{info.code} lacks {missing}"
        assert info.summary, info.code


def test_every_runtime_rule_has_fixtures() -> None:
    codes = {r.code for r in discover_rules() if r.kind == "runtime" and r.code[2] in "1234"}
    have = {p.name.split("_")[0].upper() for p in FIXTURES.glob("ts*_firing.json")}
    assert codes <= have, codes - have


def test_thresholds_come_from_config() -> None:
    """Raising TS401's efficiency cut to 0 silences it on its firing fixture."""
    prof = fixture_profile(FIXTURES / "ts401_firing.json")
    cfg = Config(select=["TS401"], rules={"TS401": {"max_core_efficiency": 0.0}})
    assert run_rules(prof, cfg).findings == []


def test_grouped_findings_count_launches() -> None:
    got = findings_for(FIXTURES / "ts201_firing.json", "TS201")
    assert len(got) == 1 and got[0]["occurrences"] == 3
    assert got[0]["evidence"]["launches"] == 3
    assert got[0]["evidence"]["thresholds"]["min_hidden_share"] == 0.1


def test_partial_and_hostile_input_never_crashes() -> None:
    """Rows with only a name and a duration, NaN everywhere, junk shapes and unknown core types."""
    rows: list[dict[str, Any]] = [
        {"name": "a", "duration_us": 5.0},
        {
            "name": None,
            "duration_us": float("nan"),
            "core_type": "WEIRD",
            "input_shapes": "x,y;;",
            "output_shapes": ";",
        },
        {
            "name": "b",
            "duration_us": 30.0,
            "core_type": "MIX_AIC",
            "aic_cube_ratio": 2.5,
            "aiv_vec_ratio": -1.0,
            "block_dim": 0,
            "wait_us": -3.0,
            "input_shapes": "1,2,3",
            "output_shapes": "999999999999,999999",
        },
    ]
    prof = Profile(source=SourceInfo(Path("x"), "fixture"), kernels=_frame(rows), chip=get_chip("950"))
    result = run_rules(prof, Config(), kinds=("runtime",))
    assert result.errors == []
    empty = Profile(source=SourceInfo(Path("x"), "fixture"), kernels=_frame([]), chip=get_chip("910B2"))
    result = run_rules(empty, Config(), kinds=("runtime",))
    assert result.errors == [] and result.findings == []


def test_locations_come_from_the_ir_locator(monkeypatch: pytest.MonkeyPatch) -> None:
    import tilescope.ir.locate as ir_locate
    from tilescope.findings import Location

    calls: list[tuple[str, str]] = []

    def fake(ir: dict[str, Any], kernel: str, topic: str) -> list[Location]:
        calls.append((kernel, topic))
        return [Location(file="kernels/attn.py", line=12, stage="source", label=topic)]

    monkeypatch.setattr(ir_locate, "locate", fake)
    prof = fixture_profile(FIXTURES / "ts201_firing.json")
    prof.ir = {"kernels": []}
    got = run_rules(prof, Config(select=["TS201"])).findings
    assert calls == [("flash_fwd_kernel_mix_aic", "loop")]
    assert got[0].locations == (Location(file="kernels/attn.py", line=12, stage="source", label="loop"),)
