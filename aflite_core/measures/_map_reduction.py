"""The map's reduction: Φ's unit rows projected on the top principal directions of a sample.

UMAP's neighbour searches run on Φ's rows once L2-normalised and reduced to ``pca_dims``
principal components of the fitted sample (:mod:`aflite_core.measures.projection`), the
layout starts from the sample's first two. Every row comes out the same bits whether all
rows are reduced here a chunk at a time, a selection of them is, or the chunks are reduced
on the workers holding Φ's rows: a row's norm involves that row alone, and its product with
the directions is :func:`~aflite_core.represent.rows_times`', which computes it as in one
product over all rows (BLAS alone rounds a row by its place in the call).
"""

from __future__ import annotations

import numpy as np

from aflite_core.measures._neighbors import l2_normalize
from aflite_core.represent import is_partitioned, rows_times

__all__ = ["MAX_COVARIANCE_DIMS", "pca_coords", "pca_start", "principal_axes", "reduce_unit_rows",
           "reduced_chunk", "reduced_rows", "reduction_of", "unit_reduced"]

#: Above this width the reduction uses a randomized PCA instead of the exact covariance one.
MAX_COVARIANCE_DIMS: int = 4096


def pca_coords(Xn: np.ndarray, random_state: int | None) -> np.ndarray:
    """The map by PCA: the first two principal components of the unit rows ``Xn`` (zeros,
    or the centred column, when there are fewer than two rows or columns)."""
    from sklearn.decomposition import PCA  # lazy: +1586 ms to import

    if Xn.shape[0] < 2 or Xn.shape[1] < 2:
        coords = np.zeros((Xn.shape[0], 2), dtype=np.float32)
        if Xn.shape[0] >= 2 and Xn.shape[1] == 1:
            coords[:, 0] = Xn[:, 0] - Xn[:, 0].mean()
        return coords
    solver = "randomized" if min(Xn.shape) > 50 else "full"
    return PCA(n_components=2, svd_solver=solver,
               random_state=random_state).fit_transform(Xn).astype(np.float32)


def principal_axes(Xs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and top-``k`` principal directions (rows) of ``Xs``, exactly, from the eigenvectors
    of its d x d covariance (d is at most a few hundred here: milliseconds, where a randomized
    SVD of the rows takes a quarter of a second at 10k rows). Signs as scikit-learn's
    ``svd_flip``: each direction's largest coordinate is positive."""
    mean = Xs.mean(axis=0, dtype=np.float64)
    centred = Xs.astype(np.float64) - mean
    values, vectors = np.linalg.eigh(centred.T @ centred)
    axes = vectors[:, np.argsort(-values, kind="stable")[:k]].T
    signs = np.sign(axes[np.arange(len(axes)), np.argmax(np.abs(axes), axis=1)])
    return mean, axes * np.where(signs == 0, 1.0, signs)[:, None]


def pca_start(Xs: np.ndarray) -> np.ndarray:
    """The first two principal components of the fitted rows: the layout's start."""
    if Xs.shape[1] < 2:
        return np.column_stack([Xs[:, 0] - Xs[:, 0].mean(), np.zeros(len(Xs))])
    mean, axes = principal_axes(Xs, 2)
    return (Xs.astype(np.float64) - mean) @ axes.T


def reduction_of(Xs: np.ndarray, n_dims: int | None, random_state: int | None
                 ) -> tuple[np.ndarray, np.ndarray] | None:
    """The sample's mean and top ``n_dims`` principal directions (transposed), float32, the
    unit rows are reduced with; None when there is nothing to reduce (``n_dims`` unset, or
    not below the columns or the sample's rows)."""
    if not n_dims or Xs.shape[1] <= n_dims or len(Xs) <= n_dims:
        return None
    if Xs.shape[1] > MAX_COVARIANCE_DIMS:  # a d x d covariance would be too large
        from sklearn.decomposition import PCA  # lazy: +1586 ms to import

        pca = PCA(n_components=n_dims, svd_solver="randomized", random_state=random_state)
        pca.fit(Xs)
        mean, axes = pca.mean_, pca.components_
    else:
        mean, axes = principal_axes(Xs, n_dims)
    return mean.astype(np.float32), np.ascontiguousarray(axes.T, dtype=np.float32)


def unit_reduced(rows: np.ndarray, reduction: tuple[np.ndarray, np.ndarray] | None,
                 positions: np.ndarray) -> np.ndarray:
    """The rows of Φ at ``positions`` (increasing) as :func:`reduce_unit_rows` gives them (unit
    length, reduced, unit length again): row by row the same bits as in the whole matrix."""
    if reduction is None:
        return l2_normalize(rows)
    return l2_normalize(reduced_rows(rows, *reduction, positions=positions))


def reduce_unit_rows(X: np.ndarray, Xs: np.ndarray, n_dims: int | None,
                     random_state: int | None) -> np.ndarray:
    """Project the unit rows of ``X`` on the top ``n_dims`` principal directions of ``Xs``
    (the sample's unit rows), re-normalised. ``X``'s rows are normalised a chunk at a time
    as they are projected (the same rows, bit for bit, as normalising all of them first)."""
    reduction = reduction_of(Xs, n_dims, random_state)
    if reduction is None:
        return l2_normalize(X)
    mean, axes_t = reduction
    Z = np.empty((X.shape[0], axes_t.shape[1]), dtype=np.float32)
    if is_partitioned(X):  # Φ on the workers: each chunk reduced where its rows are
        for start, part in zip(range(0, X.shape[0], 65536),
                               X.map_chunks(reduced_chunk, 65536, mean, axes_t,
                                            with_start=True),
                               strict=True):
            Z[start:start + 65536] = part
        return l2_normalize(Z)
    for start in range(0, X.shape[0], 65536):  # bounded temporary memory
        Z[start:start + 65536] = reduced_chunk(X[start:start + 65536], start, mean, axes_t)
    return l2_normalize(Z)


def reduced_rows(rows: np.ndarray, mean: np.ndarray, axes_t: np.ndarray, *,
                 positions: np.ndarray) -> np.ndarray:
    """The rows of Φ at ``positions`` made unit-length, centred on the sample's mean and
    projected on its principal directions: row by row the same bits whatever the chunk or
    selection (a row's norm involves that row alone, and its product with the directions is
    :func:`~aflite_core.represent.rows_times`', which places it as in the whole matrix)."""
    return rows_times(l2_normalize(rows) - mean, axes_t, positions=positions)


def reduced_chunk(rows: np.ndarray, start: int, mean: np.ndarray, axes_t: np.ndarray
                  ) -> np.ndarray:
    """:func:`reduced_rows` of Φ's rows ``start ..`` (a chunk, here or where its rows are)."""
    return reduced_rows(rows, mean, axes_t,
                        positions=np.arange(start, start + len(rows), dtype=np.int64))
