"""``rows_times``: a row's bits do not depend on how the rows are cut, selected or threaded.

BLAS rounds the rows of a call's last, partial tile of rows through other kernels: on an AMD
EPYC with OpenBLAS's Haswell kernels, ``B @ W`` cut into calls of 1,000 rows differed from
one call in 2,008 of 5,000 rows, and a single row's result depended on its place in the tile.
Φ's rows are made a chunk at a time, on several threads, or on the workers holding them; the
audit promises the same bytes whichever way.
"""

from __future__ import annotations

import numpy as np
import pytest

from aflite_core import blas_threads
from aflite_core.represent import rows_times
from aflite_core.represent._row_products import ROW_WINDOW


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("width", "k"), [(42, 32), (266, 256), (9, 7)])
def test_rows_cut_anywhere_are_the_whole_products_rows(dtype, width, k):
    rng = np.random.default_rng(width)
    n = 3 * ROW_WINDOW + 500
    B = rng.standard_normal((n, width)).astype(dtype)
    W = np.ascontiguousarray(rng.standard_normal((width, k)).astype(dtype))
    whole = rows_times(B, W)
    assert whole.dtype == dtype and whole.shape == (n, k)
    np.testing.assert_allclose(whole, B.astype(np.float64) @ W, rtol=1e-4, atol=1e-3)
    for _ in range(12):
        cuts = np.sort(rng.choice(np.arange(1, n), size=rng.integers(1, 30), replace=False))
        bounds = [0, *cuts.tolist(), n]
        parts = [rows_times(B[a:b], W, first_row=a)
                 for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        assert np.concatenate(parts).tobytes() == whole.tobytes(), f"cuts {bounds}"
    # single rows, anywhere, and a selection of rows by their positions
    for i in (0, 1, 23, ROW_WINDOW - 1, ROW_WINDOW, n - 1):
        assert rows_times(B[i:i + 1], W, first_row=i).tobytes() == whole[i:i + 1].tobytes()
    some = np.sort(rng.choice(n, size=300, replace=False))
    assert rows_times(B[some], W, positions=some).tobytes() == whole[some].tobytes()


def test_the_callers_blas_threads_and_out_change_no_bit():
    rng = np.random.default_rng(0)
    B = rng.standard_normal((5_000, 42)).astype(np.float32)
    W = rng.standard_normal((42, 32)).astype(np.float32)
    with blas_threads.limit(1):
        one = rows_times(B, W)
    with blas_threads.limit(2):  # a BLAS thread split falls mid-tile: held to one inside
        two = rows_times(B, W)
    out = np.full((5_000, 32), np.nan, dtype=np.float32)
    given = rows_times(B, W, out=out)
    assert given is out and one.tobytes() == two.tobytes() == out.tobytes()


def test_positions_must_be_one_increasing_position_per_row():
    B, W = np.ones((3, 2), dtype=np.float32), np.ones((2, 2), dtype=np.float32)
    with pytest.raises(ValueError, match="positions: expected 3 increasing row positions"):
        rows_times(B, W, positions=np.array([0, 1]))
    with pytest.raises(ValueError, match="not increasing"):
        rows_times(B, W, positions=np.array([0, 5, 5]))
    assert rows_times(B[:0], W).shape == (0, 2)
