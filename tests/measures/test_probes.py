"""Baselines before vs after with the random-subset control: planted data and real SNLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from aflite_core.measures.baselines import (
    compare_subsets,
    cross_validated_accuracy,
    hypothesis_only_baseline,
    linear_probe_baseline,
    run_baselines,
)
from aflite_core.represent._text_models import text_model
from aflite_core.splits import cv_folds


def _planted(n: int = 1200, seed: int = 0):
    """Labels readable from dimension 0 only on 'biased' rows; noise elsewhere."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, 10)).astype(np.float32)
    biased = rng.random(n) < 0.5
    X[biased, 0] += np.where(y[biased] == 1, 3.0, -3.0)
    return X, y, biased


def test_linear_probe_sees_bias_removed_beyond_size():
    X, y, biased = _planted()
    result = linear_probe_baseline(X, y, ~biased, n_splits=4, n_random_draws=3)
    full, kept, rand = result["full"], result["retained"], result["random"]
    assert kept["n_rows"] == rand["n_rows"] == int((~biased).sum())
    assert full["n_rows"] == len(y)
    assert kept["accuracy"] < 0.6  # nothing left to learn from
    assert rand["accuracy"] > 0.7  # a random half keeps the biased rows
    assert result["bias_removed_beyond_size"] == pytest.approx(
        rand["accuracy"] - kept["accuracy"])
    assert result["bias_removed_beyond_size"] > 0.15
    assert len(rand["draw_accuracies"]) == 3 and rand["accuracy_std"] > 0
    for part in (full, kept, rand):
        assert 0.4 < part["majority_accuracy"] < 0.6  # balanced labels
    json.dumps(result)  # JSON-friendly


def test_random_control_matches_retained_when_retained_is_random():
    X, y, _ = _planted(seed=1)
    mask = np.random.default_rng(9).random(len(y)) < 0.5
    result = linear_probe_baseline(X, y, mask, n_splits=4, n_random_draws=4)
    assert abs(result["bias_removed_beyond_size"]) < 0.05


def test_cross_validation_majority_and_folds():
    y = np.array([0] * 30 + [1] * 10)
    X = np.zeros((40, 2))
    res = cross_validated_accuracy(text_model("probe"), X, y, n_splits=4)
    assert len(res["fold_accuracies"]) == 4
    assert res["majority_accuracy"] == pytest.approx(0.75)
    assert res["accuracy"] == pytest.approx(0.75)  # constant features: predicts the majority


def test_run_baselines_layout():
    X, y, biased = _planted(n=300)
    texts = [f"row {i} " + ("pos" if (b and v) else "neg" if b else "none")
             for i, (b, v) in enumerate(zip(biased, y, strict=True))]
    out = run_baselines(y, ~biased, hypotheses=texts, X=X, n_splits=3, n_random_draws=2)
    assert set(out) == {"hypothesis_only", "linear_probe", "results"}
    records = pd.DataFrame(out["results"])
    assert len(records) == 6
    assert set(records["subset"]) == {"full", "retained", "random"}
    # the planted words give the label away on the full set only
    h = out["hypothesis_only"]
    assert h["full"]["accuracy"] > 0.7 and h["retained"]["accuracy"] < 0.65
    json.dumps(out)


