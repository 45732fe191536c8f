"""Review page: decide row by row, with the keyboard, what happens to the flagged rows."""

from __future__ import annotations

import streamlit as st

from ui import cache, components, current, state
from ui.review import view as review_view

st.title("Review")
st.caption(review_view.SUMMARY)

path, run = current.open_run_or_stop("then review its rows here")

st.text_input("Reviewer", key=state.key(review_view.PAGE, "reviewer"),
              placeholder="your name, saved with each decision")
picked = review_view.queue_picker(run)
if picked is not None:
    source, key = picked
    with components.shown_errors("This queue"):
        ids = (review_view.selection_ids(run) if source == review_view.SELECTION
               else cache.review_queue(path, source, key))
        review_view.review_panel(run, ids, f"{source}:{key}")
st.divider()
st.subheader("The curated dataset")
with components.shown_errors("The curated dataset"):
    review_view.curated_download(path)
