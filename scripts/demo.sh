#!/usr/bin/env bash
# The main job on the bundled sample: set up, diagnose the TileLang flash-attention run bundle
# (generated profile + real TileLang IR), write the reports, diagnose and diff the bundled 8-rank
# run, then serve the dashboard.
#   bash scripts/demo.sh            # ends by serving http://127.0.0.1:8050/ (Ctrl-C to stop)
#   bash scripts/demo.sh --no-serve # reports only, prints the URL command instead
set -euo pipefail
cd "$(dirname "$0")/.."
serve=1
[ "${1:-}" = "--no-serve" ] && serve=0

bash scripts/setup.sh
ts=.venv/bin/tilescope
bundle=sample_traces/tilelang_fa_bundle
mkdir -p out

echo "== tilescope analyze $bundle" >&2
$ts analyze "$bundle"
$ts analyze "$bundle" --format html -o out/fa-report.html
$ts analyze "$bundle" --format md -o out/fa-report.md
$ts analyze "$bundle" --format sarif -o out/fa-report.sarif

echo "== tilescope diff: the unfused vs the fused attention layer" >&2
$ts diff sample_traces/attention_unfused sample_traces/attention_fused --format md -o out/attention-diff.md
$ts diff sample_traces/attention_unfused sample_traces/attention_fused | tail -n 4

cluster=sample_traces/cluster_8rank
echo "== tilescope analyze $cluster: 8 ranks, rank 3 slow, link 5->6 slow (generated)" >&2
$ts analyze "$cluster"
$ts analyze "$cluster" --format md -o out/cluster-report.md

echo "== tilescope diff: $cluster vs the same run with rank 3 fixed (written by the generator)" >&2
.venv/bin/python sample_traces/generate.py --ranks 8 --slow-rank -1 --out out/cluster_8rank_fixed >/dev/null
$ts diff "$cluster" out/cluster_8rank_fixed --format md -o out/cluster-diff.md
$ts diff "$cluster" out/cluster_8rank_fixed

echo >&2
echo "reports: out/fa-report.html  out/fa-report.md  out/fa-report.sarif  out/attention-diff.md" >&2
echo "         out/cluster-report.md  out/cluster-diff.md" >&2
if [ "$serve" = 1 ]; then
  exec $ts serve "$bundle" sample_traces/attention_unfused sample_traces/attention_fused "$cluster" --no-browser
else
  $ts serve "$bundle" sample_traces/attention_unfused sample_traces/attention_fused "$cluster" --check
fi
