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
