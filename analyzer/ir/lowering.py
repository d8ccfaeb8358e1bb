"""What one lowering of one PrimFunc produced, and how a failure reads — shared by the in-process
capture (tilelang 0.1.15) and the tilelang-ascend worker, which runs in its own interpreter (an
emulated arm64 root on x86): standard library and tilescope.ir.scopes only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import linecache
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from tilescope.ir.scopes import ASCEND_0115, hardware_for

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


# Example: matmul() missing 1 required positional argument: 'block_M'
#          matmul() got an unexpected keyword argument 'tiling'
#          matmul() takes from 0 to 3 positional arguments but 4 were given
#          missing a required argument: 'M'   (inspect.Signature.bind, as @tilelang.jit binds)
_CALL_TYPEERROR_RE = re.compile(
    r"(?P<func>[\w.<>]+)\(\) (?:missing \d+ required|got an unexpected keyword argument|got multiple values"
    r"|takes (?:from )?\d+)"
    r"|^(?:missing a required (?:keyword-only )?argument|too many positional arguments"
    r"|got an unexpected keyword argument|multiple values for argument)"
)
# installed packages, and tilescope's own analyzer/ (not the repository: its sample kernels are user code)
_PACKAGE_DIRS = ("-packages", os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)


def _user_frame(exc: BaseException, kernel_file: str | None) -> tuple[str, int] | None:
    """(file, line) of the innermost traceback frame when it is the kernel file's own code (the
    builder's Python body), not TileLang/TVM or tilescope: None otherwise. Without `kernel_file`
    (the tilelang-ascend worker), any file outside an installed package and tilescope counts."""
    tb = exc.__traceback__
    last: tuple[str, int] | None = None
    while tb is not None:
        last = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    if last is None:
        return None
    name = last[0]
    if kernel_file is not None:
        return last if os.path.abspath(name) == os.path.abspath(kernel_file) else None
    if name.startswith("<") or any(d in name for d in _PACKAGE_DIRS):
        return None
    return last


def usage_cause(exc: BaseException, kernel_file: str | None = None) -> dict[str, Any] | None:
    """Is a builder's failure the user's to fix rather than the kernel's? Then {"usage": what was
    expected, "where": "file:line" or None}; None for the kernel's own failures (a T.gemm shape
    check or an unsupported dtype inside TileLang, a capacity error: those stay TS500 findings).

    The user's: a T.const shape symbol without a value, a call with arguments the builder does not
    take (a TypeError naming its signature), a name the builder cannot find, and any error raised by
    the builder's own Python code (an `assert q_len % BR == 0` on its parameters)."""
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = lines[0] if lines else type(exc).__name__
    missing = CONSTEXPR_MISSING_RE.search(text)
    if missing:
        what = f"needs -p {missing['name']}=VALUE (a T.const shape symbol with no value)"
        return {"usage": what, "where": None}
    frame = _user_frame(exc, kernel_file)
    where = f"{frame[0]}:{frame[1]}" if frame else None
    if isinstance(exc, TypeError) and _CALL_TYPEERROR_RE.search(text):
        return {"usage": f"{first}; expected the builder's parameters (-p NAME=VALUE)", "where": where}
    if isinstance(exc, NameError):
        return {
            "usage": f"{first}; expected a name the builder can see (lint runs only the file's imports, "
            "definitions and assignments that call no script code)",
            "where": where,
        }
    if frame is None:
        return None
    stmt = linecache.getline(frame[0], frame[1]).strip()
    said = f": {first}" if text.strip() else ""
    if isinstance(exc, AssertionError):
        return {
            "usage": f"the builder rejected the parameters ({stmt}){said}; expected values that satisfy it",
            "where": where,
        }
    return {
        "usage": f"the builder raised {type(exc).__name__}{said} at `{stmt}`; expected parameters it accepts",
        "where": where,
    }


def classify_failure(
    exc: BaseException,
    stage: str,
    last_pass: str | None,
    dialect: str = ASCEND_0115,
    kernel_file: str | None = None,
) -> dict[str, Any]:
    """A lowering/build exception as a finding-ready dict (numbers parsed from the capacity message).

    kind: "capacity", "internal" (a TVM InternalError), "exception", or "usage" for a build failure
    that is the user's (usage_cause): the capture turns that into exit 2, never a TS500 finding.
    """

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
    usage = usage_cause(exc, kernel_file) if stage == "build" and not m else None
    if usage is not None:
        failure.update(kind="usage", **usage)
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


