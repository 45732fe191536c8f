"""The term-side randomized SVD against scikit-learn's TruncatedSVD on real text."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.decomposition import TruncatedSVD

from aflite_core.represent._builders import tfidf_blocks
from aflite_core.represent._svd import truncated_svd


@pytest.fixture(scope="module")
def tfidf(snli_dir):
    frame = pd.read_csv(snli_dir / "snli_train_sample.csv", keep_default_na=False).iloc[:6000]
    return tfidf_blocks(frame["hypothesis"].astype(str).tolist(),
                        frame["premise"].astype(str).tolist())


def _subspace_similarity(A: np.ndarray, B: np.ndarray) -> float:
    """Mean squared cosine of the principal angles between the column spaces (1 = same)."""
    qa, _ = np.linalg.qr(A.astype(np.float64))
    qb, _ = np.linalg.qr(B.astype(np.float64))
    return float(np.mean(np.linalg.svd(qa.T @ qb, compute_uv=False) ** 2))


def test_same_subspace_and_variance_as_scikit_learn(tfidf):
    k = 64
    ours, ratio = truncated_svd(tfidf, k, n_iter=5, random_state=0)
    refs = [TruncatedSVD(k, algorithm="randomized", n_iter=5, random_state=s) for s in (0, 1)]
    theirs = [ref.fit_transform(tfidf) for ref in refs]
    assert ours.shape == (tfidf.shape[0], k) and ours.dtype == np.float32
    assert ratio == pytest.approx(refs[0].explained_variance_ratio_.sum(), rel=0.005)
    # as close to scikit-learn's subspace as scikit-learn is to itself under another seed
    # (the trailing directions of any randomized SVD depend on its random test matrix)
    assert (_subspace_similarity(ours, theirs[0])
            >= _subspace_similarity(theirs[1], theirs[0]) - 0.02)
    # the leading directions are the same vectors, with scikit-learn's sign convention
    for j in range(5):
        assert np.corrcoef(ours[:, j], theirs[0][:, j])[0, 1] > 0.999
    # U Σ: column norms are the singular values, in decreasing order
    norms = np.linalg.norm(ours.astype(np.float64), axis=0)
    assert np.all(np.diff(norms) <= 1e-3 * norms[0])
    assert norms[:5] == pytest.approx(refs[0].singular_values_[:5], rel=1e-3)


def test_power_iterations_reach_the_exact_singular_values(tfidf):
    small = tfidf[:1500]
    small = small[:, np.flatnonzero(small.getnnz(axis=0))]
    exact = np.linalg.svd(small.toarray().astype(np.float64), compute_uv=False)[:32]
    found = {q: np.linalg.norm(truncated_svd(small, 32, n_iter=q, random_state=0)[0]
                               .astype(np.float64), axis=0) for q in (0, 5)}
    # five iterations: the leading values within 1 %, the last of the 32 within 3 %, and no
    # further from the exact values than scikit-learn's randomized SVD
    assert found[5][:16] == pytest.approx(exact[:16], rel=0.01)
    assert found[5] == pytest.approx(exact, rel=0.03)
    theirs = TruncatedSVD(32, algorithm="randomized", n_iter=5, random_state=0).fit(small)
    assert (np.abs(found[5] - exact).sum()
            <= 1.25 * np.abs(theirs.singular_values_ - exact).sum())
    assert np.sum(found[0] ** 2) < np.sum(found[5] ** 2) <= np.sum(exact ** 2) * 1.0001


def test_seeded_and_deterministic(tfidf):
    a, _ = truncated_svd(tfidf, 16, random_state=3)
    b, _ = truncated_svd(tfidf, 16, random_state=3)
    c, _ = truncated_svd(tfidf, 16, random_state=4)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_dense_input_small_shapes_and_errors():
    rng = np.random.default_rng(0)
    dense = rng.normal(size=(7, 5))
    X, ratio = truncated_svd(dense, 5, random_state=0)
    assert X.shape == (7, 5) and X.dtype == np.float64
    # all min(n, V) components of an uncentred matrix reproduce its squared norm
    assert np.sum(X**2) == pytest.approx(np.sum(dense**2))
    assert ratio > 0
    X1, _ = truncated_svd(sp.csr_matrix(dense.astype(np.float32)), 2, random_state=0)
    assert X1.shape == (7, 2) and X1.dtype == np.float32
    with pytest.raises(ValueError, match="n_components: expected at most"):
        truncated_svd(dense, 6)
    with pytest.raises(ValueError, match="n_iter"):
        truncated_svd(dense, 2, n_iter=-1)


@pytest.mark.parametrize("threads", [2, 3, 16])
def test_the_products_on_several_threads_are_bit_for_bit_those_on_one(tfidf, monkeypatch,
                                                                      threads):
    """Φ must not depend on the core count: the split products sum every output entry in
    the order the single product does (rows of M for M @ D, columns for Mᵀ @ Y)."""
    from aflite_core.represent import _svd as svd

    keep_rows, keep_cols = np.ones(tfidf.shape[0]), np.ones(tfidf.shape[1])
    keep_rows[100:120], keep_cols[7] = 0, 0  # empty rows and an empty column
    M = (sp.diags(keep_rows) @ tfidf @ sp.diags(keep_cols)).astype(np.float32).tocsr()
    M.eliminate_zeros()
    monkeypatch.setattr(svd, "SPLIT_MIN_NNZ", 1_000_000_000)
    one, ratio_one = truncated_svd(M, 32, n_iter=3, random_state=0)
    with svd._SplitProducts(M) as single:
        assert single.n_threads == 1
    monkeypatch.setattr(svd, "SPLIT_MIN_NNZ", 1)
    monkeypatch.setattr(svd, "_threads", lambda: threads)
    with svd._SplitProducts(M) as split:
        assert split.n_threads == threads and len(split.col_blocks) == threads
        D = np.random.default_rng(0).standard_normal((M.shape[1], 9)).astype(np.float32)
        assert split.rows(D).tobytes() == np.asarray(M @ D).tobytes()
        assert split.gram(D).tobytes() == (M.T @ (M @ D)).tobytes()
    many, ratio_many = truncated_svd(M, 32, n_iter=3, random_state=0)
    assert many.tobytes() == one.tobytes() and ratio_many == ratio_one
    # small product steps (every row in a step of its own block) change no bit either
    monkeypatch.setattr(svd, "PRODUCT_CHUNK_ROWS", 7)
    monkeypatch.setattr(svd, "ROWS_TIMES_CHUNK", 100)
    stepped, _ = truncated_svd(M, 32, n_iter=3, random_state=0)
    assert stepped.tobytes() == one.tobytes()


@pytest.mark.parametrize(("threads", "pass_rows", "times_rows"),
                         [(1, 1_000, 700), (2, 2_500, 100), (3, 16_384, 20_000)])
def test_chunked_products_give_the_whole_products_bits_and_never_hold_n_by_l(
        tfidf, monkeypatch, threads, pass_rows, times_rows):
    """Issue 63, item 5: the products go through M a chunk of rows at a time (Mᵀ M D added
    chunk after chunk into one output by scipy's own kernel, the Gram matrix of B = M Q
    chunk by chunk, Φ = B W from B's rows made again), so no n x l array is held; Φ's
    rows, and the variance they hold, are the whole products' bit for bit, whatever the
    chunks and the threads. With ``out`` the rows go there in order and X is None."""
    from aflite_core.represent import _svd as svd

    M = sp.vstack([tfidf] * 8).astype(np.float32).tocsr()  # n (48,000) well above V
    assert M.shape[0] > 4 * M.shape[1]
    monkeypatch.setattr(svd, "SPLIT_MIN_NNZ", 1_000_000_000)
    whole, ratio = truncated_svd(M, 32, n_iter=3, random_state=0)
    monkeypatch.setattr(svd, "SPLIT_MIN_NNZ", 1)
    monkeypatch.setattr(svd, "_threads", lambda: threads)
    monkeypatch.setattr(svd, "PASS_ROWS", pass_rows)
    monkeypatch.setattr(svd, "ROWS_TIMES_CHUNK", times_rows)
    held = []
    real_empty = np.empty

    def watched_empty(shape, *args, **kwargs):  # every array numpy.empty makes meanwhile
        held.append(tuple(np.atleast_1d(shape)))
        return real_empty(shape, *args, **kwargs)

    monkeypatch.setattr(svd.np, "empty", watched_empty)
    chunked, chunked_ratio = truncated_svd(M, 32, n_iter=3, random_state=0)
    rows: list[np.ndarray] = []
    sent, sent_ratio = truncated_svd(M, 32, n_iter=3, random_state=0,
                                     out=lambda part: rows.append(part.copy()))
    assert chunked.tobytes() == whole.tobytes() and chunked_ratio == ratio
    assert sent is None and np.concatenate(rows).tobytes() == whole.tobytes()
    assert sent_ratio == ratio and all(len(part) <= max(times_rows, 64) + 63 for part in rows)
    width = 32 + 10  # l: the basis's columns
    assert not [s for s in held if len(s) == 2 and s[0] >= M.shape[0] and s[1] >= width], \
        "an n x l array was allocated"


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n_rows", [1, 5, 130, 1_000])
def test_phi_is_written_over_the_basis_buffer_with_the_same_bits(threads, n_rows):
    """``X = B W`` goes to the front of B's own n x l memory, chunk after chunk, without a
    second n x k array, and equals the whole product bit for bit (the last chunk of 1000 rows
    in steps of 100 has 100 rows; of 130 in steps of 64, a 2-row tail joins the chunk before).
    The whole product is :func:`rows_times`' (BLAS's own rounds the rows of a last, partial
    tile of rows differently: on an AMD EPYC with OpenBLAS's Haswell kernels ``B @ W``
    depends on the cuts)."""
    from aflite_core.represent import _svd as svd
    from aflite_core.represent import rows_times

    rng = np.random.default_rng(n_rows)
    B = rng.standard_normal((n_rows, 12)).astype(np.float32)
    W = rng.standard_normal((12, 9)).astype(np.float32)
    expected = rows_times(B, W)
    products = svd._SplitProducts(np.zeros((2, 2), dtype=np.float32))
    products.n_threads = threads
    with products:
        X = svd._rows_times(B, W, products, chunk_rows=64 if n_rows == 130 else 100)
    assert X.shape == (n_rows, 9) and X.flags.c_contiguous
    assert X.tobytes() == expected.tobytes()
    assert np.shares_memory(X, B)  # no second array of Φ's size


def test_phi_does_not_depend_on_the_blas_threads_the_caller_allows(tfidf):
    """OpenBLAS's multi-threaded LU, QR and GEMM round differently from its single-threaded
    ones; the dense steps run on one BLAS thread whatever the caller allows, so Φ is the same
    on a laptop and on a many-core driver (before, 1 and 2 threads differed in the last bits
    on this 6,000-row matrix)."""
    from threadpoolctl import threadpool_info, threadpool_limits

    if not any(pool["internal_api"] == "openblas" for pool in threadpool_info()):
        pytest.skip("the rounding difference is OpenBLAS's")
    with threadpool_limits(limits=1, user_api="blas"):
        one, ratio_one = truncated_svd(tfidf, 128, n_iter=2, random_state=0)
    with threadpool_limits(limits=4, user_api="blas"):
        many, ratio_many = truncated_svd(tfidf, 128, n_iter=2, random_state=0)
    assert many.tobytes() == one.tobytes() and ratio_many == ratio_one


def test_balanced_cuts_cover_every_item_once():
    from aflite_core.represent._svd import _balanced_cuts

    cuts = _balanced_cuts(np.array([5, 0, 0, 1, 1, 1, 1, 1]), 2)
    assert cuts.tolist() == [0, 3, 8]  # weight 5 on each side
    assert _balanced_cuts(np.zeros(0, dtype=int), 3).tolist() == [0, 0, 0, 0]
    cuts = _balanced_cuts(np.ones(10), 4)
    assert cuts[0] == 0 and cuts[-1] == 10 and np.all(np.diff(cuts) >= 0)
