"""The columns of a run's rows table, decoded once for the Explore page's filters.

A 1,000,000-row run cannot be filtered by converting its columns on every interaction
(``astype(str)`` of a million labels, a million texts copied into Arrow for each search, a
sort of every row): each of those alone takes 0.1-2 s. :class:`RowIndex` converts each column
the first time a filter asks for it and keeps the result, so an interaction costs one
vectorised pass over compact arrays:

- categorical columns (status, label, any column filtered by value) as integer codes and
  their distinct values, so "label in {a, b}" is ``np.isin`` over int32 codes;
- numeric columns as float64 arrays (missing = NaN);
- text columns as Arrow ``large_string`` arrays, searched with Arrow's RE2 kernels (linear
  time, outside the GIL); the last searches' masks are kept, so paging or sorting does not
  search again;
- row positions in each sort order asked for;
- the row ids as text, for selections that name rows.

One index per run is shared by every session (the dashboard caches it), so it holds no
session state, and its lazy fills are guarded by a lock. Nothing here copies the rows: the
table itself is only read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

#: How many search masks an index keeps (most recent first out when full).
SEARCH_CACHE = 16


class RowIndex:
    """Decoded columns of one rows table (see the module docstring).

    Parameters
    ----------
    table : DataFrame
        The rows table (:func:`aflite_core.runs.views.rows_table`), indexed by ``row_id``.
        It must not change while the index is in use.
    """

    def __init__(self, table: pd.DataFrame) -> None:
        self.table = table
        self.n_rows = len(table)
        self._lock = threading.RLock()
        self._codes: dict[tuple[str, bool], tuple[np.ndarray, list[str]]] = {}
        self._numbers: dict[str, np.ndarray] = {}
        self._texts: dict[str, pa.Array] = {}
        self._orders: dict[tuple[str, bool], np.ndarray] = {}
        self._searches: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._ids: pd.Index | None = None
        self._chunks: dict[str, pa.ChunkedArray | None] = {}
        self._maxima: dict[str, float | None] = {}

    def warm(self, *, codes: Sequence[tuple[str, bool]] = (),
             orders: Sequence[tuple[str, bool]] = (), ids: bool = True) -> None:
        """Decode ahead what the first interactions will ask for: ``codes`` as (column,
        strip), sort ``orders`` as (column, ascending), and the row ids' lookup table (its
        first use costs about 0.4 s per million rows). Columns not in the table are
        skipped. Meant for a background thread while the first page is drawn."""
        for column, strip in codes:
            if column in self.table:
                self.codes(column, strip=strip)
        for column, ascending in orders:
            self.order(column, ascending=ascending)
        if ids and self.n_rows:
            found = self.row_ids()
            found.get_indexer(found[:1])  # builds the hash table

    # ------------------------------------------------------------------ decoded columns
    def codes(self, column: str, *, strip: bool = False) -> tuple[np.ndarray, list[str]]:
        """``column`` as text (``astype(str)``, stripped with ``strip``) factorised: int32
        codes per row and the distinct values, sorted."""
        key = (column, strip)
        with self._lock:
            if key not in self._codes:
                values = self.table[column].astype(str)
                if strip:
                    values = values.str.strip()
                codes, uniques = pd.factorize(values, sort=True)
                self._codes[key] = (codes.astype(np.int32), [str(u) for u in uniques])
            return self._codes[key]

    def categories(self, column: str, *, strip: bool = False) -> list[str]:
        """Distinct values of ``column`` as text, sorted (the choices of a filter widget)."""
        return self.codes(column, strip=strip)[1]

    def isin(self, column: str, accepted: Iterable[object], *, strip: bool = False
             ) -> np.ndarray:
        """Mask of the rows whose ``column`` (as text) is one of ``accepted`` (as text)."""
        codes, values = self.codes(column, strip=strip)
        wanted = {str(v) for v in accepted}
        chosen = np.flatnonzero([v in wanted for v in values]).astype(np.int32)
        return np.isin(codes, chosen)

    def numbers(self, column: str) -> np.ndarray:
        """``column`` as float64 (values that are not numbers, and missing ones, are NaN)."""
        with self._lock:
            if column not in self._numbers:
                values = pd.to_numeric(self.table[column], errors="coerce")
                self._numbers[column] = values.to_numpy(dtype=np.float64, na_value=np.nan)
            return self._numbers[column]

    def text(self, column: str) -> pa.Array | pa.ChunkedArray:
        """``column`` as an Arrow ``large_string`` array (missing values are empty)."""
        with self._lock:
            if column not in self._texts:
                self._texts[column] = _as_arrow_text(self.table[column])
            return self._texts[column]

    def row_ids(self) -> pd.Index:
        """The row ids as text, in table order."""
        with self._lock:
            if self._ids is None:
                self._ids = pd.Index(self.table.index.astype(str))
            return self._ids

    # ------------------------------------------------------------------ filters and order
    def id_mask(self, ids: Sequence[object]) -> np.ndarray:
        """Mask of the rows whose id (as text) is in ``ids``; unknown ids are ignored."""
        mask = np.zeros(self.n_rows, dtype=bool)
        if len(ids):
            found = self.row_ids().get_indexer(pd.Index([str(i) for i in ids]))
            mask[found[found >= 0]] = True
        return mask

    def search(self, columns: Sequence[str], pattern: str, *, regex: bool,
               ignore_case: bool) -> np.ndarray:
        """Mask of the rows where any of ``columns`` matches ``pattern`` (an RE2 regular
        expression with ``regex``, else a plain substring). The pattern must be valid: the
        caller checks it first."""
        key = (tuple(columns), pattern, regex, ignore_case)
        with self._lock:
            if key in self._searches:
                self._searches.move_to_end(key)
                return self._searches[key]
        match = pc.match_substring_regex if regex else pc.match_substring
        mask = np.zeros(self.n_rows, dtype=bool)
        for column in columns:
            hits = match(self.text(column), pattern, ignore_case=ignore_case)
            mask |= hits.to_numpy(zero_copy_only=False).astype(bool)
        mask.setflags(write=False)
        with self._lock:
            self._searches[key] = mask
            while len(self._searches) > SEARCH_CACHE:
                self._searches.popitem(last=False)
        return mask

    def order(self, column: str | None, *, ascending: bool) -> np.ndarray:
        """Row positions sorted by ``column`` (stable, missing values last; ``row_id`` sorts
        by the index; ``None`` or an unknown column keeps table order)."""
        table = self.table
        if not column or (column not in table.columns and column != "row_id"):
            return np.arange(self.n_rows)
        key = (column, ascending)
        with self._lock:
            if key not in self._orders:
                positions = pd.Series(np.arange(self.n_rows), index=table.index)
                if column == "row_id":
                    order = positions.sort_index(ascending=ascending, kind="stable")
                    order = order.to_numpy()
                else:
                    keyed = table[[column]].assign(_pos=positions.to_numpy())
                    order = keyed.sort_values(column, ascending=ascending, kind="stable",
                                              na_position="last")["_pos"].to_numpy()
                order.setflags(write=False)
                self._orders[key] = order
            return self._orders[key]

    def max_number(self, column: str) -> float | None:
        """Largest finite value of ``column`` (None when it has none or is absent)."""
        if column not in self.table:
            return None
        with self._lock:
            if column not in self._maxima:
                values = self.numbers(column)
                finite = values[np.isfinite(values)]
                self._maxima[column] = float(finite.max()) if len(finite) else None
            return self._maxima[column]

    def page(self, positions: np.ndarray, start: int, stop: int,
             columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The rows at ``positions[start:stop]`` (one page of a filtered, sorted view).

        Arrow-backed columns of several chunks are taken chunk by chunk: pandas' ``iloc``
        hands the whole chunked array to Arrow's ``take``, which costs 10 ms per text column
        of a 1M-row run whatever the page's size (0.2 ms this way)."""
        rows = np.asarray(positions[start:stop], dtype=np.int64)
        names = list(self.table.columns if columns is None else columns)
        out = {}
        for name in names:
            series = self.table[name]
            chunked = self._chunked(name, series)
            out[name] = (series.iloc[rows] if chunked is None else pd.Series(
                series.dtype.__from_arrow__(_take_chunked(chunked, rows)), name=name,
                index=series.index[rows], copy=False))
        return pd.DataFrame(out, index=self.table.index[rows], columns=names)

    def _chunked(self, name: str, series: pd.Series) -> pa.ChunkedArray | None:
        """``series`` as its Arrow chunked array (no copy) when it has several chunks and
        its dtype reads Arrow back; None otherwise (plain ``iloc`` then)."""
        array = series.array
        if not (hasattr(array, "__arrow_array__")
                and hasattr(series.dtype, "__from_arrow__")):
            return None
        with self._lock:
            if name not in self._chunks:
                try:
                    arrow = array.__arrow_array__()
                except (TypeError, pa.ArrowException):
                    arrow = None
                self._chunks[name] = (arrow if isinstance(arrow, pa.ChunkedArray)
                                      and arrow.num_chunks > 1 else None)
            return self._chunks[name]


