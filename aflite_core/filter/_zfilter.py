"""Z-filter: remove rows until no word's z-statistic passes a Bonferroni threshold.

A second filter beside AFLite, built on the z-statistic of Gardner et al. (*Competency
Problems: On Finding and Removing Artifacts in Language Data*, EMNLP 2021). For a feature ``x``
(by default a lower-cased word of the hypothesis, tokenised by
:func:`aflite_core.text.word_tokens` as in the cue table) and a label ``l``::

    z(x, l) = (p_hat(l | x) - p0_l) / sqrt(p0_l (1 - p0_l) / n_x)

with ``n_x`` the rows holding ``x`` and ``p_hat(l | x)`` the share of label ``l`` among them.
Gardner et al. take ``p0 = 1 / |L|``; the Z-filter takes the **empirical** label shares of the
current rows (``p0_l = N_l / N``), so that label imbalance alone flags no word and "no
feature's z passes the threshold" means "no word's label distribution differs significantly
from that of the data". The z is computed once, in
:func:`aflite_core.cues.statistics.z_statistic` (its ``prior`` argument).

The test is two-sided (``|z|``: over- and under-representation both count), Bonferroni
corrected over ``m`` = tested features x labels at level ``alpha``:
``threshold_ = Phi^-1(1 - alpha / (2 m))``; a feature is tested when it occurs in at least
``min_count`` rows of the input, and ``m`` and the threshold are fixed before any removal.

Removal (the removal form of Wu et al.'s z-filtering, *Generating Data to Mitigate Spurious
Correlations in Natural Language Inference Datasets*, ACL 2022, which selects a subset whose
features all have z below a threshold): each step takes every feature whose largest ``|z|``
passes the threshold, its over-represented label ``l*(x) = argmax_l z(x, l)`` and the number of
``(x, l*)`` rows whose removal would bring it back to the threshold (closed form, with the
prior held fixed; under-representation of another label is shared out over the
over-represented labels). A row's contribution is the summed excess ``max_l |z(x, l)| -
threshold`` of the flagged features it holds with their over-represented label; rows are
removed in order of contribution, at most the computed number per feature (a row counts
towards its largest contributor) and at most ``batch_size`` rows per step; ties are broken by a
seeded random order. Counts are updated incrementally (one sparse product over the removed
rows) and z recomputed for every feature after each step, which costs ``O(features x labels)``
plus the removed rows' non-zeros: the whole SNLI training set (550k rows) is a few seconds.

It stops when no ``|z|`` passes the threshold (``"converged"``), when the target size is reached
(``"target_size"``), or when a callback asks (``"callback"``). With ``until="target_size"`` it
does not stop at convergence but goes on to the target, lowering the bar each step to 90 % of
the current largest ``|z|`` (the rows that contribute most to the largest ``|z|`` keep leaving):
this gives a Z-filtered subset of a chosen size, e.g. AFLite's, for comparisons at equal size.

The filter sees only a binary example-by-feature matrix; given texts, :func:`binary_features`
builds it with the cue extractors of :mod:`aflite_core.cues.linguistic`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from aflite_core._validation import (
    check_callback,
    check_choice,
    check_int,
    check_real,
    check_size,
    make_rng,
    resolve_size,
)
from aflite_core.cues import FAMILIES, extract_features, shrunk_shares, z_statistic, z_threshold
from aflite_core.filter._rounds import STOP_CALLBACK, STOP_TARGET, asks_to_stop, encode_labels

__all__ = ["ZFilter", "UNTIL", "binary_features", "subset_z"]

#: When the Z-filter stops: at convergence or the target, whichever comes first
#: (``"threshold"``), or only at the target (``"target_size"``).
UNTIL = ("threshold", "target_size")
STOP_CONVERGED = "converged"
STOP_STUCK = "no_candidates"
#: Default rows removed per step at most, as a fraction of the input.
DEFAULT_BATCH_FRACTION = 0.005
#: With ``until="target_size"``, past convergence each step targets the features above this
#: share of the current largest |z|.
_LOWER_BAR = 0.9


# --------------------------------------------------------------------------------------
# features and z
# --------------------------------------------------------------------------------------


def _is_texts(X: Any) -> bool:
    if isinstance(X, (str, bytes)):
        return False
    if isinstance(X, pd.Series):
        return X.dtype == object or pd.api.types.is_string_dtype(X)
    if isinstance(X, (list, tuple)):
        return len(X) > 0 and all(isinstance(t, str) for t in X[:100])
    return isinstance(X, np.ndarray) and X.ndim == 1 and X.dtype.kind in "OUS"


def _check_families(features: Any) -> tuple[str, ...]:
    families = (features,) if isinstance(features, str) else tuple(features)
    if not families:
        raise ValueError(f"features: expected one or more of {FAMILIES}, got none")
    for family in families:
        check_choice("features", family, FAMILIES)
    return families


def binary_features(X: Any, *, features: str | Sequence[str] = "word", min_count: int = 1
                    ) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """The binary example-by-feature matrix the Z-filter tests.

    Parameters
    ----------
    X : sequence of str, or array-like / sparse matrix of shape (n_samples, n_features)
        Texts (the hypotheses), or a 0/1 indicator matrix (any non-zero counts as 1).
    features : str or sequence of str, default "word"
        For texts: families of :func:`aflite_core.cues.linguistic.extract_features` (``word``:
        lower-cased word unigrams, punctuation dropped). Families that need an NLTK resource
        raise when it is missing.
    min_count : int, default 1
        Keep features present in at least this many rows.

    Returns
    -------
    (X, names, columns)
        ``X``: CSR int8 ``(n_samples, n_kept)``; ``names``: each kept feature (the word; or
        ``family:value`` for other families; or the input column index for a matrix);
        ``columns``: the kept columns' positions in the unfiltered feature set.
    """
    min_count = check_int("min_count", min_count, minimum=1)
    if _is_texts(X):
        families = _check_families(features)
        fm = extract_features([str(t) for t in X], features=families, min_count=1,
                              cache=False, on_missing="raise")
        matrix = fm.X.tocsr()
        names = np.asarray([f if t == "word" else f"{t}:{f}"
                            for t, f in zip(fm.feature_type, fm.feature, strict=True)],
                           dtype=object)
    else:
        matrix = _check_matrix(X)
        names = np.arange(matrix.shape[1], dtype=np.int64)
    matrix = sp.csr_matrix(matrix, dtype=np.int8, copy=True)
    matrix.data[:] = 1
    matrix.eliminate_zeros()
    matrix.sum_duplicates()
    columns = np.flatnonzero(matrix.getnnz(axis=0) >= min_count)
    return matrix[:, columns].tocsr(), names[columns], columns


def _check_matrix(X: Any) -> sp.csr_matrix:
    if sp.issparse(X):
        matrix = sp.csr_matrix(X)
    else:
        try:
            arr = np.asarray(X)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"X: expected texts or a 0/1 matrix, got {type(X).__name__}") \
                from exc
        if arr.ndim != 2 and arr.dtype.kind in "biuf":
            hint = "; reshape a single feature with X.reshape(-1, 1)" if arr.ndim == 1 else ""
            raise ValueError(
                "X: expected a 2-D 0/1 matrix of shape (n_samples, n_features) (or a sequence "
                f"of texts), got an array of shape {arr.shape}{hint}")
        if arr.ndim != 2 or arr.dtype.kind not in "biuf":
            raise TypeError(
                "X: expected a sequence of texts or a 2-D 0/1 matrix of shape (n_samples, "
                f"n_features), got {type(X).__name__} of shape {arr.shape}, dtype {arr.dtype}")
        matrix = sp.csr_matrix(arr)
    if matrix.dtype.kind == "f" and not np.isfinite(matrix.data).all():
        raise ValueError("X: expected a 0/1 matrix, found NaN or infinite values")
    if matrix.nnz and (matrix.data < 0).any():
        raise ValueError("X: expected a 0/1 matrix (a value > 0 marks a present feature), "
                         "got negative values (Negative values in data)")
    return matrix


def _z(counts: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """z of every (feature, label) cell under the empirical prior; NaN where untestable."""
    with np.errstate(divide="ignore", invalid="ignore"):
        z = z_statistic(counts, np.asarray(totals, dtype=float))
    z[~np.isfinite(z)] = np.nan
    return z


def subset_z(X: sp.spmatrix, y: Any, mask: Any = None, *, classes: Sequence | None = None
             ) -> np.ndarray:
    """z of every (feature, label) cell on the rows of ``mask``, under their label shares.

    The statistic the Z-filter drives below its threshold, for any subset (AFLite's retained
    rows, a random subset) of the rows of a :func:`binary_features` matrix.

    Parameters
    ----------
    X : sparse matrix, shape (n_samples, n_features)
        0/1 indicators.
    y : array-like of shape (n_samples,)
    mask : array-like of bool, optional
        Rows to count (default: all).
    classes : sequence, optional
        Label order of the columns (default: the sorted labels of ``y``).

    Returns
    -------
    ndarray of shape (n_features, n_labels)
        NaN for features absent from the subset.
    """
    y = np.asarray(y)
    if y.ndim != 1 or len(y) != X.shape[0]:
        raise ValueError(f"y: expected shape ({X.shape[0]},) (one label per row of X), got "
                         f"{y.shape}")
    order = np.unique(y) if classes is None else np.asarray(classes)
    codes = pd.Index(order).get_indexer(pd.Index(y))
    if (codes < 0).any():
        raise ValueError(f"y: label {y[codes < 0][0]!r} is not in classes {list(order)}")
    rows = np.ones(len(y), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if rows.shape != y.shape:
        raise ValueError(f"mask: expected shape {y.shape}, got {rows.shape}")
    counts = _label_counts(sp.csr_matrix(X)[rows], codes[rows], len(order))
    return _z(counts, np.bincount(codes[rows], minlength=len(order)))


def _label_counts(X: sp.csr_matrix, codes: np.ndarray, n_labels: int) -> np.ndarray:
    """``X.T @ one_hot(codes)`` as an int64 ``(n_features, n_labels)`` array."""
    labels = np.repeat(codes.astype(np.int64), np.diff(X.indptr))
    flat = X.indices.astype(np.int64) * n_labels + labels
    return np.bincount(flat, minlength=X.shape[1] * n_labels).reshape(X.shape[1], n_labels)


def _rows_needed(counts: np.ndarray, z: np.ndarray, prior: np.ndarray, star: np.ndarray,
                 level: float) -> np.ndarray:
    """Rows of ``(x, l*)`` whose removal brings each feature's |z| back to ``level``.

    Closed form with the prior held fixed: removing ``r`` rows of label ``l*`` from the
    ``n`` rows of ``x`` leaves ``m = n - r`` rows, and ``z(x, l*) <= level`` holds once
    ``q m - d <= level * sigma * sqrt(m)`` (``d`` = rows of ``x`` with another label,
    ``q = 1 - p0``, ``sigma = sqrt(p0 q)``). A label under-represented below ``-level`` needs
    ``p0_u m - level sigma_u sqrt(m) <= c_u``; that deficit is shared out over the
    over-represented labels in proportion to their excess share.
    """
    idx = np.arange(len(star))
    n = counts.sum(axis=1).astype(float)
    c_star = counts[idx, star].astype(float)
    p0 = prior[star]
    q = 1.0 - p0
    sigma = np.sqrt(p0 * q)
    d = n - c_star
    with np.errstate(divide="ignore", invalid="ignore"):
        u = (level * sigma + np.sqrt((level * sigma) ** 2 + 4 * q * d)) / (2 * q)
        r_pos = np.where(z[idx, star] > level, np.ceil(n - u**2 - 1e-9), 0.0)
        under = np.nanargmin(np.where(np.isnan(z), np.inf, z), axis=1)
        p_u = prior[under]
        sigma_u = np.sqrt(p_u * (1 - p_u))
        c_u = counts[idx, under].astype(float)
        u_max = (level * sigma_u + np.sqrt((level * sigma_u) ** 2 + 4 * p_u * c_u)) / (2 * p_u)
        r_neg = np.where(z[idx, under] < -level, np.ceil(n - u_max**2 - 1e-9), 0.0)
        shares = counts / np.maximum(n, 1.0)[:, None]
        excess = np.clip(shares - prior[None, :], 0.0, None)
        part = excess[idx, star] / np.maximum(excess.sum(axis=1), 1e-300)
    r = np.maximum(np.nan_to_num(r_pos), np.ceil(np.nan_to_num(r_neg) * part))
    return np.clip(r, 1, np.maximum(c_star, 1)).astype(np.int64)


# --------------------------------------------------------------------------------------
# the estimator
# --------------------------------------------------------------------------------------


class ZFilter(BaseEstimator):
    """Remove rows until no feature's |z| passes the Bonferroni threshold (a filter).

    See the module docstring for the statistic and the removal rule. Like
    :class:`~aflite_core.filter.AFLite`, a filter: ``fit(X, y)`` finds the rows of this
    data to keep (``keep_mask_``) and :meth:`fit_predict` returns the mask; ``__init__`` only
    stores the parameters and ``fit`` validates them.

    Parameters
    ----------
    target_size : int, float or None, default None
        Rows to keep at least: an int in ``[1, n_samples)`` or a fraction of the input in
        ``(0, 1)`` (rounded up). ``None``: no floor, stop at convergence.
    alpha : float, default 0.01
        Family-wise level of the two-sided z tests (Bonferroni over tested features x labels).
    min_count : int, default 5
        A feature is tested when at least this many input rows hold it (the cue table's
        default minimum support).
    features : str or sequence of str, default "word"
        With texts: which cue families make the features (``word``: hypothesis unigrams).
        Ignored when ``X`` is a matrix.
    until : {"threshold", "target_size"}, default "threshold"
        ``threshold``: stop at convergence or at ``target_size``, whichever comes first.
        ``target_size``: go on past convergence to ``target_size`` (required then),
        removing the rows that contribute most to the largest remaining |z|.
    batch_size : int, float or None, default None
        Rows removed per step at most: an int, or a fraction of the input in ``(0, 1]``.
        ``None``: 0.5 % of the input (at least 1). Fewer rows are removed when the flagged
        features need fewer; 1 is the exact one-row-at-a-time greedy.
    random_state : int, numpy Generator or None, default None
        Seeds the tie-break order only; the result is otherwise deterministic.
    callback : callable, optional
        ``callback(info)`` after every step with ``round`` (1-based), ``size`` (rows after
        the step), ``size_before``, ``removed``, ``removed_total``, ``target_size``,
        ``n_samples``, ``max_abs_z`` (after the step), ``n_over_threshold``, ``seconds``,
        ``elapsed`` and ``stop_reason`` (None unless it stops after this step). Returning
        ``True`` stops after this step.

    Attributes
    ----------
    keep_mask_ : ndarray of shape (n_samples,), bool
    removal_round_ : ndarray of shape (n_samples,), int64
        1-based step a row was removed in, -1 for retained rows.
    order_ : ndarray of shape (n_samples,), int64
        0-based position of a row in the removal order (within a step: by contribution),
        -1 for retained rows.
    contribution_ : ndarray of shape (n_samples,), float64
        A removed row's summed |z| excess over the step's bar when it left; 0 for kept rows.
    predictability_ : ndarray of shape (n_samples,), float64
        One-word predictability of each row, before filtering: the largest share of the
        row's own label among the input rows holding one of its features, shrunk towards the
        label prior by 50 pseudo-rows as the cue table's ``cueness_shrunk``
        (``max_x (c(x, y_i) + k p0) / (n_x + k)``; the prior share when the row has no tested
        feature). The run folder's score column for a Z-filter run.
    z_before_, z_after_ : ndarray of shape (n_tested, n_classes)
        z of every tested feature and label on the input and on the retained rows (empirical
        prior of those rows; NaN where a feature is absent).
    max_abs_z_before_, max_abs_z_after_ : float
    n_over_threshold_before_, n_over_threshold_after_ : int
        Tested features with some ``|z| > threshold_``.
    threshold_ : float
    n_tests_ : int
        Tested features x labels (the Bonferroni count; the threshold uses ``2 n_tests_``
        one-sided tails).
    feature_names_ : ndarray
        Each tested feature (the word, or the input column for a matrix).
    feature_columns_ : ndarray of int
        Their positions in the untested feature set (the input's columns for a matrix).
    classes_ : ndarray
    history_ : pandas.DataFrame
        One row per step: ``round, size, removed, size_after, max_abs_z, n_over_threshold,
        level, top_feature, top_label, seconds``.
    n_rounds_ : int
    stop_reason_ : str
        ``"converged"``, ``"target_size"``, ``"callback"`` or ``"no_candidates"``.
    target_size_, batch_size_ : int or None

    Examples
    --------
    One feature column marks "no" on half the rows, the other nothing: rows are removed
    until its |z| is under the Bonferroni bar:

    >>> import numpy as np
    >>> from aflite_core import ZFilter
    >>> labels = np.array(["yes", "no"] * 60)
    >>> X = np.zeros((120, 2))
    >>> X[:60, 0] = labels[:60] == "no"
    >>> z = ZFilter(random_state=0).fit(X, labels)
    >>> bool(z.max_abs_z_before_ > z.threshold_), bool(z.max_abs_z_after_ <= z.threshold_)
    (True, True)
    >>> z.stop_reason_, bool(z.keep_mask_.sum() < 120)
    ('converged', True)
    """

    def __init__(
        self,
        *,
        target_size: int | float | None = None,
        alpha: float = 0.01,
        min_count: int = 5,
        features: str | Sequence[str] = "word",
        until: str = "threshold",
        batch_size: int | float | None = None,
        random_state: Any = None,
        callback: Callable[[dict], Any] | None = None,
    ) -> None:
        self.target_size = target_size
        self.alpha = alpha
        self.min_count = min_count
        self.features = features
        self.until = until
        self.batch_size = batch_size
        self.random_state = random_state
        self.callback = callback

    def __sklearn_tags__(self):
        """Estimator tags: sparse X accepted, X non-negative (a value > 0 is a present
        feature), y required."""
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        return tags

    # -- fitting -------------------------------------------------------------------------
    def fit(self, X: Any, y: Any) -> ZFilter:
        """Filter the rows of ``X`` (texts or a 0/1 feature matrix) with labels ``y``.

        Returns
        -------
        self

        Raises
        ------
        TypeError, ValueError
            A parameter, ``X`` or ``y`` of the wrong type or value (the message names it).
        """

        started = time.perf_counter()
        alpha = check_real("alpha", self.alpha, low=0.0, high=1.0, low_open=True,
                           high_open=True)
        min_count = check_int("min_count", self.min_count, minimum=1)
        until = check_choice("until", self.until, UNTIL)
        check_callback(self.callback)
        if self.target_size is not None:
            check_size("target_size", self.target_size)
        if self.batch_size is not None:
            check_size("batch_size", self.batch_size, allow_all=True)
        if until == "target_size" and self.target_size is None:
            raise ValueError("until: 'target_size' needs a target_size, got target_size=None")
        rng = make_rng(self.random_state)
        if _is_texts(X):
            _check_families(self.features)
        matrix, names, columns = binary_features(X, features=self.features,
                                                 min_count=min_count)
        n = matrix.shape[0]
        if n == 0:
            raise ValueError("X: expected at least one row, got 0 sample(s)")
        if not _is_texts(X) and np.ndim(X) == 2 and np.shape(X)[1] == 0:
            raise ValueError(f"X: expected at least one feature, got 0 feature(s) (shape="
                             f"{tuple(np.shape(X))}) while a minimum of 1 is required.")
        codes, classes = encode_labels(y, n)
        target = None
        if self.target_size is not None:
            target = resolve_size("target_size", self.target_size, n)
            if target >= n:
                raise ValueError(f"target_size: expected fewer rows than the {n:,} given, "
                                 f"got {target:,}")
        batch = (max(1, round(DEFAULT_BATCH_FRACTION * n)) if self.batch_size is None
                 else resolve_size("batch_size", self.batch_size, n, allow_all=True,
                                   rounding="nearest"))
        n_tests = matrix.shape[1] * len(classes)
        threshold = z_threshold(2 * max(n_tests, 1), alpha=alpha)
        run = _ZRun(matrix, codes, len(classes), threshold=threshold, target=target,
                    batch=batch, until=until, tie=rng.permutation(n), names=names,
                    classes=classes, callback=self.callback, started=started)
        run.run()
        self._store(run, matrix, codes, classes, names, columns, threshold, n_tests,
                    target, batch)
        return self

    def fit_predict(self, X: Any, y: Any) -> np.ndarray:
        """Fit and return ``keep_mask_``."""
        return self.fit(X, y).keep_mask_

    def _store(self, run: _ZRun, matrix, codes, classes, names, columns, threshold, n_tests,
               target, batch) -> None:
        self.keep_mask_ = run.alive
        self.removal_round_ = run.removal_round
        self.order_ = run.order
        self.contribution_ = run.contribution
        self.z_before_ = run.z_first
        self.z_after_ = _z(run.counts, run.totals)
        self.max_abs_z_before_ = _max_abs(self.z_before_)
        self.max_abs_z_after_ = _max_abs(self.z_after_)
        self.n_over_threshold_before_ = _n_over(self.z_before_, threshold)
        self.n_over_threshold_after_ = _n_over(self.z_after_, threshold)
        self.threshold_ = float(threshold)
        self.n_tests_ = int(n_tests)
        self.feature_names_ = names
        self.feature_columns_ = columns
        self.classes_ = classes
        self.predictability_ = _one_word_scores(matrix, codes, run.counts_first,
                                                run.totals_first)
        self.history_ = pd.DataFrame(run.history, columns=list(_HISTORY_COLUMNS))
        self.n_rounds_ = len(run.history)
        self.stop_reason_ = run.stop_reason
        self.target_size_ = target
        self.batch_size_ = int(batch)
        self.n_features_in_ = int(len(columns))

    # -- held-out rows -------------------------------------------------------------------
    def score_heldout(self, X_new: Any, y_new: Any, *, X: Any, y: Any,
                      return_datamap: bool = False) -> np.ndarray | pd.DataFrame:
        """One-word predictability of new rows under the counts of the retained rows.

        For the split policy "filter the training split, score dev/test": the score of
        ``predictability_`` with the counts and label shares of the rows ``fit`` retained.

        Parameters
        ----------
        X_new, y_new
            Rows to score: texts or a matrix with the columns of ``fit``'s ``X``, and labels.
        X, y
            The very ``X`` and ``y`` passed to ``fit`` (the estimator keeps no copy).
        return_datamap : bool, default False
            Return a DataFrame with ``predictability`` and AFLite's data-map columns
            (``confidence``, ``variability``: NaN, ``n_heldout``: 0; the Z-filter trains no
            model), as :meth:`AFLite.score_heldout` does.

        Returns
        -------
        ndarray of shape (n_new,), float64
            In ``[0, 1]``; NaN for a label with no retained row.
        """
        check_is_fitted(self, "keep_mask_")
        fit_matrix = self._columns(X)
        if fit_matrix.shape[0] != len(self.keep_mask_):
            raise ValueError(f"X: expected the {len(self.keep_mask_):,} rows passed to fit, "
                             f"got {fit_matrix.shape[0]:,}")
        codes = pd.Index(self.classes_).get_indexer(pd.Index(np.asarray(y)))
        if len(codes) != len(self.keep_mask_) or (codes < 0).any():
            raise ValueError("y: expected the labels passed to fit")
        new = self._columns(X_new)
        y_new = np.asarray(y_new)
        if y_new.ndim != 1 or len(y_new) != new.shape[0]:
            raise ValueError(f"y_new: expected shape ({new.shape[0]},) (one label per row of "
                             f"X_new), got {y_new.shape}")
        keep = self.keep_mask_
        k = len(self.classes_)
        counts = _label_counts(fit_matrix[keep], codes[keep], k)
        totals = np.bincount(codes[keep], minlength=k)
        new_codes = pd.Index(self.classes_).get_indexer(pd.Index(y_new))
        scores = np.full(len(y_new), np.nan)
        seen = (new_codes >= 0)
        seen[seen] &= totals[new_codes[seen]] > 0
        if seen.any():
            scores[seen] = _one_word_scores(new[seen], new_codes[seen], counts, totals)
        if return_datamap:
            return pd.DataFrame({"predictability": scores,
                                 "confidence": np.full(len(scores), np.nan),
                                 "variability": np.full(len(scores), np.nan),
                                 "n_heldout": np.zeros(len(scores), dtype=np.int64)})
        return scores

    def _columns(self, X: Any) -> sp.csr_matrix:
        """``X`` as the tested feature columns of ``fit``."""
        if _is_texts(X):
            fm = extract_features([str(t) for t in X], features=_check_families(self.features),
                                  min_count=1, cache=False, on_missing="raise")
            names = [f if t == "word" else f"{t}:{f}"
                     for t, f in zip(fm.feature_type, fm.feature, strict=True)]
            position = pd.Index(self.feature_names_).get_indexer(pd.Index(names))
            source = sp.csr_matrix(fm.X)
            keep = np.flatnonzero(position >= 0)
            remap = sp.csr_matrix((np.ones(len(keep), dtype=np.int8), (keep, position[keep])),
                                  shape=(len(names), len(self.feature_names_)))
            out = (source @ remap).tocsr()
        else:
            out = _check_matrix(X)[:, self.feature_columns_].tocsr()
        out = sp.csr_matrix(out, dtype=np.int8)
        out.data[:] = 1
        return out


_HISTORY_COLUMNS = ("round", "size", "removed", "size_after", "max_abs_z", "n_over_threshold",
                    "level", "top_feature", "top_label", "seconds")


def _max_abs(z: np.ndarray) -> float:
    return float(np.nanmax(np.abs(z))) if z.size and np.isfinite(z).any() else 0.0


def _n_over(z: np.ndarray, threshold: float) -> int:
    with np.errstate(invalid="ignore"):
        return int((np.nan_to_num(np.abs(z)) > threshold).any(axis=1).sum()) if z.size else 0


def _one_word_scores(matrix: sp.csr_matrix, codes: np.ndarray, counts: np.ndarray,
                     totals: np.ndarray) -> np.ndarray:
    """``max_x`` shrunk share of the row's own label among rows holding ``x`` (see
    ``ZFilter.predictability_``); the prior share for rows without a tested feature."""
    prior = totals / max(totals.sum(), 1)
    shares = shrunk_shares(counts, totals)
    per_nnz = shares[matrix.indices, np.repeat(codes, np.diff(matrix.indptr))]
    scores = prior[codes].astype(float)
    filled = np.flatnonzero(np.diff(matrix.indptr) > 0)
    if len(filled):
        scores[filled] = np.maximum.reduceat(per_nnz, matrix.indptr[filled])
    return scores


def _postings(X: sp.csr_matrix, codes: np.ndarray) -> sp.csr_matrix:
    """``X.T`` as CSR (feature -> rows holding it) whose entries hold each row's label + 1."""
    labels = np.repeat(codes.astype(np.int16) + 1, np.diff(X.indptr))
    return sp.csr_matrix((labels, X.indices, X.indptr), shape=X.shape).T.tocsr()


