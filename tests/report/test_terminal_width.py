"""Terminal output fits the terminal (issue #15 item 4): run the CLI with stdout on a real pty of
80 and 200 columns and check that no line is wider and no number is split from its digits or its
unit; piped, nothing is wrapped or cut; `--width N` wraps at N."""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len

from tilescope.text.terminal import cut_name, output_width, wrap

from support import REPO_ROOT, cli
from support.terminal import on_pty, piped

REPO = REPO_ROOT
BUNDLE = REPO / "sample_traces" / "tilelang_fa_bundle"
UNFUSED = REPO / "sample_traces" / "attention_unfused"
FUSED = REPO / "sample_traces" / "attention_fused"
# Example: "1,285.9", "0.816", "29.2"
DECIMAL = re.compile(r"(?<![\d,.])\d[\d,]*\.\d+")
# Example: "29.2 µs", "66.7 %", "1,750 GB/s", "64 KiB"
WITH_UNIT = re.compile(r"(?<![\w.,])\d[\d,]*(?:\.\d+)? (?:%|µs|ms|GB/s|MHz|KiB|B)(?!\w)")
UNIT_FIRST = re.compile(r"^(?:%|µs|ms|GB/s|MHz|KiB|B)(?!\w)")


def assert_fits(text: str, whole: str, columns: int) -> None:
    """`text` (at `columns`) has no line wider than that, no number cut into pieces (each decimal
    is one of the unwrapped output's) and no unit on another line than its number."""
    lines = text.splitlines()
    wide = [ln for ln in lines if cell_len(ln) > columns]
    assert not wide, f"{len(wide)} lines over {columns} columns, first: {wide[0]!r}"
    cut = set(DECIMAL.findall(text)) - set(DECIMAL.findall(whole))
    assert not cut, f"numbers split at {columns} columns: {sorted(cut)}"
    for a, b in itertools.pairwise(lines):
        left, right = a.rstrip(" │┃").rstrip(), b.lstrip(" │┃")
        assert not (left[-1:].isdigit() and UNIT_FIRST.match(right)), f"unit split: {a!r} / {b!r}"
    flat = "\n".join(lines)
    for pair in set(WITH_UNIT.findall(whole)):
        if pair.split(" ")[0] in flat:  # a kernels column left out at 80 has its numbers gone
            assert pair in flat, f"{pair!r} split at {columns} columns"


COMMANDS = {
    "analyze": ["analyze", str(BUNDLE)],
    "analyze-unfused": ["analyze", str(UNFUSED)],
    "kernels": ["kernels", str(UNFUSED), "--limit", "12"],
    "diff": ["diff", str(UNFUSED), str(FUSED)],
}


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.slow  # 2.4-5 s of CPU each (#23: the quick loop keeps tests under ~2 s)
def test_output_fits_80_and_200_columns_and_is_whole_when_piped(name: str) -> None:
    args = COMMANDS[name]
    whole = piped(args)
    for columns in (80, 200):
        assert_fits(on_pty(args, columns), whole, columns)
    # piped: nothing wrapped or cut, so the longest line is longer than any terminal's here
    # (diff's finding lines cap one value, the kernel chain, at 200 characters whatever the width)
    kept = [ln for ln in whole.splitlines() if not re.match(r"  (resolved|new) |… \d+ more kernels", ln)]
    assert not [ln for ln in kept if "…" in ln]
    if name != "kernels":
        assert max(cell_len(ln) for ln in whole.splitlines()) > 200


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_width_option_wraps_a_pipe() -> None:
    text = piped(["analyze", str(BUNDLE), "--width", "100"])
    assert_fits(text, piped(["analyze", str(BUNDLE)]), 100)
    assert max(cell_len(ln) for ln in text.splitlines()) > 90  # the width is used, not 80


def test_kernels_at_80_columns_names_what_it_left_out() -> None:
    text = on_pty(["kernels", str(UNFUSED), "--limit", "5"], 80)
    assert "not shown at 80 columns:" in text and "--width" in text
    assert "duration" in text and "129.759" in text  # the number the issue saw split as 129.75 / 9


@pytest.fixture
def lint_at(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., str]:
    """`tilescope lint ARGS [--width N]` in this process, stdout captured as by a pipe, the sweep
    lowered once per set of arguments: these tests check how its table is laid out at each width;
    lowering is tests/ir's (it took two thirds of a minute per test, twice over, in subprocesses).
    That stdout on a terminal gets the terminal's width is checked above, on `analyze`."""
    import tilescope.sweep as sweep

    real = sweep.run_sweep
    done: dict[str, Any] = {}

    def once(*args: Any, **kwargs: Any) -> Any:
        key = repr((args, sorted(kwargs.items())))
        if key not in done:
            done[key] = real(*args, **kwargs)
        return copy.deepcopy(done[key])

    monkeypatch.setattr(sweep, "run_sweep", once)
    monkeypatch.chdir(REPO)

    def run(args: list[str], width: int | None = None) -> str:
        code, out, err = cli(capsys, *args, *(["--width", str(width)] if width else []))
        assert code == 0, err
        return out

    return run


