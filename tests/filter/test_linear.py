"""Many-partition linear discriminants (filter.linear) against brute force and sklearn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression

import aflite_core.filter._linear as linear
from aflite_core.filter._linear import (
    ScatterStats,
    count_correct,
    covariance_factor,
    fit_lda_partitions,
    fit_partition_lda,
    partition_class_sums,
    row_stats,
)
from aflite_core.filter.synthetic import make_planted


def _random_train(rng, m, n, t):
    train = np.zeros((m, n), dtype=bool)
    for j in range(m):
        train[j, rng.choice(n, t, replace=False)] = True
    return train


@pytest.fixture(scope="module")
def planted():
    X, y, biased = make_planted(2400, 24, classes=3, random_state=3)
    return X, y, biased


def test_scatter_stats_add_subtract_match_numpy_covariance():
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(500, 6)) * [1, 2, 3, 4, 5, 6] + 10).astype(np.float32)
    stats = ScatterStats.zeros(6)
    stats.add(*row_stats(X[:300]))
    stats.add(*row_stats(X[300:]))
    stats.subtract(*row_stats(X[450:]))
    mean, cov = stats.covariance()
    np.testing.assert_allclose(mean, X[:450].mean(axis=0, dtype=np.float64), rtol=1e-5)
    np.testing.assert_allclose(cov, np.cov(X[:450].T.astype(np.float64), bias=True), rtol=1e-3,
                               atol=1e-3)
    assert stats.n == 450


def test_partition_class_sums_match_brute_force():
    rng = np.random.default_rng(1)
    codes = np.sort(rng.integers(0, 3, 200))
    X = rng.normal(size=(200, 5)).astype(np.float32)
    bounds = np.searchsorted(codes, np.arange(4))
    train = rng.random((4, 200)) < 0.3
    sums = partition_class_sums(X, bounds, train)
    for j in range(4):
        for c in range(3):
            rows = train[j] & (codes == c)
            np.testing.assert_allclose(sums[j, c], X[rows].sum(axis=0), rtol=1e-5, atol=1e-4)


def test_lda_predictions_agree_with_sklearn_on_held_out_rows(planted):
    X, y, biased = planted
    rng = np.random.default_rng(0)
    train = _random_train(rng, 4, len(y), 1200)
    pred = fit_lda_partitions(X, y, train).predict(X)
    for j in range(4):
        tr, te = train[j], ~train[j]
        sk_lda = LinearDiscriminantAnalysis().fit(X[tr], y[tr]).predict(X[te])
        sk_lr = LogisticRegression(max_iter=500).fit(X[tr], y[tr]).predict(X[te])
        ours = pred[te, j]
        assert np.mean(ours == sk_lda) >= 0.93
        # where the label is readable (planted-bias rows) all three models agree
        assert np.mean((ours == sk_lr)[biased[te]]) >= 0.95
        # on the noise rows, we agree with logistic regression as well as sklearn's LDA does
        assert np.mean(ours == sk_lr) >= np.mean(sk_lda == sk_lr) - 0.03
        assert np.mean(ours == y[te]) >= np.mean(sk_lr == y[te]) - 0.03


def test_within_class_correction_equals_direct_inverse(planted):
    X, y, _ = planted
    rng = np.random.default_rng(2)
    train = _random_train(rng, 3, len(y), 800)
    model = fit_lda_partitions(X, y, train, reg=1e-3)
    shift = X.mean(axis=0, dtype=np.float64)
    Xc = X.astype(np.float64) - shift
    cov = np.cov(Xc.T, bias=True)
    A = cov + 1e-3 * np.trace(cov) / cov.shape[0] * np.eye(cov.shape[0])
    for j in range(3):
        counts = np.array([np.sum(train[j] & (y == c)) for c in range(3)])
        mu = np.stack([Xc[train[j] & (y == c)].mean(axis=0) for c in range(3)])
        pi = counts / counts.sum()
        mbar = pi @ mu
        between = ((mu - mbar).T * pi) @ (mu - mbar)
        W = np.linalg.solve(A - between, mu.T).T
        np.testing.assert_allclose(model.coef[j], W, rtol=2e-3, atol=2e-3 * np.abs(W).max())


def test_count_correct_matches_argmax_of_scores(planted):
    X, y, _ = planted
    rng = np.random.default_rng(4)
    order = np.argsort(y, kind="stable")
    Xs, ys = X[order], y[order]
    train = _random_train(rng, 8, len(ys), 1000)
    model = fit_lda_partitions(Xs, ys, train)
    bounds = np.searchsorted(ys, np.arange(4))
    got = count_correct(Xs - model.shift, bounds, ~train, model)
    scores = model.decision_function(Xs)
    expected = ((scores.argmax(axis=2) == ys[:, None]) & ~train.T).sum(axis=1)
    assert np.mean(got == expected) >= 0.999
    assert np.abs(got - expected).max() <= 1


def test_full_logit_path_matches_margin_path(planted, monkeypatch):
    X, y, _ = planted
    rng = np.random.default_rng(5)
    order = np.argsort(y, kind="stable")
    Xs, ys = X[order], y[order]
    train = _random_train(rng, 6, len(ys), 900)
    model = fit_lda_partitions(Xs, ys, train)
    bounds = np.searchsorted(ys, np.arange(4))
    margins = count_correct(Xs - model.shift, bounds, ~train, model)
    monkeypatch.setattr(linear, "MAX_CLASSES_MARGINS", 1)
    logits = count_correct(Xs - model.shift, bounds, ~train, model)
    assert np.mean(margins == logits) >= 0.999


def test_class_absent_from_training_is_never_predicted():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(300, 4)).astype(np.float32)
    y = np.repeat([0, 1, 2], 100)
    X[y == 1, 0] += 3
    train = np.zeros((2, 300), dtype=bool)
    train[0, :50] = True  # class 0 only... plus class 2 below
    train[0, 250:] = True
    train[1, 100:200] = True  # class 1 only
    model = fit_lda_partitions(X, y, train)
    pred = model.predict(X)
    assert set(np.unique(pred[:, 0])) <= {0, 2}
    assert set(np.unique(pred[:, 1])) == {1}


def test_fit_partition_lda_rejects_partition_without_training_rows():
    stats = ScatterStats.zeros(3)
    stats.add(*row_stats(np.eye(3, dtype=np.float32)))
    with pytest.raises(ValueError, match="training row"):
        fit_partition_lda(stats, np.zeros((1, 2, 3)), np.zeros((1, 2), dtype=int))


def test_precomputed_covariance_factor_gives_the_same_model(planted):
    X, y, _ = planted
    rng = np.random.default_rng(7)
    order = np.argsort(y, kind="stable")
    Xs = X[order] - X.mean(axis=0)
    bounds = np.searchsorted(y[order], np.arange(4))
    train = _random_train(rng, 5, len(Xs), 700)
    stats = ScatterStats.zeros(X.shape[1])
    stats.add(*row_stats(Xs))
    sums = partition_class_sums(Xs, bounds, train)
    counts = np.stack([train[:, bounds[c] : bounds[c + 1]].sum(axis=1) for c in range(3)], 1)
    direct = fit_partition_lda(stats, sums, counts)
    shared = fit_partition_lda(None, sums, counts, factor=covariance_factor(stats))
    np.testing.assert_array_equal(direct.coef, shared.coef)
    np.testing.assert_array_equal(direct.intercept, shared.intercept)
    with pytest.raises(ValueError, match="stats or a precomputed factor"):
        fit_partition_lda(None, sums, counts)


class _Rows:
    """An array read by rows that remembers the most rows one read asked for."""

    def __init__(self, X):
        self.X, self.shape, self.reads = X, X.shape, []

    def __getitem__(self, rows):
        rows = np.asarray(rows)
        self.reads.append(len(rows))
        return self.X[rows]


def test_the_fit_reads_a_block_of_rows_at_a_time_and_blocks_change_only_rounding(
        planted, monkeypatch):
    """fit_lda_partitions(rows=...) never reads more than FIT_BLOCK_ROWS rows at once (the
    held-out fit at millions of retained rows), and blocks of 97 rows give the model of one
    block up to float32 rounding: the same predictions."""
    X, y, _ = planted
    rng = np.random.default_rng(3)
    rows = np.sort(rng.choice(len(y), len(y) * 2 // 3, replace=False))
    train = _random_train(rng, 5, len(rows), len(rows) // 3)
    whole = fit_lda_partitions(X[rows], y[rows], train)
    monkeypatch.setattr(linear, "FIT_BLOCK_ROWS", 97)
    reader = _Rows(X)
    blocked = fit_lda_partitions(reader, y[rows], train, rows=rows)
    mean_reads = -(-len(rows) // 4096)  # the mean is summed 4,096 rows at a time
    assert reader.reads[mean_reads:] == [97] * (len(rows) // 97) + [len(rows) % 97]
    np.testing.assert_allclose(blocked.coef, whole.coef, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(blocked.intercept, whole.intercept, rtol=1e-4, atol=1e-5)
    assert np.array_equal(blocked.predict(X), whole.predict(X))
    # and the rows given are the rows of X[rows], block for block
    again = fit_lda_partitions(X[rows], y[rows], train)
    assert np.array_equal(again.coef, linear.fit_lda_partitions(X, y[rows], train,
                                                                 rows=rows).coef)
