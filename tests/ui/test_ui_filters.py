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


def _pandas_mask(table: pd.DataFrame, flt: filters.RowFilter) -> np.ndarray:
    """The filter written directly in pandas, conversion by conversion (the reference the
    decoded-column index must agree with)."""
    mask = np.ones(len(table), dtype=bool)
    if flt.statuses:
        mask &= table["status"].astype(str).isin(list(flt.statuses)).to_numpy()
    if flt.labels:
        mask &= table[flt.label_column].astype(str).str.strip().isin(flt.labels).to_numpy()
    if flt.predictability is not None:
        pred = table["predictability"].to_numpy(dtype=float)
        lo, hi = flt.predictability
        mask &= np.isfinite(pred) & (pred >= lo) & (pred <= hi)
    if flt.rounds is not None:
        rounds = pd.to_numeric(table["removal_round"]).to_numpy(dtype=float)
        mask &= (rounds >= flt.rounds[0]) & (rounds <= flt.rounds[1])
    if flt.row_ids is not None:
        mask &= table.index.astype(str).isin([str(i) for i in flt.row_ids])
    for column, accepted in flt.values.items():
        mask &= table[column].astype(str).isin(accepted).to_numpy()
    if flt.search:
        text = table["hypothesis"].astype(str)
        mask &= (text.str.contains(flt.search, regex=True, case=flt.case) if flt.regex
                 else text.str.lower().str.contains(flt.search.lower(), regex=False)
                 ).to_numpy()
    return mask


@pytest.mark.parametrize("flt", [
    filters.RowFilter(statuses=("removed",), labels=("neutral", "entailment"),
                      label_column="label"),
    filters.RowFilter(predictability=(0.2, 0.7), rounds=(1, 3)),
    filters.RowFilter(search="DOG", search_columns=["hypothesis"]),
    filters.RowFilter(search=r"cat 1\d\b", regex=True, case=True,
                      search_columns=["hypothesis"], statuses=("retained",)),
    filters.RowFilter(row_ids=[*(str(i) for i in range(1000, 1500, 3)), 1010, "no-such-row"],
                      values={"label": [" neutral"]}),
])
def test_a_shared_index_gives_the_pandas_answer_every_time(table, flt):
    """One RowIndex per run serves every session and interaction: its decoded columns and
    kept search masks give what the conversions in pandas give, the first time and again."""
    from aflite_core.runs._row_index import RowIndex

    table = table.assign(label=" " + table["label"])  # labels are compared stripped
    index = RowIndex(table)
    expected = _pandas_mask(table, flt)
    assert 0 < expected.sum() < len(table)
    for _ in range(2):  # decoded (and searched) once, then reused
        assert filters.mask_of(table, flt, index).tolist() == expected.tolist()
    assert filters.mask_of(table, flt).tolist() == expected.tolist()


def test_the_index_keeps_the_last_searches_and_orders(table):
    from aflite_core.runs import _row_index as row_index

    index = row_index.RowIndex(table)
    first = index.search(["hypothesis"], "dog", regex=False, ignore_case=True)
    assert index.search(["hypothesis"], "dog", regex=False, ignore_case=True) is first
    assert not first.flags.writeable  # shared by sessions: nobody may change it in place
    for i in range(row_index.SEARCH_CACHE):
        index.search(["hypothesis"], f"cat {i}", regex=False, ignore_case=True)
    again = index.search(["hypothesis"], "dog", regex=False, ignore_case=True)
    assert again is not first and again.tolist() == first.tolist()  # evicted, recomputed
    order = index.order("predictability", ascending=False)
    assert index.order("predictability", ascending=False) is order
    assert index.max_number("removal_round") == float(table["removal_round"].max())
    page = index.page(order, 10, 15, ["hypothesis"])
    assert page.index.tolist() == table.index[order[10:15]].tolist()
    assert list(page.columns) == ["hypothesis"]


def test_a_page_of_chunked_arrow_columns_is_the_rows_iloc_gives():
    """RowIndex.page takes Arrow columns of several chunks chunk by chunk (a 1M-row run's
    texts come in several chunks); the page must be exactly ``iloc``'s, in any order."""
    import pyarrow as pa

    from aflite_core.runs._row_index import RowIndex

    rng = np.random.default_rng(3)
    n = 1_000
    texts = [f"text {i}" if i % 11 else None for i in range(n)]
    chunked = pa.chunked_array([texts[:300], texts[300:310], texts[310:]],
                               type=pa.large_string())
    labels = rng.choice(["a", "b"], n).tolist()
    table = pd.DataFrame({
        "hypothesis": pd.ArrowDtype(pa.large_string()).__from_arrow__(chunked),
        "label": pd.StringDtype("pyarrow").__from_arrow__(
            pa.chunked_array([labels[:500], labels[500:]])),
        "predictability": rng.random(n),
    }, index=pd.Index(rng.permutation(n) + 7, name="row_id"))
    index = RowIndex(table)
    assert index._chunked("hypothesis", table["hypothesis"]).num_chunks == 3
    positions = rng.permutation(n)
    for start, stop, columns in ((0, 50, None), (40, 340, ["label", "hypothesis"]),
                                 (990, 1_050, None), (2_000, 2_050, None)):
        expected = table.iloc[positions[start:stop]]
        if columns is not None:
            expected = expected[columns]
        pd.testing.assert_frame_equal(index.page(positions, start, stop, columns), expected)
