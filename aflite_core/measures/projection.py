"""2-D projections of Φ for the dashboard: UMAP (seeded) or PCA, cached on disk.

UMAP is fitted on a seeded sample of at most ``sample_size`` rows and the other rows are
placed the way ``UMAP.transform`` does it. Rows are L2-normalised first (cosine geometry) for
both methods; for UMAP they are then reduced to ``pca_dims`` principal components of the
sample. Nearest neighbours for both steps come from the exact blocked cosine search of
:mod:`aflite_core.measures.knn` instead of pynndescent, which on a 20k-row sample is faster than
building the approximate index and avoids its JIT compilation. This uses umap-learn's
internal functions and fitted attributes (checked with umap-learn 0.5.6-0.5.12).

Results are cached under ``cache_dir`` as ``projection-<key>.npy`` (plain float32 arrays, never
pickle), where the key hashes the bytes of ``X`` and every parameter; a second call with the
same input returns in well under a second. See ``docs/measures.md``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from aflite_core._validation import check_choice, check_int, check_real, make_rng
from aflite_core.measures.neighbors import _as_matrix, _exact_topk, l2_normalize
from aflite_core.measures.registry import Measure, MeasureContext, MeasureResult, Option

#: Default largest number of rows UMAP is fitted on; the rest is transformed.
SAMPLE_SIZE: int = 20_000
#: Rows transformed per step (one progress report each).
TRANSFORM_CHUNK: int = 20_000
#: Optimisation epochs UMAP spends on transformed rows (its own default for large inputs).
TRANSFORM_EPOCHS: int = 30
#: UMAP: rows are first reduced to this many principal components (fitted on the sample),
#: which makes the neighbour searches several times cheaper; None keeps all dimensions.
PCA_DIMS: int | None = 64
#: Bump when the algorithm changes so stale cache files are not reused.
CACHE_VERSION = "2"

METHODS = ("umap", "pca")

ProgressCallback = Callable[[dict], object]


def _emit(callback: ProgressCallback | None, fraction: float, message: str) -> None:
    if callback is not None:
        callback({"stage": "projection", "fraction": float(min(1.0, max(0.0, fraction))),
                  "message": message})


def _knn(queries: np.ndarray, reference: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact cosine neighbours of unit rows: (int32 indices, float32 distances)."""
    sims, idx = _exact_topk(queries, reference, k,
                            max(1, 16 * 1024 * 1024 // max(1, len(reference))))
    return idx.astype(np.int32), np.clip(1.0 - sims, 0.0, 2.0).astype(np.float32)


def _transform(reducer, fitted: np.ndarray, rows: np.ndarray, seed: int) -> np.ndarray:
    """Place new unit rows in a fitted UMAP embedding, as ``UMAP.transform`` does.

    Same steps as umap-learn 0.5's ``transform`` (fuzzy membership to the k nearest fitted
    rows, start at the weighted mean of their positions, ``TRANSFORM_EPOCHS`` epochs of
    layout optimisation moving only the new points), with exact neighbours and a vectorised
    start instead of its per-row Python loop.
    """
    import scipy.sparse as sp
    from umap.layouts import optimize_layout_euclidean
    from umap.umap_ import compute_membership_strengths, make_epochs_per_sample, smooth_knn_dist

    k = int(reducer._n_neighbors)
    idx, dists = _knn(rows, fitted, k)
    idx[dists >= reducer._disconnection_distance] = -1
    sigmas, rhos = smooth_knn_dist(dists, float(k), local_connectivity=float(
        max(0.0, reducer.local_connectivity - 1.0)))
    r, c, v, _ = compute_membership_strengths(idx, dists, sigmas, rhos, bipartite=True)
    graph = sp.coo_matrix((v, (r, c)), shape=(len(rows), len(fitted)))
    csr = graph.tocsr()
    csr.eliminate_zeros()
    emb = reducer.embedding_.astype(np.float32)
    total = np.asarray(csr.sum(axis=1)).ravel()
    init = np.empty((len(rows), emb.shape[1]), dtype=np.float32)
    has = total > 0
    init[has] = (csr[has] @ emb) / total[has, None]
    init[~has] = emb.mean(axis=0)  # no neighbour within reach: start at the centre
    # a membership of exactly 1 means an identical fitted row: start at its position
    one_r, one_c = (csr == 1).nonzero()
    if len(one_r):
        first = np.unique(one_r, return_index=True)[1]
        init[one_r[first]] = emb[one_c[first]]
    graph.data[graph.data < graph.data.max() / float(TRANSFORM_EPOCHS)] = 0.0
    graph.eliminate_zeros()
    epochs_per_sample = make_epochs_per_sample(graph.data, TRANSFORM_EPOCHS)
    rng_state = np.random.RandomState(seed).randint(
        np.iinfo(np.int32).min + 1, np.iinfo(np.int32).max - 1, 3).astype(np.int64)
    return optimize_layout_euclidean(
        init, emb.copy(), graph.row, graph.col, TRANSFORM_EPOCHS, len(fitted),
        epochs_per_sample, reducer._a, reducer._b, rng_state, reducer.repulsion_strength,
        reducer._initial_alpha / 4.0, reducer.negative_sample_rate, False, verbose=False)


def cache_key(X: np.ndarray, params: dict) -> str:
    """Content hash of ``X`` (bytes, shape, dtype) and ``params`` (JSON), as 32 hex digits."""
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps({"shape": list(X.shape), "dtype": str(X.dtype), "params": params,
                         "version": CACHE_VERSION}, sort_keys=True).encode())
    h.update(memoryview(np.ascontiguousarray(X)).cast("B"))
    return h.hexdigest()


def _load_cached(path: Path, n_rows: int) -> np.ndarray | None:
    try:
        coords = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    if coords.shape != (n_rows, 2) or coords.dtype != np.float32:
        return None
    return coords


def _save_cached(path: Path, coords: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-projection-", suffix=".npy")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, coords, allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _pca(Xn: np.ndarray, random_state: int | None) -> np.ndarray:
    from sklearn.decomposition import PCA

    if Xn.shape[0] < 2 or Xn.shape[1] < 2:
        coords = np.zeros((Xn.shape[0], 2), dtype=np.float32)
        if Xn.shape[0] >= 2 and Xn.shape[1] == 1:
            coords[:, 0] = Xn[:, 0] - Xn[:, 0].mean()
        return coords
    solver = "randomized" if min(Xn.shape) > 50 else "full"
    return PCA(n_components=2, svd_solver=solver,
               random_state=random_state).fit_transform(Xn).astype(np.float32)


def _reduce(Xn: np.ndarray, sample: np.ndarray, n_dims: int | None,
            random_state: int | None) -> np.ndarray:
    """Project unit rows on the top ``n_dims`` principal directions of the sample, re-normalised."""
    if not n_dims or Xn.shape[1] <= n_dims or len(sample) <= n_dims:
        return Xn
    from sklearn.decomposition import PCA

    pca = PCA(n_components=n_dims, svd_solver="randomized", random_state=random_state)
    pca.fit(Xn[sample])
    Z = np.empty((Xn.shape[0], n_dims), dtype=np.float32)
    for start in range(0, Xn.shape[0], 65536):  # bounded temporary memory
        Z[start:start + 65536] = pca.transform(Xn[start:start + 65536])
    return l2_normalize(Z)


def _umap(Xn: np.ndarray, *, n_neighbors: int, min_dist: float, sample_size: int,
          pca_dims: int | None, random_state: int | None,
          callback: ProgressCallback | None) -> np.ndarray:
    n = Xn.shape[0]
    if n <= 2:
        return _pca(Xn, random_state)
    rng = make_rng(random_state)
    if n > sample_size:
        sample = np.sort(rng.choice(n, size=sample_size, replace=False))
    else:
        sample = np.arange(n)
    Xn = _reduce(Xn, sample, pca_dims, random_state)
    rest = np.setdiff1d(np.arange(n), sample, assume_unique=True)
    seed = int(rng.integers(0, 2**31 - 1)) if random_state is None else int(random_state)
    k = min(int(n_neighbors), len(sample) - 1)
    _emit(callback, 0.02, "loading UMAP")
    import umap  # lazy: importing numba-compiled UMAP takes seconds

    Xs = np.ascontiguousarray(Xn[sample])
    kwargs = {"n_components": 2, "n_neighbors": k, "min_dist": min_dist, "metric": "cosine",
              "random_state": seed, "transform_seed": seed, "init": "spectral", "n_jobs": 1}
    if len(sample) >= 4096:  # UMAP computes all pairwise distances itself below this size
        _emit(callback, 0.05, f"nearest neighbours of the {len(sample):,} fitted rows")
        kwargs["precomputed_knn"] = _knn(Xs, Xs, k)
    reducer = umap.UMAP(**kwargs)
    _emit(callback, 0.1, f"fitting UMAP on {len(sample):,} rows")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*n_jobs.*", category=UserWarning)
        warnings.filterwarnings("ignore", message=".*precomputed_knn.*", category=UserWarning)
        reducer.fit(Xs)
    coords = np.empty((n, 2), dtype=np.float32)
    coords[sample] = reducer.embedding_
    for start in range(0, len(rest), TRANSFORM_CHUNK):
        rows = rest[start:start + TRANSFORM_CHUNK]
        _emit(callback, 0.5 + 0.5 * start / len(rest),
              f"placing rows {start + 1:,}-{start + len(rows):,} of {len(rest):,}")
        coords[rows] = _transform(reducer, Xs, np.ascontiguousarray(Xn[rows]),
                                  (seed + start) % 2**32)
    return coords


def project(X, *, method: str = "umap", row_ids=None, n_neighbors: int = 15,
            min_dist: float = 0.1, sample_size: int = SAMPLE_SIZE,
            pca_dims: int | None = PCA_DIMS, random_state: int | None = 0,
            cache_dir: str | os.PathLike | None = None,
            callback: ProgressCallback | None = None) -> pd.DataFrame:
    """Project the rows of Φ to 2-D with UMAP or PCA.

    Parameters
    ----------
    X : array of shape (n_rows, n_features)
        Φ (any real dtype; used as float32). Rows are L2-normalised first.
    method : {"umap", "pca"}, default "umap"
    row_ids : array of shape (n_rows,), optional
        Returned in the ``row_id`` column (default: positions).
    n_neighbors, min_dist : UMAP parameters (ignored for PCA).
    sample_size : int, default 20000
        UMAP is fitted on a seeded sample of at most this many rows; the rest is transformed.
    pca_dims : int or None, default 64
        UMAP only: reduce the (normalised) rows to this many principal components of the
        sample, then re-normalise, before the neighbour searches. None keeps every dimension.
    random_state : int or None, default 0
        Seeds the sample, UMAP and PCA. With an int the result is reproducible.
    cache_dir : path, optional
        Folder for the on-disk cache (``projection-<key>.npy``). None disables caching;
        with ``random_state=None`` nothing is cached.
    callback : callable, optional
        Called with ``{"stage": "projection", "fraction": float, "message": str}``.

    Returns
    -------
    DataFrame with columns ``row_id``, ``x``, ``y`` (float32) and ``method``, in row order.
    """
    check_choice("method", method, METHODS)
    X = _as_matrix(X, "X")
    n = X.shape[0]
    if row_ids is None:
        row_ids = np.arange(n)
    else:
        row_ids = np.asarray(row_ids)
        if row_ids.shape != (n,):
            raise ValueError(f"row_ids must have shape ({n},) (one per row of X); got "
                             f"{row_ids.shape}")
    n_neighbors = check_int("n_neighbors", n_neighbors, minimum=2)
    min_dist = check_real("min_dist", min_dist, low=0.0, high=1.0)
    sample_size = check_int("sample_size", sample_size, minimum=10)
    if pca_dims is not None:
        pca_dims = check_int("pca_dims", pca_dims, minimum=2)
    params = {"method": method, "random_state": random_state}
    if method == "umap":
        params.update(n_neighbors=n_neighbors, min_dist=min_dist, sample_size=sample_size,
                      transform_epochs=TRANSFORM_EPOCHS, pca_dims=pca_dims)
    path = None
    if cache_dir is not None and random_state is not None:
        path = Path(cache_dir) / f"projection-{cache_key(X, params)}.npy"
        coords = _load_cached(path, n) if path.is_file() else None
        if coords is not None:
            _emit(callback, 1.0, "loaded from cache")
            return _frame(row_ids, coords, method)
    _emit(callback, 0.0, "normalising rows")
    Xn = l2_normalize(X)
    if method == "pca":
        coords = _pca(Xn, random_state)
    else:
        coords = _umap(Xn, n_neighbors=n_neighbors, min_dist=min_dist, sample_size=sample_size,
                       pca_dims=pca_dims, random_state=random_state, callback=callback)
    if path is not None:
        _save_cached(path, coords)
    _emit(callback, 1.0, "done")
    return _frame(row_ids, coords, method)


def _frame(row_ids: np.ndarray, coords: np.ndarray, method: str) -> pd.DataFrame:
    return pd.DataFrame({"row_id": row_ids, "x": coords[:, 0], "y": coords[:, 1],
                         "method": method})


# --- registry entry -------------------------------------------------------------------


#: Expected seconds of a UMAP map in a fresh process (bench_pipeline.py --extra
#: '--projection-method umap', 2 cores): importing and compiling UMAP, fitting on the sample
#: (at most SAMPLE_SIZE rows), placing the other rows.
UMAP_FIXED_SECONDS = 10.0
UMAP_FIT_SECONDS_PER_10K = 4.0
UMAP_TRANSFORM_SECONDS_PER_100K = 5.0
#: PCA's seconds per 100,000 rows.
PCA_SECONDS_PER_100K = 0.8


def _cost(n: int, params: dict) -> float:
    """Seconds per 100,000 rows (the registry's unit) of the map ``params`` ask for."""
    n = max(int(n), 1)
    if params.get("method", "pca") != "umap":
        return PCA_SECONDS_PER_100K
    fitted = min(n, int(params.get("sample_size", SAMPLE_SIZE)))
    seconds = (UMAP_FIXED_SECONDS + UMAP_FIT_SECONDS_PER_10K * fitted / 10_000
               + UMAP_TRANSFORM_SECONDS_PER_100K * (n - fitted) / 100_000)
    return seconds * 100_000 / n


def _projection(ctx: MeasureContext) -> MeasureResult:
    rep = ctx.representation
    params = {"random_state": ctx.random_state, **ctx.params}
    table = project(rep.X, row_ids=np.asarray(rep.row_ids), callback=ctx.callback(), **params)
    return MeasureResult(tables={"projection.parquet": table}, info={"params": params})


MEASURE = Measure(
    name="projection",
    label="2-D map (UMAP/PCA)",
    compute=_projection,
    files=("projection.parquet",),
    order=30,
    cost=lambda n, params: _cost(n, params),
    exports={"projection": "projection.parquet"},
    options=(
        Option(
            "method",
            "Map method",
            "pca",
            choices=("pca", "umap"),
            help="The 2-D map on the Explore page: PCA is instant; UMAP keeps "
            "neighbourhoods better, is fitted on at most 20,000 rows and "
            "compiles on first use.",
        ),
    ),
)
