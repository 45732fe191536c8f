"""AFLite.score_heldout: held-out rows scored by models trained on the retained rows of fit.

The split policy "filter the training split only, score dev/test with models trained on it":
planted data where the new rows carrying the bias score high while the training rows still
carry it, near chance when they do not, and near chance for unbiased rows throughout; the
score is that of the rounds' LDA (checked against the model's own predict); fit is untouched.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from aflite_core.filter._aflite import AFLite
from aflite_core.filter._linear import fit_lda_partitions
from aflite_core.filter.synthetic import make_planted

N_TRAIN = 3000


@pytest.fixture(scope="module")
def data():
    """One planted draw (3 classes, 40% biased), split into training and new rows so both
    share the planted class shifts."""
    X, y, biased = make_planted(N_TRAIN + 1500, 32, classes=3, biased=0.4, random_state=0)
    return (X[:N_TRAIN], y[:N_TRAIN], biased[:N_TRAIN]), (X[N_TRAIN:], y[N_TRAIN:],
                                                          biased[N_TRAIN:])


def fitted(train, target):
    X, y, _ = train
    return AFLite(target_size=target, n_partitions=16, random_state=0).fit(X, y)


def test_not_fitted_before_fit(data):
    (X, y, _), (Xn, yn, _) = data
    with pytest.raises(NotFittedError):
        AFLite(target_size=0.5).score_heldout(Xn, yn, X=X, y=y)


def test_new_rows_carrying_the_bias_score_high_unbiased_near_chance(data):
    train, (Xn, yn, bn) = data
    X, y, b = train
    light = fitted(train, 0.9)  # light filtering: the retained rows still carry the bias
    assert b[light.keep_mask_].mean() > 0.3
    scores = light.score_heldout(Xn, yn, X=X, y=y)
    assert scores.shape == (len(yn),) and scores.dtype == np.float64
    assert ((scores >= 0) & (scores <= 1)).all()
    assert scores[bn].mean() > 0.9
    assert abs(scores[~bn].mean() - 1 / 3) < 0.08  # chance for 3 classes
    # filtered down to half, the training rows hardly carry the bias: neither do the models
    deep = fitted(train, 0.5)
    assert b[deep.keep_mask_].mean() < 0.1
    deep_scores = deep.score_heldout(Xn, yn, X=X, y=y)
    assert deep_scores[bn].mean() < scores[bn].mean() - 0.3
    assert abs(deep_scores[~bn].mean() - 1 / 3) < 0.08


def test_fit_results_are_untouched_and_scores_are_seeded(data):
    train, (Xn, yn, _) = data
    X, y, _ = train
    est = fitted(train, 0.7)
    before = {k: np.copy(getattr(est, k)) for k in
              ("keep_mask_", "predictability_", "removal_round_", "classes_")}
    history = est.history_.copy()
    first = est.score_heldout(Xn, yn, X=X, y=y)
    np.testing.assert_array_equal(est.score_heldout(Xn, yn, X=X, y=y), first)
    other = est.score_heldout(Xn, yn, X=X, y=y, random_state=123)
    assert not np.array_equal(other, first)
    for name, value in before.items():
        np.testing.assert_array_equal(getattr(est, name), value)
    assert est.history_.equals(history)
    again = fitted(train, 0.7)  # and fit gives the same results as ever
    np.testing.assert_array_equal(again.keep_mask_, est.keep_mask_)
    np.testing.assert_array_equal(again.predictability_, est.predictability_)


def test_score_is_the_share_of_partition_lda_models_predicting_the_label(data):
    train, (Xn, yn, _) = data
    X, y, _ = train
    est = fitted(train, 0.7)
    kept = est.keep_mask_
    n_kept = int(kept.sum())
    # every model trained on all retained rows: all the same model, scores are 0 or 1
    scores = est.score_heldout(Xn, yn, X=X, y=y, n_partitions=3, train_size=n_kept)
    model = fit_lda_partitions(X[kept], y[kept], np.ones((1, n_kept), dtype=bool), 3)
    np.testing.assert_array_equal(scores, (model.predict(Xn)[:, 0] == yn).astype(float))
    # a share of m models
    scores = est.score_heldout(Xn, yn, X=X, y=y, n_partitions=8, train_size=0.3)
    np.testing.assert_array_equal(np.unique(scores * 8), np.unique(np.round(scores * 8)))


def test_unseen_labels_score_nan(data):
    train, (Xn, yn, _) = data
    X, y, _ = train
    est = fitted(train, 0.8)
    labels = yn.astype(object)
    labels[:5] = 7  # never seen in fit
    labels[5] = None
    scores = est.score_heldout(Xn, labels, X=X, y=y)
    assert np.isnan(scores[:6]).all() and not np.isnan(scores[6:]).any()
    # string labels in fit, scored with string labels
    names = np.array(["a", "b", "c"])[y]
    est = AFLite(target_size=0.8, n_partitions=8, random_state=0).fit(X, names)
    new_names = np.array(["a", "b", "c", "zzz"])[np.r_[yn[:-1], 3]]
    scores = est.score_heldout(Xn, new_names, X=X, y=names)
    assert np.isnan(scores[-1]) and not np.isnan(scores[:-1]).any()


def test_the_training_data_must_be_that_of_fit(data):
    train, (Xn, yn, _) = data
    X, y, _ = train
    est = fitted(train, 0.8)
    with pytest.raises(ValueError, match=r"X: expected the features passed to fit, of shape"):
        est.score_heldout(Xn, yn, X=X[:-1], y=y[:-1])
    with pytest.raises(ValueError, match="the very X and y passed to fit"):
        est.score_heldout(Xn, yn, X=X[::-1], y=y[::-1])
    with pytest.raises(ValueError, match="the very X and y passed to fit"):
        est.score_heldout(Xn, yn, X=X, y=np.roll(y, 1))
    with pytest.raises(ValueError, match="y: expected the labels passed to fit"):
        est.score_heldout(Xn, yn, X=X, y=y + 1)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_partitions": 0}, ValueError, "n_partitions: expected an int >= 1"),
        ({"n_partitions": 2.0}, TypeError, "n_partitions"),
        ({"train_size": 10**6}, ValueError, "train_size: expected at most the"),
        ({"train_size": 1.5}, ValueError, "train_size"),
        ({"random_state": "x"}, TypeError, "random_state"),
    ],
)
def test_bad_arguments_are_named(data, kwargs, error, match):
    train, (Xn, yn, _) = data
    X, y, _ = train
    est = fitted(train, 0.8)
    with pytest.raises(error, match=match):
        est.score_heldout(Xn, yn, X=X, y=y, **kwargs)


def test_bad_new_rows_are_named(data):
    train, (Xn, yn, _) = data
    X, y, _ = train
    est = fitted(train, 0.8)
    with pytest.raises(ValueError, match="X_new: expected 32 feature columns"):
        est.score_heldout(Xn[:, :5], yn, X=X, y=y)
    with pytest.raises(ValueError, match=r"y_new: expected shape \(1500,\)"):
        est.score_heldout(Xn, yn[:-1], X=X, y=y)
    bad = Xn.copy()
    bad[3, 4] = np.inf
    with pytest.raises(ValueError, match="row 3, column 4"):
        est.score_heldout(bad, yn, X=X, y=y)


@pytest.mark.parametrize("n_classes", [3, 20])
def test_pieces_on_threads_score_as_one_block_bit_for_bit(monkeypatch, n_classes):
    """The new rows are scored in pieces of whole prediction chunks on the estimator's
    threads; every score and data-map value equals scoring each block whole on one thread
    (20 classes: the logit path, whose blocks are not cut)."""
    import aflite_core.filter._aflite as aflite_module

    X, y, _ = make_planted(12_000, 32, classes=n_classes, biased=0.4, random_state=1)
    X_fit, y_fit, X_new, y_new = X[:4000], y[:4000], X[4000:], y[4000:]
    results = {}
    for name, piece, n_jobs in (("whole", 1 << 30, 1), ("pieces", 2048, 2)):
        monkeypatch.setattr(aflite_module, "_HELDOUT_PIECE_ROWS", piece)
        model = AFLite(target_size=2000, n_partitions=16, random_state=0,
                       n_jobs=n_jobs).fit(X_fit, y_fit)
        results[name] = model.score_heldout(X_new, y_new, X=X_fit, y=y_fit,
                                            return_datamap=True)
    np.testing.assert_array_equal(results["pieces"].to_numpy(), results["whole"].to_numpy())
    assert results["whole"]["n_heldout"].gt(0).all()


def test_fitting_on_rows_of_x_gives_the_model_of_the_gathered_rows():
    """``fit_lda_partitions(X, ..., rows=r)`` (one gather, the mean summed in chunks) gives
    the very model of ``fit_lda_partitions(X[r], ...)``, bit for bit, over several chunks."""
    rng = np.random.default_rng(3)
    X = (rng.standard_normal((20_000, 24)) * rng.random(24) * 10 + 3).astype(np.float32)
    rows = np.sort(rng.choice(20_000, 13_001, replace=False))
    codes = rng.integers(0, 3, len(rows))
    train = rng.random((8, len(rows))) < 0.5
    gathered = fit_lda_partitions(X[rows], codes, train, 3)
    direct = fit_lda_partitions(X, codes, train, 3, rows=rows)
    for name in ("coef", "intercept", "shift"):
        np.testing.assert_array_equal(getattr(direct, name), getattr(gathered, name), name)
