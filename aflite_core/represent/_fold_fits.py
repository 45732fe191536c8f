"""Many cross-validated fits of one text model on one dataset, vectorised once.

A baseline cross-validates its model on the full rows, the retained rows and several random
subsets: 5 x k fits. Refitting :func:`~aflite_core.represent._text_models.text_model`'s
pipeline for each repeats two costs that do not depend on the training rows:

* **Vectorisation.** The hypotheses are tokenised and counted once (word uni- and bigrams,
  every n-gram). For each training set, the columns with document frequency >= ``MIN_DF`` in
  those rows, their smoothed idf, sublinear tf and the L2 norm are applied to the counts:
  the features are *exactly* (bit for bit) those of a
  :class:`~aflite_core.represent._text_models.TextFeatures` fitted on the training rows
  (``test_fold_fits`` checks it), so no vocabulary or idf leaks from the test rows.
* **No warm start across folds.** Each fold's logistic regression starts from zero. Starting
  it from the previous fold's solution (as this module once did) leaks: that model was
  trained on rows this fold tests, and L-BFGS, started near it, stops on its relative-decrease
  test before it has forgotten them. Measured on 100k SNLI-like rows, 5 grouped folds of the
  hypothesis-only model: the fifth fold's accuracy rose from 0.707 (cold) to 0.731 (warm),
  the mean over folds by 0.7 pp, each row's gold probability by 0.004 on average; with 2
  folds +0.2 pp on the second fold. It also saved nothing at 2 folds (3.0 s vs 2.9 s cold).

Other models (anything :func:`evaluator` does not recognise as a ``text_model`` pipeline) are
cloned and fitted from scratch on each fold, as before.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler, normalize

from aflite_core.represent._partitioned_rows import RowsOnWorkers
from aflite_core.represent._split_products import split_products
from aflite_core.represent._term_counts import NgramCounts, ngram_counts, word_sets
from aflite_core.represent._text_models import (
    MIN_DF,
    TextFeatures,
    overlap_statistics,
    single_blas_thread,
    split_pairs,
)

__all__ = ["SharedTextFeatures", "counts_evaluator", "evaluator", "hypothesis_counts"]


def _take(data, idx: np.ndarray):
    if isinstance(data, np.ndarray):
        return data[idx]
    return [data[i] for i in idx]


#: The last hypothesis count matrices built, by content digest: the baselines, PVI and the
#: label issues of one audit count the same hypotheses (the same rows up to 100k), so the
#: second and third get the first's matrix (1.2 s each at 100k rows). Two entries: a 100k-row
#: sample and all rows; the matrices are read-only.
_COUNTS: OrderedDict[str, NgramCounts] = OrderedDict()
_COUNTS_SIZE = 2
_COUNTS_LOCK = threading.Lock()
#: Larger matrices are built but not kept: what the measures share is their sample of at most
#: 100,000 rows (PVI's matrix of every row above that is its own). Kept, it outlived PVI: at
#: 300k rows 60 MB of the driver's live memory for the rest of the audit (and after it),
#: about 1 GB at 5M.
_COUNTS_MAX_ROWS = 250_000


def hypothesis_counts(hypotheses: Sequence[str]) -> sp.csr_matrix:
    """Counts of every word uni- and bigram of ``hypotheses`` (sorted vocabulary and sorted
    indices, as scikit-learn's ``CountVectorizer``), shared by equal inputs (see
    :data:`_COUNTS`); the result must not be modified."""
    return _ngrams(hypotheses).counts


def _ngrams(hypotheses: Sequence[str]) -> NgramCounts:
    """:func:`hypothesis_counts` with its columns' words (shared like the counts)."""
    digest = hashlib.sha256()
    for text in hypotheses:
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\x1e")
    key = f"{len(hypotheses)}:{digest.hexdigest()}"
    with _COUNTS_LOCK:
        if key in _COUNTS:
            _COUNTS.move_to_end(key)
            return _COUNTS[key]
    entry = ngram_counts(hypotheses)
    if len(hypotheses) > _COUNTS_MAX_ROWS:
        return entry
    with _COUNTS_LOCK:
        _COUNTS[key] = entry
        while len(_COUNTS) > _COUNTS_SIZE:
            _COUNTS.popitem(last=False)
    return entry


