"""Signals and output files (issue #13): SIGINT/SIGTERM end every command with 130/143 and one
stderr line, the previous `-o` file untouched and no temporary left (output temp files, DuckDB
scratch directories), `kill -9` leaves no visible temporary, and `-o` onto a symlink, a FIFO or a
device writes what the user meant.

The real-process tests stop the CLI at a named point with the TILESCOPE_TEST_HOLD hook
(tilescope.interrupt.hold_point) and signal it there, or poll /proc for its anonymous output file:
no sleep-and-hope.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import typer

from tilescope import interrupt
from tilescope.cli import main

from support import REPO_ROOT

REPO = REPO_ROOT
SAMPLE = REPO / "sample_traces" / "attention_unfused"
TORCH_OUT = "localhost_12345_20261130000000000_ascend_pt/ASCEND_PROFILER_OUTPUT"
SAMPLE_CSV = SAMPLE / TORCH_OUT / "kernel_details.csv"
OLD = "the previous report\n"
CSV_HEAD = '"step_id","model_id",'  # the first columns `kernels -f csv` writes
# a guard against a hung child, never a timing assertion
PATIENCE_S = 120.0


def _start(args: list[str], tmpdir: Path, hold: str | None = None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TILESCOPE_DEBUG", interrupt.HOLD_ENV)}
    env["TMPDIR"] = str(tmpdir)
    if hold is not None:
        env[interrupt.HOLD_ENV] = hold
    return subprocess.Popen(
        [sys.executable, "-m", "tilescope.cli", *args],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    """The child starts with SIGINT at its default, as from a terminal: a suite started from a
    background job (`cmd &`) has SIGINT ignored, the child would inherit that, and tilescope keeps
    an ignored SIGINT ignored on purpose (test_an_ignored_signal_stays_ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for(proc: subprocess.Popen[str], ready: Any) -> None:
    """Poll until `ready()` is true; fail with the child's stderr if it ended first."""
    deadline = time.monotonic() + PATIENCE_S
    while not ready():
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"the command ended (rc {proc.returncode}) before the point to signal: {err}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the command never reached the point to signal")
        time.sleep(0.01)


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=PATIENCE_S)
    return proc.returncode, out, err


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _has_o_tmpfile(folder: Path) -> bool:
    try:
        fd = os.open(folder, os.O_TMPFILE | os.O_WRONLY, 0o600)
    except (AttributeError, OSError):
        return False
    os.close(fd)
    return True


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """(output folder, TMPDIR of the child), both empty."""
    out, tmpdir = tmp_path / "out", tmp_path / "tmp"
    out.mkdir()
    tmpdir.mkdir()
    return out, tmpdir


# ---- a signal at the last moment before the output is put in place -----------------------------

COMMANDS = {
    "analyze": (["analyze", str(SAMPLE), "-f", "md"], "r.md"),
    "kernels": (["kernels", str(SAMPLE_CSV), "-f", "csv"], "k.csv"),
}


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.slow  # about 1 s each (#23: the quick loop keeps tests under 1 s)
def test_signal_before_the_commit_keeps_the_old_output(
    dirs: tuple[Path, Path], command: str, sig: int, code: int
) -> None:
    out_dir, tmpdir = dirs
    args, name = COMMANDS[command]
    target = out_dir / name
    target.write_text(OLD)
    marker = tmpdir.parent / "held"
    proc = _start([*args, "-o", str(target)], tmpdir, hold=f"output:{marker}")
    _wait_for(proc, marker.exists)  # the new content is fully written, not yet in place
    proc.send_signal(sig)
    rc, out, err = _finish(proc)
    assert (rc, err, out) == (code, "tilescope: interrupted\n", "")
    assert target.read_text() == OLD
    assert _listing(out_dir) == [name]  # no .k.csv.*.tmp
    assert _listing(tmpdir) == []


