"""Nearest neighbours by cosine similarity: an exact search in row blocks (the top k of each
block kept with ``argpartition``, ties broken by index) or an approximate one (an inverted
file: :func:`approx_topk`), and the input checks the KNN measures share.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from aflite_core.represent import is_partitioned

#: ``method="auto"`` uses the approximate index when n_queries x n_reference exceeds this many
#: pairs (about 8 minutes of exact search on two cores; exact 10k x 100k takes ~10 s).
APPROX_MIN_PAIRS: int = 50_000_000_000

#: Reference sets (per class group) smaller than this are searched exactly even when the
#: approximate method is chosen.
APPROX_MIN_REFERENCE: int = 4096

#: The approximate search's inverted file (:func:`approx_topk`): about sqrt(n) groups (within
#: these bounds), their centroids fitted on this many rows a group, in this many rounds, and
#: each query compared with the rows of this share of the groups (at least IVF_MIN_PROBES).
#: Recall@10 against exact search: 0.96 on 4.6k SNLI rows x 48 dimensions, 0.976 on 98k rows
#: x 256 (``benchmarks/bench_measures.py --approximate``).
IVF_MIN_LISTS: int = 16
IVF_MAX_LISTS: int = 4096
IVF_TRAIN_ROWS_PER_LIST: int = 64
IVF_ITERATIONS: int = 10
IVF_PROBE_SHARE: float = 1 / 8
IVF_MIN_PROBES: int = 16

#: Target size of one block of the similarity matrix, in float32 cells (64 MiB).
BLOCK_CELLS: int = 16 * 1024 * 1024

ProgressCallback = Callable[[dict], object]


# --------------------------------------------------------------------------------------------
# validation and small helpers


def as_matrix(X, name: str) -> np.ndarray:
    if is_partitioned(X):  # Φ's rows on the workers: checked there, read a block at a time
        if not X.all_finite():
            raise ValueError(f"{name} must be finite; found NaN or infinite values")
        return X
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n_rows, n_features); got shape {X.shape}")
    if not np.issubdtype(X.dtype, np.number) or np.issubdtype(X.dtype, np.complexfloating):
        raise ValueError(f"{name} must hold real numbers; got dtype {X.dtype}")
    X = np.ascontiguousarray(X, dtype=np.float32)
    # in row chunks: a whole-array mask of Φ is n x d bytes (1.3 GB at 5M rows x 256)
    if not all(np.isfinite(X[lo:lo + FINITE_CHUNK]).all()
               for lo in range(0, X.shape[0], FINITE_CHUNK)):
        raise ValueError(f"{name} must be finite; found NaN or infinite values")
    return X


#: Rows per step of :func:`as_matrix`'s finiteness check.
FINITE_CHUNK = 65_536


def as_labels(y, n: int, name: str) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or len(y) != n:
        raise ValueError(f"{name} must be 1-D with {n} entries (one per row); got shape {y.shape}")
    return y


def as_mask(mask, n: int, name: str) -> np.ndarray:
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.shape != (n,):
        raise ValueError(
            f"{name} must be a boolean array of shape ({n},); got dtype {mask.dtype}, "
            f"shape {mask.shape}"
        )
    return mask


def check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    try:
        out = tuple(sorted({int(k) for k in ks}))
    except (TypeError, ValueError):
        raise ValueError(f"ks must be positive integers; got {ks!r}") from None
    if not out or out[0] < 1 or any(int(k) != k for k in ks):
        raise ValueError(f"ks must be a non-empty list of positive integers; got {ks!r}")
    return out


#: Rows normalised per step: the temporaries of a step (its squares, its norms) stay small
#: (64 MB at 256 float32 columns) where one step over 1M rows held 1 GB beside the result.
NORMALIZE_CHUNK = 65_536


def l2_normalize(X: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Return a float32 copy of ``X`` (or of ``X[rows]``) with unit-length rows (all-zero rows
    stay zero), :data:`NORMALIZE_CHUNK` rows at a time: every row is computed as a whole-array
    normalisation computes it (bit for bit), without the whole-array temporaries, and
    ``rows`` are gathered chunk by chunk, never as a copy of ``X[rows]``.

    A zero row has cosine similarity 0, i.e. cosine distance 1, to every other row.
    """
    X = X if is_partitioned(X) else np.asarray(X)  # Φ on the workers: fetched a chunk a time
    n = X.shape[0] if rows is None else len(rows)
    out = np.empty((n,) + X.shape[1:], dtype=np.float32)
    for start in range(0, n, NORMALIZE_CHUNK):
        stop = min(n, start + NORMALIZE_CHUNK)
        part = X[start:stop] if rows is None else X[rows[start:stop]]
        part = np.asarray(part, dtype=np.float32)
        norms = np.linalg.norm(part, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        np.divide(part, norms, out=out[start:stop])
    return out


def query_block_rows(n_reference: int, block_size: int | None) -> int:
    if block_size is not None:
        if int(block_size) < 1:
            raise ValueError(f"block_size must be a positive integer; got {block_size!r}")
        return int(block_size)
    return max(1, min(4096, BLOCK_CELLS // max(1, n_reference)))


def search_bytes(n_queries: int, width: int, k: int, block_rows: int, n_reference: int) -> int:
    """About what one search of ``n_queries`` rows over a reference set of ``n_reference``
    rows (:func:`exact_topk`, a copy of the set's unit rows) holds: the set's rows, a block of
    similarities and its top-k candidates (half as much again), the results."""
    block = min(block_rows, n_queries) * n_reference * 4
    return n_reference * width * 4 + block * 3 // 2 + n_queries * (4 * k + 8)


def emit(callback: ProgressCallback | None, fraction: float, message: str) -> None:
    if callback is not None:
        callback({"stage": "knn", "fraction": float(min(1.0, max(0.0, fraction))),
                  "message": message})


# --------------------------------------------------------------------------------------------
# top-k search


def _topk_block(block: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` similarities (descending) and column indices of each row of ``block``.

    The k-th largest value among the first ``m`` columns is a lower bound of the k-th largest
    over all columns, so every true top-k entry passes ``block >= bound``: only those candidates
    are sorted, which is several times faster than a full partition of wide blocks.
    """
    b, n = block.shape
    if n <= 8 * k or n <= 4096:
        if k < n:
            part = np.argpartition(-block, k - 1, axis=1)[:, :k]
        else:
            part = np.broadcast_to(np.arange(n), (b, n))
        vals = np.take_along_axis(block, part, axis=1)
        order = np.argsort(-vals, axis=1, kind="stable")
        return np.take_along_axis(vals, order, axis=1), np.take_along_axis(part, order, axis=1)
    m = max(8 * k, n // 8)
    bound = np.partition(block[:, :m], m - k, axis=1)[:, m - k]
    flat = np.flatnonzero(block >= bound[:, None])  # ~10x faster than a 2-D np.nonzero
    rows, cols = np.divmod(flat, n)
    vals = block.ravel()[flat]
    order = np.argsort(rows * 4.0 + (1.0 - vals.astype(np.float64)), kind="stable")
    counts = np.bincount(rows, minlength=b)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    take = order[starts[:, None] + np.arange(k)]
    return vals[take], cols[take]


def _topk_values_block(block: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` similarities (descending) of each row of ``block`` and the column of the
    largest, as a ``(rows, 1)`` array: :func:`_topk_block` without the other k - 1 indices.

    Narrow blocks (where :func:`_topk_block` would arg-partition whole rows) partition the
    values alone, 2.5-4x faster; ``block`` is overwritten.
    """
    b, n = block.shape
    if not (n <= 8 * k or n <= 4096):
        vals, idx = _topk_block(block, k)
        return vals, idx[:, :1]
    nearest = block.argmax(axis=1)[:, None]
    if k < n:
        block.partition(n - k, axis=1)
        block = block[:, n - k:]
    vals = np.sort(block, axis=1)[:, ::-1]
    return np.ascontiguousarray(vals), nearest


def exact_topk(Qn: np.ndarray, Rn: np.ndarray, k: int, block_rows: int,
                on_block: Callable[[int], None] | None = None, *,
                nearest_only: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` similarities of each query over ``Rn`` and their row indices (with
    ``nearest_only``, only the nearest row's index: an ``(n_queries, 1)`` array)."""
    k = min(k, Rn.shape[0])
    if np.may_share_memory(Qn, Rn):
        # numpy computes ``A @ A.T`` of one aligned array by BLAS's symmetric kernel (syrk),
        # which rounds otherwise than the general one every other block takes: a copy keeps
        # one kernel, so rows sent to a worker (unaligned there: a copy, so ``gemm``) come
        # out the same bits
        Rn = Rn.copy()
    sims = np.empty((Qn.shape[0], k), dtype=np.float32)
    idx = np.empty((Qn.shape[0], 1 if nearest_only else k), dtype=np.int64)
    select = _topk_values_block if nearest_only else _topk_block
    # one buffer for every block's similarities: a fresh block each time costs its page
    # faults (tens of MB), 20-40 % of a search of 64-dimensional rows (the map's)
    buffer = np.empty((min(block_rows, Qn.shape[0]), Rn.shape[0]),
                      dtype=np.result_type(Qn.dtype, Rn.dtype))
    for start in range(0, Qn.shape[0], block_rows):
        stop = min(start + block_rows, Qn.shape[0])
        block = np.matmul(Qn[start:stop], Rn.T, out=buffer[:stop - start])
        sims[start:stop], idx[start:stop] = select(block, k)
        if on_block is not None:
            on_block(stop - start)
    return sims, idx


def _spherical_kmeans(X: np.ndarray, n_lists: int, rng: np.random.Generator) -> np.ndarray:
    """``n_lists`` unit centroids of the unit rows ``X``: seeded rows to start, then
    :data:`IVF_ITERATIONS` rounds of assigning each row to its most similar centroid and
    normalising the sums (a centroid that loses every row keeps its place)."""
    centroids = X[np.sort(rng.choice(X.shape[0], size=n_lists, replace=False))].copy()
    for _ in range(IVF_ITERATIONS):
        assign = _nearest_centroid(X, centroids)
        sums = np.zeros_like(centroids)
        np.add.at(sums, assign, X)
        empty = np.bincount(assign, minlength=n_lists) == 0
        sums[empty] = centroids[empty]
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        centroids = (sums / norms).astype(np.float32)
    return centroids


def _nearest_centroid(X: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """The most similar centroid of each row of ``X`` (blocks of 65,536 rows)."""
    out = np.empty(X.shape[0], dtype=np.int64)
    for start in range(0, X.shape[0], 65_536):
        out[start:start + 65_536] = (X[start:start + 65_536] @ centroids.T).argmax(axis=1)
    return out


def _by_index_then_similarity(sims: np.ndarray, idx: np.ndarray
                              ) -> tuple[np.ndarray, np.ndarray]:
    """Each row's entries by similarity, descending, equal similarities by row index."""
    by_index = np.argsort(idx, axis=1, kind="stable")
    sims, idx = np.take_along_axis(sims, by_index, 1), np.take_along_axis(idx, by_index, 1)
    order = np.argsort(-sims, axis=1, kind="stable")
    return np.take_along_axis(sims, order, 1), np.take_along_axis(idx, order, 1)


def approx_topk(Qn: np.ndarray, Rn: np.ndarray, k: int,
                random_state: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` similarities of each unit query over the unit rows ``Rn`` by an inverted file
    (IVF): the reference rows are grouped around ``sqrt(n)`` centroids (spherical k-means on a
    seeded sample) and each query is compared with the rows of its :data:`IVF_PROBE_SHARE`
    most similar groups only (at least :data:`IVF_MIN_PROBES`), exactly, by matrix products.

    Plain NumPy and BLAS: nothing to compile (pynndescent's index, used before, compiled for
    26 s in every new process), and a group of clustered rows is found whole. A query whose
    probed groups hold fewer than ``k`` rows is searched exactly.
    """
    n = Rn.shape[0]
    k = min(k, n)
    if n < APPROX_MIN_REFERENCE:  # an index does not pay off on few rows
        return exact_topk(Qn, Rn, k, query_block_rows(n, None))
    rng = np.random.default_rng(random_state)
    n_lists = int(min(IVF_MAX_LISTS, max(IVF_MIN_LISTS, round(np.sqrt(n)))))
    train_rows = IVF_TRAIN_ROWS_PER_LIST * n_lists
    train = Rn if n <= train_rows else Rn[np.sort(rng.choice(n, size=train_rows,
                                                             replace=False))]
    centroids = _spherical_kmeans(np.ascontiguousarray(train), n_lists, rng)
    del train
    group = _nearest_centroid(Rn, centroids)
    members = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[members], np.arange(n_lists + 1))
    del group
    n_probe = min(n_lists, max(IVF_MIN_PROBES, int(np.ceil(n_lists * IVF_PROBE_SHARE))))
    nq = Qn.shape[0]
    probes = np.argpartition(-(Qn @ centroids.T), n_probe - 1, axis=1)[:, :n_probe]
    queries = np.repeat(np.arange(nq), n_probe)
    lists = probes.ravel()
    by_list = np.argsort(lists, kind="stable")
    queries, lists = queries[by_list], lists[by_list]
    query_bounds = np.searchsorted(lists, np.arange(n_lists + 1))
    best_sims = np.full((nq, k), -np.inf, dtype=np.float32)
    best_idx = np.full((nq, k), -1, dtype=np.int64)
    for g in range(n_lists):
        qs = queries[query_bounds[g]:query_bounds[g + 1]]
        rows = members[bounds[g]:bounds[g + 1]]
        if not len(qs) or not len(rows):
            continue
        sims, cols = _topk_block(Qn[qs] @ Rn[rows].T, k)
        cand_sims = np.concatenate([best_sims[qs], sims], axis=1)
        cand_idx = np.concatenate([best_idx[qs], rows[cols]], axis=1)
        keep = np.argpartition(-cand_sims, k - 1, axis=1)[:, :k]
        best_sims[qs] = np.take_along_axis(cand_sims, keep, 1)
        best_idx[qs] = np.take_along_axis(cand_idx, keep, 1)
    short = np.flatnonzero((best_idx < 0).any(axis=1))
    if len(short):  # probed groups too small for k: those queries exactly
        best_sims[short], best_idx[short] = exact_topk(Qn[short], Rn, k,
                                                       query_block_rows(n, None))
    return _by_index_then_similarity(best_sims, best_idx)


def resolve_method(method: str, n_queries: int, n_reference: int) -> str:
    if method not in ("auto", "exact", "approximate"):
        raise ValueError(f"method must be 'auto', 'exact' or 'approximate'; got {method!r}")
    if method == "auto":
        return "approximate" if n_queries * n_reference > APPROX_MIN_PAIRS else "exact"
    return method


def nearest_neighbors(queries, reference, *, n_neighbors: int = 10, method: str = "auto",
                      block_size: int | None = None,
                      random_state: int | None = 0) -> tuple[np.ndarray, np.ndarray]:
    """Cosine-distance nearest neighbours of each query row among the reference rows.

    Parameters
    ----------
    queries : array of shape (n_queries, n_features)
    reference : array of shape (n_reference, n_features)
    n_neighbors : int, default 10
        Neighbours per query; capped at ``n_reference``.
    method : {"auto", "exact", "approximate"}, default "auto"
        ``"exact"``: blocked matrix product; ``"approximate"``: an inverted file
        (:func:`approx_topk`);
        ``"auto"``: approximate above :data:`APPROX_MIN_PAIRS` query x reference pairs.
    block_size : int, optional
        Query rows per block of the exact search (default: ~64 MiB of similarities).
    random_state : int or None, default 0
        Seed of the approximate index.

    Returns
    -------
    distances : ndarray of shape (n_queries, k), float32, ascending per row
        Cosine distances ``1 - cos``, in [0, 2].
    indices : ndarray of shape (n_queries, k), int64
        Row positions in ``reference``.
    """
    Q = as_matrix(queries, "queries")
    R = as_matrix(reference, "reference")
    if Q.shape[1] != R.shape[1]:
        raise ValueError(f"queries and reference must have the same number of columns; got "
                         f"{Q.shape[1]} and {R.shape[1]}")
    if R.shape[0] == 0:
        raise ValueError("reference must have at least one row")
    if int(n_neighbors) < 1:
        raise ValueError(f"n_neighbors must be a positive integer; got {n_neighbors!r}")
    Qn, Rn = l2_normalize(Q), l2_normalize(R)
    if resolve_method(method, len(Q), len(R)) == "approximate":
        sims, idx = approx_topk(Qn, Rn, int(n_neighbors), random_state)
    else:
        sims, idx = exact_topk(Qn, Rn, int(n_neighbors), query_block_rows(len(R), block_size))
    return np.clip(1.0 - sims, 0.0, 2.0).astype(np.float32), idx

