"""The fuzz suite on CI's small deterministic budget, and property-based tests of the readers.

The mutation run (tests/fuzz/) copies real profiler output and one bundled sample, changes one thing
in each copy and holds info / kernels / analyze to the bar of docs/reliability.md. The longer run is
`python -m tests.fuzz.run --cases 2000 --seed 1`; its counts are in docs/reliability.md.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.oracle import FAILURES, judge, judge_output
from tests.fuzz.run import run
from tilescope.cli import main

CI_CASES = 42  # six per seed (seven seeds): well under a minute on the CI machine


def test_fuzz_budget_meets_the_bar(real_traces: Path) -> None:
    report = run(CI_CASES, seed=20261201)
    counts = report["counts"]
    assert isinstance(counts, dict)
    assert report["failures"] == [], json.dumps(report["failures"], indent=1)
    assert all(counts[k] == 0 for k in FAILURES)
    # the corpus exercises both sides of the boundary: inputs read and inputs rejected
    assert counts["accepted"] > 0 and counts["rejected"] > 0


CACHE_CI_CASES = 8  # each runs `analyze` of a real 2-rank run twice (json, text): ~30 s


def test_cache_fuzz_budget_meets_the_bar(real_traces: Path) -> None:
    """Damaged and forged entries of the rank cache (tests/fuzz/cache.py, issue #27): a damaged
    entry is never read (the report is --no-cache's), a forged one never crashes a report."""
    from tests.fuzz.cache import run as run_cache

    report = run_cache(CACHE_CI_CASES, seed=20261207)
    assert report["failures"] == [], json.dumps(report["failures"], indent=1)
    assert report["kinds"]["not to be read"] > 0 and report["kinds"]["forged and sealed"] > 0


# Cache entries the long runs found, replayed as the forgery itself (a leaf's index in a part
# moves whenever the report gains a field): (where in unit.json, the value, what went wrong before)
CACHE_FOUND = [
    (("parts", 0, "part", "findings", 0, "est_saving_us"), [], "seed 1 case 87: TypeError traceback"),
]


@pytest.mark.parametrize(("where", "value", "what"), CACHE_FOUND)
def test_cache_forgeries_the_fuzzer_found_stay_fixed(
    real_traces: Path, tmp_path: Path, where: tuple[object, ...], value: object, what: str
) -> None:
    import shutil

    from tests.fuzz.cache import forge_at, judged, prepare

    source, pristine, _ = prepare(tmp_path)
    for fmt in ("json", "text"):
        root = tmp_path / fmt
        shutil.copytree(pristine, root)
        entry = sorted(p.parent for p in root.glob("??/*/unit.json"))[0]
        forge_at(entry, where, value)
        assert judged(source, root, fmt) == "accepted", (what, fmt)


# Cases the long runs failed on, replayed on every CI run: (run seed, case index, seed input, the
# mutation, what went wrong before the fix)
FOUND = [
    (7, 43, "fa_pipeutil_29", "Output Shapes' = '-9223372036854775808", "sol_us = -1.05e13 with exit 0"),
    (7, 16, "msprof_db", "COMPUTE_TASK_INFO.blockDim = 1e+308", "TypeError traceback"),
    (7, 154, "msprof_db", "corrupt 64 bytes at 63689", "UnicodeDecodeError traceback from SQLite's message"),
    (7, 250, "msprof_db", "corrupt 64 bytes at 64437", "UnicodeDecodeError traceback from SQLite's message"),
    (7, 190, "msprof_db", "in 'a?b'", "the URI opened a truncated path (sqlite3.OperationalError)"),
    (7, 193, "fa_pipeutil_29", "in 'new\\nline'", "a newline in the directory name split the error line"),
    # sample_bundle cases index the bundle's ir.json: renumbered when the bundle is regenerated
    # (here for ir.json 1.1 with the grid's lines, and the GEMMs' carried_loops) to the first case of
    # the same run seed that makes the same mutation
    (1, 63960, "sample_bundle", "['s_ub'] = -1e+308", "a 300-digit integer in a TS504 finding, exit 0"),
    (
        11,
        380,
        "sample_bundle",
        "['source_line'] = 1180591620717411303424",
        "a location line of 2**70, exit 0",
    ),
]


@pytest.mark.parametrize(("run_seed", "index", "seed_name", "mutation", "what"), FOUND)
def test_cases_the_fuzzer_found_stay_fixed(
    real_traces: Path, tmp_path: Path, run_seed: int, index: int, seed_name: str, mutation: str, what: str
) -> None:
    from tests.fuzz.mutate import make_case, seeds
    from tests.fuzz.oracle import check_case
    from tests.fuzz.run import REPO

    seed = next(s for s in seeds(REPO) if s.name == seed_name)
    case = make_case(seed, index, run_seed, tmp_path)
    assert mutation in case.mutation, case.mutation  # the replay is the case the run failed on
    results = check_case(case.path, case.twin, False, REPO)
    assert [r for r in results if r.outcome in FAILURES] == [], (what, case.mutation)


def test_oracle_catches_what_it_exists_to_catch() -> None:
    # the judge itself: a value outside its range, NaN, a traceback, a multi-line error
    assert judge_output("kernels", '[{"aic_busy_share": 1.5}]')[0] == "out_of_range"
    assert judge_output("analyze", '{"summary": {"total_device_us": -3.0}}')[0] == "out_of_range"
    assert judge_output("kernels", '[{"duration_us": NaN}]')[0] == "invalid_json"
    assert judge_output("kernels", '[{"aic_cube_ratio": 0.5, "duration_us": 3.0}]')[0] == "accepted"
    assert judge("info", 1, "", "", "Traceback ...\nValueError: x", "f.csv").outcome == "traceback"
    assert judge("info", 2, "", "tilescope: error: f.csv: bad\nmore\n", "", "f.csv").outcome == "bad_error"
    assert judge("info", 2, "", "tilescope: error: other.csv: bad\n", "", "f.csv").outcome == "bad_error"
    assert judge("info", 2, "", "tilescope: error: f.csv: row 1: bad\n", "", "f.csv").outcome == "rejected"
    assert judge("info", None, "", "", "", "f.csv").outcome == "hang"


# ---- property-based: the kernel-table reader ----------------------------------------------------

HEADER = [
    "Name",
    "Type",
    "Accelerator Core",
    "Start Time(us)",
    "Duration(us)",
    "Wait Time(us)",
    "Block Dim",
    "aicore_time(us)",
    "aic_total_cycles",
    "aic_mac_ratio",
    "aic_mte2_ratio",
]

_cell_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
_number = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["", "N/A", "1e308", "-0", "0.5", "\t3", "1,2"]),
)


