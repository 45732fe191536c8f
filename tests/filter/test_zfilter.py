"""The Z-filter: z by hand, a planted word artifact removed, SNLI left with no significant
word, target sizes, validation, ``run --filter z`` writing a run folder, and the Audit form."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from apptest_support import goto, new_app, wait_for_job, widget_key
from scipy.stats import norm

from aflite_core.config import AuditConfig
from aflite_core.cues.linguistic import extract_features
from aflite_core.cues.statistics import label_counts, z_statistic
from aflite_core.filter._zfilter import ZFilter, binary_features, subset_z
from aflite_core.runs.folder import default_run_name

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_z_matches_the_formula_by_hand():
    # 10 rows, labels A x 5 and B x 5 (prior 1/2 each); feature 0 in 4 A rows and 1 B row
    X = np.zeros((10, 2), dtype=np.int8)
    X[[0, 1, 2, 3, 5], 0] = 1
    X[[4, 6, 7, 8], 1] = 1  # feature 1: 1 A, 3 B
    y = np.array(["A"] * 5 + ["B"] * 5)
    model = ZFilter(min_count=1).fit(X, y)
    z_a = (4 / 5 - 0.5) / np.sqrt(0.25 / 5)  # 1.342
    z_b = (1 / 4 - 0.5) / np.sqrt(0.25 / 4)  # -1.0
    np.testing.assert_allclose(model.z_before_, [[z_a, -z_a], [z_b, -z_b]])
    assert model.n_tests_ == 4
    assert model.threshold_ == pytest.approx(norm.isf(0.01 / (2 * 4)))  # two-sided Bonferroni
    assert model.keep_mask_.all() and model.stop_reason_ == "converged"  # nothing significant
    assert model.max_abs_z_before_ == pytest.approx(z_a)


def test_empirical_prior_flags_no_word_for_label_imbalance_alone():
    # 6 A and 2 B rows; the word keeps exactly the data's 3:1 label ratio
    counts = np.array([[3, 1]])
    assert z_statistic(counts, prior=np.array([6, 2]))[0] == pytest.approx([0.0, 0.0])
    # Gardner et al.'s uniform p0 = 1/2 would see a skew: (0.75 - 0.5) / sqrt(0.25 / 4) = 1
    assert z_statistic(counts)[0] == pytest.approx([1.0, -1.0])


def planted(n: int = 3000, seed: int = 0, cue_share: float = 0.3):
    """Texts of random neutral words; ``zzcue`` is planted in ``cue_share`` of label-a rows
    (and in 1 % of the other rows)."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(300)]
    labels = rng.choice(["a", "b", "c"], size=n)
    texts = []
    for lab in labels:
        words = list(rng.choice(vocab, size=8))
        if rng.random() < (cue_share if lab == "a" else 0.01):
            words.insert(int(rng.integers(0, 8)), "zzcue")
        texts.append(" ".join(words))
    return texts, labels


def test_a_planted_word_artifact_is_removed_until_nothing_is_significant():
    texts, labels = planted()
    model = ZFilter(random_state=0).fit(texts, labels)
    names = list(model.feature_names_)
    cue = names.index("zzcue")
    assert abs(model.z_before_[cue]).max() > 10 * model.threshold_ / 4  # strongly flagged
    assert model.n_over_threshold_before_ >= 1
    assert model.stop_reason_ == "converged"
    assert model.max_abs_z_after_ <= model.threshold_
    assert model.n_over_threshold_after_ == 0
    # the removed rows are the artifact's: label a with the planted word
    removed = ~model.keep_mask_
    has_cue = np.array(["zzcue" in t.split() for t in texts])
    assert removed.sum() > 0
    assert (has_cue[removed] & (labels[removed] == "a")).mean() > 0.95
    # nothing else: the filter stops as soon as the cue is back under the threshold
    assert removed.sum() < (has_cue & (labels == "a")).sum()
    # an independent recount on the retained rows agrees
    z_after = subset_z(binary_features(texts, min_count=5)[0], labels, model.keep_mask_)
    assert np.nanmax(np.abs(z_after)) <= model.threshold_
    np.testing.assert_allclose(z_after, model.z_after_, equal_nan=True)
    # removal bookkeeping
    assert (model.removal_round_[removed] >= 1).all()
    assert (model.removal_round_[~removed] == -1).all()
    assert sorted(model.order_[removed]) == list(range(int(removed.sum())))
    assert model.history_["removed"].sum() == removed.sum()
    assert model.history_["top_feature"].iloc[0] == "zzcue"
    # one-word predictability: the rows that hold the cue with label a score highest
    cue_a = has_cue & (labels == "a")
    assert model.predictability_[cue_a].mean() > model.predictability_[~cue_a].mean() + 0.2
    assert ((model.predictability_ >= 0) & (model.predictability_ <= 1)).all()