@pytest.mark.slow  # about 1 s each (#23: the quick loop keeps tests under 1 s)
def test_kill_9_before_the_commit_leaves_no_temporary(dirs: tuple[Path, Path]) -> None:
    out_dir, tmpdir = dirs
    if not _has_o_tmpfile(out_dir):
        pytest.skip("no O_TMPFILE here: the mkstemp fallback cannot survive kill -9")
    old, new = out_dir / "old.csv", out_dir / "new.csv"
    old.write_text(OLD)
    for target in (old, new):  # replacing a file, and a file not there yet
        marker = tmpdir.parent / f"held-{target.name}"
        proc = _start(["kernels", str(SAMPLE_CSV), "-f", "csv", "-o", str(target)], tmpdir,
                      hold=f"output:{marker}")
        _wait_for(proc, marker.exists)
        proc.kill()
        assert _finish(proc)[0] == -signal.SIGKILL
        assert _listing(out_dir) == ["old.csv"]
        assert old.read_text() == OLD


# ---- a signal in the middle of a real, large run -------------------------------------------------


def _writing_anonymously(pid: int, folder: Path) -> bool:
    """The process holds an unnamed (O_TMPFILE) file in `folder` open: it is writing the output."""
    fds = Path(f"/proc/{pid}/fd")
    try:
        links = [os.readlink(fd) for fd in fds.iterdir()]
    except OSError:  # the process ended or an fd closed while listing
        return False
    return any(link.startswith(f"{folder}/#") and link.endswith("(deleted)") for link in links)


@pytest.fixture(scope="module")
def large_kernel_csv(tmp_path_factory: pytest.TempPathFactory, sample_generator: ModuleType) -> Path:
    """~90 MB of kernel rows (seconds of parse + encode), written once for both signals: its
    writing was 5 s of each test's CPU."""
    big = tmp_path_factory.mktemp("large") / "kernel_details.csv"
    sample_generator.write_large_kernel_details(big, 300_000)
    return big


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.slow  # the table's writing is ~5 s of CPU (#23: the quick loop keeps tests under ~2 s)
def test_signal_while_a_large_table_streams_out(
    dirs: tuple[Path, Path], large_kernel_csv: Path, sig: int, code: int
) -> None:
    out_dir, tmpdir = dirs
    if not _has_o_tmpfile(out_dir) or not Path("/proc/self/fd").is_dir():
        pytest.skip("needs O_TMPFILE and /proc to see the output being written")
    big = large_kernel_csv
    target = out_dir / "k.parquet"
    target.write_text(OLD)
    proc = _start(["kernels", str(big), "-f", "parquet", "-o", str(target)], tmpdir)
    _wait_for(proc, lambda: _writing_anonymously(proc.pid, out_dir))
    proc.send_signal(sig)
    rc, out, err = _finish(proc)
    assert (rc, err, out) == (code, "tilescope: interrupted\n", "")
    assert target.read_text() == OLD
    assert _listing(out_dir) == ["k.parquet"]
    assert _listing(tmpdir) == []


# ---- DuckDB scratch directories --------------------------------------------------------------------


def _sample_copy(dest: Path, bad_csv: bool) -> Path:
    shutil.copytree(SAMPLE, dest)
    if bad_csv:
        csv = dest / TORCH_OUT / "kernel_details.csv"
        lines = csv.read_text().splitlines(keepends=True)
        lines[4] = "garbage,row\n"  # row 4: 2 fields where the header has 46
        csv.write_text("".join(lines))
    return dest


def test_bad_kernel_table_beside_a_trace_leaves_no_duckdb_dir(dirs: tuple[Path, Path]) -> None:
    # The trace is read on a prefetch thread (held here after making its scratch directory) while
    # the main thread fails on the CSV; the process ends with os._exit, which skips that thread's
    # `finally`: the directory leaked on every such run.
    tmpdir = dirs[1]
    src = _sample_copy(tmpdir.parent / "bad", bad_csv=True)
    marker = tmpdir.parent / "held"
    # --strict: one short row is otherwise skipped with a note (#26), and the main thread would wait
    # for the held trace instead of failing
    proc = _start(["analyze", "--strict", str(src)], tmpdir, hold=f"timeline:{marker}")
    rc, _, err = _finish(proc)
    assert marker.exists()  # the scratch directory was there when the process ended
    assert rc == 2 and err.count("\n") == 1 and "row 4 (line 5): expected 46 fields" in err
    assert _listing(tmpdir) == []


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_while_the_trace_is_read(dirs: tuple[Path, Path], sig: int, code: int) -> None:
    out_dir, tmpdir = dirs
    target = out_dir / "r.md"
    target.write_text(OLD)
    marker = tmpdir.parent / "held"
    proc = _start(["analyze", str(SAMPLE), "-f", "md", "-o", str(target)], tmpdir,
                  hold=f"timeline:{marker}")
    _wait_for(proc, marker.exists)
    assert [p.name[:17] for p in tmpdir.iterdir()] == ["tilescope-duckdb-"]
    proc.send_signal(sig)
    rc, out, err = _finish(proc)
    assert (rc, err, out) == (code, "tilescope: interrupted\n", "")
    assert target.read_text() == OLD
    assert _listing(out_dir) == ["r.md"]
    assert _listing(tmpdir) == []


