"""UMAP's algorithm (McInnes et al., 2018) on given neighbours, compiled once and cached on disk.

The steps are umap-learn 0.5's, with the same constants: the fuzzy simplicial set of the k
nearest neighbours (``smooth_knn_dist`` and ``compute_membership_strengths``, vectorised here
with NumPy), its fuzzy union with its transpose, the ``a``/``b`` curve of ``min_dist`` and
``spread``, and the layout by stochastic gradient descent with negative sampling
(``optimize_layout_euclidean``, single-threaded, so the map is the same for a seed).
New rows are placed the way ``UMAP.transform`` places them.

Why not call umap-learn: its layout kernel is compiled by numba in every new process (about
5 s, plus 1.8 s to import it and pynndescent), which alone is more than the 10k-row map's
budget. The one kernel here is compiled with ``cache=True`` into the user cache folder
(:func:`aflite_core.numba_cache.numba_cache_dir`), so a new process loads it in a fraction of
a second; when no cache folder is writable it is compiled in memory instead (the map is the
same, only slower to start). The neighbours come from the caller (the exact blocked cosine search of
:mod:`aflite_core.measures._neighbors`), so no approximate index is built either.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp

from aflite_core.numba_cache import jit as _jit

__all__ = ["find_ab", "fuzzy_graph", "layout", "place", "scaled_init"]

#: umap-learn's constants: smooth_knn_dist's tolerance and its floor on sigma.
_SMOOTH_K_TOLERANCE = 1e-5
_MIN_K_DIST_SCALE = 1e-3
#: Gradient clip of the layout (umap-learn's ``clip``).
_CLIP = 4.0


def _xorshift(state: np.ndarray) -> np.uint64:
    x = state[0]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    state[0] = x
    return x * np.uint64(2685821657736338717)


_xorshift = _jit(_xorshift)


def _sgd(head_embedding, tail_embedding, head, tail, epochs_per_sample, a, b, gamma,
         initial_alpha, negative_sample_rate, n_epochs, move_tail, state):
    """umap-learn's ``optimize_layout_euclidean`` for 2-D, one thread."""
    n_tail = np.uint64(tail_embedding.shape[0])
    # float32 throughout: the positions are float32 and single-precision powers are the cost
    a = np.float32(a)
    b = np.float32(b)
    one = np.float32(1.0)
    eps = np.float32(0.001)
    clip = np.float32(_CLIP)
    two_ab = np.float32(2.0 * a * b)
    two_gamma_b = np.float32(2.0 * gamma * b)
    epoch_of_next_sample = epochs_per_sample.copy()
    epochs_per_negative_sample = epochs_per_sample / negative_sample_rate
    epoch_of_next_negative_sample = epochs_per_negative_sample.copy()
    for epoch in range(n_epochs):
        alpha = np.float32(initial_alpha * (1.0 - epoch / n_epochs))
        for i in range(epochs_per_sample.shape[0]):
            if epoch_of_next_sample[i] > epoch:
                continue
            j = head[i]
            k = tail[i]
            dx = head_embedding[j, 0] - tail_embedding[k, 0]
            dy = head_embedding[j, 1] - tail_embedding[k, 1]
            dist2 = dx * dx + dy * dy
            coeff = np.float32(0.0)
            if dist2 > 0.0:
                powered = dist2 ** b  # one power per sample: d^(2(b-1)) = d^(2b) / d^2
                coeff = -two_ab * (powered / dist2) / (a * powered + one)
            gx = min(max(coeff * dx, -clip), clip) * alpha
            gy = min(max(coeff * dy, -clip), clip) * alpha
            head_embedding[j, 0] += gx
            head_embedding[j, 1] += gy
            if move_tail:
                tail_embedding[k, 0] -= gx
                tail_embedding[k, 1] -= gy
            epoch_of_next_sample[i] += epochs_per_sample[i]
            n_neg = int((epoch - epoch_of_next_negative_sample[i])
                        / epochs_per_negative_sample[i])
            for _ in range(n_neg):
                k = int(_xorshift(state) % n_tail)
                dx = head_embedding[j, 0] - tail_embedding[k, 0]
                dy = head_embedding[j, 1] - tail_embedding[k, 1]
                dist2 = dx * dx + dy * dy
                if dist2 > 0.0:
                    coeff = two_gamma_b / ((eps + dist2) * (a * dist2 ** b + one))
                elif j == k:
                    continue
                else:
                    coeff = np.float32(0.0)
                if coeff > 0.0:
                    gx = min(max(coeff * dx, -clip), clip)
                    gy = min(max(coeff * dy, -clip), clip)
                else:
                    gx = clip
                    gy = clip
                head_embedding[j, 0] += gx * alpha
                head_embedding[j, 1] += gy * alpha
            epoch_of_next_negative_sample[i] += n_neg * epochs_per_negative_sample[i]
    return head_embedding