def test_grouped_baselines_never_test_on_a_training_premise(snli_dir, monkeypatch):
    """SNLI grouped by premise: every cross-validation of every subset keeps a premise's pairs
    in one fold, and the full-input baseline runs beside the hypothesis-only one."""
    from aflite_core.measures import baselines

    frame = pd.read_csv(snli_dir / "snli_train_sample.csv", keep_default_na=False).iloc[:3000]
    hyps, prems = frame["hypothesis"].tolist(), frame["premise"].tolist()
    labels = frame["label"].to_numpy()
    keep = np.random.default_rng(0).random(len(frame)) < 0.6
    premise_code = pd.factorize(np.asarray(prems, dtype=object))[0]
    calls = []

    def spy(y, *, n_splits, groups, random_state):
        folds = cv_folds(y, n_splits=n_splits, groups=groups, random_state=random_state)
        calls.append((groups, folds))
        return folds

    monkeypatch.setattr(baselines, "cv_folds", spy)
    out = run_baselines(labels, keep, hypotheses=hyps, premises=prems, groups=prems,
                        n_splits=3, n_random_draws=2)
    assert set(out) == {"hypothesis_only", "full_input", "results"}
    assert out["hypothesis_only"]["grouped"] and out["full_input"]["grouped"]
    assert len(calls) == 2 * (2 + 2)  # two baselines x (full, retained, two random draws)
    for groups, folds in calls:
        assert groups is not None
        for train, test in folds:
            assert not set(groups[train]) & set(groups[test])
    # the group codes follow the rows: the full set's groups are the premises
    assert pd.factorize(calls[0][0])[0].tolist() == premise_code.tolist()
    full_in, hyp_only = out["full_input"]["full"], out["hypothesis_only"]["full"]
    assert full_in["accuracy"] > hyp_only["accuracy"]


def test_validation():
    X, y, biased = _planted(n=100)
    with pytest.raises(ValueError, match="retained_mask"):
        linear_probe_baseline(X, y, np.ones(99, bool))
    with pytest.raises(ValueError, match="keeps every row"):
        linear_probe_baseline(X, y, np.ones(100, bool))
    with pytest.raises(ValueError, match="n_splits"):
        linear_probe_baseline(X, y, ~biased, n_splits=1)
    with pytest.raises(ValueError, match="one entry per label"):
        compare_subsets(text_model("probe"), X[:50], y, ~biased)


def test_snli_hypothesis_only_retained_below_random_subset(snli_dir):
    """The paper's central claim on real SNLI: after AFLite on Φ, a hypothesis-only model does
    clearly worse on the retained rows than on random subsets of the same size."""
    from aflite_core.filter._aflite import AFLite
    from aflite_core.represent._builders import tfidf_svd_features

    frame = pd.read_csv(snli_dir / "snli_train_sample.csv", keep_default_na=False)
    frame = frame.iloc[:8000]
    hyps, labels = frame["hypothesis"].tolist(), frame["label"].to_numpy()
    X = tfidf_svd_features(hyps, frame["premise"].tolist(), n_components=64, random_state=0)
    keep = AFLite(target_size=0.5, n_partitions=32, slice_size=0.05,
                  random_state=0).fit(X, labels).keep_mask_
    assert 0.5 <= keep.mean() < 0.95
    result = hypothesis_only_baseline(hyps, labels, keep, n_splits=3, n_random_draws=3)
    kept, rand = result["retained"], result["random"]
    # both come with their spread: over folds for retained, over draws for random
    assert kept["accuracy_std"] > 0 and rand["accuracy_std"] > 0
    assert len(kept["fold_accuracies"]) == 3 and len(rand["draw_accuracies"]) == 3
    gap = result["bias_removed_beyond_size"]
    assert gap > 0.03
    assert kept["accuracy"] + 2 * kept["accuracy_std"] < rand["accuracy"] - 2 * rand["accuracy_std"]
    # the random control shows size alone costs little
    assert abs(result["size_effect"]) < gap
    assert kept["accuracy"] > kept["majority_accuracy"]  # harder, not destroyed


