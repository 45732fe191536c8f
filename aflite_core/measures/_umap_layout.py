"""UMAP's algorithm (McInnes et al., 2018) on given neighbours, compiled once and cached on disk.

The steps are umap-learn 0.5's, with the same constants: the fuzzy simplicial set of the k
nearest neighbours (``smooth_knn_dist`` and ``compute_membership_strengths``, vectorised here
with NumPy), its fuzzy union with its transpose, the ``a``/``b`` curve of ``min_dist`` and
``spread``, and the layout by stochastic gradient descent with negative sampling
(``optimize_layout_euclidean``, single-threaded, so the map is the same for a seed).
New rows are placed the way ``UMAP.transform`` places them; :func:`polish` then moves every
row a little towards its own nearest rows among all rows (see its docstring: this module's one
step that is not umap-learn's).

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

__all__ = ["find_ab", "fuzzy_graph", "layout", "place", "polish", "polish_codes", "scaled_init"]

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


def _attraction(dx, dy, a, b, two_ab, one, clip):
    """The layout's attractive step along (dx, dy), clipped, before the learning rate."""
    dist2 = dx * dx + dy * dy
    coeff = np.float32(0.0)
    if dist2 > 0.0:
        powered = dist2 ** b  # one power per sample: d^(2(b-1)) = d^(2b) / d^2
        coeff = -two_ab * (powered / dist2) / (a * powered + one)
    return min(max(coeff * dx, -clip), clip), min(max(coeff * dy, -clip), clip)


_attraction = _jit(_attraction)


def _repulsion(dx, dy, a, b, two_gamma_b, eps, one, clip):
    """The layout's repulsive step from a negative sample at (dx, dy) (not the row itself),
    clipped, before the learning rate; a sample at the same point pushes by ``clip``."""
    dist2 = dx * dx + dy * dy
    if dist2 > 0.0:
        coeff = two_gamma_b / ((eps + dist2) * (a * dist2 ** b + one))
        if coeff > 0.0:
            return min(max(coeff * dx, -clip), clip), min(max(coeff * dy, -clip), clip)
    return clip, clip


_repulsion = _jit(_repulsion)


def _sgd(head_embedding, tail_embedding, head, tail, epochs_per_sample, epoch_of_next_sample,
         epochs_per_negative_sample, epoch_of_next_negative_sample, a, b, gamma, initial_alpha,
         n_epochs, epoch_from, epoch_to, move_tail, state):
    """Epochs ``epoch_from .. epoch_to - 1`` of umap-learn's ``optimize_layout_euclidean`` for
    2-D, one thread (the sampling schedules and the random state carried in the arrays)."""
    n_tail = np.uint64(tail_embedding.shape[0])
    # float32 throughout: the positions are float32 and single-precision powers are the cost
    a = np.float32(a)
    b = np.float32(b)
    one = np.float32(1.0)
    eps = np.float32(0.001)
    clip = np.float32(_CLIP)
    two_ab = np.float32(2.0 * a * b)
    two_gamma_b = np.float32(2.0 * gamma * b)
    for epoch in range(epoch_from, epoch_to):
        alpha = np.float32(initial_alpha * (1.0 - epoch / n_epochs))
        for i in range(epochs_per_sample.shape[0]):
            if epoch_of_next_sample[i] > epoch:
                continue
            j = head[i]
            k = tail[i]
            gx, gy = _attraction(head_embedding[j, 0] - tail_embedding[k, 0],
                                 head_embedding[j, 1] - tail_embedding[k, 1], a, b, two_ab,
                                 one, clip)
            gx *= alpha
            gy *= alpha
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
                if j == k and dx * dx + dy * dy <= 0.0:
                    continue
                gx, gy = _repulsion(dx, dy, a, b, two_gamma_b, eps, one, clip)
                head_embedding[j, 0] += gx * alpha
                head_embedding[j, 1] += gy * alpha
            epoch_of_next_negative_sample[i] += n_neg * epochs_per_negative_sample[i]
    return head_embedding


_sgd = _jit(_sgd)

#: Steps the layout's epochs are run in when its progress is followed (a report after each).
LAYOUT_STEPS = 20


