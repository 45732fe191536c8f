"""Randomized truncated SVD of a sparse TF-IDF matrix, through its row space.

Φ's default reduction (``tfidf_svd``) keeps the top ``k`` singular directions of the n x V
TF-IDF matrix M, with V (the vocabulary, tens of thousands of terms) much smaller than n (up
to 550k rows). A randomized SVD (Halko, Martinsson and Tropp, 2011, Algorithms 4.3-4.4) finds
a basis of the dominant subspace with a few power iterations and then solves a small problem
in it. scikit-learn's ``TruncatedSVD(algorithm="randomized")`` keeps the basis on the row side
(n x l, l = k + oversamples): each iteration normalises an n x l block (an LU
factorisation), and the final QR and the small SVD are of n x l and l x V matrices, which
together cost more than the sparse products themselves.

Here the basis lives on the term side (V x l): the same power iterations, ``(MᵀM)^(q+1) Ω``,
normalised by an LU of a V x l block (n / V times smaller), a QR of that block, then
``B = M Q`` (n x l) and the eigen-decomposition of the l x l Gram matrix ``BᵀB`` (in float64),
whose eigenvectors W give ``X = B W = U Σ``. ``q`` counts power iterations as scikit-learn
does (its ``n_iter``; ``q + 1`` products with ``MᵀM`` span the same subspace as its
``(MMᵀ)^q M Ω``). Signs follow scikit-learn's ``svd_flip(u_based_decision=False)``: the
largest-magnitude term of each component is positive.

Measured on 100k SNLI rows (V = 20,833, k = 256, q = 5; ``benchmarks/bench_svd.py``): the
same share of the TF-IDF's squared norm as scikit-learn's (0.3622 vs 0.3623), a subspace as
close to scikit-learn's (mean squared cosine of the principal angles 0.911) as scikit-learn's
own under another seed (0.916), in 2.9-3.2 s instead of 5.5-6.2 s. ``tests/represent/test_svd.py``
checks the agreement on real text.

The dense steps (LU, QR, the Gram matrix, its eigen-decomposition and ``X = B W``) run on one
BLAS thread. OpenBLAS's multi-threaded LAPACK and GEMM round differently from its
single-threaded ones, so Φ (and every figure after it) depended on the machine's cores from
about 100k rows on (1 and 2 threads differed in the last bits of each of those steps); and
between two such steps the BLAS threads kept spinning on the cores the sparse products (the
split products' threads) needed. One thread: the same Φ on any machine, and the 100k SVD
1.97-2.86 -> 1.81-2.32 s on this 2-core machine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy import linalg
from scipy.sparse import _sparsetools

from aflite_core import blas_threads
from aflite_core._validation import check_int, check_seed
from aflite_core.represent._fold_pool import available_cores
from aflite_core.represent._row_products import ROW_WINDOW, rows_times

__all__ = ["column_moments", "explained_variance_ratio", "randomized_range_svd", "row_moments",
           "sum_chunk_moments", "truncated_svd"]


def truncated_svd(
    M,
    n_components: int,
    *,
    n_iter: int = 5,
    n_oversamples: int = 10,
    random_state: int | None = 0,
    callback: Callable[[float], object] | None = None,
    keep: dict | None = None,
    out: Callable[[np.ndarray], object] | None = None,
) -> tuple[np.ndarray | None, float]:
    """Top ``n_components`` singular directions of ``M``: ``U Σ`` and the variance they hold.

    Parameters
    ----------
    M : scipy.sparse matrix or numpy.ndarray of shape (n_rows, n_features)
        Not centred (like scikit-learn's ``TruncatedSVD``).
    n_components : int
        ``k``; at most ``min(n_rows, n_features)``.
    n_iter : int, default 5
        Power iterations, counted as scikit-learn counts them.
    n_oversamples : int, default 10
        Extra random directions (the basis has ``k + n_oversamples`` columns when the
        matrix is large enough).
    random_state : int or None, default 0
        Seeds the random test matrix.
    callback : callable, optional
        Called with the fraction of the work done (0..1) after each power iteration.
    out : callable, optional
        Given ``U Σ``'s rows in order, a block of rows at a time (C-ordered arrays it may
        keep or write away): ``X`` is then never whole in memory and None is returned in
        its place (:func:`aflite_core.represent._phi_on_disk.PhiWriter`).

    Returns
    -------
    X : numpy.ndarray of shape (n_rows, n_components), or None
        ``U Σ`` (what ``TruncatedSVD.fit_transform`` returns), in ``M``'s float dtype (float32
        for float32 input, else float64); None when its rows went to ``out``.
    explained_variance_ratio : float
        Sum over components of the variance of ``X``'s column over the total variance of
        ``M``'s columns (scikit-learn's ``explained_variance_ratio_.sum()``).

    Raises
    ------
    ValueError
        If ``n_components`` exceeds ``min(n_rows, n_features)`` or an option is out of range.
    """
    n_rows, n_features = M.shape
    k = check_int("n_components", n_components, minimum=1)
    if k > min(n_rows, n_features):
        raise ValueError(f"n_components: expected at most min(n_rows, n_features) = "
                         f"{min(n_rows, n_features)}, got {k}")
    n_iter = check_int("n_iter", n_iter, minimum=0)
    n_oversamples = check_int("n_oversamples", n_oversamples, minimum=0)
    random_state = check_seed(random_state)
    dtype = np.float32 if M.dtype == np.float32 else np.float64
    M = sp.csr_matrix(M, dtype=dtype) if sp.issparse(M) else np.asarray(M, dtype=dtype)
    width = min(k + n_oversamples, n_rows, n_features)
    with blas_threads.limit(1), _SplitProducts(M, out=out) as products:
        X = randomized_range_svd(products, n_features, k, width=width, n_iter=n_iter,
                                 random_state=random_state, dtype=dtype, callback=callback,
                                 keep=keep)
        x_moments = products.x_moments
    m_sum, m_sq = sum_chunk_moments(column_moments(M, lo, lo + MOMENT_CHUNK_ROWS)
                                    for lo in range(0, n_rows, MOMENT_CHUNK_ROWS))
    if x_moments is None:  # the whole product: Φ in memory
        x_moments = [row_moments(X, lo, lo + X_MOMENT_CHUNK_ROWS)
                     for lo in range(0, n_rows, X_MOMENT_CHUNK_ROWS)]
    x_sum, x_sq = sum_chunk_moments(x_moments)
    explained = explained_variance_ratio(n_rows, m_sum, m_sq, x_sum, x_sq)
    if out is not None and X is not None:  # the whole product (a small M): sent now
        for lo in range(0, n_rows, ROWS_TIMES_CHUNK):
            out(X[lo:lo + ROWS_TIMES_CHUNK])
        X = None
    return X, explained


def randomized_range_svd(products: Any, n_features: int, k: int, *, width: int, n_iter: int,
                         random_state: int | None, dtype: Any,
                         callback: Callable[[float], object] | None = None,
                         keep: dict | None = None) -> np.ndarray:
    """The randomized SVD's steps over ``products``, whatever holds the rows of M.

    ``products`` gives ``gram(D)`` (``Mᵀ M D``), ``basis_gram(Q)`` (``B = M Q`` kept, and its
    float64 Gram matrix ``BᵀB`` summed over 16,384-row chunks in order) and
    ``times_basis(W)`` (``B W``, the rows of Φ): :class:`_SplitProducts` on this process's
    threads, or the partitions of :mod:`aflite_core.represent._partitioned_svd` on a
    cluster's workers. The dense steps between them run here, on the calling thread (its
    BLAS held to one thread by the caller).
    """
    rng = np.random.default_rng(random_state)
    Z = products.gram(rng.standard_normal((n_features, width), dtype=dtype))
    steps = n_iter + 2  # the sketch, each power iteration, the final projection
    for i in range(n_iter):
        if callback is not None:
            callback((i + 1) / steps)
        Z, _ = linalg.lu(Z, permute_l=True, check_finite=False)
        Z = products.gram(Z)
    if callback is not None:
        callback((n_iter + 1) / steps)
    Q, _ = linalg.qr(Z, mode="economic", check_finite=False)  # term-side basis, V x l
    eigenvalues, W = linalg.eigh(products.basis_gram(Q), check_finite=False)
    order = np.argsort(eigenvalues)[::-1][:k]
    W = W[:, order]
    components = Q.astype(np.float64) @ W  # V x k: the right singular vectors
    signs = np.sign(components[np.argmax(np.abs(components), axis=0), np.arange(k)])
    signs[signs == 0] = 1.0
    if keep is not None:  # Φ = M @ components: what places a new row of M (a typed text)
        keep["components"] = (components * signs).astype(np.float32)
    return products.times_basis((W * signs).astype(dtype))


#: Rows of M per sparse-dense product step in :meth:`_SplitProducts.rows` (each output row
#: is the same sum whatever the step: CSR products go row by row).
PRODUCT_CHUNK_ROWS = 32_768
#: Rows of M per chunk of the chunked products (:class:`_SplitProducts`): a multiple of the
#: Gram's 16,384-row chunks; one chunk's ``M_c D`` is 70 MB at l = 266.
PASS_ROWS = 65_536
#: Stored entries of M from which its products run on several threads (below, one thread:
#: the threads' start costs more than they save).
SPLIT_MIN_NNZ = 200_000
#: The most threads of the split products. Each writes rows or columns of its own, so the
#: count changes no bit (``tests/represent/test_svd.py``); held to the fold pool's four
#: before, the SVD of 300,000 rows on a 16-core host kept 2-5 of its cores busy
#: (``bench_cores.py --cores 16 --keep``, 2026-11-30).
PRODUCT_THREADS = 16


class _SplitProducts:
    """``M @ D`` and ``Mᵀ @ (M @ D)`` of a sparse M on every core, bit for bit as on one, a
    chunk of rows at a time.

    scipy's sparse-dense products run on one thread (without the GIL). ``M @ D`` is split by
    rows of M (views of its arrays, no copy): each output row is the same sum in the same
    order. ``Mᵀ @ Y`` is split by *columns* of M, so each thread owns a range of output rows
    and adds, as the whole product does, every row of M's contribution in row order (one
    copy of M's entries, grouped by column range). Splitting by rows of M instead would sum
    partial products in another order and move Φ's last bits. 100k SNLI-like rows on two
    cores: the whole SVD 3.2 -> 2.4-2.7 s warm (its products are memory-bound, so two threads
    take about 0.7 of one thread's time, not half).

    From :data:`SPLIT_MIN_NNZ` stored entries (on one thread too) the products go through M
    :data:`PASS_ROWS` rows at a time: ``Mᵀ (M D)`` adds each chunk's ``Mᵀ_c (M_c D)`` into
    the output with scipy's own kernel (``csc_matvecs`` accumulates: the additions of the
    whole product, in its order), ``BᵀB`` adds each chunk's 16,384-row Gram products in
    order, and ``X = B W`` makes each chunk's rows of B again (``M_c Q``: the same rows) and
    multiplies them as :func:`_rows_times` would. No n x l array is ever held: 1.06 GB less
    at 1M rows and l = 266, for one more ``M Q`` product. With ``out``, Φ's rows go to it a
    chunk at a time (:attr:`x_moments` then holds their moments) and ``times_basis`` returns
    None.
    """

    def __init__(self, M, out: Callable[[np.ndarray], object] | None = None) -> None:
        self.M = M
        self.out = out
        self.chunked = sp.issparse(M) and M.nnz >= SPLIT_MIN_NNZ
        self.n_threads = _threads() if self.chunked else 1
        self.x_moments: list | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._Q: np.ndarray | None = None
        self._B: np.ndarray | None = None
        self._Y: np.ndarray | None = None
        if not self.chunked:
            return
        self.M = M = sp.csr_matrix(M)
        if self.n_threads == 1:  # Mᵀ is M's own arrays read as CSC: no copy
            self.col_blocks = [(0, M.shape[1], M.T)]
            return
        col_cuts = _balanced_cuts(np.bincount(M.indices, minlength=M.shape[1]),
                                  self.n_threads)
        self.col_blocks = [(lo, hi, M[:, lo:hi].T)
                           for lo, hi in zip(col_cuts[:-1], col_cuts[1:], strict=True)]

    def map(self, fn: Callable, items: Iterable) -> list:
        """``[fn(item) for item in items]`` in order, on the products' threads when there
        are several (the SVD's row-wise work besides the products uses them too)."""
        if self._pool is None:
            return [fn(item) for item in items]
        return list(self._pool.map(fn, items))

    def __enter__(self) -> _SplitProducts:
        if self.n_threads > 1:
            self._pool = ThreadPoolExecutor(max_workers=self.n_threads,
                                            thread_name_prefix="svd-products")
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._Q = self._B = self._Y = None

    def _fits(self, D: np.ndarray) -> bool:
        """Whether the chunked products apply to ``D`` (the SVD's: M's float dtype)."""
        return self.chunked and D.dtype == self.M.dtype and D.dtype.kind == "f"

    def _rows_chunk(self, D: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """``M[lo:hi] @ D`` (rows split over the threads, each in steps of at most
        :data:`PRODUCT_CHUNK_ROWS`), in a buffer reused chunk after chunk (a fresh one each
        time cost its page faults)."""
        shape = (hi - lo, D.shape[1])
        if self._Y is None or self._Y.shape[0] < shape[0] or self._Y.shape[1] != shape[1] \
                or self._Y.dtype != D.dtype:
            self._Y = np.empty(shape, dtype=D.dtype)  # grown for a longer (merged last) chunk
        out = self._Y[:shape[0]]
        cuts = np.linspace(lo, hi, self.n_threads + 1).astype(np.int64)

        def part(i: int) -> None:
            for a in range(int(cuts[i]), int(cuts[i + 1]), PRODUCT_CHUNK_ROWS):
                b = min(int(cuts[i + 1]), a + PRODUCT_CHUNK_ROWS)
                out[a - lo:b - lo] = _row_view(self.M, a, b) @ D

        self.map(part, range(self.n_threads))
        return out

    def _chunks(self, multiple: int = 1) -> list[tuple[int, int]]:
        """Row chunks of about :data:`PASS_ROWS` rows, each a multiple of ``multiple``."""
        n, step = self.M.shape[0], max(1, PASS_ROWS // multiple) * multiple
        bounds = list(range(0, n, step)) + [n]
        return list(zip(bounds[:-1], bounds[1:], strict=True))

    def rows(self, D: np.ndarray) -> np.ndarray:
        """``M @ D`` as a dense array."""
        if not self._fits(D):
            return np.asarray(self.M @ D)
        out = np.empty((self.M.shape[0], D.shape[1]), dtype=D.dtype)
        for lo, hi in self._chunks():
            out[lo:hi] = self._rows_chunk(D, lo, hi)
        return out

    def gram(self, D: np.ndarray) -> np.ndarray:
        """``Mᵀ @ (M @ D)``."""
        D = np.ascontiguousarray(D)
        if not self._fits(D):
            return self.M.T @ (self.M @ D)
        out = np.zeros((self.M.shape[1], D.shape[1]), dtype=D.dtype)
        for lo, hi in self._chunks():
            Y = self._rows_chunk(D, lo, hi)

            def part(block: tuple, lo: int = lo, hi: int = hi, Y: np.ndarray = Y) -> None:
                a, b, columns_t = block
                _add_columns(columns_t, lo, hi, Y, out[a:b])

            self.map(part, self.col_blocks)
        return out

    def basis_gram(self, Q: np.ndarray) -> np.ndarray:
        """``BᵀB`` of ``B = M Q``: Q kept for :meth:`times_basis`, B never whole (chunked
        products), or B kept (the whole product)."""
        Q = np.ascontiguousarray(Q)
        if not self._fits(Q):
            self._B = np.asarray(self.M @ Q)
            return gram64(self._B, mapper=self.map)
        self._Q = Q
        G = np.zeros((Q.shape[1], Q.shape[1]))
        for lo, hi in self._chunks(GRAM_CHUNK_ROWS):  # the Gram's own chunks, in order
            add_gram64(G, self._rows_chunk(Q, lo, hi), GRAM_CHUNK_ROWS, mapper=self.map)
        return G

    def times_basis(self, W: np.ndarray) -> np.ndarray | None:
        """``B W``: Φ's rows, or None when they went to :attr:`out` (their moments in
        :attr:`x_moments`)."""
        W = np.ascontiguousarray(W)  # C-ordered: BLAS's fastest layout for the row blocks
        if self._B is not None:  # the whole product, written over B's buffer
            B, self._B = self._B, None
            return _rows_times(B, W, self)
        Q, self._Q = self._Q, None
        n = self.M.shape[0]
        X = None if self.out is not None else np.empty((n, W.shape[1]), dtype=W.dtype)
        moments, W = _MomentChunks(), W.astype(Q.dtype, copy=False)
        for lo, hi in _times_bounds(n, ROWS_TIMES_CHUNK):
            part = _times_chunk(self._rows_chunk(Q, lo, hi), W, self, lo)
            moments.add(part)
            if X is None:
                self.out(part)
            else:
                X[lo:hi] = part
        self.x_moments = moments.finish()
        return X


class _MomentChunks:
    """:func:`row_moments` of consecutive :data:`X_MOMENT_CHUNK_ROWS`-row chunks of rows
    given in order, however they come cut (the moments of the whole array, chunk for
    chunk)."""

    def __init__(self) -> None:
        self.chunks: list = []
        self._tail: np.ndarray | None = None

    def add(self, rows: np.ndarray) -> None:
        if self._tail is not None and len(self._tail):
            rows = np.concatenate([self._tail, rows])
        whole = len(rows) // X_MOMENT_CHUNK_ROWS * X_MOMENT_CHUNK_ROWS
        self.chunks.extend(row_moments(rows, lo, lo + X_MOMENT_CHUNK_ROWS)
                           for lo in range(0, whole, X_MOMENT_CHUNK_ROWS))
        self._tail = rows[whole:].copy()

    def finish(self) -> list:
        if self._tail is not None and len(self._tail):
            self.chunks.append(row_moments(self._tail, 0, len(self._tail)))
        self._tail = None
        return self.chunks


def _add_columns(columns_t: sp.csc_matrix, lo: int, hi: int, Y: np.ndarray,
                 out: np.ndarray) -> None:
    """``out += columns_t[:, lo:hi] @ Y`` added into ``out`` by scipy's own kernel
    (``csc_matvecs``, the one ``columns_t @ Y`` runs: it accumulates into its output), so
    chunk after chunk in row order gives the whole product's additions in its order."""
    if hi <= lo or out.size == 0:
        return
    if not (out.flags.c_contiguous and Y.flags.c_contiguous):
        raise ValueError("_add_columns: expected C-ordered Y and out")
    start, stop = columns_t.indptr[lo], columns_t.indptr[hi]
    _sparsetools.csc_matvecs(columns_t.shape[0], hi - lo, Y.shape[1],
                             columns_t.indptr[lo:hi + 1] - start,
                             columns_t.indices[start:stop], columns_t.data[start:stop],
                             Y.reshape(-1), out.reshape(-1))


def _threads() -> int:
    """Threads of the split products: the cores this process may use, at most
    :data:`PRODUCT_THREADS`."""
    return max(1, min(PRODUCT_THREADS, available_cores()))


def _balanced_cuts(weights: np.ndarray, parts: int) -> np.ndarray:
    """``parts + 1`` increasing cut points over ``len(weights)`` items with about equal
    weight between consecutive cuts (first 0, last the length; empty ranges allowed)."""
    total = np.cumsum(weights, dtype=np.float64)
    targets = total[-1] * np.arange(1, parts) / parts if len(total) else np.zeros(parts - 1)
    inner = np.searchsorted(total, targets, side="right")
    return np.concatenate([[0], inner, [len(weights)]]).astype(np.int64)


def _row_view(M: sp.csr_matrix, lo: int, hi: int) -> sp.csr_matrix:
    """Rows ``lo:hi`` of ``M`` sharing its data and indices (``M[lo:hi]`` copies them)."""
    start, stop = M.indptr[lo], M.indptr[hi]
    return sp.csr_matrix((M.data[start:stop], M.indices[start:stop],
                          M.indptr[lo:hi + 1] - start), shape=(hi - lo, M.shape[1]), copy=False)


#: Rows per chunk of the float64 Gram matrix ``BᵀB`` (:func:`gram64`).
GRAM_CHUNK_ROWS = 16_384


def gram64(B: np.ndarray, chunk_rows: int = GRAM_CHUNK_ROWS,
            mapper: Callable[[Callable, Iterable], Iterable] | None = None) -> np.ndarray:
    """``BᵀB`` accumulated in float64 over row chunks (no float64 copy of all of ``B``).

    ``mapper`` (:meth:`_SplitProducts.map`) may compute the chunks' products on several
    threads; they are added in chunk order, the same sums as on one (each chunk's product is
    computed alike on one BLAS thread).
    """
    return add_gram64(np.zeros((B.shape[1], B.shape[1])), B, chunk_rows, mapper)


def add_gram64(G: np.ndarray, B: np.ndarray, chunk_rows: int = GRAM_CHUNK_ROWS,
               mapper: Callable[[Callable, Iterable], Iterable] | None = None) -> np.ndarray:
    """``G`` plus each ``chunk_rows``-row chunk's float64 ``cᵀc`` of ``B``, added in chunk
    order into ``G`` (in place; returned): rows of B given a multiple of ``chunk_rows`` at a
    time add up to :func:`gram64` of all of them, bit for bit."""
    def part(lo: int) -> np.ndarray:
        chunk = B[lo:lo + chunk_rows].astype(np.float64)
        return chunk.T @ chunk

    for product in (mapper or map)(part, range(0, B.shape[0], chunk_rows)):
        G += product
    return G


#: Rows of ``B`` multiplied per step of :func:`_rows_times` (67 MB of output at 256 columns).
ROWS_TIMES_CHUNK = 65_536


def _rows_times(B: np.ndarray, W: np.ndarray, products: _SplitProducts,
                chunk_rows: int = ROWS_TIMES_CHUNK) -> np.ndarray:
    """``B @ W`` written over ``B``'s own memory: the n x k result is a view of the n x l
    buffer (k <= l), so Φ never sits beside ``B`` (1 GB less at the SVD's peak at 1M rows).

    Row chunks in order: a chunk's product goes to a small temporary, then to the front of
    the buffer, where it covers only rows already multiplied (row i's output ends at
    ``(i + 1) k <= (i + 1) l``). Within a chunk, row blocks on the products' threads when
    there are several; every output row is the bits of one whole product
    (:func:`~aflite_core.represent._row_products.rows_times`), however the rows are cut.
    """
    n, width = B.shape
    k = W.shape[1]
    dtype = np.result_type(B, W)
    if k > width or dtype != B.dtype or not B.flags.c_contiguous or n == 0:
        return rows_times(B, W)
    flat = B.reshape(-1)
    for lo, hi in _times_bounds(n, chunk_rows):
        flat[lo * k:hi * k] = _times_chunk(B[lo:hi], W, products, lo).reshape(-1)
    return flat[:n * k].reshape(n, k)


def _times_bounds(n: int, chunk_rows: int) -> list[tuple[int, int]]:
    """The row chunks of ``B W``: ``chunk_rows`` each, a last one shorter than 64 rows joined
    to the one before."""
    bounds = list(range(0, n, chunk_rows)) + [n]
    if len(bounds) > 2 and bounds[-1] - bounds[-2] < 64:
        del bounds[-2]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _times_chunk(B: np.ndarray, W: np.ndarray, products: _SplitProducts,
                 first_row: int) -> np.ndarray:
    """``B @ W`` of one chunk (rows ``first_row ..`` of the whole), in row blocks on the
    products' threads when there are several."""
    threads = products.n_threads
    if threads == 1 or len(B) < 4 * threads:
        return rows_times(B, W, first_row=first_row)
    part = np.empty((len(B), W.shape[1]), dtype=np.result_type(B, W))
    cuts = np.linspace(0, len(B), 2 * threads + 1).astype(np.int64)
    # cut on the aligned windows' edges where the blocks are large enough: no padded window
    aligned = (first_row + cuts[1:-1]) // ROW_WINDOW * ROW_WINDOW - first_row
    if len(B) >= 4 * threads * ROW_WINDOW:
        cuts[1:-1] = np.clip(aligned, 0, len(B))

    def block(i: int) -> None:
        lo, hi = cuts[i], cuts[i + 1]
        rows_times(B[lo:hi], W, first_row=first_row + int(lo), out=part[lo:hi])

    products.map(block, range(len(cuts) - 1))
    return part


#: Rows of M per chunk of its column moments (:func:`column_moments`).
MOMENT_CHUNK_ROWS = 16_384
#: Rows of Φ per chunk of its column moments (:func:`row_moments`): 4,096-row chunks (8 MB
#: at 256 columns) stay below the allocator's mmap threshold and reuse one buffer, where
#: 16,384-row ones were each mapped and faulted in afresh (0.09-0.26 -> 0.06 s at 100k rows).
X_MOMENT_CHUNK_ROWS = 4_096


def column_moments(M, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 sums and sums of squares of the columns of rows ``lo:hi`` of ``M`` (sparse
    or dense), each a sum over the chunk's entries in stored order: the same numbers
    whichever process holds the rows."""
    if sp.issparse(M):
        part = _row_view(M, lo, min(hi, M.shape[0]))
        data = part.data.astype(np.float64)
        return (np.bincount(part.indices, weights=data, minlength=M.shape[1]),
                np.bincount(part.indices, weights=data * data, minlength=M.shape[1]))
    return row_moments(M, lo, hi)


def row_moments(X: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 column sums and sums of squares of the dense rows ``lo:hi`` of ``X``."""
    part = X[lo:hi].astype(np.float64)
    return part.sum(axis=0), np.einsum("ij,ij->j", part, part)


def sum_chunk_moments(chunks: Iterable[tuple[np.ndarray, np.ndarray]]
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The chunks' moments added in chunk order (the order fixes the last bits)."""
    total_sum = total_sq = None
    for part_sum, part_sq in chunks:
        if total_sum is None:
            total_sum, total_sq = np.zeros_like(part_sum), np.zeros_like(part_sq)
        total_sum += part_sum
        total_sq += part_sq
    if total_sum is None:
        return np.zeros(0), np.zeros(0)
    return total_sum, total_sq


def explained_variance_ratio(n: int, m_sum: np.ndarray, m_sq: np.ndarray,
                             x_sum: np.ndarray, x_sq: np.ndarray) -> float:
    """``sum(var(X columns)) / sum(var(M columns))`` from the columns' moments, as
    scikit-learn reports it (``explained_variance_ratio_.sum()``)."""
    if n == 0:
        return 0.0
    total = float(np.sum(m_sq / n - (m_sum / n) ** 2))
    explained = float(np.sum(x_sq / n - (x_sum / n) ** 2))
    return explained / total if total > 0 else 0.0
