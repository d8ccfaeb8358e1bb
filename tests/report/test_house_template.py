"""The figures' one template (report.charts.house_template), made once, from several threads: the
dashboard's server answers two browsers at once, and the first figures of both were drawn together
in the every-view browser test when the template was first made in each (a 500: ValueError from
plotly)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import plotly.io as pio
import pytest
from plotly.io._templates import Lazy

from tilescope.report import charts

THREADS = 4
ROUNDS = 40


@pytest.fixture
def every_switch() -> Iterator[None]:
    # a thread switch after almost every bytecode: what a loaded machine does now and then
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def test_threads_making_the_template_at_once_all_get_it(every_switch: None) -> None:
    errors: list[str] = []
    made: list[object] = []

    def first_figure(start: threading.Barrier) -> None:
        start.wait()
        try:
            made.append(charts.house_template())
        except Exception as exc:  # what the dashboard answered with a 500
            errors.append(repr(exc))

    for _ in range(ROUNDS):
        # as in a new process: the template not made yet, plotly_white not read yet (plotly makes
        # its objects on the first read; `Lazy` is its own mark for a template not loaded)
        charts._made_template.cache_clear()
        pio.templates._templates["plotly_white"] = Lazy
        start = threading.Barrier(THREADS)
        threads = [threading.Thread(target=first_figure, args=(start,)) for _ in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    assert len(made) == THREADS * ROUNDS
    assert set(charts.house_template()["data"]) >= set(charts.TRACE_TYPES)
