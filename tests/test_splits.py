"""The one split vocabulary and seeded (grouped) splitter: old draws kept, groups never straddle."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import StratifiedKFold

from aflite_core.cues import statistics
from aflite_core.splits import (
    TEST_VALUES,
    TRAIN_VALUES,
    Split,
    _first_seen_codes,
    cv_folds,
    group_codes,
    holdout_mask,
    holdout_split,
    resolve_split,
    split_masks,
)

# ------------------------------------------------------------------ the draws of before


def _old_cues_holdout(labels, test_size, random_state):
    """``cues.statistics.holdout_split`` before the splitter moved (verbatim logic)."""
    y = np.asarray(labels)
    rng = np.random.default_rng(random_state)
    test = np.zeros(len(y), dtype=bool)
    codes = pd.factorize(y, sort=True)[0]
    for code in range(codes.max() + 1 if len(codes) else 0):
        members = np.flatnonzero(codes == code)
        n_test = int(round(test_size * len(members))) if len(members) > 1 else 0
        test[rng.choice(members, size=n_test, replace=False)] = True
    return test


def _old_knn_heldout(labels, fraction, random_state):
    """``measures.knn.heldout_mask`` without a split column, before (verbatim logic)."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(random_state)
    mask = np.zeros(len(labels), dtype=bool)
    for value in np.unique(labels):
        members = np.flatnonzero(labels == value)
        n_take = int(round(fraction * len(members)))
        if len(members) > 1:
            n_take = min(max(n_take, 1), len(members) - 1)
        mask[rng.choice(members, size=n_take, replace=False)] = True
    return mask


def _label_sets():
    rng = np.random.default_rng(5)
    yield np.array(["x"] * 500 + ["y"] * 300 + ["z"] * 200)
    yield rng.choice(np.array(["entailment", "neutral", "contradiction"]), size=997)
    yield np.array(["a", "a", "b", "c", "c", "c", "d"])  # singletons and pairs
    yield rng.integers(0, 7, size=313)


@pytest.mark.parametrize("seed", [0, 1, 17])
@pytest.mark.parametrize("test_size", [0.1, 0.2, 0.5, 0.7])
def test_without_groups_the_draws_are_those_of_before(seed, test_size):
    for labels in _label_sets():
        np.testing.assert_array_equal(
            holdout_mask(labels, test_size=test_size, random_state=seed),
            _old_cues_holdout(labels, test_size, seed))
        np.testing.assert_array_equal(
            holdout_mask(labels, test_size=test_size, random_state=seed, clamp=True),
            _old_knn_heldout(labels, test_size, seed))


def test_count_rules():
    labels = np.array(["a"] + ["b"] * 2 + ["c"] * 10)
    plain = holdout_mask(labels, test_size=0.2, random_state=0)
    assert [plain[labels == v].sum() for v in "abc"] == [0, 0, 2]  # round(0.4) = 0
    clamped = holdout_mask(labels, test_size=0.2, random_state=0, clamp=True)
    assert [clamped[labels == v].sum() for v in "abc"] == [0, 1, 2]  # b on both sides
    with pytest.raises(ValueError, match="test_size"):
        holdout_mask(labels, test_size=1.0)


def test_vocabulary_and_split_column():
    assert {"train", "training"} <= TRAIN_VALUES and {"dev", "test", "heldout"} <= TEST_VALUES
    train, test = split_masks([" Train", "DEV", "other", "test "])
    assert train.tolist() == [True, False, False, False]
    assert test.tolist() == [False, True, False, True]
    _, dev_only = split_masks(["dev", "test"], test_values=("dev",))
    assert dev_only.tolist() == [True, False]
    s = resolve_split(["train", "dev", "other", "train"], ["a", "b", "a", "b"])
    assert s.source == "column" and "left out" in s.description
    # the cue statistics re-export the very same objects
    assert statistics.Split is Split and statistics.resolve_split is resolve_split
    assert statistics.holdout_split is holdout_split
    assert statistics.TEST_VALUES is TEST_VALUES and statistics.TRAIN_VALUES is TRAIN_VALUES


def test_group_codes_missing_values_are_groups_of_their_own():
    codes = group_codes(["p", None, "q", "p", float("nan")], 5)
    assert codes[0] == codes[3] and len(set(codes.tolist())) == 4
    assert group_codes(None, 3) is None
    with pytest.raises(ValueError, match="groups"):
        group_codes(["a", "b"], 3)


def test_group_codes_of_codes_are_factorizes_codes_without_its_hash_table():
    """Integer groups that are already codes in order of first appearance (AFLite's) come back
    as a copy, the codes ``pd.factorize`` gives them; any other integers (negative, a gap, a
    later value first, another width) are factorized as before: the same codes either way."""
    rng = np.random.default_rng(0)
    cases = [pd.factorize(rng.integers(0, 50, 400))[0], np.array([0, 1, 0, 2, 2, 3]),
             np.array([0, 1, 1, -1, 1, 2]), np.array([0, 2, 1]), np.array([1, 0, 1]),
             pd.factorize(rng.integers(0, 9, 60))[0].astype(np.int32),
             np.array([0, 1, 255, 1], dtype=np.uint8), rng.permutation(30)]
    for values in cases:
        expected = pd.factorize(values)[0].astype(np.int64)
        got = group_codes(values, len(values))
        assert got.dtype == np.int64 and np.array_equal(got, expected)
        assert not np.shares_memory(got, values)  # the caller's array is not handed back
    for values in (np.array([0, 1, 1, -1, 1, 2]), np.array([0, 2, 1]), rng.permutation(30)):
        assert not _first_seen_codes(values)
    assert _first_seen_codes(cases[0]) and _first_seen_codes(cases[5])


