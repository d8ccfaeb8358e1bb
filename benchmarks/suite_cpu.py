"""What a command (by default the whole test suite) costs the machine: wall time, the busy CPU of the
whole machine (from /proc/stat, so Chromium and every subprocess count), the part of it Chromium
used (each of its processes read from /proc while they live), and the machine's speed before and
after (a single-threaded busy loop: this project's 2-core machines differ by up to 18 % from run
to run, so a wall time means little without it).

    .venv/bin/python benchmarks/suite_cpu.py                       # bash scripts/test.sh
    .venv/bin/python benchmarks/suite_cpu.py -- bash scripts/test.sh -m "not slow"

Linux only (/proc). The command's own output goes to its stdout and stderr; the summary is the last
line on stderr. docs/benchmarks.md ("Session 19", the house section) has its readings.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """Busy CPU seconds of the whole machine since boot: user, nice, system, irq, softirq."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / TICK


def busy_loop_mturns(seconds: float = 5.0) -> float:
    """Millions of turns of an empty loop per `seconds`, one thread: the machine's speed now."""
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        n += 1
    return n / 1e6


class ChromiumCpu:
    """Sums the CPU time of every Chromium process seen while it runs: a process's time is read
    from /proc each tenth of a second and the last reading kept after it ends (a page's renderer
    ends with its page, and nobody waits for it whose rusage the suite could read)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], float] = {}  # (pid, start time) -> CPU s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ChromiumCpu:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def total_s(self) -> float:
        return sum(self.seen.values())

    def _run(self) -> None:
        while not self._stop.is_set():
            self._scan()
            self._stop.wait(0.1)
        self._scan()

    def _scan(self) -> None:
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
            except OSError:  # the process ended between the listing and the read
                continue
            name = text[text.index("(") + 1 : text.rindex(")")].lower()
            if "chrom" not in name and "headless" not in name:
                continue
            rest = text[text.rindex(")") + 2 :].split()
            # fields 14 and 15 of stat (utime, stime); 22 (start time) tells a reused pid apart
            self.seen[(stat.parent.name, rest[19])] = (int(rest[11]) + int(rest[12])) / TICK


def main(argv: list[str]) -> int:
    command = argv[argv.index("--") + 1 :] if "--" in argv else ["bash", "scripts/test.sh"]
    if not command or not sys.platform.startswith("linux"):
        print("usage (Linux): suite_cpu.py [-- COMMAND ...]", file=sys.stderr)
        return 2
    speed_before = busy_loop_mturns()
    busy0, wall0 = machine_busy_s(), time.perf_counter()
    with ChromiumCpu() as chromium:
        code = subprocess.call(command, cwd=ROOT)
    wall, busy = time.perf_counter() - wall0, machine_busy_s() - busy0
    speed_after = busy_loop_mturns()
    whole = round(wall)  # minutes and seconds of the rounded time: 359.6 s is 6 min 00 s, not 5 min 60 s
    print(f"suite_cpu: exit {code}, wall {whole} s ({whole // 60} min {whole % 60:02d} s), "
          f"machine busy {busy:.0f} CPU s, Chromium {chromium.total_s():.0f} CPU s, busy loop "
          f"{speed_before:.1f} -> {speed_after:.1f} M turns/5 s", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
