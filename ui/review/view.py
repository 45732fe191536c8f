"""The Review page: one row at a time of a queue (label issues, removed rows, a slice, a map
region, a saved subset), decided with one key each (K keep, D drop, 1-9 relabel, S skip,
arrows to move, U undo), each decision saved to the run's ``decisions.parquet`` at once."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from aflite_core.runs import decisions, review, run_labels
from ui import cache, components, state

PAGE = "review"
SUMMARY = ("Decide, row by row, what happens to the rows the audit points at: **keep** "
           "(the row is fine), **drop** (leave it out of the curated dataset), **relabel** "
           "(give it another of the dataset's labels) or **skip** (decide later). Each "
           "decision is saved in the run's `decisions.parquet` at once; the curated dataset "
           "(below, or `python -m aflite_core export RUN --what curated`) applies them. "
           "Keys: **K** keep, **D** drop, **1-9** relabel to the label of that number, "
           "**S** skip, **←/→** previous/next, **U** undo the last decision.")
#: At most this many relabel buttons get a number key.
MAX_LABEL_KEYS = 9


#: The queue of the rows selected on Explore's map (a box, a lasso, a region's ◇).
SELECTION = "selection"


def queue_picker(run: Any) -> tuple[str, str | None] | None:
    """The queue's source (and which slice, region or subset); None while none is chosen."""
    sources = review.available_sources(run)
    selected = state.get(state.EXPLORE_SELECTION)
    names = dict(review.SOURCES)
    if selected:
        sources = [SELECTION, *sources]
        names[SELECTION] = f"The {len(selected):,} rows selected on Explore's map"
    if not sources:
        st.info("This run has nothing to review yet: no label issues, no removed rows, no "
                "stored slice or map region and no saved subset.", icon=":material/info:")
        return None
    left, right = st.columns([1, 2])
    source = left.selectbox("Rows to review", sources,
                            format_func=names.get, key=state.key(PAGE, "source"))
    if source in ("label_issues", "removed", SELECTION):
        return source, None
    choices = review.source_keys(run, source)
    if not choices:
        right.info(f"This run has no {review.SOURCES[source].lower()[2:]} to review.",
                   icon=":material/info:")
        return None
    labels = dict(choices)
    key = right.selectbox("Which one", list(labels), format_func=labels.get,
                          key=state.key(PAGE, f"key:{source}"))
    return source, key


def selection_ids(run: Any) -> np.ndarray:
    """The rows selected on Explore's map, in input order, as the run's row ids."""
    selected = state.get(state.EXPLORE_SELECTION) or []
    ids = run.score_columns(["row_id"])["row_id"]
    return ids[ids.isin(list(selected))].to_numpy()


def _position_key(queue_id: str) -> str:
    return state.key(PAGE, f"position:{queue_id}")


def _move(queue_id: str, n: int, step: int) -> None:
    name = _position_key(queue_id)
    st.session_state[name] = int(min(max(st.session_state.get(name, 0) + step, 0), n - 1))


def _decide(run: Any, queue_id: str, n: int, row_id: Any, decision: str,
            label: str | None = None) -> None:
    """Record the decision, remember it for Undo, go to the next row."""
    note = st.session_state.get(state.key(PAGE, "note"), "")
    reviewer = st.session_state.get(state.key(PAGE, "reviewer"), "")
    try:
        run.decide([row_id], decision, label=label, note=note, reviewer=reviewer)
    except (ValueError, OSError) as exc:
        st.session_state[state.key(PAGE, "error")] = str(exc)
        return
    st.session_state.setdefault(state.key(PAGE, "undo"), []).append(row_id)
    st.session_state[state.key(PAGE, "note")] = ""
    _move(queue_id, n, +1)


def _undo(run: Any) -> None:
    stack = st.session_state.get(state.key(PAGE, "undo")) or []
    if not stack:
        return
    row_id = stack.pop()
    try:
        review.undo(run, row_id, reviewer=st.session_state.get(state.key(PAGE, "reviewer"),
                                                                ""))
    except (ValueError, OSError) as exc:
        st.session_state[state.key(PAGE, "error")] = str(exc)


