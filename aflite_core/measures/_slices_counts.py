"""Where the slices' counts come from: the questions
:func:`~aflite_core.measures.slices.rank_slices` asks, and the answers of the indicator matrix
of every row.

Ranking slices needs four kinds of counts over the rows, never the rows themselves:

* per cue or cluster column, its rows and the sums of three per-row weights over them (the
  removed flag and two random integers whose sums identify a row set): :meth:`column_sums`;
* for the top cues, how many rows each pair shares, and the weights' sums over them:
  :meth:`cooccurrence`;
* for the slices of the folding window, how many rows each two share: :meth:`window`;
* the rows of the stored slices, one slice at a time: :meth:`SliceWindow.rows`.

:class:`MatrixCounts` answers them from the indicator matrices of all rows (the local path).
:class:`~aflite_core.measures._slices_on_workers.ChunkedCounts` answers the same questions by
map-reduce over row chunks whose features stay on a cluster's workers. Every count is an
integer (in float64 below 2**53: exact in any summation order), so both give the same table
bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple, Protocol

import numpy as np
import scipy.sparse as sp

from aflite_core.measures._slices_features import SliceFeatures

__all__ = ["MatrixCounts", "SliceColumns", "SliceCounts", "SliceSpec", "SliceWindow"]


class SliceColumns(NamedTuple):
    """The names of a source's columns of one kind (``cue`` or ``cluster``)."""

    family: np.ndarray
    value: np.ndarray
    description: np.ndarray


class SliceSpec(NamedTuple):
    """One slice by its columns: ``kind`` (``cue``, ``pair``, ``cluster``), the column of its
    cue or cluster, and for a pair its second cue's column (else -1)."""

    kind: str
    col_a: int
    col_b: int


class SliceWindow(Protocol):
    """The slices of the folding window: their overlaps and, for the stored ones, rows."""

    def overlap(self, i: int, j: int) -> int:
        """Rows slices ``i`` and ``j`` of the window share."""

    def rows(self, positions: Sequence[int]) -> Iterator[np.ndarray]:
        """The rows (sorted positions) of the window's slices at ``positions``, in order."""


class SliceCounts(Protocol):
    """A source of the slices' counts over ``n_rows`` rows (see the module docstring)."""

    n_rows: int

    def columns(self, kind: str) -> SliceColumns | None:
        """The names of the ``cue`` or ``cluster`` columns (None: no clusters)."""

    def column_sums(self, kind: str, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows of each column (float64) and ``weights``' column sums over them
        (``(n_columns, weights.shape[1])``)."""

    def cooccurrence(self, top: np.ndarray, weights: np.ndarray
                     ) -> tuple[np.ndarray, list[np.ndarray]]:
        """``S'S`` and ``S' diag(w_c) S`` for each weight column ``c``, where ``S`` is the
        cue columns ``top`` (float64, ``(len(top), len(top))``)."""

    def window(self, specs: Sequence[SliceSpec]) -> SliceWindow:
        """The window of the given slices."""


class MatrixCounts:
    """The counts of the indicator matrices of every row (cue columns, cluster columns)."""

    def __init__(self, features: SliceFeatures, clusters: SliceFeatures | None = None):
        self.features = features
        self.clusters = clusters
        self.n_rows = int(features.X.shape[0])

    def _of(self, kind: str) -> SliceFeatures | None:
        return self.clusters if kind == "cluster" else self.features

    def columns(self, kind: str) -> SliceColumns | None:
        """See :class:`SliceCounts`."""
        feats = self._of(kind)
        return None if feats is None else SliceColumns(feats.family, feats.value,
                                                       feats.description)

    def column_sums(self, kind: str, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """See :class:`SliceCounts`."""
        Xc = sp.csc_matrix(self._of(kind).X, dtype=np.float64)
        return np.asarray(Xc.sum(axis=0)).ravel(), np.asarray(Xc.T @ weights)

    def cooccurrence(self, top: np.ndarray, weights: np.ndarray
                     ) -> tuple[np.ndarray, list[np.ndarray]]:
        """See :class:`SliceCounts`."""
        S = sp.csc_matrix(self.features.X[:, top], dtype=np.float64)
        co = (S.T @ S).toarray()
        return co, [(S.T @ sp.csc_matrix(S.multiply(weights[:, [c]]))).toarray()
                    for c in range(weights.shape[1])]

    def window(self, specs: Sequence[SliceSpec]) -> RowsWindow:
        """See :class:`SliceCounts`."""
        Xf = _sorted_csc(self.features.X)
        Xk = _sorted_csc(self.clusters.X) if self.clusters is not None else None
        marks = np.zeros(self.n_rows, dtype=bool)
        return RowsWindow([_slice_rows(spec, Xf, Xk, marks) for spec in specs])


class RowsWindow:
    """A window whose slices' rows are all held: overlaps by intersecting them."""

    def __init__(self, rows_of: list[np.ndarray]):
        self.rows_of = rows_of

    def overlap(self, i: int, j: int) -> int:
        """See :class:`SliceWindow`."""
        return len(np.intersect1d(self.rows_of[i], self.rows_of[j], assume_unique=True))

    def rows(self, positions: Sequence[int]) -> Iterator[np.ndarray]:
        """See :class:`SliceWindow`."""
        return (self.rows_of[p] for p in positions)


def _slice_rows(spec: SliceSpec, Xf: sp.csc_matrix, Xk: sp.csc_matrix | None,
                marks: np.ndarray) -> np.ndarray:
    """Rows (sorted positions) of one slice: its cue's or cluster's column, or for a pair
    the rows of its second cue that the first one has (``marks`` is scratch space)."""
    source = Xk if spec.kind == "cluster" else Xf
    rows = _column_rows(source, spec.col_a)
    if spec.col_b >= 0:
        marks[rows] = True
        other = _column_rows(Xf, spec.col_b)
        both = other[marks[other]]
        marks[rows] = False
        rows = both
    return rows


def _sorted_csc(X: sp.spmatrix) -> sp.csc_matrix:
    X = sp.csc_matrix(X)
    if not X.has_sorted_indices:
        X = X.sorted_indices()
    return X


def _column_rows(X: sp.csc_matrix, j: int) -> np.ndarray:
    """Rows (sorted) with a nonzero in column ``j`` of a CSC matrix with sorted indices."""
    start, stop = X.indptr[j], X.indptr[j + 1]
    return X.indices[start:stop][X.data[start:stop] != 0].astype(np.int64)
