"""Each kernel lowered once per test process: the suite's expensive fixture that tests reach
through the CLI and the library, not through a fixture of their own.

Lowering a kernel with TileLang takes 0.2-8 s, and many tests lint the same kernel with the same
parameters: in the run of 2026-12-07 one worker lowered flash_attention.py three times (4.8 s
each) and matmul.py with its defaults nine times, 27 of the suite's 81 lowering seconds. So the
tests' processes keep what `tilescope.ir.capture._capture_here` returned, keyed by everything its
answer depends on, and hand each caller its own deep copy. A result is shared only when the
kernel file and every .py beside it (the helpers it may import) read the same, with the same
function names, parameters and chip; a failure of the builder (an exception) is never kept.
Children the tests start (`lint --sweep`'s workers, `tilescope` as a process) lower for
themselves, as a user's would.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from pathlib import Path
from typing import Any

from tilescope.ir import capture  # the module: share_lowerings replaces its _capture_here
from tilescope.ir.lowering import KernelCapture


def _folder_digest(path: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(path.parent.glob("*.py")):
        digest.update(file.name.encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


def _plain(value: Any) -> Any:
    """`value` with TVM's strings (tvm_ffi String, a str holding a TVM object: the stage texts and
    many scopes and indices the walker read) made Python's own. Kept past the end of the process
    they would be freed after TVM's runtime, and the interpreter's exit crashes with SIGSEGV."""
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if type(value) in (list, tuple):  # exactly: a named tuple is rebuilt otherwise
        return type(value)(_plain(v) for v in value)
    if isinstance(value, (capture.IRCapture, KernelCapture)):
        return dataclasses.replace(value, **{f.name: _plain(getattr(value, f.name))
                                             for f in dataclasses.fields(value) if f.init})
    return value


def share_lowerings() -> None:
    """Patch this process's capture to keep each distinct lowering (see the module's docstring)."""
    lower_here = capture._capture_here
    kept: dict[tuple[str, ...], Any] = {}

    def shared(tilelang: Any, path: Path, names: list[str], tree: Any, sigs: Any,
               params: dict[str, Any], chip: Any) -> Any:
        key = (str(path), _folder_digest(path), repr(names), repr(sorted(params.items(), key=str)),
               repr(chip), str(getattr(tilelang, "__version__", "")))
        if key not in kept:
            kept[key] = _plain(lower_here(tilelang, path, names, tree, sigs, params, chip))
        return copy.deepcopy(kept[key])

    capture._capture_here = shared  # type: ignore[attr-defined]
