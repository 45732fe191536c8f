"""Train/test splits: the one split vocabulary, :class:`Split`, and the one seeded splitter.

Every measure that needs training and test rows takes them from here:

* **vocabulary**: split-column values in :data:`TRAIN_VALUES` are training rows, values in
  :data:`TEST_VALUES` test (held-out) rows, compared after ``strip().lower()``
  (:func:`split_masks`); other values belong to neither side;
* **hold-out**: :func:`holdout_mask` / :func:`holdout_split`, a seeded hold-out stratified
  by label, optionally *grouped* (rows of one group, e.g. the pairs sharing a premise, always
  land on the same side);
* **column or hold-out**: :func:`resolve_split` reads the split column and falls back to the
  hold-out when the column has no train/test pair;
* **cross-validation**: :func:`cv_folds`, stratified k-fold, grouped when groups are given.

The hold-out without groups draws, label by label in sorted order, ``rng.choice(rows of the
label, size=n_test, replace=False)`` from ``np.random.default_rng(random_state)``; the cue
statistics and the KNN measures have always drawn exactly so, and their pinned results depend
on it. See ``docs/architecture.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from aflite_core._validation import check_fraction, check_int, make_rng

__all__ = [
    "TEST_VALUES",
    "TRAIN_VALUES",
    "Split",
    "cv_folds",
    "group_codes",
    "holdout_mask",
    "holdout_split",
    "label_matched_subsets",
    "sample_rows",
    "resolve_split",
    "split_masks",
]

#: Split values read as training rows (case-insensitive).
TRAIN_VALUES = frozenset({"train", "training", "trn"})
#: Split values read as test (held-out) rows (case-insensitive).
TEST_VALUES = frozenset(
    {"test", "dev", "development", "validation", "valid", "val", "eval", "evaluation",
     "trial", "heldout", "held-out", "holdout"}
)


@dataclass(frozen=True)
class Split:
    """Which examples are training rows (``R``) and which are test rows (``S``).

    Attributes
    ----------
    train, test : np.ndarray of bool
        Masks over the examples; disjoint.
    source : str
        ``column`` (the split column), ``file`` (a second file) or ``holdout``.
    description : str
        One line saying where the test rows come from.
    """

    train: np.ndarray
    test: np.ndarray
    source: str
    description: str

    def restrict(self, keep: np.ndarray) -> Split:
        """Return the split of the examples selected by boolean ``keep``."""
        return Split(self.train[keep], self.test[keep], self.source, self.description)


# --------------------------------------------------------------------------------------
# vocabulary


def split_masks(splits: Sequence, *, n: int | None = None,
                test_values: Iterable[str] = TEST_VALUES) -> tuple[np.ndarray, np.ndarray]:
    """Training and test masks of split-column values.

    Parameters
    ----------
    splits : sequence
        Split value per example; compared as ``str(value).strip().lower()``.
    n : int, optional
        Expected number of values (raises ValueError otherwise).
    test_values : iterable of str, default :data:`TEST_VALUES`
        Values read as test rows (lower-cased before use).

    Returns
    -------
    train, test : np.ndarray of bool
        Values in :data:`TRAIN_VALUES`, values in ``test_values``.
    """
    codes, texts = _split_texts(splits, n)
    is_train, is_test = _train_test_values(texts, test_values)
    return is_train[codes], is_test[codes]


def _train_test_values(texts: list[str], test_values: Iterable[str] = TEST_VALUES
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Which of the split values ``texts`` are training values, which test values."""
    wanted = {str(v).strip().lower() for v in test_values}
    names = [t.strip().lower() for t in texts]
    return (np.array([t in TRAIN_VALUES for t in names], dtype=bool),
            np.array([t in wanted for t in names], dtype=bool))


