"""The Compare tab's pair pickers: two different kernels compared with each other, as
`diff --match` does (#24) — a TileLang kernel against the vendor's operator on the same shapes."""

from __future__ import annotations

import json

import dash
import pytest

from tilescope.dashboard.app import create_app, store_of
from tilescope.diff import compare_runs, run_from_report

from support import REPO_ROOT
from support.dash_calls import callback_body, post_callback

BASE, HEAD = "aclnnMean_ReduceMeanAiCore_ReduceMean", "aclnnRmsNorm_RmsNorm_RmsNorm"


@pytest.fixture(scope="module")
def app() -> dash.Dash:
    samples = REPO_ROOT / "sample_traces"
    return create_app([samples / "attention_unfused", samples / "attention_fused"])


def _values(b: str | None, h: str | None) -> dict[str, object]:
    return {
        "c-base.value": "p0",
        "c-head.value": "p1",
        "shown-compare.data": "compare",
        "c-match-base.value": b,
        "c-match-head.value": h,
    }


@pytest.mark.slow  # over 1 s each (#23: the quick loop keeps tests under 1 s)
def test_the_pickers_list_each_sides_kernels(app: dash.Dash) -> None:
    out, _ = post_callback(app, "c-match-base.options", _values(BASE, "no such kernel"))
    store = store_of(app)
    for side, key in (("c-match-base", "p0"), ("c-match-head", "p1")):
        entry = store.get(key)
        assert entry is not None
        run = run_from_report({**entry.report, "_profile": entry.profile}, entry.label)
        assert [o["value"] for o in out[side]["options"]] == sorted({s.name for s in run.kernels.values()})
    # a kept pick stays; one the head run does not hold is dropped
    assert out["c-match-base"]["value"] == BASE and out["c-match-head"]["value"] is None


def test_a_pair_is_compared_alone_with_diffs_numbers(app: dash.Dash) -> None:
    out, _ = post_callback(app, "c-kpis.children", _values(BASE, HEAD))
    rows = out["c-grid"]["rowData"]
    store = store_of(app)
    runs = [
        run_from_report({**e.report, "_profile": e.profile}, e.label)
        for e in (store.get("p0"), store.get("p1"))
        if e is not None
    ]
    (d,) = compare_runs(*runs, match=[(BASE, HEAD)]).kernels
    assert [r["name"] for r in rows] == [f"{BASE} → {HEAD}"]
    assert (rows[0]["base_us"], rows[0]["head_us"]) == (
        round(d.base_per_step_us, 3),
        round(d.head_per_step_us, 3),
    )
    # a name that stands for two kernels of the run (two shapes) is diff's one line, not a guess
    out, _ = post_callback(app, "c-kpis.children", _values("aclnnCast_CastAiCore_Cast", HEAD))
    assert "Cannot compare: --match: 2 kernels" in json.dumps(out["c-kpis"]["children"])
    # one picker alone: the usual matching by name
    out, _ = post_callback(app, "c-kpis.children", _values(BASE, None))
    assert len(out["c-grid"]["rowData"]) > 1


def test_a_picker_value_that_is_not_text_is_refused(app: dash.Dash) -> None:
    body = callback_body(app, "c-kpis.children", _values(BASE, HEAD))
    body["inputs"][3]["value"] = {"not": "a name"}
    resp = app.server.test_client().post("/_dash-update-component", json=body)
    assert resp.status_code == 400 and "paired kernel" in resp.get_data(as_text=True)
