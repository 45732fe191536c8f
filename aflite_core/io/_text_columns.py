"""Whole-column questions the loader asks of text and label columns, without Python strings.

A CSV or TSV column arrives as pandas' ``str`` dtype stored in Arrow
(``aflite_core.io._delimited``). Asking "which rows are blank", "how long is each text", "which
rows hold the same text" through ``tolist()`` would build one Python string per cell (about
50 bytes of overhead each: 10.5 million rows x 3 columns took more memory than the file); the
functions here answer with Arrow compute and integer codes instead, and fall back to Python
for other dtypes (JSON, Parquet and DataFrame columns of mixed types). Missing values count as
``""``, as in :meth:`aflite_core.io.datasets.AuditDataset.hypotheses`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from aflite_core._validation import available_cores

#: Exactly the characters for which Python's ``str.isspace`` is true, as an RE2 class.
PY_SPACE = (r"[\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}"
            r"\x{2029}\x{202f}\x{205f}\x{3000}]")
#: Rows normalised and hashed at a time (their Python strings are freed after each).
_HASH_ROWS = 65_536
#: The hash :func:`text_hashes` gives a missing value kept apart from ``""``.
MISSING_HASH = np.uint64(0)


def arrow_text(series: pd.Series) -> pa.ChunkedArray | None:
    """The Arrow data behind a ``str`` column, without a copy; None for other dtypes."""
    dtype = series.dtype
    if not (isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow"):
        return None
    data = getattr(series.array, "_pa_array", None)
    if isinstance(data, pa.ChunkedArray):
        return data
    return pa.chunked_array([pa.array(series.array)])


def as_text(value: Any) -> str:
    """A cell as text: missing values (None, NaN, NA, NaT) are ``""``."""
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and value != value) or value is pd.NA \
            or value is pd.NaT:
        return ""
    return str(value)


def texts(series: pd.Series) -> list[str]:
    """Every cell as a Python ``str`` (missing: ``""``). Costs one object per row."""
    if pd.api.types.infer_dtype(series, skipna=False) == "string" and not series.hasnans:
        return series.tolist()  # all str, no missing (a str dtype says "string" with NaN too)
    return [as_text(v) for v in series.tolist()]


class RowTexts(Sequence):
    """Some rows of a text column as a sequence of ``str`` (missing values ``""``, as
    :func:`texts`), made :data:`ROW_TEXTS_CHUNK` rows at a time: iterating it, or taking
    :meth:`chunks`, never builds a list of every row's text.

    Parameters
    ----------
    series : pandas.Series or ColumnOnDisk
        The whole column: in memory, or kept in a file
        (:class:`~aflite_core.io._texts_on_disk.ColumnOnDisk`, read a row group at a time).
    positions : array of int, optional
        The rows, as positions in ``series``, in the order the sequence gives them; None:
        every row of ``series`` in order (no array of positions: 8 bytes a row).
    """

    def __init__(self, series: Any, positions: np.ndarray | None = None) -> None:
        self._series = series
        self._positions = None if positions is None else np.asarray(positions, dtype=np.int64)
        self._n = len(series) if positions is None else len(self._positions)

    def __len__(self) -> int:
        return self._n

    def _at(self, index: Any) -> np.ndarray:
        """Positions in the series of ``index`` (a slice or an int array of this sequence)."""
        if self._positions is not None:
            return self._positions[index]
        if isinstance(index, slice):
            return np.arange(*index.indices(self._n), dtype=np.int64)
        index = np.asarray(index, dtype=np.int64)
        if index.size and (index.min() < -self._n or index.max() >= self._n):
            raise IndexError(f"rows: expected positions below {self._n}, got "
                             f"[{index.min()}, {index.max()}]")
        return np.where(index < 0, index + self._n, index)

    def _texts_at(self, positions: np.ndarray) -> list[str]:
        if isinstance(self._series, pd.Series):
            return texts(self._series.iloc[positions])
        return self._series.texts_at(positions)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self._texts_at(self._at(index))
        if isinstance(self._series, pd.Series):
            return as_text(self._series.iloc[int(self._at([int(index)])[0])])
        return self._texts_at(self._at([int(index)]))[0]

    def take(self, rows: np.ndarray) -> list[str]:
        """The texts of ``rows`` (positions in this sequence), in that order."""
        return self._texts_at(self._at(np.asarray(rows, dtype=np.int64)))

    def chunks(self, rows: int = 0) -> Iterator[list[str]]:
        """The texts in order, ``rows`` (default :data:`ROW_TEXTS_CHUNK`) at a time."""
        rows = int(rows) or ROW_TEXTS_CHUNK
        for start in range(0, len(self), rows):
            yield self[start:start + rows]

    def __iter__(self) -> Iterator[str]:
        for chunk in self.chunks():
            yield from chunk


def row_positions(mask: np.ndarray | None) -> np.ndarray | None:
    """:class:`RowTexts`' positions of the rows ``mask`` keeps: None when it keeps every row
    (or is None), so that no array of every row's position is made (8 bytes a row)."""
    if mask is None:
        return None
    mask = np.asarray(mask, dtype=bool)
    return None if mask.all() else np.flatnonzero(mask)


