"""The mutation fuzzer: N seeded cases over the seed inputs, each run through info / kernels / analyze.

    .venv/bin/python -m tests.fuzz.run --cases 500 --seed 1 [--subprocess] [--json counts.json]

CI runs a small fixed budget in-process (tests/e2e/test_fuzz.py); this script is the longer run whose
counts go into docs/reliability.md. Exit 1 when any case fails the bar (tests/fuzz/oracle.py).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path

from tests.fuzz.mutate import Seed, make_case, seeds, seeds_from
from tests.fuzz.oracle import FAILURES, OUTCOMES, Result, check_case

REPO = Path(__file__).resolve().parents[2]


def run(
    cases: int, seed: int, subprocess_mode: bool = False, log: bool = False, pool: list[Seed] | None = None
) -> dict[str, object]:
    """Run `cases` cases (round-robin over the seeds); returns counts and the failing cases."""
    pool = pool or seeds(REPO)
    counts: collections.Counter[str] = collections.Counter()
    failures: list[dict[str, object]] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tilescope-fuzz-") as tmp:
        work = Path(tmp)
        for i in range(cases):
            case = make_case(pool[i % len(pool)], i, seed, work)
            results: list[Result] = check_case(case.path, case.twin, subprocess_mode, REPO)
            for r in results:
                counts[r.outcome] += 1
                if r.outcome in FAILURES:
                    failures.append(
                        {
                            "case": i,
                            "seed": case.seed.name,
                            "mutation": case.mutation,
                            "command": r.command,
                            "outcome": r.outcome,
                            "detail": r.detail,
                        }
                    )
                    if log:
                        print(
                            f"FAIL case {i} [{case.seed.name}] {case.mutation!r} {r.command}: "
                            f"{r.outcome} {r.detail}",
                            file=sys.stderr,
                        )
    return {
        "cases": cases,
        "seed": seed,
        "runs": sum(counts.values()),
        "counts": {k: counts.get(k, 0) for k in OUTCOMES},
        "seconds": round(time.monotonic() - started, 1),
        "failures": failures,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--subprocess", action="store_true", help="run each command as its own process")
    ap.add_argument("--json", type=Path, help="write the counts and failures here")
    ap.add_argument(
        "--corpus", type=Path, nargs="*", help="seed from these folders instead of the built-in seeds"
    )
    args = ap.parse_args()
    pool = seeds_from(args.corpus) if args.corpus else None
    if args.corpus and not pool:
        ap.error("no CSV, JSON, SQLite, msprof op folder or bundle under --corpus")
    report = run(args.cases, args.seed, args.subprocess, log=True, pool=pool)
    text = json.dumps(report, indent=1)
    if args.json:
        args.json.write_text(text)
    print(json.dumps({k: v for k, v in report.items() if k != "failures"}, indent=1))
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
