"""KNN-distance measures: hand-checked example, planted near-duplicates, exact vs brute force,
approximate recall on real SNLI features."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aflite_core.measures.knn import (
    heldout_mask,
    knn_distance_measures,
    l2_normalize,
    nearest_neighbors,
    query_sample,
)


def _cell(table: pd.DataFrame, scope: str, cls: str, relation: str, k: int) -> pd.Series:
    rows = table[(table["scope"] == scope) & (table["class"] == cls)
                 & (table["relation"] == relation) & (table["k"] == k)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_hand_checked_tiny_example():
    # class a: east (row 10) and north (row 11); class b: west (row 12) and north-east (row 13)
    X_train = np.array([[1, 0], [0, 1], [-1, 0], [1, 1]], dtype=np.float32)
    y_train = np.array(["a", "a", "b", "b"])
    retained = np.array([False, True, True, True])  # AFLite dropped the east point
    # held-out: one "a" pointing east
    X_held = np.array([[2, 0]], dtype=np.float32)
    result = knn_distance_measures(X_train, y_train, X_held, np.array(["a"]),
                                   retained_mask=retained, ks=(1, 2, 3),
                                   train_row_ids=np.array([10, 11, 12, 13]),
                                   heldout_row_ids=np.array([99]), n_bootstrap=50)
    t = result.table
    # before: same-class distances 0 (east) and 1 (north)
    assert _cell(t, "before", "a", "same_class", 1)["mean_sum_distance"] == pytest.approx(0.0,
                                                                                         abs=1e-6)
    assert _cell(t, "before", "a", "same_class", 2)["mean_sum_distance"] == pytest.approx(1.0)
    assert _cell(t, "before", "a", "same_class", 2)["mean_distance"] == pytest.approx(0.5)
    # other class: north-east 1 - 1/sqrt(2), then west 2
    ne = 1 - 1 / np.sqrt(2)
    assert _cell(t, "before", "a", "other_class", 1)["mean_sum_distance"] == pytest.approx(ne)
    assert _cell(t, "before", "a", "other_class", 2)["mean_sum_distance"] == pytest.approx(ne + 2)
    # after: only north is left in class a
    assert _cell(t, "after", "a", "same_class", 1)["mean_sum_distance"] == pytest.approx(1.0)
    # k larger than the available neighbours: counted as short, mean is NaN
    short = _cell(t, "after", "a", "same_class", 2)
    assert short["n_short"] == 1 and short["n_queries"] == 0
    assert np.isnan(short["mean_sum_distance"])
    assert _cell(t, "before", "a", "same_class", 3)["n_short"] == 1
    # "all" equals the single class here; one example -> the bootstrap interval is a point
    row = _cell(t, "before", "all", "other_class", 1)
    assert row["ci_low"] == pytest.approx(ne) and row["ci_high"] == pytest.approx(ne)
    ex = result.per_example.set_index("scope")
    assert ex.loc["before", "nearest_same_class_row_id"] == 10
    assert ex.loc["after", "nearest_same_class_row_id"] == 11
    assert ex.loc["after", "nearest_same_class"] == pytest.approx(1.0)
    assert ex.loc["before", "nearest_other_class"] == pytest.approx(ne)


def test_class_without_training_rows_is_reported_short():
    X_train = np.eye(3, dtype=np.float32)
    result = knn_distance_measures(X_train, np.array(["a", "a", "b"]),
                                   np.ones((2, 3), np.float32), np.array(["a", "c"]),
                                   ks=(1,), n_bootstrap=0)
    t = result.table
    assert set(t["scope"]) == {"before"}
    c = _cell(t, "before", "c", "same_class", 1)
    assert c["n_short"] == 1 and np.isnan(c["mean_sum_distance"])
    assert _cell(t, "before", "c", "other_class", 1)["n_queries"] == 1
    ex = result.per_example
    assert ex.loc[ex["label"] == "c", "nearest_same_class_row_id"].isna().all()


def test_distances_grow_after_removing_near_duplicates_of_heldout():
    rng = np.random.default_rng(0)
    n, d = 3000, 32
    centers = rng.normal(size=(3, d))
    y_train = rng.integers(0, 3, n)
    X_train = (centers[y_train] + rng.normal(size=(n, d))).astype(np.float32)
    y_held = rng.integers(0, 3, 200)
    X_held = (centers[y_held] + rng.normal(size=(200, d))).astype(np.float32)
    # plant a near-copy of every held-out example in the training set, then let "AFLite"
    # remove exactly those copies
    copies = X_held + 0.01 * rng.normal(size=X_held.shape).astype(np.float32)
    X_all = np.vstack([X_train, copies])
    y_all = np.concatenate([y_train, y_held])
    retained = np.r_[np.ones(n, bool), np.zeros(200, bool)]
    result = knn_distance_measures(X_all, y_all, X_held, y_held, retained_mask=retained,
                                   n_bootstrap=200, random_state=1)
    t = result.table
    for k in (1, 5):
        before = _cell(t, "before", "all", "same_class", k)
        after = _cell(t, "after", "all", "same_class", k)
        assert after["mean_distance"] > before["mean_distance"]
        assert before["ci_high"] < after["ci_low"]  # clearly, not by chance
    # the copies are the nearest neighbours before, so k=1 is ~0 before
    assert _cell(t, "before", "all", "same_class", 1)["mean_distance"] < 1e-3
    ex = result.per_example.pivot(index="row_id", columns="scope", values="nearest_same_class")
    assert (ex["after"] > ex["before"]).all()
    # removing training rows can only move neighbours further away
    wide = t.pivot_table(index=["class", "relation", "k"], columns="scope",
                         values="mean_distance")
    assert (wide["after"] >= wide["before"] - 1e-9).all()
    # the table is complete: 2 scopes x (3 classes + all) x 2 relations x 4 ks
    assert len(t) == 2 * 4 * 2 * 4
    assert (t["mean_distance"] * t["k"]).to_numpy() == pytest.approx(
        t["mean_sum_distance"].to_numpy())


def test_the_merges_side_by_side_give_the_same_measures_as_in_turn(monkeypatch):
    """Each (class, scope) merge of the neighbour lists runs on a thread of its own: the
    tables and the per-example frame are the same bit for bit as merged one after another."""
    from aflite_core.measures import knn

    rng = np.random.default_rng(5)
    X = rng.normal(size=(1500, 16)).astype(np.float32)
    y = rng.integers(0, 3, 1500).astype(str)
    retained = rng.random(1200) < 0.6
    controls = [rng.permutation(retained) for _ in range(2)]
    runs = {}
    for cores in (1, 4):
        monkeypatch.setattr(knn, "available_cores", lambda cores=cores: cores)
        runs[cores] = knn_distance_measures(X[:1200], y[:1200], X[1200:], y[1200:],
                                            retained_mask=retained, control_masks=controls,
                                            n_bootstrap=100, random_state=3)
    pd.testing.assert_frame_equal(runs[1].table, runs[4].table, check_exact=True)
    pd.testing.assert_frame_equal(runs[1].per_example, runs[4].per_example, check_exact=True)
    assert len(runs[4].controls) == 2
    for a, b in zip(runs[1].controls, runs[4].controls, strict=True):
        pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_exact_search_matches_brute_force_on_wide_reference():
    rng = np.random.default_rng(3)
    R = rng.normal(size=(9000, 16)).astype(np.float32)  # wide enough for the pre-filter path
    Q = rng.normal(size=(70, 16)).astype(np.float32)
    dist, idx = nearest_neighbors(Q, R, n_neighbors=12, method="exact", block_size=32)
    full = 1.0 - l2_normalize(Q).astype(np.float64) @ l2_normalize(R).astype(np.float64).T
    expected = np.argsort(full, axis=1)[:, :12]
    np.testing.assert_array_equal(idx, expected)
    np.testing.assert_allclose(dist, np.sort(full, axis=1)[:, :12], atol=1e-5)
    assert dist.dtype == np.float32 and np.all(np.diff(dist, axis=1) >= 0)


def test_bootstrap_is_seeded():
    rng = np.random.default_rng(5)
    X, y = rng.normal(size=(400, 8)), rng.integers(0, 2, 400)
    a = knn_distance_measures(X[:300], y[:300], X[300:], y[300:], random_state=7,
                              n_bootstrap=100).table
    b = knn_distance_measures(X[:300], y[:300], X[300:], y[300:], random_state=7,
                              n_bootstrap=100).table
    pd.testing.assert_frame_equal(a, b)
    assert (a["ci_low"] <= a["mean_sum_distance"]).all()
    assert (a["mean_sum_distance"] <= a["ci_high"]).all()


def test_validation_errors_name_the_argument():
    X = np.zeros((5, 3), np.float32)
    y = np.zeros(5)
    with pytest.raises(ValueError, match="same number of columns"):
        knn_distance_measures(X, y, np.zeros((2, 4)), np.zeros(2))
    with pytest.raises(ValueError, match="retained_mask"):
        knn_distance_measures(X, y, X, y, retained_mask=np.ones(5))
    with pytest.raises(ValueError, match="ks"):
        knn_distance_measures(X, y, X, y, ks=(0, 5))
    with pytest.raises(ValueError, match="method"):
        nearest_neighbors(X, X, method="fast")
    with pytest.raises(ValueError, match="finite"):
        nearest_neighbors(np.full((1, 3), np.nan), X)


def test_the_finiteness_check_goes_in_chunks_and_reaches_the_last(monkeypatch):
    """Φ is checked a chunk of rows at a time (no n x d mask): an infinity in the last
    chunk is still found, by the argument's name."""
    import aflite_core.measures._neighbors as neighbors_module

    monkeypatch.setattr(neighbors_module, "FINITE_CHUNK", 2)
    X = np.ones((5, 3), np.float32)
    X[4, 1] = np.inf
    with pytest.raises(ValueError, match="X_train must be finite"):
        knn_distance_measures(X, np.zeros(5), X[:2], np.zeros(2))


