"""The IR view's measured cost per line (#25): the shares `tilescope lines` computes, on the panes.

The bundle is the FA sample with GENERATED simulator output written into its profile/
(tests/support/simulator.py: the sample's real Ascend C line numbers, made-up cycles)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tilescope.dashboard.app import create_app
from tilescope.dashboard.ir_view import Stage, stage_data

from support import REPO_ROOT
from support.dash_calls import post_callback
from support.simulator import CORES, FA_LINES, core_cycles, simulated_fa_bundle

SAMPLES = REPO_ROOT / "sample_traces"


def _cycles(*lines: int) -> int:
    return sum(core_cycles(core, line) for core in CORES for line in lines)


@pytest.fixture(scope="module")
def panes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    app = create_app([simulated_fa_bundle(tmp_path_factory.mktemp("heat") / "fa")])
    key = app.server.config["TILESCOPE_STORE"].options()[0]["value"]
    values = {"profile.value": key, "shown-ir.data": "ir", "ir-finding.value": None, "ir-kernel.value": None}
    response, _ = post_callback(app, "ir-data.data", values)
    return response["ir-data"]["data"]


def _heat(data: dict[str, Any], stage: str) -> dict[int, tuple[float, str]]:
    pane = next(p for p in data["panes"] if p["id"] == f"ir-{stage}")
    return {n: (share, label) for n, share, label in pane["heat"]}


def test_ascendc_lines_carry_their_measured_share(panes: dict[str, Any]) -> None:
    total = _cycles(*FA_LINES)
    heat = _heat(panes, "ascendc")
    assert set(heat) == set(FA_LINES)  # every measured line of kernel.cpp, no other
    share, label = heat[101]  # the mmad: 25,600 + 28,160 cycles over the two cube cores
    assert share == pytest.approx(_cycles(101) / total, abs=1e-6)
    assert label == f"{100 * _cycles(101) / total:.1f} % of cycles · 53,760 cycles"
    assert max(heat, key=lambda n: heat[n][0]) == 101


def test_tilelang_lines_carry_their_group_share(panes: dict[str, Any]) -> None:
    total = _cycles(*FA_LINES)
    src = _heat(panes, "source")
    assert src[50][0] == pytest.approx(_cycles(101) / total, abs=1e-6)  # s_acc += q_l0 @ k_l0
    # lines 41 and 44 share the Ascend C of flash_fwd_kernel_simt_vf_0: one value, named as a group
    assert src[41] == src[44] and src[41][0] == pytest.approx(_cycles(5, 10) / total, abs=1e-6)
    assert src[41][1].endswith("TileLang lines 41, 44 together")
    assert 39 in src and 91 not in src  # the asc_sync_wait line maps to no TileLang line
    # the TVMScript pane: the same value on the line the line map pairs with TileLang line 50
    tvm = _heat(panes, "tvmscript")
    assert any(v[0] == src[50][0] and v[1].endswith("from TileLang line 50") for v in tvm.values())
    assert _heat(panes, "final") == {}  # the lowered TVMScript: nothing maps measured lines there
    assert "the hottest is TileLang line 50" in panes["info"]


def test_a_profile_without_per_line_data_draws_no_heat() -> None:
    app = create_app([SAMPLES / "tilelang_fa_bundle"])
    key = app.server.config["TILESCOPE_STORE"].options()[0]["value"]
    values = {"profile.value": key, "shown-ir.data": "ir", "ir-finding.value": None, "ir-kernel.value": None}
    data = post_callback(app, "ir-data.data", values)[0]["ir-data"]["data"]
    assert data["panes"] and all(p["heat"] == [] for p in data["panes"])
    assert "Measured per line" not in data["info"]


def test_the_window_of_a_big_file_opens_on_its_hottest_line() -> None:
    text = "".join(f"x_{i} = {i}\n" for i in range(5_000))
    stage = Stage("ascendc", "Ascend C", "kernel.cpp", text, "cpp", heat={4_000: (0.5, "50.0 % of cycles")})
    pane = stage_data(stage, "ir-ascendc")
    assert pane["first"] <= 4_000 < pane["first"] + len(pane["lines"])
    assert pane["heat"] == [[4_000, 0.5, "50.0 % of cycles"]]
    assert pane["summary"].startswith("no line marked · 1 line measured")


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_the_timeline_of_a_simulated_bundle_is_its_in_core_pipeline(tmp_path: Path) -> None:
    """msprof op has no timeline between launches; the bundle's simulator run has one inside the
    kernel: one lane per core and pipe, each bar named by its Ascend C and TileLang line."""
    app = create_app([simulated_fa_bundle(tmp_path / "fa")])
    key = app.server.config["TILESCOPE_STORE"].options()[0]["value"]
    values = {"profile.value": key, "shown-timeline.data": "timeline"}
    got = post_callback(app, "timeline.figure", values)[0]
    fig, info = got["timeline"]["figure"], got["tl-info"]["children"]
    lanes = {y for t in fig["data"] for y in t["y"] if y}
    # each core runs only the lines of its side (support.simulator.core_cycles): 2 cube cores x 5
    # pipes (MTE2, MTE1, CUBE, FIXP, SCALAR) and 2 vector cores x VECTOR
    assert lanes == {
        f"{c} · {p}"
        for c in ("core0.cubecore0", "core1.cubecore0")
        for p in ("MTE2", "MTE1", "CUBE", "FIXP", "SCALAR")
    } | {"core0.veccore0 · VECTOR", "core0.veccore1 · VECTOR"}
    cube = next(t for t in fig["data"] if t["name"] == "Cube")
    assert (
        "CUBE: Ascend C l.101 · TileLang l.50 s_acc += q_l0 @ k_l0 · 1 instr, busy 14.222 µs"
        in cube["hovertext"]
    )
    assert info.startswith("The kernel inside, as the simulator ran it: 4 cores, 12 pipe lanes, ")
    assert fig["layout"]["title"]["text"].startswith("In-core pipeline (msprof op simulator)")