def test_same_seed_same_mask_and_batching_changes_little():
    texts, labels = planted(seed=3)
    a = ZFilter(random_state=5).fit(texts, labels)
    b = ZFilter(random_state=5).fit(texts, labels)
    np.testing.assert_array_equal(a.keep_mask_, b.keep_mask_)
    exact = ZFilter(random_state=5, batch_size=1).fit(texts, labels)
    assert exact.max_abs_z_after_ <= exact.threshold_
    assert abs(int((~exact.keep_mask_).sum()) - int((~a.keep_mask_).sum())) <= 10


def test_snli_fixture_is_left_with_no_significant_word(snli_dir):
    frame = pd.read_csv(snli_dir / "snli_train_sample.csv")
    model = ZFilter(random_state=0).fit(frame["hypothesis"].tolist(), frame["label"].to_numpy())
    before = dict(zip(model.feature_names_, np.nanmax(np.abs(model.z_before_), axis=1),
                      strict=True))
    for artifact in ("nobody", "sleeping", "cat", "outdoors"):  # Gururangan et al.'s cues
        assert before[artifact] > model.threshold_
    assert model.stop_reason_ == "converged"
    assert 0 < (~model.keep_mask_).sum() < len(frame) // 2
    # recount with the cue table's own extractor and counts, on the retained rows
    kept = model.keep_mask_
    fm = extract_features(frame["hypothesis"].tolist(), features=("word",), min_count=5,
                          cache=False)
    codes, classes = pd.factorize(frame["label"], sort=True)
    counts = label_counts(fm.X, codes, len(classes), rows=kept)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = z_statistic(counts, prior=np.bincount(codes[kept], minlength=len(classes)))
    assert np.nanmax(np.abs(z)) <= model.threshold_
    assert list(fm.feature) == list(model.feature_names_)


def test_target_size_is_respected():
    texts, labels = planted(cue_share=0.6)
    early = ZFilter(target_size=2950).fit(texts, labels)  # reached before convergence
    assert early.keep_mask_.sum() == 2950 and early.stop_reason_ == "target_size"
    assert early.max_abs_z_after_ > early.threshold_
    beyond = ZFilter(target_size=0.5, until="target_size", random_state=0).fit(texts, labels)
    assert beyond.keep_mask_.sum() == 1500 and beyond.stop_reason_ == "target_size"
    assert beyond.max_abs_z_after_ <= beyond.threshold_
    loose = ZFilter(target_size=10).fit(texts, labels)  # converges long before
    assert loose.stop_reason_ == "converged" and loose.keep_mask_.sum() > 10


def test_matrix_input_and_heldout_scores():
    texts, labels = planted()
    X, names, _ = binary_features(texts)
    from_matrix = ZFilter(random_state=0).fit(X, labels)
    from_texts = ZFilter(random_state=0).fit(texts, labels)
    np.testing.assert_array_equal(from_matrix.keep_mask_, from_texts.keep_mask_)
    assert list(names[from_matrix.feature_columns_]) == list(from_texts.feature_names_)
    new_texts, new_labels = planted(n=200, seed=9)
    by_text = from_texts.score_heldout(new_texts, new_labels, X=texts, y=labels)
    assert by_text.shape == (200,) and np.isfinite(by_text).all()
    assert ((by_text >= 0) & (by_text <= 1)).all()
    table = from_texts.score_heldout(new_texts, new_labels, X=texts, y=labels,
                                     return_datamap=True)
    np.testing.assert_array_equal(table["predictability"], by_text)


@pytest.mark.parametrize(("params", "error", "match"), [
    ({"alpha": 0.0}, ValueError, "alpha"),
    ({"alpha": "0.01"}, TypeError, "alpha"),
    ({"min_count": 0}, ValueError, "min_count"),
    ({"until": "forever"}, ValueError, "until"),
    ({"until": "target_size"}, ValueError, "target_size"),
    ({"target_size": 3000}, ValueError, "target_size"),
    ({"target_size": 1.5}, ValueError, "target_size"),
    ({"batch_size": 0}, ValueError, "batch_size"),
    ({"features": "bogus"}, ValueError, "features"),
    ({"callback": 3}, TypeError, "callback"),
])
def test_parameters_are_validated(params, error, match):
    texts, labels = planted()
    with pytest.raises(error, match=match):
        ZFilter(**params).fit(texts, labels)


