#!/usr/bin/env bash
# Set up (venv, packages, headless Chromium) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --browser
# One worker per core (at most 4), each taking whole test files (`--dist loadfile`: a module's
# fixtures — generated runs, the dashboard server, the emulated tilelang-ascend lowering — are built
# once): 7.4 min instead of 16.6 on the 2-core machines CI uses. `-n 0` runs in this process.
# Let pytest keep the test modules it rewrote for assertions (tests/**/__pycache__, ignored by git):
# with PYTHONDONTWRITEBYTECODE set, as in CI and these sandboxes, every worker of every run rewrote
# all of them again (4 of the 9.6 CPU seconds a worker spends collecting). A fresh clone pays once.
export PYTHONDONTWRITEBYTECODE=
exec .venv/bin/python -m pytest -q -p no:cacheprovider -n auto --maxprocesses 4 --dist loadfile "$@"
