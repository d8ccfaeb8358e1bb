"""The representative report the renderer tests use (support.report_data) holds findings as
Finding.to_dict() writes them."""

from __future__ import annotations

from tilescope.findings import Finding

from support.report_data import sample_report


def test_fixture_findings_are_finding_dicts() -> None:
    for d in sample_report()["findings"]:
        assert Finding.from_dict(d).to_dict() == d
