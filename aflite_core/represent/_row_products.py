"""Dense products of a matrix's rows whose bits do not depend on how the rows are cut.

Φ's rows are ``B @ W`` (the SVD's basis rows times a small square-ish matrix), computed a
chunk of rows at a time, on several threads, or in the partitions of a cluster's workers;
the audit promises the same bytes whichever way. BLAS does not: a GEMM kernel computes its
rows in tiles of a few rows (24 for OpenBLAS's Haswell/Zen single-precision kernel), and
the rows of a call's last, partial tile go through other kernels that round differently.
Measured on an AMD EPYC (OpenBLAS 0.3.31, Haswell kernels): 5,000 x 42 times 42 x 32 float32
rows cut into calls of 1,000 rows differed from one whole call in 2,008 rows; on two BLAS
threads the whole call differed from itself on one (the threads' split is not tile-aligned).

:func:`rows_times` gives every row the place it would have in one call over all rows: row
``i`` of the whole matrix is always computed at position ``i mod ROW_WINDOW`` of a call whose
row count is a multiple of :data:`ROW_WINDOW` (on one BLAS thread). Aligned runs of whole
windows go to BLAS as they are (one call; every tile full); a window cut by the rows given
is copied into a zeroed window-sized buffer at its rows' places (a row's products never
read another row, so the zeros change nothing). :data:`ROW_WINDOW` (768 = 2^8 x 3) is a
multiple of every GEMM row tile of the BLAS builds numpy and scipy ship (4 to 32 rows, and
OpenBLAS's 24): however a matrix is cut, its rows come out the same bits.
``tests/represent/test_row_products.py`` cuts rows at random and compares.
"""

from __future__ import annotations

import numpy as np

from aflite_core import blas_threads

__all__ = ["ROW_WINDOW", "rows_times"]

#: Rows of the aligned windows (a multiple of every GEMM kernel's row tile; see above).
ROW_WINDOW = 768


def rows_times(B: np.ndarray, W: np.ndarray, *, first_row: int = 0,
               positions: np.ndarray | None = None,
               out: np.ndarray | None = None) -> np.ndarray:
    """``B @ W`` with each row's bits those of the same row in one product over all rows.

    Parameters
    ----------
    B : numpy.ndarray of shape (m, l)
        Rows ``first_row .. first_row + m - 1`` of a larger matrix (or all of it), or the
        rows at ``positions``.
    W : numpy.ndarray of shape (l, k)
        The same for every cut (C-ordered is fastest).
    first_row : int, default 0
        Where ``B``'s first row sits in the whole matrix: what fixes each row's place in
        the aligned windows.
    positions : numpy.ndarray of int, shape (m,), optional
        Where each row of ``B`` sits in the whole matrix, increasing (a selection of its
        rows); ``first_row`` is then not used. Each aligned window the rows touch costs a
        window's product.
    out : numpy.ndarray of shape (m, k), optional
        Written in place and returned (``B``'s result dtype).

    Returns
    -------
    numpy.ndarray of shape (m, k)

    Raises
    ------
    ValueError
        If ``positions`` is not one increasing position per row of ``B``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> B = rng.standard_normal((1000, 6)).astype(np.float32)
    >>> W = rng.standard_normal((6, 4)).astype(np.float32)
    >>> whole = rows_times(B, W)
    >>> cut = np.vstack([rows_times(B[:333], W), rows_times(B[333:], W, first_row=333)])
    >>> cut.tobytes() == whole.tobytes()
    True
    >>> some = np.array([3, 500, 999])
    >>> rows_times(B[some], W, positions=some).tobytes() == whole[some].tobytes()
    True
    """
    m = B.shape[0]
    if positions is None:
        positions = np.arange(first_row, first_row + m, dtype=np.int64)
    else:
        positions = np.asarray(positions, dtype=np.int64)
        if positions.shape != (m,) or (m > 1 and not (np.diff(positions) > 0).all()):
            raise ValueError(f"positions: expected {m} increasing row positions (one per row "
                             f"of B), got shape {positions.shape}"
                             + ("" if positions.shape != (m,) else ", not increasing"))
    dtype = np.result_type(B, W)
    if out is None:
        out = np.empty((m, W.shape[1]), dtype=dtype)
    window = positions // ROW_WINDOW
    bounds = [0, *(np.flatnonzero(np.diff(window)) + 1).tolist(), m]
    with blas_threads.limit(1):  # a BLAS thread split is not tile-aligned
        g = 0
        while g < len(bounds) - 1:
            a, b = bounds[g], bounds[g + 1]
            if b - a == ROW_WINDOW:  # whole windows, one call for a run of them: tiles full
                while g + 2 < len(bounds) and bounds[g + 2] - bounds[g + 1] == ROW_WINDOW:
                    g += 1
                b = bounds[g + 1]
                np.matmul(B[a:b], W, out=out[a:b])
            else:  # a cut window: its rows at their places in a zeroed one
                places = positions[a:b] % ROW_WINDOW
                rows = np.zeros((ROW_WINDOW, B.shape[1]), dtype=dtype)
                rows[places] = B[a:b]
                out[a:b] = (rows @ W)[places]
            g += 1
    return out
