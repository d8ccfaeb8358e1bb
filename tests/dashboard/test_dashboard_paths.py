"""Root confinement: no request can make the dashboard read outside the allowed roots."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tilescope.dashboard.app import create_app, store_of
from tilescope.dashboard.ir_view import load_stages
from tilescope.dashboard.paths import PathRejected, RootSet, confine, discover_profiles


@pytest.fixture()
def tree(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "root"
    (root / "runs" / "a").mkdir(parents=True)
    (root / "runs" / "a" / "kernel_details.csv").write_text("Name,Duration(us)\n", encoding="utf-8")
    (root / "runs" / "b" / "deep").mkdir(parents=True)
    (root / "runs" / "b" / "deep" / "manifest.json").write_text("{}", encoding="utf-8")
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "kernel_details.csv").write_text("secret", encoding="utf-8")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    (root / "runs" / "link.csv").symlink_to(outside / "kernel_details.csv")
    return {"root": root, "outside": outside}


def test_confine_accepts_paths_inside(tree: dict[str, Path]) -> None:
    root = tree["root"].resolve()
    roots = RootSet.of([root])
    assert confine(root, "runs/a", roots) == root / "runs" / "a"
    assert confine(root, "runs/./a/", roots) == root / "runs" / "a"
    assert confine(root, "runs%2Fa", roots) == root / "runs" / "a"


@pytest.mark.parametrize(
    "requested",
    [
        "..",
        "../secret",
        "runs/../../secret",
        "runs/a/../../../secret",
        "/etc/passwd",
        "//etc/passwd",
        "~/.ssh",
        "C:/Windows",
        "%2e%2e/secret",
        "%2E%2E%2Fsecret",
        "%252e%252e%252fsecret",  # double-encoded
        "runs\\..\\..\\secret",
        "runs/a\x00/../../secret",
        "escape",  # a symlink pointing out of the root
        "escape/kernel_details.csv",
        "runs/link.csv",
        "no/such/dir",
    ],
)
def test_confine_rejects_escapes(tree: dict[str, Path], requested: str) -> None:
    with pytest.raises(PathRejected):
        confine(tree["root"].resolve(), requested, RootSet.of([tree["root"]]))


def test_root_keys_are_checked(tree: dict[str, Path]) -> None:
    roots = RootSet.of([tree["root"]])
    assert roots.resolve_key("0:runs/a") == (tree["root"] / "runs" / "a").resolve()
    for bad in ("1:runs/a", "x:runs/a", "runs/a", "-1:runs", "0:../secret", f"0:{tree['outside']}"):
        with pytest.raises(PathRejected):
            roots.resolve_key(bad)


def test_discovery_lists_profiles_and_skips_symlinks_out(tree: dict[str, Path]) -> None:
    found = discover_profiles(RootSet.of([tree["root"]]))
    assert [key for key, _ in found] == ["0:runs/a", "0:runs/b/deep"]
    assert all("secret" not in label and "escape" not in label for _, label in found)


def test_store_get_refuses_a_key_outside_the_roots(tree: dict[str, Path]) -> None:
    app = create_app([], roots=[tree["root"]])
    store = store_of(app)
    assert {o["value"] for o in store.options()} == {"0:runs/a", "0:runs/b/deep"}
    for bad in ("0:../secret", "0:escape", "0:%2e%2e/secret", "0:/etc"):
        with pytest.raises(PathRejected):
            store.get(bad)


def test_picker_callback_reports_a_bad_key_without_reading_it(tree: dict[str, Path]) -> None:
    from support.dash_calls import post_callback

    app = create_app([], roots=[tree["root"]])
    for bad in ("0:../secret", "0:escape", "0:%2e%2e%2fsecret"):
        out, _ = post_callback(app, "chip-info.children", {"profile.value": bad})
        assert out["load-error"]["children"].startswith("Cannot open this profile")
        assert out["chip-info"]["children"] == []


def test_dash_static_routes_do_not_serve_files_outside_assets(tree: dict[str, Path]) -> None:
    app = create_app([], roots=[tree["root"]])
    client = app.server.test_client()
    secret = str(tree["outside"] / "kernel_details.csv")
    for url in (
        "/assets/../../../../" + secret,
        "/assets/%2e%2e/%2e%2e/etc/passwd",
        "/_dash-component-suites/../../../etc/passwd",
        "/assets/..%2f..%2fapp.py",
    ):
        resp = client.get(url)
        assert resp.status_code in (400, 404), url
        assert b"secret" not in resp.data
    assert client.get("/assets/tilescope.css").status_code == 200


def test_ir_json_cannot_point_the_ir_view_outside_ir(tmp_path: Path) -> None:
    ir_dir = tmp_path / "bundle" / "ir"
    ir_dir.mkdir(parents=True)
    (tmp_path / "secret.py").write_text("TOKEN = 1\n", encoding="utf-8")
    (tmp_path / "outside.cpp").write_text("int secret;\n", encoding="utf-8")
    os.symlink(tmp_path / "outside.cpp", ir_dir / "kernel.cpp")
    (ir_dir / "final.py").write_text("x = 1\n", encoding="utf-8")
    ir = {
        "kernels": [
            {
                "name": "k",
                "stages": [
                    {"name": "tvmscript", "file": "../../secret.py"},
                    {"name": "final", "file": "final.py"},
                    {"name": "ascendc", "file": "kernel.cpp"},  # a symlink out of ir/
                ],
            }
        ]
    }
    stages = load_stages(ir_dir, ir, "k", RootSet.of([tmp_path / "bundle"]))
    assert [s.stage for s in stages] == ["final"]
    assert all("secret" not in s.text for s in stages)
