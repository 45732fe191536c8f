"""Plotly figure builders: presentation only, from data already computed elsewhere.

Every builder takes small, tidy inputs (binned counts, per-round history, projected points) and
returns a :class:`plotly.graph_objects.Figure`. Colours come from the Okabe-Ito palette, which
stays readable on the light and the dark Streamlit theme; backgrounds are transparent so the
page theme shows through. Dataset strings (labels, feature names) are HTML-escaped before they
reach Plotly, whose text rendering understands a subset of HTML.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from aflite_core.chart_style import (  # noqa: F401 - re-exported for the pages
    PALETTE,
    SET_COLORS,
    STATUS_COLORS,
    add_reference_lines,
    add_region_labels,
    rounds_figure,
)

#: Plotly config of charts without interaction beyond hovering (no mode bar to draw).
STATIC_CONFIG = {"displayModeBar": False}
#: Statuses in the order the map draws them: later ones on top, so that the kept-but-not-
#: filtered rows (often most rows of a run) do not hide the retained and removed ones.
MAP_DRAW_ORDER = ("unfiltered", "warmup", "excluded", "retained", "removed")
#: Up to this many points the map is drawn as SVG, above it with WebGL.
SVG_MAX_POINTS = 5_000
#: Continuous scale for predictability (perceptually uniform, readable on both themes).
CONTINUOUS_SCALE = "Viridis"


def safe(text: object) -> str:
    """Return ``text`` as a string Plotly shows literally (HTML special characters escaped)."""
    return html.escape(str(text), quote=False)


def _layout(fig: go.Figure, *, title: str | None = None, height: int = 360) -> go.Figure:
    fig.update_layout(
        title=title,
        height=height,
        margin={"l": 10, "r": 10, "t": 40 if title else 10, "b": 10},
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    return fig


def measure_figure(fig: go.Figure, *, height: int = 380) -> go.Figure:
    """A copy of a measure's figure (:meth:`Measure.draw`) in the dashboard's layout, its
    own title kept."""
    out = _layout(go.Figure(fig), title=fig.layout.title.text,
                  height=int(fig.layout.height or height))
    # the title on top, the legend under the axis: a long title and a legend of several
    # series never overlap
    # the right margin the figure keeps for its reference lines' labels survives
    out.update_layout(margin={"t": 50, "b": 10, "r": max(10, fig.layout.margin.r or 0)},
                      legend={"orientation": "h", "yanchor": "top", "y": -0.3, "x": 0})
    return out


def color_for(category: str, index: int) -> str:
    """Colour of a status or comparison set, else the ``index``-th palette colour."""
    return STATUS_COLORS.get(category) or SET_COLORS.get(category) or PALETTE[
        index % len(PALETTE)]


def grouped_bars(
    table: pd.DataFrame, *, x: str, y: str, group: str, title: str | None = None,
    y_title: str | None = None, error: str | None = None, percent: bool = False,
    references: Mapping[str, float] | None = None,
) -> go.Figure:
    """Grouped bar chart of ``y`` by ``x``, one bar series per value of ``group``.

    Parameters
    ----------
    table : DataFrame
        Tidy table with columns ``x``, ``y``, ``group`` (and ``error`` if given).
    x, y, group : str
        Column names.
    title, y_title : str or None
        Chart and axis titles.
    error : str or None
        Column holding symmetric error bar half-widths.
    percent : bool
        Format the value axis as a percentage (values in 0..1).
    references : mapping, optional
        Dashed horizontal lines, ``{name: value}`` (e.g. majority-class rate, chance).
    """
    fig = go.Figure()
    for i, (name, part) in enumerate(table.groupby(group, sort=False)):
        fig.add_bar(
            x=[safe(v) for v in part[x]], y=part[y], name=safe(name),
            marker_color=color_for(str(name), i),
            error_y={"type": "data", "array": part[error]} if error else None,
        )
    fig.update_layout(barmode="group")
    fig.update_yaxes(title=y_title, tickformat=".0%" if percent else None)
    fig = _layout(fig, title=title)
    return add_reference_lines(fig, references or {}, percent=percent)


def label_distribution(counts: Mapping[str, Mapping[str, int]], *, title: str | None = None,
                       percent: bool = True) -> go.Figure:
    """Bars of label shares (or counts) for several named sets, e.g. before vs after.

    Parameters
    ----------
    counts : mapping
        ``{set name: {label: count}}``, e.g. ``{"before": {...}, "after": {...}}``.
    percent : bool
        Show shares within each set instead of raw counts.
    """
    rows = []
    for set_name, by_label in counts.items():
        total = sum(by_label.values()) or 1
        for label, n in by_label.items():
            rows.append({"set": set_name, "label": str(label),
                         "value": n / total if percent else n, "count": n})
    table = pd.DataFrame(rows, columns=["set", "label", "value", "count"])
    return grouped_bars(table, x="label", y="value", group="set", title=title,
                        y_title="share of rows" if percent else "rows", percent=percent)


def predictability_histogram(binned: pd.DataFrame, *, facet: str | None = None,
                             title: str | None = None) -> go.Figure:
    """Histogram of predictability from binned counts (never from raw rows).

    Parameters
    ----------
    binned : DataFrame
        Columns ``left``, ``right``, ``count``, ``status`` and optionally ``label``.
    facet : str or None
        ``"label"`` draws one small panel per label.
    """
    facets = sorted(binned[facet].astype(str).unique()) if facet else [None]
    n = len(facets)
    from plotly.subplots import make_subplots  # lazy: +72 ms to import

    fig = make_subplots(rows=1, cols=n, shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=[safe(f) for f in facets] if facet else None)
    statuses = [s for s in STATUS_COLORS if s in set(binned["status"])]
    for col, value in enumerate(facets, start=1):
        part = binned if value is None else binned[binned[facet].astype(str) == value]
        for status in statuses:
            sub = part[part["status"] == status]
            fig.add_bar(
                x=(sub["left"] + sub["right"]) / 2, y=sub["count"],
                width=(sub["right"] - sub["left"]) * 0.95, name=status,
                marker_color=STATUS_COLORS[status], legendgroup=status, showlegend=col == 1,
                hovertemplate="predictability %{x:.2f}<br>%{y} rows<extra>" + status
                + "</extra>", row=1, col=col,
            )
        fig.update_xaxes(title="predictability", range=[0, 1.0], row=1, col=col)
    fig.update_layout(barmode="overlay")
    fig.update_traces(opacity=0.75)
    fig.update_yaxes(title="rows", row=1, col=1)
    return _layout(fig, title=title)


def removal_per_round(history: pd.DataFrame, *, title: str | None = None,
                      step: str = "round") -> go.Figure:
    """Rows removed per round and the set size after each round
    (:func:`aflite_core.chart_style.rounds_figure`), in the dashboard's layout."""
    fig = rounds_figure(history, step=step)
    return _layout(fig, title=title, height=400 if "size" in history else 360)


