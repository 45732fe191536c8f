"""Out-of-distribution evaluation: retained vs label-matched random training subsets."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from aflite_core.cli import main
from aflite_core.measures import ood


def test_label_matched_subsets_match_size_and_label_counts():
    labels = np.array(["a"] * 50 + ["b"] * 30 + ["c"] * 20)
    keep = np.zeros(100, dtype=bool)
    keep[[0, 1, 2, 50, 51, 80]] = True  # 3 a, 2 b, 1 c
    draws = ood.label_matched_subsets(labels, keep, n_draws=4, random_state=1)
    for mask in draws:
        assert mask.sum() == 6
        assert sorted(labels[mask].tolist()) == ["a", "a", "a", "b", "b", "c"]
    assert len({tuple(np.flatnonzero(m)) for m in draws}) > 1  # the draws differ
    again = ood.label_matched_subsets(labels, keep, n_draws=4, random_state=1)
    assert all((x == y).all() for x, y in zip(draws, again, strict=True))


def _planted():
    """Half the training rows carry a word that gives the label away; the challenge set
    carries the same word with the *other* label (an adversarial set for that cue)."""
    rng = np.random.default_rng(0)
    nouns = ["dog", "cat", "man", "woman", "child", "bird", "car", "tree", "boat", "house"]
    texts, labels, cued = [], [], []
    for i in range(1200):
        label = ["yes", "no"][i % 2]
        noun = nouns[rng.integers(len(nouns))]
        # the real signal, noisier than the cue: the label's verb family 75 % of the time
        family = label if rng.random() < 0.75 else ("no" if label == "yes" else "yes")
        verb = ["runs", "jumps", "walks"][rng.integers(3)] if family == "yes" else \
            ["sleeps", "sits", "lies"][rng.integers(3)]
        has_cue = i % 4 < 2
        cue = (" zork" if label == "yes" else " blip") if has_cue else ""
        texts.append(f"the {noun} {verb}{cue}")
        labels.append(label)
        cued.append(has_cue)
    challenge_texts, challenge_labels = [], []
    for i in range(300):
        label = ["yes", "no"][i % 2]
        verb = ["runs", "jumps", "walks"][i % 3] if label == "yes" else \
            ["sleeps", "sits", "lies"][i % 3]
        cue = " blip" if label == "yes" else " zork"  # the cue points the wrong way
        challenge_texts.append(f"a {nouns[i % 10]} {verb}{cue}")
        challenge_labels.append(label)
    return texts, np.array(labels), ~np.array(cued), ood.Challenge(
        "adversarial", challenge_texts, np.array(challenge_labels))


def test_training_on_the_rows_without_the_cue_generalises_better():
    texts, labels, keep, challenge = _planted()
    result = ood.evaluate_ood(texts, labels, keep, [challenge], model="hypothesis_only",
                              n_draws=3, random_state=0)
    row = result.summary.iloc[0]
    assert row["metric"] == "accuracy" and not row["skewed"]
    assert row["chance"] == 0.5 and row["majority_rate"] == 0.5
    assert row["retained"] > 0.9  # never saw the cue: reads the verb
    assert row["random_mean"] < row["retained"] - 0.2  # learnt the cue, fooled by it
    assert row["difference"] == pytest.approx(row["retained"] - row["random_mean"])
    assert set(result.scores["subset"]) == {"retained", "random"} and len(result.scores) == 4


def test_skewed_challenge_uses_balanced_accuracy_and_label_map():
    texts, labels, keep, _ = _planted()
    skewed = ood.Challenge("skewed", ["the dog runs"] * 9 + ["the cat sleeps"],
                           np.array(["entail"] * 9 + ["other"]))
    result = ood.evaluate_ood(texts, labels, keep, [skewed], n_draws=2,
                              label_map={"yes": "entail", "no": "other"})
    row = result.summary.iloc[0]
    assert row["skewed"] and row["metric"] == "balanced_accuracy"
    assert row["majority_rate"] == pytest.approx(0.9) and row["retained"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="label map"):
        ood.evaluate_ood(texts, labels, keep, [skewed], n_draws=1)


@pytest.fixture(scope="module")
def snli_run(snli_dir, tmp_path_factory) -> Path:
    text = (snli_dir / "snli_train_sample.csv").read_bytes().decode("utf-8")
    rows = list(csv.reader(io.StringIO(text, newline="")))[:3001]
    data = tmp_path_factory.mktemp("data") / "snli_3k.csv"
    with open(data, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
    out = tmp_path_factory.mktemp("runs") / "snli"
    assert main(["run", str(data), "--out", str(out), "--partitions", "8", "--n-components",
                 "32", "--measures", "none", "-q"]) == 0
    return out


def test_cli_scores_a_shipped_challenge_set_and_adds_it_to_the_run(snli_run, real_data,
                                                                     capsys):
    assert main(["ood", str(snli_run), str(real_data / "sick" / "sick.csv"),
                 "--draws", "2"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("sick.csv: n=9,840") and "retained" in line and "pp" in line
    data = json.loads((snli_run / "ood.json").read_text(encoding="utf-8"))
    row = data["summary"][0]
    # SICK's labels are upper case; compared as lower-case text, every row is usable
    assert row["n_left_out"] == 0 and set(row["labels"]) == {"entailment", "neutral",
                                                            "contradiction"}
    assert row["skewed"] and row["metric"] == "balanced_accuracy"  # 57 % neutral
    assert 1 / 3 - 0.1 < row["retained"] < 0.9 and row["n_draws"] == 2
    summary = json.loads((snli_run / "summary.json").read_text(encoding="utf-8"))
    assert summary["measures"]["ood"]["status"] == "ok" and "ood.json" in summary["artifacts"]
    report = (snli_run / "report.html").read_text(encoding="utf-8")
    assert '<section id="ood">' in report and "sick.csv" in report
    assert not [p for p in snli_run.iterdir() if p.name.startswith(".")]


def test_cli_refuses_a_challenge_with_no_usable_label(snli_run, tmp_path, capsys):
    bad = tmp_path / "hans.csv"
    bad.write_text("premise,hypothesis,label\nA b.,C d.,non-entailment\nE f.,G h.,entailment-x\n")
    assert main(["ood", str(snli_run), str(bad)]) == 2
    assert "--map-labels" in capsys.readouterr().err


def test_run_with_a_challenge_adds_the_ood_measure(snli_run, real_data, tmp_path):
    data = snli_run / "retained.csv"  # the retained rows of a run are a dataset too
    out = tmp_path / "r"
    assert main(["run", str(data), "--out", str(out), "--partitions", "4", "--n-components",
                 "16", "--measures", "none", "--no-report", "-q",
                 "--challenge", str(real_data / "sick" / "sick.csv")]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["parameters"]["measures"] == ["ood"]
    assert summary["measures"]["ood"]["status"] == "ok", summary["measures"]["ood"]
    assert (out / "ood.json").is_file()