@pytest.mark.tilelang
def test_lint_sweep_fits_80_columns_and_is_whole_when_piped(lint_at: Callable[..., str]) -> None:
    pytest.importorskip("tilelang")
    # on a 910B2 (L0C 128 KiB) the 256 x 256 fp32 point does not fit; on the 950, lint's default
    # since the chip follows the lowering target, every point fits and no reason is printed
    args = ["lint", "sample_traces/kernels/matmul.py:matmul", "-p", "M=1024", "-p", "N=1024", "-p", "K=1024",
            "--sweep", "block_M=128,256", "--sweep", "block_N=128,256", "--chip", "910B2"]
    whole = lint_at(args)
    assert "…" not in whole
    text = lint_at(args, 80)
    assert_fits(text, whole, 80)
    assert "does not fit: L0C 256 KiB" in text or "does not fit: L0C 262144 B" in text


def test_wrap_keeps_numbers_with_units() -> None:
    text = "the busiest is busy 50.2 % of the launch (< 80 %) over 43.7 µs and 1,750 GB/s"
    for width in range(14, 60):  # from where the widest glued word, "1,750 GB/s", fits a line
        lines = wrap(text, width, "  ", "    ")
        assert all(cell_len(ln) <= width for ln in lines)
        joined = "\n".join(lines)
        for pair in ("50.2 %", "(< 80 %)", "43.7 µs", "1,750 GB/s"):
            assert pair in joined
    assert wrap(text, None) == [text]
    assert wrap("x" * 30, 10) == ["x" * 10] * 3  # only a word wider than the line is cut
    assert cut_name("flash_fwd_kernel_mix_aic", 11) == "flash_…_aic"


def test_output_width_is_none_for_pipes_unless_asked(tmp_path: Path) -> None:
    with open(tmp_path / "out.txt", "w") as fh:
        assert output_width(None, fh) is None
        assert output_width(132, fh) == 132
        assert output_width(3, fh) == 20  # below 20 columns nothing readable fits


LONG_NAMES_KERNEL = '''from dataclasses import dataclass

import tilelang.ascend.language as T


@dataclass(frozen=True)
class GemmTiling:
    block_M: int = 128
    block_N: int = 128
    block_K: int = 64


def gemm(M=512, N=512, K=512, dtype="float16", accumulator_dtype_name="float32", tiling=None):
    tiling = tiling or GemmTiling()
    block_M, block_N, block_K = tiling.block_M, tiling.block_N, tiling.block_K

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), accumulator_dtype_name)):
        with T.Kernel(T.ceildiv(N, block_N) * T.ceildiv(M, block_M)) as core:
            a_l1 = T.alloc_l1((block_M, block_K), dtype)
            b_l1 = T.alloc_l1((block_K, block_N), dtype)
            a_l0 = T.alloc_l0a((block_M, block_K), dtype)
            b_l0 = T.alloc_l0b((block_K, block_N), dtype)
            c_l0 = T.alloc_l0c((block_M, block_N), accumulator_dtype_name)
            for kk in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[0, kk * block_K], a_l1)
                T.copy(B[kk * block_K, 0], b_l1)
                T.copy(a_l1, a_l0)
                T.copy(b_l1, b_l0)
                T.gemm(a_l0, b_l0, c_l0, clear_accum=(kk == 0))
            T.copy(c_l0, C[0, 0])
    return main
'''


@pytest.mark.tilelang
def test_a_sweep_of_long_parameter_names_cuts_no_cell(tmp_path: Path, lint_at: Callable[..., str]) -> None:
    # dataclass fields and long names made 11 columns that rich cut to "tiling.blo…" and "…" at 80
    pytest.importorskip("tilelang")
    kernel = tmp_path / "long_names.py"
    kernel.write_text(LONG_NAMES_KERNEL, encoding="utf-8")
    args = ["lint", str(kernel), "--sweep", "tiling.block_M=128,512", "--sweep", "tiling.block_N=128,256",
            "--sweep", "accumulator_dtype_name=float32"]
    whole = lint_at(args)
    assert "…" not in whole and "tiling.block_M" in whole and "accumulator_dtype_name" in whole
    assert max(cell_len(ln) for ln in whole.splitlines()) > 80  # a pipe gets the table at full width
    text = lint_at(args, 80)
    assert "…" not in text
    assert_fits(text, whole, 80)
    assert "accumulator_" in text and "dtype_name" in text and "float32" in text
    # narrower still: a line per point, wrapped, rather than cut cells
    narrow = lint_at(args, 40)
    assert "…" not in narrow and max(cell_len(ln) for ln in narrow.splitlines()) <= 40
    assert "tiling.block_M=512 tiling.block_N=256" in narrow and "L0C 128 KiB" in narrow
