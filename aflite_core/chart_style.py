"""One look for every chart: the colour-blind-safe palette and the reference lines.

The dashboard (``ui/charts.py``) and the HTML report (:mod:`aflite_core.report.html`) draw
with these, so a status has one colour wherever it is shown. Colours are Okabe-Ito
(distinguishable with colour-vision deficiency) and readable on light and dark themes.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

#: Colour per row status.
STATUS_COLORS = {
    "retained": "#0072B2",
    "removed": "#E69F00",
    "unfiltered": "#56B4E9",
    "warmup": "#999999",
    "excluded": "#CC79A7",
}
#: Colours of the usual comparison sets: "before" is neutral grey, "after" the retained blue.
SET_COLORS = {
    "before": "#999999",
    "full": "#999999",
    "after": "#0072B2",
    "retained": "#0072B2",
    "random": "#009E73",
    "train": "#56B4E9",
    "test": "#D55E00",
}
#: Qualitative palette for labels and other categories.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
           "#999999")
#: Colour of reference lines (majority-class rate, chance).
REFERENCE_COLOR = "#555555"
#: Right margin (px) that holds the reference lines' labels beside the plot.
REFERENCE_MARGIN = 150


def chart_text(value: Any, limit: int = 60) -> str:
    """Text from the data as a chart shows it: cut to ``limit`` characters and escaped, since
    Plotly renders a subset of HTML in labels, legends and hover text."""
    text = "" if value is None else str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return html.escape(text, quote=True)


def add_reference_lines(fig: Any, references: Mapping[str, float], *,
                        percent: bool = False) -> Any:
    """Dashed horizontal lines at ``references`` (``{name: value}``), each labelled in the
    right margin, outside the bars; the first label sits above its line and the second
    below, so two close levels (a majority rate of 35.8 % beside chance at 33.3 %) do not
    overprint each other. Returns ``fig``; the caller keeps a right margin of at least
    :data:`REFERENCE_MARGIN` px."""
    for i, (name, value) in enumerate(references.items()):
        text = (f"{html.escape(str(name), quote=False)} "
                + (f"{value:.1%}" if percent else f"{value:.3g}"))
        fig.add_hline(y=value, line_dash="dash" if i % 2 == 0 else "dot",
                      line_color=REFERENCE_COLOR, line_width=1)
        fig.add_annotation(xref="paper", x=1.0, xanchor="left", y=value, yref="y",
                           yanchor="bottom" if i % 2 == 0 else "top", text=text,
                           showarrow=False, font={"size": 11, "color": REFERENCE_COLOR})
    if references:
        margin = fig.layout.margin
        fig.update_layout(margin={"r": max(REFERENCE_MARGIN, margin.r or 0)})
    return fig


def rounds_figure(history: Any, *, step: str = "round") -> Any:
    """Rows removed per round (bars, top) and the set size after each round (line, below,
    starting from the size before the first round), on one shared round axis.

    Parameters
    ----------
    history : DataFrame
        One row per round with ``round``, ``removed`` and ``size`` (the size at the start
        of the round, as the filters record it).
    step : str
        What a round is called (``AFLite round``, ``Z-filter step``): the axis title.

    Ticks stay readable at hundreds of rounds: integers, at most about ten of them.
    """
    import numpy as np  # lazy: +418 ms to import
    import pandas as pd  # lazy: +1176 ms to import
    from plotly.subplots import make_subplots  # lazy: +217 ms to import

    has_size = "size" in history and len(history)
    fig = make_subplots(rows=2 if has_size else 1, cols=1, shared_xaxes=True,
                        vertical_spacing=0.08, row_heights=[0.55, 0.45] if has_size else None)
    fig.add_bar(x=history["round"], y=history["removed"], name="removed in the round",
                marker_color=STATUS_COLORS["removed"], row=1, col=1)
    fig.update_yaxes(title="removed", tickformat=",d", rangemode="tozero", row=1, col=1)
    if has_size:
        rounds = history["round"].to_numpy()
        before = pd.to_numeric(history["size"]).to_numpy(dtype=float)
        after = (pd.to_numeric(history["size_after"]).to_numpy(dtype=float)
                 if "size_after" in history
                 else before - pd.to_numeric(history["removed"]).to_numpy(dtype=float))
        x = np.concatenate([[rounds[0] - 1], rounds])
        y = np.concatenate([[before[0]], after])
        fig.add_scatter(x=x, y=y, name="size after the round", mode="lines",
                        line={"color": STATUS_COLORS["retained"]}, row=2, col=1,
                        hovertemplate="after round %{x}: %{y:,d} rows<extra></extra>")
        fig.update_yaxes(title="set size", tickformat="~s", nticks=5, row=2, col=1)
    many = len(history) > 12
    fig.update_xaxes(tickformat="d", nticks=10 if many else None, dtick=None if many else 1)
    fig.update_xaxes(title=step, row=2 if has_size else 1, col=1)
    return fig


def add_region_labels(fig: Any, regions: Any, *, name: str = "regions") -> None:
    """Each region's name at its centre: a clickable diamond (one trace, ``customdata`` the
    region id, so a click can select the region) and the name above it as an annotation,
    which stays readable on top of the WebGL points (a text trace would be drawn beneath
    them). The diamonds are WebGL only when the map's points are (an SVG trace would lie
    beneath them); on an SVG map they are SVG too, so the page creates no WebGL context."""
    import numpy as np  # lazy: +418 ms to import
    import pandas as pd  # lazy: +1176 ms to import
    import plotly.graph_objects as go  # lazy: +56 ms to import

    removed = pd.to_numeric(regions["share_removed"], errors="coerce")
    over = regions["over_label"] if "over_label" in regions else [""] * len(regions)
    hover = [f"region {int(r)}: {chart_text(w, 80)}<br>{int(n):,} rows, "
             f"{'' if pd.isna(s) else f'{s:.0%} removed, '}"
             + (f"labels skewed toward {chart_text(t)}" if t else "labels mixed as in the data")
             for r, w, n, s, t in zip(regions["region"], regions["top_words"], regions["rows"],
                                      removed, over, strict=True)]
    webgl = any(getattr(trace, "type", "") == "scattergl" for trace in fig.data)
    fig.add_trace((go.Scattergl if webgl else go.Scatter)(
        x=regions["x"], y=regions["y"], mode="markers", name=name,
        marker={"size": 11, "color": "white", "symbol": "diamond",
                "line": {"width": 1.5, "color": "#111111"}},
        customdata=np.column_stack([[f"region:{int(r)}" for r in regions["region"]],
                                    regions["name"].astype(str)]),
        hovertext=hover, hoverinfo="text"))
    for x, y, label in zip(regions["x"], regions["y"], regions["name"], strict=True):
        fig.add_annotation(x=x, y=y, text=f"<b>{chart_text(label, 40)}</b>", showarrow=False,
                           yshift=14, font={"size": 12, "color": "#111111"},
                           bgcolor="rgba(255,255,255,0.72)", borderpad=1)
