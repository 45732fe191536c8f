"""Data maps from AFLite's held-out predictions: the kernel by hand, planted regions, the run.

The gold-label probability of a partition is the softmax of its linear class scores;
confidence is its mean over the partitions holding a row out, variability the population
standard deviation (Swayamdipta et al., 2020). Masks and predictabilities do not change.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

import aflite_core.filter._rounds as rounds_module
from aflite_core.filter._aflite import AFLite
from aflite_core.filter._datamap import RoundDatamap
from aflite_core.filter._linear import PartitionLDA, count_correct, heldout_stats
from aflite_core.filter._multiple_choice import MultipleChoiceAFLite
from aflite_core.filter.synthetic import make_planted
from aflite_core.io.datasets import load_dataset
from aflite_core.measures import datamap
from aflite_core.pipeline import AuditConfig, run_audit
from aflite_core.report.html import section_ids
from aflite_core.runs.exports import export_bytes
from aflite_core.runs.folder import load_run


# -- the kernel, by hand ---------------------------------------------------------------------
def _constant_model(probs: np.ndarray) -> PartitionLDA:
    """Partitions whose class scores ignore x: softmax(scores) is exactly ``probs[j]``."""
    m, c = probs.shape
    return PartitionLDA(coef=np.zeros((m, c, 2), dtype=np.float32),
                        intercept=np.log(probs).astype(np.float32),
                        shift=np.zeros(2, dtype=np.float32))


def test_confidence_and_variability_by_hand():
    # partition 0 gives the classes 0.5/0.3/0.2, partition 1 gives 0.2/0.6/0.2
    model = _constant_model(np.array([[0.5, 0.3, 0.2], [0.2, 0.6, 0.2]]))
    X = np.zeros((4, 2), dtype=np.float32)
    bounds = np.array([0, 1, 3, 4])  # rows ordered by class: 0 | 1, 1 | 2
    heldout = np.array([[True, True, False, True],
                        [False, True, True, True]])
    correct, total, m2 = heldout_stats(X, bounds, heldout, model)
    stats = RoundDatamap.from_sums(heldout.sum(axis=0), total, m2)
    # row 0 (class 0): partition 0 only -> p = 0.5, no spread, predicted right
    # row 1 (class 1): both -> p = 0.3, 0.6: mean 0.45, std 0.15; right under partition 1
    # row 2 (class 1): partition 1 only -> 0.6
    # row 3 (class 2): both -> 0.2, 0.2; never predicted
    np.testing.assert_allclose(stats.confidence, [0.5, 0.45, 0.6, 0.2], rtol=1e-6)
    np.testing.assert_allclose(stats.variability, [0.0, 0.15, 0.0, 0.0], atol=1e-6)
    np.testing.assert_array_equal(correct, [1, 1, 1, 0])
    np.testing.assert_array_equal(correct, count_correct(X, bounds, heldout, model))
    np.testing.assert_array_equal(stats.n_heldout, [1, 2, 1, 2])


def test_many_classes_use_the_logit_path_with_the_same_probabilities():
    rng = np.random.default_rng(0)
    m, c, d, n = 3, 20, 5, 60  # 20 classes > MAX_CLASSES_MARGINS: full logits
    model = PartitionLDA(coef=rng.normal(size=(m, c, d)).astype(np.float32),
                         intercept=rng.normal(size=(m, c)).astype(np.float32),
                         shift=np.zeros(d, dtype=np.float32))
    codes = np.sort(rng.integers(0, c, n))
    X = rng.normal(size=(n, d)).astype(np.float32)
    bounds = np.searchsorted(codes, np.arange(c + 1))
    heldout = rng.random((m, n)) < 0.7
    heldout[0] = True
    _, total, m2 = heldout_stats(X, bounds, heldout, model)
    scores = model.decision_function(X).astype(np.float64)  # (n, m, c)
    probs = np.exp(scores - scores.max(axis=2, keepdims=True))
    probs /= probs.sum(axis=2, keepdims=True)
    gold = probs[np.arange(n), :, codes].T  # (m, n)
    held = heldout.sum(axis=0)
    mean = np.where(heldout, gold, 0).sum(axis=0) / held
    std = np.sqrt(np.where(heldout, (gold - mean) ** 2, 0).sum(axis=0) / held)
    stats = RoundDatamap.from_sums(held, total, m2)
    np.testing.assert_allclose(stats.confidence, mean, atol=1e-5)
    np.testing.assert_allclose(stats.variability, std, atol=1e-4)


# -- AFLite ------------------------------------------------------------------------------
def planted_mix(seed: int = 0, n_easy: int = 900, n_hard: int = 150, n_clusters: int = 30,
                per_cluster: int = 10):
    """Easy rows carry their label's cue; hard rows carry another label's cue (mislabelled);
    ambiguous rows come in clusters with a feature of their own and two labels half and half,
    so which label a partition's model favours depends on the cluster rows it trains on."""
    rng = np.random.default_rng(seed)
    d = 3 + n_clusters + 5
    rows, labels, kinds = [], [], []

    def base():
        x = rng.normal(0, 1, d)
        x[:3] = rng.normal(0, 0.5, 3)
        x[3 : 3 + n_clusters] = 0
        return x

    for i in range(n_easy + n_hard):
        c = i % 3
        x = base()
        x[c if i < n_easy else (c + 1) % 3] += 3.0
        rows.append(x)
        labels.append(c)
        kinds.append("easy" if i < n_easy else "hard")
    for j in range(n_clusters):
        for k in range(per_cluster):
            x = base()
            x[3 + j] = 6.0
            rows.append(x)
            labels.append(j % 3 if k % 2 == 0 else (j + 1) % 3)
            kinds.append("ambiguous")
    return np.array(rows, dtype=np.float32), np.array(labels), np.array(kinds)