def test_advisor_layout_is_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the layout of symlinks given to msprof-analyze was made with mkdtemp and never removed
    from tilescope import msprof_advisor

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    # a stand-in advisor that lists the profiler folder it was given
    lister = ("import json, os, sys; "
              "print(json.dumps({'status': os.listdir(sys.argv[4] + '/ASCEND_PROFILER_OUTPUT')}))")
    monkeypatch.setattr(msprof_advisor, "find_advisor", lambda: [sys.executable, "-c", lister])
    result = msprof_advisor.run_advisor(SAMPLE_CSV)
    assert (result["returncode"], result["status"]) == (0, ["kernel_details.csv"])
    assert _listing(scratch) == []


# ---- codes typer returns instead of raising ------------------------------------------------------


def _raising(exc: BaseException) -> Any:
    def fake(*_a: object, **_k: object) -> None:
        raise exc

    return fake


def test_exit_code_of_a_typer_exit_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    import tilescope.io.load as load

    monkeypatch.setattr(load, "kernel_csv_profile", _raising(typer.Exit(5)))
    assert main(["kernels", str(SAMPLE_CSV)]) == 5  # was 0: `_run` dropped what app() returned


def test_keyboard_interrupt_is_130_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tilescope.io.load as load

    # typer turns it into Exit(130) and returns 130 in non-standalone mode: dropped, exit 0, silent
    monkeypatch.setattr(load, "kernel_csv_profile", _raising(KeyboardInterrupt()))
    assert main(["kernels", str(SAMPLE_CSV)]) == 130
    assert capsys.readouterr().err == "tilescope: interrupted\n"


# ---- a signal some library swallowed ---------------------------------------------------------------


def _render_after_signal(sig: int, swallow_as: type[BaseException] | None) -> Any:
    def render(_report: dict[str, Any], **_opts: object) -> str:
        try:
            os.kill(os.getpid(), sig)
            time.sleep(5)  # the handler raises here, at once
        except interrupt.Interrupted:
            if swallow_as is not None:  # what DuckDB's fetchall does with it
                raise swallow_as("Query interrupted") from None
        return "the new report\n"  # swallowed whole, the command goes on

    return render


@pytest.mark.parametrize(("swallow_as", "sig", "code"),
                         [(None, signal.SIGTERM, 143), (RuntimeError, signal.SIGINT, 130)])
@pytest.mark.usefixtures("sigint_handled")  # these send SIGINT to this process
def test_swallowed_signal_still_interrupts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    swallow_as: type[BaseException] | None, sig: int, code: int,
) -> None:
    from tilescope.report import render_md

    monkeypatch.setattr(render_md, "render", _render_after_signal(sig, swallow_as))
    target = tmp_path / "r.md"
    target.write_text(OLD)
    before = signal.getsignal(sig)
    assert main(["analyze", str(SAMPLE), "-f", "md", "-o", str(target)]) == code
    assert capsys.readouterr().err == "tilescope: interrupted\n"  # no traceback, no second line
    assert target.read_text() == OLD  # the commit refused the swallowed signal's output
    assert _listing(tmp_path) == ["r.md"]
    assert signal.getsignal(sig) is before  # an in-process caller gets its handler back


@pytest.mark.usefixtures("sigint_handled")
def test_second_signal_does_not_cut_the_cleanup_short() -> None:
    cleaned = False
    with pytest.raises(interrupt.Interrupted) as caught, interrupt.signals_raise():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # Ctrl-C pressed again while cleaning up
            time.sleep(0.01)
            cleaned = True
    assert cleaned and caught.value.exit_code == 130


def test_an_ignored_signal_stays_ignored() -> None:
    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as under nohup or `cmd &` in a script
    try:
        with interrupt.signals_raise():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, before)