def _optimise(head_embedding, tail_embedding, head, tail, epochs_per_sample, a, b, gamma,
              initial_alpha, negative_sample_rate, n_epochs, move_tail, state,
              callback=None):
    """:func:`_sgd` over all ``n_epochs`` epochs, in :data:`LAYOUT_STEPS` steps with
    ``callback(fraction of the epochs done)`` after each when given: the same operations in
    the same order as one call (the schedules and the random state go on from step to step),
    so the same positions."""
    epoch_of_next_sample = epochs_per_sample.copy()
    epochs_per_negative_sample = epochs_per_sample / negative_sample_rate
    epoch_of_next_negative_sample = epochs_per_negative_sample.copy()
    cuts = np.linspace(0, n_epochs, (LAYOUT_STEPS if callback else 1) + 1).astype(np.int64)
    for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        if hi > lo:
            _sgd(head_embedding, tail_embedding, head, tail, epochs_per_sample,
                 epoch_of_next_sample, epochs_per_negative_sample,
                 epoch_of_next_negative_sample, a, b, gamma, initial_alpha, n_epochs, lo, hi,
                 move_tail, state)
        if callback is not None:
            callback(hi / max(n_epochs, 1))
    return head_embedding


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
           initial_alpha: float = 1.0, callback=None) -> np.ndarray:
    """Optimise the 2-D positions of the graph's rows (umap-learn's ``simplicial_set_embedding``
    after its initialisation): edges lighter than max / n_epochs are dropped, each edge is
    sampled in proportion to its weight, with ``negative_sample_rate`` negative samples.
    ``callback`` (optional) is given the share of the epochs done, a step at a time (the
    same positions)."""
    coo = graph.tocoo()
    keep = coo.data >= coo.data.max() / float(n_epochs)
    head = coo.row[keep].astype(np.int32)
    tail = coo.col[keep].astype(np.int32)
    eps = _epochs_per_sample(coo.data[keep].astype(np.float64), n_epochs)
    emb = np.ascontiguousarray(init, dtype=np.float32).copy()
    return _optimise(emb, emb, head, tail, eps, float(a), float(b), float(gamma),
                     float(initial_alpha), float(negative_sample_rate), int(n_epochs), True,
                     _seed_state(random_state), callback)


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
    return _optimise(init, fitted.copy(), coo.row.astype(np.int32), coo.col.astype(np.int32),
                     eps, float(a), float(b), 1.0, 0.25, float(negative_sample_rate),
                     int(n_epochs), False, _seed_state(random_state))


# ----------------------------------------------------------------------------------- polish

#: The polish's passes over every row's edges, its learning rate (the first pass's; it falls
#: linearly as the layout's does) and its negative samples per edge. Chosen at 100k SNLI-like
#: rows fitted on 20,000 (a grid on one map, 2026-11-29): 3 passes at 0.1 with one negative
#: sample raised the map's neighbour recall@10 from 0.035 to 0.135 and kept its
#: trustworthiness (0.897 -> 0.895); more passes or a higher rate lowered both (7 passes:
#: 0.120; rate 0.2: 0.086), a second negative sample lowered the recall (0.113).
#: benchmarks/bench_projection.py at 100k: recall 0.026 -> 0.127, trust 0.894 -> 0.892.
POLISH_PASSES: int = 3
POLISH_RATE: float = 0.1
POLISH_NEGATIVES: int = 1
#: A row's candidate neighbours: the rows whose nearest fitted row is one of its nearest
#: fitted rows (the columns the caller gives: 8 in the map), whole buckets until at least
#: POLISH_CANDIDATES rows.
POLISH_CANDIDATES: int = 48
#: The polish gives a row at most this many neighbours (the map's n_neighbors, up to 200,
#: would find few more among about POLISH_CANDIDATES candidates, at 8 bytes an edge a row).
POLISH_MAX_NEIGHBOURS: int = 30
#: The reduced unit rows' int8 codes: level = round(value * 127) (a unit row's values are in
#: [-1, 1]); a cosine is the codes' product / 127^2 (recall 0.135 against 0.137 with float32).
CODE_SCALE: float = 127.0
#: Rows a thread finds neighbours for at a time.
POLISH_CHUNK: int = 65_536


