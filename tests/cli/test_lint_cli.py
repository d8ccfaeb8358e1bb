"""`tilescope lint` through tilescope.cli.main: exit codes, JSON, bundles, sweep, missing TileLang."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tilescope.cli import main
from tilescope.collectors.bundle import validate_manifest

from support import REPO_ROOT

MATMUL = str(REPO_ROOT / "sample_traces" / "kernels" / "matmul.py")


@pytest.fixture(autouse=True)
def _needs_tilelang() -> None:
    pytest.importorskip("tilelang")


@pytest.mark.tilelang
def test_clean_json_and_fail_on(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", MATMUL, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)  # stdout holds only the JSON
    assert doc["findings"] == [] and doc["lowered"] is True
    # 256x256 fp32 = 262144 B: the whole L0C of a 950 (the default chip), twice a 910B2's
    args = ["lint", f"{MATMUL}:matmul", "-p", "block_M=256", "-p", "block_N=256", "--format", "json",
            "--chip", "910B2"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert next(f["code"] for f in doc["findings"]) == "TS501"
    assert main([*args, "--fail-on", "high"]) == 1


@pytest.mark.tilelang
def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", MATMUL, "-p", "nope=1"]) == 2
    assert "unknown --param nope" in capsys.readouterr().err
    assert main(["lint", MATMUL + ":missing"]) == 2


@pytest.mark.tilelang
def test_bundle_written_and_not_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b"
    assert main(["lint", MATMUL, "--out", str(out)]) == 0
    man = json.loads((out / "manifest.json").read_text())
    validate_manifest(man)  # the collectors' manifest format, not a lint-only one
    assert man["ir_only"] is True and man["backend"] is None and man["profile"]["runs"] == []
    assert man["kernel"]["function"] == "matmul" and len(man["kernel"]["sha256"]) == 64
    assert man["kernel"]["entry"] and man["correctness"]["status"] == "not_run"
    assert (out / man["kernel"]["source"]).read_bytes() == Path(MATMUL).read_bytes()
    assert man["ir"] == {"path": "ir", "captured": True, "lowered": True}
    assert (out / "ir" / "ir.json").is_file() and (out / "ir" / "kernel.cpp").is_file()
    assert (out / "profile").is_dir() and not any((out / "profile").iterdir())
    assert main(["lint", MATMUL, "--out", str(out)]) == 2
    assert main(["lint", MATMUL, "--out", str(out), "--force"]) == 0


@pytest.mark.tilelang
def test_sweep_small_grid(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "lint",
            MATMUL,
            "-p",
            "M=1024",
            "-p",
            "N=1024",
            "-p",
            "K=1024",
            "--sweep",
            "block_M=128,256",
            "--sweep",
            "block_N=128",
            "--format",
            "json",
        ]
    )
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)["sweep"]
    assert [r["params"]["block_M"] for r in rows] == [128, 256]  # 256x128 fp32 = 131072 B fits L0C exactly
    assert all(r["fits"] for r in rows)
    assert rows[0]["footprint"]["L0C"]["bytes"] == 65536


@pytest.mark.slow  # 2.4-5 s of CPU each (#23: the quick loop keeps tests under ~2 s)
def test_missing_tilelang_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "tilelang", None)
    assert main(["lint", MATMUL]) == 3
    assert "pip install 'tilescope[tilelang]'" in capsys.readouterr().err


# ---- the error contract (issue #14 item 5): exit 2 and one line, before anything is lowered -------


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tilescope: error: "), err
    return err[0]


@pytest.mark.tilelang
def test_a_file_that_is_not_python_names_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import tilelang\ndef f(:\n    pass\n")
    assert main(["lint", str(broken)]) == 2  # was a 51-line traceback with exit 1, the gate's code
    assert (
        _one_error(capsys) == f"tilescope: error: {broken}:2: invalid syntax; expected a Python kernel file"
    )
    readme = Path(MATMUL).parents[2] / "README.md"
    assert main(["lint", str(readme)]) == 2
    assert f"{readme}:" in _one_error(capsys)
    binary = tmp_path / "k.py"
    binary.write_bytes(b"x = 1\n\xff\xfe")
    assert main(["lint", str(binary)]) == 2
    assert "byte 6: not UTF-8 text" in _one_error(capsys)


@pytest.mark.tilelang
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["-p", "block_M=abc"],
            "--param block_M='abc': expected a positive integer, like matmul()'s default 128",
        ),
        (["-p", "block_M=0"], "--param block_M=0: expected a positive integer"),
        (["-p", "block_M=-64"], "--param block_M=-64: expected a positive integer"),
        (["-p", "dtype=16"], "--param dtype=16: expected a string, like matmul()'s default 'float16'"),
        (["--sweep", "blockM=64,128"], "unknown --sweep blockM; matmul accept: K, M, N,"),
        (["--sweep", "block_M=64,0"], "--sweep block_M=0: expected a positive integer"),
        (["-p", "nope=1", "--sweep", "block_M=64,128"], "unknown --param nope"),
    ],
)
def test_parameters_are_checked_against_the_builder(
    capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    # before: exit 0 with a TS500 and 179 lines of TileLang logs, negative footprints, or a sweep
    # table of failed rows
    assert main(["lint", f"{MATMUL}:matmul", *args]) == 2
    assert expected in _one_error(capsys)


@pytest.mark.tilelang
def test_a_builder_parameter_without_default_must_be_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = Path(MATMUL).read_text().replace("def matmul(M=4096,", "def matmul(M,")
    kernel = tmp_path / "matmul_nodefault.py"
    kernel.write_text(src)
    line = 1 + src.splitlines().index(next(x for x in src.splitlines() if x.startswith("def matmul(M,")))
    assert main(["lint", f"{kernel}:matmul"]) == 2
    assert _one_error(capsys) == (
        f"tilescope: error: {kernel}:{line}: matmul() has no default for M; give -p M=VALUE"
    )
    assert main(["lint", f"{kernel}:matmul", "-p", "M=256", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["lowered"] is True
