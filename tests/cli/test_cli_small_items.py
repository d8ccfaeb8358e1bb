"""Issue #15 item 9: the small things a user meets on the second day, each pinned by a test."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tilescope.cli import main
from tilescope.text.words import count_text, saving_phrase, saving_text

from support import REPO_ROOT

REPO = REPO_ROOT
BUNDLE = REPO / "sample_traces" / "tilelang_fa_bundle"


# ------------------------------------------------------------------ --select that matches no rule

@pytest.mark.parametrize("args", [["--select", "TS9"], ["--select", "TS2,TS77"], ["--ignore", "XX1"]])
def test_a_rule_prefix_that_matches_no_rule_is_exit_2_naming_it(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`--select TS9` ran no rule and passed every gate: a typo disabled CI."""
    assert main(["analyze", str(BUNDLE), *args]) == 2
    err = capsys.readouterr().err
    bad = {"TS9": "TS9", "TS2,TS77": "TS77", "XX1": "XX1"}[args[1]]
    assert f"{args[0]} '{bad}' matches no rule" in err and "TS201" in err
    assert len(err.strip().splitlines()) == 1


def test_a_prefix_from_the_config_file_is_named_with_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "tilescope.toml"
    cfg.write_text('select = ["TS20", "TS0"]\n')
    assert main(["analyze", str(BUNDLE), "--config", str(cfg)]) == 2
    assert f"{cfg}: select 'TS0' matches no rule" in capsys.readouterr().err


