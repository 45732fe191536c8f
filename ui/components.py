"""Shared page furniture: measure explainers, empty states, errors and paged tables.

Dataset text is always shown through ``st.dataframe``, ``st.text`` or ``st.code``, never through
``unsafe_allow_html``, so a hypothesis containing ``<script>`` is displayed as text.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterable, Iterator

import pandas as pd
import streamlit as st

from ui import state

#: Columns that hold long free text in the tables (shown wide, never truncated in the data).
TEXT_COLUMN_HINTS = ("premise", "hypothesis", "sentence", "text", "context", "question",
                     "claim", "evidence", "warrant", "reason", "choice")


def explainer(summary: str, formula: str, *, title: str = "Formula and source") -> None:
    """Two sentences on what the page measures, the formula one click away.

    Parameters
    ----------
    summary : str
        Two sentences in Markdown (project text, never dataset text).
    formula : str
        Markdown (LaTeX allowed between ``$``) shown in an expander.
    title : str
        Label of the expander.
    """
    st.markdown(summary)
    with st.expander(title, icon=":material/function:"):
        st.markdown(formula)


def empty_state(message: str, *, page: str | None = None, label: str | None = None,
                icon: str = ":material/info:") -> None:
    """Tell the user what to do first, with a link to the page where they can do it.

    Parameters
    ----------
    message : str
        What is missing and what to do.
    page : str or None
        Page file to link to, e.g. ``"app_pages/data.py"``.
    label : str or None
        Link label.
    """
    st.info(message, icon=icon)
    problem = st.session_state.get("url:link_problem")  # ui.url_state.LINK_PROBLEM
    if problem:
        st.warning(problem, icon=":material/link_off:")
    if page:
        st.page_link(page, label=label or "Go there", icon=":material/arrow_forward:")


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$])")


def md_escape(text: object) -> str:
    """Escape Markdown (and HTML) syntax so ``text`` shows literally in ``st.markdown``."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


def measure_warnings(run: object, measure: str) -> None:
    """The warnings ``measure`` recorded in the run's ``summary.json``, one box each
    (:func:`aflite_core.measures.registry.measure_caveats`, which the HTML report, the card
    and the CLI read too)."""
    # imported here: the registry costs the first page 0.12 s, and only run pages draw this
    from aflite_core.measures import measure_caveats

    for warning in measure_caveats(run, measure):
        st.warning(md_escape(warning), icon=":material/warning:")


def show_error(message: str, *, hint: str | None = None) -> None:
    """Show one clear error (what is wrong, where, what to do); never a traceback.

    ``message`` may quote dataset content (column names, values); it is escaped. ``hint``
    is project text and may use Markdown.
    """
    body = md_escape(without_paths(message))
    st.error(body if not hint else f"{body}\n\n{hint}", icon=":material/error:")


@contextlib.contextmanager
def shown_errors(what: str, *, hint: str | None = None) -> Iterator[None]:
    """Draw a part of a page; a bad file behind it (``ValueError``/``OSError``: a damaged
    table, a measure's damaged record) becomes one error box naming ``what``, and the rest
    of the page is drawn."""
    try:
        yield
    except (ValueError, OSError) as exc:
        show_error(f"{what} cannot be shown: {exc}",
                   hint=hint or "The rest of the run reads other files; rerun the audit to "
                                "rewrite this one.")


#: An absolute path of two parts or more (not after a scheme's ``//``, a word or a dot).
_SERVER_PATH = re.compile(r"(?<![\w.:/~-])/(?:[^\s'\"/:,;()]+/)+([^\s'\"/:,;()]*)")


def without_paths(message: str) -> str:
    """``message`` with every absolute path cut to its last part (``/srv/runs/r/scores.parquet``
    -> ``scores.parquet``): a library's message (pyarrow's, the OS's) names the server's
    folders, which a page never shows."""
    return _SERVER_PATH.sub(lambda m: m.group(1) or "…", str(message))


def text_columns(columns: Iterable[str]) -> list[str]:
    """Return the columns that look like free text (by name)."""
    return [c for c in columns if any(h in str(c).lower() for h in TEXT_COLUMN_HINTS)]


def column_config(frame: pd.DataFrame) -> dict[str, object]:
    """Column configuration: wide text columns, formatted scores, plain row ids."""
    config: dict[str, object] = {}
    for col in text_columns(frame.columns):
        config[col] = st.column_config.TextColumn(col, width="large")
    if "predictability" in frame:
        config["predictability"] = st.column_config.NumberColumn(
            "predictability", format="%.3f", help="share of held-out predictions that were right")
    return config