def _csv_text(rows: list[list[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf).writerows([HEADER, *rows])
    return buf.getvalue()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        st.tuples(
            _cell_text,
            _cell_text,
            st.sampled_from(["AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "x"]),
            st.integers(0, 2**40).map(lambda n: f"{n}.{n % 1000:03d}"),
            _number,
            _number,
            _number,
            _number,
            _number,
            _number,
            _number,
        ).map(list),
        min_size=1,
        max_size=6,
    )
)
def test_kernel_csv_reader_accepts_or_names_the_problem(
    tmp_path_factory: pytest.TempPathFactory, rows: list[list[str]]
) -> None:
    path = tmp_path_factory.mktemp("prop") / "kernel_details.csv"
    path.write_text(_csv_text(rows), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    from contextlib import redirect_stderr, redirect_stdout

    with redirect_stdout(out), redirect_stderr(err):
        code = main(["kernels", str(path), "--format", "json"])
    assert code in (0, 2), err.getvalue()
    if code == 2:
        lines = err.getvalue().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"tilescope: error: {path}"), lines
        return
    got = json.loads(out.getvalue(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert len(got) == len(rows)
    for row in got:
        d = row["duration_us"]
        assert d is None or (math.isfinite(d) and d >= 0)
        for key in ("aic_cube_ratio", "aic_mte2_ratio"):
            assert row[key] is None or 0 <= row[key] <= 1.01
        for key, value in row.items():
            if key.endswith("_share") and value is not None:
                assert 0 <= value <= 1
