"""What one lowering of one PrimFunc produced, and how a failure reads — shared by the in-process
capture (tilelang 0.1.15) and the tilelang-ascend worker, which runs in its own interpreter (an
emulated arm64 root on x86): standard library and analyzer.ir.scopes only.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from analyzer.ir.scopes import ASCEND_0115, hardware_for

# Passes after which the IR is recorded (stage name -> pass name); "final" is the lowered device module.
STAGE_PASSES = {
    "layout_inference": "tl.AscendLayoutInference",
    "auto_schedule": "tl.AutoSchedule",
    "multi_buffer": "tl.MaterializeMultiBuffer",
}

# Example: Z3 loop scheduling failed: scope "shared.l1" capacity 524288 is insufficient for minimum
#          buffer usage 786432. Try using T.annotate_unlimit_memory("shared.l1") or reduce buffer sizes.
CAPACITY_RE = re.compile(
    r'scope "(?P<scope>[\w.]+)" capacity (?P<capacity>\d+) is insufficient for minimum buffer usage '
    r"(?P<required>\d+)"
)


@dataclass
class KernelCapture:
    """One PrimFunc: its texts per stage and what the walker read."""

    name: str  # PrimFunc name (global_symbol)
    label: str  # how the user selected it (function name, tuple index or dict key)
    stages: dict[str, str] = field(default_factory=dict)  # stage -> text ("tvmscript", ..., "ascendc")
    walked: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    lowered_allocations: list[dict[str, Any]] = field(default_factory=list)
    failure: dict[str, Any] | None = None
    lower_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KernelCapture:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@contextlib.contextmanager
def captured_fd2() -> Iterator[list[str]]:
    """Route native stderr (TVM's `[hh:mm:ss] : Fatal: ...` lines) to a buffer we can quote."""
    out: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield out
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            out.append(tmp.read().decode("utf-8", "replace"))


# Example: "0: tvm::transform::Pass::operator()" — a frame line of a TVM backtrace
_FRAME_RE = re.compile(r"^\d+: ")
# Example: Cannot find value for constexpr variable `M`
CONSTEXPR_MISSING_RE = re.compile(r"Cannot find value for constexpr variable `(?P<name>\w+)`")


def classify_failure(
    exc: BaseException, stage: str, last_pass: str | None, dialect: str = ASCEND_0115
) -> dict[str, Any]:
    """A lowering/build exception as a finding-ready dict (numbers parsed from the capacity message)."""

    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    m = CAPACITY_RE.search(text)
    msg = next((ln for ln in reversed(lines) if "capacity" in ln), None) if m else None
    if msg is None:
        # TVM's errors end in the "Check failed" / "...Error: ..." line; any other multi-line
        # message states its cause first (TileLang: "Cannot find value for constexpr variable `M`",
        # then two lines of advice) — the last line was shown before, which named no cause
        causes = [ln for ln in lines if not ln.startswith(("Traceback", "File ")) and not _FRAME_RE.match(ln)]
        msg = next(
            (ln for ln in reversed(lines) if "Check failed" in ln or "Error" in ln),
            causes[0] if causes else (lines[-1] if lines else ""),
        )
    failure: dict[str, Any] = {
        "stage": stage,
        "pass": last_pass,
        "kind": "capacity" if m else ("internal" if type(exc).__name__ == "InternalError" else "exception"),
        "exception": type(exc).__name__,
        "message": msg[:1000],
    }
    # The whole story without the native backtrace frames, for `--debug` (the message is one line).
    detail = "\n".join(ln for ln in text.splitlines() if ln.strip() and not _FRAME_RE.match(ln.strip()))
    if detail and detail != failure["message"]:
        failure["detail"] = detail[:8000]
    if m:
        scope = m.group("scope")
        # The scheduler names UB "shared" although UB tiles are allocated as shared.dyn.
        failure.update(
            scope=scope,
            hardware=hardware_for(scope, dialect),
            capacity_bytes=int(m.group("capacity")),
            required_bytes=int(m.group("required")),
        )
    return failure
