"""manifest.json: schema, versions, CANN detection, sha256; the kernel spec convention."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tilescope.collectors import bundle as bundlemod
from tilescope.collectors import spec as specmod
from tilescope.errors import UsageError

from support import REPO_ROOT

REPO = REPO_ROOT
VECTOR_ADD = REPO / "sample_traces" / "kernels" / "collect_vector_add.py"


def minimal_manifest(**over: Any) -> dict[str, Any]:
    m = bundlemod.base_manifest()
    m.update(ir_only=True, kernel={"file": "/k.py", "name": "k.py", "sha256": "0" * 64, "function": "f",
                                   "entry": None, "source": "kernel/k.py"})
    m.update(over)
    return m


def test_schema_is_valid_draft_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(bundlemod.manifest_schema())


def test_base_manifest_validates_and_has_versions() -> None:
    m = minimal_manifest()
    bundlemod.validate_manifest(m)
    v = m["versions"]
    assert set(v) >= {"cann", "torch", "torch_npu", "tilelang", "tilescope", "python"}
    assert v["tilescope"] == "0.1.0"
    assert m["created_utc"].endswith("Z")


@pytest.mark.parametrize("bad", [
    {"schema_version": 2},
    {"backend": "nsight"},
    {"correctness": {"status": "not_run"}},  # not_run needs a reason
    {"correctness": {"status": "pass"}},  # pass needs device + outputs
    {"ir_only": True, "backend": "torch_npu"},
    {"ir_only": False, "backend": None},
    {"kernel": {"file": "/k.py", "name": "k.py", "sha256": "xyz", "function": None, "entry": None,
                "source": None}},
    {"commands": [{"argv": "msprof op", "purpose": "x"}]},  # argv must be a list
    {"surprise": 1},
])
def test_schema_rejects(bad: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        bundlemod.validate_manifest(minimal_manifest(**bad))


def test_cann_version_from_toolkit_files(tmp_path: Path) -> None:
    home = tmp_path / "latest"
    (home / "x86_64-linux").mkdir(parents=True)
    (home / "x86_64-linux" / "ascend_toolkit_install.info").write_text(
        "package_name=Ascend-cann-toolkit\nversion=8.0.RC3\ninnerversion=V100R001C19SPC001B220\n")
    assert bundlemod.cann_version({"ASCEND_TOOLKIT_HOME": str(home)}) == (
        "8.0.RC3", str(home / "x86_64-linux" / "ascend_toolkit_install.info"))
    old = tmp_path / "old"
    old.mkdir()
    (old / "version.cfg").write_text("# version cfg\nruntime_running_version=[7.0.0.5.242:8.0.RC1]\n")
    assert bundlemod.cann_version({"ASCEND_HOME_PATH": str(old)})[0] == "8.0.RC1"
    compiler = tmp_path / "c"
    (compiler / "compiler").mkdir(parents=True)
    (compiler / "compiler" / "version.info").write_text("Version=7.0.0\n")
    assert bundlemod.cann_version({"ASCEND_HOME_PATH": str(compiler)})[0] == "7.0.0"


def test_cann_version_absent_is_null(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundlemod, "DEFAULT_CANN_HOME", tmp_path / "none")
    assert bundlemod.cann_version({}) == (None, None)
    assert bundlemod.versions({})["cann"] is None


def test_sha256_and_jsonable(tmp_path: Path) -> None:
    p = tmp_path / "k.py"
    p.write_bytes(b"print(1)\n")
    assert specmod.file_sha256(p) == hashlib.sha256(b"print(1)\n").hexdigest()

    class DType:
        def __str__(self) -> str:
            return "float16"

    got = bundlemod.jsonable({"a": (1, 2), "d": DType(), "n": None})
    assert got == {"a": [1, 2], "d": "float16", "n": None}


def test_write_manifest_validates_first(tmp_path: Path) -> None:
    with pytest.raises(jsonschema.ValidationError):
        bundlemod.write_manifest(tmp_path, minimal_manifest(backend="bogus"))
    assert not (tmp_path / "manifest.json").exists()
    bundlemod.write_manifest(tmp_path, minimal_manifest())
    assert json.loads((tmp_path / "manifest.json").read_text())["schema_version"] == 1


# --- the spec convention -------------------------------------------------------------------------

def test_spec_from_plain_dict() -> None:
    spec = specmod.spec_from_declaration(
        {"inputs": [("A", ("M", "K"), "float16"), {"name": "B", "shape": ["K", 64], "dtype": "dtype",
                                                    "init": "ones"}],
         "out_idx": 2, "reference": lambda a, b: a @ b, "atol": 1e-2}, "where")
    assert spec.out_idx == (2,)
    assert spec.inputs[1] == specmod.TensorSpec("B", ("K", 64), "dtype", "ones")
    assert spec.atol == 1e-2 and spec.rtol == 1e-3
    assert specmod.input_shapes(spec, {"M": 128, "K": 32}) == [(128, 32), (32, 64)]


@pytest.mark.parametrize("decl, match", [
    ({"inputs": []}, "needs 'inputs' and 'out_idx'"),
    ({"inputs": [], "out_idx": [0], "refrence": None}, "unknown key"),
    ({"inputs": [("A", (4,), "float32", "gauss")], "out_idx": [1]}, "init must be"),
    ({"inputs": [("A",)], "out_idx": [1]}, "an input must be"),
    ({"inputs": [], "out_idx": [0], "reference": 3}, "callable"),
])
def test_spec_errors(decl: dict[str, Any], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        specmod.spec_from_declaration(decl, "k.py")


def test_eval_dim() -> None:
    p = {"M": 256, "block": 64}
    assert specmod.eval_dim(7, p) == 7
    assert specmod.eval_dim("M", p) == 256
    assert specmod.eval_dim("M // block * 2 + 1", p) == 9
    with pytest.raises(UsageError, match="no parameter"):
        specmod.eval_dim("N", p)
    with pytest.raises(UsageError, match="only ints"):
        specmod.eval_dim("__import__('os')", p)


def test_resolve_params_merges_defaults() -> None:
    def factory(M: int, N: int = 4, dtype: str = "float16") -> None: ...

    assert specmod.resolve_params(factory, {"M": 8}) == {"M": 8, "N": 4, "dtype": "float16"}
    with pytest.raises(UsageError, match="unknown --param Q"):
        specmod.resolve_params(factory, {"M": 1, "Q": 2})
    with pytest.raises(UsageError, match="missing --param M"):
        specmod.resolve_params(factory, {})


def test_make_inputs_is_deterministic_and_compare_outputs() -> None:
    torch = pytest.importorskip("torch")
    spec = specmod.spec_from_declaration(
        {"inputs": [("A", ("N",), "dtype"), ("I", (3,), "int32")], "out_idx": [2], "seed": 3}, "x")
    a1, i1 = specmod.make_inputs(spec, {"N": 16, "dtype": "float16"}, "cpu")
    a2, _ = specmod.make_inputs(spec, {"N": 16, "dtype": "float16"}, "cpu")
    assert a1.dtype == torch.float16 and i1.dtype == torch.int32 and a1.shape == (16,)
    assert torch.equal(a1, a2)
    want = torch.tensor([1.0, 2.0, 4.0])
    rows = specmod.compare_outputs([torch.tensor([1.0, 2.0, 4.1])], [want], ["C"], atol=0.01, rtol=0.01)
    assert rows[0]["passed"] is False and rows[0]["mismatched"] == 1
    assert rows[0]["max_abs_err"] == pytest.approx(0.1, abs=1e-6)
    assert rows[0]["max_rel_err"] == pytest.approx(0.025, abs=1e-6)
    ok = specmod.compare_outputs([want.clone()], [want], ["C"], atol=0.0, rtol=0.0)
    assert ok[0]["passed"] is True and ok[0]["max_abs_err"] == 0.0
    shape = specmod.compare_outputs([torch.zeros(2)], [want], ["C"], atol=1, rtol=1)
    assert shape[0]["passed"] is False and shape[0]["expected_shape"] == [3]


def test_example_kernel_declares_its_spec() -> None:
    pytest.importorskip("tilelang")
    module = specmod.load_module(VECTOR_ADD)
    spec = specmod.find_spec(module, "vector_add", VECTOR_ADD)
    assert spec is not None and spec.out_idx == (2,)
    assert specmod.resolve_dtype("dtype", {"dtype": "float32"}) == "float32"


def test_parse_kernel_ref(tmp_path: Path) -> None:
    k = tmp_path / "k.py"
    k.write_text("")
    assert specmod.parse_kernel_ref(f"{k}:fn") == specmod.KernelRef(k.resolve(), "fn")
    assert specmod.parse_kernel_ref(str(k)).function is None
    with pytest.raises(UsageError, match="not found"):
        specmod.parse_kernel_ref(str(tmp_path / "nope.py:fn"))


def test_make_portable_rewrites_paths_under_the_root(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    kernel = root / "kernels" / "k.py"
    kernel.parent.mkdir(parents=True)
    kernel.write_text("x = 1\n")
    b = root / "bundle"
    (b / "ir").mkdir(parents=True)
    (b / "collect").mkdir()
    m = bundlemod.ir_only_manifest(kernel, "k", None, {}, "910B2", True,
                                   {"status": "not_run", "reason": "test"})
    m["commands"] = [{"argv": [str(root / ".venv/bin/python3"), "-m", "tilescope.collectors.worker"],
                      "purpose": "check", "log": "collect/check_cpu.log"}]
    bundlemod.write_manifest(b, m)
    (b / "ir" / "ir.json").write_text(json.dumps({"kernel_file": str(kernel)}))
    (b / "collect" / "check_cpu.log").write_text(f"reading {kernel}\n")
    changed = bundlemod.make_portable(b, root)
    assert sorted(p.name for p in changed) == ["check_cpu.log", "ir.json", "manifest.json"]
    out = bundlemod.read_manifest(b)
    assert out["kernel"]["file"] == "kernels/k.py" and out["kernel"]["sha256"] == m["kernel"]["sha256"]
    assert out["commands"][0]["argv"][0] == ".venv/bin/python3"
    assert json.loads((b / "ir" / "ir.json").read_text())["kernel_file"] == "kernels/k.py"
    assert str(tmp_path) not in (b / "collect" / "check_cpu.log").read_text()
    assert bundlemod.make_portable(b, root) == []  # idempotent


REPO = REPO_ROOT


def test_flash_attention_spec_record() -> None:
    from tilescope.collectors.run import spec_record

    rec = spec_record(REPO / "sample_traces/kernels/flash_attention.py", "flash_attention",
                      {"seq_q": 256, "seq_kv": 512, "head_dim": 64, "dtype": "bfloat16"})
    assert rec is not None
    assert [(i["name"], i["shape"], i["dtype"]) for i in rec["inputs"]] == [
        ("Q", [256, 64], "bfloat16"), ("K", [512, 64], "bfloat16"), ("V", [512, 64], "bfloat16")]
    assert rec["out_idx"] == [3] and rec["reference"] == "_reference" and rec["cpu"] is False


def test_flash_attention_reference_is_softmax_qk_v() -> None:
    torch = pytest.importorskip("torch")
    from tilescope.collectors.spec import find_spec, load_module

    path = REPO / "sample_traces/kernels/flash_attention.py"
    spec = find_spec(load_module(path), "flash_attention", path)
    assert spec is not None and spec.reference is not None
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(n, 8, generator=g) for n in (4, 6, 6))
    want = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None])[0]
    assert torch.allclose(spec.reference(q, k, v), want, atol=1e-6)


def test_committed_ir_only_bundle_is_portable_and_records_the_spec() -> None:
    b = REPO / "sample_traces" / "bundle_ir_only_fa"
    if not b.is_dir():
        pytest.skip("sample_traces/bundle_ir_only_fa not present")
    m = bundlemod.read_manifest(b)
    bundlemod.validate_manifest(m)
    assert m["kernel"]["spec"]["out_idx"] == [3] and m["correctness"]["status"] == "not_run"
    assert m["kernel"]["sha256"] == hashlib.sha256((b / m["kernel"]["source"]).read_bytes()).hexdigest()
    for path in [b / "manifest.json", b / "ir" / "ir.json", *sorted((b / "collect").iterdir())]:
        text = path.read_text(encoding="utf-8")
        assert str(REPO) not in text and "/home/" not in text and "/tmp/" not in text, path
