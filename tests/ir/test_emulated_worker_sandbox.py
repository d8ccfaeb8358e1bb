"""What the emulated tilelang-ascend worker sees of the host (tilescope.ir.foreign._command): issue
#27 found the host's `/` bound read-write at `/host`, so a kernel file lint lowered wrote onto the
host and into the persistent root. The command now binds only the kernels' folders and tilescope's
package, read-only, on a read-only root with empty /tmp, /root and /dev.

The arm64 root itself is not set up here, so the first test reads the command it builds; the second
runs that very command on a stand-in root (a shell as its "python", which reports what it can read
and write) when this machine lets a test make a private mount namespace as root."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tilescope.ir import foreign
from tilescope.run_module import package_folders


def _steps(root: Path, kernel_dirs: list[Path]) -> tuple[list[str], list[str]]:
    interp = foreign.Interpreter(["unshare"], "emulated", root)
    argv = foreign._command(interp, {"PATH": "/usr/bin:/bin"}, kernel_dirs)
    assert argv[0] == "unshare" and argv[-3:-1] == ["sh", "-c"]
    steps = argv[-1].split(" && ")
    return argv, steps


def test_only_the_kernels_folder_and_the_package_are_bound_read_only(tmp_path: Path) -> None:
    root = tmp_path / "root"
    kernels = tmp_path / "my kernels"
    _, steps = _steps(root, [kernels, kernels / "sub"])  # a folder inside another: seen through it
    binds = [shlex.split(s)[2:] for s in steps if s.startswith("mount --bind ")]
    host = f"{root}/host"
    expected = sorted({kernels.resolve(), *(Path(p) for p in package_folders().values())})
    expected = [p for p in expected if not any(p != q and p.is_relative_to(q) for q in expected)]
    assert binds[0] == [str(root), str(root)]  # the root onto itself, to make it read-only
    assert binds[1:] == [[str(p), host + str(p)] for p in expected] + [
        [f"/dev/{d}", f"{root}/dev/{d}"] for d in foreign.DEVICES
    ]
    assert not any(s.startswith("mount --rbind") for s in steps)  # the host's / (or /dev) whole: never
    for i, step in enumerate(steps):
        words = shlex.split(step)
        if step.startswith("mount --bind ") and words[3].startswith(host):
            assert shlex.split(steps[i + 1]) == [
                "mount",
                "-o",
                "remount,bind,ro,nosuid,nodev,noexec",
                words[3],
            ]
    assert shlex.split(steps[1]) == ["mount", "-o", "remount,bind,ro,nosuid,nodev", str(root)]
    assert f"mount -o remount,ro {host}" in steps
    for tmpfs in ("/tmp", "/dev", "/dev/shm", "/host"):
        assert any(s.startswith("mount -t tmpfs") and s.endswith(f"{root}{tmpfs}") for s in steps), tmpfs
    # HOME: the root's own (TileLang's cache in it), its changes in /tmp's memory; else an empty one
    overlay = f"lowerdir={root}/root,upperdir={root}/tmp/.home-changes,workdir={root}/tmp/.home-work"
    assert (
        f"{{ mount -t overlay overlay -o {overlay} {root}/root || mount -t tmpfs tmpfs {root}/root; }}"
        in steps
    )
    last = shlex.split(steps[-1])
    assert last[:5] == ["exec", "chroot", str(root), "/usr/bin/env", "-i"]
    assert last[-2].startswith(foreign.HOST + "/") and last[-2].endswith("run_module.py")  # through a binding


STAND_IN = r"""#!/bin/sh
# the emulated interpreter's stand-in: what can it read and write?
kernel_dir="$KERNEL_DIR"
out=""
can_write() { ( : > "$1" ) 2>/dev/null && echo yes || echo no; }
seen=""
for f in /host/* /host/*/*; do seen="$seen $f"; done
printf '{"jobs": [{"module_readable": "%s", "kernel_readable": "%s", "write_kernel_dir": "%s",
 "write_root": "%s", "write_host": "%s", "write_tmp": "%s", "write_home": "%s", "dev_null": "%s",
 "home_cache": "%s", "host_top": "%s"}]}' \
  "$([ -r "$1" ] && echo yes || echo no)" \
  "$([ -r "/host$kernel_dir/k.py" ] && echo yes || echo no)" \
  "$(can_write "/host$kernel_dir/marker")" "$(can_write /opt/marker)" "$(can_write /host/marker)" \
  "$(can_write /tmp/marker)" "$(can_write /root/marker)" "$([ -c /dev/null ] && echo yes || echo no)" \
  "$([ -r /root/.tilelang/cache/adapter.so ] && echo yes || echo no)" \
  "$seen"
