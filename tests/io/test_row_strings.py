"""Labels, statuses and groups without a Python str per row: the codes and shared strings the
measures build their tables from give what the per-row conversions gave."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from aflite_core.io._text_columns import compact_categorical, str_codes, string_array
from aflite_core.io.datasets import load_dataset
from aflite_core.measures.registry import MeasureContext

VALUES = [
    np.array(["b", "a", "b", "1"], dtype=object),
    np.array(["contradiction", "entailment", "neutral", "entailment"]),
    pd.Series(pd.array(["r", "s", None, "r"], dtype="string")),
    np.array([1, 2.0, "1", None, np.nan], dtype=object),  # 1 and "1" one text; None, nan two
    np.array([], dtype=object),
]


@pytest.mark.parametrize("values", VALUES, ids=range(len(VALUES)))
def test_str_codes_are_unique_of_the_texts(values):
    texts = np.asarray(values, dtype=object).astype(str)
    classes, inverse = np.unique(texts, return_inverse=True)
    codes, got = str_codes(values)
    assert got.dtype == classes.dtype and got.tolist() == classes.tolist()
    assert codes.tolist() == inverse.ravel().tolist()
    column = string_array(values)
    expected = pd.array(texts, dtype="string")
    pd.testing.assert_extension_array_equal(column, expected)
    # what the column is made from: one str object per distinct text, not one per row
    assert len({id(v) for v in got.astype(object)[codes]}) == len(set(codes.tolist()))


def _context(scores: pd.DataFrame) -> MeasureContext:
    frame = pd.DataFrame({"premise": ["p0", "p0", "p1", "p2", "p3", "p3"],
                          "hypothesis": ["h0", "h1", "h2", "", "h4", "h5"],
                          "label": ["a", "b", "a", "b", "b", "a"]})
    dataset = load_dataset(frame, name="ctx", group="premise")
    included = dataset.row_ids()  # row 3 (empty text) is excluded
    rep = SimpleNamespace(X=np.zeros((len(included), 2)), row_ids=included,
                          warmup_mask=np.zeros(len(included), dtype=bool))
    filterable = np.array([True, True, False, True, True])  # 5 included rows, one warm-up
    return MeasureContext(dataset=dataset, representation=rep, filterable=filterable,
                          labels=dataset.label_objects(), keep=np.ones(4, dtype=bool),
                          scores=scores, retained_ids=np.empty(0), random_state=0)


@pytest.mark.parametrize("dtype", ["string", "category"])
def test_statuses_by_position_and_by_id(dtype):
    """The filterable rows' statuses from the scores' positions (the pipeline's scores: every
    frame row in frame order), looked up by row id when the scores are in another order; a
    row missing from them reads <NA>; the groups are codes of the same partition. The same
    from Arrow strings and from categorical codes (the pipeline's scores hold those)."""
    status = ["retained", "removed", "warmup", "excluded", "removed", "retained"]
    scores = pd.DataFrame({"row_id": np.arange(6),
                           "status": pd.Series(status, dtype=dtype).array})
    ctx = _context(scores)
    expected = ["retained", "removed", "removed", "retained"]  # rows 0, 1, 4, 5
    assert ctx.score_rows().tolist() == [0, 1, 4, 5]
    assert ctx.statuses().tolist() == expected
    assert ctx.statuses(np.array([3, 0])).tolist() == ["retained", "retained"]
    assert len({id(s) for s in ctx.statuses()}) == 2
    shuffled = scores.iloc[[5, 3, 1, 0, 2, 4]].reset_index(drop=True)
    assert _context(shuffled).statuses().tolist() == expected
    assert _context(shuffled.iloc[1:]).statuses().tolist() == [*expected[:3], "<NA>"]
    groups = ctx.groups
    assert groups.dtype == np.int64
    # rows 0 and 1 share premise p0, rows 4 and 5 premise p3
    assert groups[0] == groups[1] and groups[2] == groups[3] and groups[0] != groups[2]


@pytest.mark.parametrize("seed", range(4))
def test_compact_categorical_is_the_categorical_of_the_strings(seed):
    """From codes, the categorical pd.Categorical makes of the strings: the names present,
    sorted (unsorted names, absent ones, an empty name among them)."""
    rng = np.random.default_rng(seed)
    names = np.array(["medium", "", "ambiguous", "Zeta", "easy", "hard"], dtype=object)
    codes = rng.choice([0, 1, 2, 4], size=50).astype(np.int8)  # "Zeta", "hard" absent
    got = compact_categorical(codes, names)
    _assert_same_categorical(got, pd.Categorical(names[codes]))
    assert got.codes.dtype == np.int8
    assert compact_categorical(np.array([], dtype=np.int8), names).tolist() == []
    with pytest.raises(ValueError, match=r"expected values in \[0, 6\)"):
        compact_categorical(np.array([6]), names)


def _assert_same_categorical(got: pd.Categorical, expected: pd.Categorical) -> None:
    assert got.categories.tolist() == expected.categories.tolist()
    assert got.codes.tolist() == expected.codes.tolist() and got.dtype == expected.dtype


def _every_row_context(scores: pd.DataFrame) -> MeasureContext:
    """Every row included and filterable: the scores' rows are the measures' rows."""
    frame = pd.DataFrame({"hypothesis": [f"h{i}" for i in range(5)],
                          "label": ["neutral", "entailment", "neutral", "contradiction",
                                    "entailment"]})
    dataset = load_dataset(frame, name="all")
    rep = SimpleNamespace(X=np.zeros((5, 2)), row_ids=dataset.row_ids(),
                          warmup_mask=np.zeros(5, dtype=bool))
    return MeasureContext(dataset=dataset, representation=rep,
                          filterable=np.ones(5, dtype=bool), labels=dataset.label_objects(),
                          keep=np.ones(5, dtype=bool), scores=scores,
                          retained_ids=np.empty(0), random_state=0)


@pytest.mark.parametrize("every", [False, True], ids=["some rows", "every row"])
@pytest.mark.parametrize("dtype", ["category", "object"])
def test_label_codes_are_str_codes_of_the_labels(every, dtype):
    """The filterable rows' label codes from the scores' categorical (a label that only an
    excluded row has is not a class) are str_codes of ctx.y, for every row and for some;
    from a column of strings, the same by str_codes. The statuses' categorical is the one
    pd.Categorical makes of ctx.statuses()."""
    if every:
        labels = ["neutral", "entailment", "neutral", "contradiction", "entailment"]
        status = ["retained", "removed", "removed", "retained", "retained"]
        scores = pd.DataFrame({"row_id": np.arange(5), "status": pd.Categorical(status),
                               "label": pd.Series(labels, dtype=dtype).array})
        ctx = _every_row_context(scores)
        assert ctx._score_positions() is None  # no positions made
    else:
        labels = ["a", "b", "a", "-", "b", "a"]  # row 3 (excluded) alone has "-"
        status = ["retained", "removed", "warmup", "excluded", "removed", "retained"]
        scores = pd.DataFrame({"row_id": np.arange(6), "status": pd.Categorical(status),
                               "label": pd.Series(labels, dtype=dtype).array})
        ctx = _context(scores)
    for rows in (None, np.array([3, 0, 1]), np.array([1, 1]), np.array([], dtype=int)):
        codes, classes = ctx.label_codes(rows)
        y = ctx.y if rows is None else ctx.y[rows]
        expected_codes, expected_classes = str_codes(y)
        assert classes.tolist() == expected_classes.tolist() and classes.dtype.kind == "U"
        assert codes.tolist() == expected_codes.tolist()
        assert codes.itemsize == 1
        _assert_same_categorical(ctx.scores_categorical("status", rows),
                                 pd.Categorical(ctx.statuses(rows)))
        at = ctx.score_rows(rows)
        assert at.tolist() == (ctx.score_rows() if rows is None
                               else ctx.score_rows()[rows]).tolist()
    with pytest.raises(IndexError):
        ctx.score_rows(np.array([len(ctx.y)]))
    # the representation's rows (the map's: warm-up rows too, never excluded ones)
    shown = [0, 1, 2, 3, 4] if every else [0, 1, 2, 4, 5]
    _assert_same_categorical(ctx.scores_categorical("status", included=True),
                             pd.Categorical(np.asarray(status, dtype=object)[shown]))
    if dtype == "category":  # (strings: None, the caller converts them)
        _assert_same_categorical(ctx.scores_categorical("label", included=True),
                                 pd.Categorical(np.asarray(labels, dtype=object)[shown]))
    else:
        assert ctx.scores_categorical("label", included=True) is None
