"""A fold fit's sparse products split over the cores the other fold fits leave idle.

Newton-CG (scikit-learn's, the text models' solver) spends about half of a fit in two sparse
products a step: ``X @ W`` (the scores) and ``X.T @ G`` (the gradient and the Hessian's
product; scikit-learn writes it ``G.T @ X``), each on one thread in scipy. The fold pool runs
at most :data:`~aflite_core.represent._fold_pool.MAX_THREADS` fits at once (their features'
memory), and a measure's last fit often runs alone: the other cores sit idle. At 2.5M
rows the five hypothesis-only folds of PVI (``measures.pvi.hypothesis_only_pvi`` alone) took
37-101 s each, the last 47 s alone on one of two cores (2026-12-01).

:func:`split_products` gives a fit its training features as a :class:`SplitCSR`, the same
arrays, whose products with dense vectors run on :func:`~aflite_core.represent._fold_pool.\
fold_share` threads (the cores this process may use over the fold tasks running, asked at
each product, at most :data:`MAX_PARTS`):

* ``X @ W`` by blocks of rows, each block scipy's own ``csr_matvecs`` on its rows: every row's
  sum is made as it was;
* ``X.T @ G`` by ranges of columns, a compiled loop over the rows adding each entry of its
  range (:mod:`~aflite_core.represent._split_kernels`): every output adds the same terms in
  the same order as scipy's ``csc_matvecs``.

So a fit is bit-identical whatever the thread count (``tests/represent/test_split_products.py``
checks the products and a fit). On one thread, on a Dask worker (``fold_share`` is 1 there:
its worker threads are the pool), and below :data:`MIN_SPLIT_NNZ` entries, scipy's products
run unchanged. ``benchmarks/bench_split_products.py --rows 1000000`` on the 2-core machine (a
fold of 800,000 x 164,694, 10.4M entries; 2026-12-01): ``X @ W`` 26.6 -> 12.6 ms on two
threads, ``X.T @ G`` 21.5 -> 17.6 ms, the fold's fit alone 9.20-9.87 -> 7.05-7.38 s; PVI of
2.5M rows 172.6 -> 149.6 s.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import scipy.sparse as sp

from aflite_core._validation import available_cores
from aflite_core.represent._fold_pool import fold_share

try:  # scipy's compiled loops of csr @ dense (private, present since scipy 1.0)
    from scipy.sparse._sparsetools import csr_matvec, csr_matvecs
except ImportError:  # pragma: no cover - a scipy without them: the products are not split
    csr_matvec = csr_matvecs = None

__all__ = ["MAX_PARTS", "MIN_SPLIT_NNZ", "SplitCSR", "split_products"]

#: Below this many stored entries a product takes under a millisecond: not split.
MIN_SPLIT_NNZ = 250_000
#: At most this many threads a product (memory bandwidth bounds more; ``X.T @ G`` keeps
#: ``2 (parts - 1)`` bytes a row of where each part's entries start).
MAX_PARTS = 8

#: The threads of the products of every fit inside :func:`split_products` (one a core but
#: the caller's), and how many fits are inside: the last one out stops them, so that no
#: thread outlives the fits (a command-line process with a thread left exits the slow way,
#: ``process_exit.exit_now``: 0.5 s more).
_POOL: list[ThreadPoolExecutor] = []
_USERS = [0]
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max(1, available_cores() - 1),
                                            thread_name_prefix="split-products"))
        return _POOL[0]


def _leave() -> None:
    """One fit fewer inside :func:`split_products`; the last stops the threads."""
    with _POOL_LOCK:
        _USERS[0] -= 1
        pool = _POOL.pop() if _USERS[0] == 0 and _POOL else None
    if pool is not None:
        pool.shutdown(wait=True)  # idle threads: they end at once


def _run_parts(run: Callable[[int], None], n_parts: int) -> None:
    """``run(0)``, ..., ``run(n_parts - 1)``: the first here, the others on the pool."""
    futures = [_pool().submit(run, part) for part in range(1, n_parts)]
    try:
        run(0)
    finally:
        for future in futures:
            future.result()


def _parts() -> int:
    """Threads a product may use now (1: scipy's own product)."""
    return min(MAX_PARTS, fold_share())


def _float64(other: Any) -> np.ndarray | None:
    """``other`` as a C-contiguous float64 array, or None when it is of another type (the
    product is then scipy's, whatever its casts)."""
    if not isinstance(other, np.ndarray) or other.dtype != np.float64:
        return None
    return np.ascontiguousarray(other)


class SplitCSR(sp.csr_matrix):
    """A CSR matrix whose products with dense float64 vectors and matrices, ``X @ W`` and
    ``X.T @ G``, run on several threads (see the module docstring); everything else is
    scipy's. Made by :func:`split_products`, sharing the arrays of the matrix it was given.
    """

    def _split_state(self) -> dict:
        state = self.__dict__.get("_split")
        if state is None:
            state = self.__dict__["_split"] = {}
        return state

    def _row_bounds(self, n_parts: int) -> np.ndarray:
        """Row bounds of ``n_parts`` blocks of about equal entries."""
        state = self._split_state()
        if state.get("rows_for") != n_parts:
            targets = np.linspace(0, self.nnz, n_parts + 1)
            bounds = np.searchsorted(self.indptr, targets).astype(np.int64)
            bounds[0], bounds[-1] = 0, self.shape[0]
            state["rows_for"], state["row_bounds"] = n_parts, np.maximum.accumulate(bounds)
        return state["row_bounds"]

    def _rows_product(self, x: np.ndarray, n_parts: int, vector: bool) -> np.ndarray:
        M, N = self.shape
        bounds = self._row_bounds(n_parts)
        result = np.zeros(M if vector else (M, x.shape[1]), dtype=np.float64)

        def run(part: int) -> None:
            lo, hi = int(bounds[part]), int(bounds[part + 1])
            if hi <= lo:
                return
            if vector:
                csr_matvec(hi - lo, N, self.indptr[lo : hi + 1], self.indices, self.data, x,
                           result[lo:hi])
            else:
                csr_matvecs(hi - lo, N, x.shape[1], self.indptr[lo : hi + 1], self.indices,
                            self.data, x.ravel(), result[lo:hi].ravel())

        _run_parts(run, len(bounds) - 1)
        return result

    def _matmul_vector(self, other):
        x, n_parts = _float64(other), _parts()
        if x is None or n_parts < 2 or csr_matvec is None:
            return super()._matmul_vector(other)
        return self._rows_product(x, n_parts, vector=True)

    def _matmul_multivector(self, other):
        x, n_parts = _float64(other), _parts()
        if x is None or x.ndim != 2 or n_parts < 2 or csr_matvecs is None:
            return super()._matmul_multivector(other)
        return self._rows_product(x, n_parts, vector=False)

    # scipy before 1.12 names them so
    _mul_vector = _matmul_vector
    _mul_multivector = _matmul_multivector

    def _column_offsets(self, n_parts: int) -> np.ndarray:
        """Where each row's entries of each of ``n_parts`` column ranges (of about equal
        entries) start: :func:`~aflite_core.represent._split_kernels.range_offsets`, kept
        for the last ``n_parts`` asked."""
        state = self._split_state()
        if state.get("columns_for") != n_parts:
            from aflite_core.represent._split_kernels import range_offsets  # lazy: numba

            if "column_entries" not in state:
                state["column_entries"] = np.cumsum(
                    np.bincount(self.indices, minlength=self.shape[1]))
            cumulative = state["column_entries"]
            bounds = np.searchsorted(cumulative, np.linspace(0, self.nnz, n_parts + 1)[1:-1],
                                     side="right")
            state["columns_for"] = None  # (not half made if interrupted)
            state["column_offsets"] = range_offsets(self.indptr, self.indices, bounds)
            state["columns_for"] = n_parts
        return state["column_offsets"]

    def transpose(self, axes=None, copy=False):
        """``X.T`` as scipy's transpose (a CSC matrix of the same arrays) whose products
        with dense float64 arrays are split by column ranges of ``X``."""
        view = super().transpose(axes=axes, copy=copy)
        if copy or not isinstance(view, sp.csc_matrix):
            return view
        out = _SplitTransposed((view.data, view.indices, view.indptr), shape=view.shape,
                               copy=False)
        out._source = self
        return out

    def _transposed_product(self, G: np.ndarray) -> np.ndarray | None:
        """``X.T @ G`` (G float64 ``(n_rows, k)``) on the threads allowed now, or None when
        it is not split."""
        n_parts = _parts()
        if n_parts < 2:
            return None
        if not self._columns_ok():
            return None
        from aflite_core.represent._split_kernels import transposed_range  # lazy: numba

        offsets = self._column_offsets(n_parts)
        out = np.zeros((self.shape[1], G.shape[1]), dtype=np.float64)

        def run(part: int) -> None:
            transposed_range(self.indptr, self.indices, self.data, offsets, part, G, out)

        _run_parts(run, offsets.shape[0] + 1)
        return out

    def _columns_ok(self) -> bool:
        """Whether the column ranges apply: sorted indices, under 65,535 entries a row, float64
        values (checked once)."""
        state = self._split_state()
        if "columns_ok" not in state:
            longest = int(np.diff(self.indptr).max()) if self.shape[0] else 0
            state["columns_ok"] = bool(self.data.dtype == np.float64
                                       and self.has_sorted_indices
                                       and longest < np.iinfo(np.uint16).max)
        return state["columns_ok"]


class _SplitTransposed(sp.csc_matrix):
    """:meth:`SplitCSR.transpose`: products with dense float64 arrays by the source's column
    ranges; everything else scipy's CSC matrix."""

    _source: SplitCSR | None = None

    def _matmul_vector(self, other):
        G = _float64(other)
        out = None if G is None or self._source is None else \
            self._source._transposed_product(G.reshape(-1, 1))
        return super()._matmul_vector(other) if out is None else out[:, 0]

    def _matmul_multivector(self, other):
        G = _float64(other)
        out = None if G is None or G.ndim != 2 or self._source is None else \
            self._source._transposed_product(G)
        return super()._matmul_multivector(other) if out is None else out

    _mul_vector = _matmul_vector
    _mul_multivector = _matmul_multivector


@contextlib.contextmanager
def split_products(X: Any) -> Iterator[Any]:
    """Within this context, ``X`` as a :class:`SplitCSR` sharing its arrays, when its products
    are worth splitting (a float64 CSR matrix of :data:`MIN_SPLIT_NNZ` entries or more);
    else ``X`` itself. The threads the products use end with the last such context.

    Parameters
    ----------
    X : any
        A fold's training features.

    Yields
    ------
    SplitCSR or X

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> with split_products(sp.random(10, 10, density=0.5, format="csr")) as X:
    ...     type(X).__name__
    'csr_matrix'
    """
    view = _split_view(X)
    if view is X:
        yield X
        return
    with _POOL_LOCK:
        _USERS[0] += 1
    try:
        yield view
    finally:
        _leave()


def _split_view(X: Any) -> Any:
    """:func:`split_products`' matrix: a :class:`SplitCSR` of ``X``'s arrays, or ``X``."""
    if (type(X) is not sp.csr_matrix or X.dtype != np.float64 or X.nnz < MIN_SPLIT_NNZ
            or csr_matvecs is None):
        return X
    view = SplitCSR((X.data, X.indices, X.indptr), shape=X.shape, copy=False)
    if not (np.shares_memory(view.indices, X.indices) and np.shares_memory(view.data, X.data)):
        return X  # its index type was narrowed (a copy): not worth the memory
    return view
