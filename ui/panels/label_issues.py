"""The label-issues section of the Report, and its way into Explore.

Explore is the label-issues view: filtered to the flagged rows (the *label issue* column) and
sorted by *label quality*, lowest first, it shows the given label beside the *suggested
label* and the texts, and *Download these N rows* exports them. The Report's button asks
Explore for that view (:data:`REQUEST`, consumed before Explore draws its widgets).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from aflite_core.measures import label_issues
from aflite_core.runs import review
from ui import components, state, url_state

#: Session key (not a widget's): Explore should open on the flagged rows.
REQUEST = "explore:label_issues_request"


def report_panel(run: Any, tables: dict[str, pd.DataFrame]) -> None:
    """The flagged rows per status and per label pair, the scoring model's caveat, and a
    button to the flagged rows in Explore."""
    info = (run.summary.get("measures") or {}).get("label_issues") or {}
    if info.get("n_rows_scored") and info.get("n_rows_total", 0) > info["n_rows_scored"]:
        st.caption(f"Scored {info['n_rows_scored']:,} of {info['n_rows_total']:,} filtered "
                   "rows (a seeded sample of whole groups; option *Label issues: rows scored "
                   "at most*).")
    percent = {c: st.column_config.NumberColumn(format="percent")
               for c in ("share flagged", "model agrees with the label")}
    for title, table in tables.items():
        st.markdown(f"**{components.md_escape(title)}**")
        st.dataframe(table, hide_index=True, column_config=percent)
    reviews = review.flag_precision(run)
    if reviews is not None:
        low, high = reviews["precision_interval"]
        s_low, s_high = reviews["suggestion_interval"]
        st.markdown(
            f"**After review**: of {reviews['reviewed']:,} flagged rows reviewed, "
            f"{reviews['relabelled']:,} were relabelled: the flags' observed precision is "
            f"{reviews['precision']:.2f} (95 % interval {low:.2f}-{high:.2f}); "
            f"{reviews['to_suggested']:,} to the suggested label "
            f"({reviews['suggestion_precision']:.2f}, {s_low:.2f}-{s_high:.2f}).")
    n_flagged = int(info.get("n_label_issues") or 0)
    if n_flagged and st.button(
            f"Show the {n_flagged:,} flagged rows in Explore",
            key=state.key("report", "label_issues_explore"), icon=":material/manage_search:",
            help="Explore filtered to the flagged rows, lowest label quality first: given and "
                 "suggested label beside the texts, and their download."):
        state.put(REQUEST, True)
        st.switch_page("app_pages/explore.py")


def apply_request(label_column: str | None = "label") -> None:
    """On Explore, before its widgets: turn a Report request into the label-issues view
    (breakdown filter *label issue* = flagged, sorted by label quality, ascending; the given
    label, the suggested label and the label quality side by side, first)."""
    if not st.session_state.pop(REQUEST, None):
        return
    st.session_state[state.key("explore", "breakdown_column")] = label_issues.ISSUE_COLUMN
    st.session_state[url_state.breakdown_values_key(label_issues.ISSUE_COLUMN)] = ["flagged"]
    st.session_state[state.key("explore", "sort")] = label_issues.QUALITY_COLUMN
    st.session_state[state.key("explore", "desc")] = False
    # given label, suggested label and label quality side by side, before the texts
    st.session_state[state.EXPLORE_COLUMNS_FIRST] = [
        c for c in (label_column, label_issues.SUGGESTED_COLUMN, label_issues.QUALITY_COLUMN)
        if c]
    st.session_state.pop(state.key("explore", "view"), None)  # back to its default: all rows
