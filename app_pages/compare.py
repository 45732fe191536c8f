"""Compare page: two runs side by side (row overlap, then the same sections in two columns)."""

from __future__ import annotations

import streamlit as st

from ui import components
from ui.compare import view as compare_view

st.title("Compare runs")
components.explainer(compare_view.SUMMARY, compare_view.FORMULA, title="Overlap, formulas")

paths = compare_view.pick_runs()
if paths is None:
    st.stop()
side = compare_view.load(paths)
if side is None:
    st.stop()
compare_view.overlap(side, paths)
st.divider()
compare_view.columns(side)