def test_bad_data_is_refused():
    texts, labels = planted(n=50)
    with pytest.raises(ValueError, match="same length"):
        ZFilter().fit(texts, labels[:-1])
    with pytest.raises(ValueError, match="2 distinct labels"):
        ZFilter().fit(texts, np.array(["a"] * 50))
    with pytest.raises(ValueError, match="negative"):
        ZFilter().fit(sp.csr_matrix(-np.ones((50, 2))), labels)
    with pytest.raises(ValueError, match=r"X: expected a 2-D .* shape \(50, 2, 2\)"):
        ZFilter().fit(np.zeros((50, 2, 2)), labels)
    with pytest.raises(TypeError, match="X"):
        ZFilter().fit(np.zeros((50, 2), dtype=complex), labels)


def test_audit_config_checks_the_filter():
    with pytest.raises(ValueError, match="filter"):
        AuditConfig(filter="lasso").validate()
    with pytest.raises(ValueError, match="filter_params"):
        AuditConfig(filter_params={"alpha": 0.05}).validate()  # AFLite takes none
    with pytest.raises(ValueError, match="filter_params"):
        AuditConfig(filter="z", filter_params={"tau": 0.5}).validate()
    with pytest.raises(ValueError, match="alpha"):
        AuditConfig(filter="z", filter_params={"alpha": 2.0}).validate()
    with pytest.raises(ValueError, match="group_partitions"):
        AuditConfig(filter="z", group_partitions=True).validate()
    config = AuditConfig(filter="z", filter_params={"alpha": 0.05}).validate()
    assert config.to_dict()["filter"] == "z"


def test_cli_filter_z_writes_a_run_folder(snli_dir, tmp_path):
    from aflite_core.runs.folder import load_run
    from aflite_core.runs.views import stop_explanation

    data = tmp_path / "snli_3k.csv"
    pd.read_csv(snli_dir / "snli_train_sample.csv").head(3000).to_csv(data, index=False)
    out = tmp_path / "runs" / "zrun"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "aflite_core", "run", str(data), "--out", str(out), "--filter",
         "z", "--measures", "none", "--no-report", "--n-components", "16", "--seed", "1"],
        env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    run = load_run(out)
    assert run.parameters["filter"] == "z"
    z = run.summary["aflite"]["zfilter"]
    assert run.summary["aflite"]["stop_reason"] == "converged"
    assert z["max_abs_z_after"] <= z["threshold"] < z["max_abs_z_before"]
    scores = pd.read_parquet(out / "scores.parquet")
    assert set(scores["status"]) == {"retained", "removed"}
    assert run.sizes["removed"] == int((scores["status"] == "removed").sum()) > 0
    removed = scores[scores["status"] == "removed"]
    assert (removed["removal_round"] >= 1).all()
    assert scores["predictability"].between(0, 1).all()
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["aflite"]["description"].startswith("The Z-filter")
    assert stop_explanation(run).startswith("The Z-filter stopped after")


def test_run_names_know_the_filter():
    name = default_run_name("snli.csv", {"filter": "z", "strategy": "greedy_slicing",
                                         "n_partitions": 32, "random_state": 0})
    assert "zfilter" in name and "greedy" not in name and "-m32" not in name
    assert "greedy_slicing" in default_run_name("snli.csv", {"filter": "aflite",
                                                             "strategy": "greedy_slicing"})


def test_audit_page_runs_the_z_filter(runs_root) -> None:
    """The Audit form offers the Z-filter; its run (train split filtered, dev scored) opens."""
    from aflite_core.runs.folder import load_run
    from ui import jobs

    at = goto(new_app().run(), "audit")
    at.selectbox(key=widget_key(at, "audit:filter:")).set_value("z").run()
    assert "The Z-filter keeps at least" in " ".join(c.value for c in at.caption)
    at.multiselect(key=widget_key(at, "audit:measures:")).set_value([]).run()
    at.button(key="audit:run").click().run()
    job = wait_for_job(at)
    assert job.state == jobs.DONE, job.error
    run = load_run(job.result)
    assert run.parameters["filter"] == "z"
    scores = pd.read_parquet(job.result / "scores.parquet")
    # the train split is filtered; the dev rows are kept as they are, and scored too
    assert set(scores["status"]) == {"retained", "removed", "unfiltered"}
    dev = scores[scores["status"] == "unfiltered"]["predictability"]
    assert len(dev) == 1000
    assert dev.notna().all() and dev.between(0, 1).all()
    for page in ("explore", "report"):  # the finished run opens on the other pages
        at = goto(at, page)
        assert not at.exception, (page, at.exception)
    shown = " ".join(str(c.value) for c in at.caption).replace("\\", "")
    assert "The Z-filter stopped after" in shown  # Report says why it stopped