def projection_scatter(points: pd.DataFrame, *, color: str, continuous: bool = False,
                       title: str | None = None, height: int = 520) -> go.Figure:
    """2-D map of the rows, one point per row, ``row_id`` attached as ``customdata``.

    Selections made with the box or lasso tool come back with ``customdata`` so the caller
    can map them to row ids (not to point indices, which change with downsampling).

    Parameters
    ----------
    points : DataFrame
        Columns ``row_id``, ``x``, ``y`` and the colour column.
    color : str
        Column to colour by (``status``, ``label`` or ``predictability``).
    continuous : bool
        Use a continuous colour scale (numeric column) instead of categories.
    """
    fig = go.Figure()
    ids = _row_id_data(points["row_id"])
    # SVG draws a few thousand points faster than WebGL starts (and WebGL may be software-
    # rendered); above that, WebGL.
    trace = go.Scatter if len(points) <= SVG_MAX_POINTS else go.Scattergl
    if continuous:
        values = pd.to_numeric(points[color], errors="coerce").to_numpy(dtype=np.float32)
        fig.add_trace(trace(
            x=points["x"], y=points["y"], mode="markers", name=safe(color), customdata=ids,
            marker={"color": values, "colorscale": CONTINUOUS_SCALE, "size": 5,
                    "cmin": 0, "cmax": 1, "colorbar": {"title": safe(color)}},
            hovertemplate="row %{customdata}<br>" + safe(color)
            + ": %{marker.color:.3f}<extra></extra>",
        ))
    else:
        categories = points[color].astype(str)
        # rows that were not filtered first, beneath; the removed rows last, on top
        present = set(categories.unique())
        order = [s for s in MAP_DRAW_ORDER if s in present] or sorted(present)
        order += sorted(present - set(order))
        for i, value in enumerate(order):
            part = (categories == value).to_numpy()
            fig.add_trace(trace(
                x=points["x"][part], y=points["y"][part], mode="markers", name=safe(value),
                customdata=ids[part],
                marker={"color": color_for(value, i), "size": 5, "opacity": 0.8},
                hovertemplate="row %{customdata}<br>" + safe(color)
                + ": %{fullData.name}<extra></extra>",
            ))
    # pan by default, so that a click selects the point under it (a region's diamond): the
    # dashboard lets a click select only outside the box and lasso modes; box and lasso are
    # in the mode bar
    fig.update_layout(dragmode="pan")
    fig.update_xaxes(showticklabels=False, title=None)
    fig.update_yaxes(showticklabels=False, title=None)
    return _layout(fig, title=title, height=height)


