"""The one builder of text models: hypothesis-only, full-input, and a linear probe on Φ.

Every model the package trains on texts or on Φ (the baselines of
:mod:`aflite_core.measures.baselines`, the built-in models of model probing in
:mod:`aflite_core.cues.probing`, the base model of :mod:`aflite_core.measures.inoculation`)
comes from :func:`text_model`, a scikit-learn :class:`~sklearn.pipeline.Pipeline` with two
steps, ``"features"`` and ``"model"``:

``"hypothesis_only"``
    TF-IDF of the hypothesis's word uni- and bigrams (the partial-input baseline of Gururangan
    et al. 2018 and Poliak et al. 2018).
``"full_input"``
    The same, plus what the *pair* says: indicators of the hypothesis words the premise also
    contains and five overlap statistics (share of hypothesis words found in the premise,
    log(1 + hypothesis words not in the premise), log(1 + hypothesis length), log(1 + premise
    length), every hypothesis word in the premise), standardised on the training rows so that
    none acts as a hidden intercept. A bag of premise words would add little: in NLI every
    premise comes with every label; the overlap is what carries the label.
``"probe"``
    Standardised dense features (Φ) into the same classifier.

Model input (one pair-joining rule)
    The text models read one string per example, made by :func:`pair_text` /
    :func:`pair_texts`: ``premise + PAIR_SEPARATOR + hypothesis`` (the ASCII unit separator,
    removed from the texts first, so the join is unambiguous), or the hypothesis alone for
    single-text data. Both text models accept both forms: the hypothesis-only model ignores
    the premise, so the same inputs serve the partial- and the full-input model.

The settings, one of each
    *Tokeniser*: :func:`aflite_core.text.word_tokens`, the lower-cased word tokens of
    the cue features ("doesn't" -> "does", "n't"; punctuation dropped; one-letter words kept).
    A cue the statistics report ("nobody", "n't") is then exactly a feature the models can
    weigh, and the probing accuracy test speaks of the tokens the model saw.
    *Vectoriser*: TF-IDF of word uni- and bigrams, sublinear tf, L2-normalised rows; fitted
    inside the pipeline, so cross-validation refits it on each training fold.
    *min_df = 2*: a word of a single training row can only memorise that row; dropping such
    words removes about two thirds of the vocabulary at no cost in accuracy (on 16,000 SNLI
    hypotheses: 11,898 instead of 38,499 features, held-out accuracy 0.5955 vs 0.5933).
    *Classifier*: multinomial logistic regression, ``C = 1``, ``max_iter = 1000``, tol
    1e-4, fitted by Newton-CG on the TF-IDF models and by L-BFGS on the probe (dense
    standardised Φ). All solvers aim at the same optimum (the objective is strictly convex);
    they differ in where they stop. On 100k SNLI-like rows (one grouped fold, 2026-11-26),
    Newton-CG stopped closer to it than L-BFGS did, and sooner: hypothesis-only 0.68 s
    against 2.82 s (objective 55,068.9 against 55,077.0; L-BFGS run to tol 1e-9: 55,066.6;
    each test row's gold probability within 0.0017 of that optimum on average, L-BFGS 0.0030),
    full input 1.92 s against 5.79 s (29,465.6 / 29,468.7 / 29,465.3). On dense Φ both take
    the same time (1.9 s against 1.8 s for 50k x 256), so the probe keeps L-BFGS. Both handle
    sample weights (inoculation's retrain mode), and neither depends on a seed. SAGA is
    faster than L-BFGS on TF-IDF alone but converges slowly with unequal sample weights and
    on dense features. Fit under :func:`single_blas_thread`: the solvers gain nothing from
    more BLAS threads here, and oversubscribed threads slow them down several times on a busy
    machine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from aflite_core import blas_threads
from aflite_core._validation import check_choice, check_int, check_real, check_seed
from aflite_core.represent._pair_inputs import (  # noqa: F401 - re-exported
    PAIR_SEPARATOR,
    pair_text,
    pair_texts,
    split_pairs,
)
from aflite_core.text import word_tokens

__all__ = [
    "KINDS",
    "MIN_DF",
    "NGRAM_RANGE",
    "PAIR_SEPARATOR",
    "TextFeatures",
    "pair_text",
    "pair_texts",
    "single_blas_thread",
    "split_pairs",
    "text_model",
]

#: Kinds of model :func:`text_model` builds.
KINDS = ("hypothesis_only", "full_input", "probe")
#: Minimum number of training rows a word (n-gram) must occur in to become a feature.
MIN_DF = 2
#: Word n-grams of the TF-IDF features.
NGRAM_RANGE = (1, 2)
#: The logistic regression's solver per kind (see the module docstring): Newton-CG on TF-IDF
#: (a lower objective than L-BFGS at the same tolerance, three to four times faster), L-BFGS
#: on dense standardised Φ (as fast as Newton-CG there: 1.8 s vs 1.9 s for 50k x 256).
SOLVERS = {"hypothesis_only": "newton-cg", "full_input": "newton-cg", "probe": "lbfgs"}
#: Number of overlap statistics of the full-input features.
N_OVERLAP_STATS = 5


# --------------------------------------------------------------------------------------
# features


def _tfidf() -> TfidfVectorizer:
    return TfidfVectorizer(tokenizer=word_tokens, lowercase=False, token_pattern=None,
                           ngram_range=NGRAM_RANGE, min_df=MIN_DF, sublinear_tf=True,
                           dtype=np.float64)


def _binary() -> CountVectorizer:
    return CountVectorizer(tokenizer=word_tokens, lowercase=False, token_pattern=None,
                           binary=True, min_df=MIN_DF, dtype=np.float64)


def _overlap_stats(premises: list[str], hypotheses: list[str]) -> np.ndarray:
    """The five overlap statistics of the full-input features, over every word."""
    n = len(hypotheses)
    n_hyp, n_shared, n_prem = (np.empty(n, dtype=np.int64) for _ in range(3))
    for i, (p, h) in enumerate(zip(premises, hypotheses, strict=True)):
        hyp, prem = set(word_tokens(h)), set(word_tokens(p))
        n_hyp[i], n_shared[i], n_prem[i] = len(hyp), len(hyp & prem), len(prem)
    return overlap_statistics(n_hyp, n_shared, n_prem)


def overlap_statistics(n_hyp: np.ndarray, n_shared: np.ndarray,
                       n_prem: np.ndarray) -> np.ndarray:
    """The five overlap statistics from each row's distinct hypothesis words, those also in
    its premise, and distinct premise words: the shared share, log1p of the hypothesis'
    own, of its and of the premise's word counts, and whether every hypothesis word is
    shared. Shape (n_rows, :data:`N_OVERLAP_STATS`), float64."""
    n_hyp, n_shared, n_prem = (np.asarray(a, dtype=np.int64) for a in (n_hyp, n_shared, n_prem))
    return np.column_stack([n_shared / np.maximum(n_hyp, 1), np.log1p(n_hyp - n_shared),
                            np.log1p(n_hyp), np.log1p(n_prem),
                            (n_hyp == n_shared).astype(np.float64)])


class TextFeatures(TransformerMixin, BaseEstimator):
    """Features of model input texts: hypothesis TF-IDF, plus premise overlap with ``pair``.

    Parameters
    ----------
    pair : bool, default False
        False: TF-IDF of the hypothesis (the premise, if any, is ignored). True: also the
        indicators of the hypothesis words (training vocabulary, ``min_df`` 2) the premise
        contains, and the five overlap statistics (see the module docstring).

    Attributes
    ----------
    vectorizer_ : TfidfVectorizer
        Fitted on the training hypotheses.
    shared_ : CountVectorizer
        With ``pair=True``: the vocabulary of the shared-word indicators.
    overlap_mean_, overlap_scale_ : np.ndarray of shape (5,)
        With ``pair=True``: mean and standard deviation (1 where it is 0) of the overlap
        statistics on the training rows; the features are the standardised statistics.
    """

    def __init__(self, *, pair: bool = False):
        self.pair = pair

    def fit(self, X: Sequence[str], y: Any = None) -> TextFeatures:
        """Learn the vocabularies from the hypotheses of ``X`` (model input texts)."""
        premises, hypotheses = split_pairs(X)
        self.vectorizer_ = _tfidf().fit(hypotheses)
        if self.pair:
            self.shared_ = _binary().fit(hypotheses)
            stats = _overlap_stats(premises, hypotheses)
            scale = stats.std(axis=0)
            self.overlap_mean_ = stats.mean(axis=0)
            self.overlap_scale_ = np.where(scale > 0, scale, 1.0)
        return self

    def transform(self, X: Sequence[str]) -> sp.csr_matrix:
        """Sparse float64 features, one row per text."""
        check_is_fitted(self, "vectorizer_")
        premises, hypotheses = split_pairs(X)
        F = self.vectorizer_.transform(hypotheses)
        if not self.pair:
            return sp.csr_matrix(F)
        shared = self.shared_.transform(hypotheses).multiply(self.shared_.transform(premises))
        stats = (_overlap_stats(premises, hypotheses) - self.overlap_mean_) / self.overlap_scale_
        return sp.hstack([F, sp.csr_matrix(shared), sp.csr_matrix(stats)], format="csr")

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Hypothesis n-grams, then ``shared:<word>`` and the overlap statistics."""
        check_is_fitted(self, "vectorizer_")
        names = list(self.vectorizer_.get_feature_names_out())
        if self.pair:
            names += [f"shared:{w}" for w in self.shared_.get_feature_names_out()]
            names += ["overlap_share", "log1p_not_in_premise", "log1p_hypothesis_words",
                      "log1p_premise_words", "all_in_premise"]
        return np.asarray(names, dtype=object)