def test_planted_easy_ambiguous_hard_rows_land_in_their_regions():
    X, y, kinds = planted_mix()
    # one round over every row (remove a single row): the data map of the whole input
    est = AFLite(target_size=len(y) - 1, slice_size=1, n_partitions=32, random_state=0)
    est.fit(X, y)
    regions = datamap.assign_regions(est.confidence_, est.variability_)
    share = pd.crosstab(kinds, regions, normalize="index")
    assert share.loc["easy", "easy"] > 0.95
    assert share.loc["hard", "hard"] > 0.95
    assert share.loc["ambiguous", "ambiguous"] > 0.75
    assert est.variability_[kinds == "ambiguous"].mean() > 0.2 > \
        est.variability_[kinds != "ambiguous"].mean()


@pytest.fixture(scope="module")
def planted():
    return make_planted(1500, 16, random_state=3)


def test_correctness_is_predictability_and_the_mask_does_not_change(planted, monkeypatch):
    X, y, _ = planted
    params = {"target_size": 0.6, "n_partitions": 16, "random_state": 2}
    est = AFLite(**params).fit(X, y)
    scored = np.isfinite(est.predictability_)
    assert scored.all()
    assert np.isfinite(est.confidence_[scored]).all()
    assert ((est.confidence_ >= 0) & (est.confidence_ <= 1)).all()
    assert ((est.variability_ >= 0) & (est.variability_ <= 0.5)).all()
    # the counts behind predictability are integers out of n_heldout partitions
    right = est.predictability_ * est.n_heldout_
    np.testing.assert_allclose(right, np.round(right), atol=1e-9)
    # removed rows scored >= tau: their gold probability is high on average
    assert est.confidence_[~est.keep_mask_].mean() > est.confidence_[est.keep_mask_].mean()
    hist = est.datamap_history_
    assert hist["round"].tolist() == list(range(1, est.n_rounds_ + 1))
    np.testing.assert_array_equal(hist["n_scored"], est.history_["n_scored"])
    # without the data map (the benchmark's switch): the same mask and scores, bit for bit
    monkeypatch.setattr(rounds_module, "_RECORD_DATAMAP", False)
    plain = AFLite(**params).fit(X, y)
    np.testing.assert_array_equal(plain.keep_mask_, est.keep_mask_)
    np.testing.assert_array_equal(plain.predictability_, est.predictability_)
    assert np.isnan(plain.confidence_).all() and plain.datamap_history_.empty


def test_threads_give_the_same_data_map(planted):
    X, y, _ = planted
    one = AFLite(target_size=0.6, n_partitions=16, random_state=2).fit(X, y)
    two = AFLite(target_size=0.6, n_partitions=16, random_state=2, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(one.confidence_, two.confidence_)
    np.testing.assert_array_equal(one.variability_, two.variability_)


def test_score_heldout_returns_the_data_map_of_new_rows(planted):
    X, y, _ = planted
    est = AFLite(target_size=0.6, n_partitions=16, random_state=2).fit(X[:1000], y[:1000])
    scores = est.score_heldout(X[1000:], y[1000:], X=X[:1000], y=y[:1000], random_state=1)
    table = est.score_heldout(X[1000:], y[1000:], X=X[:1000], y=y[:1000], random_state=1,
                              return_datamap=True)
    np.testing.assert_array_equal(table["predictability"].to_numpy(), scores)
    assert (table["n_heldout"] == 16).all()
    assert table["confidence"].between(0, 1).all()


def test_dask_backend_gives_the_local_data_map(planted):
    distributed = pytest.importorskip("distributed")
    X, y, _ = planted
    params = {"target_size": 0.6, "n_partitions": 16, "random_state": 2}
    local = AFLite(**params).fit(X, y)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster) as client:
        remote = AFLite(**params, backend="dask", scheduler=client).fit(X, y)
    np.testing.assert_array_equal(local.confidence_, remote.confidence_)
    np.testing.assert_array_equal(local.variability_, remote.variability_)


