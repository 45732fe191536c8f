"""The label-shift measure (the example of a measure added through the registry)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from aflite_core.measures import label_shift, registry


def test_hand_computed_shift_of_a_tiny_filter():
    # before: a a a a b b (2/3, 1/3); the filter keeps a a b b -> (1/2, 1/2)
    labels = np.array(["a", "a", "a", "a", "b", "b"])
    keep = np.array([True, True, False, False, True, True])
    table = label_shift.label_shift_table(labels, keep).set_index("label")
    assert table.loc["a", ["before", "after"]].tolist() == [4, 2]
    assert table.loc["a", "change_pp"] == pytest.approx(100 * (1 / 2 - 2 / 3))
    assert table.loc["a", "share_removed"] == pytest.approx(0.5)
    assert table.loc["b", "share_removed"] == pytest.approx(0.0)
    assert table["tvd"].iloc[0] == pytest.approx(1 / 6)
    p, q = np.array([2 / 3, 1 / 3]), np.array([1 / 2, 1 / 2])
    m = (p + q) / 2
    jsd = 0.5 * (p * np.log(p / m)).sum() + 0.5 * (q * np.log(q / m)).sum()
    assert table["jsd"].iloc[0] == pytest.approx(jsd)


def test_a_label_removed_entirely_and_per_split_blocks():
    labels = np.array(["a", "a", "b", "b", "c", "c"])
    keep = np.array([True, True, True, True, False, False])
    splits = np.array(["train", "train", "train", "test", "test", "test"])
    table = label_shift.label_shift_table(labels, keep, splits)
    assert list(pd.unique(table["split"])) == ["all", "train", "test"]
    overall = table[table["split"] == "all"].set_index("label")
    assert overall.loc["c", "after"] == 0 and overall.loc["c", "share_removed"] == 1.0
    test = table[table["split"] == "test"].set_index("label")
    assert test.loc["a", "before"] == 0 and math.isnan(test.loc["a", "share_removed"])
    assert test["share_after"].sum() == pytest.approx(1.0)


def test_labels_ordered_by_count_ties_as_they_first_appear_any_label_type():
    """The table's labels are value_counts' order (most rows first, ties in order of first
    appearance) and its texts (ints, None and NaN as astype(str) writes them), counted from
    codes; splits likewise in order of first appearance."""
    labels = np.array([7, None, "z", "x", "z", None, "x", 7, None, float("nan")], dtype=object)
    keep = np.array([True, False, True, True, False, True, True, False, True, True])
    splits = np.array(["dev", None, "train", "dev", "train", "dev", None, "train", "dev",
                       "dev"], dtype=object)
    table = label_shift.label_shift_table(labels, keep, splits)
    overall = table[table["split"] == "all"]
    assert overall["label"].tolist() == ["None", "7", "z", "x", "nan"]  # 3, then 2, 2, 2, 1
    assert overall["before"].tolist() == [3, 2, 2, 2, 1]
    assert overall["after"].tolist() == [2, 1, 1, 2, 1]
    assert list(pd.unique(table["split"])) == ["all", "dev", "None", "train"]
    dev = table[table["split"] == "dev"].set_index("label")
    assert dev["before"].to_dict() == {"None": 2, "7": 1, "z": 0, "x": 1, "nan": 1}


def test_no_change_is_zero_shift():
    labels = np.array(list("aabbcc"))
    keep = np.array([True, False] * 3)
    table = label_shift.label_shift_table(labels, keep)
    assert table["tvd"].iloc[0] == 0 and table["jsd"].iloc[0] == pytest.approx(0.0)


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="keep: expected 3 values"):
        label_shift.label_shift_table(np.array(["a", "b", "a"]), np.array([True, False]))


def test_it_is_registered_on_by_default():
    measure = registry.get("label_shift")
    assert measure is label_shift.MEASURE and measure.default
    assert measure.files == (label_shift.FILE,) and measure.exports == {"label_shift":
                                                                        label_shift.FILE}


class _Run:
    """The two methods of a run folder a measure's figures read."""

    def __init__(self, table: pd.DataFrame | None) -> None:
        self.table = table

    def has(self, filename: str) -> bool:
        return self.table is not None and filename == label_shift.FILE

    def read_parquet(self, filename: str) -> pd.DataFrame | None:
        return self.table if filename == label_shift.FILE else None


def test_its_figure_shows_each_labels_share_before_and_after():
    labels = np.array(["a"] * 6 + ["b"] * 4)
    keep = np.array([True] * 2 + [False] * 4 + [True] * 4)
    table = label_shift.label_shift_table(labels, keep)
    (fig,) = label_shift.MEASURE.draw(_Run(table))
    before, after = fig.data
    assert list(before.x) == ["a", "b"] and list(after.x) == ["a", "b"]
    np.testing.assert_allclose(before.y, [60.0, 40.0])
    np.testing.assert_allclose(after.y, [100 * 2 / 6, 100 * 4 / 6])
    assert "total variation 0.267" in fig.layout.title.text
    assert label_shift.MEASURE.draw(_Run(None)) == []  # not computed: nothing drawn