# ------------------------------------------------------------------ groups on real SNLI


@pytest.fixture(scope="module")
def snli_dev(snli_dir):
    """SNLI dev rows: each premise comes with (about) three hypotheses, one per label."""
    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False)
    return frame["premise"].to_numpy(dtype=object), frame["label"].to_numpy(dtype=object)


def _no_group_straddles(groups, test):
    sides = pd.Series(test).groupby(pd.Series(groups)).nunique()
    return bool((sides == 1).all())


def test_grouped_holdout_keeps_each_premise_on_one_side(snli_dev):
    premises, labels = snli_dev
    assert pd.Series(premises).duplicated().any()  # groups with several rows to keep together
    plain = holdout_mask(labels, test_size=0.2, random_state=0)
    assert not _no_group_straddles(premises, plain)  # without groups premises straddle
    test = holdout_mask(labels, test_size=0.2, groups=premises, random_state=0)
    assert _no_group_straddles(premises, test)
    for lab in np.unique(labels):  # still stratified, as closely as whole groups allow
        share = test[labels == lab].mean()
        assert abs(share - 0.2) < 0.01, (lab, share)
    np.testing.assert_array_equal(
        test, holdout_mask(labels, test_size=0.2, groups=premises, random_state=0))
    other = holdout_mask(labels, test_size=0.2, groups=premises, random_state=1)
    assert not np.array_equal(test, other)


def test_resolve_split_with_groups(snli_dev):
    premises, labels = snli_dev
    s = resolve_split(None, labels, groups=premises, test_size=0.3, random_state=4)
    assert s.source == "holdout" and "grouped" in s.description
    assert not (s.train & s.test).any() and (s.train | s.test).all()
    assert _no_group_straddles(premises, s.test)
    assert abs(s.test.mean() - 0.3) < 0.01
    # a usable split column wins over the hold-out, groups or not
    column = np.where(np.arange(len(labels)) % 2 == 0, "train", "dev")
    assert resolve_split(column, labels, groups=premises).source == "column"


def test_cv_folds_with_and_without_groups(snli_dev):
    premises, labels = snli_dev
    premises, labels = premises[:3000], labels[:3000]
    folds = cv_folds(labels, n_splits=4, groups=premises, random_state=0)
    tested = np.concatenate([test for _, test in folds])
    assert len(folds) == 4 and np.array_equal(np.sort(tested), np.arange(len(labels)))
    for train, test in folds:
        assert not set(premises[train]) & set(premises[test])
    # without groups: scikit-learn's StratifiedKFold, exactly
    expected = StratifiedKFold(4, shuffle=True, random_state=0).split(np.zeros(3000), labels)
    for (tr, te), (etr, ete) in zip(cv_folds(labels, n_splits=4, random_state=0), expected,
                                    strict=True):
        assert np.array_equal(tr, etr) and np.array_equal(te, ete)
    with pytest.raises(ValueError, match="groups"):
        cv_folds(labels, n_splits=4, groups=np.where(np.arange(3000) < 1500, "a", "b"))
    with pytest.raises(ValueError, match="n_splits"):
        cv_folds(labels, n_splits=1)


def test_holdout_split_description_says_grouped():
    labels = np.array(["a", "b"] * 10)
    groups = np.repeat(np.arange(5), 4)
    s = holdout_split(labels, groups=groups, test_size=0.4, random_state=0, reason="why")
    assert "grouped: 5 groups" in s.description and "(why)" in s.description
    assert _no_group_straddles(groups, s.test)
    assert s.test.sum() == 8  # two whole groups: exactly 4 of each label


def test_grouped_folds_are_balanced_in_size_and_labels(snli_dev):
    """The vectorised stratified group folds: groups never straddle, every row is tested
    once, sizes and label shares within a few per cent of the whole, seeded."""
    premises, labels = snli_dev
    folds = cv_folds(labels, n_splits=3, groups=premises, random_state=0)
    overall = pd.Series(labels).value_counts(normalize=True)
    tested = np.concatenate([test for _, test in folds])
    assert np.array_equal(np.sort(tested), np.arange(len(labels)))
    for train, test in folds:
        assert not set(premises[train]) & set(premises[test])
        assert abs(len(test) - len(labels) / 3) < 0.02 * len(labels)
        shares = pd.Series(labels[test]).value_counts(normalize=True)
        assert (shares.reindex(overall.index) - overall).abs().max() < 0.02
    again = cv_folds(labels, n_splits=3, groups=premises, random_state=0)
    other = cv_folds(labels, n_splits=3, groups=premises, random_state=1)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(folds, again, strict=True))
    assert not all(np.array_equal(a[1], b[1]) for a, b in zip(folds, other, strict=True))
    # one huge group and many small ones: the huge one is a fold of its own
    big = np.where(np.arange(3000) < 900, "big", np.arange(3000).astype(str))
    folds = cv_folds(labels[:3000], n_splits=3, groups=big, random_state=0)
    assert any(set(big[test]) >= {"big"} for _, test in folds)