def _split_texts(splits: Sequence, n: int | None = None) -> tuple[np.ndarray, list[str]]:
    """``(codes, texts)``: ``texts[codes]`` is ``str(value)`` of every row's split value,
    converted once per distinct value (a str per row, then stripped and lower-cased copies of
    it, were 0.3 GB each at 5M rows). A missing value reads as ``str`` writes it. Every
    value of ``texts`` occurs. ``n``: the number of values expected (ValueError otherwise)."""
    values = np.asarray(splits, dtype=object)
    if n is not None and len(values) != n:
        raise ValueError(f"splits: expected {n} values (one per label), got {len(values)}")
    codes, uniques = pd.factorize(values)
    texts = [str(u) for u in uniques]
    missing = np.flatnonzero(codes < 0)
    if missing.size:  # None, NaN: each as its own text ("None", "nan")
        extra, at = np.unique(np.array([str(v) for v in values[missing]]), return_inverse=True)
        codes[missing] = len(texts) + at.ravel()
        texts += extra.tolist()
    return codes, texts


# --------------------------------------------------------------------------------------
# groups


def _first_seen_codes(values: np.ndarray) -> bool:
    """Whether integer ``values`` are codes in order of first appearance (0 first, each new
    value one above the largest before it), as ``pd.factorize`` numbers them: AFLite's."""
    if values.dtype.kind not in "iu" or not len(values) or values[0] != 0 or values.min() < 0:
        return False
    largest = np.maximum.accumulate(values)
    return bool((values[1:] <= largest[:-1] + 1).all())


def group_codes(groups: Sequence | None, n: int) -> np.ndarray | None:
    """Integer code per row of ``groups`` (None stays None).

    Equal values share a code; a missing value (None, NaN) makes its row a group of its own.

    Raises
    ------
    ValueError
        If ``groups`` is not 1-D with ``n`` entries.
    """
    if groups is None:
        return None
    values = np.asarray(groups)
    if values.dtype.kind not in "iub":  # integer codes as they are: as objects they were a
        values = values.astype(object)  # Python int and a hash entry a row (0.3 GB at 5M)
    if values.ndim != 1 or len(values) != n:
        raise ValueError(f"groups: expected {n} values (one per row), got shape {values.shape}")
    if _first_seen_codes(values):  # factorize would give them back: a copy, no hash table
        return values.astype(np.int64, copy=True)  # (of 1.7M groups: 0.1 GB at 5M rows)
    codes, uniques = pd.factorize(values)
    missing = np.flatnonzero(codes < 0)
    codes[missing] = len(uniques) + np.arange(missing.size)
    return codes.astype(np.int64, copy=False)


# --------------------------------------------------------------------------------------
# hold-out


def _test_counts(sizes: np.ndarray, test_size: float, clamp: bool) -> np.ndarray:
    """Test rows per label: ``round(test_size * n)``; see :func:`holdout_mask` for ``clamp``."""
    out = np.empty(len(sizes), dtype=np.int64)
    for j, n in enumerate(sizes.tolist()):
        n_test = int(round(test_size * n))
        if n > 1 and clamp:
            n_test = min(max(n_test, 1), n - 1)
        elif n <= 1 and not clamp:
            n_test = 0
        out[j] = n_test
    return out


