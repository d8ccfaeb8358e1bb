"""The run bundle's manifest.json: model, versions, host facts and schema validation.

A bundle (design.md §1) is a directory `manifest.json` + `profile/` + `ir/` (+ `collect/` with the
jobs, launcher and logs of the commands that ran, + `kernel/` with a copy of the kernel file). The
manifest is validated against `schema/manifest.schema.json` before it is written, so a bundle on disk
always carries a manifest the loader can trust.
"""

from __future__ import annotations

import datetime as _dt
import functools
import importlib.metadata
import json
import os
import platform
import re
import socket
from pathlib import Path
from typing import Any

from tilescope.collectors.spec import file_sha256

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("schema") / "manifest.schema.json"
MANIFEST_NAME = "manifest.json"

# Environment variables that decide what ran where; recorded verbatim (no secrets among them).
RECORDED_ENV = (
    "ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_RT_VISIBLE_DEVICES", "ASCEND_NPU_ARCH",
    "BISHENG_HOME", "TILELANG_DISABLE_CACHE", "TL_PLATFORM", "ASCEND_WORK_PATH",
    "TORCH_DEVICE_BACKEND_AUTOLOAD",
)
CANN_HOMES = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH")
DEFAULT_CANN_HOME = Path("/usr/local/Ascend/ascend-toolkit/latest")


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def dist_version(name: str) -> str | None:
    """A distribution's version from its metadata: no import (torch_npu cannot import without CANN)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


# Example: "version=8.0.RC3" (ascend_toolkit_install.info), "Version=8.0.RC3" (version.info)
_VERSION_LINE = re.compile(r"^\s*version\s*=\s*(\S+)\s*$", re.IGNORECASE | re.MULTILINE)
# Example: 'runtime_running_version=[7.0.0.5.242:8.0.RC1]' (old version.cfg)
_RUNNING_VERSION = re.compile(r"running_version=\[[^:\]]*:([^\]]+)\]")


def cann_version(env: dict[str, str] | None = None) -> tuple[str | None, str | None]:
    """(version, file it came from) of the CANN toolkit, or (None, None) when there is none.

    Looks in $ASCEND_TOOLKIT_HOME, $ASCEND_HOME_PATH, then the default install path, at the files
    the toolkit ships: <arch>-linux/ascend_toolkit_install.info, {compiler,runtime}/version.info,
    version.cfg.
    """
    env = dict(os.environ) if env is None else env
    homes = [Path(env[k]) for k in CANN_HOMES if env.get(k)] + [DEFAULT_CANN_HOME]
    for home in homes:
        if not home.is_dir():
            continue
        candidates = [*sorted(home.glob("*-linux/ascend_toolkit_install.info")),
                      home / "compiler" / "version.info", home / "runtime" / "version.info",
                      home / "version.cfg"]
        for path in candidates:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            m = _VERSION_LINE.search(text) or _RUNNING_VERSION.search(text)
            if m:
                return m.group(1).strip(), str(path)
    return None, None


def versions(env: dict[str, str] | None = None) -> dict[str, Any]:
    cann, source = cann_version(env)
    return {
        "cann": cann,
        "cann_source": source,
        "torch": dist_version("torch"),
        "torch_npu": dist_version("torch-npu") or dist_version("torch_npu"),
        "tilelang": dist_version("tilelang"),
        "tilescope": dist_version("tilescope"),
        "python": platform.python_version(),
    }


def host_info(env: dict[str, str] | None = None) -> dict[str, Any]:
    env = dict(os.environ) if env is None else env
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "environment": {k: env[k] for k in RECORDED_ENV if k in env},
    }


def jsonable(value: Any) -> Any:
    """Parameter values as JSON: factory defaults may be dtype objects (T.float32) — keep their text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return str(value)


@functools.cache
def manifest_schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return data


def validate_manifest(manifest: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when the manifest breaks the schema (a bug, not user input)."""
    # deferred: jsonschema (~0.1 s) only when validating
    import jsonschema

    jsonschema.validate(manifest, manifest_schema())


def write_manifest(bundle: Path, manifest: dict[str, Any]) -> Path:
    validate_manifest(manifest)
    path = bundle / MANIFEST_NAME
    path.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path


def read_manifest(bundle: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((bundle / MANIFEST_NAME).read_text(encoding="utf-8"))
    return data


def base_manifest(env: dict[str, str] | None = None) -> dict[str, Any]:
    """The fields every manifest has, with the empty/unknown defaults the schema allows."""
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "tilescope",
        "created_utc": utc_now(),
        "ir_only": False,
        "kernel": {},
        "parameters": {},
        "backend": None,
        "metric_groups": [],
        "warmup": 0,
        "repeat": 1,
        "chip": None,
        "versions": versions(env),
        "host": host_info(env),
        "commands": [],
        "correctness": {"status": "not_run", "reason": "not attempted"},
        "profile": {"path": "profile", "layout": None, "runs": []},
        "ir": {"path": "ir", "captured": False},
    }


def kernel_record(path: Path, function: str | None, entry: str | None = None) -> dict[str, Any]:
    """manifest["kernel"] for a kernel file copied to the bundle's `kernel/<name>`."""
    return {"file": str(path), "name": path.name, "sha256": file_sha256(path), "function": function,
            "entry": entry, "source": f"kernel/{path.name}"}


def ir_only_manifest(kernel_path: Path, function: str | None, entry: str | None, parameters: dict[str, Any],
                     chip: str | None, lowered: bool, correctness: dict[str, Any],
                     env: dict[str, str] | None = None) -> dict[str, Any]:
    """The manifest of a bundle with IR and no profile (`tilescope lint --out`; `collect --ir-only`
    adds its CPU check and the commands that ran)."""
    manifest = base_manifest(env)
    manifest.update(ir_only=True, parameters=jsonable(parameters), chip=chip, correctness=correctness,
                    kernel=kernel_record(kernel_path, function, entry),
                    ir={"path": "ir", "captured": True, "lowered": bool(lowered)})
    return manifest


PORTABLE_FILES = ("manifest.json", "ir/ir.json", "collect/*.json", "collect/*.log")


def make_portable(bundle: Path, root: Path) -> list[Path]:
    """Rewrite absolute paths under `root` as `root`-relative in a bundle's records (for bundles
    committed to a repository, which must not carry one machine's directories); returns the files
    changed. The kernel's sha256 and every other value are left alone."""
    prefix = str(root.resolve()).rstrip("/") + "/"
    escaped = json.dumps(prefix)[1:-1]  # the same prefix as it appears inside JSON strings
    changed = []
    for pattern in PORTABLE_FILES:
        for path in sorted(bundle.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            new = text.replace(escaped, "").replace(prefix, "")
            if new != text:
                path.write_text(new, encoding="utf-8")
                changed.append(path)
    if (bundle / MANIFEST_NAME).is_file():
        validate_manifest(read_manifest(bundle))
    return changed


if __name__ == "__main__":  # python -m tilescope.collectors.bundle --portable BUNDLE [ROOT]
    import sys

    if len(sys.argv) not in (3, 4) or sys.argv[1] != "--portable":
        sys.exit("usage: python -m tilescope.collectors.bundle --portable BUNDLE "
                 "[ROOT (default: working directory)]")
    for p in make_portable(Path(sys.argv[2]), Path(sys.argv[3] if len(sys.argv) == 4 else os.getcwd())):
        print(p)