"""


def _stand_in_root(root: Path, kernel_dir: Path) -> None:
    """An x86 root with a shell, `env` and their libraries, and the stand-in as /opt/tla/bin/python."""
    for name in ("proc", "host", "tmp", "root", "dev", "opt/tla/bin", "usr/bin", "bin"):
        (root / name).mkdir(parents=True, exist_ok=True)
    for binary, inside in (
        (shutil.which("dash") or "/bin/sh", "bin/sh"),
        (shutil.which("env"), "usr/bin/env"),
    ):
        assert binary is not None
        shutil.copy2(os.path.realpath(binary), root / inside)
        libs = subprocess.run(["ldd", os.path.realpath(binary)], capture_output=True, text=True, check=True)
        for word in libs.stdout.split():
            if word.startswith("/") and os.path.exists(word):
                (root / word.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(os.path.realpath(word), root / word.lstrip("/"))
    (root / "root/.tilelang/cache").mkdir(parents=True)
    (root / "root/.tilelang/cache/adapter.so").write_bytes(b"built once by the setup script")
    python = root / "opt/tla/bin/python"
    python.write_text(STAND_IN.replace('"$KERNEL_DIR"', shlex.quote(str(kernel_dir))))
    python.chmod(0o755)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ldd") is None,
    reason="needs root and unshare to make the worker's mount namespace",
)
def test_the_command_runs_on_a_stand_in_root(tmp_path: Path) -> None:
    kernel_dir = (tmp_path / "kernels").resolve()
    kernel_dir.mkdir()
    (kernel_dir / "k.py").write_text("def f():\n    pass\n")
    root = tmp_path / "root"
    _stand_in_root(root, kernel_dir)
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        pytest.skip("no private mount namespace here")
    interp = foreign.Interpreter([shutil.which("unshare") or "unshare"], "emulated", root)
    answer = foreign.run_jobs(interp, [(kernel_dir / "k.py", ["f"], [{}])])[0]
    assert answer["module_readable"] == "yes" and answer["kernel_readable"] == "yes"
    assert (
        answer["write_kernel_dir"] == "no" and answer["write_root"] == "no" and answer["write_host"] == "no"
    )
    assert answer["write_tmp"] == "yes" and answer["write_home"] == "yes" and answer["dev_null"] == "yes"
    assert answer["home_cache"] == "yes"  # TileLang's cache in the root's HOME is seen
    top = {Path(p).parts[2] for p in answer["host_top"].split() if "*" not in p}
    assert top == {kernel_dir.parts[1], Path(package_folders()["tilescope"]).parts[1]}
    # nothing was left on the host, nor in the root
    assert not (kernel_dir / "marker").exists() and not (root / "opt/marker").exists()
    assert not (root / "tmp/marker").exists() and sorted(p.name for p in (root / "host").iterdir()) == []
    assert sorted(p.name for p in (root / "root").iterdir()) == [".tilelang"]
    assert json.dumps(answer)  # the stand-in's answer came back through run_jobs intact


# A kernel file that, while its builder runs in the emulated worker, tries to write everywhere it
# might reach, prints what happened (the worker's stderr), then builds a small Vector kernel so
# the lowering goes on as usual. Written for this test.
PROBE_KERNEL = r'''
import json
import os
import sys

import tilelang.language as T
import tilescope

def probe(M=64, N=256, dtype="float"):
    # in the builder: lint runs only the file's declarative part at module level
    here = os.path.dirname(os.path.abspath(__file__))  # /host/<the kernel's folder on the host>
    targets = {
        "own_folder": os.path.join(here, "marker"),
        "host_path_of_own_folder": os.path.join(here[len("/host"):], "marker"),
        "host_top": "/host/marker",
        "package": os.path.join(os.path.dirname(tilescope.__file__), "marker"),
        "root_opt": "/opt/marker",
        "root_etc": "/etc/marker",
        "tmp": "/tmp/marker",
        "home": "/root/marker",
        "dev_shm": "/dev/shm/marker",
    }
    outcome = {}
    for what, path in targets.items():
        try:
            with open(path, "w") as f:
                f.write("written by a linted kernel")
            outcome[what] = "written"
        except OSError as exc:
            outcome[what] = f"{type(exc).__name__}: {os.strerror(exc.errno)}"
    print("PROBE " + json.dumps(outcome), file=sys.stderr)

    @T.prim_func
    def copy_rows(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_ub = T.alloc_ub((M // 2, N), dtype)
            with T.Scope("V"):
                T.copy(A[vid * (M // 2), 0], a_ub)
                T.barrier_all()
                T.copy(a_ub, B[vid * (M // 2), 0])

    return copy_rows
'''


@pytest.mark.slow
@pytest.mark.skipif(
    (foreign.find_interpreter() or foreign.Interpreter([], "none", Path("/"))).kind != "emulated",
    reason="the emulated tilelang-ascend root is not set up here (bash scripts/setup-tilelang-ascend.sh)",
)
def test_a_kernel_in_the_real_emulated_worker_writes_nowhere_lasting(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue #27, under real emulation: the worker lowers the kernel, and the kernel's own code can
    write only to the in-memory /tmp, HOME and /dev/shm — gone with the process."""
    interp = foreign.find_interpreter()
    assert interp is not None
    kernel_dir = (tmp_path / "kernels").resolve()
    kernel_dir.mkdir()
    (kernel_dir / "probe.py").write_text(PROBE_KERNEL, encoding="utf-8")
    package = Path(package_folders()["tilescope"])
    watched = (kernel_dir, package, interp.root / "tmp", interp.root / "root")
    before = {p: sorted(os.listdir(p)) for p in watched}
    answer = foreign.run_jobs(interp, [(kernel_dir / "probe.py", ["probe"], [{}])], debug=True)[0]
    err = capfd.readouterr().err
    (run,) = answer["runs"]
    (kernel,) = run["kernels"]
    assert kernel["failure"] is None and "ascendc" in kernel["stages"]  # it lowered, under qemu
    line = next(ln for ln in err.splitlines() if ln.startswith("PROBE "))
    outcome = json.loads(line[len("PROBE "):])
    read_only = "OSError: Read-only file system"
    refused = ("own_folder", "host_top", "package", "root_opt", "root_etc")
    assert {k: outcome[k] for k in refused} == dict.fromkeys(refused, read_only)
    # the host's path is not there at all: only /host's bindings are
    assert outcome["host_path_of_own_folder"] in (read_only, "FileNotFoundError: No such file or directory")
    assert outcome["tmp"] == outcome["home"] == outcome["dev_shm"] == "written"
    # and nothing is left: not on the host, not in the root (the in-memory writes vanished)
    after = {p: sorted(os.listdir(p)) for p in before}
    assert after == before
    assert not (interp.root / "opt" / "marker").exists() and not (interp.root / "etc" / "marker").exists()
    assert not (interp.root / str(kernel_dir).lstrip("/") / "marker").exists()
