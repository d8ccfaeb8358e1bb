"""What `pip install .` installs: one top-level package, `tilescope`, with every module and data
file of the repository's four folders; and the core commands without the optional extras (a CI job
that only runs `analyze -f sarif` installs no plotting or web stack)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support import REPO_ROOT

REPO = REPO_ROOT
FOLDERS = {"analyzer": "tilescope", "rules": "tilescope/rules", "dashboard": "tilescope/dashboard",
           "collectors": "tilescope/collectors"}
SAMPLE = REPO / "sample_traces" / "tilelang_fa_bundle"
# Importing any of these fails in the child: the extras are not installed there.
NO_EXTRAS = ("plotly", "dash", "dash_ag_grid", "dask", "distributed", "mcp")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(REPO)], check=True, capture_output=True, timeout=300)
    (found,) = out.glob("tilescope-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel's files, as pip would lay them into site-packages."""
    site = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    return site


def test_the_wheel_installs_one_top_level_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        tops = {n.split("/")[0] for n in names}
        info = wheel.name.split("-py3")[0] + ".dist-info"
        assert tops == {"tilescope", info}
        assert z.read(f"{info}/top_level.txt").decode().split() == ["tilescope"]
        entry = z.read(f"{info}/entry_points.txt").decode()
    assert "tilescope = tilescope.cli:main" in entry


def test_every_module_and_data_file_is_in_the_wheel(wheel: Path) -> None:
    """A folder missing from pyproject.toml's package list would install without its files."""
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    expected = set()
    for folder, pkg in FOLDERS.items():
        for p in (REPO / folder).rglob("*"):
            shipped = p.suffix in (".py", ".json", ".toml", ".css", ".js")
            if p.is_file() and "__pycache__" not in p.parts and shipped:
                expected.add(f"{pkg}/{p.relative_to(REPO / folder).as_posix()}")
    assert expected - names == set()
    assert "tilescope/report/schema/report.schema.json" in expected  # the walk saw the data files


def _run(installed: Path, *args: str) -> subprocess.CompletedProcess[str]:
    block = "; ".join(f"sys.modules[{m!r}] = None" for m in NO_EXTRAS)
    code = (f"import sys; {block}; import tilescope; "
            f"assert tilescope.__file__.startswith({str(installed)!r}), tilescope.__file__; "
            "from tilescope.cli import main; sys.exit(main(sys.argv[1:]))")
    # -P: only the installed copy is importable (not the checkout's folders through the cwd)
    return subprocess.run([sys.executable, "-P", "-c", code, *args], cwd=installed,
                          env={"PYTHONPATH": str(installed), "PATH": "/usr/bin:/bin", "NO_COLOR": "1",
                               "TILESCOPE_CACHE_DIR": str(installed / ".cache")},
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("fmt", ["text", "json", "md", "sarif"])
def test_analyze_works_without_the_extras(installed: Path, fmt: str) -> None:
    r = _run(installed, "analyze", str(SAMPLE), "-f", fmt)
    assert r.returncode == 0, r.stderr
    assert "TS401" in r.stdout


def test_a_command_whose_extra_is_missing_exits_3_with_the_install_line(installed: Path) -> None:
    r = _run(installed, "analyze", str(SAMPLE), "-f", "html")
    assert r.returncode == 3
    assert r.stderr.strip().splitlines() == [
        "tilescope: error: --format html needs the html extra (plotly not installed): "
        "pip install 'tilescope[html]'"
    ]
    r = _run(installed, "serve", str(SAMPLE), "--check")
    assert r.returncode == 3
    assert "needs the dashboard extra (plotly, dash, dash_ag_grid not installed): " \
           "pip install 'tilescope[dashboard]'" in r.stderr
    r = _run(installed, "mcp", "--root", str(SAMPLE))
    assert r.returncode == 3
    assert r.stderr.strip().splitlines() == [
        "tilescope: error: tilescope mcp needs the agent extra (mcp not installed): "
        "pip install 'tilescope[agent]'"
    ]


def test_python_m_tilescope_is_the_cli(installed: Path) -> None:
    r = subprocess.run([sys.executable, "-P", "-m", "tilescope", "rules"], cwd=installed,
                       env={"PYTHONPATH": str(installed), "PATH": "/usr/bin:/bin"},
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert "TS401" in r.stdout
