"""A bundle whose kernel changed since it was collected says so (#28 item 2): a pull request that
edits the kernel but not the committed run must not get a quiet report on the old kernel."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support import SAMPLES, cli

KERNEL = "sample_traces/kernels/flash_attention.py"  # as the FA bundle's manifest records it


def _checkout(root: Path, edit: str = "") -> Path:
    """A working folder as CI has it: the kernel at its recorded path, the committed bundle."""
    (root / "sample_traces" / "kernels").mkdir(parents=True)
    (root / KERNEL).write_text((SAMPLES / "kernels" / "flash_attention.py").read_text() + edit)
    shutil.copytree(SAMPLES / "tilelang_fa_bundle", root / "run")
    return root / "run"


def _notes(capsys: pytest.CaptureFixture[str], bundle: Path) -> list[str]:
    code, out, err = cli(capsys, "analyze", str(bundle), "-f", "json")
    assert code == 0, err
    return list(json.loads(out)["profiles"][0]["warnings"])


def test_an_edited_kernel_makes_the_bundle_say_it_is_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = _checkout(tmp_path, edit="# block_N = 128\n")
    monkeypatch.chdir(tmp_path)
    stale = [n for n in _notes(capsys, bundle) if "has changed since this bundle was collected" in n]
    assert len(stale) == 1 and stale[0].startswith(f"{KERNEL} has changed since this bundle was collected")
    assert stale[0].endswith("its profile and IR are of the earlier kernel; collect it again")


def test_the_same_kernel_or_none_here_says_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = _checkout(tmp_path / "same")
    monkeypatch.chdir(tmp_path / "same")
    assert not [n for n in _notes(capsys, bundle) if "has changed" in n]
    monkeypatch.chdir(tmp_path)  # the recorded path is not under this folder: nothing to compare
    assert not [n for n in _notes(capsys, bundle) if "has changed" in n]


@pytest.mark.slow
def test_every_report_format_says_it_and_fail_on_stale_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CI recipe's gate (docs/ci.md): the report is still written, the exit code is 1 and the
    error names the bundle; the Markdown and HTML reports lead with the warning."""
    bundle = _checkout(tmp_path, edit="# block_N = 128\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "analyze", str(bundle), "-f", "md", "--fail-on-stale")
    assert code == 1
    assert err.strip().startswith(f"tilescope: error: stale bundle: {bundle}: {KERNEL} has changed")
    first = next(line for line in out.splitlines() if line.startswith("> **Warning:**"))
    assert "flash\\_attention\\.py has changed since this bundle was collected" in first
    code, out, _ = cli(capsys, "analyze", str(bundle), "-f", "html")
    assert code == 0 and 'class="warning">sample_traces/kernels/flash_attention.py has changed' in out
    code, out, _ = cli(capsys, "analyze", str(bundle), "-f", "json")
    assert json.loads(out)["profiles"][0]["stale_kernel"].startswith(f"{KERNEL} has changed")


def test_fail_on_stale_passes_a_bundle_of_this_kernel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = _checkout(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "analyze", str(bundle), "-f", "json", "--fail-on-stale")
    assert code == 0, err
    assert json.loads(out)["profiles"][0]["stale_kernel"] is None
