"""Data-map regions calibrated to the data: shares of the observed distribution, bounded by
chance 1/K, so that on any dataset hard and ambiguous are minorities and hard gathers the
mislabelled rows (planted flips) instead of most of the data."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from aflite_core.filter.aflite import AFLite
from aflite_core.measures import datamap


def test_thresholds_are_shares_of_the_values_bounded_by_chance():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.0, 1.0, 10_000)
    var = rng.uniform(0.0, 0.3, 10_000)
    t = datamap.calibrated_thresholds(conf, var, n_classes=3, hard_share=0.1,
                                      ambiguous_share=0.2, easy_share=0.3)
    assert t["hard_confidence"] == pytest.approx(0.1, abs=0.02)  # below chance 1/3
    assert t["easy_confidence"] == pytest.approx(0.7, abs=0.02)  # above chance
    assert t["ambiguous_variability"] == pytest.approx(0.24, abs=0.01)
    regions = pd.Series(datamap.assign_regions(conf, var, **t)).value_counts(normalize=True)
    assert regions["ambiguous"] == pytest.approx(0.2, abs=0.02)
    assert regions["hard"] <= 0.1
    assert regions["easy"] <= 0.3
    # every row above chance: no row is hard, however low its quantile
    high = 0.5 + conf / 2
    t = datamap.calibrated_thresholds(high, var, n_classes=2)
    assert t["hard_confidence"] == 0.5
    assert not (datamap.assign_regions(high, var, **t) == "hard").any()
    # every row below chance: none is easy
    low = conf / 4
    t = datamap.calibrated_thresholds(low, var, n_classes=3)
    assert t["easy_confidence"] == pytest.approx(1 / 3)
    assert not (datamap.assign_regions(low, var, **t) == "easy").any()
    # variability that never swings: no row is ambiguous
    t = datamap.calibrated_thresholds(conf, var / 100, n_classes=3)
    assert t["ambiguous_variability"] == datamap.MIN_AMBIGUOUS_VARIABILITY
    assert not (datamap.assign_regions(conf, var / 100, **t) == "ambiguous").any()


def test_bad_shares_and_classes_are_refused_naming_them():
    conf, var = np.array([0.2, 0.8]), np.array([0.1, 0.1])
    with pytest.raises(ValueError, match="easy_share: expected at most 1 - hard_share"):
        datamap.calibrated_thresholds(conf, var, n_classes=3, hard_share=0.5, easy_share=0.6)
    with pytest.raises(ValueError, match="hard_share"):
        datamap.calibrated_thresholds(conf, var, n_classes=3, hard_share=1.5)
    with pytest.raises(ValueError, match="n_classes: expected an int of at least 2, got 1"):
        datamap.calibrated_thresholds(conf, var, n_classes=1)


def test_chance_counts_labels_or_choices_per_question():
    assert datamap.n_classes_of(["a", "b", "c", "a"]) == 3
    labels = ["right", "wrong", "wrong", "wrong"] * 3
    groups = np.repeat(["q1", "q2", "q3"], 4)
    assert datamap.n_classes_of(labels, groups) == 4
    assert datamap.n_classes_of(labels) == 2


def planted_flips(n: int = 3000, share: float = 0.1, seed: int = 0):
    """Three labels, each with a cue (a feature shifted for its rows), and ``share`` of the
    labels then flipped at random to another label."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    X = rng.normal(size=(n, 8)).astype(np.float32)
    X[np.arange(n), y] += 1.5
    flipped = rng.random(n) < share
    y_given = np.where(flipped, (y + rng.integers(1, 3, n)) % 3, y)
    return X, y_given, flipped


def test_hard_region_gathers_planted_flips_and_stays_a_minority():
    X, y, flipped = planted_flips()
    est = AFLite(target_size=len(y) - 1, slice_size=1, n_partitions=32, random_state=0)
    est.fit(X, y)
    t = datamap.calibrated_thresholds(est.confidence_, est.variability_,
                                      n_classes=datamap.n_classes_of(y))
    regions = datamap.assign_regions(est.confidence_, est.variability_, **t)
    base = flipped.mean()
    hard = regions == "hard"
    assert 0.05 < hard.mean() <= 0.10
    assert flipped[hard].mean() >= 4 * base  # measured 0.56 against 0.10
    assert flipped[regions == "easy"].mean() < base / 2
    assert (regions == "ambiguous").mean() <= 0.11
    # the old fixed thresholds put most rows in one region and dilute the flips
    fixed = datamap.assign_regions(est.confidence_, est.variability_)
    assert flipped[fixed == "hard"].mean() < flipped[hard].mean()


def test_a_run_stores_its_shares_chance_and_resolved_thresholds(tmp_path):
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit
    from aflite_core.runs.folder import load_run

    X, y, _ = planted_flips(n=1200)
    names = np.array(["entailment", "neutral", "contradiction"])[y]
    words = np.array(["cat", "dog", "sun", "sea", "car", "tree", "rain", "song"])
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({
        "premise": [" ".join(rng.choice(words, 6)) for _ in y],
        "hypothesis": [f"{names[i][:4]}cue " + " ".join(rng.choice(words, 3))
                       if rng.random() < 0.7 else " ".join(rng.choice(words, 4))
                       for i in range(len(y))],
        "label": names})
    config = AuditConfig(representation_params={"n_components": 16}, n_partitions=16,
                         target_size=0.7, measures=("datamap",),
                         measure_params={"datamap": {"hard_share": 0.2, "easy_share": 0.4}})
    run = load_run(run_audit(load_dataset(frame, name="planted"), config,
                             runs_root=tmp_path))
    info = json.loads((run.path / "summary.json").read_text())["measures"]["datamap"]
    assert info["shares"] == {"hard_share": 0.2, "ambiguous_share": 0.1, "easy_share": 0.4}
    assert info["n_classes"] == 3 and info["chance"] == pytest.approx(1 / 3)
    table = run.read_parquet(datamap.FILE)
    again = datamap.calibrated_thresholds(table["confidence"], table["variability"],
                                          n_classes=3, **info["shares"])
    assert again == pytest.approx(info["thresholds"])
    share = table["region"].value_counts(normalize=True)
    assert share.get("hard", 0) <= 0.2 and share.get("easy", 0) <= 0.4
    assert share.get("ambiguous", 0) <= 0.12
    rules = datamap.threshold_table(run).set_index("threshold")["rule"]
    assert "lowest 20% of confidence, at most chance 1/3" in rules["hard_confidence"]


def test_tied_values_never_push_a_region_past_its_share():
    # eight partitions give probabilities in steps: many rows share each value
    conf = np.repeat(np.linspace(0.0, 1.0, 9), [50, 80, 120, 200, 200, 150, 100, 60, 40])
    var = np.repeat([0.1, 0.2, 0.3], [400, 400, 200])
    for share in (0.05, 0.1, 0.2, 0.33):
        t = datamap.calibrated_thresholds(conf, var, n_classes=2, hard_share=share,
                                          ambiguous_share=share, easy_share=share)
        assert (conf <= t["hard_confidence"]).mean() <= share
        assert (conf >= t["easy_confidence"]).mean() <= share
        assert (var >= t["ambiguous_variability"]).mean() <= share
    t = datamap.calibrated_thresholds(conf, var, n_classes=2, hard_share=0.2)
    assert (conf <= t["hard_confidence"]).mean() == 0.13  # 50 + 80 rows; the next 120 tie
