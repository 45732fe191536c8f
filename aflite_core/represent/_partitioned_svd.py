"""Φ's ``tfidf_svd`` built over row partitions: the same Φ, bit for bit, without the rows.

:func:`partitioned_tfidf_svd` is ``builders._svd(tfidf_blocks(hypotheses, premises))`` with
the rows split into partitions of :data:`PARTITION_ROWS` (:mod:`~aflite_core.represent._partitions`:
on a Dask cluster each partition's texts, TF-IDF rows and SVD basis rows stay on one worker).
The driver holds the texts it scatters, the ``V x l`` term-side matrices of the randomized SVD
and, at the end, Φ; never the TF-IDF matrix or the ``n x l`` basis.

Why every step gives the local bits (:func:`~aflite_core.represent._svd.truncated_svd`):

* the TF-IDF rows are the local rows, entry order included
  (:mod:`~aflite_core.represent._partitioned_tfidf`);
* ``M D`` is computed row by row (scipy's CSR product): any partition gives the same rows;
* ``Mᵀ Y`` is the one order-dependent sum: locally every term adds every row's contribution in
  row order into one float32 array. Here the partitions pass that array along, in row order,
  each adding its rows' contributions into it with scipy's own kernel (``csc_matvecs``, the one
  ``Mᵀ @ Y`` runs): the same additions in the same order. A chain is serial, so the
  partitions of one worker are consecutive (one hop per worker), and the columns of ``D`` go
  in :data:`COLUMN_GROUPS_PER_WORKER` groups per worker, each its own chain: the groups
  follow one another through the workers like a wavefront, all of them busy;
* ``BᵀB`` is a float64 sum of 16,384-row chunk products in chunk order: partitions are whole
  chunks, and the driver adds the chunks in order;
* ``X = B W`` is row-blocked on one BLAS thread (``tests/represent/test_svd.py`` finds it
  invariant to the blocking), and the moments of M and X (the explained variance) are chunk
  sums added in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse import _sparsetools

from aflite_core import blas_threads
from aflite_core.errors import RepresentationError
from aflite_core.represent._partitioned_rows import PartitionedRows
from aflite_core.represent._partitioned_tfidf import (
    TextPartition,
    build_partition,
    merge_scans,
    scan_partition,
    summary_of,
)
from aflite_core.represent._partitions import LocalPartitions, PartitionLost
from aflite_core.represent._row_products import rows_times
from aflite_core.represent._svd import (
    MOMENT_CHUNK_ROWS,
    X_MOMENT_CHUNK_ROWS,
    column_moments,
    explained_variance_ratio,
    gram64,
    randomized_range_svd,
    row_moments,
    sum_chunk_moments,
)

__all__ = ["PARTITION_ROWS", "partition_bounds", "partitioned_tfidf_svd"]

#: Rows per partition: a whole number of the Gram matrix's 16,384-row chunks (and of the
#: moments' 4,096-row ones). At 1M rows, 16 partitions.
PARTITION_ROWS = 65_536
#: A last partition shorter than this joins the one before (a one-row block would be a
#: matrix-vector product in BLAS, summed in another order).
MIN_LAST_ROWS = 64
#: Column groups of each ``Mᵀ M D`` per worker on a cluster (:meth:`_PartitionProducts.gram`).
COLUMN_GROUPS_PER_WORKER = 2
#: Times the whole build starts again from the texts when a worker holding partitions left.
MAX_RESTARTS = 2


def partition_bounds(n_rows: int, partition_rows: int | None = None) -> list[tuple[int, int]]:
    """``(start, stop)`` of each partition: ``partition_rows`` rows each (a multiple of
    16,384; default :data:`PARTITION_ROWS`), the last one longer rather than shorter than
    :data:`MIN_LAST_ROWS`."""
    if partition_rows is None:
        partition_rows = PARTITION_ROWS
    if partition_rows <= 0 or partition_rows % MOMENT_CHUNK_ROWS:
        raise ValueError(f"partition_rows: expected a positive multiple of "
                         f"{MOMENT_CHUNK_ROWS:,}, got {partition_rows!r}")
    cuts = list(range(0, n_rows, partition_rows)) + [n_rows]
    if len(cuts) > 2 and cuts[-1] - cuts[-2] < MIN_LAST_ROWS:
        del cuts[-2]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


# ------------------------------------------------------------------ steps on a partition


def _gram_step(M: sp.csr_matrix, acc: np.ndarray | None, D: np.ndarray) -> np.ndarray:
    """``acc + M_pᵀ (M_p D)``, added into a copy of ``acc`` row by row in row order."""
    Y = np.ascontiguousarray(M @ D)
    out = (np.zeros((M.shape[1], D.shape[1]), dtype=Y.dtype) if acc is None
           else np.array(acc, copy=True))
    # scipy's CSC x dense kernel (what ``M.T @ Y`` runs): out += Mᵀ Y; Mᵀ of a CSR is the CSC
    # with the same arrays
    indices = M.indices.astype(M.indptr.dtype, copy=False)
    _sparsetools.csc_matvecs(M.shape[1], M.shape[0], Y.shape[1], M.indptr, indices, M.data,
                             Y.ravel(), out.ravel())
    return out


def _basis_rows(M: sp.csr_matrix, Q: np.ndarray) -> np.ndarray:
    return np.asarray(M @ Q)


def _gram_chunks(B: np.ndarray) -> list[np.ndarray]:
    return [gram64(B[lo:lo + MOMENT_CHUNK_ROWS]) for lo in range(0, len(B), MOMENT_CHUNK_ROWS)]


def _times(B: np.ndarray, first_row: int, W: np.ndarray) -> np.ndarray:
    return rows_times(B, W, first_row=first_row)  # the rows' bits however partitioned


def _x_moments(X: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    return [row_moments(X, lo, lo + X_MOMENT_CHUNK_ROWS)
            for lo in range(0, len(X), X_MOMENT_CHUNK_ROWS)]


def _m_moments(M: sp.csr_matrix) -> list[tuple[np.ndarray, np.ndarray]]:
    return [column_moments(M, lo, lo + MOMENT_CHUNK_ROWS)
            for lo in range(0, M.shape[0], MOMENT_CHUNK_ROWS)]


# ------------------------------------------------------------------ the driver's side


class _PartitionProducts:
    """The products :func:`~aflite_core.represent._svd.randomized_range_svd` asks for, over
    the partitions' TF-IDF rows (``handles``)."""

    def __init__(self, runner: Any, handles: list, bounds: list, resident: bool = False
                 ) -> None:
        self.runner, self.handles, self.bounds = runner, handles, bounds
        self.resident = resident
        self._B: list | None = None

    def gram(self, D: np.ndarray) -> np.ndarray:
        # one chain of partial sums per group of D's columns: while a group's sums pass the
        # partitions of one worker, the group before theirs passes the next worker's (a
        # wavefront), so every worker is busy; every entry is the same sum whatever the
        # grouping (scipy's kernels go entry by entry over the columns)
        groups = min(D.shape[1], max(1, COLUMN_GROUPS_PER_WORKER * self.runner.n_workers))
        cuts = np.linspace(0, D.shape[1], groups + 1).astype(np.int64)
        shared = [self.runner.share(np.ascontiguousarray(D[:, lo:hi]))
                  for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)]
        last = [self.runner.chain(_gram_step, self.handles, part) for part in shared]
        out = np.hstack(self.runner.gather(last)) if groups > 1 else self.runner.gather(last)[0]
        self.runner.release([*last, *shared])
        return out

    def basis_gram(self, Q: np.ndarray) -> np.ndarray:
        shared = self.runner.share(np.ascontiguousarray(Q))
        self._B = self.runner.map(_basis_rows, self.handles, shared)
        chunks = self.runner.map(_gram_chunks, self._B)
        G = np.zeros((Q.shape[1], Q.shape[1]))
        for part in self.runner.gather(chunks):
            for product in part:
                G += product
        self.runner.release([*chunks, shared])
        return G

    def times_basis(self, W: np.ndarray) -> np.ndarray:
        shared = self.runner.share(np.ascontiguousarray(W))
        rows = self.runner.map(_times, self._B, shared,
                               each=[(lo,) for lo, _ in self.bounds])
        self.runner.release([*self._B, shared])
        self._B = None
        self.x_moments = [m for part in self.runner.gather(self.runner.map(_x_moments, rows))
                          for m in part]
        if self.resident:  # Φ's rows stay in their partitions
            return PartitionedRows(self.runner, rows, self.bounds, W.shape[1])
        X = np.empty((self.bounds[-1][1], W.shape[1]), dtype=W.dtype)
        for (lo, hi), handle in zip(self.bounds, rows, strict=True):
            [X[lo:hi]] = self.runner.gather([handle])  # one partition at a time
            self.runner.release([handle])
        return X