class SharedTextFeatures:
    """The features of :class:`TextFeatures` for any training rows of one set of texts.

    Parameters
    ----------
    texts : sequence of str
        Model input texts (:func:`~aflite_core.represent._text_models.pair_texts`), all rows.
    pair : bool, default False
        As :class:`TextFeatures`: also the premise-overlap features.

    Attributes
    ----------
    counts_ : scipy.sparse.csr_matrix of shape (n_rows, n_ngrams)
        Counts of every hypothesis uni- and bigram (sorted vocabulary, as scikit-learn's).
    n_columns_ : int
        Number of global columns (n-grams, then shared words and overlap statistics with
        ``pair``); :meth:`split` names the global column of each fold column.
    """

    def __init__(self, texts: Sequence[str], *, pair: bool = False):
        premises, hypotheses = split_pairs(texts)
        self.pair = pair
        ngrams = _ngrams(hypotheses)
        self.counts_ = ngrams.counts
        self.n_columns_ = self.counts_.shape[1]
        if pair:
            self._pair_features(premises, ngrams)
            self.n_columns_ += self.hyp_words_.shape[1] + self.stats_.shape[1]

    @classmethod
    def from_counts(cls, ngrams: NgramCounts) -> SharedTextFeatures:
        """The hypothesis-only features (``pair=False``) of texts whose n-gram counts are
        ``ngrams`` (:func:`~aflite_core.represent._term_counts.ngram_counts` of them, e.g.
        built on a cluster's workers by :mod:`aflite_core.represent._partitioned_counts`)."""
        features = cls.__new__(cls)
        features.pair = False
        features.counts_ = ngrams.counts
        features.n_columns_ = ngrams.counts.shape[1]
        return features

    def _pair_features(self, premises: list[str], ngrams: NgramCounts) -> None:
        """The shared words and the overlap statistics, from the hypothesis counts and each
        distinct premise's words (SNLI: about three hypotheses a premise).

        The same columns, bit for bit, as :class:`TextFeatures`
        (``tests/represent/test_fold_fits.py``):
        the hypotheses' word vocabulary is the counts' unigram columns (the same tokens,
        sorted alike), a hypothesis' distinct words are its row there (every word is in
        the vocabulary), the shared ones its row of the product with the premise's words,
        and the statistics are those counts (at 100k rows 1.9 -> 0.6 s: no hypothesis is
        tokenised again, no premise twice).
        """
        unigrams = np.flatnonzero(ngrams.second < 0)  # the words' columns, in word order
        hyp_words = self.counts_[:, unigrams].tocsr()
        hyp_words.data[:] = 1.0
        self.hyp_words_ = hyp_words
        codes, distinct = pd.factorize(np.asarray(premises, dtype=object))
        premise_words, n_prem = word_sets(distinct, ngrams.words)
        self.shared_words_ = hyp_words.multiply(premise_words[codes]).tocsr()
        n_hyp = np.diff(hyp_words.indptr)
        n_shared = np.diff(self.shared_words_.indptr)
        self.stats_ = overlap_statistics(n_hyp, n_shared, n_prem[codes])

    def split(self, train: np.ndarray, test: np.ndarray
              ) -> tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray]:
        """Features of the training and test rows, as if fitted on ``train`` alone.

        Returns
        -------
        X_train, X_test : csr_matrix
        columns : ndarray of int
            Global column of each feature column (for warm starts across folds).
        """
        X_train, test_features, columns = self.split_deferred(train, test)
        return X_train, test_features(), columns

    def split_deferred(self, train: np.ndarray, test: np.ndarray
                       ) -> tuple[sp.csr_matrix, Callable[[], sp.csr_matrix], np.ndarray]:
        """:meth:`split` with the test rows' features made when asked for: a fold fits
        without them beside its training rows' (at 1M rows, a third of a fold's 155 MB of
        features, for the 7 s of its fit; three folds fit side by side on 16 cores).

        Returns
        -------
        X_train : csr_matrix
        test_features : callable
            ``test_features()`` is the test rows' features (the same as :meth:`split`'s).
        columns : ndarray of int
        """
        counts = self.counts_
        df = np.bincount(counts[train].indices, minlength=counts.shape[1])
        cols = np.flatnonzero(df >= MIN_DF)
        if len(cols) == 0:
            raise ValueError("After pruning, no terms remain: no word occurs in MIN_DF="
                             f"{MIN_DF} training rows")
        idf = np.log((len(train) + 1.0) / (df[cols].astype(np.float64) + 1.0)) + 1.0

        def tfidf(rows: np.ndarray) -> sp.csr_matrix:
            X = counts[rows][:, cols].tocsr()
            np.log(X.data, X.data)
            X.data += 1.0
            X.data *= idf[X.indices]
            return normalize(X, norm="l2", copy=False)

        if not self.pair:
            return tfidf(train), lambda: tfidf(test), cols
        words_df = np.bincount(self.hyp_words_[train].indices,
                               minlength=self.hyp_words_.shape[1])
        word_cols = np.flatnonzero(words_df >= MIN_DF)
        stats_train = self.stats_[train]
        mean, scale = stats_train.mean(axis=0), stats_train.std(axis=0)
        scale = np.where(scale > 0, scale, 1.0)

        def features(rows: np.ndarray, tf: sp.csr_matrix) -> sp.csr_matrix:
            shared = self.shared_words_[rows][:, word_cols]
            stats = (self.stats_[rows] - mean) / scale
            return sp.hstack([tf, sp.csr_matrix(shared), sp.csr_matrix(stats)], format="csr")

        n_grams, n_words = counts.shape[1], self.hyp_words_.shape[1]
        columns = np.concatenate([cols, n_grams + word_cols,
                                  n_grams + n_words + np.arange(self.stats_.shape[1])])
        return (features(train, tfidf(train)), lambda: features(test, tfidf(test)),
                columns)


