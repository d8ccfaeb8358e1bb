#!/usr/bin/env bash
# Set up (venv, packages, headless Chromium) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --browser
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
