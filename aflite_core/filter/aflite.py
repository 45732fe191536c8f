"""AFLite: adversarial filtering of dataset biases (Le Bras et al., ICML 2020, Algorithm 1).

Each round partitions the current set S ``n_partitions`` times at random into ``train_size``
training rows and ``|S| - train_size`` held-out rows, trains one linear classifier per partition
and scores every row by its *predictability*: the share of the partitions holding it out whose
model predicts its label. Up to ``slice_size`` rows with the highest predictability among those
scoring at least ``tau`` leave S. AFLite stops when ``|S|`` reaches ``target_size`` (never going
below it) or when fewer than ``slice_size`` rows score at least ``tau``.

Speed comes from :mod:`aflite_core.filter.linear`: the classifiers of a round share a label-free
covariance of S (kept up to date by subtracting removed rows), so a round costs about two matrix
products over S (class sums of the training rows, predictions of all partitions) instead of
``n_partitions`` separate fits. Work is done on fixed blocks of input rows whose results are
reduced in a fixed order, so the mask does not depend on ``n_jobs`` or on the backend. With
``n_jobs > 1`` the next round's partitions and covariance factor, which need neither labels
nor models, are prepared on the pool threads while the driver finishes the current round.

Backends: ``"local"`` (threads over row blocks when ``n_jobs > 1``) and ``"dask"`` (row blocks
scattered to the workers of a ``dask.distributed`` cluster once per run; see ``docs/scaling.md``).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import time
import zlib
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from aflite_core._validation import (
    check_callback,
    check_choice,
    check_fraction,
    check_int,
    check_size,
    make_rng,
    resolve_n_jobs,
    resolve_size,
)
from aflite_core.filter.datamap import DatamapTracker, RoundDatamap
from aflite_core.filter.linear import (
    ScatterStats,
    count_correct,
    covariance_factor,
    fit_lda_partitions,
    fit_partition_lda,
    heldout_stats,
    partition_class_sums,
    row_stats,
)

__all__ = ["AFLite", "STRATEGIES", "CLASSIFIERS", "BACKENDS"]

STRATEGIES = ("greedy_slicing", "slice_sampling", "greedy")
CLASSIFIERS = ("lda",)
BACKENDS = ("local", "dask")
#: Default slice size (rows removed per round) as a fraction of the input; the paper's SNLI
#: setting removes k = 10,000 of 550,000 rows (1.8%) per round.
DEFAULT_SLICE_FRACTION = 0.02

STOP_TARGET = "target_size"
STOP_TAU = "too_few_above_tau"
STOP_CALLBACK = "callback"

_BLOCK_BYTES = 32 << 20
_BLOCK_TARGET_BYTES = 2 << 20
_BLOCK_MARGIN_ELEMENTS = 1 << 22
_COMPACT_BELOW = 0.8
_GROUP_BLOCKS = 64
_MAX_MODEL_ELEMENTS = 1 << 25
_MAX_BLOCK_ROWS = 4096
_QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
#: Record the data map (confidence, variability) of the held-out predictions. A private
#: switch: ``benchmarks/bench_scale.py`` turns it off to time AFLite without it; masks and
#: predictabilities are the same either way.
_RECORD_DATAMAP = True


class AFLite(BaseEstimator):
    """Adversarial filtering of dataset biases (AFLite), a scikit-learn estimator.

    AFLite is a filter, not a classifier or a transformer: ``fit(X, y)`` finds the rows of
    *this* data to keep (``keep_mask_``) and ``fit_predict(X, y)`` returns that mask; there is
    no ``predict`` for new rows, but :meth:`score_heldout` gives new rows the predictability
    that models trained on the retained rows assign them. As in scikit-learn, ``__init__``
    only stores the parameters; ``fit`` validates them (a wrong type raises TypeError, a
    value out of range ValueError, both naming the parameter).

    Parameters
    ----------
    target_size : int or float
        Rows to keep at least: an int in ``[1, n_samples)`` or a fraction of the input in
        ``(0, 1)`` (rounded up). AFLite never removes rows below this size.
    n_partitions : int, default=64
        ``m``: random train/held-out partitions (linear models) per round.
    train_size : int or float, default=0.5
        ``t``: training rows per partition. A float in ``(0, 1)`` is a fraction of the set S
        *at the start of each round*, so the train/held-out balance is kept as S shrinks
        (clipped to ``[1, |S| - 1]``). An int is used as is in every round and must be at most
        ``target_size``: the last round still has ``target_size + 1`` rows, and ``t < |S|``
        must hold in every round.
    slice_size : int or float, default=None
        ``k``: rows removed per round at most. An int ``>= 1``, or a fraction of the input in
        ``(0, 1]`` (rounded to the nearest row, at least 1). ``None`` gives 2% of the input
        (at least 1). Must be 1 or None for ``strategy="greedy"``.
    tau : float, default=0.75
        Only rows with predictability ``>= tau`` are removed.
    strategy : {"greedy_slicing", "slice_sampling", "greedy"}, default="greedy_slicing"
        ``greedy_slicing`` removes the ``k`` most predictable rows (the paper's AFLite);
        ``slice_sampling`` samples ``k`` rows among those ``>= tau`` without replacement with
        probability proportional to predictability (Gumbel top-k); ``greedy`` is ``k = 1``.
    classifier : {"lda"}, default="lda"
        The per-partition linear model: linear discriminant analysis with class means from
        the partition's training rows and a covariance shared by the partitions of a round
        (see :mod:`aflite_core.filter.linear`). It matches one scikit-learn logistic regression per
        partition on the benchmark's quality at a fraction of the cost.
    random_state : int, numpy Generator, SeedSequence or None, default=None
        Seeds the partitions, the tie-break order and slice sampling. The same data,
        parameters and seed give the same mask whatever ``n_jobs`` and ``backend``.
    n_jobs : int or None, default=None
        Local backend: threads over row blocks (``None`` = 1, ``-1`` = all cores). BLAS is
        held to one thread during ``fit`` (via threadpoolctl), because many small BLAS calls
        with spinning BLAS threads are slow on shared cores; the block threads give the
        multi-core speed-up instead, without changing any result. Dask backend: the number
        of workers of the local cluster started when ``scheduler`` is None and no Dask client
        exists (``None`` = all cores).
    callback : callable, optional
        ``callback(info)`` after every round with a dict holding ``round`` (1-based),
        ``size`` (|S| after the round), ``size_before``, ``removed``, ``removed_total``,
        ``target_size``, ``n_samples``, ``n_above_tau``, ``seconds`` (this round),
        ``elapsed`` (since ``fit`` started) and ``stop_reason`` (None unless the algorithm
        stops after this round). Returning ``True`` stops after this round.
    backend : {"local", "dask"}, default="local"
    scheduler : str, dask.distributed.Client or None, default=None
        Dask backend only: ``"tcp://HOST:PORT"`` (an existing scheduler), ``"local:N"`` (start
        a ``LocalCluster`` of N single-threaded worker processes on 127.0.0.1), a ``Client``,
        or None (the current default client, else a local cluster of ``n_jobs`` workers, all
        cores when ``n_jobs`` is None).

    Attributes
    ----------
    keep_mask_ : ndarray of shape (n_samples,), bool
        True for retained rows.
    predictability_ : ndarray of shape (n_samples,), float64
        Score in the round a row was removed; for retained rows, the score in the last round.
        NaN when the row was never held out in that round.
    removal_round_ : ndarray of shape (n_samples,), int64
        1-based round a row was removed in, -1 for retained rows.
    confidence_ : ndarray of shape (n_samples,), float64
        Data map (Swayamdipta et al., 2020; see :mod:`aflite_core.filter.datamap`): mean,
        over the partitions holding the row out, of the gold label's probability (the
        softmax of the partition's linear class scores, i.e. the LDA posterior), in the
        same round as ``predictability_``. NaN where ``predictability_`` is NaN.
    variability_ : ndarray of shape (n_samples,), float64
        Population standard deviation of the same probabilities.
    n_heldout_ : ndarray of shape (n_samples,), int64
        Partitions holding the row out in that round (``predictability_ * n_heldout_`` is
        the number that predicted it right).
    datamap_history_ : pandas.DataFrame
        One row per round: ``round, n_scored, confidence_mean, variability_mean,
        correctness_mean`` over the rows scored in the round.
    history_ : pandas.DataFrame
        One row per round: ``round, size`` (|S| at the start), ``train_size, removed,
        size_after, n_scored, n_above_tau, score_mean, score_q10 .. score_q90, seconds``.
    n_rounds_ : int
    stop_reason_ : str
        ``"target_size"`` (|S| reached target_size), ``"too_few_above_tau"`` (fewer than
        ``slice_size`` rows scored at least ``tau``) or ``"callback"``.
    classes_ : ndarray
        The sorted distinct labels; label ``classes_[i]`` is encoded as ``i`` internally.
    n_features_in_ : int
    target_size_, slice_size_ : int
        The resolved sizes.

    Notes
    -----
    Defaults suit a dataset of about 10k rows (64 partitions of half the current set, 2% of the
    input removed per round). The paper's SNLI setting (550k rows) is about
    ``AFLite(target_size=182_000, n_partitions=64, train_size=50_000, slice_size=10_000,
    tau=0.75)``.
    """

    def __init__(
        self,
        *,
        target_size: int | float,
        n_partitions: int = 64,
        train_size: int | float = 0.5,
        slice_size: int | float | None = None,
        tau: float = 0.75,
        strategy: str = "greedy_slicing",
        classifier: str = "lda",
        random_state: Any = None,
        n_jobs: int | None = None,
        callback: Callable[[dict], Any] | None = None,
        backend: str = "local",
        scheduler: Any = None,
    ) -> None:
        self.target_size = target_size
        self.n_partitions = n_partitions
        self.train_size = train_size
        self.slice_size = slice_size
        self.tau = tau
        self.strategy = strategy
        self.classifier = classifier
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.callback = callback
        self.backend = backend
        self.scheduler = scheduler

    def __sklearn_tags__(self):
        """Estimator tags: dense, finite X and a required y (see scikit-learn's Tags)."""
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True  # the labels are what the partition models predict
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = False
        return tags

    # -- fitting -------------------------------------------------------------------------
    def fit(self, X: Any, y: Any, *, groups: Any = None) -> AFLite:
        """Run AFLite on features ``X`` and labels ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Real-valued features (float32 is used internally; a float32 C-contiguous array or
            a ``np.load(..., mmap_mode="r")`` memory map is used without a copy).
        y : array-like of shape (n_samples,)
            Labels of any hashable type (strings, ints), encoded internally.
        groups : array-like of shape (n_samples,), optional
            Group of each row (e.g. the premise of NLI pairs). Every partition then trains
            on whole groups: a row is never held out while another row of its group is a
            training row, so a model cannot score a row by having seen its twin. Each
            partition draws groups in a seeded random order until the next would exceed the
            train size t. Without groups (default) the draws are those of the paper.

        Returns
        -------
        self

        Raises
        ------
        TypeError
            A parameter, ``X`` or ``y`` of the wrong type (the message names it).
        ValueError
            A parameter, ``X`` or ``y`` of the right type but an invalid value.
        """
        with _single_threaded_blas():
            return self._fit(X, y, groups)

    def fit_predict(self, X: Any, y: Any, *, groups: Any = None) -> np.ndarray:
        """Fit and return ``keep_mask_``."""
        return self.fit(X, y, groups=groups).keep_mask_

    def _fit(self, X: Any, y: Any, groups: Any = None) -> AFLite:
        """Validate, prepare the run, play its rounds on a backend, store the results."""
        started = time.perf_counter()
        X = _check_X(X)
        codes, classes = _encode_labels(y, X.shape[0])
        cfg = self._fit_config(X.shape[0])
        rng = make_rng(self.random_state)
        _check_model_size(len(classes), cfg.n_partitions, X.shape[1])
        run = _FilterRun(X, codes, len(classes), cfg, rng, _group_codes(groups, X.shape[0]))
        backend = _make_backend(cfg.backend, cfg.scheduler, X, run.shift, run.blocks,
                                cfg.n_workers)
        try:
            run.run_rounds(backend, started)
        finally:
            backend.close()
        self._store_results(run, classes, X.shape[1])
        # Identifies the training data for score_heldout; reads 64 rows, changes no result.
        self._fit_fingerprint = _data_fingerprint(X, codes)
        return self

    def score_heldout(
        self,
        X_new: Any,
        y_new: Any,
        *,
        X: Any,
        y: Any,
        n_partitions: int | None = None,
        train_size: int | float | None = None,
        random_state: Any = None,
        return_datamap: bool = False,
    ) -> np.ndarray | pd.DataFrame:
        """Predictability of new rows under models trained on the retained rows of ``fit``.

        For a split policy "filter the training split, score dev/test with models trained on
        what is left": ``n_partitions`` LDA models, the very model of AFLite's rounds (class
        means from the model's training rows, the label-free covariance of all retained rows
        with the within-class correction), are each trained on a random draw of
        ``train_size`` *retained* rows; a new row's score is the share of the models that
        predict its label (ties count as wrong, as in ``fit``). Every new row is held out from
        every model, so the score is comparable with ``predictability_``. ``fit``'s results are
        not touched.

        Parameters
        ----------
        X_new : array-like of shape (n_new, n_features)
            Features of the rows to score (the same representation as ``fit``'s ``X``).
        y_new : array-like of shape (n_new,)
            Their labels, of the same kind as ``fit``'s ``y``.
        X, y : array-like
            The very ``X`` and ``y`` passed to ``fit``. The estimator keeps no copy of the
            training data (it can be large); their shape, label set and a fingerprint of ``y``
            and of 64 rows of ``X`` are checked, so passing other data raises ValueError.
        n_partitions : int, optional
            Models to train; default ``self.n_partitions``.
        train_size : int or float, optional
            Training rows per model: an int (at most the number of retained rows) or a fraction
            of the retained rows in ``(0, 1)``; default ``self.train_size`` (an int as is, a
            fraction of the retained rows, as in the rounds).
        random_state : int, numpy Generator, SeedSequence or None, optional
            Seeds the draws; default ``self.random_state``. The same seed gives the same
            scores.
        return_datamap : bool, default=False
            Return a DataFrame with ``predictability`` (the scores), ``confidence``,
            ``variability`` and ``n_heldout`` (the data map of ``confidence_`` etc. under
            these models) instead of the scores alone. The scores are the same.

        Returns
        -------
        ndarray of shape (n_new,), float64
            Share of the models predicting the row's label, in ``[0, 1]``; chance is about
            ``1 / n_classes``. NaN for a row whose label has no retained training row (a label
            unseen in ``fit``, missing, or one whose rows were all removed): no model can
            predict it.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        TypeError, ValueError
            Wrong arguments (the message names the argument), or ``X``/``y`` that are not the
            data ``fit`` saw.
        """
        check_is_fitted(self, "keep_mask_")
        with _single_threaded_blas():
            return self._score_heldout(X_new, y_new, X, y, n_partitions, train_size,
                                       random_state, bool(return_datamap))

    def _score_heldout(self, X_new, y_new, X, y, n_partitions, train_size,
                       random_state, datamap: bool = False) -> np.ndarray | pd.DataFrame:
        X, codes = self._check_fit_data(X, y)
        X_new = _check_X(X_new)
        if X_new.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X_new: expected {self.n_features_in_} feature columns as in fit, got "
                f"{X_new.shape[1]}"
            )
        _column_mean(X_new)  # raises ValueError naming the first NaN/inf
        y_new = np.asarray(y_new)
        if y_new.ndim != 1 or len(y_new) != X_new.shape[0]:
            raise ValueError(
                f"y_new: expected shape ({X_new.shape[0]},) (one label per row of X_new), got "
                f"{y_new.shape}"
            )
        m = check_int("n_partitions",
                      self.n_partitions if n_partitions is None else n_partitions, minimum=1)
        retained = np.flatnonzero(self.keep_mask_)
        n_r = len(retained)
        t = _heldout_train_size(self.train_size if train_size is None else train_size, n_r)
        rng = make_rng(self.random_state if random_state is None else random_state)
        n_classes = len(self.classes_)
        _check_model_size(n_classes, m, X.shape[1])
        train = np.zeros((m, n_r), dtype=bool)
        for j in range(m):
            train[j, rng.choice(n_r, size=t, replace=False, shuffle=False)] = True
        codes_r = codes[retained]
        model = fit_lda_partitions(np.asarray(X[retained]), codes_r, train, n_classes)

        new_codes = pd.Index(self.classes_).get_indexer(pd.Index(y_new))
        predictable = np.bincount(codes_r, minlength=n_classes) > 0
        seen = np.flatnonzero((new_codes >= 0) & predictable[np.maximum(new_codes, 0)])
        scores = np.full(len(y_new), np.nan)
        prob_sum, prob_m2 = np.zeros(len(y_new)), np.zeros(len(y_new))
        step = _MAX_BLOCK_ROWS * 16
        for lo in range(0, len(seen), step):
            rows = seen[lo : lo + step]
            order = np.argsort(new_codes[rows], kind="stable")
            rows = rows[order]
            block = np.ascontiguousarray(X_new[rows], dtype=np.float32) - model.shift
            bounds = np.searchsorted(new_codes[rows], np.arange(n_classes + 1))
            heldout = np.ones((m, len(rows)), dtype=bool)
            if datamap:
                correct, prob_sum[rows], prob_m2[rows] = heldout_stats(block, bounds, heldout,
                                                                       model)
            else:
                correct = count_correct(block, bounds, heldout, model)
            scores[rows] = correct / m
        if not datamap:
            return scores
        held = np.zeros(len(y_new), dtype=np.int64)
        held[seen] = m
        stats = RoundDatamap.from_sums(held, prob_sum, prob_m2)
        return pd.DataFrame({"predictability": scores, "confidence": stats.confidence,
                             "variability": stats.variability, "n_heldout": held})

    def _check_fit_data(self, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        """``X`` (float32) and ``y``'s codes, after checking they are the data of ``fit``."""
        X = _check_X(X)
        n = len(self.keep_mask_)
        if X.shape != (n, self.n_features_in_):
            raise ValueError(
                f"X: expected the features passed to fit, of shape {(n, self.n_features_in_)}, "
                f"got shape {X.shape}"
            )
        codes, classes = _encode_labels(y, n)
        if len(classes) != len(self.classes_) or np.any(classes != self.classes_):
            raise ValueError(
                f"y: expected the labels passed to fit ({self.classes_.tolist()[:5]}), got "
                f"labels {classes.tolist()[:5]}"
            )
        expected = getattr(self, "_fit_fingerprint", None)
        if expected is not None and _data_fingerprint(X, codes) != expected:
            raise ValueError(
                "X, y: expected the very X and y passed to fit (same rows, same order); these "
                "differ from them"
            )
        return X, codes

    def _fit_config(self, n: int) -> FitConfig:
        """Validate the parameters against ``n`` input rows; return the resolved values."""
        target_size = _resolve_target_size(self.target_size, n)
        n_partitions = check_int("n_partitions", self.n_partitions, minimum=1)
        train_size = _resolve_train_size(self.train_size, n, target_size)
        strategy = check_choice("strategy", self.strategy, STRATEGIES)
        slice_size = _resolve_slice_size(self.slice_size, n, strategy)
        tau = _check_tau(self.tau)
        check_choice("classifier", self.classifier, CLASSIFIERS)
        callback = check_callback(self.callback)
        backend = check_choice("backend", self.backend, BACKENDS)
        _check_scheduler(self.scheduler, backend)
        return FitConfig(
            n_samples=n,
            target_size=target_size,
            n_partitions=n_partitions,
            train_size=train_size,
            slice_size=slice_size,
            tau=tau,
            strategy=strategy,
            backend=backend,
            scheduler=self.scheduler,
            n_workers=_resolve_workers(self.n_jobs, backend),
            callback=callback,
        )

    def _store_results(self, run: _FilterRun, classes: np.ndarray, n_features: int) -> None:
        """Set the fitted attributes from a finished run."""
        self.keep_mask_ = run.alive
        self.predictability_ = run.predictability
        self.removal_round_ = run.removal_round
        self.history_ = pd.DataFrame(run.history)
        self.n_rounds_ = len(run.history)
        self.stop_reason_ = run.stop_reason
        self.classes_ = classes
        self.n_features_in_ = n_features
        self.target_size_ = run.cfg.target_size
        self.slice_size_ = run.cfg.slice_size
        run.datamap.store(self)


@dataclass(frozen=True)
class FitConfig:
    """AFLite's parameters for one ``fit``, validated and resolved against the input size.

    ``AFLite.fit`` builds it once (``AFLite._fit_config``); the rounds read only this, never
    the estimator's raw parameters.

    Attributes
    ----------
    n_samples : int
        Rows of the input.
    target_size : int
        Rows to keep at least, ``1 <= target_size < n_samples``.
    n_partitions : int
        ``m``: partitions (linear models) per round.
    train_size : int or float
        ``t``: an int (training rows in every round, ``<= target_size``) or a float in
        ``(0, 1)``, the share of S at the start of each round.
    slice_size : int
        ``k``: rows removed per round at most (1 for ``strategy="greedy"``).
    tau : float
        Only rows with predictability ``>= tau`` are removed.
    strategy : str
        One of :data:`STRATEGIES`.
    backend : str
        One of :data:`BACKENDS`.
    scheduler : str, dask.distributed.Client or None
        The Dask scheduler as given (checked; None with the local backend).
    n_workers : int
        Local backend: threads over row blocks. Dask backend: workers of the local cluster
        started when there is neither a scheduler nor a default client.
    callback : callable or None
        Called after every round (see :class:`AFLite`).
    """

    n_samples: int
    target_size: int
    n_partitions: int
    train_size: int | float
    slice_size: int
    tau: float
    strategy: str
    backend: str
    scheduler: Any
    n_workers: int
    callback: Callable[[dict], Any] | None


@dataclass(frozen=True)
class _RoundResult:
    """What one round scored and removed.

    ``s_rows`` are the rows of S at the start of the round in round order (block by block,
    class-ordered within a block) and ``positions`` their working-copy positions per block;
    ``scores``, ``removed_s`` and ``datamap``'s arrays index ``s_rows``.
    """

    number: int
    s_rows: np.ndarray
    positions: list[np.ndarray]
    train_size: int
    scores: np.ndarray
    n_above_tau: int
    removed_s: np.ndarray
    datamap: RoundDatamap | None = None

    @property
    def size_before(self) -> int:
        return len(self.s_rows)

    @property
    def removed(self) -> int:
        return len(self.removed_s)

    @property
    def size_after(self) -> int:
        return self.size_before - self.removed


class _FilterRun:
    """The state of one ``fit``: the set S (``alive``), the scores so far and the history.

    ``__init__`` prepares what needs no backend (column means, the seeded tie-break order,
    the row blocks); :meth:`run_rounds` then plays rounds on a backend until a stop rule
    holds. A round scores S and removes the chosen rows (:meth:`_score_and_select`,
    :meth:`_remove`), prepares the next round (:meth:`_prepare_next_round`), records its
    history row and tells the callback (:meth:`_notify`).
    """

    def __init__(self, X: np.ndarray, codes: np.ndarray, n_classes: int, cfg: FitConfig,
                 rng: np.random.Generator, groups: np.ndarray | None = None) -> None:
        n, d = X.shape
        self.cfg = cfg
        self.rng = rng
        self.groups = groups
        self.shift = _column_mean(X)
        # A seeded rank per row breaks ties between equal scores (the lower rank goes first).
        self.priority = np.empty(n, dtype=np.int64)
        self.priority[rng.permutation(n)] = np.arange(n)
        self.blocks = _Blocks(codes, n_classes, _block_rows(d, cfg.n_partitions, n_classes))
        self.alive = np.ones(n, dtype=bool)
        self.predictability = np.full(n, np.nan)
        self.removal_round = np.full(n, -1, dtype=np.int64)
        self.datamap = DatamapTracker(n, on=_RECORD_DATAMAP)
        self.history: list[dict[str, Any]] = []
        self.removed_total = 0
        self.stop_reason: str | None = None

    def run_rounds(self, backend, started: float) -> None:
        """Play rounds until a stop rule holds (``stop_reason`` is then set)."""
        drawn = backend.submit(_draw_round, self.rng, self.blocks, self.alive, self.cfg,
                               self.groups)
        stats = _scatter_stats(backend, self.shift.shape[0])
        # The covariance factor of S needs no labels and no partitions: with a pool, it is
        # computed while the round's class sums are.
        factor = backend.submit(covariance_factor, stats)
        round_no = 0
        while self.stop_reason is None:
            round_no += 1
            t_round = time.perf_counter()
            result = self._score_and_select(round_no, backend, drawn, factor)
            drawn = None  # its train masks are no longer needed
            self._remove(result)
            drawn, factor = self._prepare_next_round(backend, stats, result)
            seconds = time.perf_counter() - t_round
            self.history.append(_history_row(result, seconds))
            self._notify(result, seconds, started)

    def _score_and_select(self, round_no: int, backend, drawn, factor) -> _RoundResult:
        """Score S with the round's partitions and choose the rows to remove."""
        cfg = self.cfg
        s_rows, positions, t, scores, gold = _score_round(backend, self.blocks, drawn, factor,
                                                          self.shift, cfg, self.datamap.on)
        eligible = np.flatnonzero(scores >= cfg.tau)
        cap = min(cfg.slice_size, len(s_rows) - cfg.target_size)
        chosen = _select_removals(scores[eligible], self.priority[s_rows[eligible]], cap,
                                  cfg.strategy, self.rng)
        return _RoundResult(
            number=round_no,
            s_rows=s_rows,
            positions=positions,
            train_size=t,
            scores=scores,
            n_above_tau=len(eligible),
            removed_s=np.sort(eligible[chosen]),  # positions in S, i.e. block order
            datamap=gold,
        )

    def _remove(self, result: _RoundResult) -> None:
        """Record the round's scores, take its chosen rows out of S, apply the stop rules."""
        removed_rows = result.s_rows[result.removed_s]
        self.predictability[result.s_rows] = result.scores
        self.datamap.record(result.number, result.s_rows, result.scores, result.datamap)
        self.alive[removed_rows] = False
        self.removal_round[removed_rows] = result.number
        self.removed_total += result.removed
        if result.size_after <= self.cfg.target_size:
            self.stop_reason = STOP_TARGET
        elif result.removed < self.cfg.slice_size:
            self.stop_reason = STOP_TAU

    def _prepare_next_round(self, backend, stats: ScatterStats, result: _RoundResult):
        """Bring the statistics and working copies up to the new S; draw its partitions.

        Returns the next round's ``(drawn, factor)`` (futures when there is a pool), or
        ``(None, None)`` when the run stops after this round.
        """
        drawn = factor = None
        if self.stop_reason is None:  # the next round needs the statistics of S
            removed_x = backend.features(_positions_by_block(result.removed_s, result.positions))
            factor = backend.submit(_downdate_factor, stats, removed_x)
        if result.removed:
            _compact_blocks(backend, self.blocks, self.alive)
        if self.stop_reason is None:
            # The next round's partitions need only the new S (and the random stream, used in
            # the same order): with a pool they are drawn, like the covariance factor, while
            # this round's bookkeeping goes on.
            drawn = backend.submit(_draw_round, self.rng, self.blocks, self.alive, self.cfg,
                                   self.groups)
        return drawn, factor

    def _notify(self, result: _RoundResult, seconds: float, started: float) -> None:
        """Call the callback with the round's info; ``True`` back stops after this round."""
        callback = self.cfg.callback
        if callback is None:
            return
        info = {
            "round": result.number,
            "size": result.size_after,
            "size_before": result.size_before,
            "removed": result.removed,
            "removed_total": self.removed_total,
            "target_size": self.cfg.target_size,
            "n_samples": self.cfg.n_samples,
            "n_above_tau": result.n_above_tau,
            "seconds": seconds,
            "elapsed": time.perf_counter() - started,
            "stop_reason": self.stop_reason,
        }
        answer = callback(info)
        if (answer is True or answer is np.True_) and self.stop_reason is None:
            self.stop_reason = STOP_CALLBACK


def _scatter_stats(backend, n_features: int) -> ScatterStats:
    """Label-free scatter statistics of S, summed group by group in a fixed order."""
    stats = ScatterStats.zeros(n_features)
    for part in backend.group_row_stats():
        stats.add(*part)
    return stats


# -- parameter validation -------------------------------------------------------------------
def _resolve_target_size(value: Any, n: int) -> int:
    target = resolve_size("target_size", value, n)
    if target >= n:
        raise ValueError(
            f"target_size: expected fewer rows than the input's {n}, got {value!r} "
            f"({target} rows): there would be nothing to filter"
        )
    return target


def _resolve_train_size(value: Any, n: int, target_size: int) -> int | float:
    train = check_size("train_size", value)
    if isinstance(train, int):
        if train >= n:
            raise ValueError(
                f"train_size: expected fewer rows than the set it partitions (t < |S|), got "
                f"train_size={train} for {n} rows"
            )
        if train > target_size:
            raise ValueError(
                f"train_size: expected at most target_size={target_size} when an int, got "
                f"train_size={train}: t < |S| must hold in every round and the last round may "
                f"have only target_size + 1 rows (pass a float to scale it with |S|)"
            )
    return train


def _resolve_slice_size(value: Any, n: int, strategy: str) -> int:
    if strategy == "greedy":
        if value is not None and check_size("slice_size", value, allow_all=True) != 1:
            raise ValueError(
                f"slice_size: expected None or 1 for strategy='greedy' (k = 1), got {value!r}"
            )
        return 1
    if value is None:
        return max(1, round(DEFAULT_SLICE_FRACTION * n))
    return resolve_size("slice_size", value, n, allow_all=True, rounding="nearest")


def _heldout_train_size(value: Any, n_retained: int) -> int:
    """Training rows per model of :meth:`AFLite.score_heldout` out of ``n_retained`` rows."""
    train = check_size("train_size", value)
    if isinstance(train, int):
        if train > n_retained:
            raise ValueError(
                f"train_size: expected at most the {n_retained} retained rows, got {train}"
            )
        return train
    return int(min(max(round(train * n_retained), 1), n_retained))


def _data_fingerprint(X: np.ndarray, codes: np.ndarray) -> tuple[int, int]:
    """CRC32 of the label codes and of 64 evenly spaced rows of ``X`` (float32)."""
    rows = np.unique(np.linspace(0, X.shape[0] - 1, 64).astype(np.int64))
    sample = np.ascontiguousarray(X[rows], dtype=np.float32)
    return (zlib.crc32(np.ascontiguousarray(codes, dtype=np.int64).tobytes()),
            zlib.crc32(sample.tobytes()))


def _check_tau(value: Any) -> float:
    return check_fraction("tau", value, closed=True)


def _check_scheduler(scheduler: Any, backend: str) -> None:
    if scheduler is None:
        return
    if backend != "dask":
        raise ValueError(
            f"scheduler: only used with backend='dask', got scheduler={scheduler!r} with "
            f"backend={backend!r}"
        )
    what = ("None, 'local:N' (N >= 1 workers), an address such as 'tcp://HOST:PORT', or a "
            "dask.distributed.Client")
    if hasattr(scheduler, "submit"):
        return
    if not isinstance(scheduler, str):
        raise TypeError(f"scheduler: expected {what}, got {scheduler!r} "
                        f"({type(scheduler).__name__})")
    if scheduler.startswith("local:"):
        count = scheduler[len("local:") :]
        if count.isdigit() and int(count) >= 1:
            return
    elif "://" in scheduler:
        return
    raise ValueError(f"scheduler: expected {what}, got {scheduler!r}")


def _resolve_workers(n_jobs: Any, backend: str) -> int:
    """Threads (local backend) or local-cluster workers (Dask backend) for ``n_jobs``.

    ``None`` means one thread locally and every core for a Dask cluster.
    """
    workers = resolve_n_jobs(n_jobs)
    if backend == "dask" and n_jobs is None:
        return os.cpu_count() or 1
    return workers


# -- data validation ------------------------------------------------------------------------
def _check_X(X: Any) -> np.ndarray:
    """2-D real-valued float32 features without NaN/inf; memory maps are kept as they are."""
    if hasattr(X, "toarray") or type(X).__module__.startswith("scipy.sparse"):
        raise TypeError("X must be a dense array; got a sparse matrix (convert with .toarray())")
    if not isinstance(X, np.ndarray):
        try:
            X = np.asarray(X)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"X must be array-like of numbers; could not convert: {exc}") from exc
    if X.ndim != 2:
        raise ValueError(
            f"X must be 2-D (n_samples, n_features); got a {X.ndim}-D array of shape {X.shape}"
        )
    if X.dtype.kind not in "biuf":
        raise TypeError(f"X must hold real numbers (float, int or bool); got dtype {X.dtype}")
    if X.shape[1] == 0:
        raise ValueError(
            f"X must have at least one feature column; got 0 feature(s) (shape={X.shape}) "
            "while a minimum of 1 is required."
        )
    if X.dtype != np.float32 or not X.flags.c_contiguous:
        X = np.ascontiguousarray(X, dtype=np.float32)
    return X


def _encode_labels(y: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes and sorted classes of ``y``, validated against ``n`` rows."""
    if y is None:
        raise ValueError("AFLite requires y to be passed, but the target y is None")
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (n_samples,); got shape {y.shape}")
    if len(y) != n:
        raise ValueError(f"X and y must have the same length; got {n} rows in X, {len(y)} in y")
    if y.dtype.kind in "fOmM" and pd.isna(y).any():
        first = int(np.flatnonzero(pd.isna(y))[0])
        raise ValueError(
            f"y must not contain missing labels (None/NaN/NA); found {y[first]!r} at row {first}"
        )
    try:
        classes, codes, counts = np.unique(y, return_inverse=True, return_counts=True)
    except TypeError as exc:
        raise TypeError(f"y labels must be mutually comparable (one type); {exc}") from exc
    if len(classes) < 2:
        raise ValueError(
            f"y must contain at least 2 distinct labels; got {len(classes)} "
            f"class{'' if len(classes) == 1 else 'es'} ({classes.tolist()[:5]})"
        )
    single = classes[counts < 2]
    if len(single):
        raise ValueError(
            "y: every label needs at least 2 examples; "
            f"{len(single)} label(s) have one: {single.tolist()[:5]}"
        )
    return codes.astype(np.int64).reshape(-1), classes


def _check_model_size(n_classes: int, m: int, d: int) -> None:
    """Refuse label sets whose per-partition class means would not fit comfortably in memory."""
    size = n_classes * m * d
    if size > _MAX_MODEL_ELEMENTS:
        most = max(1, _MAX_MODEL_ELEMENTS // (m * d))
        raise ValueError(
            f"y has {n_classes} distinct labels: with n_partitions={m} and {d} features the "
            f"per-partition class means would hold {size:,} numbers (about "
            f"{size * 8 / 1e9:.1f} GB); use at most {most} labels here (merge rare labels) or "
            f"fewer partitions or features"
        )


def _column_mean(X: np.ndarray) -> np.ndarray:
    """Column means (float32) of a finite ``X``; raises ValueError naming the first NaN/inf.

    The float64 column sums are finite exactly when every entry is (an inf or NaN entry makes
    its column's sum inf or NaN, and float32 values cannot overflow a float64 sum), so the
    finiteness check costs nothing extra; the offending cell is only searched for on failure.
    """
    total = np.zeros(X.shape[1])
    step = max(1, _BLOCK_BYTES // (4 * X.shape[1]))
    for start in range(0, X.shape[0], step):
        total += X[start : start + step].sum(axis=0, dtype=np.float64)
        _release_pages(X, start, start + step)
    if not np.isfinite(total).all():
        for start in range(0, X.shape[0], step):
            block = X[start : start + step]
            bad = np.argwhere(~np.isfinite(block))
            if len(bad):
                r, c = bad[0]
                raise ValueError(
                    "X must not contain NaN or infinite values; found "
                    f"{block[r, c]} at row {start + r}, column {c}"
                )
    return (total / X.shape[0]).astype(np.float32)


def _release_pages(X: np.ndarray, start: int, stop: int) -> None:
    """Drop rows ``start:stop`` of a read-only memory map from this process's resident set.

    A best-effort hint (``madvise(MADV_DONTNEED)``): the pages stay in the OS page cache and
    are read back transparently if touched again, so a memory-mapped input costs the
    working copies, not the working copies plus the whole mapped file. Does nothing for
    ordinary arrays, writable maps, or where the platform lacks ``madvise``.
    """
    mm = getattr(X, "_mmap", None)
    if mm is None or getattr(X, "mode", None) != "r" or not hasattr(mmap, "MADV_DONTNEED"):
        return
    try:
        base = np.frombuffer(mm, dtype=np.uint8).ctypes.data
        row_bytes = X.strides[0]
        first = X.ctypes.data - base + max(start, 0) * row_bytes
        last = X.ctypes.data - base + min(stop, X.shape[0]) * row_bytes
        page = mmap.PAGESIZE
        first = -(-first // page) * page  # only whole pages inside the range
        last = last // page * page
        if last > first:
            mm.madvise(mmap.MADV_DONTNEED, first, last - first)
    except (OSError, ValueError, TypeError, BufferError):
        return


# -- round mechanics ----------------------------------------------------------------------
def _round_train_size(train: int | float, n_s: int) -> int:
    if isinstance(train, int):
        return train
    return int(min(max(round(train * n_s), 1), n_s - 1))


def _partition_shape(cfg: FitConfig | Mapping[str, Any]) -> tuple[int, int | float]:
    """``(n_partitions, train_size)`` of the configuration a round is drawn with.

    Takes a :class:`FitConfig`, or the mapping ``{"m": n_partitions, "train": train_size}``
    that callers written before FitConfig pass.
    """
    if isinstance(cfg, Mapping):
        return cfg["m"], cfg["train"]
    return cfg.n_partitions, cfg.train_size


def _draw_round(rng: np.random.Generator, blocks: _Blocks, alive: np.ndarray,
                cfg: FitConfig | Mapping[str, Any], groups: np.ndarray | None = None) -> dict:
    """The random partitions of a round over the alive rows, as per-block train masks.

    Each of the ``m`` partitions draws ``min(t, |S| - t)`` distinct positions of S uniformly
    (``rng.choice`` without replacement): the training rows, or the held-out rows when those
    are fewer. Returns the alive rows in round order (block by block, class-ordered within a
    block) as ``s_rows``, their working-copy ``positions`` per block, ``t``, the train masks
    ``train_w`` (one ``(m, rows)`` view per block's working copy; rows no longer alive are
    never training rows), the ``(m, C)`` training ``counts`` per class and, per row of S, the
    number of partitions holding it out (``held``).

    With ``groups`` (an int code per input row) each partition's training rows are whole
    groups, drawn in a seeded random order while their total stays within t (at least one
    group).
    """
    m, train = _partition_shape(cfg)
    n_classes = len(blocks.classes) - 1
    positions = blocks.alive_positions(alive)
    s_rows = np.concatenate([r[p] for r, p in zip(blocks.rows, positions, strict=True)])
    n_s = len(s_rows)
    t = _round_train_size(train, n_s)
    small = min(t, n_s - t)
    drawn_train = small == t
    # The masks of all working copies side by side: block b is columns offsets[b]:offsets[b+1].
    offsets = np.cumsum([0, *(len(r) for r in blocks.rows)])
    s_cols = np.concatenate([o + p for o, p in zip(offsets, positions, strict=False)])
    train_all = np.zeros((m, offsets[-1]), dtype=bool)
    if groups is not None:
        _draw_grouped(rng, train_all, s_cols, groups[s_rows], t)
    else:
        for j in range(m):
            idx = rng.choice(n_s, size=small, replace=False, shuffle=False)
            if not drawn_train:
                train_all[j, s_cols] = True
            train_all[j, s_cols[idx]] = drawn_train
    train_w = [train_all[:, offsets[b] : offsets[b + 1]] for b in range(len(blocks))]
    # Training rows per class: sums over each block's class segments (a block has at most
    # _MAX_BLOCK_ROWS < 2**16 rows, so uint16 sums of the uint8 view are exact and fast).
    ones = train_all.view(np.uint8)
    counts = np.zeros((m, n_classes), dtype=np.int64)
    for tw, bounds in zip(train_w, blocks.bounds, strict=True):
        nonempty = np.flatnonzero(bounds[1:] > bounds[:-1])
        if len(nonempty):
            counts[:, nonempty] += np.add.reduceat(tw.view(np.uint8), bounds[nonempty], axis=1,
                                                   dtype=np.uint16)
    times_train = np.add.reduce(ones, axis=0, dtype=np.uint8 if m < 256 else np.int64)
    held = m - times_train[s_cols].astype(np.int64)
    return {"s_rows": s_rows, "positions": positions, "t": t, "train_w": train_w,
            "counts": counts, "held": held}


def _draw_grouped(rng: np.random.Generator, train_all: np.ndarray, s_cols: np.ndarray,
                  s_groups: np.ndarray, t: int) -> None:
    """Fill each partition's training columns with whole groups of S (see _draw_round)."""
    _, inverse, sizes = np.unique(s_groups, return_inverse=True, return_counts=True)
    for j in range(train_all.shape[0]):
        order = rng.permutation(len(sizes))
        taken = max(1, int(np.searchsorted(np.cumsum(sizes[order]), t, side="right")))
        chosen = np.zeros(len(sizes), dtype=bool)
        chosen[order[:taken]] = True
        train_all[j, s_cols[chosen[inverse]]] = True


def _group_codes(groups: Any, n: int) -> np.ndarray | None:
    """Integer group codes of ``groups`` (one per row), or None."""
    if groups is None:
        return None
    values = np.asarray(groups, dtype=object).ravel()
    if len(values) != n:
        raise ValueError(f"groups: expected {n} values (one per row of X), got {len(values)}")
    return pd.factorize(pd.Series(values), use_na_sentinel=False)[0].astype(np.int64)


def _score_round(backend, blocks: _Blocks, drawn: dict, factor, shift, cfg: FitConfig,
                 datamap: bool = False):
    """One round's predictabilities from its partitions (see :func:`_draw_round`).

    ``factor`` is the covariance factor of S (see :func:`covariance_factor`); ``drawn`` and
    ``factor`` may be futures. Returns the alive rows in round order, their working-copy
    positions per block, the round's train size and their scores (NaN where a row was never
    held out). With ``datamap``, also the rows' data-map statistics of the round
    (:class:`RoundDatamap`), else None.
    """
    if hasattr(drawn, "result"):
        drawn = drawn.result()
    m = cfg.n_partitions
    train_w, positions = drawn["train_w"], drawn["positions"]
    sums = np.zeros((m, len(blocks.classes) - 1, shift.shape[0]))
    for part in backend.group_class_sums(blocks.bounds, train_w):
        sums += part
    if hasattr(factor, "result"):
        factor = factor.result()
    model = fit_partition_lda(None, sums, drawn["counts"], shift=shift, factor=factor)
    model.margins()
    out_w = backend.count_correct(blocks.bounds, train_w, model, datamap)
    correct_w = [o[0] for o in out_w] if datamap else out_w
    correct = np.concatenate([c[p] for c, p in zip(correct_w, positions, strict=True)])
    held = drawn["held"]
    with np.errstate(invalid="ignore", divide="ignore"):
        scores = np.where(held > 0, correct / np.maximum(held, 1), np.nan)
    gold = None
    if datamap:
        gold = RoundDatamap.from_sums(
            held,
            np.concatenate([o[1][p] for o, p in zip(out_w, positions, strict=True)]),
            np.concatenate([o[2][p] for o, p in zip(out_w, positions, strict=True)]))
    return drawn["s_rows"], positions, drawn["t"], scores, gold


def _downdate_factor(stats: ScatterStats, removed_x: np.ndarray) -> tuple:
    """Subtract the removed rows from the statistics of S (in place); the new factor."""
    stats.subtract(*row_stats(removed_x))
    return covariance_factor(stats)


def _positions_by_block(s_index: np.ndarray, positions: list[np.ndarray]) -> list[np.ndarray]:
    """Working-copy positions, per block, of the rows at sorted indices ``s_index`` of S."""
    edges = np.cumsum([0, *(len(p) for p in positions)])
    cuts = np.searchsorted(s_index, edges)
    return [pos[s_index[cuts[b] : cuts[b + 1]] - edges[b]] for b, pos in enumerate(positions)]


def _compact_blocks(backend, blocks: _Blocks, alive: np.ndarray) -> None:
    """Compact the working copies of blocks with fewer than ``_COMPACT_BELOW`` rows alive."""
    keeps = {}
    for b, rows in enumerate(blocks.rows):
        keep = np.flatnonzero(alive[rows])
        if len(keep) < _COMPACT_BELOW * len(rows):
            keeps[b] = keep
            blocks.compact(b, keep)
    if keeps:
        backend.compact(keeps)


def _select_removals(
    scores: np.ndarray,
    priority: np.ndarray,
    cap: int,
    strategy: str,
    rng: np.random.Generator,
) -> np.ndarray:
    """Positions (into ``scores``) of the rows to remove among eligible rows.

    ``scores`` are the predictabilities of the rows scoring at least tau; ``priority`` their
    seeded tie-break rank (lower goes first). Greedy strategies take the ``cap`` highest
    scores, ties by priority; slice sampling draws ``cap`` rows without replacement with
    probability proportional to the score (Gumbel top-k), ties by priority.
    """
    if cap <= 0 or len(scores) == 0:
        return np.zeros(0, dtype=np.int64)
    if strategy == "slice_sampling":
        if len(scores) <= cap:
            return np.arange(len(scores))
        with np.errstate(divide="ignore"):
            keys = np.log(scores) + rng.gumbel(size=len(scores))
    else:
        keys = scores
    # Only rows whose key reaches the cap-th largest key can be among the first cap of the
    # (-key, priority) order, so only those are sorted.
    candidates = np.arange(len(keys))
    if len(keys) > cap:
        threshold = np.partition(keys, len(keys) - cap)[len(keys) - cap]
        candidates = np.flatnonzero(keys >= threshold)
    order = np.lexsort((priority[candidates], -keys[candidates]))
    return candidates[order[:cap]]


def _history_row(result: _RoundResult, seconds: float) -> dict[str, Any]:
    """The ``history_`` row of a round (see :class:`AFLite`)."""
    scored = result.scores[~np.isnan(result.scores)]
    row: dict[str, Any] = {
        "round": result.number,
        "size": result.size_before,
        "train_size": result.train_size,
        "removed": result.removed,
        "size_after": result.size_after,
        "n_scored": len(scored),
        "n_above_tau": result.n_above_tau,
        "score_mean": float(scored.mean()) if len(scored) else np.nan,
    }
    qs = np.quantile(scored, _QUANTILES) if len(scored) else [np.nan] * len(_QUANTILES)
    for q, v in zip(_QUANTILES, qs, strict=True):
        row[f"score_q{round(q * 100):02d}"] = float(v)
    row["seconds"] = seconds
    return row


# -- row blocks and kernels -----------------------------------------------------------------
def _block_rows(d: int, m: int, n_classes: int) -> int:
    """Rows per block: a few MiB of features (cache-friendly products), bounded margin
    temporaries, a multiple of 1024 between 1024 and ``_MAX_BLOCK_ROWS``."""
    rows = min(_BLOCK_TARGET_BYTES // (4 * d),
               _BLOCK_MARGIN_ELEMENTS // (m * max(n_classes - 1, 1)))
    return int(min(max(1024, rows // 1024 * 1024), _MAX_BLOCK_ROWS))


class _Blocks:
    """Driver-side layout of the row blocks and of each block's working copy.

    Block ``b`` covers input rows ``starts[b]:stops[b]``. Its *working copy* (held by the
    backend) is a centred float32 copy of the rows ``rows[b]`` (global row ids, ordered by
    class, class ``c`` at ``bounds[b][c]:bounds[b][c + 1]``). Rows removed by AFLite stay in
    the working copy, masked out, until fewer than ``_COMPACT_BELOW`` of its rows are alive;
    then the copy is compacted. Blocks are gathered into fixed *groups* of ``_GROUP_BLOCKS``
    consecutive blocks: per-block results are summed group by group, then over groups, always
    in this order, and a Dask task handles one group. None of it depends on ``n_jobs`` or on
    the backend, so every backend computes bit-identical numbers.
    """

    def __init__(self, codes: np.ndarray, n_classes: int, block_rows: int) -> None:
        n = len(codes)
        self.codes = codes
        self.classes = np.arange(n_classes + 1)
        self.starts = np.arange(0, n, block_rows)
        self.stops = np.minimum(self.starts + block_rows, n)
        self.rows = [
            s + np.argsort(codes[s:e], kind="stable")
            for s, e in zip(self.starts, self.stops, strict=True)
        ]
        self.bounds = [np.searchsorted(codes[r], self.classes) for r in self.rows]
        self.groups = [
            range(g, min(g + _GROUP_BLOCKS, len(self.starts)))
            for g in range(0, len(self.starts), _GROUP_BLOCKS)
        ]

    def __len__(self) -> int:
        return len(self.starts)

    def alive_positions(self, alive: np.ndarray) -> list[np.ndarray]:
        """Per block, the positions of the alive rows in its working copy."""
        return [np.flatnonzero(alive[r]) for r in self.rows]

    def compact(self, b: int, keep: np.ndarray) -> None:
        self.rows[b] = self.rows[b][keep]
        self.bounds[b] = np.searchsorted(self.codes[self.rows[b]], self.classes)


def _gather(source: np.ndarray, rows: Any, shift: np.ndarray) -> np.ndarray:
    """Rows of ``source`` as a new float32 C-contiguous array, centred by ``shift``."""
    block = source[rows]
    if isinstance(rows, slice) or type(block) is not np.ndarray or not block.flags.c_contiguous:
        block = np.array(block, dtype=np.float32, order="C", copy=True)
    block -= shift
    return block


def _sum_in_order(parts) -> Any:
    """Sum in the given order starting from float64 zeros (one fixed association)."""
    total = None
    for part in parts:
        if total is None:
            total = np.zeros(np.shape(part), dtype=np.float64)
        total += part
    return total


def _group_row_stats(wcs: list[np.ndarray]) -> tuple[int, np.ndarray, np.ndarray]:
    stats = [row_stats(wc) for wc in wcs]
    return (sum(n for n, _, _ in stats), _sum_in_order(t for _, t, _ in stats),
            _sum_in_order(g for _, _, g in stats))


class _LocalBackend:
    """Working copies in this process; threads over blocks when ``n_jobs > 1``."""

    def __init__(self, X, shift, blocks: _Blocks, n_jobs: int) -> None:
        self._groups = blocks.groups
        self._pool = ThreadPoolExecutor(n_jobs) if n_jobs > 1 else None
        # All working copies live in one buffer (block b at rows offsets[b]:offsets[b + 1]) and
        # are compacted in place, so the run allocates the copy of the features once.
        offsets = np.cumsum([0, *(len(r) for r in blocks.rows)])
        self._buffer = np.empty((offsets[-1], X.shape[1]), dtype=np.float32)

        def build(b):
            wc = self._buffer[offsets[b] : offsets[b + 1]]
            np.subtract(np.asarray(X[blocks.rows[b]]), shift, out=wc)
            _release_pages(X, blocks.starts[b], blocks.stops[b])
            return wc

        self._wc = self._map(build, range(len(blocks)))

    def features(self, positions: list[np.ndarray]) -> np.ndarray:
        """Centred features of the given working-copy positions, block after block."""
        return np.concatenate([wc[p] for wc, p in zip(self._wc, positions, strict=True)])

    def submit(self, fn, *args):
        """``fn(*args)`` on a pool thread (a future) when there is a pool, else at once."""
        if self._pool is None:
            return fn(*args)
        return self._pool.submit(fn, *args)

    def _map(self, fn, items):
        if self._pool is None:
            return [fn(i) for i in items]
        return list(self._pool.map(fn, items))

    def group_row_stats(self):
        out = []
        for g in self._groups:  # one group at a time bounds the per-block Gram matrices held
            parts = self._map(lambda b: row_stats(self._wc[b]), g)
            out.append((sum(p[0] for p in parts), _sum_in_order(p[1] for p in parts),
                        _sum_in_order(p[2] for p in parts)))
        return out

    def group_class_sums(self, bounds, train_w):
        out = []
        for g in self._groups:
            parts = self._map(
                lambda b: partition_class_sums(self._wc[b], bounds[b], train_w[b]), g
            )
            out.append(_sum_in_order(parts))
        return out

    def count_correct(self, bounds, train_w, model, datamap: bool = False):
        kernel = heldout_stats if datamap else count_correct
        return self._map(
            lambda b: kernel(self._wc[b], bounds[b], ~train_w[b], model),
            range(len(self._wc)),
        )

    def compact(self, keeps: dict[int, np.ndarray]) -> None:
        for b, keep in keeps.items():
            wc = self._wc[b]
            wc[: len(keep)] = wc[keep]  # the gather makes a copy first, so this is safe
            self._wc[b] = wc[: len(keep)]

    def close(self) -> None:
        self._wc = []
        self._buffer = None
        if self._pool is not None:
            self._pool.shutdown()


# Dask task functions: one task handles the list of working copies of one block group.
def _dask_build(raw, local_rows, shift):
    return [_gather(raw, rows, shift) for rows in local_rows]


def _dask_compact(wcs, keeps):
    return [wc[keeps[i]] if i in keeps else wc for i, wc in enumerate(wcs)]


def _unpack(packed, n_rows):
    return np.unpackbits(packed, axis=1, count=n_rows).astype(bool)


def _dask_class_sums(wcs, bounds, packed):
    return _sum_in_order(
        partition_class_sums(wc, b, _unpack(p, wc.shape[0]))
        for wc, b, p in zip(wcs, bounds, packed, strict=True)
    )


def _dask_count_correct(wcs, bounds, packed, model, datamap=False):
    kernel = heldout_stats if datamap else count_correct
    return [
        kernel(wc, b, ~_unpack(p, wc.shape[0]), model)
        for wc, b, p in zip(wcs, bounds, packed, strict=True)
    ]


class _DaskBackend:
    """Working copies held by the workers of a dask.distributed cluster.

    Each block group's raw rows are scattered once, to one worker (round robin), which builds
    the centred working copies and keeps them for the whole run; no feature crosses the
    network after that. Per round, each group task receives its blocks' class bounds and
    packed train masks (``m * rows / 8`` bytes in all) and the stacked model (``d * m *
    (C - 1)`` floats, broadcast once per round), and returns the group's per-partition class
    sums (``m * C * d`` float64) and per-row correct counts (int32).
    """

    def __init__(self, X, shift, blocks: _Blocks, scheduler, n_jobs: int) -> None:
        self._client, self._owned = _connect(scheduler, n_jobs)
        self._groups = blocks.groups
        self._X, self._shift, self._rows = X, shift, blocks.rows
        self._wc: list = []
        try:
            self._scatter(X, shift, blocks)
        except BaseException:
            self.close()
            raise

    def _scatter(self, X, shift, blocks: _Blocks) -> None:
        from distributed import wait

        client = self._client
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise RuntimeError("the Dask cluster has no workers")
        for i, g in enumerate(self._groups):
            start, stop = blocks.starts[g[0]], blocks.stops[g[-1]]
            worker = [workers[i % len(workers)]]
            raw = client.scatter(np.ascontiguousarray(X[start:stop]), workers=worker)
            _release_pages(X, start, stop)
            local_rows = [blocks.rows[b] - start for b in g]
            self._wc.append(client.submit(_dask_build, raw, local_rows, shift, workers=worker,
                                          pure=False))
            del raw
        wait(self._wc)

    def submit(self, fn, *args):
        """``fn(*args)``, at once on the driver."""
        return fn(*args)

    def features(self, positions: list[np.ndarray]) -> np.ndarray:
        """Centred features of the given working-copy positions, read from X on the driver."""
        rows = np.concatenate([r[p] for r, p in zip(self._rows, positions, strict=True)])
        return _gather(self._X, rows, self._shift)

    def _per_group(self, fn, bounds, train_w, *extra):
        futures = [
            self._client.submit(
                fn, self._wc[i], [bounds[b] for b in g],
                [np.packbits(train_w[b], axis=1) for b in g], *extra, pure=False,
            )
            for i, g in enumerate(self._groups)
        ]
        return self._client.gather(futures)

    def group_row_stats(self):
        return self._client.gather([self._client.submit(_group_row_stats, f) for f in self._wc])

    def group_class_sums(self, bounds, train_w):
        return self._per_group(_dask_class_sums, bounds, train_w)

    def count_correct(self, bounds, train_w, model, datamap: bool = False):
        [model_f] = self._client.scatter([model], broadcast=True)
        per_group = self._per_group(_dask_count_correct, bounds, train_w, model_f, datamap)
        return [counts for group in per_group for counts in group]

    def compact(self, keeps: dict[int, np.ndarray]) -> None:
        for i, g in enumerate(self._groups):
            local = {b - g[0]: keeps[b] for b in g if b in keeps}
            if local:
                self._wc[i] = self._client.submit(_dask_compact, self._wc[i], local, pure=False)

    def close(self) -> None:
        try:
            if self._wc:
                self._client.cancel(self._wc)
        finally:
            self._wc = []
            for obj in reversed(self._owned):
                obj.close()


def _connect(scheduler: Any, n_jobs: int):
    """A dask.distributed Client for ``scheduler`` and the objects this run must close."""
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:  # pragma: no cover - dask is a runtime requirement
        raise ImportError(
            "backend='dask' needs dask.distributed: pip install 'dask[distributed]'"
        ) from exc
    if scheduler is not None and not isinstance(scheduler, str):
        return scheduler, []
    if scheduler is None:
        try:
            from distributed import default_client

            return default_client(), []
        except ValueError:
            scheduler = f"local:{max(1, n_jobs)}"
    if scheduler.startswith("local:"):
        cluster = LocalCluster(
            n_workers=int(scheduler[len("local:") :]),
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",  # HTTP routes on a free loopback port
        )
        try:
            client = Client(cluster)
        except BaseException:
            cluster.close()
            raise
        return client, [cluster, client]
    client = Client(scheduler)
    return client, [client]


_BLAS_CONTROLLER: list = []


@contextlib.contextmanager
def _single_threaded_blas():
    """Limit BLAS to one thread while AFLite runs (parallelism comes from ``n_jobs``).

    Many small BLAS calls with several BLAS threads spin-wait badly when the cores are shared
    (a 256 x 256 Cholesky took 0.2 s instead of 2 ms on a busy 2-core machine); AFLite's own
    threads over row blocks give the same speed-up on an idle machine, deterministically.
    """
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        yield
        return
    # Scanning the loaded libraries costs milliseconds, so it is done once: numpy's and
    # scipy's BLAS (the only ones AFLite calls) are loaded by the time of the first fit.
    if not _BLAS_CONTROLLER:
        _BLAS_CONTROLLER.append(ThreadpoolController())
    with _BLAS_CONTROLLER[0].limit(limits=1, user_api="blas"):
        yield


def _make_backend(name: str, scheduler: Any, X, shift, blocks: _Blocks, n_jobs: int):
    if name == "dask":
        return _DaskBackend(X, shift, blocks, scheduler, n_jobs)
    return _LocalBackend(X, shift, blocks, n_jobs)