def test_heldout_mask_prefers_dev_and_test_splits():
    labels = np.array(["a", "b"] * 10)
    splits = np.array(["train"] * 14 + ["dev"] * 3 + ["Test"] * 3)
    np.testing.assert_array_equal(heldout_mask(labels, splits=splits), splits != "train")
    mask = heldout_mask(labels, splits=np.array(["train"] * 20), fraction=0.2, random_state=1)
    assert mask.sum() == 4
    assert (labels[mask] == "a").sum() == 2  # stratified
    np.testing.assert_array_equal(mask, heldout_mask(labels, fraction=0.2, random_state=1))
    # every test value of the one split vocabulary counts as held out
    splits = np.array(["train"] * 17 + ["validation", "trial", "Held-Out"])
    np.testing.assert_array_equal(heldout_mask(labels, splits=splits), splits != "train")
    with pytest.raises(ValueError, match="fraction"):
        heldout_mask(labels, fraction=1.5)


def test_heldout_mask_with_groups_keeps_each_premise_on_one_side(snli_dir):
    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False)
    labels, premises = frame["label"].to_numpy(), frame["premise"].to_numpy()
    held = heldout_mask(labels, groups=premises, random_state=0)
    sides = pd.Series(held).groupby(premises).nunique()
    assert (sides == 1).all()
    assert abs(held.mean() - 0.1) < 0.01
    plain = heldout_mask(labels, random_state=0)
    assert (pd.Series(plain).groupby(premises).nunique() > 1).any()
    # a split column still decides when it has held-out rows; groups only shape the hold-out
    splits = np.where(np.arange(len(labels)) < 100, "test", "train")
    np.testing.assert_array_equal(heldout_mask(labels, splits=splits, groups=premises),
                                  splits == "test")


