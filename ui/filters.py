"""Row filters of the Explore page: vectorised passes over the run's decoded columns.

Pure functions (no Streamlit) so that they are cheap to rerun on every widget change and easy
to test. The table is the one :func:`ui.cache.rows_table` returns: ``status``,
``predictability``, ``removal_round`` and every original column, indexed by ``row_id``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from aflite_core.runs import RowIndex


class SearchError(ValueError):
    """The search pattern is not a valid (RE2) regular expression."""


@dataclass
class RowFilter:
    """What the user asked for on the Explore page (empty fields do not filter)."""

    statuses: Sequence[str] = ()
    labels: Sequence[str] = ()
    label_column: str | None = None
    predictability: tuple[float, float] | None = None
    rounds: tuple[int, int] | None = None
    search: str = ""
    regex: bool = False
    case: bool = False
    whole_word: bool = False
    search_columns: Sequence[str] = ()
    row_ids: Sequence[str] | None = None  # as strings (from the map's customdata)
    extra_mask: np.ndarray | None = field(default=None, repr=False)
    #: Numeric column -> (low, high): finite values within, both ends included.
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: Column -> accepted values (as strings); an empty list does not filter.
    values: dict[str, Sequence[str]] = field(default_factory=dict)


def _search_mask(index: RowIndex, flt: RowFilter) -> np.ndarray:
    """Rows whose searched columns contain ``flt.search``.

    Matching runs in Arrow's RE2 engine: linear time in the text whatever the pattern (no
    catastrophic backtracking, so ``^(\\w+\\s?)+$`` cannot freeze the server) and outside
    the GIL, so other sessions keep being served. RE2 has no backreferences or lookaround; a
    pattern using them is refused with a :class:`SearchError`. The texts are converted to
    Arrow once per run and the last masks are kept (:meth:`RowIndex.search`).
    """
    table = index.table
    columns = [c for c in flt.search_columns if c in table.columns] or [
        c for c in table.columns if table[c].dtype == object or pd.api.types.is_string_dtype(
            table[c])
    ]
    pattern = flt.search
    if flt.regex:
        try:
            pc.match_substring_regex(pa.array([""]), pattern)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SearchError(
                f"search: {pattern!r} is not a valid regular expression for this search "
                f"(RE2 syntax: no backreferences or lookaround): {exc}") from exc
    if flt.whole_word:
        pattern = (r"\b" + (f"(?:{pattern})" if flt.regex else re.escape(pattern)) + r"\b")
    return index.search(columns, pattern, regex=flt.regex or flt.whole_word,
                        ignore_case=not flt.case)


def apply(table: pd.DataFrame, flt: RowFilter, index: RowIndex | None = None
          ) -> pd.DataFrame:
    """Rows of ``table`` that pass every filter of ``flt``, in table order.

    Raises
    ------
    SearchError
        If ``flt.regex`` is set and ``flt.search`` does not compile.
    """
    return table[mask_of(table, flt, index)]


def sorted_positions(order: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Positions of the rows passing ``mask``, in the precomputed sort ``order``."""
    return order[mask[order]]


def sort_order(table: pd.DataFrame, column: str | None, *, ascending: bool,
               index: RowIndex | None = None) -> np.ndarray:
    """Positions of ``table``'s rows in :func:`sort_rows` order (kept by ``index``)."""
    return (index or RowIndex(table)).order(column, ascending=ascending)