class _TextPartitions(Sequence):
    """The partitions' texts, each made when it is sent: the driver never holds a list of
    every row's text (``hypotheses`` may be a lazy :class:`~aflite_core.io._text_columns.
    RowTexts`)."""

    def __init__(self, hypotheses: Sequence[str], premises: Sequence[str] | None,
                 bounds: list) -> None:
        self._texts, self._bounds = (hypotheses, premises), bounds

    def __len__(self) -> int:
        return len(self._bounds)

    def __getitem__(self, i: int) -> TextPartition:  # type: ignore[override]
        lo, hi = self._bounds[i]
        hypotheses, premises = self._texts
        return TextPartition(lo, list(hypotheses[lo:hi]),
                             None if premises is None else list(premises[lo:hi]))


def _tfidf(runner: Any, hypotheses: Sequence[str], premises: Sequence[str] | None, bounds: list,
           max_features: int, min_df: int | None) -> tuple[list, int]:
    """The partitions' TF-IDF rows (handles) and the number of columns."""
    n = len(hypotheses)
    if min_df is None:
        min_df = 2 if n >= 1000 else 1
    parts = runner.put(_TextPartitions(hypotheses, premises, bounds))
    scans = runner.map(scan_partition, parts)
    runner.release(parts)
    summaries = runner.gather(runner.map(summary_of, scans))
    vocabularies = merge_scans(summaries, n, min_df=min_df, max_features=max_features)
    del summaries
    if vocabularies[0] is None:
        runner.release(scans)
        raise RepresentationError(
            "hypotheses: no word found in any text (all empty or punctuation only); "
            "cannot build TF-IDF features")
    shared = runner.share([None if v is None else (v.column_of, v.idf) for v in vocabularies])
    each = [([None if v is None else v.local_to_global[p] for v in vocabularies],)
            for p in range(len(bounds))]
    matrices = runner.map(build_partition, scans, shared, each=each)
    runner.release([*scans, shared])
    return matrices, sum(v.n_columns for v in vocabularies if v is not None)


