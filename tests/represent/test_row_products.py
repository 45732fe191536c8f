"""``rows_times``: a row's bits do not depend on how the rows are cut, selected or threaded.

BLAS rounds the rows of a call's last, partial tile of rows through other kernels: on an AMD
EPYC with OpenBLAS's Haswell kernels, ``B @ W`` cut into calls of 1,000 rows differed from
one call in 2,008 of 5,000 rows, and a single row's result depended on its place in the tile.
Φ's rows are made a chunk at a time, on several threads, or on the workers holding them; the
audit promises the same bytes whichever way.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

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


#: Checks whether this process's OpenBLAS runs its Haswell kernels and whether they round a
#: row by where a call cuts the rows (printed: the architecture, then the rows that differ).
_PROBE = """
import numpy as np, threadpoolctl
rng = np.random.default_rng(0)
B = rng.standard_normal((5000, 42)).astype(np.float32)
W = rng.standard_normal((42, 32)).astype(np.float32)
with threadpoolctl.threadpool_limits(1):
    whole = B @ W
    parts = np.concatenate([B[i:i + 1000] @ W for i in range(0, 5000, 1000)])
blas = [p for p in threadpoolctl.threadpool_info() if p["internal_api"] == "openblas"]
print(blas[0]["architecture"] if blas else "none", int((whole != parts).any(axis=1).sum()))
"""

#: The bit-for-bit tests of Φ's products, run again under the Haswell kernels.
_UNDER_HASWELL = [
    "tests/represent/test_row_products.py",
    "tests/represent/test_svd.py",
    "tests/represent/test_compact.py::"
    "test_the_scores_are_the_cosines_of_the_codes_and_a_wide_phi_is_reduced_first",
    "tests/measures/test_knn.py::"
    "test_a_search_of_rows_among_themselves_is_the_search_among_their_copy",
]


@pytest.mark.slow
def test_phis_products_hold_under_blas_kernels_that_round_by_a_rows_place():
    """OpenBLAS picks its SkylakeX kernels on an Intel AVX-512 machine (a row's bits the same
    however the rows are cut) and its Haswell kernels on an AMD one (not: the suite failed
    22 tests there before :func:`rows_times`). The bit-for-bit tests of Φ's products run
    again in a process whose OpenBLAS is told to use the Haswell kernels
    (``OPENBLAS_CORETYPE``), so what they check does not depend on the CI machine's CPU."""
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    if platform.machine() not in ("x86_64", "AMD64") or " avx2" not in flags:
        pytest.skip("OpenBLAS's Haswell kernels need an x86-64 CPU with AVX2")
    env = {**os.environ, "OPENBLAS_CORETYPE": "Haswell"}
    probe = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                           text=True, timeout=120, check=True).stdout.split()
    if probe[0] != "Haswell" or probe[1] == "0":
        pytest.skip(f"this BLAS ({probe[0]}) rounds rows alike however cut: nothing to check")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
         "-k", "not kernels_that_round", *_UNDER_HASWELL],
        cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " failed" not in done.stdout
