"""Data page: pick the bundled sample, upload a file, or generate the synthetic demo."""

from __future__ import annotations

import streamlit as st

from ui import components, session, state
from ui.data import view as data_view

PAGE = "data"

st.title("Data")
components.explainer(
    "Load the dataset to audit. Every row keeps a stable row id and all of its original "
    "columns; rows without a usable label or text are excluded from the audit and counted by "
    "reason here, never dropped silently.",
    data_view.RULES,
    title="Column roles and exclusion rules",
)

SOURCES = {"sample": "Bundled SNLI sample", "upload": "Upload a file",
           "path": "A path on this server", "synthetic": "Synthetic demo (biased circles)"}
source = st.segmented_control(
    "Source", list(SOURCES), format_func=SOURCES.get, required=True,
    default=state.get(state.DATASET_ORIGIN) or "sample", key=state.key(PAGE, "source"),
)

if source == "sample":
    data_view.sample_panel(session.load_sample)
elif source == "upload":
    data_view.upload_panel(PAGE)
elif source == "path":
    data_view.path_panel(PAGE)
else:
    data_view.synthetic_panel(PAGE)

st.divider()
dataset = state.get_dataset()
if dataset is None:
    components.empty_state("No dataset is loaded yet: pick the bundled sample, upload a file "
                           "or generate the synthetic demo above.")
else:
    data_view.validation_report(dataset, PAGE)
