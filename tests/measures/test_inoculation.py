"""Inoculation curves and outcomes: hand-made curves, planted SNLI challenges, the strength
chosen on held-out challenge rows, label-skewed challenge sets, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from aflite_core.cli import main
from aflite_core.measures.inoculation import (
    ANCHORS,
    OutcomeThresholds,
    challenge_metric,
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


def test_classify_outcome_reads_the_whole_curve():
    """The outcome is decided at the largest n (with the trend), not at the first n where the
    gap closes: the first-closing rule called both curves below outcome 1."""
    # closes at n=10 (a lucky draw) and opens again: the gap at n=1000 is 0.25 of 0.30 -> 2
    outcome, at, text = classify_outcome(_summary([0.8] * 7,
                                                  [0.5, 0.6, 0.78, 0.55, 0.55, 0.55, 0.55]))
    assert (outcome, at) == (2, None) and "stayed open" in text
    # closes at n=50 with no loss, but by n=1000 the original accuracy fell 0.08 -> 3
    outcome, at, _ = classify_outcome(_summary([0.8, 0.8, 0.8, 0.8, 0.77, 0.74, 0.72],
                                               [0.5, 0.55, 0.6, 0.75, 0.74, 0.72, 0.72]))
    assert (outcome, at) == (3, 50)
    # closed at the largest n only: still outcome 1, closed_at is that n
    outcome, at, _ = classify_outcome(_summary([0.8] * 7, [0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.79]))
    assert (outcome, at) == (1, 1000)
    with pytest.raises(ValueError, match="n = 0 row"):
        classify_outcome(_summary([0.8] * 2, [0.5] * 2, sizes=(5, 10)))
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
    """original train 0-5000 | original test (default 5000-6000) | challenge train 6000-7250 |
    challenge test 7250-8000 (positions in the shuffled 20,000 rows).

    The challenge train part is 1250 rows (was 1000) because inoculate now holds out 20% of
    it as the challenge dev set that chooses the strength; 1000 are left to draw n from."""
    texts, challenge = pair_texts(None, hyps), pair_texts(None, challenge_hyps)
    a, c, d = 5000, 6000, 7250
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
    # a strength was chosen for every n > 0 from the default grid, and reported
    assert pd.isna(s.loc[0, "chosen_strength"])
    assert set(s["chosen_strength"].iloc[1:]) <= set(ANCHORS)
    data = res.to_dict()
    assert set(data["chosen_strength"]) == {"5", "10", "50", "100", "500", "1000"}
    assert data["challenge_metric"] == "accuracy" and abs(data["chance"] - 1 / 3) < 1e-12
    json.dumps(data, allow_nan=False)


def test_chosen_strength_settles_what_a_fixed_anchor_flips(snli):
    """The issue: with one fixed anchor the outcome depends on the anchor. A weak anchor (0.1)
    lets the model forget the original data (0.56 -> about 0.51 at n=1000: outcome 3);
    choosing the strength per n on the challenge dev rows keeps the original accuracy
    (outcome 1, as above)."""
    hyps, labels = snli
    challenge = [h + " and nobody is nobody" for h in hyps]
    loose = _run(hyps, labels, challenge, labels, strengths=(0.1,), sizes=(0, 100, 1000),
                 original_test=slice(8000, None))
    chosen = _run(hyps, labels, challenge, labels, sizes=(0, 100, 1000),
                  original_test=slice(8000, None))
    assert loose.outcome == 3
    assert chosen.outcome == 1
    assert (chosen.summary["original_mean"].iloc[-1]
            > loose.summary["original_mean"].iloc[-1] + 0.03)


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
    # challenge_weight=5.0 became strengths=(5.0,): the weight is now a grid chosen per n
    res = _run(hyps, labels, [h + " and nobody is nobody" for h in hyps], labels,
               mode="retrain", strengths=(5.0,), sizes=(0, 100, 1000, 5000))
    assert res.params["skipped_sizes"] == [5000]  # the pool holds 1000 rows after the dev rows
    assert res.params["strength_name"] == "challenge_weight"
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
    assert res.challenge_metric == "accuracy"


def _flipped_cue(n=5000, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    sign = np.where(y == 1, 1.0, -1.0)
    X = rng.normal(size=(n, 6))
    X[:, 0] += 1.5 * sign
    X[:, 1] += 1.5 * sign
    C = rng.normal(size=(n, 6))
    C[:, 0] += 1.5 * sign
    C[:, 1] -= 1.5 * sign
    return X, C, y


def test_strength_is_chosen_on_held_out_challenge_rows():
    """The dev rows that choose the strength are challenge rows, never drawn as one of the n
    examples and disjoint from the challenge test rows; the chosen strength is the best on
    the dev rows (not on the test rows)."""
    X, C, y = _flipped_cue()
    ids = np.arange(len(y))  # row identity, to check disjointness by content
    pool_ids, test_ids = ids[:1000], ids[3000:]
    res = inoculate((X[:2000], y[:2000]), (X[2000:3000], y[2000:3000]),
                    (C[pool_ids], y[pool_ids]), (C[test_ids], y[test_ids]),
                    model="linear_phi", sizes=(0, 10, 100, 500), n_repeats=2)
    dev, pool = res.rows["challenge_dev"], res.rows["challenge_pool"]
    assert len(dev) == res.params["n_challenge_dev"] == 200  # dev_fraction 0.2 of 1000
    assert not set(dev) & set(pool) and len(dev) + len(pool) == 1000
    assert not set(pool_ids[dev]) & set(test_ids)  # dev rows are not challenge test rows
    for order in res.rows["orders"]:
        assert sorted(order) == list(range(len(pool)))  # the n examples come from the pool
        assert not set(pool[order[:500]]) & set(dev)
    assert not set(res.rows["original_dev"]) & set(res.rows["original_fit"])
    sel = res.selection
    assert len(sel) == 3 * 2 * 4  # sizes x repeats x default anchors
    n_original_dev = res.params["n_original_dev"]
    for _, group in sel.groupby(["n", "repeat"]):
        chosen = group[group["chosen"]].iloc[0]
        assert group["chosen"].sum() == 1
        # the default tolerance: one standard error of the best dev score
        best = group["dev_challenge"].max()
        assert chosen["dev_challenge"] >= best - np.sqrt(best * (1 - best) / 200) - 1e-12
        tied = group[group["dev_challenge"] >= best - np.sqrt(best * (1 - best) / 200) - 1e-12]
        top = tied["dev_original"].max()
        assert chosen["dev_original"] >= top - np.sqrt(top * (1 - top) / n_original_dev) - 1e-12
    chosen = sel[sel["chosen"]].set_index(["n", "repeat"])["strength"]
    curves = res.curves[res.curves["n"] > 0].set_index(["n", "repeat"])["strength"]
    assert chosen.sort_index().equals(curves.sort_index())


def test_skewed_challenge_set_uses_balanced_accuracy():
    """87% of the challenge rows carry label 1 and all look like label 1 to the original
    model: plain accuracy (0.87) hides that the model ignores label 0; balanced accuracy
    (0.5, chance) shows the gap, and the challenge curve uses it."""
    rng = np.random.default_rng(0)
    n = 3000
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, 4))
    X[:, 0] += np.where(y == 1, 2.0, -2.0)
    yc = (rng.random(n) < 0.87).astype(int)
    C = rng.normal(size=(n, 4))
    C[:, 0] = 2.0 + 0.1 * C[:, 0]  # every challenge row looks like label 1
    C[:, 1] += np.where(yc == 1, 1.5, -1.5)  # a cue the original data does not have
    res = inoculate((X[:2000], y[:2000]), (X[2000:], y[2000:]), (C[:1000], yc[:1000]),
                    (C[2000:], yc[2000:]), model="linear_phi", sizes=(0, 50, 500),
                    n_repeats=1)
    assert res.challenge_metric == "balanced_accuracy"
    assert abs(res.majority_rate - np.mean(yc[2000:])) < 1e-12 and res.chance == 0.5
    s = res.summary.set_index("n")
    c0 = res.curves.set_index("n").loc[0]
    assert c0["accuracy_challenge"] == pytest.approx(res.majority_rate)
    assert c0["balanced_accuracy_challenge"] == pytest.approx(0.5)
    assert s.loc[0, "challenge_mean"] == pytest.approx(0.5)
    assert s.loc[0, "challenge_accuracy_mean"] == pytest.approx(res.majority_rate)
    assert s.loc[0, "gap"] > 0.4  # the plain-accuracy gap would be about 0.1
    assert "balanced accuracy" in res.explanation
    data = res.to_dict()
    assert data["challenge_metric"] == "balanced_accuracy" and data["chance"] == 0.5
    # the rule itself: 87% of two labels is skewed, 50% of three is (1.5/3), 45% is not
    assert challenge_metric([1] * 87 + [0] * 13)[0] == "balanced_accuracy"
    assert challenge_metric([0] * 5 + [1] * 3 + [2] * 2)[0] == "balanced_accuracy"
    assert challenge_metric([0] * 45 + [1] * 30 + [2] * 25) == ("accuracy", 0.45, 1 / 3)


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
    with pytest.raises(ValueError, match="strengths"):
        inoculate((texts, y), (texts, y), (texts, y), (texts, y), sizes=(0, 1), strengths=(0,))
    with pytest.raises(ValueError, match="dev_fraction"):
        inoculate((texts, y), (texts, y), (texts, y), (texts, y), dev_fraction=1.0)


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
    assert set(data["chosen_strength"]) == {"10", "100", "1000"}
    assert data["challenge_metric"] == "accuracy" and "majority_rate" in data
    curves = pd.read_csv(out / "inoculation_curves.csv")
    assert list(curves["n"]) == [0, 10, 100, 1000]
    assert (out / "inoculation_summary.csv").is_file()
    assert "outcome 1 (dataset weakness)" in capsys.readouterr().out
    # a missing file is a one-line error with exit code 2
    assert main(["inoculate", str(tmp_path / "nope.csv"), str(tmp_path / "challenge.csv"),
                 "--out", str(out)]) == 2
    assert "error: ORIGINAL: no such file" in capsys.readouterr().err
