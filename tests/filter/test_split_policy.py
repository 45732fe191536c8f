"""Split policies and multiple-choice instances through the whole pipeline, on real data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from planted import arct_multiple_choice

from aflite_core.filter._policy import filter_units, plan_filter
from aflite_core.io.datasets import load_dataset
from aflite_core.pipeline import AuditConfig, run_audit
from aflite_core.runs.folder import load_run

FAST = {"representation_params": {"n_components": 32}, "n_partitions": 16}


@pytest.fixture(scope="module")
def sick(real_data):
    return load_dataset(real_data / "sick" / "sick.csv")


def _audit(dataset, root, **changes):
    config = AuditConfig(**{**FAST, "target_size": 0.5, "measures": (), **changes})
    return load_run(run_audit(dataset, config, runs_root=root))


def test_default_policy_filters_train_and_keeps_and_scores_test_and_trial(sick, tmp_path):
    """SICK filtered jointly lost 2,453 of its 4,906 TEST rows; by default it keeps them."""
    plan = plan_filter(sick)
    assert plan.policy == "train_only" and filter_units(sick) == 4439  # SICK's TRAIN rows
    run = _audit(sick, tmp_path)
    scores = run.scores.assign(split=np.asarray(sick.splits(included_only=False)))
    held = scores[scores["split"] != "TRAIN"]
    assert set(held["split"]) == {"TEST", "TRIAL"} and len(held) == 4906 + 495
    # all kept, with a status of their own (kept, not filtered), and scored
    assert (held["status"] == "unfiltered").all()
    assert held["predictability"].notna().all()
    assert held["predictability"].between(0, 1).all()
    train = scores[scores["split"] == "TRAIN"]
    assert (train["status"] == "removed").sum() > 0
    assert set(train["status"]) == {"retained", "removed"}
    splits = run.summary["splits"]
    assert splits["TEST"] == {"before": 0, "retained": 0, "removed": 0, "unfiltered": 4906}
    assert splits["TRAIN"]["removed"] == run.sizes["removed"]
    # the summary counts only the rows AFLite filtered as "filtered" (the training split)
    assert run.sizes["filtered"] == 4439 == run.sizes["retained"] + run.sizes["removed"]
    assert run.sizes["unfiltered"] == 4906 + 495
    assert sum(run.summary["labels"]["before"].values()) == 4439
    assert (run.path / "unfiltered.csv").is_file()
    assert run.summary["aflite"]["split_policy"] == "train_only"
    html = (run.path / "report.html").read_text(encoding="utf-8")
    assert "Per split" in html and "filtered the training split" in html


def test_joint_and_per_split_policies(sick, tmp_path):
    joint = _audit(sick, tmp_path / "joint", split_policy="joint")
    assert joint.summary["splits"]["TEST"]["removed"] > 1000  # the old behaviour
    per = _audit(sick, tmp_path / "per", split_policy="per_split")
    blocks = per.summary["aflite"]["blocks"]
    assert set(blocks) == {"TRAIN", "TEST", "TRIAL"}
    for name, counts in per.summary["splits"].items():
        assert counts["removed"] > 0, name  # each split filtered on its own
        assert counts["retained"] >= blocks[name]["target"]


def test_train_only_needs_a_split_column(real_data):
    snli = load_dataset(real_data / "snli" / "snli_dev.csv")  # one split value: dev
    assert plan_filter(snli).policy == "joint"
    with pytest.raises(ValueError, match="train"):
        plan_filter(snli, split_policy="train_only")


def test_arct_questions_are_kept_or_removed_whole_through_the_pipeline(real_data, tmp_path):
    arct = arct_multiple_choice(real_data, tmp_path)
    assert filter_units(arct) == 1210  # questions, not choice rows
    run = _audit(arct, tmp_path / "runs", representation_params={"n_components": 64},
                 measures=("baselines",),
                 measure_params={"baselines": {"n_random_draws": 2, "n_splits": 3}})
    assert run.summary["aflite"]["instance"] == "question"
    assert run.summary["aflite"]["chance"] == pytest.approx(0.5)
    assert run.summary["aflite"]["grouped_partitions"] is True  # a question is drawn whole
    assert run.summary["aflite"]["partition_groups"].startswith("whole questions")
    frame = run.frame
    status = pd.Series(run.scores["status"].to_numpy(), index=frame.index)
    per_question = status.groupby(frame["question_id"].to_numpy()).nunique()
    assert (per_question == 1).all()  # no question split across retained and removed
    assert 0 < run.sizes["removed"] < run.sizes["filtered"]
    hyp = run.baselines["hypothesis_only"]["full"]
    # grouped folds keep a question's two choices together: no longer far below the 50 %
    # majority rate (30.9 % when they were split)
    assert hyp["accuracy"] > 0.45, hyp


def test_group_partitions_through_the_pipeline(real_data, tmp_path):
    snli = load_dataset(real_data / "snli" / "snli_test.csv")  # 2,000 rows, linked groups
    run = _audit(snli, tmp_path / "grouped", group_partitions=True, measures=())
    assert run.parameters["group_partitions"] == "on"  # the switch of earlier versions
    assert run.summary["aflite"]["grouped_partitions"] is True
    assert 0 < run.sizes["removed"] < run.sizes["filtered"]
    plain = load_dataset(real_data / "snli" / "snli_test.csv", group="")
    with pytest.raises(ValueError, match="group_partitions: the dataset has no groups"):
        _audit(plain, tmp_path / "none", group_partitions=True, measures=())
