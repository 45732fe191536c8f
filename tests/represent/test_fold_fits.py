"""Shared vectorisation gives the folds of text_model exactly, and no fold starts from another
fold's model (a warm start from a model trained on this fold's test rows leaked them)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aflite_core.measures.baselines import _cv_accuracy, cross_validated_accuracy
from aflite_core.represent._fold_fits import SharedTextFeatures, _Evaluator, evaluator
from aflite_core.represent._text_models import pair_texts, text_model
from aflite_core.splits import cv_folds


@pytest.fixture(scope="module")
def snli(snli_dir) -> pd.DataFrame:
    return pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False).iloc[:3000]


@pytest.mark.parametrize("kind", ["hypothesis_only", "full_input"])
def test_shared_features_are_the_features_fitted_on_the_training_rows(snli, kind):
    texts = pair_texts(snli["premise"].tolist(), snli["hypothesis"].tolist())
    shared = SharedTextFeatures(texts, pair=kind == "full_input")
    y = snli["label"].to_numpy()
    for train, test in cv_folds(y, n_splits=3, random_state=1):
        fitted = text_model(kind).named_steps["features"].fit([texts[i] for i in train])
        X_train, X_test, columns = shared.split(train, test)
        expected_train = fitted.transform([texts[i] for i in train])
        expected_test = fitted.transform([texts[i] for i in test])
        assert X_train.shape == expected_train.shape and X_test.shape == expected_test.shape
        # bit for bit: the same vocabulary, idf, tf and norm as refitting the vectoriser
        assert (X_train != expected_train).nnz == 0
        assert (X_test != expected_test).nnz == 0
        assert len(columns) == X_train.shape[1] and len(set(columns)) == len(columns)
        assert columns.max() < shared.n_columns_
        # the test rows' features made later, once a fold has fitted: the same
        later_train, test_features, _ = shared.split_deferred(train, test)
        assert (later_train != X_train).nnz == 0 and (test_features() != X_test).nnz == 0


def _cold_accuracy(model, data, y, rows, n_splits):
    return _cv_accuracy(_Evaluator(model, data, y), rows, codes=None, n_splits=n_splits,
                        random_state=0)


@pytest.mark.parametrize("kind", ["hypothesis_only", "full_input", "probe"])
def test_the_fast_folds_are_the_cold_fits_exactly(snli, kind):
    y = snli["label"].to_numpy()
    if kind == "probe":
        rng = np.random.default_rng(0)
        codes = pd.factorize(y)[0]
        data = rng.normal(size=(len(y), 20)) + 0.4 * codes[:, None]
    else:
        data = pair_texts(snli["premise"].tolist(), snli["hypothesis"].tolist())
    model = text_model(kind)
    ev = evaluator(model, data, y)
    assert type(ev) is not _Evaluator, "a text_model pipeline takes the fast path"
    rng = np.random.default_rng(3)
    for rows in (np.arange(len(y)), np.sort(rng.choice(len(y), 1500, replace=False))):
        fast = _cv_accuracy(ev, rows, codes=None, n_splits=4, random_state=0)
        cold = _cold_accuracy(model, data, y, rows, 4)
        assert fast["n_rows"] == cold["n_rows"] == len(rows)
        assert fast["fold_accuracies"] == cold["fold_accuracies"]
    assert cross_validated_accuracy(model, data, y, n_splits=4)["accuracy"] > 0.4


def test_a_fold_never_starts_from_a_model_that_saw_its_test_rows(snli):
    """Labels that are pure noise: a model can only beat chance on a test row by having
    trained on it. Each fold's probabilities equal a fit from zero on its training rows, so
    the out-of-fold accuracy of the later folds stays at chance like the first one's."""
    texts = pair_texts(snli["premise"].tolist(), snli["hypothesis"].tolist())
    y = np.random.default_rng(5).choice(["a", "b", "c"], len(texts))
    ev = evaluator(text_model("hypothesis_only"), texts, y)
    folds = cv_folds(y, n_splits=5, random_state=0)
    for train, test in folds:
        classes, proba = ev.fit_predict_proba(train, test)
        cold = text_model("hypothesis_only").fit([texts[i] for i in train], y[train])
        np.testing.assert_allclose(proba, cold.predict_proba([texts[i] for i in test]),
                                   atol=1e-9)
        assert abs((classes[proba.argmax(1)] == y[test]).mean() - 1 / 3) < 0.06