def test_label_matched_control_and_honest_references(snli_dir):
    """The control has the retained rows' label counts; every accuracy comes with the
    majority-class rate and chance; grouped full-set accuracy is in the published ballpark
    for a hypothesis-only bag of words (about 0.55-0.62)."""
    frame = pd.read_csv(snli_dir / "snli_train_sample.csv", keep_default_na=False).iloc[:12000]
    hyps, labels = frame["hypothesis"].tolist(), frame["label"].to_numpy()
    # a label-shifting "filter": keeps every contradiction, half of the others
    keep = (labels == "contradiction") | (np.arange(len(labels)) % 2 == 0)
    groups = frame["premise"].to_numpy()
    result = hypothesis_only_baseline(hyps, labels, keep, n_splits=3, n_random_draws=2,
                                      groups=groups)
    assert result["control"] == "label_matched" and result["grouped"]
    assert 0.55 <= result["full"]["accuracy"] <= 0.66, result["full"]
    for part in ("full", "retained", "random"):
        assert result[part]["chance"] == pytest.approx(1 / 3)
        assert result[part]["majority_accuracy"] < result[part]["accuracy"]
    assert result["bias_removed_beyond_size_pp"] == pytest.approx(
        100 * result["bias_removed_beyond_size"])
    # the uniform control would compare against a different label mix; label-matched does not
    uniform = hypothesis_only_baseline(hyps, labels, keep, n_splits=3, n_random_draws=2,
                                       groups=groups, control="uniform")
    assert uniform["control"] == "uniform"
    assert result["random"]["majority_accuracy"] == pytest.approx(
        result["retained"]["majority_accuracy"], abs=0.02)
    assert abs(uniform["random"]["majority_accuracy"]
               - result["retained"]["majority_accuracy"]) > 0.05
    assert result["warnings"] == []


def test_below_majority_gets_a_warning_with_likely_causes():
    from aflite_core.measures.baselines import below_majority_warnings

    parts = {"full": {"accuracy": 0.31, "majority_accuracy": 0.5, "n_rows": 2420},
             "retained": {"accuracy": 0.6, "majority_accuracy": 0.5, "n_rows": 1200},
             "random": {"accuracy": 0.4, "majority_accuracy": 0.55, "n_rows": 150}}
    warnings = below_majority_warnings("hypothesis_only", parts, grouped=False)
    assert len(warnings) == 2
    assert warnings[0].startswith("hypothesis_only on the full rows: accuracy 0.310 is below "
                                  "the majority-class rate 0.500")
    assert "group column" in warnings[0] and "tiny subset" not in warnings[0]
    assert "tiny subset (150 rows)" in warnings[1] and "label shift" in warnings[1]
    assert below_majority_warnings("x", parts, grouped=True)[0].count("group column") == 0


def test_sample_rows_takes_whole_groups_and_is_seeded():
    from aflite_core.measures.baselines import sample_rows

    assert np.array_equal(sample_rows(50, 100), np.arange(50))
    plain = sample_rows(1000, 300, random_state=1)
    assert len(plain) == 300 and np.array_equal(plain, np.sort(plain))
    assert np.array_equal(plain, sample_rows(1000, 300, random_state=1))
    groups = np.repeat(np.arange(250), 4)
    grouped = sample_rows(1000, 301, groups=groups, random_state=0)
    assert 301 <= len(grouped) < 305  # whole groups of 4 until the size is reached
    taken = set(groups[grouped])
    assert all(np.isin(np.flatnonzero(np.isin(groups, list(taken))), grouped))


def test_large_data_baselines_run_on_a_reported_sample(snli_dir, tmp_path):
    """Above max_rows the baselines cross-validate a seeded sample and say so, with the
    binomial standard error of the retained accuracy (issue 15: no silent slowness)."""
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit

    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False).iloc[:2400]
    dataset = load_dataset(frame, name="dev2400", group="")
    config = AuditConfig(representation_params={"n_components": 32}, n_partitions=8,
                         target_size=0.6, measures=("baselines",),
                         measure_params={"baselines": {"max_rows": 1200}})
    path = run_audit(dataset, config, runs_root=tmp_path)
    block = json.loads((path / "baselines.json").read_text())["hypothesis_only"]
    sample = block["sample"]
    assert sample == {**sample, "sampled": True, "n_rows_sampled": 1200}
    assert sample["n_rows_total"] >= 2400 - 10  # the filterable rows
    assert block["full"]["n_rows"] == 1200
    acc, n = block["retained"]["accuracy"], block["retained"]["n_rows"]
    assert sample["sampling_se_pp"] == pytest.approx(100 * np.sqrt(acc * (1 - acc) / n))
