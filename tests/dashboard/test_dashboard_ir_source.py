"""The IR view shows the bundle's copy of the kernel source and marks the finding's source lines."""

from __future__ import annotations

from tilescope.analysis import analyze
from tilescope.dashboard.ir_view import load_stages, mark_locations
from tilescope.dashboard.paths import RootSet
from tilescope.io.load import load_profile

from support import REPO_ROOT

BUNDLE = REPO_ROOT / "sample_traces" / "tilelang_fa_bundle"


def test_source_pane_comes_from_the_bundle_and_is_marked() -> None:
    profile = load_profile(BUNDLE)
    stages = load_stages(profile.ir_dir, profile.ir, "flash_fwd", RootSet.of([BUNDLE]))
    assert [s.stage for s in stages][:2] == ["source", "tvmscript"]
    source = stages[0]
    assert source.file == "flash_attention.py"
    assert source.text == (BUNDLE / "kernel" / "flash_attention.py").read_text(encoding="utf-8")

    result = analyze(profile)
    ts201 = next(f for f in result.findings if f.code == "TS201")
    locs = [loc.to_dict() for loc in ts201.locations]
    src_lines = {loc["line"] for loc in locs if loc["stage"] == "source"}
    assert src_lines, "TS201 should point at the softmax lines of the kernel source"
    assert profile.ir is not None
    mark_locations(stages, locs, profile.ir["line_map"], "flash_fwd")
    assert src_lines <= source.marked
    # The marked source lines are the softmax's reductions/elementwise ops in the kernel file.
    lines = source.text.splitlines()
    assert any("reduce_max" in lines[n - 1] or "T.reduce" in lines[n - 1] for n in source.marked)