def stage_recorder(
    kc: KernelCapture,
    stage_passes: dict[str, str],
    versions_stage: str,
    on_pass: Callable[[str, Any], None] | None = None,
) -> Any:
    """A TVM pass instrument that scripts the module into `kc.stages` after each recorded pass
    (stage -> pass name), reads the buffer versions after `versions_stage`, calls `on_pass(name,
    module)` after every pass and keeps the last pass's name (`.last`, for failures) and all of
    them (`.passes`). Both stacks' lowerings use it; TVM is imported here, lazily."""
    # deferred: tilelang/tvm are the optional `tilelang` extra (and seconds to import); ir.walk only when
    #   used; `diff` and `analyze` run without it
    import tvm

    from tilescope.ir.walk import buffer_versions

    wanted = {v: k for k, v in stage_passes.items()}

    @tvm.instrument.pass_instrument
    class _Keep:
        """Do not assign self.name: it is a property of TVM's instruments."""

        def __init__(self) -> None:
            self.last: str | None = None
            self.passes: list[str] = []

        def run_after_pass(self, mod: Any, info: Any) -> None:
            self.last = str(info.name)
            self.passes.append(self.last)
            if on_pass is not None:
                on_pass(self.last, mod)
            stage = wanted.get(self.last)
            if stage is not None:
                kc.stages[stage] = mod.script()
                if stage == versions_stage:
                    kc.versions = buffer_versions(mod)

    return _Keep()


def flatten_primfuncs(
    label: str, obj: Any, prim_func_type: type, error: type[Exception]
) -> list[tuple[str, Any]]:
    """What a builder returned — one PrimFunc, a tuple/list of them or a dict name -> PrimFunc (a
    chain) — as (label, PrimFunc) pairs; anything else raises `error` (each stack's usage error)."""
    if isinstance(obj, prim_func_type):
        return [(label, obj)]
    if isinstance(obj, dict):
        return [x for k, v in obj.items() for x in flatten_primfuncs(str(k), v, prim_func_type, error)]
    if isinstance(obj, (list, tuple)):
        return [
            x for i, v in enumerate(obj) for x in flatten_primfuncs(f"{label}[{i}]", v, prim_func_type, error)
        ]
    raise error(f"{label} returned {type(obj).__name__}, not a T.prim_func (or a tuple/dict of them)")


# A run's parameters for the tilelang-ascend worker carry, under this key, the dataclass each
# `-p NAME.FIELD=VALUE` head takes (the host found it in the file's syntax: default, annotation or
# `NAME = NAME or Cls()` fallback); the worker pops it before calling the builder.
NESTED_KEY = "__tilescope_dataclasses__"


def nest_fields(
    params: dict[str, Any],
    default_of: Callable[[str], Any],
    class_of: Callable[[str], Any],
    fail: Callable[[str, dict[str, Any], Exception], Exception],
) -> dict[str, Any]:
    """`{"tiling.block_q": 64}` -> `{"tiling": dataclasses.replace(base, block_q=64)}`: `base` is
    the builder's own default for `tiling` when it is a dataclass instance, else `class_of(head)()`
    (a default of None with the class constructed in the body). `fail(head, fields, exc)` makes the
    error to raise when the class cannot take those fields. Used by both lowering stacks: the
    950's in this process, tilelang-ascend's in its worker (standard library only)."""
    fields: dict[str, dict[str, Any]] = {}
    out: dict[str, Any] = {}
    for k, v in params.items():
        head, dot, name = k.partition(".")
        if dot:
            fields.setdefault(head, {})[name] = v
        else:
            out[k] = v
    for head, values in fields.items():
        base = default_of(head)
        try:
            if not (dataclasses.is_dataclass(base) and not isinstance(base, type)):
                base = class_of(head)()
            out[head] = dataclasses.replace(base, **values)
        except (TypeError, ValueError, AttributeError) as exc:
            raise fail(head, values, exc) from None
    return out


# The stage texts' file names inside a bundle's ir/ (written by capture, listed in ir.json).
STAGE_FILES = {
    "tvmscript": "tvmscript.py",
    "layout_inference": "layout_inference.py",
    "auto_schedule": "auto_schedule.py",
    "multi_buffer": "multi_buffer.py",
    "final": "final.py",
    "ascendc": "kernel.cpp",
}


def stage_file(kernel_name: str, stage: str, several: bool) -> str:
    """Path of a stage text inside ir/: plain names for one kernel, `<kernel>/...` for a chain."""
    base = STAGE_FILES[stage]
    return f"{kernel_name}/{base}" if several else base
