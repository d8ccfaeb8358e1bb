#!/usr/bin/env bash
# Set up everything tilescope needs on a fresh Debian/Ubuntu machine: a virtualenv in .venv with
# the package with the dashboard, cluster, agent and TileLang extras (CPU torch first, so pip does not
# pull a multi-GB CUDA torch) and the test tools, at the versions of constraints.txt; with --browser
# also Debian's chromium + chromium-driver for the browser tests.
# Idempotent: a stamp records what was installed, so a second run takes a second.
set -euo pipefail
cd "$(dirname "$0")/.."

want_browser=0
for arg in "$@"; do
  case "$arg" in
    --browser) want_browser=1 ;;
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup.sh: Python >= 3.11 is required (found $("$PY" --version 2>&1))" >&2
  exit 3
fi

if [ "$want_browser" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup.sh: installing chromium and chromium-driver (Debian packages)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  elif command -v sudo >/dev/null 2>&1; then
    sudo apt-get update -qq >/dev/null
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "setup.sh: chromium is missing and I am not root; browser tests will be skipped" >&2
  fi
fi

# Byte-compile our packages, as pip does for an installed (non-editable) package: with
# PYTHONDONTWRITEBYTECODE set (CI, this sandbox) every command would otherwise compile ~80 modules
# from source (~0.1 s of a 0.8 s `analyze`). Only changed files are recompiled; ~0.1 s when current.
compile_packages() {
  [ -x .venv/bin/python ] && .venv/bin/python -m compileall -q -j 0 analyzer rules collectors dashboard >/dev/null || true
}

stamp=.venv/.tilescope-setup
want="$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/tilescope ]; then
  compile_packages
  exit 0
fi
[ -d .venv ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# Every version from the one lock, constraints.txt (pyproject.toml declares ranges; the lock is what
# the suite ran on). torch first: tilelang declares an unpinned torch and would otherwise resolve a
# CUDA build.
.venv/bin/python -m pip install -q -c constraints.txt "torch==2.13.0"
.venv/bin/python -m pip install -q -c constraints.txt -e ".[test,tilelang,dashboard,cluster,agent]"
echo "$want" > "$stamp"
compile_packages
