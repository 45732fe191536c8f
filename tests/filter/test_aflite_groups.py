"""AFLite with groups: every partition trains on whole groups."""

from __future__ import annotations

import numpy as np
import pytest

from aflite_core.filter._aflite import AFLite, _group_codes
from aflite_core.filter._aflite_rounds import _draw_round
from aflite_core.filter._backends import RowBlocks


def _twins(n_groups=300, d=64, seed=0):
    """Pairs of near-identical rows with one label, and no signal a linear model can use
    across pairs: a held-out row is predictable only from its twin in the training rows."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_groups, d)).astype(np.float32)
    X = np.repeat(centres, 2, axis=0) + 0.01 * rng.normal(size=(2 * n_groups, d)).astype(
        np.float32)
    y = np.repeat(rng.integers(0, 2, n_groups), 2)
    groups = np.repeat(np.arange(n_groups), 2)
    return X, y, groups


def test_no_partition_splits_a_group():
    X, y, groups = _twins()
    codes = _group_codes(groups, len(y))
    blocks = RowBlocks(y.astype(np.int64), 2, 10_000)
    alive = np.ones(len(y), dtype=bool)
    alive[::7] = False  # a group may have lost a row: the rest still stays together
    drawn = _draw_round(np.random.default_rng(0), blocks, alive,
                        {"m": 8, "train": 200}, codes)
    train = np.concatenate(drawn["train_w"], axis=1)  # (m, rows) in working-copy order
    rows = np.concatenate(blocks.rows)
    for j in range(train.shape[0]):
        in_train = np.zeros(len(y), dtype=bool)
        in_train[rows[train[j]]] = True
        assert not (in_train & ~alive).any()
        for g in np.unique(groups[alive]):
            members = np.flatnonzero((groups == g) & alive)
            assert len(set(in_train[members])) == 1, (j, g)
        assert 150 <= in_train.sum() <= 200  # whole groups up to t


def test_a_large_group_does_not_end_a_draw_short_of_t():
    """One group of 150 rows among 300 pairs, t = 200: a partition that meets the large group
    after it has taken some pairs passes over it and fills up with pairs (before, it stopped
    there: training sizes down to a few rows)."""
    groups = np.r_[np.zeros(150, dtype=np.int64), np.repeat(np.arange(1, 301), 2)]
    y = np.random.default_rng(1).integers(0, 2, len(groups))
    blocks = RowBlocks(y.astype(np.int64), 2, 10_000)
    drawn = _draw_round(np.random.default_rng(0), blocks, np.ones(len(y), dtype=bool),
                        {"m": 32, "train": 200}, groups)
    train = np.concatenate(drawn["train_w"], axis=1)
    rows = np.concatenate(blocks.rows)
    sizes = train.sum(axis=1)
    assert sizes.min() >= 199 and sizes.max() <= 200, sizes
    with_large = [bool(train[j][np.isin(rows, np.arange(150))].any()) for j in range(32)]
    assert 0 < sum(with_large) < 32  # the large group trains some partitions, not all
    for j in range(32):  # and stays whole
        assert len(set(train[j][np.isin(rows, np.arange(150))])) == 1


def test_grouped_partitions_do_not_score_a_row_by_its_twin():
    X, y, groups = _twins()
    params = {"target_size": 300, "n_partitions": 16, "train_size": 300, "slice_size": 30,
              "tau": 0.75, "random_state": 0}
    plain = AFLite(**params).fit(X, y)
    grouped = AFLite(**params).fit(X, y, groups=groups)
    # without groups a held-out row is helped by its twin among the training rows (round 1
    # scores above chance, measured 0.605); with groups it is scored at chance (0.514)
    first_plain = plain.history_["score_mean"].iloc[0]
    first_grouped = grouped.history_["score_mean"].iloc[0]
    assert first_plain > first_grouped + 0.05
    assert abs(first_grouped - 0.5) < 0.05
    assert (~grouped.keep_mask_).sum() < (~plain.keep_mask_).sum()


def test_groups_must_match_the_rows():
    X, y, groups = _twins(20)
    with pytest.raises(ValueError, match="groups: expected 40 values"):
        AFLite(target_size=20, n_partitions=4).fit(X, y, groups=groups[:-1])


def test_the_second_pass_takes_the_fitting_groups_in_order_until_one_does_not_fit():
    from aflite_core.filter._aflite_rounds import _fitting

    sizes = np.array([5, 1, 4, 2, 1, 1])
    rest = np.arange(6)
    # room 3: groups of at most 3 rows in order are 1 (1 row), 3 (2), 4 (1): the first two
    # fill it exactly
    assert _fitting(rest, sizes, 3).tolist() == [1, 3]
    assert _fitting(rest, sizes, 2, chunk=2).tolist() == [1, 4]  # 3 would overflow the room
    assert _fitting(rest, sizes, 9).tolist() == [0, 1]  # 5 + 1 fit, the 4 after would not
    assert _fitting(rest[:0], sizes, 3).tolist() == []