def test_prefixes_that_match_rules_still_select(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(BUNDLE), "--select", "ts2,TS40", "-f", "json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert {f["code"] for f in findings} == {"TS201", "TS203", "TS401", "TS402"}


# ------------------------------------------------------------------ plurals

def test_counts_agree_with_their_nouns(capsys: pytest.CaptureFixture[str]) -> None:
    assert count_text(1, "launch", "launches") == "1 launch"
    assert count_text(2, "launch", "launches") == "2 launches"
    assert count_text(1.0, "block") == "1 block" and count_text(1024, "block") == "1,024 blocks"
    assert main(["info", str(BUNDLE)]) == 0
    out = capsys.readouterr().out
    assert "over 1 launch\n" in out and "1 launches" not in out


def test_rule_messages_agree_with_their_counts() -> None:
    import pandas as pd

    from tilescope.config import Config
    from tilescope.engine import run_rules
    from tilescope.io.load import load_profile

    profile = load_profile(REPO / "sample_traces" / "attention_unfused")
    findings = run_rules(profile, Config()).findings
    messages = " ".join(f.message for f in findings)
    assert "runs on the AI CPU: 1 launch," in messages  # TS405 said "1 launches"
    assert not re.search(r"\b1 (kernels|launches|blocks|cores|waves)\b", messages)
    assert isinstance(profile.kernels, pd.DataFrame)


# ------------------------------------------------------------------ static findings have no time

@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_static_findings_show_no_time_in_any_view(capsys: pytest.CaptureFixture[str]) -> None:
    static = {"saving_kind": "none", "est_saving_us": 0.0, "share_of_total": 0.0}
    assert saving_text(static) == "static: no time estimate"
    assert saving_phrase(static) == "static: no time estimate"
    assert saving_phrase({"saving_kind": "device", "est_saving_us": 29.159, "share_of_total": 0.6667}) \
        == "est. 29.2 µs (66.7 %)"
    for fmt in ("md", "html", "sarif", "text"):
        assert main(["analyze", str(BUNDLE), "-f", fmt]) == 0
        out = capsys.readouterr().out
        assert "0.0 µs (0.0 %)" not in out and "0.0 µs" not in out, fmt
        assert "static: no time estimate" in out, fmt  # TS504 says so


def test_diff_lines_of_static_findings_show_no_time() -> None:
    from tilescope.commands.diff_words import finding_line

    f = {"severity": "medium", "code": "TS504", "slug": "pipeline-not-applied", "kernels": ["flash_fwd"],
         "est_saving_us": 0.0, "saving_kind": "none"}
    line = finding_line(f, str)
    assert line.endswith("— static: no time estimate") and "µs" not in line


# ------------------------------------------------------------------ bytes per element in TS501

def test_buffer_sizes_show_the_bytes_per_element() -> None:
    """TS501 said `128×256 = 65536 B`: the 2 B of each bf16 element was left to the reader."""
    from tilescope.rules.ts501_buffer_over_capacity import _occupies

    buf = {"name": "s_acc", "shape": [128, 256], "padded_shape": [128, 256], "dtype": "bfloat16",
           "padded_bytes": 65536, "versions": 1}
    assert _occupies(buf) == "s_acc 128×256 bfloat16 occupies 128×256 × 2 B = 65,536 B"
    two = {**buf, "shape": [100, 250], "dtype": "float32", "padded_bytes": 131072, "versions": 2}
    assert _occupies(two) == "s_acc 100×250 float32 occupies 128×256 × 4 B = 131,072 B × 2 versions"


@pytest.mark.tilelang
def test_lint_says_the_bytes_per_element_and_fits_80_columns() -> None:
    pytest.importorskip("tilelang")
    from support.terminal import on_pty

    # a 910B2's L0C (128 KiB) overflows; on the 950, lint's default since the chip follows the
    # lowering target, 262,144 B fits exactly and no TS501 would say it
    args = ["lint", "sample_traces/kernels/matmul.py:matmul", "-p", "block_M=256", "-p", "block_N=256",
            "--chip", "910B2"]
    text = on_pty(args, 80)
    assert max(len(line) for line in text.splitlines()) <= 80
    flat = " ".join(text.split())
    assert "c_l0 256×256 float32 occupies 256×256 × 4 B = 262,144 B" in flat
    assert "no time estimate" in flat and "0 µs" not in flat


# ------------------------------------------------------------------ serve: quiet, and --check honest

def _serve_and_get(extra: list[str]) -> str:
    """stderr of `serve --port 0` after three requests (the server stopped)."""
    import subprocess
    import sys
    import time
    import urllib.request

    proc = subprocess.Popen(
        [sys.executable, "-m", "tilescope.cli", "serve", str(REPO / "sample_traces" / "attention_fused"),
         "--port", "0", "--no-browser", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split(" on ", 1)[1].strip()
        deadline = time.monotonic() + 30
        done = 0
        while done < 3:
            try:
                with urllib.request.urlopen(url + "_dash-layout", timeout=5) as resp:
                    assert resp.status == 200
                done += 1
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    return err


@pytest.mark.slow  # 2.4-5 s of CPU each (#23: the quick loop keeps tests under ~2 s)
def test_serve_keeps_the_access_log_off_the_terminal_unless_verbose() -> None:
    quiet = _serve_and_get([])
    assert "GET /_dash-layout" not in quiet and "press Ctrl+C to stop" in quiet
    assert quiet.count("GET /_dash-layout") == 0
    assert _serve_and_get(["--verbose"]).count("GET /_dash-layout") == 3


def test_serve_check_does_not_claim_to_serve(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", str(REPO / "sample_traces" / "attention_fused"), "--check", "--port", "8123"]) == 0
    out = capsys.readouterr().out
    assert "serving on" not in out and "not serving (--check)" in out and "http://127.0.0.1:8123/" in out


# ------------------------------------------------------------------ output into a closed pipe

UNFUSED = REPO / "sample_traces" / "attention_unfused"
FUSED = REPO / "sample_traces" / "attention_fused"
PIPED = {
    "info": ["info", str(UNFUSED)],
    "kernels": ["kernels", str(UNFUSED), "--limit", "290"],
    "kernels-json": ["kernels", str(UNFUSED), "-f", "json"],
    "kernels-csv": ["kernels", str(UNFUSED), "-f", "csv"],
    "analyze": ["analyze", str(UNFUSED)],
    "analyze-md": ["analyze", str(UNFUSED), "-f", "md"],
    "analyze-sarif": ["analyze", str(UNFUSED), "-f", "sarif"],
    "diff": ["diff", str(UNFUSED), str(FUSED)],
    "rules": ["rules"],
    "rule": ["rule", "TS201"],
    "help": ["analyze", "--help"],
}


def _into_closed_pipe(args: list[str]) -> tuple[int, str]:
    """Run with stdout a pipe whose reader is already gone: the first write gets EPIPE."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)
    try:
        r = subprocess.run([sys.executable, "-m", "tilescope.cli", *args], stdout=write,
                           stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=300)
    finally:
        os.close(write)
    return r.returncode, r.stderr


@pytest.mark.parametrize("name", PIPED)
@pytest.mark.slow  # about 1 s each (#23: the quick loop keeps tests under 1 s)
def test_a_reader_that_goes_away_is_exit_0_without_a_word(name: str) -> None:
    """`tilescope info | head` exited 1 (rich's and click's broken-pipe handling)."""
    code, err = _into_closed_pipe(PIPED[name])
    assert (code, err) == (0, "")


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_a_closed_pipe_does_not_hide_a_tripped_gate() -> None:
    code, err = _into_closed_pipe(["analyze", str(BUNDLE), "--fail-on", "high"])
    assert code == 1 and "finding(s) at or above high" in err and "Broken pipe" not in err


@pytest.mark.parametrize("args", [
    ["analyze", str(BUNDLE), "-f", "md", "-o"],
    ["analyze", str(BUNDLE), "-f", "html", "-o"],
    ["kernels", str(UNFUSED), "-f", "csv", "-o"],
    ["kernels", str(UNFUSED), "-f", "parquet", "-o"],
    ["diff", str(UNFUSED), str(FUSED), "-f", "md", "-o"],
])
def test_output_into_a_missing_directory_is_exit_2_and_makes_no_directory(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Already so (docs/reliability.md): pinned for every command that takes -o."""
    target = tmp_path / "missing" / "dir" / "out.x"
    assert main([*args, str(target)]) == 2
    said = capsys.readouterr().err
    assert said == f"tilescope: error: {target}: directory {target.parent} does not exist\n"
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ --chip FILE.json

def test_a_chip_file_may_be_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--chip file.json` said "unknown chip": a chip file is read as TOML or, by its name, JSON."""
    chip = tmp_path / "chip.json"
    chip.write_text(json.dumps({"base": "910B3", "name": "lab-910B3", "hbm_bandwidth_gbps": 1500.0}))
    assert main(["info", str(BUNDLE), "--chip", str(chip), "-f", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["chip"]["name"] == "lab-910B3" and info["chip"]["hbm_bandwidth_gbps"] == 1500.0
    toml = tmp_path / "chip.toml"
    toml.write_text('base = "910B3"\nname = "lab-910B3"\nhbm_bandwidth_gbps = 1500.0\n')
    assert main(["info", str(BUNDLE), "--chip", str(toml), "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["chip"] == info["chip"]


@pytest.mark.parametrize(("value", "said"), [
    ("910X", "unknown chip '910X': a chip is a name, one of 910B1, 910B2, 910B3, 910B4, A3, 950, 310P"),
    ("{missing}.json", "cannot read chip file"),
    ("{list}", "a chip file holds a table of chip fields"),
])
def test_a_chip_that_is_neither_a_name_nor_a_file_says_what_a_chip_is(
    value: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "list.json"
    bad.write_text("[1, 2]")
    value = value.format(missing=tmp_path / "none", list=bad)
    assert main(["analyze", str(BUNDLE), "--chip", value]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1

