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
own under another seed (0.916), in 2.9-3.2 s instead of 5.5-6.2 s. ``tests/test_svd.py``
checks the agreement on real text.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from scipy import linalg

from aflite_core._validation import check_int, check_seed

__all__ = ["truncated_svd"]


def truncated_svd(
    M,
    n_components: int,
    *,
    n_iter: int = 5,
    n_oversamples: int = 10,
    random_state: int | None = 0,
    callback: Callable[[float], object] | None = None,
) -> tuple[np.ndarray, float]:
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

    Returns
    -------
    X : numpy.ndarray of shape (n_rows, n_components)
        ``U Σ`` (what ``TruncatedSVD.fit_transform`` returns), in ``M``'s float dtype (float32
        for float32 input, else float64).
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
    Mt = M.T  # CSC view of the transpose: Mᵀ @ dense is as fast as M @ dense
    width = min(k + n_oversamples, n_rows, n_features)
    rng = np.random.default_rng(random_state)
    Z = Mt @ (M @ rng.standard_normal((n_features, width), dtype=dtype))
    steps = n_iter + 2  # the sketch, each power iteration, the final projection
    for i in range(n_iter):
        if callback is not None:
            callback((i + 1) / steps)
        Z, _ = linalg.lu(Z, permute_l=True, check_finite=False)
        Z = Mt @ (M @ Z)
    if callback is not None:
        callback((n_iter + 1) / steps)
    Q, _ = linalg.qr(Z, mode="economic", check_finite=False)  # term-side basis, V x l
    B = np.asarray(M @ Q)  # n x l
    eigenvalues, W = linalg.eigh(_gram64(B), check_finite=False)
    order = np.argsort(eigenvalues)[::-1][:k]
    W = W[:, order]
    components = Q.astype(np.float64) @ W  # V x k: the right singular vectors
    signs = np.sign(components[np.argmax(np.abs(components), axis=0), np.arange(k)])
    signs[signs == 0] = 1.0
    X = B @ (W * signs).astype(dtype)
    return X, _explained_variance_ratio(M, X)


def _gram64(B: np.ndarray, chunk_rows: int = 16_384) -> np.ndarray:
    """``BᵀB`` accumulated in float64 over row chunks (no float64 copy of all of ``B``)."""
    G = np.zeros((B.shape[1], B.shape[1]))
    for lo in range(0, B.shape[0], chunk_rows):
        part = B[lo:lo + chunk_rows].astype(np.float64)
        G += part.T @ part
    return G


def _explained_variance_ratio(M, X: np.ndarray) -> float:
    """``sum(var(X columns)) / sum(var(M columns))``, as scikit-learn reports it."""
    n = M.shape[0]
    if sp.issparse(M):
        mean = np.asarray(M.mean(axis=0), dtype=np.float64).ravel()
        sq = np.asarray(M.multiply(M).mean(axis=0), dtype=np.float64).ravel()
        total = float(np.sum(sq - mean**2))
    else:
        total = float(np.var(np.asarray(M, dtype=np.float64), axis=0).sum())
    col_sum, col_sq = np.zeros(X.shape[1]), np.zeros(X.shape[1])
    for lo in range(0, n, 16_384):  # no float64 copy of all of X
        part = X[lo:lo + 16_384].astype(np.float64)
        col_sum += part.sum(axis=0)
        col_sq += np.einsum("ij,ij->j", part, part)
    explained = float(np.sum(col_sq / n - (col_sum / n) ** 2)) if n else 0.0
    return explained / total if total > 0 else 0.0