def partitioned_tfidf_svd(
    runner: Any,
    hypotheses: Sequence[str],
    premises: Sequence[str] | None,
    *,
    n_components: int,
    random_state: int | None,
    n_iter: int,
    max_features: int = 50_000,
    min_df: int | None = None,
    partition_rows: int | None = None,
    callback: Callable[[float], object] | None = None,
    on_vocabulary: Callable[[int], object] | None = None,
    resident: bool = False,
    texts: Callable[[], tuple[list, list | None]] | None = None,
) -> tuple[np.ndarray | PartitionedRows, int, float]:
    """Φ of ``tfidf_svd`` over row partitions on ``runner``.

    Parameters
    ----------
    runner : LocalPartitions or DaskPartitions
    hypotheses, premises : sequence of str
        As :func:`~aflite_core.represent._builders.tfidf_blocks` takes them; a lazy sequence
        (``RowTexts``) is read a partition at a time.
    n_components : int
        Upper bound of the dimension (``min(n_components, n_features - 1, n_rows - 1)``).
    random_state : int or None
    n_iter : int
        Power iterations.
    max_features, min_df
        As ``tfidf_blocks``.
    partition_rows : int, optional
        A multiple of 16,384 (default :data:`PARTITION_ROWS`).
    callback : callable, optional
        Called with the SVD's fraction done (0..1).
    on_vocabulary : callable, optional
        Called with the number of TF-IDF columns once the vocabulary is merged.
    resident : bool, default False
        Leave Φ's rows in their partitions and return a
        :class:`~aflite_core.represent._partitioned_rows.PartitionedRows` of them, which
        builds them again on the workers left if a worker holding some leaves; else gather
        them into one array.
    texts : callable, optional
        With ``resident``: returns ``(hypotheses, premises)`` again for such a rebuild (an
        audit reads them from its dataset). Without it the rebuild keeps ``hypotheses`` and
        ``premises`` referenced as long as Φ lives.

    Returns
    -------
    X : numpy.ndarray or PartitionedRows
        float32, ``(n_rows, k)``, equal to the local ``tfidf_svd`` Φ bit for bit.
    n_features : int
        TF-IDF columns.
    explained_variance : float
    """
    bounds = partition_bounds(len(hypotheses), partition_rows)
    settings = (bounds, n_components, random_state, n_iter, max_features, min_df)
    X, n_features, explained = _build_with_restarts(runner, hypotheses, premises, settings,
                                                    callback, on_vocabulary, resident)
    if resident:
        reread = texts if texts is not None else (lambda: (hypotheses, premises))

        def restore() -> tuple[Any, list]:
            """The same rows built again on the workers that remain."""
            rows = _build_with_restarts(_fresh(X.runner), *reread(), settings, None, None,
                                        True)[0]
            return rows.runner, rows.handles

        X.restore_with(restore)
    return X, n_features, explained


