"""#28 item 8: kernel names cut where they say least (the op at their head stays), and `rules`
compact on a terminal and never cut in a pipe."""

from __future__ import annotations

import pytest
from rich.cells import cell_len

from tilescope.engine import discover_rules
from tilescope.text.terminal import cut_name, fit_names

from support import cli

# names as the real traces have them (msprof_db_2023's STRING_IDS; gpt_step_arith_591's fused
# attention pattern, whose kernel column was shown as "…edMaskedSoftmax98 +4")
SHAPED = "aclnnMul_MulAiCore_Mul [1,2048,32,128;1,2048,1,128]"
ATTENTION = ["BatchMatMul96", "Mul97", "ScaledMaskedSoftmax98", "DropOutDoMask99", "AsStrided100",
             "BatchMatMul101"]


def test_a_shaped_name_loses_its_shapes_not_its_op() -> None:
    for width in range(24, len(SHAPED)):
        cut = cut_name(SHAPED, width)
        assert cell_len(cut) == width and cut.endswith("…")
        assert cut.startswith("aclnnMul_MulAiCore_Mul")  # the op is never cut while it fits
    assert cut_name(SHAPED, len(SHAPED)) == SHAPED


def test_a_long_name_keeps_its_head_and_a_short_suffix() -> None:
    assert cut_name("flash_fwd_kernel_mix_aic", 16) == "flash_fwd_k…_aic"
    assert cut_name("a" * 50, 10) == "a" * 9 + "…"
    assert cut_name("x", 1) == "x" and cut_name("xy", 1) == "…"


def test_names_in_a_column_are_whole_names_and_a_count() -> None:
    assert fit_names(ATTENTION, 40) == "BatchMatMul96, Mul97 +4"
    assert fit_names(ATTENTION[:3], 60) == "BatchMatMul96, Mul97, ScaledMaskedSoftmax98"
    assert fit_names(ATTENTION, 60) == "BatchMatMul96, Mul97, ScaledMaskedSoftmax98 +3"
    # one name wider than the column: its head, cut, and the count of the others
    cut = fit_names([SHAPED, "x"], 30)
    assert cut.startswith("aclnnMul_MulAiCore_Mul") and cut.endswith("… +1") and cell_len(cut) == 30


def test_rules_at_80_columns_is_a_line_per_rule(capsys: pytest.CaptureFixture[str]) -> None:
    rules = discover_rules()
    code, out, _ = cli(capsys, "rules", "--width", "80")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == len(rules) + 3  # header, the rules, a blank line, the footer
    assert all(cell_len(line) <= 80 for line in lines[:-1])
    for info, line in zip(rules, lines[1:], strict=False):
        assert line.startswith(f"{info.code}  {info.slug} ")
    assert lines[-1] == f"{len(rules)} rules. `tilescope rule CODE` shows one rule in full: what it does, " \
                        "what it needs, its thresholds."


def test_piped_rules_are_never_cut(capsys: pytest.CaptureFixture[str]) -> None:
    """README: piped output is never cut. Every rule's needs and summary are on its line, whole."""
    code, out, _ = cli(capsys, "rules")
    assert code == 0 and "…" not in out
    lines = out.splitlines()
    for info, line in zip(discover_rules(), lines[1:], strict=False):
        assert line.startswith(f"{info.code}  {info.slug} ")
        assert line.endswith(info.summary) and ", ".join(info.needs) in line
