"""The data map (confidence x variability) and hypothesis-only PVI on Explore and Report.

Presentation only: the values come from the run's ``datamap.parquet`` and ``pvi.parquet``
(:mod:`aflite_core.measures.datamap`, :mod:`aflite_core.measures.pvi`); regions, counts and the
drawing sample come from the core.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from aflite_core.measures import datamap, pvi
from aflite_core.runs import RowIndex
from ui import cache, charts, components, downloads, state

PAGE = "explore"
#: Points drawn on the data map (a seeded uniform sample above it; counts stay exact).
MAX_POINTS = 20_000
#: Colour choices of the map and the column each reads.
COLOURS = {"status": "status", "label": "label", "region": "region"}
#: Explore's column names of the measures' per-row values.
REGION_COLUMN = "data-map region"

CAPTION = (
    "Each scored row at the **variability** (standard deviation of its label's probability) "
    "of the AFLite models that held it out, in the round that decided it (Swayamdipta et al., "
    "2020, *Dataset Cartography*), and, upwards, its **label evidence**: the label issues' "
    "*label quality* (AFLite's held-out probability of its label averaged with the full-input "
    "model's out-of-fold one) when the run has it for every row, else AFLite's *confidence*. "
    "Regions are shares of this run's rows, bounded by chance: the low band (least evidence "
    "for the label, where mislabelled rows gather) splits into *hard-to-learn* (steady) and "
    "*ambiguous* (swinging); *easy-to-learn*, the most evidence above chance; *medium*, the rest."
)


def scatter(points: pd.DataFrame, *, color: str, thresholds: dict, height: int = 480,
            x_max: float = 0.5, axis: str = "confidence", earlier: bool = False) -> go.Figure:
    """The data map drawn with :func:`ui.charts.projection_scatter` (row ids as customdata):
    variability across, the region ``axis`` up, with labelled axes and the region
    thresholds as dashed lines."""
    drawn = points.assign(x=points["variability"], y=datamap.region_axis(points, axis))
    fig = charts.projection_scatter(drawn, color=color, height=height)
    fig.update_xaxes(showticklabels=True)
    fig.update_yaxes(showticklabels=True)
    return datamap.add_region_lines(fig, thresholds, labels=False, x_max=x_max,
                                    y_title=datamap.AXIS_TITLES[axis], earlier=earlier)


def _threshold_inputs(run: Any, table: pd.DataFrame) -> dict:
    """Number inputs for the region shares, starting at the run's; the thresholds they give
    on this run's values (the core calibrates them), shown in a caption."""
    stored = datamap.shares_of(run)
    axis = datamap.axis_of(run)
    on = "label quality" if axis == "label_quality" else "confidence"
    c1, c2, c3 = st.columns(3)
    chosen = {
        "hard_share": c1.number_input(
            "Hard: share of rows at most", 0.0, 0.5, float(stored["hard_share"]), 0.05,
            key=state.key(PAGE, "dm_hard_share"),
            help=f"The steadier part of the low band: the rows of lowest {on}, only below "
                 "chance (1/K)."),
        "ambiguous_share": c2.number_input(
            "Ambiguous: share of rows", 0.0, 0.5, float(stored["ambiguous_share"]), 0.05,
            key=state.key(PAGE, "dm_ambiguous_share"),
            help="The part of the low band whose gold probability varies most across "
                 "partitions."),
        "easy_share": c3.number_input(
            "Easy: share of rows at most", 0.0, 0.9, float(stored["easy_share"]), 0.05,
            key=state.key(PAGE, "dm_easy_share"),
            help=f"The rows of highest {on}, and only those above chance (1/K)."),
    }
    k = datamap.chance_of(run, table)
    try:
        thresholds = cache.datamap_thresholds(run.path, n_classes=k, axis=axis, **chosen)
    except ValueError as exc:
        components.show_error(str(exc), hint="The run's thresholds are used instead.")
        return datamap.thresholds_of(run)
    st.caption(f"Thresholds on this run: the low band is {on} ≤ "
               f"{thresholds['hard_confidence']:.3f}, in it ambiguous if variability ≥ "
               f"{thresholds['ambiguous_variability']:.3f}, else hard; outside it easy if "
               f"{on} ≥ {thresholds['easy_confidence']:.3f} (chance 1/{k} = {1 / k:.3f}); "
               f"any row whose variability reaches "
               f"{thresholds.get('swing_variability', datamap.SWING_VARIABILITY):.2f} is "
               "ambiguous wherever it lies.")
    return thresholds


