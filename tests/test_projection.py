"""2-D projections: planted clusters stay apart, seeded, cached on disk, validated."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aflite_core.measures.projection import cache_key, project


def _clusters(n: int, d: int = 16, k: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(k, d)) * 3
    labels = rng.integers(0, k, n)
    return (centers[labels] + rng.normal(size=(n, d))).astype(np.float32), labels


def _separation(frame: pd.DataFrame, labels: np.ndarray, fit_rows: np.ndarray) -> float:
    """1-NN accuracy in 2-D, trained on ``fit_rows`` and scored on the others."""
    from sklearn.neighbors import KNeighborsClassifier

    xy = frame[["x", "y"]].to_numpy()
    test = np.setdiff1d(np.arange(len(labels)), fit_rows)
    clf = KNeighborsClassifier(n_neighbors=1).fit(xy[fit_rows], labels[fit_rows])
    return float(clf.score(xy[test], labels[test]))


def test_pca_frame_and_cluster_separation():
    X, labels = _clusters(600)
    ids = np.array([f"r{i}" for i in range(600)])
    frame = project(X, method="pca", row_ids=ids)
    assert list(frame.columns) == ["row_id", "x", "y", "method"]
    assert (frame["row_id"].to_numpy() == ids).all() and (frame["method"] == "pca").all()
    assert frame["x"].dtype == np.float32
    assert _separation(frame, labels, np.arange(300)) > 0.95


@pytest.mark.slow  # the first UMAP call of a process pays ~10 s of import and JIT
def test_umap_small_data_is_seeded_and_separates_clusters():
    X, labels = _clusters(500, seed=1)
    a = project(X, method="umap", random_state=3, sample_size=300)
    b = project(X, method="umap", random_state=3, sample_size=300)
    pd.testing.assert_frame_equal(a, b)
    assert (a["method"] == "umap").all()
    assert _separation(a, labels, np.arange(250)) > 0.95


@pytest.mark.slow
def test_umap_fit_on_sample_transform_rest_and_cache(tmp_path):
    # 5000 rows, fitted on 4200 (>= 4096: exact precomputed neighbours), 800 transformed
    X, labels = _clusters(5000, seed=2)
    events = []
    frame = project(X, sample_size=4200, random_state=0, cache_dir=tmp_path,
                    callback=events.append)
    fractions = [e["fraction"] for e in events]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any("placing rows" in e["message"] for e in events)
    rng = np.random.default_rng(0)  # the same seeded sample the projection fitted on
    fitted = np.sort(rng.choice(5000, size=4200, replace=False))
    assert _separation(frame, labels, fitted) > 0.95  # transformed rows land in their cluster
    files = list(tmp_path.glob("projection-*.npy"))
    assert len(files) == 1
    events.clear()
    again = project(X, sample_size=4200, random_state=0, cache_dir=tmp_path,
                    callback=events.append)
    pd.testing.assert_frame_equal(frame, again)
    assert [e["message"] for e in events] == ["loaded from cache"]


def test_cache_key_depends_on_content_and_parameters(tmp_path):
    X, _ = _clusters(200)
    key = cache_key(X, {"method": "pca"})
    assert key == cache_key(X.copy(), {"method": "pca"})
    assert key != cache_key(X, {"method": "umap"})
    Y = X.copy()
    Y[0, 0] += 1
    assert key != cache_key(Y, {"method": "pca"})
    # a corrupt cache file is ignored and replaced
    first = project(X, method="pca", cache_dir=tmp_path)
    (path,) = tmp_path.glob("projection-*.npy")
    path.write_bytes(b"not an npy file")
    again = project(X, method="pca", cache_dir=tmp_path)
    pd.testing.assert_frame_equal(first, again)
    assert np.load(path, allow_pickle=False).shape == (200, 2)


def test_validation():
    X, _ = _clusters(50)
    with pytest.raises(ValueError, match="method"):
        project(X, method="tsne")
    with pytest.raises(ValueError, match="row_ids"):
        project(X, method="pca", row_ids=np.arange(3))
    with pytest.raises(ValueError, match="2-D"):
        project(X[0], method="pca")
    with pytest.raises(ValueError, match="n_neighbors"):
        project(X, n_neighbors=1)
    with pytest.raises(TypeError, match=r"n_neighbors: expected an int >= 2, got 2\.5"):
        project(X, n_neighbors=2.5)
    with pytest.raises(ValueError, match=r"min_dist: expected a number in \[0, 1\], got 2"):
        project(X, method="pca", min_dist=2)
