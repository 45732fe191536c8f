"""Multiple-choice AFLite: questions are the instances, every row of X is one choice.

Planted data first (a feature carried by the right choice of a known subset of questions must
make exactly those questions leave first; with the right choice drawn at random the scores sit
at chance), then the row/question bookkeeping and the validation messages, then the real ARCT
fixture (two warrants per question) loaded through the multiple-choice loader.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from planted import arct_multiple_choice
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from aflite_core.filter import _multiple_choice as multiple_choice
from aflite_core.filter._multiple_choice import MultipleChoiceAFLite

HISTORY_COLUMNS = [
    "round", "size", "size_rows", "train_size", "removed", "size_after", "n_scored",
    "n_above_tau", "score_mean", "chance_mean", "score_q10", "score_q25", "score_q50",
    "score_q75", "score_q90", "seconds",
]


def make_mc(n_questions=600, n_choices=4, d=16, *, biased=0.25, strength=2.5, seed=0):
    """Choice rows with a planted cue: the right choice of a ``biased`` share of the questions
    is shifted along the first 3 features. Rows are shuffled; question ids are strings.

    ``n_choices`` may be a sequence (cycled over the questions) for mixed choice counts.
    Returns ``X, y, groups, biased_ids`` (the set of planted question ids).
    """
    rng = np.random.default_rng(seed)
    counts = np.resize(np.atleast_1d(n_choices), n_questions)
    q = np.repeat(np.arange(n_questions), counts)
    X = rng.standard_normal((len(q), d)).astype(np.float32)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    right_rows = starts + (rng.random(n_questions) * counts).astype(int)
    y = np.zeros(len(q), dtype=bool)
    y[right_rows] = True
    planted = rng.random(n_questions) < biased
    X[right_rows[planted], :3] += strength
    perm = rng.permutation(len(q))
    ids = np.array([f"q{i}" for i in range(n_questions)], dtype=object)
    return X[perm], y[perm], ids[q[perm]], set(ids[planted])


@pytest.fixture(scope="module")
def planted():
    return make_mc()


# ---------------------------------------------------------------- planted data


def test_planted_questions_leave_first_and_most_are_found(planted):
    X, y, groups, biased = planted
    est = MultipleChoiceAFLite(target_size=0.5, slice_size=30, random_state=0).fit(
        X, y, groups=groups
    )
    is_biased = np.array([q in biased for q in est.question_ids_])
    removed = ~est.question_keep_mask_
    first = est.question_removal_round_ == 1
    assert first.sum() == 30
    # The first slice is mostly planted questions (base rate 0.25). The others are questions
    # whose right choice happens to lie far out along the cue (1 in 4 by chance): every
    # partition's scorer ranks them right too, so no filter of this kind can tell them apart.
    assert is_biased[first].mean() >= 0.75
    assert is_biased[removed].mean() > 0.75
    assert is_biased[removed].sum() >= 0.8 * is_biased.sum()  # most planted ones left
    # planted questions score far above chance (1/4), the others around it
    scores = est.question_predictability_
    assert np.nanmean(scores[is_biased]) > 0.8
    assert abs(est.history_["score_mean"].iloc[-1] - 0.25) < 0.15


def test_random_right_choices_score_at_chance():
    X, y, groups, _ = make_mc(800, 2, biased=0.0, seed=5)
    est = MultipleChoiceAFLite(target_size=0.5, n_partitions=32, random_state=1).fit(
        X, y, groups=groups
    )
    first = est.history_.iloc[0]
    assert first["chance_mean"] == 0.5
    assert abs(first["score_mean"] - 0.5) < 0.06


def test_a_question_is_kept_or_removed_whole(planted):
    X, y, groups, _ = planted
    est = MultipleChoiceAFLite(target_size=0.6, slice_size=20, random_state=3).fit(
        X, y, groups=groups
    )
    q = est.question_index_
    np.testing.assert_array_equal(est.question_ids_[q], groups)
    np.testing.assert_array_equal(est.keep_mask_, est.question_keep_mask_[q])
    np.testing.assert_array_equal(est.removal_round_, est.question_removal_round_[q])
    np.testing.assert_array_equal(est.predictability_, est.question_predictability_[q])
    frame = pd.DataFrame({"q": groups, "keep": est.keep_mask_, "round": est.removal_round_})
    assert (frame.groupby("q")["keep"].nunique() == 1).all()  # no question split
    assert (frame.groupby("q")["round"].nunique() == 1).all()
    retained = np.flatnonzero(est.keep_mask_)
    removed = np.flatnonzero(~est.keep_mask_)
    assert len(np.intersect1d(retained, removed)) == 0
    np.testing.assert_array_equal(np.sort(np.r_[retained, removed]), np.arange(len(y)))
    assert ((est.removal_round_ == -1) == est.keep_mask_).all()
    assert est.question_keep_mask_.sum() >= est.target_size_ == 360


def test_attributes_shapes_and_chance_with_mixed_choice_counts():
    X, y, groups, _ = make_mc(300, [2, 3, 5], d=8, seed=2)
    est = MultipleChoiceAFLite(target_size=150, n_partitions=8, random_state=0).fit(
        X, y, groups=groups
    )
    n, n_q = len(y), 300
    for name in ("keep_mask_", "predictability_", "removal_round_", "question_index_"):
        assert getattr(est, name).shape == (n,), name
    for name in ("question_ids_", "question_keep_mask_", "question_predictability_",
                 "question_removal_round_", "n_choices_", "chance_", "right_row_"):
        assert getattr(est, name).shape == (n_q,), name
    assert est.keep_mask_.dtype == bool and est.removal_round_.dtype == np.int64
    assert est.n_questions_ == n_q and est.n_features_in_ == 8
    assert sorted(set(est.n_choices_.tolist())) == [2, 3, 5]
    np.testing.assert_allclose(est.chance_, 1.0 / est.n_choices_)
    assert y[est.right_row_].all()  # the right row of each question is its right choice
    np.testing.assert_array_equal(est.question_index_[est.right_row_], np.arange(n_q))
    assert list(est.history_.columns) == HISTORY_COLUMNS
    assert est.n_rounds_ == len(est.history_)
    assert est.stop_reason_ in ("target_size", "too_few_above_tau")
    first = est.history_.iloc[0]
    assert first["size"] == n_q and first["size_rows"] == n and first["train_size"] == 150
    np.testing.assert_allclose(first["chance_mean"], est.chance_.mean())


def test_same_seed_same_result_whatever_n_jobs(planted, monkeypatch):
    X, y, groups, _ = planted
    params = {"target_size": 0.5, "n_partitions": 16, "slice_size": 25, "random_state": 7}
    one = MultipleChoiceAFLite(**params).fit(X, y, groups=groups)
    monkeypatch.setattr(multiple_choice, "_CHUNK_ROWS", 200)  # several chunks
    many = MultipleChoiceAFLite(**params, n_jobs=2).fit(X, y, groups=groups)
    np.testing.assert_array_equal(one.keep_mask_, many.keep_mask_)
    np.testing.assert_array_equal(one.removal_round_, many.removal_round_)
    np.testing.assert_allclose(one.predictability_, many.predictability_, equal_nan=True)
    again = clone(one).fit(X, y, groups=groups)
    np.testing.assert_array_equal(again.predictability_, one.predictability_)


def test_train_size_int_slice_sampling_and_callback_stop(planted):
    X, y, groups, _ = planted
    seen = []

    def callback(info):
        seen.append(info)
        return info["round"] == 2

    est = MultipleChoiceAFLite(target_size=100, train_size=100, slice_size=10, tau=0.5,
                               strategy="slice_sampling", n_partitions=8, random_state=0,
                               callback=callback).fit(X, y, groups=groups)
    assert est.stop_reason_ == "callback" and est.n_rounds_ == 2
    assert (est.history_["train_size"] == 100).all()
    assert seen[1]["size"] == 600 - 20 and seen[1]["n_samples"] == 600
    assert seen[1]["size_rows"] == est.keep_mask_.sum()
    assert {"round", "size_before", "removed", "removed_total", "target_size", "n_above_tau",
            "seconds", "elapsed", "stop_reason"} <= set(seen[0])


def test_fit_predict_and_not_fitted(planted):
    X, y, groups, _ = planted
    est = MultipleChoiceAFLite(target_size=0.5, n_partitions=4, random_state=0)
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    mask = est.fit_predict(X, y, groups=groups)
    np.testing.assert_array_equal(mask, est.keep_mask_)
    assert est.get_params()["target_size"] == 0.5


# ---------------------------------------------------------------- validation


def small():
    X = np.arange(24, dtype=np.float32).reshape(12, 2) % 5
    groups = np.array(["a", "a", "b", "b", "c", "c", "c", "d", "d", "e", "e", "e"])
    y = np.array([1, 0, 0, 1, 0, 1, 0, 1, 0, 0, 0, 1])
    return X, y, groups


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (lambda X, y, g: (X, np.r_[1, 1, y[2:]], g), ValueError,
         r"y: question 'a' has 2 right choices \(rows 0, 1\); expected exactly one"),
        (lambda X, y, g: (X, np.r_[y[:9], 0, 0, 0], g), ValueError,
         r"y: question 'e' has no right choice \(rows 9, 10, 11\)"),
        (lambda X, y, g: (X, y, np.r_[g[:7], ["d", "x"], g[9:]]), ValueError,
         r"groups: question 'd' has 1 choice \(row 7\); a question needs at least 2"),
        (lambda X, y, g: (X, np.where(y == 1, "right", "wrong"), g), TypeError,
         r"y: expected booleans or 0/1 .*pass y == 'right'"),
        (lambda X, y, g: (X, y * 2, g), ValueError, r"got 2 at row 0"),
        (lambda X, y, g: (X, y, g[:-1]), ValueError, "same length"),
        (lambda X, y, g: (X, y, np.r_[g[:-1], [None]].astype(object)), ValueError,
         "missing question ids"),
        (lambda X, y, g: (X, y[:-1], g), ValueError, "X and y must have the same length"),
        (lambda X, y, g: (np.where(np.eye(12, 2, dtype=bool), np.nan, X), y, g), ValueError,
         "NaN"),
    ],
)
def test_bad_inputs_name_what_is_wrong(change, error, match):
    X, y, groups = change(*small())
    with pytest.raises(error, match=match):
        MultipleChoiceAFLite(target_size=2, n_partitions=2).fit(X, y, groups=groups)


def test_sizes_count_questions():
    X, y, groups = small()
    est = MultipleChoiceAFLite(target_size=5, n_partitions=2)
    with pytest.raises(ValueError, match="target_size: expected fewer questions than the "
                                         "input's 5"):
        est.fit(X, y, groups=groups)
    with pytest.raises(ValueError, match="train_size: expected at most target_size=2"):
        est.set_params(target_size=2, train_size=3).fit(X, y, groups=groups)
    with pytest.raises(TypeError, match="n_partitions"):
        est.set_params(train_size=0.5, n_partitions=1.5).fit(X, y, groups=groups)
    est.set_params(n_partitions=4, random_state=0).fit(X, y, groups=groups)
    assert est.target_size_ == 2 and est.slice_size_ == 1  # 2% of 5 questions, at least 1
    assert est.question_ids_.tolist() == ["a", "b", "c", "d", "e"]


# ---------------------------------------------------------------- real data: ARCT


@pytest.fixture(scope="module")
def arct(real_data, tmp_path_factory):
    from aflite_core.represent._builders import build_representation

    ds = arct_multiple_choice(real_data, tmp_path_factory.mktemp("arct"))
    rep = build_representation(ds, "tfidf_svd", n_components=128, random_state=0)
    groups = ds.frame.loc[ds.included_mask, "question_id"].to_numpy()
    return ds, rep, ds.labels() == "right", groups


def test_arct_questions_are_never_split_and_scores_are_sane(arct):
    ds, rep, y, groups = arct
    assert len(y) == 2420 and y.sum() == 1210
    est = MultipleChoiceAFLite(target_size=0.5, random_state=0).fit(rep.X, y, groups=groups)
    assert est.n_questions_ == 1210 and (est.n_choices_ == 2).all()
    assert est.chance_.mean() == 0.5
    frame = pd.DataFrame({"q": groups, "keep": est.keep_mask_, "p": est.predictability_})
    assert (frame.groupby("q")["keep"].nunique() == 1).all()
    assert (frame.groupby("q")["p"].nunique(dropna=False) == 1).all()
    assert est.keep_mask_.sum() == 2 * est.question_keep_mask_.sum()
    # ARCT's warrants carry known lexical cues (Niven & Kao, ACL 2019): the linear scorer on
    # TF-IDF does better than chance, though far from perfect
    first = est.history_.iloc[0]
    assert 0.53 < first["score_mean"] < 0.8
    assert est.n_rounds_ >= 1 and est.question_keep_mask_.sum() >= 605
    # and the removed questions were the predictable ones
    removed = ~est.question_keep_mask_
    if removed.any():
        assert np.nanmin(est.question_predictability_[removed]) >= 0.75


def test_arct_with_shuffled_answers_scores_at_chance(arct):
    _, rep, y, groups = arct
    codes = pd.factorize(groups)[0]
    flip = np.random.default_rng(0).random(codes.max() + 1) < 0.5
    est = MultipleChoiceAFLite(target_size=0.5, random_state=0).fit(
        rep.X, y ^ flip[codes], groups=groups
    )
    assert abs(est.history_["score_mean"].iloc[0] - 0.5) < 0.05
