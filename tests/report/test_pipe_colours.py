"""The pipe colours: one palette (tilescope.report.palette) for the HTML report and the dashboard,
and the Cube core's pipes never in the Vector core's colours (#28 item 11: MTE2 (AIC) and MTE2
(AIV) were one green, Scalar (AIC) and Scalar (AIV) one purple)."""

from __future__ import annotations

import pandas as pd

from tilescope.dashboard import figures as F
from tilescope.report import charts
from tilescope.report.palette import MTE2, PIPE_SERIES, SCALAR


def test_every_pipe_series_has_its_own_colour() -> None:
    colours = [colour for _, _, colour in PIPE_SERIES]
    assert len(set(colours)) == len(colours) == 10
    by_label = {label: colour for _, label, colour in PIPE_SERIES}
    assert by_label["MTE2 (AIC)"] == MTE2 != by_label["MTE2 (AIV)"]
    assert by_label["Scalar (AIC)"] == SCALAR != by_label["Scalar (AIV)"]


def test_the_report_and_the_dashboard_draw_each_pipe_in_the_same_colour() -> None:
    # generated: one launch with every pipe share set (tilescope.metrics' columns, 0-1)
    row = {col: 0.1 + 0.05 * i for i, (col, _, _) in enumerate(PIPE_SERIES)}
    dash_bar = F.pipe_ratio_figure(pd.DataFrame([{"duration_us": 10.0, **row}]), "k").to_dict()["data"][0]
    dashboard = dict(zip(dash_bar["x"], dash_bar["marker"]["color"], strict=True))
    traces = charts.pipe_ratio_bars([{"name": "k", **row}]).to_dict()["data"]
    report = {t["name"]: t["marker"]["color"] for t in traces}
    assert dashboard == report == {label: colour for _, label, colour in PIPE_SERIES}
