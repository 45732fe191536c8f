"""Dashboard charts: what is drawn where (Plotly figures, no browser)."""

from __future__ import annotations

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