def _recall(found: np.ndarray, exact: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / exact.shape[1]
                          for a, b in zip(found, exact, strict=True)]))


def test_approximate_recall_against_exact_on_snli_features(snli_dir):
    from aflite_core.represent._builders import tfidf_svd_features

    frame = pd.read_csv(snli_dir / "snli_train_sample.csv", keep_default_na=False).iloc[:5000]
    X = tfidf_svd_features(frame["hypothesis"].tolist(), frame["premise"].tolist(),
                           n_components=48, random_state=0)
    queries, reference = X[:400], X[400:]
    exact_d, exact = nearest_neighbors(queries, reference, n_neighbors=10, method="exact")
    approx_d, approx = nearest_neighbors(queries, reference, n_neighbors=10,
                                         method="approximate", random_state=0)
    assert _recall(approx, exact) >= 0.95
    # what it finds is never nearer than the true neighbours, and is sorted, nearest first
    assert (approx_d >= exact_d - 1e-6).all()
    assert (np.diff(approx_d, axis=1) >= 0).all()
    # the same seed, the same neighbours
    again = nearest_neighbors(queries, reference, n_neighbors=10, method="approximate",
                              random_state=0)[1]
    np.testing.assert_array_equal(again, approx)


def test_approximate_search_finds_whole_clusters():
    """30 well-separated clusters: the inverted file's groups follow them, so each query's
    neighbours are found (a graph search missed whole clusters here: recall 0.93)."""
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(30, 64))
    labels = rng.integers(0, 30, 20_000)
    X = (centers[labels] * 3 + rng.normal(size=(20_000, 64))).astype(np.float32)
    _, exact = nearest_neighbors(X[:1000], X[1000:], n_neighbors=10, method="exact")
    _, approx = nearest_neighbors(X[:1000], X[1000:], n_neighbors=10, method="approximate")
    assert _recall(approx, exact) >= 0.99


