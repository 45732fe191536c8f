"""Removal rate by any column of the dataset (Report), and a filter on its values (Explore).

Presentation only: the counts, Wilson intervals and z-scores come from
:func:`aflite_core.runs.breakdown.removal_breakdown` over the run's rows table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from aflite_core.runs import breakdown
from ui import cache, components, state
from ui.panels import slices as slices_view

CAPTION = (
    "Share of each value's filtered rows (retained + removed) that the filter removed, with a "
    "Wilson 95 % interval, against the base rate of all filtered rows; z compares the value "
    "with the other values (two proportions). Columns with 2 to "
    f"{breakdown.MAX_VALUES} distinct values are offered; warm-up and excluded rows are not "
    "counted."
)


def _text_columns(run: Any) -> list[str]:
    return [c for c in (run.columns.get("premise"), run.columns.get("hypothesis")) if c]


@st.cache_data(max_entries=8, show_spinner=False)
def _columns(path: str, stamp: float, exclude: tuple[str, ...]) -> list[str]:
    return breakdown.breakdown_columns(cache.rows_table(path), exclude=exclude)


@st.cache_data(max_entries=32, show_spinner=False)
def _table(path: str, stamp: float, column: str) -> pd.DataFrame:
    return breakdown.removal_breakdown(cache.rows_table(path), column)


def _key(path: str | Path) -> tuple[str, float]:
    path = Path(path).resolve()
    summary = path / "summary.json"
    return str(path), summary.stat().st_mtime if summary.exists() else 0.0


def columns(run: Any, path: str | Path) -> list[str]:
    """The run's columns worth a breakdown (cached per run)."""
    return _columns(*_key(path), tuple(_text_columns(run)))


def table(path: str | Path, column: str) -> pd.DataFrame:
    """The breakdown of one column (cached per run and column)."""
    return _table(*_key(path), column)


def _chart_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns :func:`ui.panels.slices.interval_chart` draws."""
    return frame.assign(rank=range(1, len(frame) + 1), description=frame["value"],
                        size=frame["rows"], difference=frame["removal_rate"]
                        - frame["base_rate"])


def report_panel(run: Any, path: str | Path) -> None:
    """Report: pick a column; its removal rate per value, chart and table (the page puts it
    in a section titled "Removal rate by column")."""
    offered = columns(run, path)
    if not offered:
        st.caption("The dataset has no column with 2 to "
                   f"{breakdown.MAX_VALUES} distinct values to break the removals down by.")
        return
    label = run.columns.get("label")
    own = set(map(str, run.frame.columns))  # the dataset's columns before the measures'
    default = next((c for c in offered if c in own and c != label),
                   label if label in offered else offered[0])
    column = st.selectbox("Column", offered, index=offered.index(default),
                          key=state.key("report", "breakdown_column"),
                          help="Any column of the dataset with few distinct values (a genre, "
                               "a source, an annotator, the split, the label).")
    frame = table(path, column)
    st.caption(CAPTION)
    st.plotly_chart(slices_view.interval_chart(_chart_frame(frame.head(30))),
                    key=state.key("report", "breakdown_chart"))
    st.dataframe(frame, hide_index=True, column_config={
        "removal_rate": st.column_config.NumberColumn(format="percent"),
        "ci_low": st.column_config.NumberColumn(format="percent"),
        "ci_high": st.column_config.NumberColumn(format="percent"),
        "base_rate": st.column_config.NumberColumn(format="percent"),
        "difference_pp": st.column_config.NumberColumn(format="%+.1f"),
        "z": st.column_config.NumberColumn(format="%.1f")})


def explore_filter(run: Any, path: str | Path) -> dict[str, list[str]]:
    """Explore: filter the rows on the values of any low-cardinality column.

    Returns ``{column: accepted values}`` for :attr:`ui.filters.RowFilter.values` (empty
    when nothing is chosen).
    """
    offered = columns(run, path)
    if not offered:
        return {}
    c1, c2 = st.columns([1, 2])
    column = c1.selectbox("Column", offered, index=None, placeholder="filter by any column",
                          key=state.key("explore", "breakdown_column"))
    if not column:
        return {}
    frame = table(path, column)
    names = {str(r.value): f"{r.value} ({r.rows:,} rows, {r.removal_rate:.0%} removed)"
             for r in frame.itertuples()}
    chosen = c2.multiselect("Values", list(names), format_func=names.get,
                            key=state.key("explore", f"breakdown_values:{column}"),
                            help="Removal rate of each value among its filtered rows; "
                                 "the Report page shows the intervals.")
    if not chosen:
        return {}
    st.caption(f"{components.md_escape(column)}: "
               + ", ".join(components.md_escape(names[v]) for v in chosen))
    return {column: list(chosen)}
