"""Model probing: the accuracy and distribution tests, built-in baselines, real SNLI."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from aflite_core.cues.linguistic import extract_features
from aflite_core.cues.probing import (
    accuracy_test,
    baseline_predictions,
    distribution_test,
    flatten_indices,
    probe_model,
    probe_predictions,
)
from aflite_core.cues.statistics import jensen_shannon, resolve_split
from aflite_core.io.datasets import load_dataset


def test_accuracy_test_by_hand():
    X = sp.csr_matrix(np.array([[1, 0], [1, 1], [0, 1], [0, 0]]))
    correct = np.array([True, False, True, True])
    out = accuracy_test(X, correct)
    # feature 0: rows 0,1 -> 1/2; others rows 2,3 -> 2/2
    assert out.loc[0, ["n_with", "acc_with", "n_without", "acc_without"]].tolist() == [2, 0.5,
                                                                                       2, 1.0]
    assert out.loc[0, "delta"] == pytest.approx(-0.5)
    # feature 1: rows 1,2 -> 1/2; rows 0,3 -> 2/2
    assert out.loc[1, "delta"] == pytest.approx(-0.5)
    with pytest.raises(ValueError, match="correct"):
        accuracy_test(X, correct[:3])


def test_flatten_balances_labels_deterministically():
    codes = np.array([0, 0, 0, 0, 0, 1, 2, 2])
    flat = flatten_indices(codes, random_state=0)
    assert np.bincount(codes[flat]).tolist() == [5, 5, 5]
    # label 1 (one example) is replicated, label 2: two whole copies plus one sampled
    assert (flat[codes[flat] == 1] == 5).all()
    assert np.array_equal(flat, flatten_indices(codes, random_state=0))
    assert flatten_indices(np.array([], dtype=int)).size == 0


def test_distribution_test_by_hand():
    true = np.array([0, 0, 0, 1])
    pred = np.array([0, 0, 0, 0])  # always label 0
    train = np.array([0, 0, 1, 2])
    train_share, predicted_share, jsd, n = distribution_test(true, pred, train, 3)
    assert train_share.tolist() == [0.5, 0.25, 0.25]
    assert predicted_share.tolist() == [1.0, 0.0, 0.0]
    assert n == 6  # 3 + 3 after flattening
    assert jsd == pytest.approx(jensen_shannon(train_share[None], predicted_share[None])[0])


def _planted(n=900, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.choice(np.array(["A", "B", "C"]), size=n)
    texts = []
    for lab in labels:
        words = list(rng.choice(["man", "dog", "park", "runs", "red", "ball", "near"], size=4))
        if lab == "A" and rng.random() < 0.6:
            words.append("zebra")
        texts.append(" ".join(words))
    split = np.where(np.arange(n) % 3 == 0, "test", "train")
    return texts, labels, split


def test_planted_model_that_exploits_the_cue():
    texts, labels, split_values = _planted()
    split = resolve_split(split_values, labels)
    fm = extract_features(texts, features=["word"], cache=False)
    has_cue = fm.column("word", "zebra")
    # a "model" that answers A whenever the cue is there and is right half the time otherwise
    rng = np.random.default_rng(1)
    pred = np.where(rng.random(len(labels)) < 0.5, labels, "B")
    pred = np.where(has_cue, "A", pred)
    result = probe_predictions(fm, labels, pred, split, min_count=5, n_distribution=50)
    row = result.accuracy.set_index("feature").loc["zebra"]
    assert row["acc_with"] == 1.0 and row["delta"] > 0.2 and row["acc_without"] < 0.8
    dist = result.distribution[result.distribution["feature"] == "zebra"].set_index("label")
    assert dist.loc["A", "predicted_share"] == 1.0  # flattening cannot hide the shortcut
    assert dist.loc["A", "train_share"] == 1.0
    assert row["distribution_jsd"] == pytest.approx(0.0)
    assert result.labels == ["A", "B", "C"]
    assert 0 < result.overall_accuracy < 1


def test_predictions_must_match_labels():
    texts, labels, split_values = _planted(90)
    split = resolve_split(split_values, labels)
    fm = extract_features(texts, features=["word"], cache=False)
    with pytest.raises(ValueError, match="predictions"):
        probe_predictions(fm, labels, np.zeros(len(labels), dtype=int), split)
    with pytest.raises(ValueError, match="predictions"):
        probe_predictions(fm, labels, labels[:10], split)


# ------------------------------------------------------------------ real SNLI


@pytest.fixture(scope="module")
def snli(snli_dir):
    return (load_dataset(snli_dir / "snli_train_sample.csv"),
            load_dataset(snli_dir / "snli_dev.csv"))


@pytest.fixture(scope="module")
def snli_probe(snli, tmp_path_factory):
    train, dev = snli
    return probe_model(train, test=dev, baseline="hypothesis_only", features=["word"],
                       cache_dir=tmp_path_factory.mktemp("cache"), n_distribution=30)


def test_hypothesis_only_baseline_beats_chance_on_snli(snli_probe):
    assert snli_probe.model.startswith("built-in hypothesis-only")
    assert 0.5 < snli_probe.overall_accuracy < 0.8  # chance is 1/3
    assert "snli_dev.csv" in snli_probe.split


@pytest.mark.parametrize("word", ["nobody", "sleeping", "no", "cat", "outdoors", "outside"])
def test_snli_artifacts_give_positive_accuracy_delta(snli_probe, word):
    row = snli_probe.accuracy.set_index("feature").loc[word]
    assert row["delta"] > 0
    assert row["acc_with"] > snli_probe.overall_accuracy


def test_distribution_frame_is_ready_for_grouped_bars(snli_probe):
    dist = snli_probe.distribution
    assert list(dist.columns) == ["feature_type", "feature", "label", "train_share",
                                  "predicted_share", "jsd", "n_flattened"]
    sums = dist.groupby("feature")[["train_share", "predicted_share"]].sum()
    assert np.allclose(sums, 1.0)
    assert dist["feature"].nunique() == 30


def test_predictions_column_of_the_test_file(snli, tmp_path):
    _, dev = snli
    frame = dev.frame.copy()
    frame["pred"] = frame["label"]  # a perfect model
    frame.loc[frame["hypothesis"].str.contains("sleeping"), "pred"] = "neutral"
    path = tmp_path / "dev_pred.csv"
    frame.to_csv(path, index=False)
    dev_pred = load_dataset(path)
    result = probe_model(dev_pred, "pred", features=["word"], cache=False)
    assert result.model == "predictions column 'pred'"
    row = result.accuracy.set_index("feature").loc["sleeping"]
    assert row["acc_without"] == 1.0 and row["acc_with"] < 0.5
    with pytest.raises(ValueError, match="not found"):
        probe_model(dev_pred, "nope", features=["word"], cache=False)


def test_predictions_array_for_the_test_rows_of_a_holdout(snli):
    _, dev = snli
    small = dev.subset(dev.row_ids()[:1500])
    from aflite_core.cues.statistics import dataset_inputs

    inputs = dataset_inputs(small)
    assert inputs.split.source == "holdout"
    gold_test = inputs.labels[inputs.split.test]
    result = probe_model(small, gold_test, features=["word"], cache=False)
    assert result.overall_accuracy == 1.0
    assert (result.accuracy["delta"] == 0).all()
    with pytest.raises(ValueError, match="one per test row"):
        probe_model(small, gold_test[:-1], features=["word"], cache=False)


def test_full_input_baseline_uses_the_premise(snli):
    train, dev = snli
    hyps = train.hypotheses()[:4000] + dev.hypotheses()[:2000]
    prems = train.premises()[:4000] + dev.premises()[:2000]
    labels = np.r_[train.labels()[:4000], dev.labels()[:2000]]
    mask = np.r_[np.ones(4000, bool), np.zeros(2000, bool)]
    hyp_only = baseline_predictions(hyps, labels, mask, kind="hypothesis_only")
    full = baseline_predictions(hyps, labels, mask, premises=prems, kind="full_input")
    acc_h = np.mean(hyp_only[~mask] == labels[~mask])
    acc_f = np.mean(full[~mask] == labels[~mask])
    assert acc_h > 0.45 and acc_f > acc_h
    with pytest.raises(ValueError, match="premises"):
        baseline_predictions(hyps, labels, mask, kind="full_input")
    with pytest.raises(ValueError, match="kind"):
        baseline_predictions(hyps, labels, mask, kind="bert")
