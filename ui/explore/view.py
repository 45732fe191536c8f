"""Panels of the Explore page: charts, the map with selection, filters and row tables."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st
from streamlit.errors import StreamlitAPIException

from aflite_core.measures import MAX_REGION_SHARE, NO_REGIONS
from aflite_core.represent import MAX_QUERY_CHARS
from aflite_core.runs import STATUS_NAMES, STATUSES, views
from ui import cache, charts, components, downloads, filters, state, url_state
from ui.explore import subsets as subsets_view
from ui.panels import breakdown as breakdown_view
from ui.panels import datamap as datamap_view
from ui.panels import label_issues as label_issues_view
from ui.panels import slices as slices_view

PAGE = "explore"
#: A column header clicked in a rows table, applied as the page's one sort on the next run.
SORT_REQUEST = "explore:header_sort_request"
#: Bumped after a header click: a new table key clears the column selection.
TABLE_VERSION = "explore:table_version"

SUMMARY = (
    "Every row of the run with its status and its **predictability**: the share of the "
    "linear models holding it out that predicted its label right. Removed rows were easy for "
    "surface features; compare them with the retained rows to see what AFLite took out."
)
FORMULA = r"""
$$
p(i) = \frac{\#\{\,j : i \text{ held out in partition } j,\ f_j(x_i) = y_i\,\}}
            {\#\{\,j : i \text{ held out in partition } j\,\}}
$$

For a removed row, $p(i)$ is its score in the round that removed it (*removal round*); for a
retained row, its score in the last round. Warm-up rows trained the representation and are
never filtered; excluded rows (no usable label or text) take no part. Dev/test rows kept by
the default split policy are scored by models trained on the retained training rows.

Source: Le Bras et al., *Adversarial Filters of Dataset Biases*, ICML 2020, Algorithm 1
(predictability); the 2-D map is UMAP (McInnes et al., 2018; PCA as an option) of Φ, its
regions found by HDBSCAN (Campello et al., 2013) and named by class-based TF-IDF of their
hypotheses.
"""

VIEWS = {"all": "All rows", "retained": "Retained", "removed": "Removed",
         "side": "Retained | Removed side by side"}


def run_header(run: Any) -> None:
    """Run name, sizes, and the stop reason."""
    sizes = run.sizes
    st.caption(f"Run {components.md_escape(run.name)} · input "
               f"{components.md_escape(run.input.get('name', '?'))} · created "
               f"{run.created.replace('T', ' ')[:19]} UTC")
    items = [("Retained", f"{sizes.get('retained', 0):,}", None),
             ("Removed", f"{sizes.get('removed', 0):,}", None)]
    if sizes.get("unfiltered"):
        items.append(("Kept, not filtered", f"{sizes['unfiltered']:,}", None))
    if sizes.get("warmup"):
        items.append(("Warm-up", f"{sizes['warmup']:,}", None))
    items.append(("Excluded", f"{sizes.get('excluded', 0):,}", None))
    rounds = len(run.history)
    items.append(("Rounds", f"{rounds:,}", None))
    components.metric_row(items)


def charts_row(path: Path, run: Any) -> None:
    """Predictability histogram (binned counts) and removal per round."""
    left, right = st.columns(2)
    with left:
        st.markdown("**Predictability, retained vs removed**")
        per_label = st.toggle("One panel per label", key=state.key(PAGE, "hist_by_label"))
        figure = cache.histogram_figure(path, by_label=per_label)
        if figure is None:
            st.caption("No predictability scores in this run.")
        else:
            st.plotly_chart(figure, key=state.key(PAGE, "hist_chart"),
                            config=charts.STATIC_CONFIG)
    with right:
        st.markdown(f"**Rows removed per {views.round_name(run)}**")
        figure = cache.rounds_figure(path)
        if figure is None:
            st.caption("No per-round history in this run.")
        else:
            st.plotly_chart(figure, key=state.key(PAGE, "rounds_chart"),
                            config=charts.STATIC_CONFIG)


def map_panel(path: Path) -> list[str] | None:
    """The 2-D map coloured as chosen; return the row ids selected on it (or None)."""
    window = state.get(state.key(PAGE, "map_window"))
    if window is not None and state.get(state.key(PAGE, "map_window_run")) != str(path):
        window = None  # a zoom belongs to the run it was made on
    points, total = cache.map_points(path, window=window)
    st.markdown("**Map of the rows** (2-D projection of Φ)")
    if total == 0 and window is None:
        st.caption("This run has no 2-D projection (the *2-D map* measure was not computed). "
                   "Tick it on the Audit page to get one.")
        searched = search_box(path)  # the search by meaning needs Φ, not the map
        if searched is None:
            return None
        found = searched[1]
        st.caption(_found_caption(found) + "listed in the table below; clear the search box "
                   "to show all rows.")
        return found["row_id"].tolist()
    done = (cache.open_run(path).summary.get("measures") or {}).get("projection") or {}
    if done.get("fallback"):
        st.info(f"UMAP could not map these rows, so this map is {done['fallback'].upper()}: "
                f"{components.md_escape(done.get('reason', ''))}.", icon=":material/info:")
    if done.get("polish_note"):
        note = components.md_escape(str(done["polish_note"]))
        st.caption(note[:1].upper() + note[1:] + ".")
    c1, c2 = st.columns([2, 3], vertical_alignment="bottom")
    options = [c for c in ("status", "label", "predictability") if c in points]
    color = c1.segmented_control("Colour by", options, default="status", required=True,
                                 key=state.key(PAGE, "map_color"))
    version = state.get(state.key(PAGE, "map_version"), 0)
    if c2.button("Clear map selection", key=state.key(PAGE, "map_clear")):
        state.put(state.key(PAGE, "map_version"), version + 1)
        st.rerun()
    searched = search_box(path)
    found = None if searched is None else searched[1]
    fig = (cache.map_figure(path, color=color, window=window) if searched is None else
           cache.found_map_figure(path, color=color, window=window, text=searched[0],
                                  k=SEARCH_K))
    regions = cache.map_regions_table(path)
    if window is not None:
        regions = charts.regions_in(regions, window)
    event = st.plotly_chart(fig, on_select="rerun", selection_mode=("points", "box", "lasso"),
                            key=state.key(PAGE, f"map:{version}"))
    region = charts.clicked_region(event, regions, charts.diamond_reach(fig))
    shapes = charts.selection_shapes(event)
    if found is not None:  # a search stands: its rows are the selection
        region, shapes = None, []
    elif region is None and not shapes:
        region = region_picker(regions, version)
    if found is not None:
        ids = found["row_id"].tolist()
        chosen = (_found_caption(found) + "starred on the map, listed in the table below; "
                  "clear the search box to select on the map again. ")
    elif region is not None:
        ids = cache.region_row_ids(path, region)
        name = regions.loc[regions["region"] == region, "name"]
        chosen = (f"**Region {region}** ({components.md_escape(name.iloc[0]) if len(name) else ''}"
                  f"): **all {len(ids):,} of its rows selected**, from the whole map. ")
    elif shapes:
        try:
            ids = cache.rows_in_shapes(path, shapes)
        except ValueError as exc:
            components.show_error(f"This selection cannot be used: {exc}",
                                  hint="Draw the lasso again, or clear the map selection.")
            ids = []
        chosen = (f"**{len(ids):,} rows selected**: every row inside the "
                  f"{'shapes' if len(shapes) > 1 else shapes_name(shapes[0])}, from the whole "
                  "map (the table below shows them; *Clear map selection* to show all). ")
    else:
        ids = charts.selected_row_ids(event)
        chosen = (f"**{len(ids):,} rows selected** (the table below shows them; *Clear map "
                  "selection* to show all). " if ids else
                  "Draw a box or a lasso (the tools at the top right of the map) to filter the "
                  "table below"
                  + (", or click a region's ◇ (under its name) to select all its rows. "
                     if len(regions)
                     else ". "))
    zoom_controls(path, shapes, window, total, version)
    # said only when the audit looked for regions and found none distinct (a run made before
    # regions existed has no note, and nothing is said)
    no_regions = (f" The map has {NO_REGIONS}: no dense part of it holds under "
                  f"{MAX_REGION_SHARE:.0%} of the rows apart from the rest."
                  if not len(regions) and done.get("regions_note") else "")
    if len(points) < total:
        st.caption(chosen + f"Drawing a uniform random sample of {len(points):,} of "
                   f"{total:,} points (seed 0) over a grey density image of every row, to "
                   "keep the page fast; a box, a lasso or a region's ◇ selects from every "
                   "row." + no_regions)
    else:
        st.caption(chosen + f"{total:,} points"
                   + (f", {len(regions)} regions." if len(regions) else ".") + no_regions)
    return ids or None


#: Rows a search by meaning shows.
SEARCH_K = 20


def _found_caption(found: pd.DataFrame) -> str:
    return (f"**The {len(found)} rows most like the sentence** (cosine similarity in Φ, "
            f"{found['similarity'].max():.2f} to {found['similarity'].min():.2f}): ")


def search_box(path: Path) -> tuple[str, pd.DataFrame] | None:
    """A sentence to search the run by meaning; the sentence and the rows nearest it in Φ
    (``row_id``, ``similarity``, map ``x``, ``y``), or None when none is typed or the search
    is refused (the reason shown)."""
    text = st.text_input(
        "Rows like this sentence", key=state.key(PAGE, "map_query"), max_chars=MAX_QUERY_CHARS,
        placeholder="search by meaning: type a sentence, e.g. a dog runs in the snow",
        help=f"The {SEARCH_K} rows nearest the sentence in Φ (cosine similarity; the sentence "
             "is read as a hypothesis); they are starred on the map and listed below.")
    if not text.strip():
        return None
    try:
        return text, cache.nearest_rows(path, text, k=SEARCH_K)
    except ValueError as exc:
        components.show_error(str(exc))
        return None


def region_picker(regions: pd.DataFrame, version: int) -> int | None:
    """A named region chosen from a list (the keyboard's way to what a click on its diamond
    does), or None."""
    if regions is None or regions.empty:
        return None
    names = {int(r): f"{int(r)} · {n} ({int(k):,} rows)" for r, n, k in
             zip(regions["region"], regions["name"], regions["rows"], strict=True)}
    return st.selectbox("Select a region", list(names), index=None, format_func=names.get,
                        placeholder="or pick a region by name: all its rows",
                        key=state.key(PAGE, f"map_region:{version}"))


def zoom_controls(path: Path, shapes: list[dict], window: tuple | None, total: int,
                  version: int) -> None:
    """*Zoom to the selection* (the drawn shapes' bounding box, drawn again from every row
    in it) and *Whole map*; a zoom is kept per session and run."""
    if not shapes and window is None:
        return
    c1, c2, c3 = st.columns([1, 1, 2], vertical_alignment="center")
    if shapes and c1.button("Zoom to the selection", key=state.key(PAGE, "map_zoom"),
                            help="Draw the map again for the selection's bounding box, from "
                                 "every row in it (a sample only above the point limit)."):
        xs = [float(v) for s in shapes for v in (s.get("x") or [])]
        ys = [float(v) for s in shapes for v in (s.get("y") or [])]
        if xs and ys and min(xs) < max(xs) and min(ys) < max(ys):
            state.put(state.key(PAGE, "map_window"), (min(xs), max(xs), min(ys), max(ys)))
            state.put(state.key(PAGE, "map_window_run"), str(path))
            state.put(state.key(PAGE, "map_version"), version + 1)
            st.rerun()
    if window is not None:
        if c2.button("Whole map", key=state.key(PAGE, "map_unzoom")):
            state.put(state.key(PAGE, "map_window"), None)
            state.put(state.key(PAGE, "map_version"), version + 1)
            st.rerun()
        c3.caption(f"Zoomed in: {total:,} rows in view, drawn from every row in the window.")


def shapes_name(shape: dict) -> str:
    """``box`` or ``lasso``: what a selection shape was drawn with."""
    return "box" if len(shape.get("x") or []) == 2 else "lasso"


def filter_panel(table: pd.DataFrame, run: Any, path: Path) -> tuple[filters.RowFilter, str]:
    """Filter widgets; return the filter and the chosen view."""
    label_col = run.columns.get("label")
    # the Report's "show the flagged rows", before the widgets
    label_issues_view.apply_request(label_col)
    view = st.segmented_control("Show", list(VIEWS), format_func=VIEWS.get, default="all",
                                required=True, key=state.key(PAGE, "view"))
    c1, c2, c3, c4 = st.columns([3, 1, 1, 1], vertical_alignment="bottom")
    search = c1.text_input("Search the text", key=state.key(PAGE, "search"),
                           placeholder="a word, a phrase, or a regular expression")
    regex = c2.toggle("Regex", key=state.key(PAGE, "regex"),
                      help="RE2 syntax (linear time; no backreferences or lookaround).")
    case = c3.toggle("Match case", key=state.key(PAGE, "case"))
    whole_word = c4.toggle("Whole word", key=state.key(PAGE, "whole_word"),
                           help="'dog' finds 'a dog.' but not 'dogs' or 'hotdog'.")
    c1, c2, c3, c4 = st.columns(4)
    index = cache.row_index(path)  # the run's decoded columns: no pass over the rows here
    labels: list[str] = []
    if label_col and label_col in table:
        values = index.categories(label_col, strip=True)
        if len(values) <= 200:
            labels = c1.multiselect("Labels", values, key=state.key(PAGE, "labels"))
    statuses = []
    if view == "all":
        found = set(index.categories("status"))
        present = [s for s in STATUSES if s in found]
        statuses = c2.multiselect("Status", present, key=state.key(PAGE, "status"),
                                  format_func=STATUS_NAMES.get)
    pred = c3.slider("Predictability", 0.0, 1.0, (0.0, 1.0), 0.05,
                     key=state.key(PAGE, "pred"))
    top = index.max_number("removal_round") if len(table) else None
    max_round = int(top) if top is not None else 0
    round_range = None
    if max_round >= 1:
        chosen = c4.slider("Removal round", 1, max(max_round, 2), (1, max(max_round, 2)),
                           key=state.key(PAGE, "rounds"),
                           help="Applies to removed rows only; kept rows have no round.")
        if chosen != (1, max(max_round, 2)):
            round_range = chosen
    flt = filters.RowFilter(
        statuses=statuses, labels=labels, label_column=label_col,
        predictability=pred, rounds=round_range, search=search.strip(), regex=regex,
        case=case, whole_word=whole_word, search_columns=[c for c in (run.columns.get("premise"),
                                               run.columns.get("hypothesis")) if c],
    )
    flt.extra_mask = slices_view.combine(cue_filter(run, path),
                                         subsets_view.open_filter(run, table))
    flt.extra_mask = slices_view.combine(
        flt.extra_mask, slices_view.explore_filter(run, path, len(table)))
    flt.ranges, flt.values = datamap_view.measure_filters(table, index)
    flt.values = {**flt.values, **breakdown_view.explore_filter(run, path)}
    return flt, view


def cue_filter(run: Any, path: Path) -> np.ndarray | None:
    """Optional filter: rows that have one cue feature of the run's cue table."""
    cues = run.cues
    if cues is None or cues.empty:
        return None
    full = cues[cues["scope"] == "full"] if "scope" in cues else cues
    top = full.head(300)
    options = [f"{t}:{f}" for t, f in zip(top["feature_type"], top["feature"], strict=True)]
    choice = st.selectbox("Cue feature (rows that have it)", options, index=None,
                          placeholder="any (top cues of the run, by cueness)",
                          key=state.key(PAGE, "cue"))
    if not choice:
        return None
    feature_type, _, feature = choice.partition(":")
    try:
        return cache.feature_mask(path, feature_type, feature)
    except (ValueError, LookupError) as exc:
        components.show_error(f"The cue filter is not available: {exc}")
        return None


@st.fragment
def table_section(table: pd.DataFrame, run: Any, path: Any, selected: list | None) -> None:
    """Filters and the paged tables, as a fragment.

    Searching, filtering, sorting and paging rerun only this part of the page, not the
    charts and the (up to 12,000-point) map above it.
    """
    flt, view = filter_panel(table, run, path)
    if selected is not None:
        flt.row_ids = selected
        st.info(f"Showing only the {len(selected):,} rows selected on the map.",
                icon=":material/select:")
    rows_panel(table, flt, view, run)
    url_state.sync_explore(table, path, cache.row_index(path))


def rows_panel(table: pd.DataFrame, flt: filters.RowFilter, view: str, run: Any) -> None:
    """Sorted, paged tables of the filtered rows (one or two side by side)."""
    c1, c2, c3 = st.columns([2, 1, 1], vertical_alignment="bottom")
    sortable = ["row_id", "predictability", "removal_round", "status", *[
        c for c in table.columns if c not in cache.AUDIT_COLUMNS]]
    apply_header_sort(sortable)
    # a value another page or a header click put in the session wins; no default beside it
    # (Streamlit warns when a widget gets both)
    sort_key, desc_key = state.key(PAGE, "sort"), state.key(PAGE, "desc")
    if st.session_state.get(sort_key) not in sortable:
        st.session_state.pop(sort_key, None)
    sort_by = c1.selectbox("Sort by", sortable, key=sort_key,
                           index=None if sort_key in st.session_state else 1) or sortable[1]
    descending = c2.toggle("Descending", key=desc_key,
                           **({} if desc_key in st.session_state else {"value": True}))
    page_size = c3.selectbox("Rows per page", [25, 50, 100, 200], index=1,
                             key=state.key(PAGE, "page_size"))
    index = cache.row_index(run.path)
    try:
        mask = filters.mask_of(table, flt, index)
    except filters.SearchError as exc:
        components.show_error(str(exc), hint="Fix the pattern or turn Regex off.")
        return
    if view in ("retained", "removed"):
        mask = mask & index.isin("status", [view])
    # Positions only: the rows themselves are read for the page shown (and the download).
    positions = filters.sorted_positions(index.order(sort_by, ascending=not descending), mask)
    columns = shown_columns(table)
    text_cols = components.text_columns(
        [c for c in (run.columns.get("premise"), run.columns.get("hypothesis")) if c])
    if view == "side":
        left, right = st.columns(2)
        for col, status in ((left, "retained"), (right, "removed")):
            with col:
                part = positions[index.isin("status", [status])[positions]]
                st.markdown(f"**{status.capitalize()}** ({len(part):,} rows)")
                st.caption(sort_caption(sort_by, descending, len(part)))
                _table(index, part, columns, f"rows_{status}", page_size, text_cols)
        return
    st.markdown(f"**{len(positions):,} rows** match")
    st.caption(sort_caption(sort_by, descending, len(positions))
               + " Tick a row to read its full text below the table.")
    _table(index, positions, columns, "rows", page_size, text_cols)
    export_filtered(index, positions, run, columns)
    subsets_view.save_panel(index, positions, flt, view, run)


def shown_columns(table: pd.DataFrame) -> list[str]:
    """The columns the rows tables show, in the chosen order (default: every column of the
    rows table: texts and label, the audit's columns, the measures', the other inputs')."""
    every = list(table.columns)
    key = state.key(PAGE, "columns")
    first = [c for c in st.session_state.pop(state.EXPLORE_COLUMNS_FIRST, None) or []
             if c in every]
    if first:  # another page asked for these first, before the wide texts (the label-issues
        # view: given label, suggested label and label quality side by side)
        lead = [c for c in ("row_id",) if c in every and c not in first]
        st.session_state[key] = lead + first + [c for c in every
                                                if c not in first and c not in lead]
    with st.expander("Columns shown"):
        chosen = st.multiselect(
            "Columns, in this order", every, default=None if key in st.session_state
            else every, key=key,
            help="Remove a column to hide it; add it back to put it at the end. The download "
                 "below follows this order (hidden input columns come after).")
    return [c for c in chosen if c in table.columns] or every


def sort_caption(column: str, descending: bool, n: int) -> str:
    """Say which one sort orders the table: over all ``n`` matching rows, not the page."""
    order = "descending" if descending else "ascending"
    return (f"Sorted by {components.md_escape(column)} ({order}) over all {n:,} matching "
            "rows; click a column header to sort all of them by it (again to reverse).")


def apply_header_sort(sortable: list[str]) -> None:
    """Turn a header click of the last run into the page's sort (before its widgets).

    ``st.dataframe`` cannot report a header sort, and its own sort would reorder only the
    50 rows it was sent. The rows tables therefore select columns on a header click (which
    switches the browser's sort off, see ``components.paged_table``); the clicked column
    becomes *Sort by* here, so there is one sort, over all filtered rows. Clicking the
    column already sorted on reverses the direction; the tables go back to their first page.
    """
    column = st.session_state.pop(SORT_REQUEST, None)
    if column is None:
        return
    if column not in sortable:
        st.toast(f"Rows cannot be sorted by {components.md_escape(column)}.",
                 icon=":material/info:")
        return
    sort_key, desc_key = state.key(PAGE, "sort"), state.key(PAGE, "desc")
    if st.session_state.get(sort_key) == column:
        st.session_state[desc_key] = not st.session_state.get(desc_key, True)
    else:
        st.session_state[sort_key] = column
        st.session_state[desc_key] = column == "predictability"
    for name in ("rows", "rows_retained", "rows_removed"):
        st.session_state[state.key(PAGE, f"{name}_page")] = 1


def _table(index: Any, positions: np.ndarray, columns: list[str], name: str,
           page_size: int, text_cols: list[str]) -> None:
    """One page of the rows at ``positions`` (filtered and sorted), selectable."""
    version = int(state.get(TABLE_VERSION, 0))
    page_key = state.key(PAGE, f"{name}_page")
    start = components.pager(len(positions), page_key=page_key, page_size=page_size)
    shown = components.with_row_id(index.page(positions, start, start + page_size, columns))
    event = components.show_page(shown, start=start, n=len(positions), selectable=True,
                                 header_sort=True,
                                 table_key=state.key(PAGE, f"{name}_table:{version}"))
    clicked = _selected_column(event)
    if clicked is not None:
        state.put(SORT_REQUEST, "row_id" if clicked == shown.columns[0] else clicked)
        state.put(TABLE_VERSION, version + 1)
        _rerun_rows()
    selected = _selected_position(event)
    if selected is not None and selected < len(shown):
        with st.container(border=True):
            st.caption(f"Full text of row {components.md_escape(shown.iloc[selected, 0])}")
            components.full_text(shown.iloc[selected], text_cols)


def _rerun_rows() -> None:
    """Rerun the rows fragment only (a full rerun when the page is not in a fragment
    rerun, e.g. the first run after a click that reran the whole app)."""
    try:
        st.rerun(scope="fragment")
    except StreamlitAPIException:
        st.rerun()


def _selected_column(event: Any) -> str | None:
    try:
        picked = event.selection.columns  # type: ignore[union-attr]
    except AttributeError:
        return None
    return str(picked[0]) if picked else None


def _selected_position(event: Any) -> int | None:
    try:
        picked = event.selection.rows  # type: ignore[union-attr]
    except AttributeError:
        return None
    return int(picked[0]) if picked else None


def export_filtered(index: Any, positions: np.ndarray, run: Any, columns: list[str]) -> None:
    """Download exactly the rows shown (CSV, spreadsheet-safe): in the table's order, with
    the table's columns in its order, then the columns it hides. Streamed: the rows are
    taken by position, a chunk at a time, when the link is clicked."""
    if not len(positions):
        return
    digest = hashlib.blake2b(np.ascontiguousarray(positions).tobytes(), digest_size=16)
    downloads.download(
        f"Download these {len(positions):,} rows (CSV)",
        lambda table=index.table: cache.stream_rows(table, positions, columns),
        file_name=f"{run.name}-filtered.csv", mime="text/csv",
        key=state.key(PAGE, "download_filtered"),
        signature=cache.run_signature(run.path, digest.hexdigest(), columns))