#: Rows :class:`RowTexts` turns into Python strings at a time.
ROW_TEXTS_CHUNK = 65_536


def blank_mask(series: pd.Series) -> np.ndarray:
    """True where a cell is missing, empty or whitespace only (``not text.strip()``)."""
    data = arrow_text(series)
    if data is None:
        return np.fromiter((not t.strip() for t in texts(series)), dtype=bool,
                           count=len(series))
    blank = pc.fill_null(pc.match_substring_regex(data, f"^{PY_SPACE}*$"), True)
    return blank.to_numpy()


def text_lengths(series: pd.Series) -> np.ndarray:
    """Characters (code points) of each cell, 0 for a missing one."""
    data = arrow_text(series)
    if data is None:
        return np.fromiter(map(len, texts(series)), dtype=np.int64, count=len(series))
    return pc.fill_null(pc.utf8_length(data), 0).to_numpy().astype(np.int64, copy=False)


def text_hashes(series: pd.Series, hasher: Callable[[Any], np.ndarray] | None = None, *,
                missing_apart: bool = False) -> np.ndarray:
    """A 64-bit hash (pandas' SipHash) of every row's text, computed :data:`_HASH_ROWS`
    rows at a time; ``hasher`` maps each block (Arrow, no missing value) to its hashes
    (default :func:`block_hashes`; blocks side by side on the cores).

    A missing value hashes as ``""``, or, with ``missing_apart``, as :data:`MISSING_HASH`
    (equal to other missing values only). Equal texts get equal hashes; two different texts
    share one with probability 2**-64 a pair (for 10 million distinct texts, about 3 in a
    million that any two do). Faster than a hash table of the texts, and 8 bytes a row
    instead of holding every distinct text (Arrow's dictionary encoding: 180 bytes a row for
    distinct 60-character texts).
    """
    data = arrow_text(series)
    if data is None:
        data = pa.chunked_array([pa.array(texts(series), type=pa.large_string())])
    out = np.empty(len(data), dtype=np.uint64)
    compiled = len(data) >= KERNEL_MIN_ROWS
    # Arrow's kernels and the compiled ones run off the GIL; pandas' hash does not
    side_by_side = compiled or hasher is not None
    hasher = hasher or (lambda block: block_hashes(block, compiled=compiled))

    def hash_block(start: int, size: int) -> None:
        block = pc.fill_null(data.slice(start, size), "")
        out[start:start + len(block)] = hasher(block)

    blocks = list(byte_blocks(data, _HASH_ROWS))
    workers = min(available_cores(), len(blocks)) if side_by_side else 1
    if workers <= 1:
        for start, size in blocks:
            hash_block(start, size)
    else:  # a block per thread at a time: what is held stays `workers` blocks
        with ThreadPoolExecutor(workers, thread_name_prefix="text-hashes") as pool:
            for done in [pool.submit(hash_block, start, size) for start, size in blocks]:
                done.result()
    if missing_apart:
        out[missing_mask(series)] = MISSING_HASH
    return out


