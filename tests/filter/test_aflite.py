"""AFLite (aflite_core.filter._aflite): planted bias, the paper's circles, rules of Algorithm 1."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.svm import SVC

from aflite_core.filter._aflite import AFLite
from aflite_core.filter._rounds import _select_removals
from aflite_core.filter.synthetic import make_biased_circles, make_planted


@pytest.fixture(scope="module")
def planted():
    return make_planted(3000, 32, random_state=0)


@pytest.fixture(scope="module")
def small():
    """Two row blocks (the block size is at most 4096 rows), so n_jobs has work to share."""
    return make_planted(6000, 16, random_state=5)


def _fit(X, y, **params):
    defaults = {"target_size": 0.5, "n_partitions": 16, "random_state": 0}
    return AFLite(**{**defaults, **params}).fit(X, y)


# -- what AFLite is for ---------------------------------------------------------------------
def test_removes_planted_bias_while_a_random_subset_keeps_it(planted):
    X, y, biased = planted
    # precondition: the planted bias is what a linear model can read
    readable = cross_val_score(LogisticRegression(max_iter=300), X[biased], y[biased], cv=3)
    assert readable.mean() > 0.8

    est = _fit(X, y, n_partitions=32)
    keep = est.keep_mask_
    assert 1 - keep[biased].mean() >= 0.85
    assert biased[keep].mean() < 0.1

    rng = np.random.default_rng(0)
    random_keep = rng.choice(len(y), size=int(keep.sum()), replace=False)
    assert abs(biased[random_keep].mean() - biased.mean()) < 0.05


def test_biased_circles_linear_falls_to_chance_rbf_stays_high():
    X, y, biased, flipped = make_biased_circles(2000, separation=4.0, flip=0.1, random_state=0)
    before = cross_val_score(LogisticRegression(), X, y, cv=5).mean()
    est = AFLite(target_size=0.3, n_partitions=64, slice_size=50, random_state=0).fit(X, y)
    keep = est.keep_mask_
    linear = cross_val_score(LogisticRegression(), X[keep], y[keep], cv=5).mean()
    rbf = cross_val_score(SVC(), X[keep], y[keep], cv=5).mean()
    assert before > 0.8
    assert linear < 0.65
    assert rbf > 0.85
    assert 1 - keep[flipped].mean() >= 0.7
    # what is left is mostly the rows without a planted bias
    assert biased[keep].mean() < biased.mean() - 0.2


# -- fitted attributes ----------------------------------------------------------------------
def test_fitted_attributes_are_consistent(planted):
    X, y, _ = planted
    est = _fit(X, y)
    n = len(y)
    keep, rounds, scores = est.keep_mask_, est.removal_round_, est.predictability_
    assert keep.shape == rounds.shape == scores.shape == (n,)
    assert np.array_equal(keep, rounds == -1)
    assert set(np.unique(rounds[~keep])) <= set(range(1, est.n_rounds_ + 1))
    assert np.all(scores[~keep] >= 0.75)  # removed rows scored >= tau when removed
    hist = est.history_
    assert isinstance(hist, pd.DataFrame) and len(hist) == est.n_rounds_
    assert {"round", "size", "removed", "n_above_tau", "score_q50", "seconds"} <= set(hist)
    assert hist["round"].tolist() == list(range(1, est.n_rounds_ + 1))
    assert hist["size"].iloc[0] == n
    np.testing.assert_array_equal(hist["size"].iloc[1:], hist["size_after"].iloc[:-1])
    assert hist["removed"].sum() == n - keep.sum()
    for r, row in hist.iterrows():
        assert (rounds == r + 1).sum() == row["removed"]
    assert list(est.classes_) == [0, 1, 2]


def test_string_labels_give_the_same_mask_as_codes(planted):
    X, y, _ = planted
    names = np.array(["contradiction", "entailment", "neutral"])[y]
    a, b = _fit(X, y), _fit(X, names.astype(object))
    np.testing.assert_array_equal(a.keep_mask_, b.keep_mask_)
    assert list(b.classes_) == ["contradiction", "entailment", "neutral"]


def test_float64_lists_and_memmaps_give_the_same_mask(planted, tmp_path):
    X, y, _ = planted
    reference = _fit(X, y).keep_mask_
    np.testing.assert_array_equal(_fit(X.astype(np.float64), y).keep_mask_, reference)
    np.save(tmp_path / "X.npy", X)
    mapped = np.load(tmp_path / "X.npy", mmap_mode="r")
    np.testing.assert_array_equal(_fit(mapped, y.tolist()).keep_mask_, reference)


# -- stopping rules -------------------------------------------------------------------------
def test_stops_at_target_size_and_never_goes_below(planted):
    X, y, _ = planted
    est = _fit(X, y, target_size=2650, slice_size=100, tau=0.5)
    assert est.stop_reason_ == "target_size"
    assert est.keep_mask_.sum() == 2650  # 3000 - 350: the last slice is capped at 50
    assert est.history_["removed"].tolist()[-1] == 50


def test_stops_when_fewer_than_slice_size_pass_tau():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 8)).astype(np.float32)  # labels carry no signal
    y = rng.integers(0, 3, 1500)
    est = AFLite(target_size=100, n_partitions=8, slice_size=200, tau=0.9,
                 random_state=0).fit(X, y)
    assert est.stop_reason_ == "too_few_above_tau"
    last = est.history_.iloc[-1]
    assert last["removed"] == last["n_above_tau"] < 200
    assert est.keep_mask_.sum() > 100


def test_tau_one_removes_only_perfectly_predicted_rows(planted):
    X, y, _ = planted
    est = _fit(X, y, tau=1.0)
    assert np.all(est.predictability_[~est.keep_mask_] == 1.0)


def test_callback_gets_round_info_and_can_stop(planted):
    X, y, _ = planted
    seen = []

    def callback(info):
        seen.append(info)
        return info["round"] == 2

    est = _fit(X, y, callback=callback)
    assert est.stop_reason_ == "callback" and est.n_rounds_ == 2
    assert [i["round"] for i in seen] == [1, 2]
    keys = {"round", "size", "removed", "removed_total", "target_size", "seconds", "elapsed"}
    assert keys <= set(seen[0])
    assert seen[1]["removed_total"] == seen[0]["removed"] + seen[1]["removed"]
    assert seen[1]["size"] == len(y) - seen[1]["removed_total"] == est.keep_mask_.sum()
    assert seen[0]["target_size"] == 1500


def test_callback_returning_other_truthy_values_does_not_stop(planted):
    X, y, _ = planted
    est = _fit(X, y, callback=lambda info: "yes")
    assert est.stop_reason_ != "callback"


# -- tie-breaking and the never-held-out rule -----------------------------------------------
def test_ties_are_broken_by_the_seeded_priority():
    scores = np.array([1.0, 0.9, 1.0, 1.0, 0.8])
    priority = np.array([7, 0, 3, 1, 2])
    rng = np.random.default_rng(0)
    chosen = _select_removals(scores, priority, 2, "greedy_slicing", rng)
    assert chosen.tolist() == [3, 2]  # the score-1.0 rows with the lowest priority ranks
    chosen = _select_removals(scores, priority, 4, "greedy_slicing", rng)
    assert chosen.tolist() == [3, 2, 0, 1]


def test_slice_sampling_prefers_high_scores_and_takes_all_when_few():
    scores = np.array([1.0] * 50 + [0.76] * 50)
    priority = np.arange(100)
    picks = np.concatenate([
        _select_removals(scores, priority, 10, "slice_sampling", np.random.default_rng(s))
        for s in range(200)
    ])
    share_high = np.mean(picks < 50)
    assert 0.53 < share_high < 0.62  # proportional to 1.0 : 0.76 (about 0.57), not greedy
    assert _select_removals(scores[:5], priority[:5], 10, "slice_sampling",
                            np.random.default_rng(0)).tolist() == [0, 1, 2, 3, 4]


def test_tied_duplicates_are_resolved_reproducibly(planted):
    X, y, _ = planted
    X2 = np.concatenate([X, X])  # every row twice: ties everywhere
    y2 = np.concatenate([y, y])
    a = _fit(X2, y2, random_state=3)
    b = _fit(X2, y2, random_state=3)
    np.testing.assert_array_equal(a.keep_mask_, b.keep_mask_)
    np.testing.assert_array_equal(a.removal_round_, b.removal_round_)


def test_rows_never_held_out_get_no_score_and_are_not_removed(planted):
    X, y, _ = planted
    # one partition training on 90% of S: each round only ~10% of the rows are held out
    est = _fit(X, y, n_partitions=1, train_size=0.9, slice_size=30, tau=0.75)
    hist = est.history_
    assert np.all(hist["n_scored"] < 0.15 * hist["size"])
    assert np.all(hist["removed"] <= hist["n_scored"])
    removed = ~est.keep_mask_
    assert np.isfinite(est.predictability_[removed]).all()
    # with one partition a held-out row scores 0 or 1; never-held-out rows are NaN, not 0
    last = est.predictability_[est.keep_mask_]
    assert np.isnan(last).mean() > 0.8
    assert set(np.unique(last[~np.isnan(last)])) <= {0.0, 1.0}


def test_fraction_train_size_follows_the_current_set(planted):
    X, y, _ = planted
    hist = _fit(X, y, train_size=0.3).history_
    np.testing.assert_array_equal(hist["train_size"], np.round(0.3 * hist["size"]))
    hist = _fit(X, y, train_size=1200).history_
    assert (hist["train_size"] == 1200).all()


# -- strategies -----------------------------------------------------------------------------
def test_greedy_removes_one_row_per_round():
    X, y, biased = make_planted(300, 8, strength=3.0, random_state=1)
    est = AFLite(target_size=280, strategy="greedy", n_partitions=8, random_state=0).fit(X, y)
    assert (est.history_["removed"] <= 1).all()
    assert est.slice_size_ == 1
    assert est.n_rounds_ == 20 and est.keep_mask_.sum() == 280


def test_slice_sampling_removes_the_bias_too(planted):
    X, y, biased = planted
    est = _fit(X, y, strategy="slice_sampling", n_partitions=32)
    greedy = _fit(X, y, n_partitions=32)
    assert 1 - est.keep_mask_[biased].mean() >= 0.8
    assert not np.array_equal(est.keep_mask_, greedy.keep_mask_)


# -- determinism ----------------------------------------------------------------------------
def test_same_mask_whatever_n_jobs(small):
    X, y, _ = small
    runs = [_fit(X, y, n_jobs=n, random_state=11) for n in (None, 2, 3)]
    for other in runs[1:]:
        np.testing.assert_array_equal(runs[0].keep_mask_, other.keep_mask_)
        np.testing.assert_array_equal(runs[0].removal_round_, other.removal_round_)
        np.testing.assert_array_equal(runs[0].predictability_, other.predictability_)


def test_same_result_whatever_n_jobs_when_held_out_rows_are_drawn_and_a_callback_stops(small):
    # train_size > |S| / 2 samples the held-out side; the callback stops while the next
    # round's partitions and covariance are being prepared ahead on the pool threads
    X, y, _ = small
    runs = [
        _fit(X, y, n_jobs=n, random_state=4, train_size=0.7, slice_size=150, tau=0.6,
             strategy="slice_sampling", callback=lambda info: info["round"] == 3)
        for n in (None, 2)
    ]
    assert runs[0].n_rounds_ == 3 and runs[0].stop_reason_ == "callback"
    for name in ("keep_mask_", "removal_round_", "predictability_"):
        np.testing.assert_array_equal(getattr(runs[0], name), getattr(runs[1], name))
    np.testing.assert_array_equal(runs[0].history_["train_size"],
                                  np.round(0.7 * runs[0].history_["size"]))


@pytest.mark.parametrize(("train_size", "block_rows"), [(30, 100), (0.7, 100), (0.7, 1200)])
def test_round_partitions_have_exactly_t_training_rows_among_alive_rows(train_size, block_rows):
    from aflite_core.filter._aflite_rounds import _draw_round
    from aflite_core.filter._backends import RowBlocks

    rng = np.random.default_rng(0)
    n = 1200
    codes = rng.choice(3, size=n, p=[0.8, 0.1, 0.1])  # > 255 training rows in one segment
    blocks = RowBlocks(codes, 3, block_rows)
    alive = rng.random(n) < 0.6
    m = 5
    drawn = _draw_round(rng, blocks, alive, {"m": m, "train": train_size})
    n_s = int(alive.sum())
    t = 30 if train_size == 30 else round(0.7 * n_s)
    assert drawn["t"] == t
    assert np.array_equal(np.sort(drawn["s_rows"]), np.flatnonzero(alive))
    # each block's mask marks working-copy rows; map them back to input rows
    train = np.zeros((m, n), dtype=bool)
    for rows, tw in zip(blocks.rows, drawn["train_w"], strict=True):
        train[:, rows] |= tw
    assert (train.sum(axis=1) == t).all()
    assert not train[:, ~alive].any()
    np.testing.assert_array_equal(drawn["held"], m - train[:, drawn["s_rows"]].sum(axis=0))
    expected = np.stack([(train & (codes == c)).sum(axis=1) for c in range(3)], axis=1)
    np.testing.assert_array_equal(drawn["counts"], expected)


@pytest.mark.parametrize("grouped", [False, True])
def test_packed_draws_are_the_bool_draws_packed_from_the_same_random_stream(grouped,
                                                                            monkeypatch):
    """The Dask backend's draws (``packed``: a batch of partitions at a time, 8 rows a byte)
    are the local backend's masks bit for bit, with the same counts and held-out numbers,
    and leave the random stream where the bool draws leave it (the next round draws alike),
    whatever the batch (one partition to all of them)."""
    import aflite_core.filter._aflite_rounds as rounds_module
    from aflite_core.filter._aflite_rounds import _draw_round
    from aflite_core.filter._backends import RowBlocks

    rng = np.random.default_rng(7)
    for case in range(40):
        monkeypatch.setattr(rounds_module, "PACK_BATCH_BYTES", int(rng.integers(1, 5000)))
        n = int(rng.integers(20, 700))
        n_classes = int(rng.integers(2, 4))
        codes = rng.integers(0, n_classes, n)
        blocks = RowBlocks(codes, n_classes, int(rng.integers(9, 300)))  # blocks of odd sizes
        alive = rng.random(n) < rng.uniform(0.4, 1.0)
        alive[:2] = True
        groups = rng.integers(0, max(2, n // 3), n) if grouped else None
        m = int(rng.integers(1, 12))
        train = [int(rng.integers(1, max(2, int(alive.sum()) - 1))), float(rng.uniform(0.1, 0.9))]
        cfg = {"m": m, "train": train[case % 2]}
        seed = int(rng.integers(1 << 30))
        plain_rng, packed_rng = np.random.default_rng(seed), np.random.default_rng(seed)
        plain = _draw_round(plain_rng, blocks, alive, cfg, groups)
        packed = _draw_round(packed_rng, blocks, alive, cfg, groups, packed=True)
        for key in ("s_rows", "t", "counts", "held"):
            np.testing.assert_array_equal(packed[key], plain[key], err_msg=key)
        for bools, bits in zip(plain["train_w"], packed["train_w"], strict=True):
            assert bits.dtype == np.uint8 and bits.shape == (m, (bools.shape[1] + 7) // 8)
            np.testing.assert_array_equal(bits, np.packbits(bools, axis=1))
        assert packed_rng.integers(1 << 62) == plain_rng.integers(1 << 62)


@pytest.mark.parametrize("strategy", ["greedy_slicing", "slice_sampling"])
def test_selection_equals_a_full_sort_by_score_then_priority(strategy):
    from aflite_core.filter._rounds import _select_removals

    rng = np.random.default_rng(2)
    for n, cap in ((50, 10), (2000, 300), (300, 300), (40, 100)):
        scores = rng.integers(12, 17, n) / 16  # heavy ties
        priority = rng.permutation(10 * n)[:n]
        got = _select_removals(scores, priority, cap, strategy, np.random.default_rng(n))
        keys = scores
        if strategy == "slice_sampling":
            keys = np.log(scores) + np.random.default_rng(n).gumbel(size=n)
        expected = np.lexsort((priority, -keys))[:cap]
        if strategy == "slice_sampling" and n <= cap:
            expected = np.arange(n)
        np.testing.assert_array_equal(np.sort(got), np.sort(expected))


def test_blas_is_single_threaded_during_fit_and_restored_after(planted):
    from threadpoolctl import threadpool_info

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    seen = []
    X, y, _ = planted
    for _ in range(2):  # the second fit reuses the cached library scan
        _fit(X, y, callback=lambda info: seen.append(blas_threads()))
        assert blas_threads() == before
    assert seen and all(threads == [1] * len(before) for threads in seen)


def test_seed_controls_the_result(small):
    X, y, _ = small
    a, b = _fit(X, y, random_state=1), _fit(X, y, random_state=1)
    c = _fit(X, y, random_state=2)
    np.testing.assert_array_equal(a.keep_mask_, b.keep_mask_)
    assert not np.array_equal(a.keep_mask_, c.keep_mask_)
    g = _fit(X, y, random_state=np.random.default_rng(1))
    np.testing.assert_array_equal(a.keep_mask_, g.keep_mask_)


def test_get_and_set_params():
    est = AFLite(target_size=10)
    assert est.get_params()["n_partitions"] == 64
    assert est.set_params(tau=0.6).tau == 0.6
    with pytest.raises(ValueError, match="nonsense"):
        est.set_params(nonsense=1)


# -- validation -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "params, error, words",
    [
        ({"target_size": 0}, ValueError, ["target_size", ">= 1", "0"]),
        ({"target_size": 3000}, ValueError, ["target_size", "3000"]),
        ({"target_size": 1.0}, ValueError, ["target_size", "(0, 1)", "1.0"]),
        ({"target_size": "half"}, TypeError, ["target_size", "'half'"]),
        ({"n_partitions": 0}, ValueError, ["n_partitions", ">= 1", "0"]),
        ({"n_partitions": 2.5}, TypeError, ["n_partitions", "2.5"]),
        ({"train_size": 3000}, ValueError, ["train_size", "t < |S|", "3000"]),
        ({"train_size": 1600}, ValueError, ["train_size=1600", "target_size=1500"]),
        ({"train_size": 0}, ValueError, ["train_size", ">= 1", "0"]),
        ({"train_size": 1.0}, ValueError, ["train_size", "(0, 1)", "1.0"]),
        ({"slice_size": 0}, ValueError, ["slice_size", ">= 1", "0"]),
        ({"slice_size": 1.5}, ValueError, ["slice_size", "(0, 1]", "1.5"]),
        ({"tau": 1.5}, ValueError, ["tau", "[0, 1]", "1.5"]),
        ({"tau": -0.1}, ValueError, ["tau", "[0, 1]", "-0.1"]),
        ({"tau": float("nan")}, ValueError, ["tau", "nan"]),
        ({"tau": "0.5"}, TypeError, ["tau", "'0.5'"]),
        ({"strategy": "random"}, ValueError, ["strategy", "greedy_slicing", "'random'"]),
        ({"strategy": "greedy", "slice_size": 5}, ValueError, ["slice_size", "greedy", "5"]),
        ({"classifier": "svm"}, ValueError, ["classifier", "lda", "'svm'"]),
        ({"random_state": "0"}, TypeError, ["random_state", "'0'"]),
        ({"random_state": -1}, ValueError, ["random_state", "-1"]),
        ({"n_jobs": 0}, ValueError, ["n_jobs", "0"]),
        ({"callback": 5}, TypeError, ["callback", "callable", "int"]),
        ({"backend": "spark"}, ValueError, ["backend", "dask", "'spark'"]),
        ({"scheduler": "tcp://x:1"}, ValueError, ["scheduler", "backend='dask'"]),
        ({"backend": "dask", "scheduler": "local:zero"}, ValueError, ["scheduler", "local:N"]),
    ],
)
def test_invalid_parameters_are_named(planted, params, error, words):
    X, y, _ = planted
    with pytest.raises(error) as info:
        AFLite(**{"target_size": 1500, **params}).fit(X, y)
    message = str(info.value)
    for word in words:
        assert word in message, (word, message)


def _data_cases():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4)).astype(np.float32)
    y = np.repeat([0, 1, 2], 20)
    nan_X = X.copy()
    nan_X[7, 2] = np.nan
    inf_X = X.copy()
    inf_X[3, 1] = np.inf
    one_label = np.zeros(60, dtype=int)
    singleton = y.copy()
    singleton[0] = 9
    return [
        (X, one_label, ValueError, ["at least 2 distinct labels", "1"]),
        (X, singleton, ValueError, ["at least 2 examples", "9"]),
        (nan_X, y, ValueError, ["NaN", "row 7", "column 2"]),
        (inf_X, y, ValueError, ["inf", "row 3", "column 1"]),
        (X, y[:50], ValueError, ["same length", "60", "50"]),
        (X[:, 0], y, ValueError, ["2-D", "1-D", "(60,)"]),
        (X[None], y, ValueError, ["2-D", "3-D"]),
        (X.astype(str), y, TypeError, ["real numbers", "dtype"]),
        (X, y.reshape(-1, 1), ValueError, ["y must be 1-D", "(60, 1)"]),
        (X, np.array([None] * 30 + ["a"] * 30, dtype=object), ValueError, ["missing"]),
        (X, np.where(y == 0, np.nan, y), ValueError, ["missing"]),
        (X[:, :0], y, ValueError, ["at least one feature"]),
    ]


@pytest.mark.parametrize("X, y, error, words", _data_cases())
def test_invalid_data_is_named(X, y, error, words):
    with pytest.raises(error) as info:
        AFLite(target_size=30, n_partitions=4).fit(X, y)
    message = str(info.value)
    for word in words:
        assert word in message, (word, message)


def test_too_many_labels_for_the_model_size_is_refused():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3000), 2)
    X = rng.normal(size=(6000, 200)).astype(np.float32)
    with pytest.raises(ValueError, match="3000 distinct labels.*n_partitions=64.*200 features"):
        AFLite(target_size=0.5).fit(X, y)


def test_sparse_features_are_refused():
    from scipy import sparse

    X = sparse.random(40, 5, density=0.5, format="csr", random_state=0)
    with pytest.raises(TypeError, match="dense"):
        AFLite(target_size=20).fit(X, np.repeat([0, 1], 20))


# -- every parameter: a wrong type is a TypeError, a wrong value a ValueError, both named -----
def _tiny():
    rng = np.random.default_rng(1)
    return rng.normal(size=(60, 4)).astype(np.float32), np.repeat([0, 1, 2], 20)


#: (parameter, value, other parameters): each value has the wrong type for its parameter.
WRONG_TYPES = [
    ("target_size", "half", {}),
    ("target_size", None, {}),
    ("target_size", True, {}),  # bool is never a number
    ("n_partitions", 2.5, {}),
    ("n_partitions", "8", {}),
    ("n_partitions", True, {}),
    ("train_size", "0.5", {}),
    ("train_size", None, {}),
    ("slice_size", "5", {}),
    ("slice_size", [5], {}),
    ("slice_size", "1", {"strategy": "greedy"}),
    ("slice_size", True, {"strategy": "greedy"}),
    ("tau", "0.5", {}),
    ("tau", None, {}),
    ("tau", True, {}),
    ("random_state", "0", {}),
    ("random_state", 1.5, {}),
    ("n_jobs", 1.5, {}),
    ("n_jobs", "2", {}),
    ("callback", 5, {}),
    ("callback", "print", {}),
    ("scheduler", 5, {"backend": "dask"}),
]

#: (parameter, value, other parameters): the right type, a value out of range. The choice
#: parameters (strategy, classifier, backend) take anything that is not a choice as a value.
WRONG_VALUES = [
    ("target_size", 0, {}),
    ("target_size", -5, {}),
    ("target_size", 0.0, {}),
    ("target_size", 1.0, {}),
    ("target_size", 60, {}),  # the whole input: nothing to filter
    ("target_size", 61, {}),
    ("n_partitions", 0, {}),
    ("n_partitions", -1, {}),
    ("train_size", 0, {}),
    ("train_size", 1.0, {}),
    ("train_size", -0.5, {}),
    ("train_size", 60, {}),  # t < |S|
    ("train_size", 31, {}),  # above target_size=30
    ("slice_size", 0, {}),
    ("slice_size", 1.5, {}),
    ("slice_size", -0.5, {}),
    ("slice_size", 5, {"strategy": "greedy"}),
    ("slice_size", 0.5, {"strategy": "greedy"}),
    ("tau", 1.5, {}),
    ("tau", -0.1, {}),
    ("tau", float("nan"), {}),
    ("tau", float("inf"), {}),
    ("strategy", "random", {}),
    ("strategy", 5, {}),
    ("classifier", "svm", {}),
    ("classifier", None, {}),
    ("random_state", -1, {}),
    ("n_jobs", 0, {}),
    ("n_jobs", -2, {}),
    ("backend", "spark", {}),
    ("backend", None, {}),
    ("scheduler", "tcp://x:1", {}),  # only with backend="dask"
    ("scheduler", "local:0", {"backend": "dask"}),
    ("scheduler", "local:zero", {"backend": "dask"}),
    ("scheduler", "nowhere", {"backend": "dask"}),
]


def _fit_tiny(name, value, others):
    X, y = _tiny()
    params = {"target_size": 30, "n_partitions": 4, **others, name: value}
    return AFLite(**params).fit(X, y)


@pytest.mark.parametrize(("name", "value", "others"), WRONG_TYPES,
                         ids=[f"{n}={v!r}" for n, v, _ in WRONG_TYPES])
def test_a_parameter_of_the_wrong_type_raises_type_error_naming_it(name, value, others):
    with pytest.raises(TypeError) as info:
        _fit_tiny(name, value, others)
    assert name in str(info.value), str(info.value)


@pytest.mark.parametrize(("name", "value", "others"), WRONG_VALUES,
                         ids=[f"{n}={v!r}" for n, v, _ in WRONG_VALUES])
def test_a_parameter_out_of_range_raises_value_error_naming_it(name, value, others):
    with pytest.raises(ValueError) as info:
        _fit_tiny(name, value, others)
    assert not isinstance(info.value, TypeError), repr(info.value)
    assert name in str(info.value), str(info.value)


@pytest.mark.parametrize(("name", "value"), [("slice_size", 1), ("slice_size", 1.0),
                                             ("slice_size", None)])
def test_greedy_accepts_a_slice_size_of_one(name, value):
    est = _fit_tiny(name, value, {"strategy": "greedy"})
    assert est.slice_size_ == 1


def test_sizes_round_as_documented():
    X, y = _tiny()
    # a fraction of target_size rounds up (60 * 0.505 = 30.3 -> 31); of slice_size to the
    # nearest row (60 * 0.075 = 4.5 -> 4, half to even; 60 * 0.092 = 5.52 -> 6)
    est = AFLite(target_size=0.505, n_partitions=4, slice_size=0.075).fit(X, y)
    assert (est.target_size_, est.slice_size_) == (31, 4)
    est = AFLite(target_size=0.505, n_partitions=4, slice_size=0.092).fit(X, y)
    assert est.slice_size_ == 6
    assert AFLite(target_size=30, n_partitions=4).fit(X, y).slice_size_ == 1  # 2% of 60


def test_resolve_size_rounding_keyword():
    from aflite_core._validation import resolve_size

    assert resolve_size("s", 0.075, 60) == 5  # ceil by default
    assert resolve_size("s", 0.075, 60, rounding="nearest") == 4
    assert resolve_size("s", 0.001, 60, rounding="nearest") == 1  # at least one row
    assert resolve_size("s", 7, 60, rounding="nearest") == 7
    with pytest.raises(ValueError, match="rounding"):
        resolve_size("s", 0.5, 60, rounding="floor")