def test_other_models_are_refitted_on_every_fold(snli):
    from sklearn.dummy import DummyClassifier

    y = snli["label"].to_numpy()
    ev = evaluator(DummyClassifier(strategy="most_frequent"), np.zeros((len(y), 1)), y)
    assert type(ev) is _Evaluator
    res = cross_validated_accuracy(DummyClassifier(strategy="most_frequent"),
                                   np.zeros((len(y), 1)), y, n_splits=3)
    assert res["accuracy"] == pytest.approx(res["majority_accuracy"])


def test_equal_hypotheses_share_one_count_matrix(snli):
    """The baselines, PVI and the label issues count the same hypotheses: the second gets
    the first's matrix, which equals a fresh count (and other texts get their own)."""
    from sklearn.feature_extraction.text import CountVectorizer

    from aflite_core.represent._fold_fits import hypothesis_counts
    from aflite_core.represent._text_models import NGRAM_RANGE
    from aflite_core.text import word_tokens

    hyps = snli["hypothesis"].tolist()
    first = SharedTextFeatures(pair_texts(None, hyps))
    paired = SharedTextFeatures(pair_texts(snli["premise"].tolist(), hyps), pair=True)
    assert paired.counts_ is first.counts_
    fresh = CountVectorizer(tokenizer=word_tokens, lowercase=False, token_pattern=None,
                            ngram_range=NGRAM_RANGE).fit_transform(hyps)
    assert (first.counts_ != fresh).nnz == 0
    other = hypothesis_counts(hyps[:100])
    assert other is not first.counts_ and other.shape[0] == 100
    # folds read the shared matrix without changing it
    before = first.counts_.copy()
    rows = np.arange(len(hyps))
    first.split(rows[: len(rows) // 2], rows[len(rows) // 2:])
    assert (first.counts_ != before).nnz == 0


def test_a_count_matrix_larger_than_the_shared_samples_is_not_kept(snli, monkeypatch):
    """Only matrices of up to ``_COUNTS_MAX_ROWS`` rows are kept for the next measure: a
    larger one (PVI's of every row) is its caller's alone and goes when it is done with it."""
    import gc
    import weakref

    import aflite_core.represent._fold_fits as fold_fits

    hyps = snli["hypothesis"].tolist()
    monkeypatch.setattr(fold_fits, "_COUNTS", type(fold_fits._COUNTS)())  # none kept yet
    monkeypatch.setattr(fold_fits, "_COUNTS_MAX_ROWS", len(hyps) - 1)
    counts = fold_fits.hypothesis_counts(hyps)
    assert fold_fits.hypothesis_counts(hyps) is not counts  # counted again: not kept
    gone = weakref.ref(counts)
    del counts
    gc.collect()
    assert gone() is None
    small = fold_fits.hypothesis_counts(hyps[:500])
    assert fold_fits.hypothesis_counts(hyps[:500]) is small


def test_the_shared_evaluator_keeps_and_sends_the_features_not_the_texts(snli):
    """Vectorised once, the evaluator's folds read its features only: its pickle (what a
    cluster's workers receive) holds no text, and its folds' predictions are unchanged."""
    import pickle

    from aflite_core.represent._fold_fits import evaluator
    from aflite_core.represent._text_models import text_model

    hyps = [f"{h} zqxwvplanted" for h in snli["hypothesis"].tolist()[:600]]
    y = snli["label"].to_numpy()[:600]
    model = evaluator(text_model("hypothesis_only"), pair_texts(None, hyps), y)
    assert b"zqxwvplanted" not in pickle.dumps(model.features.counts_)  # counts, not words
    sent = pickle.dumps(model)
    assert not any(h.encode() in sent for h in hyps[:50])  # no hypothesis travels
    assert sent.count(b"zqxwvplanted") <= 1  # at most once: a column's name
    rows = np.arange(600)
    before = model.fit_predict_proba(rows[:400], rows[400:])
    again = pickle.loads(sent).fit_predict_proba(rows[:400], rows[400:])
    np.testing.assert_array_equal(before[1], again[1])