def holdout_mask(labels: Sequence, *, test_size: float = 0.2, groups: Sequence | None = None,
                 random_state: Any = 0, clamp: bool = False) -> np.ndarray:
    """Seeded hold-out stratified by label; True marks a test row.

    Parameters
    ----------
    labels : sequence
        Label per row (the strata), sorted as ``pandas.factorize(sort=True)`` sorts them.
    test_size : float in (0, 1), default 0.2
        Share of each label that goes to the test rows: ``round(test_size * n)`` of its ``n``
        rows.
    groups : sequence, optional
        Group per row (e.g. the premise of an NLI pair). Rows of one group always land on the
        same side; missing values are groups of their own. The per-label shares are then met
        as closely as whole groups allow: groups are visited in seeded random order and a
        group goes to the test rows when that brings the per-label test counts closer to
        their targets (summed absolute difference).
    random_state : int, Generator or None, default 0
        Seed (see :func:`aflite_core._validation.make_rng`).
    clamp : bool, default False
        False: a label with a single row keeps it in training. True: every label with at
        least two rows gets at least one test and one training row (the count is clipped to
        ``[1, n - 1]``); a single row is rounded like the others (held out only when
        ``test_size > 0.5``).

    Returns
    -------
    np.ndarray of bool, shape (n_rows,)
    """
    y = np.asarray(labels)
    test_size = check_fraction("test_size", test_size)
    codes = group_codes(groups, len(y))
    rng = make_rng(random_state)
    strata = pd.factorize(y, sort=True)[0]
    n_strata = strata.max() + 1 if len(strata) else 0
    targets = _test_counts(np.bincount(strata, minlength=n_strata), test_size, clamp)
    if codes is None:
        test = np.zeros(len(y), dtype=bool)
        for code in range(n_strata):
            members = np.flatnonzero(strata == code)
            test[rng.choice(members, size=int(targets[code]), replace=False)] = True
        return test
    return _grouped_holdout(strata, codes, targets, rng)


def _grouped_holdout(strata: np.ndarray, codes: np.ndarray, targets: np.ndarray,
                     rng: np.random.Generator) -> np.ndarray:
    """Whole groups to the test side, greedily, in seeded order (see :func:`holdout_mask`)."""
    n_groups = int(codes.max()) + 1 if len(codes) else 0
    # per group: the strata it touches and its row count in each
    pairs, counts = np.unique(codes * len(targets) + strata, return_counts=True)
    group_of, stratum_of = np.divmod(pairs, len(targets))
    starts = np.searchsorted(group_of, np.arange(n_groups + 1))
    strata_of, counts_of = stratum_of.tolist(), counts.tolist()
    need = targets.astype(np.int64).tolist()  # test rows still wanted per stratum
    chosen = np.zeros(n_groups, dtype=bool)
    for g in rng.permutation(n_groups).tolist():
        gain = 0
        for i in range(starts[g], starts[g + 1]):
            s, c = strata_of[i], counts_of[i]
            gain += abs(need[s]) - abs(need[s] - c)
        if gain > 0:
            chosen[g] = True
            for i in range(starts[g], starts[g + 1]):
                need[strata_of[i]] -= counts_of[i]
    return chosen[codes]


def holdout_split(labels: Sequence, *, test_size: float = 0.2, groups: Sequence | None = None,
                  random_state: Any = 0, clamp: bool = False, reason: str = "") -> Split:
    """:func:`holdout_mask` as a :class:`Split` whose description says what was done."""
    test = holdout_mask(labels, test_size=test_size, groups=groups, random_state=random_state,
                        clamp=clamp)
    grouped = ""
    if groups is not None:
        grouped = f", grouped: {len(pd.unique(group_codes(groups, len(test))))} groups"
    why = f" ({reason})" if reason else ""
    return Split(
        ~test, test, "holdout",
        f"seeded stratified hold-out: {test.sum()} of {len(test)} rows as test "
        f"(test_size={test_size}, random_state={random_state}{grouped}){why}",
    )