# --------------------------------------------------------------------------------------
# models


def text_model(kind: str, *, C: float = 1.0, max_iter: int = 1000,
               random_state: int | None = 0) -> Pipeline:
    """A fresh, unfitted model of the given kind: ``Pipeline([("features", ...), ("model", ...)])``.

    Parameters
    ----------
    kind : {"hypothesis_only", "full_input", "probe"}
        The text models read model input texts (:func:`pair_texts`); ``"probe"`` reads a 2-D
        numeric array (Φ) and standardises it.
    C : float > 0, default 1.0
        Inverse L2 regularisation of the logistic regression.
    max_iter : int >= 1, default 1000
        Solver iterations (Newton steps for the TF-IDF models, L-BFGS steps for the probe).
    random_state : int or None, default 0
        Stored on the logistic regression (scikit-learn convention; neither solver draws).

    Returns
    -------
    sklearn.pipeline.Pipeline
        Steps ``"features"`` (:class:`TextFeatures` or ``StandardScaler``) and ``"model"``
        (``LogisticRegression``). Fit it under :func:`single_blas_thread`.

    Examples
    --------
    >>> model = text_model("full_input")
    >>> [name for name, _ in model.steps]
    ['features', 'model']
    """
    check_choice("kind", kind, KINDS)
    C = check_real("C", C, low=0.0, low_open=True)
    max_iter = check_int("max_iter", max_iter, minimum=1)
    random_state = check_seed(random_state)
    if kind == "probe":
        features: Any = StandardScaler()
    else:
        features = TextFeatures(pair=kind == "full_input")
    model = LogisticRegression(C=C, max_iter=max_iter, solver=SOLVERS[kind],
                               random_state=random_state)
    return Pipeline([("features", features), ("model", model)])


@contextlib.contextmanager
def single_blas_thread() -> Iterator[None]:
    """Run the enclosed fits with one BLAS thread (see the module docstring)."""
    with blas_threads.limit(1):
        yield
