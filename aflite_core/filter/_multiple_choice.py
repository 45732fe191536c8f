"""AFLite for multiple-choice data: the question is the instance, each choice a row of ``X``.

Le Bras et al. (ICML 2020) filter multiple-choice datasets (e.g. WinoGrande's twin sentences)
with the instance being the *question*: a model is right on a question when it ranks the right
choice first. :class:`MultipleChoiceAFLite` runs Algorithm 1 on questions:

* Φ is one feature row per choice (``X``); ``groups`` names each row's question and ``y`` marks
  the right choice (exactly one per question).
* Each round draws ``n_partitions`` random partitions of the current set S of *questions* into
  ``train_size`` training questions and the rest held out (a question's choices are never split
  between training and held-out).
* Per partition a linear scorer ``w`` is trained on the choices of the training questions; a
  held-out question is predicted right when its right choice has the strictly highest score
  ``x @ w`` among its choices (ties count as wrong).
* A question's predictability is the share of the partitions holding it out that predict it
  right; chance is ``1 / c`` for a question with ``c`` choices (``chance_``).
* Up to ``slice_size`` questions with the highest predictability among those scoring at least
  ``tau`` leave S, until S reaches ``target_size`` questions or fewer than ``slice_size`` score at
  least ``tau``.

The scorer
----------
``w`` is linear discriminant analysis of right vs wrong choices on **question-centred**
features: each choice's features minus the mean of its question's choices. A choice ranking
only compares choices of one question, so anything the choices of a question share (the
context, in a premise block of Φ) cannot change it; centring removes it from the covariance
estimate, which then describes how choices differ *within* a question. For two choices the
centred rows are ``±(x_right - x_wrong) / 2`` and the scorer is LDA on the paired differences,
the linear Bradley-Terry direction. It is the LDA of :mod:`aflite_core.filter._linear` that
AFLite's rounds use (class means from each partition's training rows, one label-free covariance
of S per round, the rank-1 within-class correction), so all partitions of a round cost two
matrix products over S, and no held-out *label* enters a model that scores it (held-out
*features* enter only the label-free covariance). A logistic or softmax-over-choices model is
the same linear family but needs an iterative fit per partition: about 0.1 s per scikit-learn
fit at ARCT's size, minutes per run, against 0.15 s for the whole run here.

Work runs on fixed chunks of questions (about ``_CHUNK_ROWS`` rows each) whose results are
reduced in a fixed order, so the result does not depend on ``n_jobs``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator

from aflite_core._validation import (
    check_callback,
    check_choice,
    check_int,
    make_rng,
    resolve_n_jobs,
)
from aflite_core.filter._backends import single_threaded_blas
from aflite_core.filter._datamap import RoundDatamap
from aflite_core.filter._linear import (
    ScatterStats,
    covariance_factor,
    fit_partition_lda,
    row_stats,
)
from aflite_core.filter._rounds import (
    STRATEGIES,
    RoundState,
    check_tau,
    check_X,
    column_mean,
    resolve_slice_size,
    resolve_target_size,
    resolve_train_size,
    round_train_size,
)

__all__ = ["MultipleChoiceAFLite", "MCFitConfig"]

#: Rows per chunk of questions (a chunk always holds whole questions).
_CHUNK_ROWS = 8192


class MultipleChoiceAFLite(BaseEstimator):
    """AFLite on multiple-choice data: questions are filtered, each row of ``X`` is a choice.

    ``fit(X, y, groups=question_ids)`` finds the questions to keep. Every per-row attribute is
    equal for all rows of a question (a question is kept or removed whole), so a caller can
    use ``keep_mask_``, ``predictability_`` and ``removal_round_`` exactly like
    :class:`aflite_core.filter.AFLite`'s; the per-question versions start with
    ``question_``. See the module docstring for the scorer. As in scikit-learn, ``__init__``
    only stores the parameters and ``fit`` validates them.

    Parameters
    ----------
    target_size : int or float
        *Questions* to keep at least: an int in ``[1, n_questions)`` or a fraction of the
        questions in ``(0, 1)`` (rounded up).
    n_partitions : int, default=64
        ``m``: random train/held-out partitions of the questions (linear scorers) per round.
    train_size : int or float, default=0.5
        ``t``: training *questions* per partition; a float is a fraction of the questions of S
        at the start of each round (clipped to ``[1, |S| - 1]``); an int is used in every round
        and must be at most ``target_size``.
    slice_size : int or float, default=None
        ``k``: questions removed per round at most; an int ``>= 1`` or a fraction of the
        questions in ``(0, 1]``. ``None`` gives 2% of the questions (at least 1).
    tau : float, default=0.75
        Only questions with predictability ``>= tau`` are removed. Mind chance: ``1 / c`` for
        ``c`` choices (0.5 for two), so tau must be well above it to mean "predictable".
    strategy : {"greedy_slicing", "slice_sampling", "greedy"}, default="greedy_slicing"
        As in :class:`~aflite_core.filter.AFLite`.
    random_state : int, numpy Generator, SeedSequence or None, default=None
        Seeds the partitions, the tie-break order and slice sampling.
    n_jobs : int or None, default=None
        Threads over fixed chunks of questions (``None`` = 1, ``-1`` = all cores); BLAS is held
        to one thread during ``fit``. The result does not depend on it.
    callback : callable, optional
        ``callback(info)`` after every round, with the keys of AFLite's callback (sizes in
        *questions*: ``round, size, size_before, removed, removed_total, target_size,
        n_samples`` (= questions), ``n_above_tau, seconds, elapsed, stop_reason``) plus
        ``size_rows`` (choice rows left in S). Returning ``True`` stops after this round.

    Attributes
    ----------
    keep_mask_ : ndarray of shape (n_rows,), bool
        True for the rows of retained questions.
    predictability_ : ndarray of shape (n_rows,), float64
        The row's question's predictability (in the round it was removed, else the last round;
        NaN when it was never held out in that round).
    removal_round_ : ndarray of shape (n_rows,), int64
        1-based round the row's question was removed in, -1 when retained.
    question_ids_ : ndarray of shape (n_questions,)
        The distinct ``groups`` values, in order of first appearance.
    question_index_ : ndarray of shape (n_rows,), int64
        Each row's question, as a position in ``question_ids_``.
    confidence_, variability_ : ndarray of shape (n_rows,), float64
        The row's question's data map (see :mod:`aflite_core.filter._datamap`), in the round of
        ``predictability_``: mean and population standard deviation, over the partitions
        holding the question out, of the right choice's probability, the softmax over the
        question's choices of the scorer's scores ``x @ w``.
    n_heldout_ : ndarray of shape (n_rows,), int64
        Partitions holding the row's question out in that round.
    datamap_history_ : pandas.DataFrame
        Per round: ``round, n_scored, confidence_mean, variability_mean, correctness_mean``
        over the questions scored.
    question_keep_mask_, question_predictability_, question_removal_round_ : ndarray of shape
        (n_questions,)
        The per-question values of the three row attributes (likewise
        ``question_confidence_``, ``question_variability_``, ``question_n_heldout_``).
    n_choices_ : ndarray of shape (n_questions,), int64
    chance_ : ndarray of shape (n_questions,), float64
        ``1 / n_choices_``: the predictability of a scorer that guesses. ``chance_.mean()`` is
        the chance level of the mean predictability.
    right_row_ : ndarray of shape (n_questions,), int64
        Row (input position) of each question's right choice.
    history_ : pandas.DataFrame
        One row per round: ``round, size`` (questions at the start), ``size_rows, train_size``
        (questions), ``removed, size_after, n_scored, n_above_tau, score_mean, chance_mean``
        (mean of ``chance_`` over the scored questions), ``score_q10 .. score_q90, seconds``.
    n_rounds_ : int
    stop_reason_ : str
        ``"target_size"``, ``"too_few_above_tau"`` or ``"callback"``.
    n_questions_ : int
    n_features_in_ : int
    target_size_, slice_size_ : int
        The resolved sizes, in questions.

    Examples
    --------
    100 questions of 4 choices; in the first 50 a shortcut marks the right choice, and those
    questions leave first:

    >>> import numpy as np
    >>> from aflite_core import MultipleChoiceAFLite
    >>> rng = np.random.default_rng(0)
    >>> questions = np.repeat(np.arange(100), 4)
    >>> right = np.zeros(400, dtype=int)
    >>> right[np.arange(100) * 4 + rng.integers(0, 4, 100)] = 1
    >>> X = rng.normal(size=(400, 6))
    >>> X[:200, 0] += 3 * right[:200]
    >>> mc = MultipleChoiceAFLite(target_size=0.5, n_partitions=8, random_state=0)
    >>> kept = mc.fit(X, right, groups=questions).question_keep_mask_
    >>> int(kept.sum()), int(kept[:50].sum()) < int(kept[50:].sum())
    (54, True)
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
        random_state: Any = None,
        n_jobs: int | None = None,
        callback: Callable[[dict], Any] | None = None,
    ) -> None:
        self.target_size = target_size
        self.n_partitions = n_partitions
        self.train_size = train_size
        self.slice_size = slice_size
        self.tau = tau
        self.strategy = strategy
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.callback = callback

    def __sklearn_tags__(self):
        """Estimator tags: dense, finite X and a required y."""
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = False
        return tags

    def fit(self, X: Any, y: Any, *, groups: Any = None) -> MultipleChoiceAFLite:
        """Run AFLite on the questions of multiple-choice data.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            One feature row per choice (real numbers, no NaN/inf).
        y : array-like of shape (n_rows,), bool or 0/1
            True (1) for the right choice; exactly one per question. For the loader's
            ``right``/``wrong`` labels pass ``labels == "right"``.
        groups : array-like of shape (n_rows,)
            The question of each row (any hashable values; a question's rows need not be
            adjacent). Every question needs at least 2 choices. Required: it is a keyword
            with a default only so that ``X`` and ``y`` are checked first (``None`` raises
            ``ValueError`` after them).

        Returns
        -------
        self

        Raises
        ------
        TypeError
            A parameter, ``X``, ``y`` or ``groups`` of the wrong type (the message names it).
        ValueError
            A wrong value: e.g. a question with no right choice, several right choices or a
            single choice (the message names the question and its rows).
        """
        with single_threaded_blas():
            return self._fit(X, y, groups)

    def fit_predict(self, X: Any, y: Any, *, groups: Any = None) -> np.ndarray:
        """Fit and return ``keep_mask_`` (per row)."""
        return self.fit(X, y, groups=groups).keep_mask_

    def _fit(self, X: Any, y: Any, groups: Any) -> MultipleChoiceAFLite:
        started = time.perf_counter()
        X = check_X(X)
        n = X.shape[0]
        if n == 0:
            raise ValueError("X: expected at least one row, got 0 sample(s) (shape="
                             f"{X.shape}) while a minimum of 1 is required.")
        column_mean(X)  # raises ValueError naming the first NaN/inf
        right = _check_right(y, n)
        if groups is None:
            raise ValueError("groups: expected the question of each row (multiple-choice "
                             "AFLite keeps or removes a question whole), got None")
        questions = _Questions.from_groups(groups, right, n)
        cfg = self._fit_config(questions.n)
        rng = make_rng(self.random_state)
        run = _MCRun(X, questions, cfg, rng)
        run.run_rounds(started)
        self._store_results(run, X.shape[1])
        return self

    def _fit_config(self, n_questions: int) -> MCFitConfig:
        """Validate the parameters against ``n_questions``; sizes are in questions."""
        with _in_questions():
            target_size = resolve_target_size(self.target_size, n_questions)
            n_partitions = check_int("n_partitions", self.n_partitions, minimum=1)
            train_size = resolve_train_size(self.train_size, n_questions, target_size)
            strategy = check_choice("strategy", self.strategy, STRATEGIES)
            slice_size = resolve_slice_size(self.slice_size, n_questions, strategy)
        return MCFitConfig(
            n_questions=n_questions,
            target_size=target_size,
            n_partitions=n_partitions,
            train_size=train_size,
            slice_size=slice_size,
            tau=check_tau(self.tau),
            strategy=strategy,
            n_workers=resolve_n_jobs(self.n_jobs),
            callback=check_callback(self.callback),
        )

    def _store_results(self, run: _MCRun, n_features: int) -> None:
        q = run.questions
        index = q.index
        self.question_ids_ = q.ids
        self.question_index_ = index
        self.question_keep_mask_ = run.alive.copy()
        self.question_predictability_ = run.predictability
        self.question_removal_round_ = run.removal_round
        self.n_choices_ = q.n_choices
        self.chance_ = 1.0 / q.n_choices
        self.right_row_ = q.right_row
        self.keep_mask_ = run.alive[index]
        self.predictability_ = run.predictability[index]
        self.removal_round_ = run.removal_round[index]
        self.history_ = pd.DataFrame(run.history)
        self.n_rounds_ = len(run.history)
        self.stop_reason_ = run.stop_reason
        self.n_questions_ = q.n
        self.n_features_in_ = n_features
        self.target_size_ = run.cfg.target_size
        self.slice_size_ = run.cfg.slice_size
        run.datamap.store(self, index, prefix="question_")


