"""Compare `tilescope analyze` outputs of two checkouts, byte for byte, on every bundled sample and
every real profile (issue #13: a memory change must not change any output).

Each input is analysed in every format (json, text, md, html, sarif) by each checkout in a
subprocess of its own (benchmarks/checkout.py: either layout, before or after #23), and the exit
code, stdout and stderr compared; in the JSON the `generated_at` line is left out (the clock). Inputs are the
profile folders of `sample_traces/`, the folders of `../shared/traces/real/` (each rank folder too)
and any `--input` given (e.g. a large generated kernel_details folder).

    .venv/bin/python benchmarks/compare_outputs.py --before /tmp/base --after . [--input DIR ...]

Exit 1 when any output differs (the first lines of each difference are printed).
"""

from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
from pathlib import Path

import checkout  # benchmarks/checkout.py: how another checkout's code is run

REPO = Path(__file__).resolve().parent.parent
REAL = REPO.parent / "shared" / "traces" / "real"
FORMATS = ("json", "text", "md", "html", "sarif")
# Example: "generated_at": "2026-12-01T15:35:27+00:00"
GENERATED_AT = re.compile(r'"generated_at": ?"[^"]*"')


def default_inputs() -> list[Path]:
    """The sample profiles and real profiles (each top folder and each folder one level below)."""
    skip = ("generator", "kernels")  # the generator's code and the TileLang kernels: no profiles
    samples = sorted(p for p in (REPO / "sample_traces").iterdir() if p.is_dir() and p.name not in skip)
    real = sorted(p for p in REAL.iterdir() if p.is_dir()) if REAL.is_dir() else []
    ranks = sorted(q for p in real for q in p.iterdir() if q.is_dir())
    return [*samples, *real, *ranks]


def run(code: Path, path: Path, fmt: str, cwd: Path) -> tuple[int, str, str]:
    # one working directory for both checkouts, as SARIF writes the paths under it relative to it
    cmd = [*checkout.cli(code), "analyze", str(path), "-f", fmt]
    proc = subprocess.run(cmd, cwd=cwd, env=checkout.env(code), capture_output=True, text=True, check=False)
    # the clock: the JSON's `generated_at`, also embedded in the HTML and the SARIF
    return proc.returncode, GENERATED_AT.sub("", proc.stdout), proc.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, required=True, help="checkout of the reference code")
    ap.add_argument("--after", type=Path, default=REPO, help="checkout of the changed code")
    ap.add_argument("--input", type=Path, action="append", default=[], help="more inputs (repeatable)")
    ap.add_argument("--formats", default=",".join(FORMATS))
    args = ap.parse_args()
    before, after = args.before.resolve(), args.after.resolve()
    inputs = [*default_inputs(), *(p.resolve() for p in args.input)]
    differ = 0
    compared = 0
    for path in inputs:
        for fmt in args.formats.split(","):
            a, b = run(before, path, fmt, REPO), run(after, path, fmt, REPO)
            compared += 1
            if a == b:
                continue
            differ += 1
            print(f"DIFFERS: {path} -f {fmt}: rc {a[0]} vs {b[0]}")
            for part, x, y in (("stdout", a[1], b[1]), ("stderr", a[2], b[2])):
                if x != y:
                    diff = difflib.unified_diff(x.splitlines(), y.splitlines(), part, part, n=1)
                    print("\n".join(line[:300] for line in list(diff)[:12]))
        print(f"{path}: compared", flush=True)
    print(f"{compared} outputs compared ({len(inputs)} inputs x formats), {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
