"""The Explore page's filtering and sorting helpers (ui.filters) on a planted table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ui import filters


@pytest.fixture
def table() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 500
    pred = rng.random(n)
    pred[rng.choice(n, 40, replace=False)] = np.nan  # never scored
    pred[:50] = 0.5  # ties: the order among them must stay stable
    frame = pd.DataFrame({
        "status": rng.choice(["retained", "removed"], n),
        "predictability": pred,
        "removal_round": rng.integers(-1, 5, n),
        "hypothesis": [f"a dog number {i}" if i % 7 == 0 else f"a cat {i}" for i in range(n)],
        "label": rng.choice(["entailment", "neutral", "contradiction"], n),
    }, index=pd.Index(rng.permutation(n) + 1000, name="row_id"))
    return frame


@pytest.mark.parametrize("column", ["predictability", "removal_round", "hypothesis", "row_id"])
@pytest.mark.parametrize("ascending", [True, False])
def test_cached_sort_order_matches_sorting_the_filtered_rows(table, column, ascending):
    flt = filters.RowFilter(search="dog", statuses=("removed",))
    mask = filters.mask_of(table, flt)
    assert 0 < mask.sum() < len(table)
    order = filters.sort_order(table, column, ascending=ascending)
    fast = table.iloc[filters.sorted_positions(order, mask)]
    slow = filters.sort_rows(filters.apply(table, flt), column, ascending=ascending)
    pd.testing.assert_frame_equal(fast, slow)


def test_missing_predictability_sorts_last_both_ways(table):
    n_missing = int(table["predictability"].isna().sum())
    assert n_missing > 10
    for ascending in (True, False):
        order = filters.sort_order(table, "predictability", ascending=ascending)
        ordered = table["predictability"].to_numpy()[order]
        assert np.isnan(ordered[-n_missing:]).all() and not np.isnan(ordered[:-n_missing]).any()


def test_a_catastrophic_regex_is_answered_not_backtracked():
    """``^(a+)+$`` on 'aaa...a!' takes 2^n steps in Python's re (the Explore search once
    froze the whole server for minutes); RE2 answers in linear time, and correctly."""
    table = pd.DataFrame({"hypothesis": ["a" * 40 + "!", "a" * 40, "b"],
                          "status": ["retained", "removed", "retained"]})
    flt = filters.RowFilter(search=r"^(a+)+$", regex=True, search_columns=["hypothesis"])
    assert filters.mask_of(table, flt).tolist() == [False, True, False]
    flt = filters.RowFilter(search=r"^(\w+\s?)+$", regex=True, search_columns=["hypothesis"])
    assert filters.mask_of(table, flt).tolist() == [False, True, True]


def test_search_case_whole_word_and_unsupported_patterns():
    table = pd.DataFrame({"hypothesis": ["A dog runs", "dogs bark", "The DOG.", "hotdog"],
                          "status": ["retained"] * 4})

    def hits(**kwargs):
        flt = filters.RowFilter(search_columns=["hypothesis"], **kwargs)
        return filters.mask_of(table, flt).tolist()

    assert hits(search="dog") == [True, True, True, True]
    assert hits(search="dog", case=True) == [True, True, False, True]
    assert hits(search="dog", whole_word=True) == [True, False, True, False]
    assert hits(search="d.g", regex=False) == [False, False, False, False]  # literal dot
    assert hits(search="d.g", regex=True, whole_word=True) == [True, False, True, False]
    with pytest.raises(filters.SearchError, match="RE2 syntax"):
        hits(search=r"(a)\1", regex=True)
    with pytest.raises(filters.SearchError, match="not a valid regular expression"):
        hits(search="(", regex=True)
