"""Cues page: which features give the label away, before and after AFLite."""

from __future__ import annotations

import streamlit as st

from ui import cache, components, state
from ui.cues import view as cues_view

st.title("Cues")
components.explainer(cues_view.SUMMARY, cues_view.formulas(), title="Formulas and sources")

dataset = state.get_dataset()
run = None
path = state.get_run_path()
if path is not None:
    try:
        run = cache.open_run(path)
    except (ValueError, OSError) as exc:
        components.show_error(f"The run {path.name} cannot be opened: {exc}")

if dataset is None and run is None:
    components.empty_state("Load a dataset (or open a run) first: the cue table is computed "
                           "from its texts and labels.", page="app_pages/data.py",
                           label="Go to Data")
    st.stop()

table, origin, attrs = cues_view.cue_source(dataset, run)
if table is None:
    if run is not None and run.cues is None and dataset is None:
        components.empty_state("The open run has no cue statistics; load its dataset to "
                               "compute them here, or tick *Lexical cues* on the Audit page.")
else:
    st.caption(f"Cue table of {components.md_escape(origin)}.")
    cues_view.notes(attrs)
    rows = cues_view.filtered_table(table)
    cues_view.show_table(rows)
    labels = cues_view.labels_of(table, attrs)
    st.divider()
    cues_view.side_by_side(rows, labels)
    st.divider()
    cues_view.drill_down(rows, labels, run, cues_view.scope_tables(run))

st.divider()
cues_view.probing_panel(dataset)
