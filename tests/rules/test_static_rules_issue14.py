"""Static rules TS507-TS511 (issue #14 item 4): each on a firing and a quiet kernel of the project's
own (sample_traces/kernels), and on the real TileLang 950 kernels in ../shared/kernels/real/
(skipped when that folder is absent; read there, never copied into the repository)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tilescope.chips import ChipSpec, get_chip
from tilescope.engine import AnalysisResult, run_rules
from tilescope.findings import Finding
from tilescope.profile import Profile, SourceInfo

from support import REPO_ROOT

KERNELS = REPO_ROOT / "sample_traces" / "kernels"
REAL_950 = REPO_ROOT.parent / "shared" / "kernels" / "real" / "tilelang_950"
CHIP = get_chip("910B2")  # 24 AIC / 48 AIV, L1 512 KiB
NEW = ("TS507", "TS508", "TS509", "TS510", "TS511")


@pytest.fixture(scope="session")
def lint() -> Any:
    pytest.importorskip("tilelang")
    from tilescope.ir.capture import capture_ir

    cache: dict[tuple[str, str], Any] = {}

    def get(ref: str, **params: Any) -> dict[str, Any]:
        if ref == "flash_attention_variants.py":
            # One stage: TileLang's Z3 software-pipeline scheduler is 6 of the 7 s each lowering of
            # this kernel takes with two (#23), and TS508-TS511 read the grid, the dtypes and the
            # copies of the PrimFunc as written, which the stage count does not change.
            params.setdefault("num_stages", 1)
        key = (ref, repr(sorted(params.items())))
        if key not in cache:
            path = ref if Path(ref.split(":")[0]).is_absolute() else str(KERNELS / ref)
            cache[key] = capture_ir(path, params, CHIP).ir
        return cache[key]

    return get


def analyze_ir(ir: dict[str, Any], chip: ChipSpec = CHIP) -> AnalysisResult:
    prof = Profile(
        source=SourceInfo(path=Path("k.py"), format="ir"), kernels=pd.DataFrame(), chip=chip, ir=ir
    )
    res = run_rules(prof, kinds=("static",))
    assert res.errors == []
    return res


def new_findings(ir: dict[str, Any], chip: ChipSpec = CHIP) -> list[Finding]:
    return [f for f in analyze_ir(ir, chip).findings if f.code in NEW]


def only(findings: list[Finding], code: str) -> Finding:
    (f,) = [f for f in findings if f.code == code]
    return f


# --- without TileLang: region arithmetic, ir.json 1.0 documents, the CUDA dialect -------------


def test_covered_interval_tiles_gaps_and_reversed_loops() -> None:
    from tilescope.ir.regions import covered_interval

    # qb * 128 over 7 blocks, 128-row tiles: 0..895
    assert covered_interval({"base": 0, "extent": 128, "terms": [["L0", 128, 7]]}) == (0, 896)
    # (step * 64 + bx) * 8192 with 64 blocks and 2 steps, 8192-long tiles: the mixed radix covers 0..2**20
    terms = [["L0", 8192, 64], ["L2", 64 * 8192, 2]]
    assert covered_interval({"base": 0, "extent": 8192, "terms": terms}) == (0, 2**20)
    assert covered_interval({"base": 0, "extent": 64, "terms": [["L0", 128, 8]]}) is None  # gaps
    assert covered_interval({"base": 896, "extent": 128, "terms": [["L4", -128, 8]]}) == (0, 1024)
    assert covered_interval({"base": None, "extent": 128, "terms": None}) is None  # not affine


def _hand_ir(dialect: str, **kernel: Any) -> dict[str, Any]:
    k: dict[str, Any] = {
        "name": "k", "entry": "k_kernel", "label": "k", "failure": None, "stages": [], "dialect": dialect,
        "grid": [8], "core_type": "mix", "gm_tensors": [], "allocations": [], "versions": {},
        "lowered_allocations": [], "footprint": {}, "loops": [], "gemms": [], "copies": [],
        "elementwise": [], "reduces": [], "fills": [],
    }
    k.update(kernel)
    return {"kernel_file": "k.py", "kernels": [k]}


def test_ts508_ignores_cuda_grids_and_old_documents_run_clean() -> None:
    assert new_findings(_hand_ir("tilelang-cuda")) == []
    assert [f.code for f in new_findings(_hand_ir("tilelang-0.1.15-ascend"))] == ["TS508"]
    # an ir.json 1.0 kernel (no regions, loop writes, seq or accumulates): the new rules stay quiet
    old = _hand_ir(
        "tilelang-0.1.15-ascend",
        grid=[24],
        gm_tensors=[{"name": "Out", "shape": [1000, 128], "dtype": "float32", "bytes": 512000}],
        loops=[{"id": "L0", "var": "j", "kind": "serial", "extent": 16, "num_stages": 2}],
        copies=[
            {"src": "q_l1", "dst": "q_l0", "src_level": "L1", "dst_level": "L0A", "extents": [128, 128],
             "bytes": 32768, "enclosing_loops": ["L0"]},
            {"src": "o_ub", "dst": "Out", "src_level": "UB", "dst_level": "GM", "extents": [64, 128],
             "bytes": 32768, "enclosing_loops": []},
        ],
        elementwise=[{"loop": "L1", "vars": ["r"], "extents": [64], "writes": ["row_sum"],
                      "reads": ["row_sum"], "intrinsics": [], "enclosing_loops": ["L0"]}],
    )
    assert new_findings(old) == []


# --- TS507 k-loop-not-pipelined ------------------------------------------------------------------


@pytest.mark.tilelang
def test_ts507_serial_k_loop_with_room_for_two_versions(lint: Any) -> None:
    fs = new_findings(lint("matmul_serial_k.py"))
    assert [f.code for f in fs] == ["TS507"]
    ev = fs[0].evidence
    # a_l1 128x64 fp16 = 16384 B, b_l1 64x128 fp16 = 16384 B, one version each (T.serial)
    assert ev["l1_tiles"] == {"a_l1": 16384, "b_l1": 16384}
    assert (ev["l1_bytes"], ev["l1_extra_bytes"], ev["l1_needed_bytes"]) == (32768, 32768, 65536)
    assert ev["l1_capacity_bytes"] == 524288 and ev["iterations"] == 2048 // 64
    assert "T.Pipelined(32, num_stages=2)" in fs[0].recommendation
    src = (KERNELS / "matmul_serial_k.py").read_text(encoding="utf-8").splitlines()
    loc = fs[0].locations[0]
    assert loc.line is not None and "T.serial" in src[loc.line - 1]


@pytest.mark.tilelang
def test_ts507_quiet_when_pipelined(lint: Any) -> None:
    assert new_findings(lint("matmul_serial_k.py", pipelined=True)) == []


# --- TS508 grid-leaves-cores-idle ----------------------------------------------------------------


@pytest.mark.tilelang
def test_ts508_eight_query_tiles_on_24_cores(lint: Any) -> None:
    ir = lint("flash_attention_variants.py", seq_q=1024)
    f = only(new_findings(ir), "TS508")
    ev = f.evidence
    # seq_q // block_M = 1024 // 128 = 8 blocks on 24 AIC: 16 idle, efficiency 8 / (1 x 24)
    assert (ev["blocks"], ev["cores"], ev["waves"], ev["idle_cores"]) == (8, 24, 1, 16)
    assert ev["core_efficiency"] == round(8 / 24, 4) and f.severity.value == "high"
    assert "16 cores idle" in f.message


@pytest.mark.tilelang
def test_ts508_partial_last_wave(lint: Any) -> None:
    # 26 blocks on 24 cores: 2 waves, the second with 2 of 24 busy: 26 / 48 = 0.54
    ev = only(new_findings(lint("flash_attention_variants.py", seq_q=26 * 128)), "TS508").evidence
    assert (ev["waves"], ev["last_wave_blocks"], ev["core_efficiency"]) == (2, 2, round(26 / 48, 4))


@pytest.mark.tilelang
def test_ts508_quiet_on_a_full_wave_and_not_checked_without_cores(lint: Any) -> None:
    ir = lint("flash_attention_variants.py")  # 3072 // 128 = 24 blocks on 24 cores
    assert new_findings(ir) == []
    no_cores = CHIP.with_overrides(aic_count=None, aiv_count=None)
    res = analyze_ir(lint("flash_attention_variants.py", seq_q=1024), no_cores)
    assert [(s.code, s.missing) for s in res.skipped if s.code == "TS508"] == [("TS508", ("chip.aic_count",))]
    assert "TS508" not in {f.code for f in res.findings}


@pytest.mark.tilelang
def test_ts508_leaves_a_measured_kernel_to_ts401(lint: Any) -> None:
    ir = lint("flash_attention_variants.py", seq_q=1024)
    rows = pd.DataFrame({"name": ["flash_variant_kernel_mix_aic"], "block_dim": [8], "duration_us": [50.0]})
    prof = Profile(source=SourceInfo(path=Path("k.py"), format="ir"), kernels=rows, chip=CHIP, ir=ir)
    assert "TS508" not in {f.code for f in run_rules(prof, kinds=("static",)).findings}


# --- TS509 grid-misses-problem -------------------------------------------------------------------


@pytest.mark.tilelang
def test_ts509_seq_q_1000_drops_104_rows(lint: Any) -> None:
    fs = [f for f in new_findings(lint("flash_attention_variants.py", seq_q=1000)) if f.code == "TS509"]
    by_tensor = {f.evidence["tensor"]: f for f in fs}
    assert sorted(by_tensor) == ["Out", "Q"]
    out = by_tensor["Out"]
    # grid 1000 // 128 = 7 blocks x 128 rows = 896: rows 896..999 are never written
    ev = out.evidence
    assert (ev["dim"], ev["missed"], ev["missed_ranges"]) == (0, 104, [[896, 1000]])
    assert ev["covered"] == [[0, 896]] and ev["grid"] == [7]
    assert out.severity.value == "high" and "896..999 (104 of 1000) are never written" in out.message
    assert by_tensor["Q"].severity.value == "medium" and by_tensor["Q"].evidence["written"] is False


@pytest.mark.tilelang
def test_ts509_quiet_when_the_grid_covers(lint: Any) -> None:
    fs = new_findings(lint("flash_attention_variants.py", seq_q=1024))
    assert [f for f in fs if f.code == "TS509"] == []


@pytest.mark.tilelang
def test_ts509_rmsnorm_tail_rows_grid_and_loop(lint: Any) -> None:
    # rows 4096, 8-row tiles, 48 blocks: steps = 4096 // 384 = 10; (b * 10 + s) * 8 reaches 48 x 10 x 8 = 3840
    f = next(f for f in new_findings(lint("rmsnorm.py")) if f.code == "TS509" and f.evidence["tensor"] == "Y")
    assert (f.evidence["missed"], f.evidence["covered"]) == (256, [[0, 3840]])
    assert f.evidence["tiles"][0]["terms"] == [["L0", 80, 48], ["L1", 8, 10]]


# --- TS510 low-precision-running-state -----------------------------------------------------------


@pytest.mark.tilelang
def test_ts510_fp16_row_sum_and_output_state(lint: Any) -> None:
    ir = lint("flash_attention_variants.py", state_dtype="float16")
    fs = [f for f in new_findings(ir) if f.code == "TS510"]
    assert sorted(f.evidence["buffer"] for f in fs) == ["o_ub", "row_sum"]
    for f in fs:
        # 2048 // 128 = 16 KV iterations, each adding a 128-wide sum (reduce_sum of s; P·V with K = 128)
        ev = f.evidence
        assert (ev["iterations"], ev["values_per_iteration"], ev["reduction_length"]) == (16, 128, 2048)
        assert f.severity.value == "medium" and ev["min_reduction_length"] == 1024


@pytest.mark.tilelang
def test_ts510_long_bf16_state_is_high_and_fp32_is_quiet(lint: Any) -> None:
    fs = new_findings(lint("flash_attention_variants.py", state_dtype="bfloat16", seq_kv=16384))
    assert {f.evidence["reduction_length"] for f in fs if f.code == "TS510"} == {16384}
    assert {f.severity.value for f in fs if f.code == "TS510"} == {"high"}
    assert new_findings(lint("flash_attention_variants.py")) == []  # float32 state (the default)


# --- TS511 loop-invariant-copy -------------------------------------------------------------------


@pytest.mark.tilelang
def test_ts511_q_reloaded_every_kv_iteration(lint: Any) -> None:
    f = only(new_findings(lint("flash_attention_variants.py", hoist_q=False)), "TS511")
    ev = f.evidence
    # q_l1 -> q_l0: 128 x 128 bf16 = 32768 B, 2048 // 128 = 16 iterations, 15 of them redundant
    assert (ev["src"], ev["dst"], ev["pipe"], ev["bytes_per_copy"]) == ("q_l1", "q_l0", "MTE1", 32768)
    assert (ev["iterations"], ev["redundant_copies"], ev["redundant_bytes"]) == (16, 15, 15 * 32768)
    assert ev["loops"] == ["j"] and f.severity.value == "low"


@pytest.mark.tilelang
def test_ts511_quiet_when_hoisted_and_on_copies_that_move(lint: Any) -> None:
    assert new_findings(lint("flash_attention_variants.py")) == []
    # every copy of the serial-K GEMM depends on kk (K tiles) or sits outside the loop
    assert [f for f in new_findings(lint("matmul_serial_k.py")) if f.code == "TS511"] == []


# --- the real TileLang 950 kernels (../shared/kernels/real/tilelang_950) -----------------------

# README caveats: two files are newer than tilelang 0.1.15 and one imports torch_npu; the test
# lints a patched copy in a temporary directory (the originals are read, never copied here).
PATCHES = {
    "flash_attention_core.py": (
        ("from tilelang.language import simd as S", "from tilelang.ascend.language import simd as S"),
        ("softmax_full, 0)", "softmax_full)"),  # vexpdif takes three arguments in 0.1.15
    ),
    "example_gemm_l0.py": (("import tilelang.language as T", "import tilelang.ascend.language as T"),),
    "readme_matmul_relu.py": (("import torch_npu\n", ""),),
    "example_vecadd.py": (),
}


@pytest.fixture(scope="session")
def real(tmp_path_factory: pytest.TempPathFactory, lint: Any) -> Any:
    if not REAL_950.is_dir():
        pytest.skip(f"real kernels not found at {REAL_950}")
    from tilescope.ir.capture import capture_ir

    work = tmp_path_factory.mktemp("real950")
    chip = get_chip("950")
    cache: dict[str, dict[str, Any]] = {}

    def get(name: str, builder: str, **params: Any) -> dict[str, Any]:
        if name not in cache:
            text = (REAL_950 / name).read_text(encoding="utf-8")
            for old, new in PATCHES[name]:
                assert old in text, (name, old)
                text = text.replace(old, new)
            text = text.split("\nM, N, K = 256, 7168, 2048")[0]  # the README's NPU run at module level
            (work / name).write_text(text, encoding="utf-8")
            cache[name] = capture_ir(f"{work / name}:{builder}", params, chip).ir
        return cache[name]

    return get


@pytest.mark.tilelang
def test_real_flash_attention_core(real: Any) -> None:
    ir = real("flash_attention_core.py", "flash_attention_fwd", q_len=1024, kv_len=1024)
    assert ir["lowered"] is True and ir["kernels"][0]["grid"] == [8]
    chip = get_chip("950")
    res = analyze_ir(ir, chip)
    fs = [f for f in res.findings if f.code in NEW]
    # The kernel reloads Q_shared (L1, 128 x 128 bf16) into qk_a_l0 inside the KV loop (macro qk):
    # 8 KV blocks of 128, 7 redundant MTE1 copies per block; everything else is quiet.
    assert [f.code for f in fs] == ["TS511"]
    ev = fs[0].evidence
    assert (ev["src"], ev["dst"], ev["iterations"], ev["bytes_per_copy"]) == ("Q_shared", "qk_a_l0", 8, 32768)
    # 8 blocks: whether that leaves cores idle needs the 950's core count
    ts508 = [s for s in res.skipped if s.code == "TS508"]
    if chip.aic_count is None:
        assert ts508 and ts508[0].missing == ("chip.aic_count",)
    else:
        assert ("TS508" in {f.code for f in fs}) == (8 % chip.aic_count != 0 or chip.aic_count > 8)


@pytest.mark.tilelang
@pytest.mark.parametrize(
    ("name", "builder", "params"),
    [
        ("example_gemm_l0.py", "gemm", {}),
        ("readme_matmul_relu.py", "matmul_relu", {"M": 256, "N": 7168, "K": 2048}),
        ("example_vecadd.py", "vector_add", {"N": 64 * 8192 * 2}),
    ],
)
def test_real_kernels_quiet(real: Any, name: str, builder: str, params: dict[str, Any]) -> None:
    ir = real(name, builder, **params)
    assert ir["lowered"] is True
    chip = get_chip("950")
    fs = [f for f in analyze_ir(ir, chip).findings if f.code in NEW and f.code != "TS508"]
    assert fs == []


def test_ts508_counts_the_cores_the_ascend_c_launches_on() -> None:
    """tilelang-ascend launches a Vector-only kernel as KERNEL_TYPE_MIX_AIC_1_2 (one AI Core group
    per block, `vid` picking the AIV): 64 blocks run on the 24 AIC groups, not on 48 AIV cores."""
    from tilescope.ir.model import launch_cores

    assert launch_cores("KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);") == "aic"
    assert launch_cores("KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);") == "aiv"
    assert launch_cores("extern \"C\" __global__ __aicore__ void k()") is None
    mixed = _hand_ir("tilelang-ascend", grid=[64], core_type="vector", launch_cores="aic")
    (f,) = [f for f in new_findings(mixed) if f.code == "TS508"]
    assert "64 blocks on 24 AIC cores" in f.message
    assert f.evidence["cores"] == 24
    # no kernel type in the code: a Vector-only kernel's blocks go to the AIV cores
    plain = _hand_ir("tilelang-0.1.15-ascend", grid=[64], core_type="vector")
    (g,) = [f for f in new_findings(plain) if f.code == "TS508"]
    assert "64 blocks on 48 AIV cores" in g.message