@dataclass(frozen=True)
class MCFitConfig:
    """:class:`MultipleChoiceAFLite`'s parameters for one ``fit``, resolved (sizes in questions)."""

    n_questions: int
    target_size: int
    n_partitions: int
    train_size: int | float
    slice_size: int
    tau: float
    strategy: str
    n_workers: int
    callback: Callable[[dict], Any] | None


class _in_questions:
    """Re-raise the shared size errors with "questions" for "rows" (sizes count questions)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        if exc is not None and kind in (TypeError, ValueError):
            message = str(exc).replace("rows", "questions").replace(" row)", " question)")
            raise kind(message) from None
        return False


# -- data validation ------------------------------------------------------------------------
def _show(value: Any) -> str:
    """``repr`` of a value as the user wrote it (numpy scalars as Python ones)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _check_right(y: Any, n: int) -> np.ndarray:
    """``y`` as a bool array marking right choices (bool or 0/1 values)."""
    if y is None:
        raise ValueError("y: expected booleans or 0/1 marking the right choice of each "
                         "question, got None")
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (n_rows,); got shape {y.shape}")
    if len(y) != n:
        raise ValueError(f"X and y must have the same length; got {n} rows in X, {len(y)} in y")
    if y.dtype == bool:
        return y.copy()
    hint = ("y: expected booleans or 0/1 marking the right choice of each question (one per "
            "question)")
    if y.dtype.kind in "iuf":
        bad = ~np.isin(y, (0, 1))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{hint}, got {_show(y[i])} at row {i}")
        return y == 1
    if y.dtype.kind == "O":
        ok = [isinstance(v, (bool, np.bool_, int, np.integer)) and v in (0, 1) for v in y]
        if all(ok):
            return np.array([bool(v) for v in y], dtype=bool)
        i = ok.index(False)
        raise TypeError(f"{hint}, got {_show(y[i])} at row {i}")
    example = _show(y[0]) if len(y) else "nothing"
    raise TypeError(f"{hint}, got dtype {y.dtype} (e.g. {example}); for labels such as "
                    "'right'/'wrong' pass y == 'right'")