def polish_codes(unit_rows: np.ndarray) -> np.ndarray:
    """The int8 codes of reduced unit rows the polish compares (64 bytes a row at 64
    dimensions): each value times 127, rounded, POLISH_CHUNK rows at a time (no float copy of
    them all). The same rows give the same codes wherever they are made (a worker or here)."""
    codes = np.empty(unit_rows.shape, dtype=np.int8)
    for start in range(0, len(unit_rows), POLISH_CHUNK):
        part = unit_rows[start:start + POLISH_CHUNK]
        codes[start:start + POLISH_CHUNK] = np.rint(np.clip(part, -1.0, 1.0) * CODE_SCALE)
    return codes


def _row_memberships(dists, out, k):
    """One row's memberships from its neighbours' distances (``inf`` for a missing one):
    umap-learn's ``smooth_knn_dist`` (local connectivity 1: 1 within the nearest positive
    distance rho, then exp(-(d - rho) / sigma), sigma found so that they sum to log2(k + 1))."""
    target = np.log2(np.float64(k + 1))
    rho = np.inf
    total = 0.0
    count = 0
    for t in range(dists.shape[0]):
        d = dists[t]
        if np.isfinite(d):
            total += d
            count += 1
            if 0.0 < d < rho:
                rho = d
    if not np.isfinite(rho):
        rho = 0.0
    lo = 0.0
    hi = np.inf
    mid = 1.0
    for _ in range(64):
        psum = 0.0
        for t in range(dists.shape[0]):
            if np.isfinite(dists[t]):
                shifted = dists[t] - rho
                psum += np.exp(-shifted / mid) if shifted > 0.0 else 1.0
        if abs(psum - target) < _SMOOTH_K_TOLERANCE:
            break
        if psum > target:
            hi = mid
            mid = (lo + hi) / 2.0
        else:
            lo = mid
            mid = mid * 2.0 if hi == np.inf else (lo + hi) / 2.0
    sigma = max(mid, _MIN_K_DIST_SCALE * total / max(1, count + 1))
    for t in range(dists.shape[0]):
        shifted = dists[t] - rho
        if not np.isfinite(dists[t]):
            out[t] = 0.0
        elif shifted <= 0.0 or sigma <= 0.0:
            out[t] = 1.0
        else:
            out[t] = np.exp(-shifted / sigma)


_row_memberships = _jit(_row_memberships)


def _rows_neighbours(lo, hi, nearest_fitted, order, starts, codes, scale, n_candidates,
                     idx, weights):
    """Rows ``lo``..``hi``: their ``idx.shape[1]`` nearest other rows among the candidates
    (the rows of their nearest fitted rows' buckets), by the cosine of their codes, and the
    memberships of those edges. Ties keep the first candidate met (buckets in order of
    nearness, rows in order within one): the same neighbours whatever the threads."""
    k = idx.shape[1]
    best = np.empty(k, dtype=np.float32)
    which = np.empty(k, dtype=np.int32)
    out = np.empty(k, dtype=np.float32)
    width = codes.shape[1]
    for i in range(lo, hi):
        best[:] = np.inf
        which[:] = -1
        seen = 0
        for t in range(nearest_fitted.shape[1]):
            if seen >= n_candidates:
                break
            f = nearest_fitted[i, t]
            if f < 0:
                continue
            for p in range(starts[f], starts[f + 1]):
                j = order[p]
                seen += 1
                if j == i:
                    continue
                dot = 0
                for d in range(width):
                    dot += np.int32(codes[i, d]) * np.int32(codes[j, d])
                dist = np.float32(1.0 - dot * scale)
                if dist < 0.0:
                    dist = np.float32(0.0)
                if not dist < best[k - 1]:
                    continue
                u = k - 1  # buckets share no row and a row's fitted rows are distinct
                # (an exact search's): no candidate is met twice
                while u > 0 and best[u - 1] > dist:
                    best[u] = best[u - 1]
                    which[u] = which[u - 1]
                    u -= 1
                best[u] = dist
                which[u] = j
        _row_memberships(best, out, k)
        idx[i] = which
        weights[i] = out


_rows_neighbours = _jit(_rows_neighbours)


