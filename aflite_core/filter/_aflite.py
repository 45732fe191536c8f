"""AFLite: adversarial filtering of dataset biases (Le Bras et al., ICML 2020, Algorithm 1).

Each round partitions the current set S ``n_partitions`` times at random into ``train_size``
training rows and ``|S| - train_size`` held-out rows, trains one linear classifier per partition
and scores every row by its *predictability*: the share of the partitions holding it out whose
model predicts its label. Up to ``slice_size`` rows with the highest predictability among those
scoring at least ``tau`` leave S. AFLite stops when ``|S|`` reaches ``target_size`` (never going
below it) or when fewer than ``slice_size`` rows score at least ``tau``.

Speed comes from :mod:`aflite_core.filter._linear`: the classifiers of a round share a label-free
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

import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from aflite_core._validation import (
    check_callback,
    check_choice,
    check_int,
    make_rng,
    resolve_n_jobs,
)
from aflite_core.filter._aflite_rounds import (
    MAX_MODEL_ELEMENTS,
    FilterRun,
    FitConfig,
)
from aflite_core.filter._backends import (
    BACKENDS,
    MAX_BLOCK_ROWS,
    make_backend,
    resolve_workers,
    single_threaded_blas,
)
from aflite_core.filter._datamap import RoundDatamap
from aflite_core.filter._linear import (
    MAX_CLASSES_MARGINS,
    PREDICT_CHUNK_ROWS,
    count_correct,
    fit_lda_partitions,
    heldout_stats,
)
from aflite_core.filter._rounds import (
    STRATEGIES,
    check_tau,
    check_X,
    column_mean,
    encode_labels,
    heldout_train_size,
    resolve_slice_size,
    resolve_target_size,
    resolve_train_size,
)
from aflite_core.filter._scheduler import check_scheduler
from aflite_core.represent import is_partitioned

__all__ = ["AFLite", "STRATEGIES", "CLASSIFIERS", "BACKENDS"]
CLASSIFIERS = ("lda",)


#: Rows of one piece of the new rows :meth:`AFLite.score_heldout` scores on a thread: whole
#: prediction chunks (so the products are those of the block scored whole), 32 MB of margins
#: at m = 64 and three classes.
_HELDOUT_PIECE_ROWS = 32 * PREDICT_CHUNK_ROWS


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
        (see :mod:`aflite_core.filter._linear`). It matches one scikit-learn logistic regression per
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
        Data map (Swayamdipta et al., 2020; see :mod:`aflite_core.filter._datamap`): mean,
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

    Examples
    --------
    Half the rows carry a planted shortcut (their first feature gives the label away);
    AFLite removes those first:

    >>> import numpy as np
    >>> from aflite_core import AFLite
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1], 200)
    >>> X = rng.normal(size=(400, 8))
    >>> planted = np.arange(400) % 2 == 0
    >>> X[planted, 0] += 4 * (2 * y[planted] - 1)
    >>> est = AFLite(target_size=0.5, n_partitions=16, slice_size=40, random_state=0)
    >>> keep = est.fit(X, y).keep_mask_
    >>> int(keep.sum()), est.stop_reason_
    (200, 'target_size')
    >>> round(float(planted[keep].mean()), 2)  # half of the input, a fifth of what is kept
    0.2
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
        with single_threaded_blas():
            return self._fit(X, y, groups)

    def fit_predict(self, X: Any, y: Any, *, groups: Any = None) -> np.ndarray:
        """Fit and return ``keep_mask_``."""
        return self.fit(X, y, groups=groups).keep_mask_

    def _fit(self, X: Any, y: Any, groups: Any = None) -> AFLite:
        """Validate, prepare the run, play its rounds on a backend, store the results."""
        started = time.perf_counter()
        X = check_X(X)
        codes, classes = encode_labels(y, X.shape[0])
        cfg = self._fit_config(X.shape[0])
        rng = make_rng(self.random_state)
        _check_model_size(len(classes), cfg.n_partitions, X.shape[1])
        run = FilterRun(X, codes, len(classes), cfg, rng, _group_codes(groups, X.shape[0]))
        backend = make_backend(cfg.backend, cfg.scheduler, X, run.shift, run.blocks,
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
        with single_threaded_blas():
            return self._score_heldout(X_new, y_new, X, y, n_partitions, train_size,
                                       random_state, bool(return_datamap))

    def _score_heldout(self, X_new, y_new, X, y, n_partitions, train_size,
                       random_state, datamap: bool = False) -> np.ndarray | pd.DataFrame:
        X, codes = self._check_fit_data(X, y)
        X_new = check_X(X_new)
        if X_new.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X_new: expected {self.n_features_in_} feature columns as in fit, got "
                f"{X_new.shape[1]}"
            )
        column_mean(X_new)  # raises ValueError naming the first NaN/inf
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
        t = heldout_train_size(self.train_size if train_size is None else train_size, n_r)
        rng = make_rng(self.random_state if random_state is None else random_state)
        n_classes = len(self.classes_)
        _check_model_size(n_classes, m, X.shape[1])
        train = np.zeros((m, n_r), dtype=bool)
        for j in range(m):
            train[j, rng.choice(n_r, size=t, replace=False, shuffle=False)] = True
        codes_r = codes[retained]
        model = fit_lda_partitions(X, codes_r, train, n_classes, rows=retained)
        del train  # the partitions' rows (m bytes a retained row): not under the scoring's

        new_codes = pd.Index(self.classes_).get_indexer(pd.Index(y_new))
        predictable = np.bincount(codes_r, minlength=n_classes) > 0
        seen = np.flatnonzero((new_codes >= 0) & predictable[np.maximum(new_codes, 0)])
        scores = np.full(len(y_new), np.nan)
        prob_sum, prob_m2 = np.zeros(len(y_new)), np.zeros(len(y_new))

        def score(rows: np.ndarray, features: np.ndarray | None = None) -> None:
            """Score class-sorted ``rows`` (one piece; ``features``: their rows of ``X_new``
            when already read) into the shared outputs."""
            # the rows read (a copy: fancy indexing, or a block fetched from the workers)
            # shifted in place: not a second block beside them (67 MB at 65,536 rows x 256)
            block = np.ascontiguousarray(X_new[rows] if features is None else features,
                                         dtype=np.float32)
            if not block.flags.writeable or (isinstance(X_new, np.ndarray)
                                             and np.shares_memory(block, X_new)):
                block = block - model.shift  # (never X_new itself)
            else:
                block -= model.shift
            bounds = np.searchsorted(new_codes[rows], np.arange(n_classes + 1))
            heldout = np.ones((m, len(rows)), dtype=bool)
            if datamap:
                correct, prob_sum[rows], prob_m2[rows] = heldout_stats(block, bounds, heldout,
                                                                       model)
            else:
                correct = count_correct(block, bounds, heldout, model)
            scores[rows] = correct / m

        # class-sorted blocks of 65,536 rows, each cut into pieces of whole prediction chunks
        # scored side by side on the estimator's threads: every row's margins are the same
        # products in the same 2,048-row chunks as when a block was scored whole (the same
        # scores, bit for bit), and a block's (C - 1) x m x rows margins are never held at once
        step = MAX_BLOCK_ROWS * 16
        # above MAX_CLASSES_MARGINS classes the kernel chunks its logits otherwise: whole blocks
        piece = _HELDOUT_PIECE_ROWS if n_classes <= MAX_CLASSES_MARGINS else step
        blocks = [rows[np.argsort(new_codes[rows], kind="stable")]
                  for rows in (seen[lo : lo + step] for lo in range(0, len(seen), step))]

        def cut(rows: np.ndarray) -> list[np.ndarray]:
            return np.split(rows, range(piece, len(rows), piece))

        n_pieces = sum(len(cut(rows)) for rows in blocks)
        with ThreadPoolExecutor(max(1, min(resolve_n_jobs(self.n_jobs), n_pieces))) as pool:
            if is_partitioned(X_new):  # Φ on the workers: a block's rows fetched at once
                for rows in blocks:
                    list(pool.map(score, cut(rows), cut(X_new[rows])))
            else:
                list(pool.map(score, [p for rows in blocks for p in cut(rows)]))
        if not datamap:
            return scores
        held = np.zeros(len(y_new), dtype=np.int64)
        held[seen] = m
        stats = RoundDatamap.from_sums(held, prob_sum, prob_m2)
        return pd.DataFrame({"predictability": scores, "confidence": stats.confidence,
                             "variability": stats.variability, "n_heldout": held})

    def _check_fit_data(self, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        """``X`` (float32) and ``y``'s codes, after checking they are the data of ``fit``."""
        X = check_X(X)
        n = len(self.keep_mask_)
        if X.shape != (n, self.n_features_in_):
            raise ValueError(
                f"X: expected the features passed to fit, of shape {(n, self.n_features_in_)}, "
                f"got shape {X.shape}"
            )
        codes, classes = encode_labels(y, n)
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
        target_size = resolve_target_size(self.target_size, n)
        n_partitions = check_int("n_partitions", self.n_partitions, minimum=1)
        train_size = resolve_train_size(self.train_size, n, target_size)
        strategy = check_choice("strategy", self.strategy, STRATEGIES)
        slice_size = resolve_slice_size(self.slice_size, n, strategy)
        tau = check_tau(self.tau)
        check_choice("classifier", self.classifier, CLASSIFIERS)
        callback = check_callback(self.callback)
        backend = check_choice("backend", self.backend, BACKENDS)
        check_scheduler(self.scheduler, backend)
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
            n_workers=resolve_workers(self.n_jobs, backend),
            callback=callback,
        )

    def _store_results(self, run: FilterRun, classes: np.ndarray, n_features: int) -> None:
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