def test_approximate_search_of_more_neighbours_than_its_groups_hold_is_exact():
    """A query whose probed groups hold fewer than k rows is searched exactly; reference sets
    under APPROX_MIN_REFERENCE rows always are."""
    from aflite_core.measures._neighbors import APPROX_MIN_REFERENCE

    X = np.random.default_rng(1).normal(size=(5_000, 16)).astype(np.float32)
    exact_d, exact = nearest_neighbors(X[:50], X[50:], n_neighbors=2_000, method="exact")
    approx_d, approx = nearest_neighbors(X[:50], X[50:], n_neighbors=2_000,
                                         method="approximate")
    np.testing.assert_allclose(approx_d, exact_d, atol=1e-6)
    assert _recall(approx, exact) >= 0.999  # equal distances may swap places
    small = X[:APPROX_MIN_REFERENCE - 1]
    np.testing.assert_array_equal(
        nearest_neighbors(X[:20], small, n_neighbors=5, method="approximate")[1],
        nearest_neighbors(X[:20], small, n_neighbors=5, method="exact")[1])


def test_knn_measures_with_the_approximate_search_agree_with_the_exact_ones(snli_dir,
                                                                          monkeypatch):
    import aflite_core.measures.knn as knn_module
    from aflite_core.represent._builders import tfidf_svd_features

    searched = []
    approx_topk = knn_module.approx_topk
    monkeypatch.setattr(knn_module, "approx_topk",
                        lambda Qn, Rn, *a: searched.append(len(Rn)) or approx_topk(Qn, Rn, *a))
    frame = pd.read_csv(snli_dir / "snli_train_sample.csv", keep_default_na=False)
    X = tfidf_svd_features(frame["hypothesis"].tolist(), frame["premise"].tolist(),
                           n_components=32, random_state=0)
    y = frame["label"].to_numpy()
    held = np.arange(len(y)) % 6 == 0
    tables = {method: knn_distance_measures(X[~held], y[~held], X[held], y[held], ks=(1, 10),
                                            n_bootstrap=0, method=method).table
              for method in ("exact", "approximate")}
    keys = ["scope", "class", "relation", "k"]
    both = tables["exact"].merge(tables["approximate"], on=keys, suffixes=("_exact", "_approx"))
    assert len(both) == len(tables["exact"]) > 0
    gap = both["mean_distance_approx"] - both["mean_distance_exact"]
    assert (gap >= -1e-6).all() and gap.max() < 0.01
    assert searched and max(searched) > 4096  # the inverted file searched (not all exactly)