def _build_with_restarts(runner: Any, hypotheses: Sequence[str], premises: Sequence[str] | None,
                         settings: tuple, callback: Any, on_vocabulary: Any, resident: bool
                         ) -> tuple[np.ndarray | PartitionedRows, int, float]:
    """:func:`_build`, started again from the texts (at most :data:`MAX_RESTARTS` times)
    when a worker holding partitions left."""
    restarts = 0
    while True:
        try:
            return _build(runner, hypotheses, premises, *settings, callback, on_vocabulary,
                          resident)
        except PartitionLost:
            restarts += 1
            if restarts > MAX_RESTARTS or isinstance(runner, LocalPartitions):
                raise PartitionLost(
                    f"representation on Dask: workers holding its partitions left the cluster "
                    f"{restarts} times; check the workers' memory limit and logs, or run "
                    "without a scheduler") from None
            runner = _fresh(runner)


def _fresh(runner: Any) -> Any:
    """A runner over the workers of ``runner``'s cluster now (after some left)."""
    runner.client.wait_for_workers(1, timeout=30)
    return type(runner)(runner.client)


def _build(runner: Any, hypotheses: Sequence[str], premises: Sequence[str] | None, bounds: list,
           n_components: int, random_state: int | None, n_iter: int, max_features: int,
           min_df: int | None, callback: Any, on_vocabulary: Any, resident: bool = False
           ) -> tuple[np.ndarray | PartitionedRows, int, float]:
    n_rows = len(hypotheses)
    # BLAS at one thread for the whole build, every task's lifetime inside it: the limit is
    # process-wide, and a task on a worker thread of this process (an in-process cluster)
    # restores the limit it found when it started; had that been before this limit, it
    # would let the driver's dense steps below run on two threads and round otherwise
    with blas_threads.limit(1):
        matrices, n_features = _tfidf(runner, hypotheses, premises, bounds, max_features,
                                      min_df)
        if on_vocabulary is not None:
            on_vocabulary(n_features)
        try:
            k = min(n_components, n_features - 1, n_rows - 1)
            if k < 1:
                raise RepresentationError(
                    f"tfidf_svd: need at least 2 rows and 2 distinct terms, got {n_rows} "
                    f"row(s) and {n_features} term(s)")
            width = min(k + 10, n_rows, n_features)  # truncated_svd's n_oversamples = 10
            products = _PartitionProducts(runner, matrices, bounds, resident)
            X = randomized_range_svd(products, n_features, k, width=width, n_iter=n_iter,
                                     random_state=random_state, dtype=np.float32,
                                     callback=callback)
            m_moments = [m for part in runner.gather(runner.map(_m_moments, matrices))
                         for m in part]
        finally:
            runner.release(matrices)
    explained = explained_variance_ratio(n_rows, *sum_chunk_moments(m_moments),
                                         *sum_chunk_moments(products.x_moments))
    return X, n_features, explained