def resolve_split(splits: Sequence | None, labels: Sequence, *, groups: Sequence | None = None,
                  test_size: float = 0.2, random_state: Any = 0) -> Split:
    """Training and test rows from a split column, or a hold-out when there is none.

    Parameters
    ----------
    splits : sequence of str, optional
        Split value per example. Values in :data:`TRAIN_VALUES` (train, TRAIN, ...) are
        training rows, values in :data:`TEST_VALUES` (test, dev, validation, TEST, trial,
        ...) test rows, other values are left out. Without both kinds of row, a seeded
        stratified hold-out is used instead (see :func:`holdout_mask`).
    labels : sequence
        Label per example (for the hold-out's stratification).
    groups : sequence, optional
        Group per example for the hold-out (rows of one group stay on one side). A split
        column is used as it is.
    test_size, random_state
        Hold-out parameters.
    """
    n = len(labels)
    if splits is None:
        return holdout_split(labels, test_size=test_size, groups=groups,
                             random_state=random_state, reason="no split column")
    codes, texts = _split_texts(splits, n)
    is_train, is_test = _train_test_values(texts)
    train, test = is_train[codes], is_test[codes]
    if train.any() and test.any():  # every value occurs: its rows are train, test or neither
        values = np.array(texts, dtype=object)
        train_names = ", ".join(sorted(set(values[is_train])))
        test_names = ", ".join(sorted(set(values[is_test])))
        left = n - int(train.sum()) - int(test.sum())
        extra = f"; {left} rows with other split values left out" if left else ""
        return Split(
            train, test, "column",
            f"split column: train = {train_names} ({train.sum()} rows), test = "
            f"{test_names} ({test.sum()} rows){extra}",
        )
    seen = ", ".join(sorted({t.strip().lower() for t in texts})[:5])
    return holdout_split(labels, test_size=test_size, groups=groups, random_state=random_state,
                         reason=f"split column has no train/test pair (values: {seen})")


# --------------------------------------------------------------------------------------
# cross-validation


def cv_folds(labels: Sequence, *, n_splits: int = 5, groups: Sequence | None = None,
             random_state: int | None = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Seeded k-fold cross-validation folds, stratified by label, grouped when asked.

    Parameters
    ----------
    labels : sequence
    n_splits : int >= 2, default 5
    groups : sequence, optional
        Group per row: a group's rows are all in one test fold (whole groups dealt to the
        folds by majority label and size, see :func:`_stratified_group_fold`; scikit-learn's
        ``GroupKFold`` when a label has fewer than ``n_splits`` rows). Without groups:
        ``StratifiedKFold``, or ``KFold`` when a label has fewer than ``n_splits`` rows.
    random_state : int or None, default 0
        Shuffles the rows (groups) before they are dealt into folds.

    Returns
    -------
    list of (train, test) int arrays of row positions
        int32 below 2**31 rows (k folds hold k times every row's position: 8 bytes a row
        each as int64, 0.12 GB at 5M rows and 3 folds; and they travel to a cluster's
        workers), int64 above.
    """
    # lazy: +1442 ms to import
    from sklearn.model_selection import (
        GroupKFold,
        KFold,
        StratifiedKFold,
    )

    y = np.asarray(labels)
    n_splits = check_int("n_splits", n_splits, minimum=2)
    codes = group_codes(groups, len(y))
    _, counts = np.unique(y, return_counts=True)
    stratified = len(counts) > 0 and counts.min() >= n_splits
    X = np.zeros((len(y), 1))
    dtype = _position_dtype(len(y))
    if codes is None:
        if stratified:
            cv = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=random_state)
            return _narrow(cv.split(X, y), dtype)
        cv = KFold(n_splits=n_splits, shuffle=True, random_state=random_state)
        return _narrow(cv.split(X), dtype)
    n_groups = len(np.unique(codes))
    if n_groups < n_splits:
        raise ValueError(f"groups: expected at least n_splits={n_splits} groups for "
                         f"{n_splits}-fold cross-validation, got {n_groups}")
    if stratified:
        fold = _stratified_group_fold(y, codes, n_splits, random_state)
        rows = np.arange(len(y), dtype=dtype)
        return [(rows[fold != f], rows[fold == f]) for f in range(n_splits)]
    cv = GroupKFold(n_splits=n_splits, shuffle=True, random_state=random_state)
    return _narrow(cv.split(X, y, codes), dtype)


def _position_dtype(n: int) -> type:
    """The narrowest of int32 / int64 holding positions of ``n`` rows."""
    return np.int32 if n < 2**31 else np.int64


def _narrow(folds: Iterator[tuple[np.ndarray, np.ndarray]], dtype: type
            ) -> list[tuple[np.ndarray, np.ndarray]]:
    """scikit-learn's folds (int64 positions) as ``dtype``, each fold converted as it comes."""
    return [(train.astype(dtype), test.astype(dtype)) for train, test in folds]