def test_random_removal_control_beside_aflite(snli_dir):
    """Distances can only grow when rows are removed; the control removes as many rows with
    the same label counts at random, so only the excess growth is AFLite's."""
    import pandas as pd

    from aflite_core.measures.knn import random_control
    from aflite_core.represent._builders import tfidf_svd_features

    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False).iloc[:3000]
    X = tfidf_svd_features(frame["hypothesis"].tolist(), frame["premise"].tolist(),
                           n_components=32, random_state=0)
    y = frame["label"].to_numpy()
    held = np.arange(len(y)) % 5 == 0
    keep = np.arange((~held).sum()) % 3 != 0  # remove a third of the training rows
    control = random_control(X[~held], y[~held], X[held], y[held], keep, n_draws=3,
                             random_state=0)
    assert set(control["scope"]) == {"random"} and (control["n_draws"] == 3).all()
    assert control["random_std"].notna().all() and (control["random_std"] >= 0).all()
    before = knn_distance_measures(X[~held], y[~held], X[held], y[held],
                                   n_bootstrap=0).table.set_index(["class", "relation", "k"])
    rand = control.set_index(["class", "relation", "k"])
    common = rand.index.intersection(before.index)
    grew = rand.loc[common, "mean_distance"] - before.loc[common, "mean_distance"]
    assert (grew >= -1e-6).all()  # a subset's neighbours are never nearer
    assert (grew > 0).any()


def test_one_search_serves_the_retained_rows_and_every_control_mask():
    rng = np.random.default_rng(5)
    Xt, Xh = rng.normal(size=(900, 12)), rng.normal(size=(70, 12))
    yt, yh = rng.integers(0, 3, 900), rng.integers(0, 3, 70)
    masks = [rng.random(900) < p for p in (0.5, 0.3, 0.7, 0.5, 0.6, 0.4)]
    # six masks: more than one pass of MASKS_PER_PASS
    both = knn_distance_measures(Xt, yt, Xh, yh, retained_mask=masks[0],
                                 control_masks=masks[1:], n_bootstrap=0)
    assert len(both.controls) == 5
    alone = knn_distance_measures(Xt, yt, Xh, yh, retained_mask=masks[0], n_bootstrap=0)
    pd.testing.assert_frame_equal(both.table, alone.table)
    pd.testing.assert_frame_equal(both.per_example, alone.per_example)
    for mask, control in zip(masks[1:], both.controls, strict=True):
        single = knn_distance_measures(Xt, yt, Xh, yh, retained_mask=mask, n_bootstrap=0)
        expected = single.table[single.table["scope"] == "after"].reset_index(drop=True)
        pd.testing.assert_frame_equal(control.reset_index(drop=True), expected,
                                      check_exact=False, rtol=1e-6)


def test_queries_are_a_seeded_sample_above_max_queries():
    held = np.zeros(1000, dtype=bool)
    held[::3] = True
    assert query_sample(held, 500, 0) is held
    sample = query_sample(held, 100, 0)
    assert sample.sum() == 100 and not (sample & ~held).any()
    assert np.array_equal(sample, query_sample(held, 100, 0))
    assert not np.array_equal(sample, query_sample(held, 100, 1))


@pytest.mark.parametrize("width", [30, 1250, 4000, 20_000])
def test_values_only_top_k_matches_the_indexed_top_k(width):
    """The measure's search keeps the k similarities and only the nearest row's index."""
    from aflite_core.measures._neighbors import _topk_block, _topk_values_block

    block = np.random.default_rng(width).normal(size=(300, width)).astype(np.float32)
    k = min(50, width)
    vals, idx = _topk_block(block.copy(), k)
    fast, nearest = _topk_values_block(block.copy(), k)
    assert np.array_equal(fast, vals)
    assert nearest.shape == (300, 1) and np.array_equal(nearest[:, 0], idx[:, 0])
    assert np.array_equal(fast[:, 0], block.max(axis=1))


