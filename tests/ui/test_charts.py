"""Dashboard charts: what is drawn where (Plotly figures, no browser)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ui import charts


def _binned() -> pd.DataFrame:
    rows = []
    for label, shift in (("entailment", 0.0), ("neutral", 0.1), ("contradiction", 0.2)):
        for status in ("retained", "removed"):
            for left in (0.0, 0.5):
                rows.append({"left": left, "right": left + 0.5, "status": status,
                             "label": label, "count": int(10 + 100 * shift)})
    return pd.DataFrame(rows)


def test_one_panel_per_label_draws_each_label_in_its_own_panel():
    fig = charts.predictability_histogram(_binned(), facet="label")
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["contradiction", "entailment", "neutral"]
    axes = {}
    for trace in fig.data:
        axes.setdefault(trace.xaxis, set()).add(tuple(trace.y))
    # three panels (x, x2, x3), each with its own label's counts
    assert sorted(axes) == ["x", "x2", "x3"]
    assert axes["x"] == {(30, 30)} and axes["x2"] == {(10, 10)} and axes["x3"] == {(20, 20)}


def test_unfaceted_histogram_has_one_panel():
    fig = charts.predictability_histogram(_binned())
    assert {t.xaxis for t in fig.data} == {"x"}


def test_round_chart_shows_the_size_after_each_round_and_readable_ticks():
    from ui.charts import removal_per_round

    n = 300  # hundreds of rounds (a Z-filter run takes 136)
    history = pd.DataFrame({"round": np.arange(1, n + 1), "size": 10_000 - 10 * np.arange(n),
                            "removed": np.full(n, 10)})
    fig = removal_per_round(history, step="Z-filter step")
    line = next(t for t in fig.data if t.type == "scatter")
    # from the size before the first round to the size after the last one
    assert line.y[0] == 10_000 and line.y[-1] == 10_000 - 10 * n
    assert list(line.x[:2]) == [0, 1] and line.x[-1] == n
    axis = fig.layout.xaxis2
    assert axis.title.text == "Z-filter step" and axis.dtick is None and fig.layout.xaxis.nticks
    few = removal_per_round(history.head(5))
    assert few.layout.xaxis.dtick == 1  # a few rounds: every round labelled