def test_multiple_choice_confidence_is_the_right_choices_softmax():
    rng = np.random.default_rng(0)
    n_q, d = 400, 6
    X = rng.normal(size=(2 * n_q, d)).astype(np.float32)
    right = np.tile([True, False], n_q)
    X[right, 0] += 3.0  # the right choice carries a cue in every question
    groups = np.repeat(np.arange(n_q), 2)
    est = MultipleChoiceAFLite(target_size=0.9, n_partitions=16, random_state=0)
    est.fit(X, right, groups=groups)
    assert est.confidence_.shape == (2 * n_q,)
    np.testing.assert_array_equal(est.confidence_, est.question_confidence_[groups])
    assert est.question_confidence_.mean() > 0.9  # easy: the cue gives the answer
    assert (est.question_variability_ < 0.2).mean() > 0.9
    assert len(est.datamap_history_) == est.n_rounds_


# -- the measure and the run folder ------------------------------------------------------
def test_regions_follow_the_thresholds():
    # defaults: the band up to 0.3, split at variability 0.2; easy from 0.5; any swing of
    # 0.25 is ambiguous
    conf = np.array([0.9, 0.9, 0.1, 0.4, 0.6, np.nan, 0.2])
    var = np.array([0.05, 0.3, 0.05, 0.05, 0.05, 0.1, 0.22])
    assert datamap.assign_regions(conf, var).tolist() == [
        "easy", "ambiguous", "hard", "medium", "easy", "", "ambiguous"]
    assert datamap.assign_regions(conf, var, easy_confidence=0.7, hard_confidence=0.4
                                  ).tolist() == ["easy", "ambiguous", "hard", "hard",
                                                 "medium", "", "ambiguous"]
    with pytest.raises(ValueError, match="hard_confidence"):
        datamap.assign_regions(conf, var, easy_confidence=0.3, hard_confidence=0.6)


@pytest.fixture(scope="module")
def snli_run(snli_dir, tmp_path_factory):
    frame = pd.read_csv(snli_dir / "snli_dev.csv").head(900)
    config = AuditConfig(representation_params={"n_components": 32}, n_partitions=16,
                         target_size=0.7, measures=("datamap", "projection"),
                         measure_params={"projection": {"method": "pca"},
                                         "datamap": {"ambiguous_variability": 0.15}})
    path = run_audit(load_dataset(frame, name="snli_900"), config,
                     runs_root=tmp_path_factory.mktemp("runs"))
    return load_run(path)


def test_run_folder_round_trip(snli_run):
    run = snli_run
    table = run.read_parquet(datamap.FILE)
    assert list(table.columns) == list(datamap.COLUMNS)
    scores = run.scores.set_index("row_id")
    filtered = scores[scores["status"].isin(["retained", "removed"])]
    # a row whose decisive round trained every partition on it (or its group) has no held-out
    # prediction (predictability NaN) and no data-map row: rare (16 partitions, t/|S| ~ 0.47:
    # one row of this run)
    scored = filtered[filtered["predictability"].notna()]
    assert len(table) == len(scored) >= 0.99 * len(filtered)
    # and the measure says so, on the page and in the report, with the count
    info = run.measures["datamap"]
    n_unscored = len(filtered) - len(scored)
    assert info["n_unscored"] == n_unscored
    assert (datamap.unscored_warning(n_unscored, len(filtered)) in info["warnings"]) \
        == (n_unscored > 0)
    own = scores.loc[table["row_id"]]
    np.testing.assert_array_equal(table["correctness"].to_numpy(),
                                  own["predictability"].to_numpy())
    assert (table["status"].to_numpy() == own["status"].to_numpy()).all()
    assert table["region"].isin(datamap.REGIONS).all()
    # the thresholds the run asked for are recorded and used
    info = run.measures["datamap"]
    assert info["thresholds"]["ambiguous_variability"] == 0.15
    assert datamap.thresholds_of(run)["ambiguous_variability"] == 0.15
    np.testing.assert_array_equal(
        table["region"].to_numpy(dtype=object),
        datamap.assign_regions(table["confidence"], table["variability"],
                               **info["thresholds"]))
    by_status = datamap.MEASURE.before_after(run)[
        "Rows per data-map region, by status (exact counts)"]
    total = by_status.set_index("status").loc["all", "total"]
    assert total == len(table) == sum(info["regions"].values())
    exported = pd.read_csv(io.BytesIO(export_bytes(run, "datamap", format="csv")))
    assert len(exported) == len(table)
    html = (run.path / "report.html").read_text(encoding="utf-8")
    assert "datamap" in section_ids(html)
    summary = json.loads((run.path / "summary.json").read_text())
    assert summary["measures"]["datamap"]["status"] == "ok"


def test_sample_points_count_every_row_but_draw_a_sample():
    table = pd.DataFrame({"confidence": np.linspace(0, 1, 1000)})
    points, total = datamap.sample_points(table, max_points=100, seed=0)
    assert total == 1000 and len(points) == 100
    again, _ = datamap.sample_points(table, max_points=100, seed=0)
    pd.testing.assert_frame_equal(points, again)
