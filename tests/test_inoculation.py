"""Inoculation curves and outcomes: hand-made curves, planted SNLI challenges, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from aflite_core.cli import main
from aflite_core.measures.inoculation import (
    OutcomeThresholds,
    classify_outcome,
    inoculate,
    pair_texts,
    split_for_inoculation,
)


def _summary(original, challenge, sizes=(0, 5, 10, 50, 100, 500, 1000)):
    return pd.DataFrame({"n": sizes, "original_mean": original, "challenge_mean": challenge})


def test_classify_outcome_hand_made_curves():
    o = [0.80] * 7
    # 1: the gap (0.30) closes at n=50 with no loss on the original data
    outcome, at, text = classify_outcome(_summary(o, [0.5, 0.52, 0.6, 0.75, 0.78, 0.8, 0.8]))
    assert (outcome, at) == (1, 50) and "50 challenge examples" in text
    # 2: the challenge accuracy barely moves
    assert classify_outcome(_summary(o, [0.5, 0.5, 0.51, 0.52, 0.55, 0.56, 0.58]))[0] == 2
    # 3: it closes only while the original accuracy drops by 0.1
    outcome, at, _ = classify_outcome(_summary([0.8, 0.8, 0.78, 0.74, 0.72, 0.70, 0.70],
                                               [0.5, 0.5, 0.55, 0.6, 0.7, 0.7, 0.7]))
    assert (outcome, at) == (3, 100)
    # pure forgetting (original falls to the challenge level) is not a closed gap
    assert classify_outcome(_summary([0.8, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], [0.5] * 7))[0] == 2
    # 0: no gap to begin with
    assert classify_outcome(_summary(o, [0.79] * 7))[0] == 0
    # thresholds are configurable: allow a 0.15 drop and the third case becomes outcome 1
    loose = OutcomeThresholds(max_original_drop=0.15)
    assert classify_outcome(_summary([0.8, 0.8, 0.78, 0.74, 0.72, 0.70, 0.70],
                                     [0.5, 0.5, 0.55, 0.6, 0.7, 0.7, 0.7]), loose)[0] == 1
    with pytest.raises(ValueError, match="max_original_drop"):
        OutcomeThresholds(max_original_drop=2)


@pytest.fixture(scope="module")
def snli(snli_dir):
    frame = pd.read_csv(snli_dir / "snli_train_sample.csv", keep_default_na=False)
    frame = frame.iloc[np.random.default_rng(0).permutation(len(frame))]
    return frame["hypothesis"].tolist(), frame["label"].to_numpy()


def _run(hyps, labels, challenge_hyps, challenge_labels, *, original_test=slice(5000, 6000),
         **kw):
    """original train 0-5000 | original test (default 5000-6000) | challenge pool 6000-7000 |
    challenge test 7000-8000 (positions in the shuffled 20,000 rows)."""
    texts, challenge = pair_texts(None, hyps), pair_texts(None, challenge_hyps)
    a, c, d = 5000, 6000, 7000
    return inoculate((texts[:a], labels[:a]), (texts[original_test], labels[original_test]),
                     (challenge[c:d], challenge_labels[c:d]),
                     (challenge[d:8000], challenge_labels[d:8000]), n_repeats=1, **kw)


def test_planted_tautology_with_a_cue_recovers_with_few_examples(snli):
    """A fixed tautology appended to every hypothesis (an NLI stress test). "nobody" is a
    strong contradiction cue in SNLI, so the tautology "and nobody is nobody" fools the
    bag-of-words model; a few dozen examples teach it to ignore the phrase, with no loss on
    the original data: outcome 1 (dataset weakness).

    "No loss" is checked on 12,000 original test rows: on 1,000 the accuracy of one model
    moves by about +-0.02 from one test sample to the next, the size of the tolerance."""
    hyps, labels = snli
    res = _run(hyps, labels, [h + " and nobody is nobody" for h in hyps], labels,
               original_test=slice(8000, None))
    s = res.summary.set_index("n")
    assert s.loc[0, "gap"] > 0.1  # the planted phrase hurts before inoculation
    assert res.outcome == 1 and res.outcome_label == "dataset weakness"
    assert res.closed_at is not None and res.closed_at <= 100
    assert abs(s.loc[1000, "original_mean"] - s.loc[0, "original_mean"]) < 0.02
    assert list(s.index) == [0, 5, 10, 50, 100, 500, 1000]


def test_cue_free_tautology_leaves_no_gap(snli):
    """"and true is true" carries no label signal for a bag-of-words model: no gap (0)."""
    hyps, labels = snli
    res = _run(hyps, labels, [h + " and true is true" for h in hyps], labels,
               sizes=(0, 50))
    assert res.outcome == 0


def test_random_challenge_labels_cannot_be_learned(snli):
    hyps, labels = snli
    shuffled = np.random.default_rng(1).permutation(labels)
    res = _run(hyps, labels, hyps, shuffled, sizes=(0, 10, 100, 1000))
    assert res.outcome == 2 and res.closed_at is None


def test_retrain_mode_and_pool_limits(snli):
    hyps, labels = snli
    res = _run(hyps, labels, [h + " and nobody is nobody" for h in hyps], labels,
               mode="retrain", challenge_weight=5.0, sizes=(0, 100, 1000, 5000))
    assert res.params["skipped_sizes"] == [5000]  # the pool holds 1000 rows
    assert list(res.summary["n"]) == [0, 100, 1000]
    s = res.summary.set_index("n")
    assert s.loc[1000, "challenge_mean"] > s.loc[0, "challenge_mean"] + 0.1
    json.dumps(res.to_dict())


def test_linear_phi_flipped_cue_is_a_distribution_difference():
    """Φ with two label cues; the challenge flips the second one. Learning the challenge means
    giving up a cue the original data rewards: the gap closes, the original accuracy drops
    (outcome 3, distribution difference)."""
    rng = np.random.default_rng(0)
    n = 5000
    y = rng.integers(0, 2, n)
    sign = np.where(y == 1, 1.0, -1.0)
    X = rng.normal(size=(n, 6))
    X[:, 0] += 1.5 * sign
    X[:, 1] += 1.5 * sign
    C = rng.normal(size=(n, 6))
    C[:, 0] += 1.5 * sign
    C[:, 1] -= 1.5 * sign
    res = inoculate((X[:2000], y[:2000]), (X[2000:3000], y[2000:3000]),
                    (C[:1000], y[:1000]), (C[3000:], y[3000:]), model="linear_phi",
                    sizes=(0, 5, 50, 500), n_repeats=2)
    s = res.summary.set_index("n")
    assert s.loc[0, "gap"] > 0.3
    assert s.loc[500, "challenge_mean"] > s.loc[0, "challenge_mean"] + 0.3
    assert s.loc[500, "original_mean"] < s.loc[0, "original_mean"] - 0.02
    assert res.outcome == 3 and res.outcome_label == "distribution difference"
    assert res.curves.groupby("n").size().to_dict() == {0: 2, 5: 2, 50: 2, 500: 2}


def test_split_for_inoculation_is_disjoint():
    mask = np.zeros(1000, bool)
    mask[::3] = True
    parts = split_for_inoculation(1000, mask, test_fraction=0.2, pool_size=100)
    allrows = np.concatenate(list(parts.values()))
    assert len(allrows) == len(np.unique(allrows)) == 1000
    assert mask[parts["challenge_train"]].all() and mask[parts["challenge_test"]].all()
    assert len(parts["challenge_train"]) == 100 and len(parts["challenge_test"]) == 67
    assert mask[parts["original_train"]].any()  # retained rows left over stay "original"
    labels = np.arange(1000) % 2
    stratified = split_for_inoculation(1000, mask, labels=labels, test_fraction=0.2,
                                       pool_size=100)
    # 167 challenge rows of each label: round(0.2 * 167) = 33 of each held out
    assert np.bincount(labels[stratified["challenge_test"]]).tolist() == [33, 33]
    with pytest.raises(ValueError, match="test_fraction"):
        split_for_inoculation(1000, mask, test_fraction=1.2)


def test_split_for_inoculation_with_groups_never_splits_a_premise(snli_dir):
    """SNLI dev grouped by premise, the challenge a random half of the rows (as AFLite's
    retained rows would be): no premise is on both the training and the test side."""
    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False)
    premises, labels = frame["premise"].to_numpy(), frame["label"].to_numpy()
    mask = np.random.default_rng(3).random(len(frame)) < 0.5
    parts = split_for_inoculation(len(frame), mask, labels=labels, groups=premises,
                                  pool_size=1000)
    allrows = np.concatenate(list(parts.values()))
    assert len(allrows) == len(np.unique(allrows)) == len(frame)
    assert mask[parts["challenge_train"]].all() and mask[parts["challenge_test"]].all()
    assert len(parts["challenge_train"]) == 1000
    train = set(premises[np.r_[parts["original_train"], parts["challenge_train"]]])
    test = set(premises[np.r_[parts["original_test"], parts["challenge_test"]]])
    assert not train & test
    share = len(parts["original_test"]) / (len(parts["original_test"])
                                           + len(parts["original_train"]))
    assert abs(share - 0.2) < 0.02
    assert abs(len(parts["challenge_test"]) / mask.sum() - 0.2) < 0.01


def test_validation():
    texts, y = ["a b", "c d", "e f"], np.array(["x", "y", "x"])
    with pytest.raises(ValueError, match="share their label set"):
        inoculate((texts, y), (texts, y), (texts, np.array(["x", "z", "x"])), (texts, y))
    with pytest.raises(ValueError, match="model"):
        inoculate((texts, y), (texts, y), (texts, y), (texts, y), model="bert")
    with pytest.raises(ValueError, match="linear_phi"):
        inoculate((texts, y), (texts, y), (texts, y), (texts, y), model="linear_phi")
    with pytest.raises(ValueError, match="nothing to inoculate with"):
        inoculate((texts, y), (texts, y), (texts, y), (texts, y), sizes=(0, 5))


def test_cli_writes_curves_and_outcome(tmp_path, snli_dir, capsys):
    frame = pd.read_csv(snli_dir / "snli_train_sample.csv", keep_default_na=False)
    original = frame.iloc[:5000]
    challenge = frame.iloc[5000:7500].copy()
    challenge["hypothesis"] = challenge["hypothesis"] + " and nobody is nobody"
    original.to_csv(tmp_path / "original.csv", index=False)
    challenge.to_csv(tmp_path / "challenge.csv", index=False)
    out = tmp_path / "out"
    code = main(["inoculate", str(tmp_path / "original.csv"), str(tmp_path / "challenge.csv"),
                 "--out", str(out), "--input", "hypothesis", "--repeats", "1",
                 "--sizes", "0,10,100,1000"])
    assert code == 0
    data = json.loads((out / "inoculation.json").read_text())
    assert data["outcome"] == 1 and data["params"]["input"] == "hypothesis"
    curves = pd.read_csv(out / "inoculation_curves.csv")
    assert list(curves["n"]) == [0, 10, 100, 1000]
    assert (out / "inoculation_summary.csv").is_file()
    assert "outcome 1 (dataset weakness)" in capsys.readouterr().out
    # a missing file is a one-line error with exit code 2
    assert main(["inoculate", str(tmp_path / "nope.csv"), str(tmp_path / "challenge.csv"),
                 "--out", str(out)]) == 2
    assert "error: ORIGINAL: no such file" in capsys.readouterr().err