def paged_table(frame: pd.DataFrame, *, page_key: str, page_size: int = 50,
                height: int | None = None, selectable: bool = False,
                header_sort: bool = False, table_key: str | None = None) -> object:
    """Show one page of ``frame`` (server-side paging) and a "rows a-b of n" caption.

    Only the visible page is sent to the browser, so a 550k-row run stays responsive.

    Parameters
    ----------
    frame : DataFrame
        Already filtered and sorted rows.
    page_key : str
        Namespaced key of the pager widget (``state.key(page, name)``).
    page_size : int
        Rows per page.
    height : int or None
        Table height in pixels.
    selectable : bool
        Allow selecting one row (returned as the ``st.dataframe`` selection state).
    header_sort : bool
        With ``selectable``: a click on a column header *selects the column* (returned in
        ``selection.columns``) instead of sorting the visible page in the browser. Streamlit
        disables header sorting when column selection is on; the caller turns the selected
        column into one sort over all rows (see ``ui.explore.view``).
    table_key : str or None
        Key of the table widget (default ``<page_key>:table``); change it to clear the
        table's selection.

    Returns
    -------
    object
        The ``st.dataframe`` return value (selection state when ``selectable``).
    """
    start = pager(len(frame), page_key=page_key, page_size=page_size)
    return show_page(frame.iloc[start:start + page_size], start=start, n=len(frame),
                     height=height, selectable=selectable, header_sort=header_sort,
                     table_key=table_key or state.key(page_key, "table"))


def pager(n: int, *, page_key: str, page_size: int) -> int:
    """The page chooser of a table of ``n`` rows (none for one page); return the position of
    the chosen page's first row."""
    pages = max(1, math.ceil(n / page_size))
    current = st.session_state.get(page_key, 1)
    if not isinstance(current, int) or current > pages:
        st.session_state[page_key] = 1
    if pages == 1:
        return 0
    page = st.pagination(pages, key=page_key, max_visible_pages=7)
    return (int(page) - 1) * page_size


def show_page(part: pd.DataFrame, *, start: int, n: int, table_key: str,
              height: int | None = None, selectable: bool = False,
              header_sort: bool = False) -> object:
    """One page of rows (``part``, rows ``start``... of ``n``) with its "rows a-b of n"
    caption; the ``st.dataframe`` return value (see :func:`paged_table`)."""
    st.caption(f"Rows {start + 1 if n else 0:,}–{start + len(part):,} of {n:,}")
    kwargs: dict[str, object] = {"column_config": column_config(part), "hide_index": True,
                                 "height": height or "auto"}
    if selectable:
        kwargs.update(on_select="rerun",
                      selection_mode=["single-row", "single-column"] if header_sort
                      else "single-row",
                      key=table_key)
    return st.dataframe(part, **kwargs)


def with_row_id(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its index as a leading ``row_id`` column (renamed if the name is taken)."""
    name = "row_id"
    while name in frame.columns:
        name = f"{name}_"
    return frame.reset_index(names=name)


def full_text(row: pd.Series, columns: Iterable[str],
              meta: Iterable[str] = ("status", "predictability", "removal_round")) -> None:
    """Show one row: its ``meta`` values (status, predictability, ...) on one line, then the
    full text of its text columns.

    Everything that comes from the dataset, column names included, is shown as text: a
    column called ``x ![i](http://host/b.png)`` must not make the browser fetch an image.
    """
    facts = []
    for col in meta:
        if col in row.index and not pd.isna(row[col]):  # a kept row has no removal round
            value = row[col]
            facts.append(f"{col} {value:.2f}" if isinstance(value, float) else f"{col} {value}")
    if facts:
        st.text(" · ".join(facts))
    for col in columns:
        if col in row.index:
            st.caption(md_escape(str(col)))
            st.text(str(row[col]))


def metric_row(items: Iterable[tuple]) -> None:
    """A row of ``st.metric``: (label, value, delta) or (label, value, delta, help)."""
    items = list(items)
    for col, item in zip(st.columns(len(items)), items, strict=True):
        label, value, delta, *rest = item
        col.metric(label, value, delta, help=rest[0] if rest else None)


def fmt_seconds(seconds: float | None) -> str:
    """Format a duration for progress text (``"1 min 05 s"``, ``"12 s"``, ``"—"``)."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    seconds = max(0, int(round(seconds)))
    minutes, secs = divmod(seconds, 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"
