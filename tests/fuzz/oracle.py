"""Run the CLI on a fuzz case and judge the outcome against the issue's bar (docs/reliability.md):
0 tracebacks, 0 hangs, 0 exit-0 outputs with a value outside its documented range, 0 reads of a file
other than the one named; a rejected input is exit 2 with one `tilescope: error:` line naming it.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilescope.interrupt import Interrupted
from tilescope.io.validate import range_of
from tilescope.text.escape import terminal_text

COMMANDS: tuple[tuple[str, ...], ...] = (
    ("info",),
    ("kernels", "--format", "json"),
    ("analyze", "--format", "json"),
)
OUTCOMES = (
    "accepted",
    "rejected",
    "traceback",
    "hang",
    "bad_exit",
    "bad_error",
    "out_of_range",
    "invalid_json",
    "wrong_file",
    "wrote_files",
)
FAILURES = frozenset(OUTCOMES) - {"accepted", "rejected"}
TIMEOUT_S = 60
# Output names whose documented range (docs/metrics.md) is 0..1 / 0..100; everything `*_us` is >= 0
_UNIT_INTERVAL = ("_share", "share", "coverage", "share_of_total", "occupancy")
_PERCENT_0_100 = ("achieved_pct",)
# a launch's or kernel's share of its speed of light: above 100 when it ran faster than its
# ceiling, shown and flagged (docs/metrics.md §3.5), never negative
_PERCENT_NON_NEGATIVE = ("sol_pct",)


@dataclass
class Result:
    command: str
    outcome: str
    detail: str = ""


class _Hang(Exception):
    pass


@contextlib.contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    def ring(signum: int, frame: object) -> None:
        raise _Hang()

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run_in_process(args: list[str], timeout: int = TIMEOUT_S) -> tuple[int | None, str, str, str]:
    """(exit code, stdout, stderr, traceback) of `tilescope ARGS` in this process; code None: a hang."""
    from tilescope.cli import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with _alarm(timeout), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
    except _Hang:
        return None, out.getvalue(), err.getvalue(), ""
    except (KeyboardInterrupt, Interrupted):
        raise  # the fuzzer itself was interrupted: stop the run, do not count it as a case
    except BaseException as exc:  # anything escaping main is a traceback the user would see
        import traceback

        return 1, out.getvalue(), err.getvalue(), "".join(traceback.format_exception(exc))[-2000:]
    return code, out.getvalue(), err.getvalue(), ""


def run_subprocess(args: list[str], cwd: Path, timeout: int = TIMEOUT_S) -> tuple[int | None, str, str, str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120"}
    try:
        p = subprocess.run(
            [sys.executable, "-m", "tilescope.cli", *args],
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=timeout,
            env=env,
            errors="replace",
        )
    except subprocess.TimeoutExpired:
        return None, "", "", ""
    tb = p.stderr if "Traceback (most recent call last)" in p.stderr else ""
    return p.returncode, p.stdout, p.stderr, tb


def _reject_constant(name: str) -> float:
    raise ValueError(f"JSON constant {name} (NaN/Infinity are not JSON)")


def _out_of_range(key: str, value: float) -> bool:
    if not math.isfinite(value):
        return True
    if key.endswith(_UNIT_INTERVAL):
        return not (-1e-9 <= value <= 1 + 1e-9)
    if key in _PERCENT_0_100:
        return not (-1e-9 <= value <= 100 + 1e-6)
    if key in _PERCENT_NON_NEGATIVE:
        return value < -1e-9
    if key.endswith("_us"):
        return value < 0
    rng = range_of(key)
    if rng is not None and (key.endswith("_ratio") or key in ("aic_total_cycles", "aiv_total_cycles")):
        return not (rng.lo <= value <= rng.hi)
    return False


def _walk(x: Any, key: str = "") -> Iterator[tuple[str, float]]:
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _walk(v, str(k))
    elif isinstance(x, list):
        for v in x:
            yield from _walk(v, key)
    elif isinstance(x, int) and not isinstance(x, bool):
        # an integer beyond int64 is no count any reader can take back (and beyond float: OverflowError)
        yield key, float(x) if abs(x) < 2**63 else math.inf
    elif isinstance(x, float):
        yield key, x


def judge_output(command: str, stdout: str) -> tuple[str, str]:
    if command == "info":
        return "accepted", ""
    try:
        doc = json.loads(stdout, parse_constant=_reject_constant)
    except ValueError as exc:
        return "invalid_json", str(exc)[:200]
    for key, value in _walk(doc):
        if _out_of_range(key, value):
            return "out_of_range", f"{key} = {value!r}"
    return "accepted", ""


def judge(command: str, code: int | None, stdout: str, stderr: str, tb: str, named: str) -> Result:
    if code is None:
        return Result(command, "hang", f"no answer in {TIMEOUT_S} s")
    if tb:
        return Result(command, "traceback", tb.strip().splitlines()[-1][:300])
    if code == 0:
        outcome, detail = judge_output(command, stdout)
        return Result(command, outcome, detail)
    if code == 2:
        lines = [ln for ln in stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("tilescope: error:")]
        if len(errors) != 1 or not lines[-1].startswith("tilescope: error:"):
            return Result(command, "bad_error", stderr[-300:])
        shown = (named, Path(named).name, terminal_text(named), terminal_text(Path(named).name))
        if not any(s in errors[0] for s in shown):  # the line shows control characters escaped
            return Result(command, "bad_error", f"does not name the input: {errors[0][:200]}")
        return Result(command, "rejected", errors[0][:200])
    return Result(command, "bad_exit", f"exit {code}: {stderr[-300:]}")


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def _normalised(text: str, path: Path) -> str:
    return text.replace(str(path.parent), "<DIR>").replace(json.dumps(str(path.parent))[1:-1], "<DIR>")


def check_case(case_path: Path, twin: Path | None, subprocess_mode: bool, cwd: Path) -> list[Result]:
    """Every command on one case; odd-name cases must give what the plain-named twin gives."""
    results = []
    case_dir = case_path.parent if case_path.is_file() else case_path
    before = _files(case_dir.parent)
    for cmd in COMMANDS:
        args = [*cmd[:1], str(case_path), *cmd[1:]]
        run = run_subprocess(args, cwd) if subprocess_mode else run_in_process(args)
        result = judge(cmd[0], *run, named=str(case_path))
        if twin is not None and result.outcome in ("accepted", "rejected"):
            targs = [*cmd[:1], str(twin), *cmd[1:]]
            trun = run_subprocess(targs, cwd) if subprocess_mode else run_in_process(targs)
            if trun[0] != run[0] or (
                cmd[0] == "kernels" and _normalised(trun[1], twin) != _normalised(run[1], case_path)
            ):
                result = Result(cmd[0], "wrong_file", f"exit {run[0]} vs plain-named twin {trun[0]}")
        results.append(result)
    created = _files(case_dir.parent) - before
    if created:
        results.append(Result("*", "wrote_files", ", ".join(sorted(p.name for p in created))[:200]))
    return results