# ---- -o onto a symlink, a FIFO, a device, a missing directory -------------------------------------


def test_output_through_a_symlink_reaches_the_file_behind_it(tmp_path: Path) -> None:
    real = tmp_path / "data" / "k.csv"
    real.parent.mkdir()
    real.write_text(OLD)
    link = tmp_path / "k.csv"
    link.symlink_to(real)
    assert main(["kernels", str(SAMPLE_CSV), "-f", "csv", "-o", str(link)]) == 0
    assert link.is_symlink() and link.resolve() == real  # the link survives
    assert real.read_text().startswith(CSV_HEAD)  # the file behind it has the output
    assert _listing(real.parent) == ["k.csv"]


def test_output_through_a_dangling_symlink_creates_its_file(tmp_path: Path) -> None:
    link = tmp_path / "k.csv"
    link.symlink_to(tmp_path / "made.csv")
    assert main(["kernels", str(SAMPLE_CSV), "-f", "csv", "-o", str(link)]) == 0
    assert link.is_symlink() and (tmp_path / "made.csv").read_text().startswith(CSV_HEAD)


def test_output_into_a_fifo_is_written_in_place(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert main(["kernels", str(SAMPLE_CSV), "-f", "csv", "-o", str(fifo)]) == 0
    reader.join(PATIENCE_S)
    assert got and got[0].decode().startswith(CSV_HEAD) and got[0].count(b"\n") == 291  # 290 + header
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # not replaced by a regular file


def test_output_onto_a_link_to_a_device_writes_into_the_device(tmp_path: Path) -> None:
    # /dev/stdout (-> /proc/self/fd/1, a pipe here): written in place, never renamed over. A link
    # in tmp_path stands for /dev/stdout itself, which the old code, run as root, replaced.
    link = tmp_path / "stdout"
    link.symlink_to("/dev/stdout")
    null = tmp_path / "null"
    null.symlink_to("/dev/null")
    r = subprocess.run([sys.executable, "-m", "tilescope.cli", "kernels", str(SAMPLE_CSV), "-f", "csv",
                        "-o", str(link)], cwd=REPO, capture_output=True, text=True, timeout=PATIENCE_S)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith(CSV_HEAD) and r.stdout.count("\n") == 291
    assert main(["kernels", str(SAMPLE_CSV), "-f", "csv", "-o", str(null)]) == 0
    assert link.is_symlink() and null.is_symlink() and stat.S_ISCHR(null.stat().st_mode)
    assert _listing(tmp_path) == ["null", "stdout"]


def test_output_in_a_missing_directory_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing" / "r.md"
    assert main(["analyze", str(SAMPLE), "-f", "md", "-o", str(target)]) == 2
    assert capsys.readouterr().err == (
        f"tilescope: error: {target}: directory {tmp_path / 'missing'} does not exist\n"
    )
    assert _listing(tmp_path) == []  # no directory made up


def test_output_onto_a_directory_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", str(SAMPLE_CSV), "-f", "csv", "-o", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"tilescope: error: {tmp_path}: is a directory (-o takes a file name)\n"
    assert _listing(tmp_path) == []


def test_replaced_output_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "k.csv"
    target.write_text(OLD)
    target.chmod(0o640)
    assert main(["kernels", str(SAMPLE_CSV), "-f", "csv", "-o", str(target)]) == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o640 and target.read_text() != OLD
    assert _listing(tmp_path) == ["k.csv"]


def test_scratch_left_by_a_killed_process_is_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kill -9 skips every cleanup: the next run removes a dead process's scratch directory, never a
    live process's."""
    import subprocess as sp

    from tilescope import scratch

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(scratch, "_swept", set())
    dead = sp.Popen(["true"])
    dead.wait()
    left = tmp_path / f"tilescope-duckdb-{dead.pid}-abc"
    (left / "spill").mkdir(parents=True)
    alive = tmp_path / f"tilescope-duckdb-{os.getppid()}-def"
    alive.mkdir()
    with scratch.scratch_dir("tilescope-duckdb-") as mine:
        assert mine.name.startswith(f"tilescope-duckdb-{os.getpid()}-")
        assert not left.exists()
        assert alive.exists()
    assert not mine.exists()