class _FoldLogistic:
    """Fits the logistic regression of one fold from zero (see the module docstring: a warm
    start from another fold's solution leaks that fold's training rows)."""

    def __init__(self, model: LogisticRegression):
        self.model = model

    def fit(self, X_train, y_train) -> LogisticRegression:
        clf = clone(self.model)
        # its sparse products on the cores the other folds leave
        with single_blas_thread(), split_products(X_train) as X:
            clf.fit(X, y_train)
        return clf


class _Evaluator:
    """Fits and predicts one fold: ``fit_predict(train, test)`` over row positions.

    The labels are coded as integers once (``classes_[codes_]`` are the labels): every fit
    then takes integer targets, and scikit-learn's checks of them (``np.unique`` of the
    training labels, several times a fit) no longer sort strings: 2.3 s of the 100k-row
    baselines' 11 s of CPU. The same fits: a classifier encodes string labels in the same
    sorted order."""

    def __init__(self, model, data, labels):
        self.model, self.data = model, data
        self.classes_, codes = np.unique(np.asarray(labels), return_inverse=True)
        self.codes_ = codes.astype(np.intp).reshape(-1)

    def _fit(self, train: np.ndarray):
        with single_blas_thread():
            return clone(self.model).fit(_take(self.data, train), self.codes_[train])

    def fit_predict(self, train: np.ndarray, test: np.ndarray) -> np.ndarray:
        """Fit on the rows ``train``; the predicted labels of the rows ``test``."""
        return self.classes_[self._fit(train).predict(_take(self.data, test))]

    def fit_predict_proba(self, train: np.ndarray, test: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray]:
        """Fit on the rows ``train``; the classes and the probabilities of the rows ``test``."""
        fitted = self._fit(train)
        return self.classes_[fitted.classes_], fitted.predict_proba(_take(self.data, test))


class _FoldEvaluator(_Evaluator):
    def fit_predict(self, train, test, *data):
        classes, proba = self.fit_predict_proba(train, test, *data)
        return classes[np.argmax(proba, axis=1)]


class _SharedTextEvaluator(_FoldEvaluator):
    def __init__(self, model: Pipeline, data, labels,
                 features: SharedTextFeatures | None = None):
        super().__init__(model, data, labels)
        self.features = features if features is not None else SharedTextFeatures(
            data, pair=model.named_steps["features"].pair)
        self.logistic = _FoldLogistic(model.named_steps["model"])
        # the folds read the features only: the texts are not kept, nor sent with the
        # evaluator to a cluster's workers (PVI's: every filtered row's hypothesis)
        self.data = None

    def fit_predict_proba(self, train, test):
        X_train, test_features, _ = self.features.split_deferred(train, test)
        clf = self.logistic.fit(X_train, self.codes_[train])
        del X_train  # the test rows' features made once the training rows' are gone
        return self.classes_[clf.classes_], clf.predict_proba(test_features())