def panel(path: Path, run: Any, selected: list[str] | None = None) -> list[str] | None:
    """The data map with region counts and exports; return the selected row ids.

    ``selected`` (from the 2-D map) and a selection drawn here are intersected, so both maps
    filter the example table below the same way.
    """
    shown = st.toggle("**Data map** (label evidence × variability of the held-out "
                      "predictions)", key=state.key(PAGE, "dm_show"),
                      help="Drawn on request: its chart costs about half a second of every "
                           "Explore page switch (bench_dashboard.py). The PVI and region "
                           "filters below work either way; the Report shows the map too.")
    if not shown:
        return selected
    table = cache.datamap_table(path)
    if table.empty:
        st.caption("This run has no data map (the *Data map* measure was not computed). Tick "
                   "it on the Audit page to get one.")
        return selected
    components.measure_warnings(run, "datamap")
    st.caption(CAPTION)
    thresholds = _threshold_inputs(run, table)
    axis = datamap.axis_of(run)
    frame = table.assign(region=datamap.assign_regions(datamap.region_axis(table, axis),
                                                       table["variability"], **thresholds))
    c1, c2 = st.columns([2, 3], vertical_alignment="bottom")
    color = c1.segmented_control("Colour by", list(COLOURS), default="status", required=True,
                                 key=state.key(PAGE, "dm_color"))
    version = state.get(state.key(PAGE, "dm_version"), 0)
    if c2.button("Clear data-map selection", key=state.key(PAGE, "dm_clear")):
        state.put(state.key(PAGE, "dm_version"), version + 1)
        st.rerun()
    points, total = datamap.sample_points(frame, max_points=MAX_POINTS, seed=0)
    x_max = datamap.variability_axis_max(frame["variability"])
    event = st.plotly_chart(scatter(points, color=COLOURS[color], thresholds=thresholds,
                                    x_max=x_max, axis=axis),
                            on_select="rerun", selection_mode=("box", "lasso"),
                            key=state.key(PAGE, f"dm_map:{version}"))
    sampled = (f"Showing a uniform random sample of {len(points):,} of {total:,} rows (seed "
               "0); selections pick from the sample. " if len(points) < total else "")
    st.caption(f"{sampled}Counts below are exact over all {total:,} scored rows. Draw a box "
               "or a lasso to filter the table below.")
    _counts_and_export(frame, run)
    ids = charts.selected_row_ids(event)
    if not ids:
        return selected
    if selected is None:
        return ids
    both = set(selected)
    return [i for i in ids if i in both]


def _counts_and_export(frame: pd.DataFrame, run: Any) -> None:
    """Exact region counts by status or label, and the rows of one region as a CSV."""
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    by = left.segmented_control("Count regions by", ["status", "label"], default="status",
                                required=True, key=state.key(PAGE, "dm_by"))
    left.dataframe(datamap.region_counts(frame, by), hide_index=True, column_config={
        f"share {r}": st.column_config.NumberColumn(format="percent")
        for r in datamap.REGIONS})
    present = [r for r in datamap.REGIONS if (frame["region"] == r).any()]
    if not present:
        return
    region = right.selectbox("Export a region", present, key=state.key(PAGE, "dm_region"))
    ids = frame.loc[(frame["region"] == region).to_numpy(), "row_id"].tolist()
    with right:
        downloads.download(
            f"Download its {len(ids):,} rows (CSV)",
            lambda: cache.stream_export(run.path, "all", row_ids=ids),
            file_name=f"{run.name}-datamap-{region}.csv", mime="text/csv",
            key=state.key(PAGE, "dm_download"),
            signature=cache.run_signature(run.path, "datamap", region))


def measure_filters(table: pd.DataFrame, index: Any = None) -> tuple[dict, dict]:
    """Explore filters on the measures' row columns: a PVI range and data-map regions
    (their bounds and values from ``index``, the run's decoded columns, when given).

    Returns ``(ranges, values)`` for :class:`ui.filters.RowFilter`.
    """
    index = index if index is not None else RowIndex(table)
    ranges: dict[str, tuple[float, float]] = {}
    values: dict[str, list[str]] = {}
    has_pvi = pvi.COLUMN in table
    has_region = REGION_COLUMN in table
    if not (has_pvi or has_region):
        return ranges, values
    c1, c2 = st.columns(2)
    if has_pvi:
        column = index.numbers(pvi.COLUMN)
        finite = column[np.isfinite(column)]
        if len(finite):
            lo, hi = float(np.floor(finite.min())), float(np.ceil(finite.max()))
            chosen = c1.slider("Hypothesis-only PVI (bits)", lo, hi, (lo, hi), 0.1,
                               key=state.key(PAGE, "pvi"),
                               help="log2 p(label | hypothesis) − log2 p(label), out of fold: "
                                    "high = the hypothesis alone gives the label away.")
            if chosen != (lo, hi):
                ranges[pvi.COLUMN] = chosen
    if has_region:
        found = set(index.categories(REGION_COLUMN))
        regions = [r for r in datamap.REGIONS if r in found]
        values[REGION_COLUMN] = c2.multiselect(
            "Data-map region (the run's thresholds)", regions,
            key=state.key(PAGE, "dm_regions"))
    return ranges, values


# --------------------------------------------------------------------------- Report page
def report_panel(run: Any, tables: dict[str, pd.DataFrame]) -> None:
    """Report: the data map coloured by status, and the region tables."""
    table = cache.datamap_table(run.path)
    if not table.empty:
        points, total = datamap.sample_points(table, max_points=5_000, seed=0)
        st.plotly_chart(scatter(points, color="status", thresholds=datamap.thresholds_of(run),
                                height=420, axis=datamap.axis_of(run),
                                earlier=datamap.earlier_rule(run),
                                x_max=datamap.variability_axis_max(table["variability"])),
                        key=state.key("report", "datamap_chart"), config=charts.STATIC_CONFIG)
        if len(points) < total:
            st.caption(f"A uniform random sample of {len(points):,} of {total:,} rows; the "
                       "counts are exact.")
    for title, frame in tables.items():
        st.markdown(f"**{components.md_escape(title)}**")
        st.dataframe(frame, hide_index=True)


def pvi_report_panel(run: Any, tables: dict[str, pd.DataFrame]) -> None:
    """Report: mean hypothesis-only PVI per label, retained vs removed, and the tables."""
    split = tables.get("Hypothesis-only PVI per label, retained vs removed")
    if split is not None and not split.empty:
        bars = split[split["label"] != "all"]
        st.plotly_chart(charts.grouped_bars(bars, x="label", y="mean PVI (bits)",
                                            group="status", y_title="mean PVI (bits)"),
                        key=state.key("report", "pvi_chart"), config=charts.STATIC_CONFIG)
    for title, frame in tables.items():
        st.markdown(f"**{components.md_escape(title)}**")
        st.dataframe(frame, hide_index=True)