@dataclass(frozen=True)
class _Questions:
    """The questions of the input and the row layout sorted by question.

    ``index`` maps input rows to questions (order of first appearance); ``order`` lists the
    input rows question by question (stable), question ``q`` at ``starts[q]:starts[q + 1]`` of
    that layout, its right choice at layout position ``right_pos[q]`` (input row
    ``right_row[q]``).
    """

    ids: np.ndarray
    index: np.ndarray
    order: np.ndarray
    starts: np.ndarray
    n_choices: np.ndarray
    right_pos: np.ndarray
    right_row: np.ndarray

    @property
    def n(self) -> int:
        return len(self.ids)

    @classmethod
    def from_groups(cls, groups: Any, right: np.ndarray, n: int) -> _Questions:
        if groups is None:
            raise ValueError("groups: expected the question id of every row, got None")
        groups = np.asarray(groups)
        if groups.ndim != 1:
            raise ValueError(f"groups must be 1-D (n_rows,); got shape {groups.shape}")
        if len(groups) != n:
            raise ValueError(
                f"X and groups must have the same length; got {n} rows in X, {len(groups)} "
                "in groups"
            )
        index, ids = pd.factorize(groups, sort=False, use_na_sentinel=True)
        if (index < 0).any():
            i = int(np.flatnonzero(index < 0)[0])
            raise ValueError(f"groups must not contain missing question ids (None/NaN); "
                             f"found {_show(groups[i])} at row {i}")
        index = index.astype(np.int64)
        ids = np.asarray(ids)
        n_q = len(ids)
        n_choices = np.bincount(index, minlength=n_q).astype(np.int64)
        n_right = np.bincount(index, weights=right, minlength=n_q).astype(np.int64)
        order = np.argsort(index, kind="stable")
        starts = np.concatenate([[0], np.cumsum(n_choices)]).astype(np.int64)
        _check_question_shapes(ids, index, order, starts, n_choices, n_right)
        if n_q < 2:
            raise ValueError(f"groups: expected at least 2 questions, got {n_q}")
        right_pos = np.flatnonzero(right[order])
        return cls(ids=ids, index=index, order=order, starts=starts, n_choices=n_choices,
                   right_pos=right_pos, right_row=order[right_pos])