def density_image(counts: np.ndarray) -> str:
    """``counts`` (rows: y ascending, as :func:`aflite_core.runs.views.map_density` gives
    them) as a PNG data URI: grey, darker and more opaque where more rows fall (log-scaled,
    from 10 % to 75 % opacity), empty cells transparent."""
    from PIL import Image  # noqa: PLC0415 - Streamlit's dependency, needed by this chart only

    z = np.log1p(np.asarray(counts, dtype=np.float64))[::-1]  # image rows run top-down
    filled = z > 0
    low, high = (z[filled].min(), z[filled].max()) if filled.any() else (0.0, 1.0)
    t = np.clip((z - low) / (high - low), 0, 1) if high > low else np.ones_like(z)
    rgba = np.zeros((*z.shape, 4), dtype=np.uint8)
    rgba[..., :3] = np.round(60 - 40 * t)[..., None]
    rgba[..., 3] = np.where(filled, np.round(255 * (0.10 + 0.65 * t)), 0)
    buffer = io.BytesIO()
    Image.fromarray(rgba, mode="RGBA").save(buffer, format="PNG", optimize=False)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _row_id_data(row_ids: pd.Series) -> np.ndarray:
    """Row ids as a point's ``customdata``: integers as an integer array (sent as a compact
    typed array, not one JSON string per point), anything else as strings."""
    values = row_ids.to_numpy()
    if values.dtype.kind in "iu":
        return values
    return values.astype(str).astype(object)


def add_density(fig: go.Figure, density: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
                *, total: int) -> go.Figure:
    """Every row of the map as a grey density image beneath the (sampled) points: log-scaled
    rows per cell, empty cells transparent, not hoverable and never selected.

    The image is a layout image (one PNG the browser scales), not a heatmap trace: Plotly
    builds a heatmap cell by cell in the page, which cost more than the points on a page
    switch; a legend entry names it."""
    if density is None:
        return fig
    counts, xs, ys = density
    dx = float(xs[1] - xs[0]) if len(xs) > 1 else 1.0
    dy = float(ys[1] - ys[0]) if len(ys) > 1 else 1.0
    fig.add_layout_image(
        source=density_image(counts), xref="x", yref="y", x=float(xs[0]) - dx / 2,
        y=float(ys[-1]) + dy / 2, sizex=dx * len(xs), sizey=dy * len(ys),
        sizing="stretch", layer="below", name="density")
    fig.add_trace(go.Scatter(
        x=[None], y=[None], mode="markers", name=f"all {total:,} rows (density)",
        marker={"symbol": "square", "size": 10, "color": "rgba(40,40,40,0.45)"},
        hoverinfo="skip", showlegend=True))
    fig.data = (fig.data[-1], *fig.data[:-1])  # first in the legend
    fig.update_xaxes(showticklabels=False, ticks="")
    fig.update_yaxes(showticklabels=False, ticks="")
    return fig


def with_found_rows(fig: go.Figure, found: pd.DataFrame) -> go.Figure:
    """A copy of the map ``fig`` (shared: never changed) with the rows a search found
    (``x``, ``y``, ``similarity``) drawn over it as outlined stars, the most similar first."""
    found = found.dropna(subset=["x", "y"]) if {"x", "y"} <= set(found) else found.iloc[:0]
    out = go.Figure(fig)
    if found.empty:
        return out
    webgl = any(getattr(trace, "type", "") == "scattergl" for trace in out.data)
    out.add_trace((go.Scattergl if webgl else go.Scatter)(
        x=found["x"], y=found["y"], mode="markers", name="rows like the sentence",
        marker={"size": 12, "symbol": "star", "color": "#D55E00",
                "line": {"width": 1, "color": "#111111"}},
        hovertext=[f"similarity {s:.2f}" for s in found["similarity"]], hoverinfo="text"))
    return out