#: Columns of at least this many rows are hashed by compiled code
#: (:mod:`aflite_core.io._load_kernels`, the same hashes): loading numba costs about
#: 0.3 s once a process, pandas' way about 0.27 s per million texts and Arrow's
#: normalisation 0.6 s more.
KERNEL_MIN_ROWS = 50_000


def block_hashes(block: Any, *, compiled: bool) -> np.ndarray:
    """``pandas.util.hash_array`` of an Arrow text array without missing values, from its
    buffers when ``compiled`` (:func:`~aflite_core.io._load_kernels.arrow_hashes`),
    else through one Python string a row."""
    if compiled:
        from aflite_core.io._load_kernels import arrow_hashes  # lazy: numba
        return arrow_hashes(block)
    return pd.util.hash_array(block.to_numpy(zero_copy_only=False), categorize=False)


#: Characters a block of texts made Python strings may hold (:func:`byte_blocks`).
BLOCK_BYTES = 32 << 20


def byte_blocks(data: Any, max_rows: int, max_bytes: int = BLOCK_BYTES
                ) -> Iterator[tuple[int, int]]:
    """``(start, rows)`` blocks over an Arrow text array: at most ``max_rows`` rows and,
    past its first row, at most ``max_bytes`` bytes of text each, so what a block becomes
    as Python strings is bounded whatever the cells' sizes (16 cells of 60 MB were once one
    block of 960 MB). A block of ``max_rows`` rows within ``max_bytes`` is not looked into."""
    n = len(data)
    for first in range(0, n, max_rows):
        rows = min(max_rows, n - first)
        block = data.slice(first, rows)
        if block.nbytes <= max_bytes:
            yield first, rows
            continue
        lengths = pc.fill_null(pc.binary_length(block), 0).to_numpy()
        ends = np.cumsum(lengths, dtype=np.int64)
        start = 0
        while start < rows:
            before = ends[start - 1] if start else 0
            stop = int(np.searchsorted(ends, before + max_bytes, side="right"))
            stop = max(start + 1, min(stop, rows))
            yield first + start, stop - start
            start = stop


def missing_mask(series: pd.Series) -> np.ndarray:
    """True where a cell is missing (None, NaN, NA)."""
    return series.isna().to_numpy()