def _check_question_shapes(ids, index, order, starts, n_choices, n_right) -> None:
    """Every question needs at least 2 choices and exactly one right choice."""

    def rows_of(q: int) -> str:
        rows = order[starts[q] : starts[q + 1]]
        shown = ", ".join(str(r) for r in rows[:6])
        return f"row{'s' if len(rows) > 1 else ''} {shown}{', ...' if len(rows) > 6 else ''}"

    problems = [
        (n_choices < 2, lambda q: f"has {n_choices[q]} choice ({rows_of(q)}); a question "
                                  "needs at least 2 choices", "groups"),
        (n_right == 0, lambda q: f"has no right choice ({rows_of(q)}); expected exactly one "
                                 "row with y True", "y"),
        (n_right > 1, lambda q: f"has {n_right[q]} right choices ({rows_of(q)}); expected "
                                "exactly one row with y True", "y"),
    ]
    for bad, describe, name in problems:
        if bad.any():
            q = int(np.flatnonzero(bad)[0])
            more = int(bad.sum()) - 1
            also = f" ({more} more question{'s' if more != 1 else ''} like it)" if more else ""
            raise ValueError(f"{name}: question {_show(ids[q])} {describe(q)}{also}")


# -- the run ---------------------------------------------------------------------------------
class _Chunk:
    """A fixed run of whole questions ``q0:q1`` (layout rows ``r0:r1``)."""

    __slots__ = ("q0", "q1", "r0", "r1")

    def __init__(self, q0: int, q1: int, r0: int, r1: int) -> None:
        self.q0, self.q1, self.r0, self.r1 = q0, q1, r0, r1