def _data_fingerprint(X: np.ndarray, codes: np.ndarray) -> tuple[int, int]:
    """CRC32 of the label codes and of 64 evenly spaced rows of ``X`` (float32)."""
    rows = np.unique(np.linspace(0, X.shape[0] - 1, 64).astype(np.int64))
    sample = np.ascontiguousarray(X[rows], dtype=np.float32)
    return (zlib.crc32(np.ascontiguousarray(codes, dtype=np.int64).tobytes()),
            zlib.crc32(sample.tobytes()))


def _check_model_size(n_classes: int, m: int, d: int) -> None:
    """Refuse label sets whose per-partition class means would not fit comfortably in memory."""
    size = n_classes * m * d
    if size > MAX_MODEL_ELEMENTS:
        most = max(1, MAX_MODEL_ELEMENTS // (m * d))
        raise ValueError(
            f"y has {n_classes} distinct labels: with n_partitions={m} and {d} features the "
            f"per-partition class means would hold {size:,} numbers (about "
            f"{size * 8 / 1e9:.1f} GB); use at most {most} labels here (merge rare labels) or "
            f"fewer partitions or features"
        )


def _group_codes(groups: Any, n: int) -> np.ndarray | None:
    """Integer group codes of ``groups`` (one per row), or None."""
    if groups is None:
        return None
    integers = isinstance(groups, np.ndarray) and groups.dtype.kind in "iu"
    # integer codes are factorised as they are (the same codes, without a Python int a row)
    values = (groups if integers else np.asarray(groups, dtype=object)).ravel()
    if len(values) != n:
        raise ValueError(f"groups: expected {n} values (one per row of X), got {len(values)}")
    return pd.factorize(values, use_na_sentinel=False)[0].astype(np.int64)
