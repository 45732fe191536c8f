"""The compiled loops of :mod:`aflite_core.represent._split_products`: ``X.T @ G`` of a CSR
matrix ``X`` for one range of its columns, and where each row's entries of each range start.

Compiled without fastmath (:func:`~aflite_core.numba_cache.exact_jit`): every output is the
sum scipy's ``csc_matvecs`` makes of ``X.T`` (``out[col] += x * G[row]``, rows in order),
the same additions in the same order, so the same bits. A module of its own so that
importing the products does not import numba (0.3 s) until a fit needs them.
"""

from __future__ import annotations

import numpy as np

from aflite_core.numba_cache import exact_jit

__all__ = ["range_offsets", "transposed_range"]


@exact_jit
def _range_offsets(indptr: np.ndarray, indices: np.ndarray, bounds: np.ndarray,
                   out: np.ndarray) -> None:
    n_rows = len(indptr) - 1
    for i in range(n_rows):
        lo = indptr[i]
        hi = indptr[i + 1]
        p = lo
        for r in range(len(bounds)):
            bound = bounds[r]
            while p < hi and indices[p] < bound:
                p += 1
            out[r, i] = p - lo


def range_offsets(indptr: np.ndarray, indices: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """``out[r, i]``: how many of row ``i``'s entries have a column below ``bounds[r]``
    (uint16; the rows' indices sorted, each row under 65,535 entries)."""
    out = np.empty((len(bounds), len(indptr) - 1), dtype=np.uint16)
    _range_offsets(indptr, indices, np.ascontiguousarray(bounds, dtype=indices.dtype), out)
    return out


@exact_jit
def _transposed_range(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
                      offsets: np.ndarray, part: int, G: np.ndarray, out: np.ndarray) -> None:
    n_rows = len(indptr) - 1
    k = G.shape[1]
    last = offsets.shape[0]
    for i in range(n_rows):
        base = indptr[i]
        start = base if part == 0 else base + offsets[part - 1, i]
        stop = indptr[i + 1] if part == last else base + offsets[part, i]
        if k == 3:  # the classes of NLI: the row of G read once
            g0, g1, g2 = G[i, 0], G[i, 1], G[i, 2]
            for p in range(start, stop):
                col = indices[p]
                x = data[p]
                out[col, 0] += x * g0
                out[col, 1] += x * g1
                out[col, 2] += x * g2
        else:
            for p in range(start, stop):
                col = indices[p]
                x = data[p]
                for c in range(k):
                    out[col, c] += x * G[i, c]


def transposed_range(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
                     offsets: np.ndarray, part: int, G: np.ndarray, out: np.ndarray) -> None:
    """Add ``X.T @ G`` for the columns of range ``part`` of ``offsets``
    (:func:`range_offsets`: range ``r`` is the columns from ``bounds[r - 1]`` up to
    ``bounds[r]``) into ``out`` (float64, zero there); other rows of ``out`` untouched, so the
    ranges may run side by side on one ``out``. ``G`` is float64 ``(n_rows, k)``,
    C-contiguous."""
    _transposed_range(indptr, indices, data, offsets, part, G, out)
