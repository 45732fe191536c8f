""""Why removed" slices on the Report page, and the slice filter of Explore.

Presentation only: the ranked table and the rows of each stored slice come from the run's
``slices.parquet`` and ``slices_members.parquet`` (:mod:`aflite_core.measures.slices`).
Choosing a slice on the Report page shows a few of its rows; its button opens Explore with
the example table filtered to the slice (a request key the Explore selectbox reads before it
is drawn, because a widget's own key cannot be set from another page).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from aflite_core.measures import (
    interval_chart,  # noqa: F401 - Explore draws it too
    slices,
)
from ui import cache, charts, components, state

#: Session key: the slice the Report page asked Explore to show.
REQUEST = "explore:slice_request"
#: Explore's slice selectbox.
EXPLORE_KEY = state.key("explore", "slice")
#: Slices drawn in the Report's interval chart.
CHART_SLICES = 20
KINDS = {"all": "All", "cue": "Single cues", "pair": "Pairs", "cluster": "Clusters of Φ"}

CAPTION = (
    "Each slice's **removal rate** (share of its rows AFLite removed) against the **base "
    "rate** of the filtered rows, with a Wilson 95 % interval and a two-proportion z-score "
    "(the slice vs the other rows). Ranked by |z|; pairs are listed only when they differ from "
    "each of their two cues (|z within parts| ≥ 3); slices with the same rows (or the other "
    "rows) as a better-ranked one are listed in its *same rows* column, and slices with nearly "
    "the same rows (Jaccard ≥ 0.8) in its *folded here* column; *map regions* says where on "
    "the map a slice's rows concentrate. Rows of a split AFLite removed nothing from are left "
    "out."
)


def _stamp(path: Path) -> float:
    summary = Path(path) / "summary.json"
    return summary.stat().st_mtime if summary.exists() else 0.0


@st.cache_data(max_entries=32, show_spinner=False)
def _mask(path: str, stamp: float, slice_id: str) -> np.ndarray:
    return slices.member_mask(cache.open_run(path), slice_id)


def slice_mask(path: str | Path, slice_id: str) -> np.ndarray:
    """Boolean mask over the run's rows (input order) of one stored slice (cached).

    Raises
    ------
    LookupError
        If the run did not store the rows of this slice.
    """
    path = Path(path).resolve()
    return _mask(str(path), _stamp(path), slice_id)


@st.cache_data(max_entries=8, show_spinner=False)
def _stored(path: str, stamp: float) -> pd.DataFrame:
    run = cache.open_run(path)
    table = run.read_parquet(slices.FILE)
    members = run.read_parquet(slices.MEMBERS_FILE)
    if table is None or members is None or members.empty:
        return pd.DataFrame(columns=["slice_id", "description", "size", "removal_rate"])
    stored = table[table["slice_id"].isin(members["slice_id"])]
    return stored[["rank", "slice_id", "description", "size", "removal_rate", "base_rate"]]


def stored_slices(path: str | Path) -> pd.DataFrame:
    """The slices whose rows the run stored (the ones Explore can filter on), in rank order."""
    path = Path(path).resolve()
    return _stored(str(path), _stamp(path))


def _label(row: pd.Series) -> str:
    return (f"#{int(row['rank'])} {row['description']} ({int(row['size']):,} rows, "
            f"{row['removal_rate']:.0%} removed vs {row['base_rate']:.0%})")


# --------------------------------------------------------------------------- Report


def report_panel(run: Any, tables: dict[str, pd.DataFrame]) -> None:
    """Report: the interval chart of the top slices, the ranked table, examples of the chosen
    slice and a button that opens its rows in Explore."""
    table = next(iter(tables.values()))
    c1, c2 = st.columns([3, 2], vertical_alignment="bottom")
    kind = c1.segmented_control("Slices", list(KINDS), format_func=KINDS.get, default="all",
                                required=True, key=state.key("report", "slices_kind"))
    n = c2.slider("Slices shown", 5, 200, 25, key=state.key("report", "slices_n"))
    shown = table if kind == "all" else table[table["kind"] == kind]
    shown = shown.head(n)
    if shown.empty:
        st.caption("No slice of this kind has enough rows in this run.")
        return
    st.plotly_chart(interval_chart(shown.head(CHART_SLICES)), config=charts.STATIC_CONFIG,
                    key=state.key("report", "slices_chart"))
    view = shown.assign(interval=[f"{lo:.0%}–{hi:.0%}" for lo, hi in
                                  zip(shown["ci_low"], shown["ci_high"], strict=True)])
    columns = ["rank", "description", "kind", "size", "removed", "removal_rate", "base_rate",
               "difference", "z", "interval", "share_of_removed",
               *[c for c in ("regions", "folded") if c in view], "same_rows"]
    event = st.dataframe(
        view[columns], hide_index=True, on_select="rerun", selection_mode="single-row",
        key=state.key("report", "slices_table"), column_config={
            "removal_rate": st.column_config.NumberColumn("removal rate", format="percent"),
            "base_rate": st.column_config.NumberColumn("base rate", format="percent"),
            "difference": st.column_config.NumberColumn(format="percent"),
            "share_of_removed": st.column_config.NumberColumn("share of removed",
                                                              format="percent"),
            "z": st.column_config.NumberColumn(format="%.1f"),
            "interval": st.column_config.TextColumn("Wilson 95 %"),
            "regions": st.column_config.TextColumn(
                "map regions", help="Regions of the 2-D map holding at least a quarter of "
                "the slice's rows (share, region id, its words)."),
            "folded": st.column_config.TextColumn(
                "folded here", help="Slices with nearly the same rows (Jaccard >= 0.8), "
                "folded under this one: one finding under several names."),
            "same_rows": st.column_config.TextColumn("same rows")})
    st.caption(CAPTION)
    picked = _picked(event)
    if picked is None or picked >= len(shown):
        st.caption("Select a slice (the box at the left of its row) to read a few of its rows "
                   "and open all of them in Explore.")
        return
    examples(run, shown.iloc[picked])


def _picked(event: Any) -> int | None:
    try:
        rows = event.selection.rows  # type: ignore[union-attr]
    except AttributeError:
        return None
    return int(rows[0]) if rows else None


def examples(run: Any, row: pd.Series) -> None:
    """A few rows of one slice (removed ones when it is removed more than the base rate)."""
    table = cache.rows_table(run.path)
    ids = [i for i in str(row["examples"] or "").split(", ") if i]
    try:
        mask = slice_mask(run.path, row["slice_id"])
    except LookupError:
        mask = None
    if mask is not None and len(mask) == len(table):
        part = table[mask]
    else:
        part = table
    sample = part[part.index.astype(str).isin(ids)]
    which = "removed" if row["difference"] >= 0 else "retained"
    st.markdown(f"**{components.md_escape(row['description'])}**: "
                f"{int(row['size']):,} rows, {row['removal_rate']:.1%} removed (base "
                f"{row['base_rate']:.1%}, z = {row['z']:.1f}). A few of its {which} rows:")
    text_cols = [c for c in (run.columns.get("premise"), run.columns.get("hypothesis"),
                             run.columns.get("label")) if c and c in sample.columns]
    shown = components.with_row_id(sample[["status", "predictability", *text_cols]])
    st.dataframe(shown, hide_index=True, column_config=components.column_config(shown))
    if mask is None:
        st.caption("The run stored the rows of its top slices only; this one is not among "
                   "them.")
        return
    if st.button(f"Show its {int(row['size']):,} rows in Explore",
                 icon=":material/filter_alt:", key=state.key("report", "slice_explore")):
        state.put(REQUEST, str(row["slice_id"]))
        st.switch_page("app_pages/explore.py")


# --------------------------------------------------------------------------- Explore


def explore_filter(run: Any, path: str | Path, n_rows: int) -> np.ndarray | None:
    """Explore: a selectbox of the stored slices; the mask of the chosen one (or None)."""
    stored = stored_slices(path)
    if stored.empty:
        return None
    options = stored["slice_id"].tolist()
    labels = {r["slice_id"]: _label(r) for _, r in stored.iterrows()}
    requested = state.get(REQUEST)
    if requested is not None:
        st.session_state.pop(REQUEST, None)
        if requested in labels:
            st.session_state[EXPLORE_KEY] = requested
    choice = st.selectbox("Why-removed slice (rows in it)", options, index=None,
                          format_func=labels.get, key=EXPLORE_KEY,
                          placeholder="any (slices ranked on the Report page)")
    if not choice:
        return None
    try:
        mask = slice_mask(path, choice)
    except LookupError as exc:
        components.show_error(f"The slice filter is not available: {exc}")
        return None
    if len(mask) != n_rows:
        components.show_error(f"The slice's rows ({len(mask):,}) do not match the run's "
                              f"rows ({n_rows:,}).")
        return None
    return mask


def combine(first: np.ndarray | None, second: np.ndarray | None) -> np.ndarray | None:
    """Both masks (``None`` does not filter)."""
    if first is None:
        return second
    if second is None:
        return first
    return np.asarray(first, dtype=bool) & np.asarray(second, dtype=bool)