def mask_of(table: pd.DataFrame, flt: RowFilter, index: RowIndex | None = None
            ) -> np.ndarray:
    """Boolean mask of the rows of ``table`` that pass every filter of ``flt``.

    ``index`` (the run's :class:`~aflite_core.runs.RowIndex` of ``table``, shared
    by the dashboard's sessions) keeps the decoded columns between calls; without it they
    are decoded for this call only. The result is the same.

    Raises
    ------
    SearchError
        If ``flt.regex`` is set and ``flt.search`` does not compile.
    """
    index = index if index is not None else RowIndex(table)
    mask = np.ones(len(table), dtype=bool)
    if flt.statuses:
        mask &= index.isin("status", flt.statuses)
    if flt.labels and flt.label_column and flt.label_column in table:
        mask &= index.isin(flt.label_column, flt.labels, strip=True)
    if flt.predictability is not None:
        lo, hi = flt.predictability
        if (lo, hi) != (0.0, 1.0):
            pred = index.numbers("predictability")
            mask &= np.isfinite(pred) & (pred >= lo) & (pred <= hi)
    if flt.rounds is not None:
        lo, hi = flt.rounds
        rounds = index.numbers("removal_round")  # kept rows have no round (NaN: never in range)
        mask &= (rounds >= lo) & (rounds <= hi)
    if flt.row_ids is not None:
        mask &= index.id_mask(flt.row_ids)
    if flt.extra_mask is not None:
        mask &= np.asarray(flt.extra_mask, dtype=bool)
    for column, (lo, hi) in flt.ranges.items():
        if column in table:
            values = index.numbers(column)
            mask &= np.isfinite(values) & (values >= lo) & (values <= hi)
    for column, accepted in flt.values.items():
        if accepted and column in table:
            mask &= index.isin(column, accepted)
    if flt.search:
        mask &= _search_mask(index, flt)
    return mask


def sort_rows(table: pd.DataFrame, column: str | None, *, ascending: bool) -> pd.DataFrame:
    """Sort by one column (stable; missing values last); ``None`` keeps input order."""
    if not column or column not in table.columns and column != "row_id":
        return table
    if column == "row_id":
        return table.sort_index(ascending=ascending, kind="stable")
    return table.sort_values(column, ascending=ascending, kind="stable", na_position="last")


def to_dict(flt: RowFilter) -> dict:
    """The filter as plain JSON values (for a saved subset or a link).

    ``extra_mask`` (a cue or slice mask computed from the run) is not a value and is left
    out; the caller records the choice that made it instead.
    """
    out: dict = {}
    for name, value in (("statuses", list(flt.statuses)), ("labels", list(flt.labels)),
                        ("label_column", flt.label_column), ("search", flt.search),
                        ("search_columns", list(flt.search_columns))):
        if value:
            out[name] = [str(v) for v in value] if isinstance(value, list) else str(value)
    for name in ("regex", "case", "whole_word"):
        if getattr(flt, name):
            out[name] = True
    if flt.predictability is not None and tuple(flt.predictability) != (0.0, 1.0):
        out["predictability"] = [float(v) for v in flt.predictability]
    if flt.rounds is not None:
        out["rounds"] = [int(v) for v in flt.rounds]
    if flt.row_ids is not None:
        out["row_ids"] = [str(v) for v in flt.row_ids]
    if flt.ranges:
        out["ranges"] = {str(c): [float(lo), float(hi)] for c, (lo, hi) in flt.ranges.items()}
    values = {str(c): [str(v) for v in vals] for c, vals in flt.values.items() if vals}
    if values:
        out["values"] = values
    return out


def from_dict(data: dict) -> RowFilter:
    """Inverse of :func:`to_dict` (unknown keys are an error)."""
    known = {"statuses", "labels", "label_column", "search", "search_columns", "regex",
             "case", "whole_word", "predictability", "rounds", "row_ids", "ranges", "values"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"filter: unknown key(s) {unknown}; expected some of {sorted(known)}")
    pred = data.get("predictability")
    rounds = data.get("rounds")
    return RowFilter(
        statuses=list(data.get("statuses", [])), labels=list(data.get("labels", [])),
        label_column=data.get("label_column"), search=str(data.get("search", "")),
        search_columns=list(data.get("search_columns", [])),
        regex=bool(data.get("regex", False)), case=bool(data.get("case", False)),
        whole_word=bool(data.get("whole_word", False)),
        predictability=(float(pred[0]), float(pred[1])) if pred else None,
        rounds=(int(rounds[0]), int(rounds[1])) if rounds else None,
        row_ids=data.get("row_ids"),
        ranges={c: (float(lo), float(hi)) for c, (lo, hi) in data.get("ranges", {}).items()},
        values={c: list(v) for c, v in data.get("values", {}).items()},
    )