def _take_chunked(values: pa.ChunkedArray, rows: np.ndarray) -> pa.Array:
    """``values.take(rows)``, one chunk at a time (rows in any order)."""
    if not len(rows):
        return pa.array([], type=values.type)
    bounds = np.cumsum([0] + [len(chunk) for chunk in values.chunks])
    if rows.min() < 0 or rows.max() >= bounds[-1]:
        raise IndexError(f"positions out of range for {bounds[-1]} rows")
    which = np.searchsorted(bounds, rows, side="right") - 1
    order = np.argsort(which, kind="stable")
    parts, starts = [], np.searchsorted(which[order], np.arange(len(values.chunks) + 1))
    for k in range(len(values.chunks)):
        picked = order[starts[k]:starts[k + 1]]
        if len(picked):
            parts.append(values.chunk(k).take(pa.array(rows[picked] - bounds[k])))
    # back to the order asked for
    return pa.concat_arrays(parts).take(pa.array(np.argsort(order, kind="stable")))


def _as_arrow_text(values: pd.Series) -> pa.Array | pa.ChunkedArray:
    """A text column as Arrow ``large_string``, missing values empty. pandas' Arrow-backed
    strings (the default ``str`` dtype of pandas 3 with pyarrow) are taken without a copy;
    anything else is converted value by value (0.4-0.5 s per million rows)."""
    if isinstance(values.dtype, pd.StringDtype) and hasattr(values.array, "__arrow_array__"):
        try:
            arrow = pa.array(values.array)
            if pa.types.is_string(arrow.type) or pa.types.is_large_string(arrow.type):
                return pc.fill_null(arrow.cast(pa.large_string()), "")
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            pass
    text = values.astype("string").fillna("")
    return pa.array(text.to_numpy(dtype=object), type=pa.large_string())
