"""A compact Φ the run folder keeps: each row's direction in 128 bytes, for its neighbours.

The audit's Φ (256 float32 a row: 1 KB) is not kept in the run folder, but a reviewer wants
a row's nearest rows *in Φ*, not on the 2-D map (whose neighbourhoods are a layout's). So
the audit keeps, per row, the direction of its Φ in 4 bits a dimension: the row is
L2-normalised (the cosine geometry every measure of Φ uses), divided by its largest absolute
value and rounded to the 15 levels -7..7, two dimensions a byte. A Φ wider than
:data:`MAX_DIMS` is first projected on the top right singular vectors of a seeded sample of
its normalised rows (the basis, kept in the file's metadata). The cosine of two rows is the
cosine of their codes: on the bundled SNLI sample the 10 nearest rows by the codes are 87 %
of the 10 nearest by Φ itself (64 dimensions of int8, the same bytes as 128 of 4 bits,
kept 33 %).

:func:`compact_phi` makes the codes (and the basis, or None); :func:`nearest_codes` finds a
code's nearest rows by a table of the query's contributions per byte (at 1M rows: 128 MB of
codes, about 0.1 s a query).
``tests/represent/test_compact.py`` checks the neighbours against exact cosine on Φ.
"""

from __future__ import annotations

import numpy as np

from aflite_core._validation import check_int, make_rng
from aflite_core.represent._row_products import rows_times

__all__ = ["BASIS_KEY", "BASIS_SHAPE_KEY", "COMPACT_FILE", "MAX_DIMS", "code_norms",
           "compact_phi", "nearest_codes", "place", "unpack"]

#: Dimensions kept at most (a wider Φ is projected on its top singular vectors first).
MAX_DIMS = 256
#: The run file: ``row_id`` and ``phi`` (fixed-size binary: two dimensions a byte) per row.
COMPACT_FILE = "phi_compact.parquet"
#: Metadata keys of ``phi_compact.parquet`` holding the basis of a Φ wider than the codes
#: (float32 little-endian bytes, and its shape as "d,dims"): what placing a new vector needs.
BASIS_KEY = b"aflite.phi_basis"
BASIS_SHAPE_KEY = b"aflite.phi_basis_shape"
#: Rows the basis of a wider Φ is fitted on (a seeded sample).
SAMPLE_SIZE = 20_000
#: Rows handled at a time (a chunk of float32 copies, never all rows').
CHUNK = 65_536
#: Levels each side of zero (4 bits: -7..7).
LEVELS = 7


def _unit_rows(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float32)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(norms > 0, norms, 1.0)


def compact_phi(X, *, max_dims: int = MAX_DIMS, sample_size: int = SAMPLE_SIZE,
                random_state: int | None = 0) -> tuple[np.ndarray, np.ndarray | None]:
    """Each row of Φ as 4-bit codes of its direction, and the basis that reduced it (None
    when Φ is at most ``max_dims`` wide).

    Returns
    -------
    codes : np.ndarray of uint8, shape (n_rows, ceil(dims / 2))
        Two dimensions a byte (:func:`unpack` gives them back as -7..7).
    basis : np.ndarray of float32, shape (d, max_dims), or None
    """
    n, d = X.shape
    max_dims = check_int("max_dims", max_dims, minimum=2)
    basis = None
    if d > max_dims:
        rng = make_rng(random_state)
        sample = np.sort(rng.choice(n, size=sample_size, replace=False)) if n > sample_size \
            else np.arange(n)
        _, _, vt = np.linalg.svd(_unit_rows(X[sample]), full_matrices=False)
        basis = np.ascontiguousarray(vt[:max_dims].T, dtype=np.float32)
    dims = d if basis is None else basis.shape[1]
    codes = np.empty((n, (dims + 1) // 2), dtype=np.uint8)
    for start in range(0, n, CHUNK):
        codes[start:start + CHUNK] = place(X[start:start + CHUNK], basis, first_row=start)
    return codes, basis


def place(X, basis: np.ndarray | None = None, *, first_row: int = 0) -> np.ndarray:
    """The packed codes of rows of Φ's space (``X``, shape (m, d)), on ``basis`` if given
    (rows ``first_row ..`` of a larger Φ: the same codes as placing all its rows at once)."""
    reduced = _unit_rows(X) if basis is None else _unit_rows(
        rows_times(_unit_rows(X), basis, first_row=first_row))
    top = np.abs(reduced).max(axis=1, keepdims=True)
    q = np.rint(reduced / np.where(top > 0, top, 1.0) * LEVELS).astype(np.int8) + 8
    if q.shape[1] % 2:  # an odd width: a last nibble of level 0
        q = np.hstack([q, np.full((len(q), 1), 8, dtype=np.int8)])
    q = q.astype(np.uint8)
    return (q[:, 0::2] << 4) | q[:, 1::2]


def unpack(codes: np.ndarray) -> np.ndarray:
    """Packed codes back to float32 levels -7..7 (two a byte)."""
    codes = np.asarray(codes, dtype=np.uint8)
    out = np.empty((len(codes), codes.shape[1] * 2), dtype=np.float32)
    out[:, 0::2] = (codes >> 4).astype(np.float32) - 8
    out[:, 1::2] = (codes & 15).astype(np.float32) - 8
    return out


#: Each byte value's two levels (high nibble, low nibble), -7..7.
_HIGH = (np.arange(256) >> 4).astype(np.float32) - 8
_LOW = (np.arange(256) & 15).astype(np.float32) - 8


def code_norms(codes: np.ndarray) -> np.ndarray:
    """The length of each row's code (of its levels as a vector), for cosines."""
    from aflite_core.represent._compact_kernel import lookup_sums  # numba: on first use

    squares = np.broadcast_to(_HIGH ** 2 + _LOW ** 2, (codes.shape[1], 256))
    return np.sqrt(lookup_sums(codes, squares))


def nearest_codes(codes: np.ndarray, query: np.ndarray, k: int, *,
                  exclude: int | None = None, norms: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` rows of ``codes`` nearest ``query`` (one packed code) by cosine, most
    similar first.

    Each row's dot product with the query is summed a byte at a time from a table of the
    query's 256 possible contributions per byte (about 0.1 s at 1M rows); ``norms``
    (:func:`code_norms`, computed when not given) keeps a reader's repeated queries cheap.

    Returns
    -------
    rows : np.ndarray of int64
        Positions in ``codes`` (``exclude`` left out: the row itself).
    similarity : np.ndarray of float32
        The cosine of their codes with the query's, in [-1, 1].
    """
    from aflite_core.represent._compact_kernel import lookup_sums  # numba: on first use

    k = check_int("k", k, minimum=1)
    query = np.asarray(query).reshape(1, -1)
    if query.shape[1] != codes.shape[1]:
        raise ValueError(f"query: expected a code of {codes.shape[1]} bytes, as the rows' "
                         f"codes, got {query.shape[1]} (a vector placed without the basis of "
                         "a wider Φ?)")
    q = unpack(query)[0]
    q /= max(float(np.linalg.norm(q)), 1e-12)
    table = _HIGH[None, :] * q[0::2, None] + _LOW[None, :] * q[1::2, None]
    scores = lookup_sums(codes, table)
    norms = code_norms(codes) if norms is None else norms
    scores /= np.where(norms > 0, norms, 1.0)
    if exclude is not None:
        scores[exclude] = -np.inf
    k = min(k, len(scores) - (exclude is not None))
    if k < 1:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.lexsort((top, -scores[top]))]
    return top.astype(np.int64), scores[top]
