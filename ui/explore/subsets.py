"""Explore: save the filtered rows as a named subset of the run (``subsets/NAME.parquet``).

The subset keeps the filter that made it (the Explore filter as JSON, the cue and slice
choices, and the view's link parameters); the command line exports it later with
``python -m aflite_core export RUN --subset NAME --what all --out FILE``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from aflite_core.runs import subsets
from ui import cache, components, filters, state, url_state

PAGE = "explore"
NAME_KEY = state.key(PAGE, "subset_name")
OVERWRITE_KEY = state.key(PAGE, "subset_overwrite")


def description(flt: filters.RowFilter, view: str) -> dict[str, Any]:
    """What is stored with a subset: the row filter, the view, the cue and slice choices,
    and the view's link parameters (which reopen it on the Explore page)."""
    values = {k: v for k, v in st.session_state.items() if str(k).startswith(f"{PAGE}:")}
    return {"row_filter": filters.to_dict(flt), "view": view,
            "cue": values.get(state.key(PAGE, "cue")),
            "slice": values.get(state.key(PAGE, "slice")),
            "link": url_state.encode(values)}


OPEN_KEY = state.key(PAGE, "subset_open")


def open_filter(run: Any, table: pd.DataFrame) -> np.ndarray | None:
    """A saved subset reopened as a filter: only its rows (``None`` when none is chosen or
    the run has no subset)."""
    saved = subsets.list_subsets(run.path)
    if not saved:
        return None
    names = [s.name for s in saved]
    choice = st.selectbox(
        "Saved subset (only its rows)", names, index=None, key=OPEN_KEY,
        format_func=lambda n: f"{n} ({next(s.n_rows for s in saved if s.name == n):,} rows)",
        placeholder="none: every row", help="A subset saved below, reopened as a filter.")
    if not choice:
        return None
    try:
        ids = subsets.load_subset(run.path, choice).row_ids
    except (ValueError, OSError) as exc:
        components.show_error(f"The subset {components.md_escape(choice)} cannot be read: "
                              f"{components.md_escape(exc)}")
        return None
    return cache.row_index(run.path).id_mask(ids)


def save_panel(index: Any, positions: np.ndarray, flt: filters.RowFilter, view: str,
               run: Any) -> None:
    """A small form: name the rows shown (``positions`` in the run's rows table, through its
    :class:`~aflite_core.runs.RowIndex`) and save them in the run folder."""
    saved = subsets.list_subsets(run.path)
    title = f"Save these {len(positions):,} rows as a named subset"
    with st.expander(title, icon=":material/bookmark_add:"):
        with st.form(state.key(PAGE, "subset_form"), border=False):
            c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
            c1.text_input("Subset name", key=NAME_KEY, placeholder="e.g. hard-neutral",
                          help="Letters, digits, '.', '_' and '-'; saved as "
                               "subsets/NAME.parquet in the run folder.")
            c2.checkbox("Replace if it exists", key=OVERWRITE_KEY)
            submitted = st.form_submit_button("Save subset", icon=":material/save:")
        if submitted:
            _save(index.table.index[positions], flt, view, run)
            saved = subsets.list_subsets(run.path)
        if saved:
            st.caption("Saved subsets of this run: " + ", ".join(
                f"{components.md_escape(s.name)} ({s.n_rows:,} rows)" for s in saved)
                + ". Reopen one with *Saved subset* among the filters above.")
            st.caption("Export one with `python -m aflite_core export RUN_DIR --subset NAME "
                       "--what all --out FILE.csv`.")


def _save(row_ids: pd.Index, flt: filters.RowFilter, view: str, run: Any) -> None:
    name = str(state.get(NAME_KEY, "") or "").strip()
    if not name:
        components.show_error("Give the subset a name first.")
        return
    try:
        subset = subsets.save_subset(run.path, name, row_ids,
                                     filter=description(flt, view),
                                     overwrite=bool(state.get(OVERWRITE_KEY, False)))
    except FileExistsError as exc:
        components.show_error(components.md_escape(exc),
                              hint="Tick *Replace if it exists* to replace it.")
        return
    except ValueError as exc:
        components.show_error(f"The subset was not saved: {components.md_escape(exc)}")
        return
    except OSError as exc:  # its message names server paths: say what failed, not where
        components.show_error("The subset was not saved: the run folder could not be written "
                              f"({components.md_escape(exc.strerror or type(exc).__name__)}).")
        return
    st.success(f"Saved {subset.n_rows:,} rows as subset {components.md_escape(subset.name)} "
               f"in {components.md_escape(run.name)}/subsets/.", icon=":material/check:")
