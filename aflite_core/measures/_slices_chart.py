"""The why-removed slices as a chart: each slice's removal rate with its Wilson 95 %
interval, beside the base rate. The slices measure draws it for the HTML report and the
Report page (:data:`aflite_core.measures.slices.MEASURE` ``figures``); the Explore page's
breakdown by column draws its own rows with the same function."""

from __future__ import annotations

import numpy as np
import pandas as pd

from aflite_core.chart_style import REFERENCE_COLOR

#: Slices the measure's figure shows (the top of the ranking).
FIGURE_SLICES = 20
# descriptions hold dataset words; Plotly reads a few HTML tags in labels (and shows
# entities as typed), so angle brackets become look-alikes
_NO_TAGS = str.maketrans({"<": "‹", ">": "›"})


def interval_chart(table: pd.DataFrame, height: int | None = None):
    """Removal rate of each slice (``rank``, ``description``, ``removal_rate``, ``ci_low``,
    ``ci_high``, ``difference``, ``size``, ``z``, ``base_rate``) with its interval, and the
    base rate; the first row of ``table`` on top."""
    import plotly.graph_objects as go  # lazy: +16 ms to import

    shown = table.iloc[::-1]
    names = [f"#{r} {str(d)[:60].translate(_NO_TAGS)}"
             for r, d in zip(shown["rank"], shown["description"], strict=True)]
    colours = np.where(shown["difference"] >= 0, "#c0392b", "#2471a3")
    fig = go.Figure(go.Scatter(
        x=shown["removal_rate"], y=names, mode="markers", marker={"color": colours, "size": 9},
        error_x={"type": "data", "symmetric": False,
                 "array": shown["ci_high"] - shown["removal_rate"],
                 "arrayminus": shown["removal_rate"] - shown["ci_low"]},
        customdata=np.column_stack([shown["size"], shown["z"]]),
        hovertemplate="%{y}<br>removal rate %{x:.1%}<br>rows %{customdata[0]:,}"
                      "<br>z %{customdata[1]:.1f}<extra></extra>"))
    base = float(table["base_rate"].iloc[0])
    fig.add_vline(x=base, line_dash="dash", line_color=REFERENCE_COLOR,
                  annotation_text=f"base rate {base:.0%}", annotation_position="top")
    fig.update_layout(height=height or 120 + 24 * len(shown), margin={"l": 10, "r": 10,
                      "t": 30, "b": 40}, xaxis={"title": "removal rate", "tickformat": ".0%",
                                              "range": [0, 1]}, showlegend=False)
    return fig


def slices_figures(run) -> list:
    """The top :data:`FIGURE_SLICES` slices of ``slices.parquet`` as an interval chart."""
    table = run.read_parquet("slices.parquet")
    if table is None or table.empty:
        return []
    fig = interval_chart(table.sort_values("rank").head(FIGURE_SLICES))
    fig.update_layout(title="Why removed: removal rate of the top slices (95 % intervals)",
                      margin={"t": 50})
    return [fig]
