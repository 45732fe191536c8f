"""Removal rate per value of any column: counts, intervals and z on planted data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aflite_core.runs.breakdown import breakdown_columns, removal_breakdown


@pytest.fixture
def planted() -> pd.DataFrame:
    """600 filtered rows in three genres; 'fiction' loses 60 %, the others 20 %; plus
    warm-up rows that must not count."""
    rng = np.random.default_rng(0)
    genre = np.repeat(["fiction", "news", "travel"], 200)
    removed = np.concatenate([rng.random(200) < 0.6, rng.random(400) < 0.2])
    status = np.where(removed, "removed", "retained")
    table = pd.DataFrame({"status": status, "predictability": 0.5, "removal_round": 1,
                          "genre": genre, "hypothesis": [f"text {i}" for i in range(600)]})
    warm = pd.DataFrame({"status": ["warmup"] * 50, "predictability": np.nan,
                         "removal_round": -1, "genre": "fiction",
                         "hypothesis": [f"w {i}" for i in range(50)]})
    return pd.concat([table, warm], ignore_index=True)


def test_counts_rates_and_intervals_by_hand(planted):
    out = removal_breakdown(planted, "genre").set_index("value")
    filtered = planted[planted["status"] != "warmup"]
    for genre in ("fiction", "news", "travel"):
        rows = filtered[filtered["genre"] == genre]
        k, n = int((rows["status"] == "removed").sum()), len(rows)
        assert out.loc[genre, "rows"] == n == 200  # warm-up rows are not counted
        assert out.loc[genre, "removed"] == k and out.loc[genre, "retained"] == n - k
        assert out.loc[genre, "removal_rate"] == pytest.approx(k / n)
        assert out.loc[genre, "ci_low"] < k / n < out.loc[genre, "ci_high"]
    base = (filtered["status"] == "removed").mean()
    assert np.allclose(out["base_rate"], base)
    # the planted genre stands out; the others sit below the base rate
    assert out.loc["fiction", "z"] > 5 and out.loc["fiction", "ci_low"] > base
    assert (out.loc[["news", "travel"], "z"] < 0).all()
    # z by hand for fiction against the rest
    k, n = out.loc["fiction", "removed"], 200
    rest_k, rest_n = out["removed"].sum() - k, 400
    pooled = (k + rest_k) / 600
    z = (k / n - rest_k / rest_n) / np.sqrt(pooled * (1 - pooled) * (1 / n + 1 / rest_n))
    assert out.loc["fiction", "z"] == pytest.approx(z)


def test_offered_columns_have_few_values_and_missing_values_form_a_group(planted):
    planted.loc[:9, "genre"] = None
    assert breakdown_columns(planted, exclude=["hypothesis"]) == ["genre"]
    assert breakdown_columns(planted) == ["genre"]  # 600 distinct texts: too many values
    out = removal_breakdown(planted, "genre")
    assert "(missing)" in set(out["value"]) and out["rows"].sum() == 600
    with pytest.raises(ValueError, match="expected one of the run's columns"):
        removal_breakdown(planted, "nope")
    with pytest.raises(ValueError, match="status"):
        removal_breakdown(planted.drop(columns="status"), "genre")


def test_offered_columns_are_those_of_the_text_values_whatever_the_dtype():
    """The columns offered are counted on the values as text (``astype(str)``), also when a
    shortcut decides from the raw values: numbers that differ only as text (-0.0 and 0.0),
    mixed objects that merge as text (1 and "1"), many integers, missing values."""
    n = 600
    rng = np.random.default_rng(3)
    table = pd.DataFrame({
        "status": rng.choice(["retained", "removed"], n),
        "signed_zero": rng.choice([-0.0, 0.0], n),            # 1 raw value, 2 as text
        "merging": rng.choice(np.array([1, "1"], dtype=object), n),  # 2 raw, 1 as text
        "many_ints": np.arange(n),                             # too many
        "few_ints": rng.integers(0, 4, n),
        "strings": pd.array(rng.choice(["a", "b", None], n), dtype="string"),
        "floats_many": rng.random(n),
        "objects_many": np.array([i % 60 if i % 2 else str(i % 60) for i in range(n)],
                                 dtype=object),                # 60 raw + text merge to 60
    })

    def reference(frame: pd.DataFrame, max_values: int) -> list[str]:
        rows = frame[frame["status"].isin(["retained", "removed"])]
        return [c for c in frame.columns if c != "status"
                and 2 <= rows[c].astype(str).nunique(dropna=False) <= max_values]

    for max_values in (2, 3, 50, 70):
        assert breakdown_columns(table, max_values=max_values) == reference(table, max_values)
    assert "signed_zero" in breakdown_columns(table) and "merging" not in breakdown_columns(
        table)