def regions_in(regions: pd.DataFrame, window: Sequence[float]) -> pd.DataFrame:
    """The named regions whose centre lies in ``window`` = (x0, x1, y0, y1)."""
    return regions[regions["x"].between(window[0], window[1])
                   & regions["y"].between(window[2], window[3])]


def add_regions(fig: go.Figure, regions: pd.DataFrame) -> go.Figure:
    """The map's named regions on a :func:`projection_scatter` chart: each name at its
    region's centre, clickable (a click selects the region: :func:`clicked_region`)."""
    if regions is not None and not regions.empty:
        add_region_labels(fig, regions, name="regions (click a ◇)")
    return fig


#: A click this close to a region's ◇ (a share of the map's span on each axis, about the
#: diamond's half-width on the page's map) selects the region, though a point drawn over the
#: diamond caught it.
DIAMOND_REACH = 0.015


def diamond_reach(fig: go.Figure) -> tuple[float, float] | None:
    """How far from a ◇ (in data units, x and y) a click still means the ◇: the map's span
    on each axis times :data:`DIAMOND_REACH`; None for a map without points."""
    xs = [np.asarray(t.x, dtype=float) for t in fig.data if getattr(t, "x", None) is not None]
    ys = [np.asarray(t.y, dtype=float) for t in fig.data if getattr(t, "y", None) is not None]
    xs, ys = [x for x in xs if x.size], [y for y in ys if y.size]
    if not xs or not ys:
        return None
    x, y = np.concatenate(xs), np.concatenate(ys)
    return (DIAMOND_REACH * float(np.nanmax(x) - np.nanmin(x)),
            DIAMOND_REACH * float(np.nanmax(y) - np.nanmin(y)))


def clicked_region(event: object, regions: pd.DataFrame | None = None,
                   reach: tuple[float, float] | None = None) -> int | None:
    """The region whose name was clicked on the map, or None (also when a box or a lasso was
    drawn: a drawn selection that happens to hold a name does not select the whole region).

    A click on a ◇ selects its region even when a data point drawn over it took the click:
    given the ``regions`` and the ◇'s ``reach`` (:func:`diamond_reach`), a single clicked
    point within reach of a region's centre (the nearest, on both axes) is that region."""
    selection = _selection(event)
    if not selection or selection.get("box") or selection.get("lasso"):
        return None
    points = selection.get("points", []) or []
    for point in points:
        custom = point.get("customdata")
        first = custom[0] if isinstance(custom, (list, tuple)) and custom else custom
        if isinstance(first, str) and first.startswith("region:"):
            try:
                return int(first.partition(":")[2])
            except ValueError:
                return None
    if len(points) != 1 or regions is None or regions.empty or reach is None:
        return None
    try:
        x, y = float(points[0]["x"]), float(points[0]["y"])
    except (KeyError, TypeError, ValueError):
        return None
    dx = np.abs(regions["x"].to_numpy(dtype=float) - x) / max(reach[0], 1e-12)
    dy = np.abs(regions["y"].to_numpy(dtype=float) - y) / max(reach[1], 1e-12)
    near = np.maximum(dx, dy)
    best = int(np.argmin(near))
    return int(regions["region"].iloc[best]) if near[best] <= 1.0 else None


def selection_shapes(event: object) -> list[dict]:
    """The boxes and lassos drawn on the map (``{"x": [...], "y": [...]}`` in data
    coordinates), in the order drawn; [] for a click or no selection."""
    selection = _selection(event)
    return [dict(shape) for kind in ("box", "lasso")
            for shape in (selection.get(kind) or []) if isinstance(shape, Mapping)]


def _selection(event: object) -> Mapping:
    if not event:
        return {}
    selection = event.get("selection", {}) if isinstance(event, Mapping) else getattr(
        event, "selection", {})
    return selection or {}


def selected_row_ids(event: object) -> list[str]:
    """Row ids (as strings) of the points selected on a :func:`projection_scatter` chart.

    Parameters
    ----------
    event : PlotlyState or dict or None
        What ``st.plotly_chart(..., on_select="rerun")`` returned.
    """
    selection = _selection(event)
    points: Sequence[Mapping] = selection.get("points", []) if selection else []
    ids = []
    for point in points:
        custom = point.get("customdata")
        first = custom[0] if isinstance(custom, (list, tuple)) and custom else custom
        if first is None or (isinstance(first, str) and first.startswith("region:")):
            continue  # a region's name, not a row
        ids.append(str(first))
    return ids