_sgd = _jit(_sgd)


# ------------------------------------------------------------------------------------ graph


def find_ab(spread: float = 1.0, min_dist: float = 0.1) -> tuple[float, float]:
    """``a``, ``b`` of the curve 1 / (1 + a d^(2b)) that fits UMAP's target (umap-learn's
    ``find_ab_params``)."""
    from scipy.optimize import curve_fit  # lazy: +339 ms to import

    xv = np.linspace(0, spread * 3, 300)
    yv = np.where(xv < min_dist, 1.0, np.exp(-(xv - min_dist) / spread))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        params, _ = curve_fit(lambda x, a, b: 1.0 / (1.0 + a * x ** (2 * b)), xv, yv)
    return float(params[0]), float(params[1])


def _smooth_knn_dist(dists: np.ndarray, k: float, *,
                     local: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """sigma and rho of each row (umap-learn's ``smooth_knn_dist`` with bandwidth 1 and
    local_connectivity 1, or 0 when ``local`` is False, as its ``transform`` asks), one binary
    search over all rows at once. Like umap-learn's, the sums skip ``dists[:, 0]``."""
    n = dists.shape[0]
    target = np.log2(k)
    if local:
        positive = np.where(dists > 0, dists, np.inf)
        rho = positive.min(axis=1)
        rho[~np.isfinite(rho)] = 0.0
    else:
        rho = np.zeros(n)
    rest = dists[:, 1:].astype(np.float64)
    shifted = np.maximum(rest - rho[:, None], 0.0)  # exp(-0) = 1 within rho, as umap-learn
    lo = np.zeros(n)
    hi = np.full(n, np.inf)
    mid = np.ones(n)
    done = np.zeros(n, dtype=bool)
    for _ in range(64):
        psum = np.exp(-shifted / mid[:, None]).sum(axis=1)
        done |= np.abs(psum - target) < _SMOOTH_K_TOLERANCE
        if done.all():
            break
        high = (psum > target) & ~done
        low = ~high & ~done
        hi[high] = mid[high]
        mid[high] = (lo[high] + hi[high]) / 2.0
        lo[low] = mid[low]
        unbounded = low & np.isinf(hi)
        mid[unbounded] *= 2.0
        bounded = low & ~np.isinf(hi)
        mid[bounded] = (lo[bounded] + hi[bounded]) / 2.0
    mean_row = dists.mean(axis=1)
    floor = np.where(rho > 0, _MIN_K_DIST_SCALE * mean_row, _MIN_K_DIST_SCALE * dists.mean())
    sigma = np.maximum(mid, floor)
    return sigma.astype(np.float32), rho.astype(np.float32)


def _memberships(idx: np.ndarray, dists: np.ndarray, sigma: np.ndarray, rho: np.ndarray,
                 self_rows: np.ndarray | None) -> np.ndarray:
    """umap-learn's ``compute_membership_strengths``: exp(-(d - rho) / sigma), 1 within rho,
    0 for the row itself (``self_rows``: each row's own index, or None when queries are new)
    and for missing neighbours (index -1)."""
    shifted = np.maximum(dists.astype(np.float64) - rho[:, None], 0.0)
    scale = sigma.astype(np.float64)[:, None]
    vals = np.ones(shifted.shape)
    spread = (shifted > 0) & (scale > 0)
    vals[spread] = np.exp(-(shifted / np.where(scale > 0, scale, 1.0))[spread])
    if self_rows is not None:
        vals[idx == self_rows[:, None]] = 0.0
    vals[idx < 0] = 0.0
    return vals.astype(np.float32)


def fuzzy_graph(idx: np.ndarray, dists: np.ndarray) -> sp.csr_matrix:
    """The symmetric fuzzy neighbour graph of rows whose k nearest neighbours (the row itself
    first) are ``idx`` at cosine distances ``dists`` (umap-learn's ``fuzzy_simplicial_set``
    with set_op_mix_ratio=1: the fuzzy union P + Pᵀ - P∘Pᵀ)."""
    n, k = idx.shape
    sigma, rho = _smooth_knn_dist(dists, float(k))
    vals = _memberships(idx, dists, sigma, rho, np.arange(n))
    rows = np.repeat(np.arange(n), k)
    cols = np.where(idx < 0, 0, idx).ravel()
    graph = sp.csr_matrix((vals.ravel(), (rows, cols)), shape=(n, n))
    graph.eliminate_zeros()
    transpose = graph.T.tocsr()
    product = graph.multiply(transpose)
    graph = (graph + transpose - product).tocsr()
    graph.eliminate_zeros()
    return graph


# ----------------------------------------------------------------------------------- layout


def scaled_init(coords: np.ndarray, random_state: int) -> np.ndarray:
    """Start positions from any 2-D coordinates (a PCA of the rows): scaled to [0, 10] per
    axis with umap-learn's tiny seeded noise, so that no two rows start at one point."""
    coords = np.asarray(coords, dtype=np.float64)
    span = np.abs(coords).max()
    coords = coords * (10.0 / span) if span > 0 else coords
    rng = np.random.RandomState(random_state)
    coords = coords + rng.normal(scale=1e-4, size=coords.shape)
    low, high = coords.min(axis=0), coords.max(axis=0)
    width = np.where(high - low > 0, high - low, 1.0)
    return np.ascontiguousarray(10.0 * (coords - low) / width, dtype=np.float32)


def _epochs_per_sample(weights: np.ndarray, n_epochs: int) -> np.ndarray:
    out = np.full(weights.shape[0], -1.0, dtype=np.float64)
    n_samples = n_epochs * (weights / weights.max())
    positive = n_samples > 0
    out[positive] = float(n_epochs) / n_samples[positive]
    return out


def _seed_state(random_state: int) -> np.ndarray:
    seed = np.random.RandomState(random_state).randint(1, 2**62, dtype=np.int64)
    return np.array([seed], dtype=np.uint64)


def layout(graph: sp.spmatrix, init: np.ndarray, *, n_epochs: int, a: float, b: float,
           random_state: int, negative_sample_rate: int = 5, gamma: float = 1.0,
           initial_alpha: float = 1.0) -> np.ndarray:
    """Optimise the 2-D positions of the graph's rows (umap-learn's ``simplicial_set_embedding``
    after its initialisation): edges lighter than max / n_epochs are dropped, each edge is
    sampled in proportion to its weight, with ``negative_sample_rate`` negative samples."""
    coo = graph.tocoo()
    keep = coo.data >= coo.data.max() / float(n_epochs)
    head = coo.row[keep].astype(np.int32)
    tail = coo.col[keep].astype(np.int32)
    eps = _epochs_per_sample(coo.data[keep].astype(np.float64), n_epochs)
    emb = np.ascontiguousarray(init, dtype=np.float32).copy()
    return _sgd(emb, emb, head, tail, eps, float(a), float(b), float(gamma),
                float(initial_alpha), float(negative_sample_rate), int(n_epochs), True,
                _seed_state(random_state))


def place(idx: np.ndarray, dists: np.ndarray, fitted: np.ndarray, *, k: int, n_epochs: int,
          a: float, b: float, random_state: int, negative_sample_rate: int = 5,
          disconnection_distance: float = 1.0) -> np.ndarray:
    """Positions of new rows in a fitted map (umap-learn's ``UMAP.transform``).

    ``idx`` / ``dists`` are each new row's k nearest fitted rows; a new row starts at the
    membership-weighted mean of their positions (at the fitted row itself when it is an exact
    copy, at the map's centre when no neighbour is within reach) and moves for ``n_epochs``
    epochs while the fitted rows stay where they are.
    """
    idx = idx.astype(np.int32, copy=True)
    dists = np.asarray(dists, dtype=np.float32)
    idx[dists >= disconnection_distance] = -1
    # transform's smooth_knn_dist uses local_connectivity - 1 = 0: rho is 0
    sigma, rho = _smooth_knn_dist(dists, float(k), local=False)
    vals = _memberships(idx, dists, sigma, rho, None)
    n = len(idx)
    rows = np.repeat(np.arange(n), idx.shape[1])
    graph = sp.csr_matrix((vals.ravel(), (rows, np.where(idx < 0, 0, idx).ravel())),
                          shape=(n, len(fitted)))
    graph.eliminate_zeros()
    fitted = np.ascontiguousarray(fitted, dtype=np.float32)
    total = np.asarray(graph.sum(axis=1)).ravel()
    init = np.empty((n, 2), dtype=np.float32)
    has = total > 0
    init[has] = (graph[has] @ fitted) / total[has, None]
    init[~has] = fitted.mean(axis=0)
    one_r, one_c = (graph == 1).nonzero()
    if len(one_r):
        first = np.unique(one_r, return_index=True)[1]
        init[one_r[first]] = fitted[one_c[first]]
    coo = graph.tocoo()
    if coo.nnz == 0:
        return init
    coo.data[coo.data < coo.data.max() / float(n_epochs)] = 0.0
    coo.eliminate_zeros()
    eps = _epochs_per_sample(coo.data.astype(np.float64), n_epochs)
    return _sgd(init, fitted.copy(), coo.row.astype(np.int32), coo.col.astype(np.int32), eps,
                float(a), float(b), 1.0, 0.25, float(negative_sample_rate), int(n_epochs),
                False, _seed_state(random_state))