def _make_chunks(starts: np.ndarray, chunk_rows: int | None = None) -> list[_Chunk]:
    """Fixed chunks of whole questions of about ``chunk_rows`` rows (``_CHUNK_ROWS``)."""
    chunk_rows = _CHUNK_ROWS if chunk_rows is None else chunk_rows
    chunks, q0, n_q = [], 0, len(starts) - 1
    while q0 < n_q:
        q1 = int(np.searchsorted(starts, starts[q0] + chunk_rows, side="right")) - 1
        q1 = min(max(q1, q0 + 1), n_q)
        chunks.append(_Chunk(q0, q1, int(starts[q0]), int(starts[q1])))
        q0 = q1
    return chunks


def _centre_by_question(X: np.ndarray, q: _Questions) -> np.ndarray:
    """Rows of ``X`` in question order minus their question's mean choice (float32)."""
    Xq = np.ascontiguousarray(X[q.order], dtype=np.float32)
    means = np.add.reduceat(Xq, q.starts[:-1], axis=0, dtype=np.float64)
    means /= q.n_choices[:, None]
    Xq -= np.repeat(means.astype(np.float32), q.n_choices, axis=0)
    return Xq


class _MCRun(RoundState):
    """The state of one ``fit``: the alive questions, scores so far and the history (the
    bookkeeping every filter shares is :class:`~aflite_core.filter._rounds.RoundState`'s)."""

    def __init__(self, X: np.ndarray, questions: _Questions, cfg: MCFitConfig,
                 rng: np.random.Generator) -> None:
        super().__init__(questions.n, cfg, rng)
        self.questions = questions
        n_q = questions.n
        self.Xq = _centre_by_question(X, questions)
        self.q_of_row = np.repeat(np.arange(n_q), questions.n_choices)  # layout row -> question
        self.is_right = np.zeros(len(self.Xq), dtype=bool)
        self.is_right[questions.right_pos] = True
        self.chunks = _make_chunks(questions.starts)

    def run_rounds(self, started: float) -> None:
        pool = ThreadPoolExecutor(self.cfg.n_workers) if self.cfg.n_workers > 1 else None
        try:
            self._run(pool, started)
        finally:
            if pool is not None:
                pool.shutdown()

    def _map(self, pool, fn, items) -> list:
        return list(pool.map(fn, items)) if pool is not None else [fn(i) for i in items]

    def _run(self, pool, started: float) -> None:
        cfg, q = self.cfg, self.questions
        d = self.Xq.shape[1]
        stats = ScatterStats.zeros(d)
        for part in self._map(pool, lambda c: row_stats(self.Xq[c.r0 : c.r1]), self.chunks):
            stats.add(*part)
        round_no = 0
        while self.stop_reason is None:
            round_no += 1
            t_round = time.perf_counter()
            s_q = np.flatnonzero(self.alive)
            n_s = len(s_q)
            t = round_train_size(cfg.train_size, n_s)
            train = self._draw(s_q, t)  # (m, n_questions) bool, False outside S
            scores, gold = self._score(pool, stats, train, s_q)
            removed_pos, n_above = self.choose(s_q, scores)
            removed_q = self.remove(round_no, s_q, scores, gold, removed_pos)
            if self.stop_reason is None and len(removed_q):
                rows = np.concatenate([np.arange(q.starts[i], q.starts[i + 1])
                                       for i in removed_q])
                stats.subtract(*row_stats(self.Xq[rows]))
            seconds = time.perf_counter() - t_round
            ok = ~np.isnan(scores)
            chance = 1.0 / q.n_choices[s_q[ok]]
            self.history.append(self.history_row(
                round_no, n_s, t, len(removed_q), scores, n_above, seconds,
                sizes={"size_rows": int(q.n_choices[s_q].sum())},
                means={"chance_mean": float(chance.mean()) if len(chance) else np.nan}))
            self.notify(round_no, n_s, len(removed_q), n_above, seconds, started,
                        cfg.n_questions,
                        sizes={"size_rows": int(q.n_choices[self.alive].sum())})

    def _draw(self, s_q: np.ndarray, t: int) -> np.ndarray:
        """Training questions of each partition: ``min(t, |S| - t)`` distinct draws of S."""
        m, n_s = self.cfg.n_partitions, len(s_q)
        small = min(t, n_s - t)
        drawn_train = small == t
        train = np.zeros((m, self.questions.n), dtype=bool)
        for j in range(m):
            idx = self.rng.choice(n_s, size=small, replace=False, shuffle=False)
            if not drawn_train:
                train[j, s_q] = True
            train[j, s_q[idx]] = drawn_train
        return train

    def _alive_rows(self, c: _Chunk) -> np.ndarray:
        """Layout rows of the alive questions of a chunk."""
        return c.r0 + np.flatnonzero(self.alive[self.q_of_row[c.r0 : c.r1]])

    def _score(self, pool, stats: ScatterStats, train: np.ndarray, s_q: np.ndarray):
        """Predictability of the questions ``s_q`` under the round's partitions."""
        m, d = self.cfg.n_partitions, self.Xq.shape[1]
        chunk_rows = self._map(pool, self._alive_rows, self.chunks)

        def class_sums(rows):
            out = np.zeros((m, 2, d), dtype=np.float32)
            if len(rows):
                Xc = self.Xq[rows]
                tr = train[:, self.q_of_row[rows]].astype(np.float32)
                right = self.is_right[rows]
                out[:, 1] = tr[:, right] @ Xc[right]
                out[:, 0] = tr[:, ~right] @ Xc[~right]
            return out

        sums = np.zeros((m, 2, d))
        for part in self._map(pool, class_sums, chunk_rows):
            sums += part
        n_train_q = train[:, s_q].sum(axis=1)
        counts = np.stack([train[:, s_q] @ (self.questions.n_choices[s_q] - 1), n_train_q],
                          axis=1)
        model = fit_partition_lda(None, sums, counts, factor=covariance_factor(stats))
        coef = model.margins()[0]  # (d, m): right minus wrong; the intercept cannot rank

        datamap = self.datamap.on

        def correct(rows):
            if not len(rows):
                empty = np.zeros(0)
                return np.zeros(0, dtype=np.int64), empty, empty
            margins = self.Xq[rows] @ coef  # (rows, m)
            q_rows = self.q_of_row[rows]
            seg = np.flatnonzero(np.r_[True, q_rows[1:] != q_rows[:-1]])
            right = self.is_right[rows]
            best_right = margins[right]  # one per question, in question order
            held = ~train[:, q_rows[seg]].T
            prob_sum = prob_m2 = None
            if datamap:
                prob_sum, prob_m2 = _right_choice_stats(margins, best_right, seg, held)
            margins[right] = -np.inf
            best_wrong = np.maximum.reduceat(margins, seg, axis=0)
            return ((best_right > best_wrong) & held).sum(axis=1), prob_sum, prob_m2

        parts = self._map(pool, correct, chunk_rows)
        n_correct = np.concatenate([p[0] for p in parts])
        held = self.cfg.n_partitions - train[:, s_q].sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            scores = np.where(held > 0, n_correct / np.maximum(held, 1), np.nan)
        gold = None
        if datamap:
            gold = RoundDatamap.from_sums(held, np.concatenate([p[1] for p in parts]),
                                          np.concatenate([p[2] for p in parts]))
        return scores, gold


def _right_choice_stats(margins: np.ndarray, best_right: np.ndarray, seg: np.ndarray,
                        held: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per question: sum and squared deviations of the right choice's probability.

    ``margins`` are the ``(rows, m)`` choice scores of whole questions (starting at ``seg``),
    ``best_right`` the ``(questions, m)`` scores of their right choices, ``held`` which
    partitions hold each question out. The probability is the softmax over the question's
    choices, ``1 / sum_k exp(s_k - s_right)``. Returns float64 arrays of shape (questions,).
    """
    counts = np.diff(np.r_[seg, len(margins)])
    with np.errstate(over="ignore"):
        shifted = margins - np.repeat(best_right, counts, axis=0)
        np.exp(shifted, out=shifted)
        prob = 1.0 / np.add.reduceat(shifted, seg, axis=0)  # (questions, m)
    prob = np.where(held, prob, 0.0)
    n = np.maximum(held.sum(axis=1), 1)
    total = prob.sum(axis=1)
    dev = np.where(held, prob - (total / n)[:, None], 0.0)
    return total.astype(np.float64), np.einsum("ij,ij->i", dev, dev).astype(np.float64)
