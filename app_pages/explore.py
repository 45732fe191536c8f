"""Explore page: retained vs removed rows, search and filters, histograms, the map."""

from __future__ import annotations

import streamlit as st

from ui import cache, components, state, url_state
from ui.explore import view as explore_view
from ui.panels import datamap as datamap_view

st.title("Explore")
components.explainer(explore_view.SUMMARY, explore_view.FORMULA,
                     title="Predictability, formula")

path = state.get_run_path()
if path is None:
    components.empty_state("No audit run is open yet: run an audit (one click on the Audit "
                           "page) or reopen a previous run there.", page="app_pages/audit.py",
                           label="Go to Audit")
    st.stop()
try:
    run = cache.open_run(path)
    table = cache.rows_table(path)
except (ValueError, OSError) as exc:
    components.show_error(f"The run {path.name} cannot be opened: {exc}",
                          hint="Reopen another run on the Audit page.")
    st.stop()

url_state.restore_explore(table)  # a shared link's view, before the widgets are drawn
explore_view.run_header(run)
explore_view.charts_row(path, run)
selected = explore_view.map_panel(path)
selected = datamap_view.panel(path, run, selected)
state.put(state.EXPLORE_SELECTION, list(selected) if selected else None)  # Review's queue
st.divider()
explore_view.table_section(table, run, path, selected)
