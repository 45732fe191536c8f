"""A fold fit's sparse products split over idle cores: the same bits as scipy's, a fit the
same whatever the thread count, and the cores shared among the fold tasks running."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import scipy.sparse as sp
from planted import planted_texts

import aflite_core.represent._split_kernels as split_kernels
import aflite_core.represent._split_products as split_products_module
from aflite_core.represent._fold_fits import SharedTextFeatures, _FoldLogistic
from aflite_core.represent._fold_pool import fold_share, map_folds
from aflite_core.represent._split_products import SplitCSR, split_products
from aflite_core.represent._text_models import text_model


def _matrix(rows: int, cols: int, density: float, seed: int) -> sp.csr_matrix:
    """A float64 CSR matrix with empty rows and columns and uneven rows (a few long ones)."""
    rng = np.random.default_rng(seed)
    X = sp.random(rows, cols, density=density, format="csr", random_state=rng,
                  data_rvs=lambda n: rng.standard_normal(n))
    X = X.tolil()
    X[rows // 3] = 0  # an empty row
    X[5, :] = rng.standard_normal(cols)  # a long one
    X = X.tocsr()
    X.sort_indices()
    return X


@pytest.fixture
def parts(monkeypatch):
    """Force the products to split in ``n`` parts whatever the machine's cores; count the
    split products that ran."""
    ran = {"rows": 0, "columns": 0}
    real_rows, real_columns = SplitCSR._rows_product, split_kernels.transposed_range

    def rows_product(self, *args, **kwargs):
        ran["rows"] += 1
        return real_rows(self, *args, **kwargs)

    def columns(*args):
        ran["columns"] += 1
        return real_columns(*args)

    monkeypatch.setattr(SplitCSR, "_rows_product", rows_product)
    monkeypatch.setattr(split_kernels, "transposed_range", columns)
    monkeypatch.setattr(split_products_module, "MIN_SPLIT_NNZ", 0)

    def set_parts(n: int) -> dict:
        monkeypatch.setattr(split_products_module, "fold_share", lambda: n)
        return ran
    return set_parts


@pytest.mark.parametrize("n_parts", [2, 3, 8])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_the_products_are_scipys_bit_for_bit(parts, n_parts, k):
    ran = parts(n_parts)
    X = _matrix(3000, 700, 0.02, seed=n_parts * 10 + k)
    with split_products(X) as S:
        _check_products(S, X, k)
    assert ran["rows"] >= 3 and ran["columns"] >= 4 * n_parts  # they really were split
    # no thread of the products outlives the fits (the CLI's fast exit needs none left)
    assert not [t for t in threading.enumerate() if t.name.startswith("split-products")]


def _check_products(S, X, k):
    assert isinstance(S, SplitCSR)
    assert np.shares_memory(S.data, X.data) and np.shares_memory(S.indices, X.indices)
    rng = np.random.default_rng(k)
    W = rng.standard_normal((700, k))
    G = rng.standard_normal((3000, k))
    w, g = W[:, 0].copy(), G[:, 0].copy()
    assert np.array_equal(S @ W, X @ W)
    assert np.array_equal(S @ w, X @ w)
    assert np.array_equal(G.T @ S, G.T @ X)  # scikit-learn's gradient: X.__rmatmul__
    assert np.array_equal(S.T @ G, X.T @ G)
    assert np.array_equal(S.T @ g, X.T @ g)
    assert np.array_equal(S @ np.asfortranarray(W), X @ W)  # an F-ordered operand
    assert np.array_equal(S.T @ np.asfortranarray(G), X.T @ G)


def test_what_is_not_split_is_scipys_product(parts):
    ran = parts(4)
    X = _matrix(2000, 300, 0.03, seed=1)
    with split_products(X) as S:
        _check_fallbacks(S, X, ran, parts)


def _check_fallbacks(S, X, ran, parts):
    W32 = np.random.default_rng(0).standard_normal((300, 3)).astype(np.float32)
    assert np.array_equal(S @ W32, X @ W32)  # another dtype: scipy's casts
    # unsorted indices: the column ranges do not apply, scipy's product
    U = X.copy()
    for i in range(U.shape[0]):
        lo, hi = U.indptr[i], U.indptr[i + 1]
        U.indices[lo:hi], U.data[lo:hi] = U.indices[lo:hi][::-1].copy(), U.data[lo:hi][::-1].copy()
    U.has_sorted_indices = False
    G = np.random.default_rng(1).standard_normal((2000, 3))
    before = ran["columns"]
    with split_products(U) as SU:
        assert np.array_equal(SU.T @ G, U.T @ G)
    assert ran["columns"] == before
    # one part: scipy's own products
    parts(1)
    before = dict(ran)
    assert np.array_equal(S @ W32.astype(np.float64), X @ W32.astype(np.float64))
    assert ran == before


def test_split_products_leaves_other_inputs_alone():
    small = sp.random(50, 40, density=0.2, format="csr", random_state=0)
    big = _matrix(40_000, 500, 0.02, seed=2)
    assert big.nnz >= split_products_module.MIN_SPLIT_NNZ
    with split_products(big) as S:
        assert isinstance(S, SplitCSR)
    for other in (small, big.astype(np.float32), big.tocsc(), big.toarray()):
        with split_products(other) as same:  # below MIN_SPLIT_NNZ, not float64, not CSR
            assert same is other


@pytest.mark.parametrize("n_classes", [3, 2])  # multinomial; binary: vector products
def test_a_fit_is_the_same_bits_on_any_thread_count(parts, n_classes):
    texts, labels, _ = planted_texts(n=3000, seed=3)
    features = SharedTextFeatures(texts)
    codes = np.unique(labels, return_inverse=True)[1] % n_classes
    train = np.flatnonzero(np.arange(len(codes)) % 5 != 0)
    X = features.split(train, train[:10])[0]
    fold = _FoldLogistic(text_model("hypothesis_only").named_steps["model"])
    ran = parts(1)
    reference = fold.fit(X, codes[train])
    assert ran == {"rows": 0, "columns": 0}
    for n in (2, 3, 7):
        ran = parts(n)
        fitted = fold.fit(X, codes[train])
        assert np.array_equal(fitted.coef_, reference.coef_)
        assert np.array_equal(fitted.intercept_, reference.intercept_)
        assert fitted.n_iter_[0] == reference.n_iter_[0]
        assert ran["rows"] > 0 and ran["columns"] > 0


def test_fold_share_divides_the_cores_among_the_running_fold_tasks(monkeypatch):
    import aflite_core.represent._fold_pool as fold_pool

    monkeypatch.setattr(fold_pool, "available_cores", lambda: 4)
    assert fold_share() == 1  # outside a fold task
    assert map_folds(lambda task: fold_share(), [0, 1], threads=1) == [4, 4]  # one at a time
    barrier = threading.Barrier(2, timeout=10)

    def both_running(task: int) -> int:
        barrier.wait()  # the two tasks run at once here
        share = fold_share()
        barrier.wait()
        return share

    assert map_folds(both_running, [0, 1], threads=2) == [2, 2]
    assert fold_share() == 1
    monkeypatch.setattr(fold_pool, "available_cores", lambda: 1)
    assert map_folds(both_running, [0, 1], threads=2) == [1, 1]  # never below one