def _polish_passes(emb, idx, weights, a, b, passes, rate, negatives, state):
    """The polish's passes over every row's edges, in row order (one thread: the same map for
    a seed). Pass p applies an edge of weight w when floor(p w) > floor((p - 1) w) (the
    layout's sampling in proportion to weight, without a per-edge schedule): a heavy edge
    every pass, one of weight 0.4 in the third only."""
    n, k = idx.shape
    n_rows = np.uint64(n)
    a = np.float32(a)
    b = np.float32(b)
    one = np.float32(1.0)
    eps = np.float32(0.001)
    clip = np.float32(_CLIP)
    two_ab = np.float32(2.0 * a * b)
    two_b = np.float32(2.0 * b)
    for p in range(1, passes + 1):
        alpha = np.float32(rate * (1.0 - p / (passes + 1.0)))
        for i in range(n):
            for t in range(k):
                j = idx[i, t]
                if j < 0:
                    continue
                w = weights[i, t]
                if np.floor(p * w) == np.floor((p - 1) * w):
                    continue
                gx, gy = _attraction(emb[i, 0] - emb[j, 0], emb[i, 1] - emb[j, 1], a, b, two_ab,
                                     one, clip)
                gx *= alpha
                gy *= alpha
                emb[i, 0] += gx
                emb[i, 1] += gy
                emb[j, 0] -= gx
                emb[j, 1] -= gy
                for _ in range(negatives):
                    r = int(_xorshift(state) % n_rows)
                    if r == i:
                        continue
                    gx, gy = _repulsion(emb[i, 0] - emb[r, 0], emb[i, 1] - emb[r, 1], a, b,
                                        two_b, eps, one, clip)
                    emb[i, 0] += gx * alpha
                    emb[i, 1] += gy * alpha
    return emb


_polish_passes = _jit(_polish_passes)


def polish(coords: np.ndarray, codes: np.ndarray, nearest_fitted: np.ndarray, *,
           n_fitted: int, k: int, a: float, b: float, random_state: int,
           threads: int = 1) -> np.ndarray:
    """Move every row of a placed map a little towards its own nearest rows (in place).

    A map fitted on a sample places each other row against the fitted rows only, so two
    placed rows that are neighbours in Φ land near the same fitted rows, not next to each
    other. The polish gives every row its ``k`` nearest rows among all rows, approximately:
    the candidates are the rows whose nearest fitted row (``nearest_fitted[:, 0]``) is one of
    the row's nearest fitted rows (every column of ``nearest_fitted``), compared by the
    cosine of their ``codes`` (:func:`polish_codes`); their memberships are umap-learn's.
    Then POLISH_PASSES passes of the layout's attraction (and POLISH_NEGATIVES negative
    samples) at a small rate run over those edges from where the rows are.

    Parameters
    ----------
    coords : float32 array (n_rows, 2)
        The placed map; moved in place and returned.
    codes : int8 array (n_rows, dims)
        Every row's reduced unit row as :func:`polish_codes` makes it.
    nearest_fitted : int32 array (n_rows, m)
        Each row's nearest fitted rows (positions in the fitted sample), nearest first.
    n_fitted : int
        Rows in the fitted sample.
    k : int
        Neighbours a row gets (the map's n_neighbors; at most POLISH_MAX_NEIGHBOURS).
    a, b : float
        The layout's curve (:func:`find_ab`).
    random_state : int
        Seeds the negative samples.
    threads : int, default 1
        Threads that find the neighbours (rows are independent: the same edges whatever
        the count); the passes run on one.
    """
    from concurrent.futures import ThreadPoolExecutor  # only a polish starts threads

    n = coords.shape[0]
    k = max(1, min(int(k), POLISH_MAX_NEIGHBOURS, n - 1))
    top = nearest_fitted[:, 0]
    order = np.argsort(top, kind="stable").astype(np.int32)
    starts = np.searchsorted(top[order], np.arange(n_fitted + 1)).astype(np.int64)
    idx = np.empty((n, k), dtype=np.int32)
    weights = np.empty((n, k), dtype=np.float32)
    scale = 1.0 / CODE_SCALE ** 2

    def chunk(lo: int) -> None:
        _rows_neighbours(lo, min(n, lo + POLISH_CHUNK), nearest_fitted, order, starts, codes,
                         scale, POLISH_CANDIDATES, idx, weights)

    with ThreadPoolExecutor(max_workers=max(1, threads),
                            thread_name_prefix="map-polish") as pool:
        list(pool.map(chunk, range(0, n, POLISH_CHUNK)))
    return _polish_passes(coords, idx, weights, float(a), float(b), POLISH_PASSES,
                          POLISH_RATE, POLISH_NEGATIVES, _seed_state(random_state))