def test_rows_are_normalised_in_chunks_exactly_as_all_at_once(monkeypatch):
    """Chunked normalisation (bounded memory at 1M rows) gives every row bit for bit what a
    whole-array normalisation gives, zero rows stay zero, and ``rows=`` gathers rows without
    a copy of them first."""
    from aflite_core.measures import _neighbors as neighbors

    rng = np.random.default_rng(11)
    X = (rng.normal(size=(1000, 24)) * rng.uniform(0.01, 50, size=(1000, 1)))
    X[[3, 700]] = 0.0
    X32 = X.astype(np.float32)
    norms = np.linalg.norm(X32, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    whole = X32 / norms
    monkeypatch.setattr(neighbors, "NORMALIZE_CHUNK", 64)  # many chunks, a ragged last one
    got = neighbors.l2_normalize(X)
    assert got.dtype == np.float32 and got.flags.c_contiguous
    np.testing.assert_array_equal(got, whole)
    assert not got[[3, 700]].any()
    np.testing.assert_allclose(np.linalg.norm(got[got.any(axis=1)], axis=1), 1.0, rtol=1e-6)
    rows = np.sort(rng.choice(1000, size=333, replace=False))
    np.testing.assert_array_equal(neighbors.l2_normalize(X, rows=rows), whole[rows])
    assert neighbors.l2_normalize(X[:0]).shape == (0, 24)


def test_rows_of_phi_give_the_result_of_their_copies():
    """An audit passes Φ itself with its split's positions (``train_rows`` /
    ``heldout_rows``) instead of copies of the rows: the same tables and examples, bit for bit;
    positions out of range are refused by name."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((900, 12)).astype(np.float32)
    y = rng.integers(0, 3, 900)
    train = np.flatnonzero(rng.random(900) < 0.8)
    held = np.setdiff1d(np.arange(900), train)[::2]
    keep = rng.random(len(train)) < 0.6
    copies = knn_distance_measures(X[train], y[train], X[held], y[held], retained_mask=keep,
                                   control_masks=[~keep], n_bootstrap=50)
    rows = knn_distance_measures(X, y[train], X, y[held], retained_mask=keep,
                                 control_masks=[~keep], n_bootstrap=50, train_rows=train,
                                 heldout_rows=held)
    pd.testing.assert_frame_equal(rows.table, copies.table, check_exact=True)
    pd.testing.assert_frame_equal(rows.per_example, copies.per_example, check_exact=True)
    pd.testing.assert_frame_equal(rows.controls[0], copies.controls[0], check_exact=True)
    assert rows.params == copies.params
    with pytest.raises(ValueError, match=r"train_rows must be positions in 0\.\.899"):
        knn_distance_measures(X, y[:2], X, y[:2], train_rows=[0, 900], heldout_rows=[1, 2])


def test_a_search_of_rows_among_themselves_is_the_search_among_their_copy():
    """``exact_topk(X, X)`` (the map's fitted rows among themselves) gives the similarities of
    ``exact_topk(X, copy of X)``: numpy takes ``A @ A.T`` of one aligned array to BLAS's
    symmetric kernel, which rounds otherwise (on an AMD EPYC the 2,000 rows' distances
    differed, and the same rows sent to a worker, unaligned there, went to the general
    kernel: the map differed from the one made here)."""
    from aflite_core.measures._neighbors import exact_topk, l2_normalize

    rng = np.random.default_rng(1)
    X = l2_normalize(rng.standard_normal((2_000, 16)).astype(np.float32))
    same = exact_topk(X, X, 16, 4_096)
    copied = exact_topk(X, X.copy(), 16, 4_096)
    assert same[0].tobytes() == copied[0].tobytes()
    np.testing.assert_array_equal(same[1], copied[1])
    assert (same[1][:, 0] == np.arange(2_000)).all()  # each row nearest itself


def test_a_merge_takes_its_parts_one_at_a_time_and_keeps_the_top_k_of_them_all():
    """The parts come from a generator, each merged into the top k so far (a merge held
    every part side by side: 0.2 GB each, fifteen at once on 16 cores); the values are the
    k largest of the concatenation, sorted, -inf padded when fewer."""
    from aflite_core.measures.knn import _merge_topk

    rng = np.random.default_rng(7)
    widths = [3, 50, 1, 50, 17, 50]
    parts = [np.round(rng.random((40, w)), 2).astype(np.float32) for w in widths]  # ties
    parts[2][:5] = -np.inf
    taken = []

    def one_at_a_time():
        for part in parts:
            taken.append(len(taken))
            yield part

    for k in (1, 5, 50, 200):
        taken.clear()
        merged = _merge_topk(one_at_a_time(), k)
        whole = -np.sort(-np.concatenate(parts, axis=1), axis=1)[:, :k]
        expected = np.full((40, k), -np.inf, dtype=np.float32)
        expected[:, :whole.shape[1]] = whole
        np.testing.assert_array_equal(merged, expected)
        assert merged.dtype == np.float32 and taken == list(range(len(parts)))
    np.testing.assert_array_equal(_merge_topk(iter([parts[0]]), 5)[:, 3:],
                                  np.full((40, 2), -np.inf, dtype=np.float32))
    with pytest.raises(AssertionError):
        _merge_topk(iter([]), 5)
