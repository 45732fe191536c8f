"""Planted-bias generators: the benchmark workload and the paper's circles experiment."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.svm import SVC

from aflite_core.filter.synthetic import make_biased_circles, make_planted


def test_make_planted_shapes_dtypes_and_share():
    X, y, biased = make_planted(5000, 40, classes=4, biased=0.3, random_state=1)
    assert X.shape == (5000, 40) and X.dtype == np.float32
    assert y.shape == (5000,) and set(np.unique(y)) == {0, 1, 2, 3}
    assert biased.dtype == bool and abs(biased.mean() - 0.3) < 0.03


def test_make_planted_bias_is_linearly_readable_only_on_biased_rows():
    X, y, biased = make_planted(4000, 32, random_state=0)
    acc_biased = cross_val_score(LogisticRegression(max_iter=300), X[biased], y[biased], cv=3)
    acc_clean = cross_val_score(LogisticRegression(max_iter=300), X[~biased], y[~biased], cv=3)
    assert acc_biased.mean() > 0.8
    assert acc_clean.mean() < 0.42  # chance is 1/3


def test_make_planted_is_reproducible_and_chunk_size_free():
    a = make_planted(3000, 8, random_state=7, chunk_rows=3000)
    b = make_planted(3000, 8, random_state=7, chunk_rows=257)
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)
    c = make_planted(3000, 8, random_state=8)
    assert not np.array_equal(a[0], c[0])


def test_make_planted_fills_a_memory_mapped_npy(tmp_path):
    path = tmp_path / "X.npy"
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(2000, 16))
    X, y, biased = make_planted(2000, 16, random_state=2, out=out, chunk_rows=300)
    assert X is out
    out.flush()
    del out, X
    expected = make_planted(2000, 16, random_state=2)[0]
    np.testing.assert_array_equal(np.load(path, mmap_mode="r"), expected)


@pytest.mark.parametrize(
    "kwargs, name",
    [({"n": 0}, "n"), ({"classes": 1}, "classes"), ({"biased": 1.5}, "biased"),
     ({"bias_dims": 99}, "bias_dims"), ({"out": np.zeros((3, 3))}, "out")],
)
def test_make_planted_rejects_bad_parameters(kwargs, name):
    params = {"n": 100, "d": 16, **kwargs}
    with pytest.raises(ValueError, match=name):
        make_planted(**params)


def test_biased_circles_structure():
    X, y, biased, flipped = make_biased_circles(2000, n_bias_features=3, flip=0.1,
                                                random_state=0)
    assert X.shape == (2000, 5) and X.dtype == np.float32
    circle = np.where(flipped, 1 - y, y)
    for c in (0, 1):
        assert abs(biased[circle == c].mean() - 0.75) < 0.01
    assert not (flipped & ~biased).any()
    assert flipped.sum() == round(0.1 * biased.sum())
    radius = np.hypot(X[:, 0], X[:, 1])
    assert np.all(np.abs(radius[circle == 0] - 1.0) < 0.3)
    assert np.all(np.abs(radius[circle == 1] - 0.5) < 0.3)


def test_biased_circles_bias_is_linear_and_circles_are_not():
    X, y, biased, _ = make_biased_circles(1500, separation=4.0, random_state=1)
    lin_bias = cross_val_score(LogisticRegression(), X[biased][:, 2:], y[biased], cv=3).mean()
    lin_xy = cross_val_score(LogisticRegression(), X[:, :2], y, cv=3).mean()
    rbf_xy = cross_val_score(SVC(), X[:, :2], y, cv=3).mean()
    assert lin_bias > 0.9
    assert lin_xy < 0.65
    assert rbf_xy > 0.95
    # the unbiased rows' extra features carry no label information
    noise = cross_val_score(LogisticRegression(), X[~biased][:, 2:], y[~biased], cv=3).mean()
    assert noise < 0.6


def test_flipped_rows_carry_the_bias_of_their_new_label():
    X, y, biased, flipped = make_biased_circles(3000, separation=6.0, flip=0.1, random_state=2)
    clf = LogisticRegression().fit(X[biased & ~flipped][:, 2:], y[biased & ~flipped])
    assert np.mean(clf.predict(X[flipped][:, 2:]) == y[flipped]) > 0.9


@pytest.mark.parametrize(
    "kwargs, name",
    [({"n_samples": 2}, "n_samples"), ({"flip": -0.1}, "flip"), ({"biased": 2}, "biased"),
     ({"factor": 1.5}, "factor"), ({"n_bias_features": 0}, "n_bias_features")],
)
def test_biased_circles_rejects_bad_parameters(kwargs, name):
    with pytest.raises(ValueError, match=name):
        make_biased_circles(**kwargs)
