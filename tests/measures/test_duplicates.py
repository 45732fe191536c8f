"""Exact (normalised text) and near (cosine on Φ) duplicates, before vs after."""

from __future__ import annotations

import json

import numpy as np
import pytest

from aflite_core.measures.duplicates import find_duplicates, near_duplicate_pairs, normalize_text


def test_normalize_text():
    assert normalize_text("  A man,  riding a BIKE! ") == "a man riding a bike"
    assert normalize_text("A\tman\nriding") == "a man riding"
    assert normalize_text("don't") == normalize_text("DON'T") == "don t"
    assert normalize_text("Ｆｕｌｌ‐width") == "full width"  # NFKC + Unicode dash
    assert normalize_text(None) == ""


def test_exact_duplicates_before_and_after():
    hyps = ["A dog runs.", "a dog  RUNS", "A cat sleeps", "a dog runs!", "A cat sleeps.", "Bird"]
    prem = ["P1", "p1", "P2", "P9", "P2", "P3"]
    kept = np.array([True, False, True, True, True, True])
    # hypothesis only: {0, 1, 3} and {2, 4}
    rep = find_duplicates(hyps, retained_mask=kept, row_ids=np.arange(10, 16))
    s = rep.summary.set_index(["scope", "kind"])
    before, after = s.loc[("before", "exact")], s.loc[("after", "exact")]
    assert (before["n_groups"], before["n_rows_in_groups"], before["n_duplicate_rows"],
            before["n_pairs"]) == (2, 5, 3, 3 + 1)
    # row 11 removed: {10, 13} and {12, 14} remain
    assert (after["n_rows"], after["n_groups"], after["n_duplicate_rows"],
            after["n_pairs"]) == (5, 2, 2, 2)
    assert after["share"] == pytest.approx(2 / 5)
    groups = rep.exact_groups
    assert groups.groupby("group")["row_id"].apply(list).tolist() == [[10, 11, 13], [12, 14]]
    assert groups.loc[groups["row_id"] == 11, "retained"].item() is False
    # with premises the pair must match: row 3 has another premise
    pairs = find_duplicates(hyps, premises=prem).summary.set_index(["scope", "kind"])
    assert pairs.loc[("before", "exact"), "n_duplicate_rows"] == 2
    assert set(rep.summary["kind"]) == {"exact"}  # no Φ, no near duplicates
    json.dumps(rep.to_dict())


def test_near_duplicates_planted():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 24)).astype(np.float32)
    X[100] = X[7] * 2.0  # same direction: cosine 1
    X[200] = X[7] + 0.02 * rng.normal(size=24).astype(np.float32)
    X[250] = X[40] + 0.02 * rng.normal(size=24).astype(np.float32)
    kept = np.ones(300, bool)
    kept[7] = False
    rep = find_duplicates([f"text {i}" for i in range(300)], X=X, retained_mask=kept,
                          threshold=0.99)
    pairs = rep.near_pairs
    assert sorted(zip(pairs["row_id_a"], pairs["row_id_b"], strict=True)) == [
        (7, 100), (7, 200), (40, 250), (100, 200)]
    assert pairs["similarity"].min() >= 0.99
    s = rep.summary.set_index(["scope", "kind"])
    near_before, near_after = s.loc[("before", "near")], s.loc[("after", "near")]
    assert (near_before["n_pairs"], near_before["n_groups"], near_before["n_rows_in_groups"],
            near_before["n_duplicate_rows"]) == (4, 2, 5, 3)
    # removing row 7 leaves {100, 200} and {40, 250}
    assert (near_after["n_pairs"], near_after["n_groups"], near_after["n_duplicate_rows"]) == (
        2, 2, 2)
    assert s.loc[("before", "exact"), "n_groups"] == 0


def test_near_duplicate_pairs_match_brute_force():
    rng = np.random.default_rng(1)
    base = rng.normal(size=(40, 8))
    X = np.repeat(base, 3, axis=0) + 0.15 * rng.normal(size=(120, 8))
    i, j, sim = near_duplicate_pairs(X, threshold=0.9, block_size=7)
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    S = Xn @ Xn.T
    bi, bj = np.nonzero(np.triu(S >= 0.9, k=1))
    assert sorted(zip(i.tolist(), j.tolist(), strict=True)) == sorted(
        zip(bi.tolist(), bj.tolist(), strict=True))
    np.testing.assert_allclose(sim, S[i, j], atol=1e-5)
    assert len(i) > 40


def test_validation_and_pair_cap():
    X = np.ones((20, 3), np.float32)
    with pytest.raises(ValueError, match="max_pairs"):
        near_duplicate_pairs(X, threshold=0.5, max_pairs=10)
    with pytest.raises(ValueError, match="threshold"):
        near_duplicate_pairs(X, threshold=0)
    with pytest.raises(TypeError, match="threshold: expected a number in"):
        near_duplicate_pairs(X, threshold="0.9")
    with pytest.raises(ValueError, match="retained_mask"):
        find_duplicates(["a"] * 20, retained_mask=np.ones(19, bool))
    with pytest.raises(ValueError, match="one row per text"):
        find_duplicates(["a"] * 19, X=X)