def _stratified_group_fold(y: np.ndarray, codes: np.ndarray, n_splits: int,
                           random_state: int | None) -> np.ndarray:
    """Fold of every row: whole groups dealt so that folds match in size and labels.

    Groups are ordered by their majority label, then by size (largest first), ties in a
    seeded random order, and dealt to the folds in a snake order (0..k-1, k-1..0, ...): each
    fold gets every k-th group of each label's run, so sizes and label shares come out even.
    Vectorised: scikit-learn's ``StratifiedGroupKFold`` loops over groups in Python (5 s per
    call on 65,000 SNLI premise groups, called for every subset a baseline cross-validates).
    """
    _, y_codes = np.unique(y, return_inverse=True)
    _, g = np.unique(codes, return_inverse=True)
    n_groups, n_classes = int(g.max()) + 1, int(y_codes.max()) + 1
    counts = np.zeros((n_groups, n_classes), dtype=np.int64)
    np.add.at(counts, (g, y_codes), 1)
    size = counts.sum(axis=1)
    majority = counts.argmax(axis=1)
    tie = make_rng(random_state).permutation(n_groups)
    order = np.lexsort((tie, -size, majority))
    position = np.arange(n_groups)
    lap, step = np.divmod(position, n_splits)
    dealt = np.where(lap % 2 == 0, step, n_splits - 1 - step)
    group_fold = np.empty(n_groups, dtype=np.int64)
    group_fold[order] = dealt
    return group_fold[g]


# --------------------------------------------------------------------------------------
# controls


def label_matched_subsets(labels: Sequence[Any], keep: np.ndarray, *, n_draws: int,
                          random_state: int | None = 0) -> list[np.ndarray]:
    """Random subsets of all rows with the same count per label as ``labels[keep]``.

    Parameters
    ----------
    labels : sequence
        Label of every row.
    keep : ndarray of bool
        The retained rows (the size and label counts to match).
    n_draws : int
        Number of subsets.
    random_state : int or None

    Returns
    -------
    list of ndarray of bool
        One mask per draw, each with ``keep.sum()`` rows and the retained label counts.
    """
    labels = np.asarray(labels)
    keep = np.asarray(keep, dtype=bool)
    if labels.shape != keep.shape:
        raise ValueError(f"keep: expected {labels.shape[0]} values (one per label), got "
                         f"{keep.shape[0]}")
    n_draws = check_int("n_draws", n_draws, minimum=1)
    rng = make_rng(random_state)
    values, wanted = np.unique(labels[keep], return_counts=True)
    members = {v: np.flatnonzero(labels == v) for v in values}
    masks = []
    for _ in range(n_draws):
        mask = np.zeros(len(labels), dtype=bool)
        for value, count in zip(values, wanted, strict=True):
            mask[rng.choice(members[value], size=int(count), replace=False)] = True
        masks.append(mask)
    return masks


def sample_rows(n: int, max_rows: int, *, groups: np.ndarray | None = None,
                random_state: int | None = 0) -> np.ndarray:
    """Sorted positions of a seeded sample of about ``max_rows`` of ``n`` rows (all rows when
    ``n <= max_rows``); with ``groups``, whole groups are taken in a random order until the
    sample holds ``max_rows`` rows."""
    max_rows = check_int("max_rows", max_rows, minimum=1)
    if n <= max_rows:
        return np.arange(n)
    rng = np.random.default_rng(random_state)
    if groups is None:
        return np.sort(rng.choice(n, size=max_rows, replace=False))
    g = group_codes(groups, n)  # 0 .. G-1: np.unique's inverse of them is themselves
    order = rng.permutation(int(g.max()) + 1)
    sizes = np.bincount(g)[order]
    chosen = np.zeros(len(order), dtype=bool)
    chosen[order[: int(np.searchsorted(np.cumsum(sizes), max_rows)) + 1]] = True
    return np.flatnonzero(chosen[g])