class _ProbeEvaluator(_FoldEvaluator):
    """The probe's folds on an array, or on rows a cluster's worker holds
    (:class:`~aflite_core.represent.RowsOnWorkers`): their future is
    ``resident_``, for ``map_folds(resident=...)``, and each fit is given the rows
    (``fit_predict(train, test, rows)``)."""

    def __init__(self, model: Pipeline, data, labels):
        on_workers = isinstance(data, RowsOnWorkers)
        super().__init__(model, None if on_workers else np.asarray(data), labels)
        self.resident_ = data.future if on_workers else None
        self.logistic = _FoldLogistic(model.named_steps["model"])

    def fit_predict_proba(self, train, test, data=None):
        X = self.data if data is None else data
        rows = X[train]  # a copy of its own, standardised in place: the rows once, not thrice
        with _SCALER_FITS:
            scaler = clone(self.model.named_steps["features"]).fit(rows)
        clf = self.logistic.fit(scaler.transform(rows, copy=False), self.codes_[train])
        return self.classes_[clf.classes_], clf.predict_proba(
            scaler.transform(X[test], copy=False))


#: Probe folds that fit their scaler at once. ``StandardScaler.fit`` holds a float64 copy of
#: its rows and more (267 MB above the 82 MB of a fold's 80,000 rows x 256 float32): four
#: folds side by side held 0.87 GB, two 0.51 GB; the fit is 0.1-0.3 s of a fold's 1.3 s.
_SCALER_FITS = threading.BoundedSemaphore(1)


def _text_model_parts(model: Any) -> tuple[Any, Any] | None:
    if not isinstance(model, Pipeline) or [n for n, _ in model.steps] != ["features", "model"]:
        return None
    features, clf = model.named_steps["features"], model.named_steps["model"]
    if type(clf) is not LogisticRegression or clf.warm_start:
        return None
    return features, clf


def evaluator(model, data, labels) -> _Evaluator:
    """A fold evaluator for ``model`` on ``data``: vectorised once where possible.

    Parameters
    ----------
    model : scikit-learn estimator
        A :func:`~aflite_core.represent._text_models.text_model` pipeline gets the shared
        vectorisation (see the module docstring); every fold's classifier starts from zero;
        any other model is cloned and fitted on each fold.
    data : list of str, array of shape (n_rows, n_features) or RowsOnWorkers
        :class:`~aflite_core.represent.RowsOnWorkers` (rows a cluster's
        worker holds) only for the probe (``text_model("probe")``): its fits then run
        there, given the rows (the evaluator's ``resident_``).
    labels : array of shape (n_rows,)

    Returns
    -------
    object with ``fit_predict(train, test)`` (predicted labels of the rows ``test``) and
    ``fit_predict_proba(train, test)`` (``classes``, probabilities of the rows ``test``)
    """
    parts = _text_model_parts(model)
    if isinstance(data, RowsOnWorkers) and (parts is None
                                            or type(parts[0]) is not StandardScaler):
        raise TypeError("evaluator: rows held on a worker (RowsOnWorkers) are for the linear "
                        f"probe (text_model('probe')) only; got {model!r}")
    if parts is not None:
        features, _ = parts
        if type(features) is TextFeatures and not isinstance(data, np.ndarray):
            return _SharedTextEvaluator(model, data, labels)
        if (type(features) is StandardScaler and isinstance(data, np.ndarray | RowsOnWorkers)
                and data.ndim == 2 and features.get_params() == StandardScaler().get_params()):
            return _ProbeEvaluator(model, data, labels)
    if isinstance(data, RowsOnWorkers):  # a scaler with other parameters than the probe's
        raise TypeError("evaluator: rows held on a worker (RowsOnWorkers) are for the linear "
                        f"probe (text_model('probe')) only; got {model!r}")
    return _Evaluator(model, data, labels)


def counts_evaluator(model: Pipeline, ngrams: NgramCounts, labels) -> _FoldEvaluator:
    """The evaluator :func:`evaluator` gives a hypothesis-only
    :func:`~aflite_core.represent._text_models.text_model` on texts whose n-gram counts are
    ``ngrams``: the same fits bit for bit, built without the texts (PVI's, on a cluster's
    worker from counts made there).

    Raises
    ------
    ValueError
        If ``model`` is not a hypothesis-only text model or the counts' rows are not one per
        label.
    """
    parts = _text_model_parts(model)
    if parts is None or type(parts[0]) is not TextFeatures or parts[0].pair:
        raise ValueError("model: expected text_model('hypothesis_only'), got "
                         f"{type(model).__name__}")
    if ngrams.counts.shape[0] != len(labels):
        raise ValueError(f"ngrams: expected {len(labels)} rows (one per label), got "
                         f"{ngrams.counts.shape[0]}")
    return _SharedTextEvaluator(model, None, labels, SharedTextFeatures.from_counts(ngrams))