def review_panel(run: Any, ids: np.ndarray, queue_id: str) -> None:
    """The current row of the queue, its decision buttons and the queue's progress."""
    n = len(ids)
    if not n:
        st.info("This queue is empty.", icon=":material/info:")
        return
    error = st.session_state.pop(state.key(PAGE, "error"), None)
    if error:
        components.show_error(error)
    position = int(min(st.session_state.get(_position_key(queue_id), 0), n - 1))
    force = run.decisions()
    reviewed = int(np.isin(ids, force["row_id"].to_numpy()).sum()) if len(force) else 0
    st.progress(reviewed / n, text=f"Reviewed {reviewed:,} of {n:,} · row {position + 1:,} "
                                   f"of {n:,}")
    row_id = ids[position]
    card = review.row_card(run, row_id)
    _card(card)
    st.text_input("Note (saved with the next decision)", key=state.key(PAGE, "note"))
    labels = run_labels(run)
    buttons = st.columns(6)
    buttons[0].button("Keep", key=state.key(PAGE, "keep"), shortcut="K", type="primary",
                      on_click=_decide, args=(run, queue_id, n, row_id, "keep"))
    buttons[1].button("Drop", key=state.key(PAGE, "drop"), shortcut="D",
                      on_click=_decide, args=(run, queue_id, n, row_id, "drop"))
    buttons[2].button("Skip", key=state.key(PAGE, "skip"), shortcut="S",
                      on_click=_move, args=(queue_id, n, +1))
    buttons[3].button("◀ Previous", key=state.key(PAGE, "previous"), shortcut="Left",
                      on_click=_move, args=(queue_id, n, -1))
    buttons[4].button("Next ▶", key=state.key(PAGE, "next"), shortcut="Right",
                      on_click=_move, args=(queue_id, n, +1))
    buttons[5].button("Undo", key=state.key(PAGE, "undo_button"), shortcut="U",
                      disabled=not st.session_state.get(state.key(PAGE, "undo")),
                      on_click=_undo, args=(run,))
    relabel = st.columns(min(len(labels), MAX_LABEL_KEYS) + 1)
    relabel[0].markdown("**Relabel to**")
    for i, label in enumerate(labels[:MAX_LABEL_KEYS]):
        relabel[i + 1].button(label, key=state.key(PAGE, f"relabel:{i}"),
                              shortcut=str(i + 1), help=f"Relabel this row to {label}",
                              disabled=label == card["label"], on_click=_decide,
                              args=(run, queue_id, n, row_id, "relabel", label))
    bulk_panel(run, ids)
    if card["neighbours"]:
        st.caption("Nearest rows in Φ (cosine similarity, from the run's compact Φ) and their "
                   "labels:" if card.get("neighbours_in") == "phi" else
                   "Nearest rows on the map (this run kept no compact Φ, so these are "
                   "neighbours in the 2-D layout, not in Φ; a new audit keeps it) and their "
                   "labels:")
        st.dataframe(pd.DataFrame(card["neighbours"]), hide_index=True,
                     column_config={"distance": st.column_config.NumberColumn(format="%.3f"),
                                    "similarity": st.column_config.NumberColumn(format="%.3f"),
                                    "text": st.column_config.TextColumn(width="large")})


def _apply_to_rest(run: Any, row_ids: list, decision: str, labels: list | None) -> None:
    reviewer = st.session_state.get(state.key(PAGE, "reviewer"), "")
    try:
        decisions.decide(run, row_ids, decision, labels=labels, reviewer=reviewer,
                         note="bulk action, from the precision measured on the reviewed rows")
    except (ValueError, OSError) as exc:
        st.session_state[state.key(PAGE, "error")] = str(exc)


def bulk_panel(run: Any, ids: np.ndarray) -> None:
    """A bulk action on the queue's unreviewed rows, offered only with the precision the
    reviews of this queue measured (after :data:`review.MIN_REVIEWS_FOR_BULK` of them), and
    saying what it would change."""
    offer = review.bulk_offer(run, ids)
    remaining = [r for r in offer["remaining"].tolist()]
    if not remaining:
        return
    if not offer["offered"]:
        st.caption(f"After {review.MIN_REVIEWS_FOR_BULK} reviews in this queue "
                   f"({offer['reviewed']} so far), a decision on all {len(remaining):,} "
                   "remaining rows is offered, with the precision your reviews measured.")
        return
    with st.expander(f"Apply to the {len(remaining):,} rows not reviewed yet"):
        n = offer["reviewed"]
        for action, figures in offer["actions"].items():
            low, high = figures["interval"]
            if action == "drop":
                what = (f"**Drop** all {len(remaining):,}: you dropped "
                        f"{figures['share']:.0%} of the {n} rows reviewed here (95 % interval "
                        f"{low:.0%}-{high:.0%}), so about {low * len(remaining):,.0f}-"
                        f"{high * len(remaining):,.0f} of them would be rightly dropped and the "
                        "rest lost.")
                labels = None
            else:
                what = (f"**Relabel** all {len(remaining):,} to their suggested labels: you "
                        f"relabelled {figures['share']:.0%} of the {n} rows reviewed here to "
                        f"the suggested label (95 % interval {low:.0%}-{high:.0%}), so about "
                        f"{low * len(remaining):,.0f}-{high * len(remaining):,.0f} of these "
                        "changes would be right and the rest would put errors in.")
                labels = offer["suggested"].reindex(remaining).astype(str).tolist()
            st.markdown(what)
            st.button(f"{action.capitalize()} the {len(remaining):,} remaining rows",
                      key=state.key(PAGE, f"bulk:{action}"), on_click=_apply_to_rest,
                      args=(run, remaining, action, labels))


def _card(card: dict) -> None:
    for column, text in card["texts"].items():
        st.markdown(f"**{components.md_escape(column)}**: {components.md_escape(text)}")
    cells = [("Label", card["label"], None), ("Status", card["status"], None),
             ("Predictability", f"{card['predictability']:.2f}", None)]
    if card["suggested_label"] is not None:
        flagged = " (flagged)" if card["is_label_issue"] else ""
        cells += [("Suggested label", card["suggested_label"], None),
                  (f"Label quality{flagged}", f"{card['label_quality']:.3f}", None)]
    components.metric_row(cells)
    decision = card["decision"]
    if decision:
        said = decision["decision"] + (f" → {decision['label']}"
                                       if decision["decision"] == "relabel" else "")
        by = f" by {decision['reviewer']}" if decision.get("reviewer") else ""
        st.caption(f"Decided: **{components.md_escape(said)}**{components.md_escape(by)}")


def curated_download(path: Any) -> None:
    """The curated dataset with the decisions applied, as a CSV download."""
    left, right = st.columns([1, 2])
    apply_filter = left.checkbox("Leave AFLite's removed rows out too",
                                 key=state.key(PAGE, "apply_filter"))
    if left.button("Prepare the curated CSV", key=state.key(PAGE, "prepare")):
        st.session_state[state.key(PAGE, "curated")] = cache.curated_csv(
            path, apply_filter=apply_filter)
    data = st.session_state.get(state.key(PAGE, "curated"))
    if data is not None:
        right.download_button("Download curated.csv", data=data, file_name="curated.csv",
                              mime="text/csv", key=state.key(PAGE, "download"))