def _sorted(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(order, starts)``: the permutation sorting ``values``, and True where a run of
    equal sorted values starts."""
    order = np.argsort(values, kind="stable")
    ranked = values[order]
    starts = np.empty(len(values), dtype=bool)
    starts[:1] = True
    np.not_equal(ranked[1:], ranked[:-1], out=starts[1:])
    return order, starts


def _codes_and_counts(values: np.ndarray, *, first_rows: bool = False
                      ) -> tuple[np.ndarray, ...]:
    """``(codes, counts)``: an int64 code per row, equal for equal values, and how many rows
    hold each code; with ``first_rows``, also each code's first row. From
    :data:`KERNEL_MIN_ROWS` rows on, a hash table in compiled code
    (:func:`~aflite_core.io._load_kernels.first_codes`: codes in order of first appearance;
    at 1M rows about 30 ms, where the stable sort took 80), else a sort (codes in sorted
    order of the values). What the codes mean is only which rows are equal."""
    if len(values) >= KERNEL_MIN_ROWS and values.dtype.kind in "iu" and values.itemsize == 8:
        from aflite_core.io._load_kernels import first_codes  # lazy: numba
        return first_codes(values, first_rows=first_rows)
    order, starts = _sorted(values)
    codes = np.empty(len(values), dtype=np.int64)
    codes[order] = np.cumsum(starts) - 1
    counts = np.diff(np.append(np.flatnonzero(starts), len(values)))
    # the sort is stable: a run's first sorted row is its first row
    return (codes, counts, order[starts]) if first_rows else (codes, counts)


def equal_codes(values: np.ndarray) -> np.ndarray:
    """An int64 per row, equal for equal values and different for different ones (their
    numbering says nothing more; see :func:`_codes_and_counts`)."""
    return _codes_and_counts(values)[0]


def count_distinct(values: np.ndarray) -> int:
    """How many distinct values ``values`` holds."""
    if not len(values):
        return 0
    ranked = np.sort(values)
    return int(np.count_nonzero(ranked[1:] != ranked[:-1])) + 1


def distinct_and_conflicting(groups: np.ndarray, labels: np.ndarray) -> tuple[int, int]:
    """``(count_distinct(groups), conflicting)`` in one pass over ``groups``:
    ``conflicting`` is how many distinct values of ``groups`` occur with more than one label.

    Examples
    --------
    >>> distinct_and_conflicting(np.array([4, 9, 4, 2]), np.array([0, 1, 1, 1]))
    (3, 1)
    """
    if not len(groups):
        return 0, 0
    codes, counts, first = _codes_and_counts(groups, first_rows=True)
    reference = labels[first]  # the label of each code's first row, gathered below in the
    if reference.dtype.kind in "iu" and len(reference):  # narrowest type (1 byte a row)
        reference = reference.astype(np.promote_types(np.min_scalar_type(reference.min()),
                                                      np.min_scalar_type(reference.max())))
    differs = labels != reference[codes]  # a label other than that row's
    return len(counts), int(np.count_nonzero(np.bincount(codes[differs],
                                                         minlength=len(counts))))


#: Arrow's trimming of whitespace at each end :func:`normalised_hashes` may trim.
_TRIMMERS: dict[str, Callable[[Any], Any]] = {"both": pc.utf8_trim_whitespace,
                                              "left": pc.utf8_ltrim_whitespace,
                                              "right": pc.utf8_rtrim_whitespace}


def _normalise(block: Any, trim: str) -> Any:
    """Arrow's normalisation of the texts of ``block`` (see :func:`normalised_hashes`)."""
    block = pc.utf8_lower(block)
    block = pc.replace_substring_regex(block, pattern=r"[\pP\pS]+", replacement=" ")
    block = pc.replace_substring_regex(block, pattern=r"\s\s+|[^\S ]", replacement=" ")
    return _TRIMMERS[trim](block)


def normalised_hashes(series: pd.Series, trim: str = "both") -> np.ndarray:
    """:func:`text_hashes` of each text lower-cased, punctuation and symbols made spaces,
    whitespace runs collapsed and trimmed (``trim``: "both", "left" or "right" end).

    Arrow's Unicode kernels normalise; on a column of :data:`KERNEL_MIN_ROWS` rows or more,
    compiled code normalises and hashes the texts of plain ASCII in one pass
    (:func:`~aflite_core.io._load_kernels.normalised_ascii_hashes`, the same hashes),
    and Arrow the others."""
    if trim not in _TRIMMERS:
        raise KeyError(trim)
    compiled = len(series) >= KERNEL_MIN_ROWS

    def hasher(block: Any) -> np.ndarray:
        if not compiled:
            return block_hashes(_normalise(block, trim), compiled=False)
        from aflite_core.io._load_kernels import normalised_ascii_hashes  # lazy: numba
        hashes, slow = normalised_ascii_hashes(block, trim)
        if slow.any():
            rows = np.flatnonzero(slow)
            hashes[rows] = block_hashes(_normalise(block.take(rows), trim), compiled=True)
        return hashes

    return text_hashes(series, hasher)


#: What :func:`facts_in_one_pass` makes, with their dtypes.
ONE_PASS_FACTS = {"blank": np.bool_, "lengths": np.int64, "hashes": np.uint64,
                  "normalised": np.uint64}


def facts_in_one_pass(series: pd.Series, trim: str = "both") -> dict[str, np.ndarray] | None:
    """:func:`blank_mask`, :func:`text_lengths`, :func:`text_hashes` and
    :func:`normalised_hashes` (``trim``) of ``series``, the same arrays, from one compiled
    visit to each text (:func:`~aflite_core.io._load_kernels.text_facts`; blocks of rows side
    by side on the cores); Arrow's Unicode kernels only for the rows it leaves to them.
    None for a column that is not Arrow text or has fewer than :data:`KERNEL_MIN_ROWS` rows:
    ask each function then.

    Asked one by one, the blank rows and the lengths went through Arrow on one thread over
    the whole column: at 1M SNLI-like rows the premises' and hypotheses' four facts took
    0.53-0.61 s, here 0.41-0.50 s, about the same CPU time (2026-12-01).
    """
    data = arrow_text(series)
    if data is None or len(series) < KERNEL_MIN_ROWS:
        return None
    if trim not in _TRIMMERS:
        raise ValueError(f"trim: expected one of {sorted(_TRIMMERS)}, got {trim!r}")
    n = len(data)
    out = {name: np.empty(n, dtype=dtype) for name, dtype in ONE_PASS_FACTS.items()}

    def facts_of_block(start: int, size: int) -> None:
        from aflite_core.io._load_kernels import text_facts  # lazy: numba

        block = pc.fill_null(data.slice(start, size), "")  # a missing cell is ""'s facts
        hashes, normalised, lengths, blank, slow = text_facts(block, trim)
        if slow.any():  # a byte the pass leaves to Arrow's Unicode kernels
            rows = np.flatnonzero(slow)
            odd = block.take(rows)
            normalised[rows] = block_hashes(_normalise(odd, trim), compiled=True)
            blank[rows] = pc.match_substring_regex(odd, f"^{PY_SPACE}*$").to_numpy()
        part = slice(start, start + size)
        for name, values in (("blank", blank), ("lengths", lengths), ("hashes", hashes),
                             ("normalised", normalised)):
            out[name][part] = values

    blocks = list(byte_blocks(data, _HASH_ROWS))
    workers = min(available_cores(), len(blocks))
    if workers <= 1:
        for start, size in blocks:
            facts_of_block(start, size)
    else:  # a block per thread at a time (Arrow and the compiled pass run off the GIL)
        with ThreadPoolExecutor(workers, thread_name_prefix="text-facts") as pool:
            for done in [pool.submit(facts_of_block, start, size) for start, size in blocks]:
                done.result()
    return out


def pair_hashes(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """One hash per row for the pair (first, second) of hashes (order matters)."""
    return first * np.uint64(0x9E3779B97F4A7C15) ^ second


def label_text(value: Any) -> str:
    """A label cell as the audit compares it: trimmed text, ``1.0`` as ``"1"``."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (float, np.floating)) and np.isfinite(value) \
            and float(value).is_integer():
        return str(int(value))
    return as_text(value).strip()


def mixed_types(series: pd.Series) -> bool:
    """Whether an object column mixes value types (booleans, numbers, text)."""
    return pd.api.types.infer_dtype(series, skipna=True) in ("mixed", "mixed-integer")


def str_codes(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(np.asarray(values, dtype=object).astype(str), return_inverse=True)``
    reversed, ``(codes, classes)``, without a fixed-width copy of every row's text (4 bytes a
    character a row) nor a Python str per row: the distinct values are converted, not the rows.

    ``classes[codes]`` is that str array; ``classes.astype(object)[codes]`` holds one str per
    class (8 bytes a row).

    Examples
    --------
    >>> codes, classes = str_codes(np.array(["b", "a", "b", 1], dtype=object))
    >>> codes.tolist(), classes.tolist()
    ([2, 1, 2, 0], ['1', 'a', 'b'])
    """
    if isinstance(values, np.ndarray) and values.dtype.kind == "U":
        classes, codes = np.unique(values, return_inverse=True)
        return codes.ravel().astype(np.intp, copy=False), classes
    if not isinstance(values, (pd.Series, pd.api.extensions.ExtensionArray)):
        values = np.asarray(values, dtype=object)
    first, uniques = pd.factorize(values, use_na_sentinel=True)
    names = [str(u) for u in np.asarray(uniques, dtype=object)]
    missing = np.flatnonzero(first < 0)
    if missing.size:  # None, NaN, pd.NA: each its own text, as astype(str) writes it
        texts_of = np.asarray([str(v) for v in np.asarray(values, dtype=object)[missing]])
        extra, at = np.unique(texts_of, return_inverse=True)
        first[missing] = len(names) + at.ravel()
        names += extra.tolist()
    classes, rank = np.unique(np.asarray(names, dtype=str), return_inverse=True)
    return rank.ravel()[first].astype(np.intp, copy=False), classes


def compact_categorical(codes: np.ndarray, names: Any) -> pd.Categorical:
    """``pd.Categorical(np.asarray(names, dtype=object)[codes])`` made from the codes: the
    categories are the names present, sorted, and no object per row nor hash table of the rows
    is made (1 byte a row for a few names).

    Parameters
    ----------
    codes : array of int, each in ``[0, len(names))``
    names : sequence of distinct str

    Examples
    --------
    >>> compact_categorical(np.array([2, 0, 2]), ["b", "x", "a"]).tolist()
    ['a', 'b', 'a']
    """
    names = np.asarray(names, dtype=object)
    codes = np.asarray(codes)
    if codes.size and (codes.min() < 0 or codes.max() >= len(names)):
        raise ValueError(f"codes: expected values in [0, {len(names)}), got "
                         f"[{codes.min()}, {codes.max()}]")
    present = np.flatnonzero(np.bincount(codes.ravel(), minlength=len(names)) > 0)
    order = present[np.argsort(names[present].astype(str), kind="stable")]
    recode = np.full(len(names), -1, dtype=np.min_scalar_type(-max(len(order), 1)))
    recode[order] = np.arange(len(order))
    return pd.Categorical.from_codes(recode[codes], categories=names[order].tolist())


def shared_strings(values: Any) -> np.ndarray:
    """``np.asarray(values, dtype=object).astype(str)`` as an object array holding one str per
    distinct value (:func:`str_codes`), not one per row."""
    codes, classes = str_codes(values)
    return classes.astype(object)[codes]


def string_array(values: Any) -> pd.api.extensions.ExtensionArray:
    """``pd.array(np.asarray(values, dtype=object).astype(str), dtype="string")`` made from
    :func:`shared_strings`: that made a str per row, twice (0.29 GB each at 5M rows)."""
    return pd.array(shared_strings(values), dtype="string")


def label_objects(series: pd.Series) -> np.ndarray:
    """Every row's label as :func:`label_factors` makes it, as an object array holding one str
    per label: 8 bytes a row, no str per row."""
    ids, names = label_factors(series)
    return np.asarray(names, dtype=object)[ids]


def label_factors(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, names)``: ``names[ids]`` is every row's label as :func:`label_text` makes it
    (a str array); ``ids`` costs 8 bytes a row, the text of each label is held once."""
    data = arrow_text(series)
    if data is not None:  # Arrow's dictionary: a label column has few distinct values
        encoded = pc.dictionary_encode(data)
        if encoded.num_chunks:
            codes = pc.fill_null(pa.chunked_array([c.indices for c in encoded.chunks]), -1)
            codes = codes.to_numpy().astype(np.int64, copy=False)
            uniques = encoded.chunks[-1].dictionary.to_pylist()
            names = [label_text(v) for v in uniques] + [""]
            canon, distinct = pd.factorize(pd.Series(names, dtype=object))
            return canon[codes], np.asarray(list(distinct), dtype=str)
    if series.dtype == object and mixed_types(series):
        # pd.factorize would merge True with 1 and 1.0 (Python equality): convert each value
        values = [label_text(v) for v in series.tolist()]
    else:
        try:  # labels have few distinct values: convert those, then broadcast
            codes, uniques = pd.factorize(series, use_na_sentinel=True)
        except TypeError:  # unhashable values
            values = [label_text(v) for v in series.tolist()]
        else:
            names = [label_text(v) for v in uniques.tolist()] + [""]
            canon, distinct = pd.factorize(pd.Series(names, dtype=object))
            return canon[codes], np.asarray(list(distinct) or [""], dtype=str)
    ids, distinct = pd.factorize(pd.Series(values, dtype=object))
    return ids, np.asarray(list(distinct) or [""], dtype=str)
