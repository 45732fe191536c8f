"""Review page: decide row by row, with the keyboard, what happens to the flagged rows."""

from __future__ import annotations

import streamlit as st

from ui import cache, components, state
from ui.review import view as review_view

st.title("Review")
st.caption(review_view.SUMMARY)

path = state.get_run_path()
if path is None:
    components.empty_state("No audit run is open yet: run an audit on the Audit page (or "
                           "reopen a previous one there), then review its rows here.",
                           page="app_pages/audit.py", label="Go to Audit")
    st.stop()
try:
    run = cache.open_run(path)
except (ValueError, OSError) as exc:
    components.show_error(f"The run {path.name} cannot be opened: {exc}",
                          hint="Reopen another run on the Audit page.")
    st.stop()

st.text_input("Reviewer", key=state.key(review_view.PAGE, "reviewer"),
              placeholder="your name, saved with each decision")
picked = review_view.queue_picker(run)
if picked is not None:
    source, key = picked
    with components.shown_errors("This queue"):
        ids = cache.review_queue(path, source, key)
        review_view.review_panel(run, ids, f"{source}:{key}")
st.divider()
st.subheader("The curated dataset")
with components.shown_errors("The curated dataset"):
    review_view.curated_download(path)
