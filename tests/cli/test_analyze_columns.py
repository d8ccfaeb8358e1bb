"""`analyze` loads only the kernel columns the rules and the report read (issue #13: 3 M kernels
under 2 GB): the rules declare them (NEEDS and READS), the report and summary list theirs
(`report.data.REPORT_COLUMNS`), and the report must be the one the whole table gives, byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tilescope.analysis import kernel_columns_read
from tilescope.commands import analyze as analyze_cmd
from tilescope.config import Config
from tilescope.engine import discover_rules, rule_columns
from tilescope.report.render_json import render

from support import REPO_ROOT

REPO = REPO_ROOT
SAMPLES = ("attention_unfused", "attention_fused", "tilelang_fa_bundle", "tilelang_fa_msprof_op")


def _report(path: Path, whole: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    """The JSON report of `analyze`, with the declared columns or (`whole`) every column."""
    from tilescope.io.load import load_profiles

    with monkeypatch.context() as m:
        if whole:
            # as `analyze` loads, without `kernel_columns`
            m.setattr(analyze_cmd, "load_profiles", lambda p, c: load_profiles(p, c, lazy_timeline=True))
        report = analyze_cmd.build(path, Config(), None, False)
    report.pop("generated_at")
    return render(report)


def _inputs(real: Path | None) -> list[Path]:
    paths = [REPO / "sample_traces" / s for s in SAMPLES]
    if real is not None:
        paths += sorted(p for p in real.iterdir() if p.is_dir())
    return paths


def test_rule_columns_come_from_needs_and_reads() -> None:
    rules = discover_rules()
    cols = rule_columns(rules)
    # every alternative of a need is a column; capabilities are not
    assert {"aic_mte2_share", "aiv_mte2_share", "aic_main_mem_read_gbps", "aiv_main_mem_read_gbps"} <= {*cols}
    assert not {"kernels", "timeline", "blocks", "ir", "launches"} & set(cols)
    ts303 = next(r for r in rules if r.code == "TS303")
    assert set(ts303.module.READS) <= set(cols)
    assert "aiv_r1_read_cache_miss_allocate" in cols  # a name ts303 builds from its parts
    assert len(cols) == len(set(cols))


def test_analyze_columns_leave_out_what_nothing_reads() -> None:
    cols = set(kernel_columns_read())
    # the report's per-kernel figures and the summary's are there
    assert {"name", "core_type", "start_ns", "duration_us", "sol_us", "sol_device_us", "sol_bound"} <= cols
    assert {"cube_utilization_pct", "input_dtypes", "flops", "bytes_moved", "stream_id"} <= cols
    # pipe times, cycle counts, ids and formats only feed the derived metrics, which the stream
    # computes from every column before it keeps these
    assert not {"aic_cube_time_us", "aic_total_cycles", "task_id", "input_formats", "op_state"} & cols


@pytest.mark.slow
def test_report_with_declared_columns_is_the_whole_tables(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    try:
        real: Path | None = request.getfixturevalue("real_traces")
    except pytest.skip.Exception:
        real = None
    for path in _inputs(real):
        assert _report(path, False, monkeypatch) == _report(path, True, monkeypatch), path