class _ZRun:
    """The state of one Z-filter fit: counts, alive rows, and the removal loop."""

    def __init__(self, X: sp.csr_matrix, codes: np.ndarray, n_labels: int, *,
                 threshold: float, target: int | None, batch: int, until: str,
                 tie: np.ndarray, names: np.ndarray, classes: np.ndarray,
                 callback: Callable[[dict], Any] | None, started: float) -> None:
        self.X, self.codes, self.n_labels = X, codes, n_labels
        self.Xt = _postings(X, codes)  # feature -> rows holding it (data: label + 1)
        self.threshold, self.target, self.batch, self.until = threshold, target, batch, until
        self.tie, self.names, self.classes = tie, names, classes
        self.callback, self.started = callback, started
        n = X.shape[0]
        self.alive = np.ones(n, dtype=bool)
        self.removal_round = np.full(n, -1, dtype=np.int64)
        self.order = np.full(n, -1, dtype=np.int64)
        self.contribution = np.zeros(n)
        self.counts = _label_counts(X, codes, n_labels)
        self.totals = np.bincount(codes, minlength=n_labels).astype(np.int64)
        self.counts_first, self.totals_first = self.counts.copy(), self.totals.copy()
        self.z_first = _z(self.counts, self.totals)
        self.history: list[dict] = []
        self.stop_reason: str | None = None
        self.removed_total = 0

    def _stop(self, size: int, zmax: float) -> str | None:
        if self.target is not None and size <= self.target:
            return STOP_TARGET
        if zmax <= self.threshold and self.until == "threshold":
            return STOP_CONVERGED
        if (self.totals > 0).sum() < 2:  # one label left: nothing left to test
            return STOP_STUCK
        return None

    def run(self) -> None:
        z = self.z_first
        size = int(self.alive.sum())
        self.stop_reason = self._stop(size, _max_abs(z))
        while self.stop_reason is None:
            t0 = time.perf_counter()
            absz = np.nan_to_num(np.abs(z))
            top = absz.max(axis=1)
            zmax = float(top.max()) if top.size else 0.0
            level = self.threshold if zmax > self.threshold else _LOWER_BAR * zmax
            removed, scores = self._select(z, top, level, size)
            if len(removed) == 0:
                self.stop_reason = STOP_STUCK
                break
            self._remove(removed, scores)
            z = _z(self.counts, self.totals)
            size_before, size = size, int(self.alive.sum())
            self.stop_reason = self._stop(size, _max_abs(z))
            worst = int(np.argmax(top))
            row = {"round": len(self.history) + 1, "size": size_before,
                   "removed": len(removed), "size_after": size, "max_abs_z": zmax,
                   "n_over_threshold": int((top > self.threshold).sum()), "level": level,
                   "top_feature": str(self.names[worst]),
                   "top_label": str(self.classes[int(np.argmax(absz[worst]))]),
                   "seconds": time.perf_counter() - t0}
            self.history.append(row)
            if self._notify(row, z, size) and self.stop_reason is None:
                self.stop_reason = STOP_CALLBACK

    def _select(self, z: np.ndarray, top: np.ndarray, level: float, size: int
                ) -> tuple[np.ndarray, np.ndarray]:
        """Rows to remove this step, in removal order, and their contributions."""
        flagged = np.flatnonzero(top > level)
        if len(flagged) == 0:
            return np.empty(0, dtype=np.int64), np.empty(0)
        zf = z[flagged]
        star = np.nanargmax(np.where(np.isnan(zf), -np.inf, zf), axis=1)
        prior = self.totals / self.totals.sum()
        need = np.zeros(self.X.shape[1], dtype=np.int64)
        need[flagged] = _rows_needed(self.counts[flagged], zf, prior, star, level)
        weight = np.zeros(self.X.shape[1])
        weight[flagged] = top[flagged] - level
        label_of = np.full(self.X.shape[1], -1, dtype=np.int64)
        label_of[flagged] = star
        # (row, feature) pairs of alive rows holding a flagged feature with its label
        postings = self.Xt[flagged]
        feat = np.repeat(flagged, np.diff(postings.indptr))
        match = postings.data == label_of[feat] + 1
        feat, row = feat[match], postings.indices[match]
        alive = self.alive[row]
        feat, row = feat[alive], row[alive]
        if len(row) == 0:
            return np.empty(0, dtype=np.int64), np.empty(0)
        value = weight[feat]
        n = self.X.shape[0]
        total = np.bincount(row, weights=value, minlength=n)
        budget = self.batch if self.target is None else min(self.batch, size - self.target)
        budget = max(int(budget), 0)
        rows = np.flatnonzero(total > 0)
        if len(rows) > 8 * budget:
            # only the best-scored rows can be chosen: try those scoring at least the
            # (8 x budget)-th best score first (ties included, so the choice is that of a
            # full sort whenever they hold enough allowed rows)
            cut = np.partition(total[rows], len(rows) - 8 * budget)[len(rows) - 8 * budget]
            chosen = self._choose(rows[total[rows] >= cut], feat, row, value, total, need,
                                  budget)
            if len(chosen) == budget:
                return chosen, total[chosen]
        chosen = self._choose(rows, feat, row, value, total, need, budget)
        return chosen, total[chosen]

    def _choose(self, rows: np.ndarray, feat: np.ndarray, row: np.ndarray,
                value: np.ndarray, total: np.ndarray, need: np.ndarray, budget: int
                ) -> np.ndarray:
        """The ``budget`` best-scored of ``rows``, at most ``need[x]`` per primary feature."""
        n = len(total)
        considered = np.zeros(n, dtype=bool)
        considered[rows] = True
        pairs = considered[row]
        feat, row, value = feat[pairs], row[pairs], value[pairs]
        # each row counts towards its largest contributor (the last written on a tie)
        best = np.zeros(n)
        np.maximum.at(best, row, value)
        top_pair = value == best[row]
        primary_of = np.full(n, -1, dtype=np.int64)
        primary_of[row[top_pair]] = feat[top_pair]
        score, primary, tie = total[rows], primary_of[rows], self.tie[rows]
        # at most need[x] rows per primary feature x, its best contributors first
        by_feature = np.lexsort((tie, -score, primary))
        prim_sorted = primary[by_feature]
        rank = np.arange(len(rows)) - np.searchsorted(prim_sorted, prim_sorted, side="left")
        allowed = by_feature[rank < need[prim_sorted]]
        return rows[allowed[np.lexsort((tie[allowed], -score[allowed]))[:budget]]]

    def _remove(self, removed: np.ndarray, scores: np.ndarray) -> None:
        step = len(self.history) + 1
        self.order[removed] = self.removed_total + np.arange(len(removed))
        self.removed_total += len(removed)
        self.removal_round[removed] = step
        self.contribution[removed] = scores
        self.alive[removed] = False
        gone = self.X[removed]
        self.counts -= _label_counts(gone, self.codes[removed], self.n_labels)
        self.totals -= np.bincount(self.codes[removed], minlength=self.n_labels)

    def _notify(self, row: dict, z: np.ndarray, size: int) -> bool:
        if self.callback is None:
            return False
        info = {"round": row["round"], "size": size, "size_before": row["size"],
                "removed": row["removed"], "removed_total": self.removed_total,
                "target_size": self.target, "n_samples": len(self.alive),
                "max_abs_z": _max_abs(z), "n_over_threshold": _n_over(z, self.threshold),
                "seconds": row["seconds"], "elapsed": time.perf_counter() - self.started,
                "stop_reason": self.stop_reason}
        return asks_to_stop(self.callback(info))
