"""2-D projections: planted clusters stay apart, seeded, cached on disk, validated."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aflite_core import numba_cache
from aflite_core.measures import projection
from aflite_core.measures.projection import cache_key, fit_epochs, project, projection_info


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


def test_umap_is_the_default_seeded_and_separates_clusters():
    X, labels = _clusters(500, seed=1)
    a = project(X, random_state=3, sample_size=300)
    b = project(X, random_state=3, sample_size=300)
    pd.testing.assert_frame_equal(a, b)
    assert (a["method"] == "umap").all()
    info = projection_info(a)
    assert info == {"method": "umap", "fitted_rows": 300, "epochs": fit_epochs(300),
                    "init": "pca", "n_neighbors": 15, "polished": True}
    assert _separation(a, labels, np.arange(250)) > 0.95
    c = project(X, random_state=4, sample_size=300)
    assert not np.allclose(a[["x", "y"]], c[["x", "y"]])  # the seed matters


def _neighbour_recall(X: np.ndarray, frame: pd.DataFrame, k: int = 10) -> float:
    """Of each row's k nearest rows by cosine in X, the share among its k nearest on the map."""
    from scipy.spatial import cKDTree

    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    high = np.argsort(-(unit @ unit.T), axis=1, kind="stable")[:, 1:k + 1]
    xy = frame[["x", "y"]].to_numpy()
    low = cKDTree(xy).query(xy, k=k + 1)[1][:, 1:]
    return float(np.mean([len(set(h) & set(lo)) / k for h, lo in zip(high, low, strict=True)]))


def test_the_polish_puts_a_placed_rows_own_neighbours_around_it_on_the_map(monkeypatch):
    """400 planted groups of 10 close rows; the map fitted on 1,000 of the 4,000 rows. Placed
    against the fitted rows only, a row's group lands near it but mixed with other groups
    (measured: recall@10 0.40); polished, its own nearest rows are around it (0.73; a map
    fitted on every row: 0.90). Above POLISH_MAX_ROWS the map is placed only, and says so."""
    from aflite_core.measures import projection

    rng = np.random.default_rng(0)
    X = (np.repeat(rng.normal(size=(400, 32)), 10, axis=0)
         + 0.3 * rng.normal(size=(4000, 32))).astype(np.float32)
    polished = project(X, sample_size=1000, random_state=0)
    assert projection_info(polished)["polished"] is True
    assert "polish_note" not in projection_info(polished)
    monkeypatch.setattr(projection, "POLISH_MAX_ROWS", 3999)
    placed = project(X, sample_size=1000, random_state=0)
    info = projection_info(placed)
    assert info["polished"] is False
    assert info["polish_note"].startswith("the map was not polished (4,000 rows, over 3,999)")
    before, after = _neighbour_recall(X, placed), _neighbour_recall(X, polished)
    assert before < 0.5 and after > 0.6 and after > 1.5 * before, (before, after)
    # the fitted rows moved too, a little: the map keeps its clusters where they were
    assert np.median(np.hypot(*(polished[["x", "y"]].to_numpy()
                                - placed[["x", "y"]].to_numpy()).T)) < 0.5


def test_a_map_fitted_on_every_row_is_not_polished():
    X, _ = _clusters(400, seed=3)
    info = projection_info(project(X, sample_size=400, random_state=0))
    assert info["polished"] is False and "polish_note" not in info


def test_the_polish_codes_are_the_unit_rows_in_int8():
    from aflite_core.measures._umap_layout import polish_codes

    rows = np.array([[1.0, 0.0, -1.0], [0.6, 0.8, 0.0], [0.5, -0.5, 0.70710677]],
                    dtype=np.float32)
    assert polish_codes(rows).tolist() == [[127, 0, -127], [76, 102, 0], [64, -64, 90]]
    assert polish_codes(rows).dtype == np.int8


def test_epochs_scale_with_the_fitted_rows():
    assert fit_epochs(1_000) == 500 and fit_epochs(5_000) == 160
    assert fit_epochs(10_000) == 80 and fit_epochs(20_000) == 80


def test_fewer_rows_than_neighbours_lower_the_neighbour_count():
    X, labels = _clusters(12, seed=5)
    frame = project(X, n_neighbors=15)
    assert (frame["method"] == "umap").all() and np.isfinite(frame[["x", "y"]]).all().all()
    assert projection_info(frame)["n_neighbors"] == 11


@pytest.mark.parametrize(("case", "reason"), [
    ("two rows", "only 2 rows"),
    ("identical rows", "only 1 distinct rows"),
    ("rank one", "only 2 distinct rows"),
])
def test_degenerate_phi_falls_back_to_pca_with_its_reason(case, reason):
    rng = np.random.default_rng(0)
    if case == "two rows":
        X = rng.normal(size=(2, 8))
    elif case == "identical rows":
        X = np.tile(rng.normal(size=(1, 8)), (300, 1))
    else:  # every row a multiple of one vector: once normalised, two points (+v and -v)
        X = rng.normal(size=(300, 1)) * rng.normal(size=(1, 8))
    frame = project(X)
    info = projection_info(frame)
    assert info["fallback"] == "pca" and info["reason"].startswith(reason), info
    assert (frame["method"] == "pca").all() and np.isfinite(frame[["x", "y"]]).all().all()


def test_many_duplicate_rows_still_make_a_umap_map():
    X, labels = _clusters(60, seed=6)
    X = np.repeat(X, 10, axis=0)  # each row ten times
    frame = project(X, random_state=0)
    assert (frame["method"] == "umap").all() and np.isfinite(frame[["x", "y"]]).all().all()
    xy = frame[["x", "y"]].to_numpy().reshape(60, 10, 2)
    spread = np.abs(xy - xy.mean(axis=1, keepdims=True)).max()
    assert spread < 0.2 * np.ptp(frame[["x", "y"]].to_numpy(), axis=0).max()  # copies together


def test_numba_cache_folder_is_the_user_cache_and_none_when_unwritable(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path / "cache"))
    assert numba_cache.numba_cache_dir() == tmp_path / "cache" / "numba"
    assert (tmp_path / "cache" / "numba").is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("AFLITE_CACHE_DIR", str(blocker / "cache"))
    assert numba_cache.numba_cache_dir() is None  # numba then picks its own place, or memory
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    assert numba_cache.numba_cache_dir() == tmp_path / "mine"


def test_a_new_process_loads_the_layout_kernel_from_the_disk_cache(tmp_path):
    import os
    import subprocess
    import sys

    script = ("import numpy as np\n"
              "from aflite_core.measures.projection import project\n"
              "from aflite_core.measures import _umap_layout\n"
              "project(np.random.default_rng(0).normal(size=(200, 8)))\n"
              "s = _umap_layout._sgd.stats\n"
              "print(sum(s.cache_hits.values()), sum(s.cache_misses.values()))\n")
    env = {**os.environ, "AFLITE_CACHE_DIR": str(tmp_path)}
    env.pop("NUMBA_CACHE_DIR", None)
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, timeout=300, check=True).stdout.split()
            for _ in range(2)]
    assert runs[0] == ["0", "1"]  # compiled, and written to the user cache folder
    assert runs[1] == ["1", "0"]  # loaded from it
    assert list((tmp_path / "numba").rglob("*.nbc"))


def test_umap_fit_on_sample_transform_rest_and_cache(tmp_path):
    # 5000 rows, fitted on 4200 (>= 4096: exact precomputed neighbours), 800 transformed
    X, labels = _clusters(5000, seed=2)
    events = []
    frame = project(X, sample_size=4200, random_state=0, cache_dir=tmp_path,
                    callback=events.append)
    fractions = [e["fraction"] for e in events]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any(e["message"] == "placed 800 of 800 rows" for e in events)
    rng = np.random.default_rng(0)  # the same seeded sample the projection fitted on
    fitted = np.sort(rng.choice(5000, size=4200, replace=False))
    assert _separation(frame, labels, fitted) > 0.95  # transformed rows land in their cluster
    files = list(tmp_path.glob("projection-*.npy"))
    assert len(files) == 1 and files[0].with_suffix(".json").is_file()
    events.clear()
    again = project(X, sample_size=4200, random_state=0, cache_dir=tmp_path,
                    callback=events.append)
    pd.testing.assert_frame_equal(frame, again)
    assert projection_info(again) == projection_info(frame)
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


def test_the_map_is_the_same_whoever_searches_the_neighbours_and_on_any_thread_count(
        monkeypatch):
    """The other rows' neighbours are searched during the layout when a core is free, or by
    the placement pool: the chunks, their neighbours and the map are the same bit for bit,
    with every search done early, none done early, and one placement thread (and the
    polish's neighbours found by one thread or two)."""
    from concurrent.futures import Future

    from aflite_core.measures import _umap_layout, projection

    X, labels = _clusters(3000, seed=4)
    monkeypatch.setattr(projection, "TRANSFORM_CHUNK", 300)  # 7 chunks of the 2,000 others
    # the polish's neighbour search in 6 chunks of rows, shared by the threads
    monkeypatch.setattr(_umap_layout, "POLISH_CHUNK", 500)
    params = {"sample_size": 1000, "random_state": 0}
    default = project(X, **params)

    class Late(projection.ThreadPoolExecutor):  # the searcher starts nothing
        def submit(self, fn, *args, **kwargs):
            if self._thread_name_prefix == "umap-search":
                return Future()  # never started: the placement pool searches itself
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(projection, "ThreadPoolExecutor", Late)
    late = project(X, **params)
    monkeypatch.setattr(projection.os, "cpu_count", lambda: 1)
    one_thread = project(X, **params)
    pd.testing.assert_frame_equal(default, late)
    pd.testing.assert_frame_equal(default, one_thread)
    rng = np.random.default_rng(0)
    fitted = np.sort(rng.choice(3000, size=1000, replace=False))
    assert _separation(default, labels, fitted) > 0.95


def test_a_map_not_polished_says_so_beside_its_figures(tmp_path, monkeypatch):
    """An audit whose map is over POLISH_MAX_ROWS: summary.json's projection record says why
    it was not polished, as a caveat the report, the card, the Report page and the CLI take
    (``measure_caveats``)."""
    from pathlib import Path

    from aflite_core.io.datasets import load_dataset
    from aflite_core.measures import measure_caveats, projection
    from aflite_core.pipeline import AuditConfig, run_audit
    from aflite_core.runs import load_run

    sample = Path(projection.__file__).resolve().parents[1] / "data" / "snli_sample.csv"
    monkeypatch.setattr(projection, "POLISH_MAX_ROWS", 3_000)
    config = AuditConfig(n_partitions=8, random_state=0, report=False, measures=("projection",),
                         measure_params={"projection": {"sample_size": 1_000}})
    run = load_run(run_audit(load_dataset(sample), config, runs_root=tmp_path))
    record = run.summary["measures"]["projection"]
    assert record["polished"] is False
    assert measure_caveats(run, "projection") == [record["polish_note"]]
    assert "(4,000 rows, over 3,000)" in record["polish_note"]


def test_the_bar_moves_with_the_layouts_epochs_and_the_map_is_the_same():
    """The layout runs its epochs in steps and reports each (the bar sat still for half the
    map's time at 10k rows on one core, and the ETA was off by 2.5x): the positions are those
    of one uninterrupted run, the fractions grow to 1, and the layout's span of the map's
    scale starts where the work before it ends (about half of a 10k map, all rows fitted)."""
    from aflite_core.measures import _umap_layout

    X, _ = _clusters(1200, seed=4)
    events = []
    frame = project(X, random_state=0, callback=events.append)
    quiet = project(X, random_state=0)
    assert frame[["x", "y"]].to_numpy().tobytes() == quiet[["x", "y"]].to_numpy().tobytes()
    laying = [e for e in events if e["message"].startswith("laying out 1,200 rows: epoch")]
    assert len(laying) == _umap_layout.LAYOUT_STEPS
    fractions = [e["fraction"] for e in events]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert laying[-1]["message"].endswith(f"of {fit_epochs(1200)}")
    marks = projection._phase_marks(10_000, 10_000, fit_epochs(10_000), False)
    assert 0.4 < marks[0] < 0.6 and marks[1] == marks[2] == 1.0
    # 100k rows fitted on 20k: the layout and the placement about half the map between
    # them, the polish the end
    laid, placed, polish = projection._phase_marks(100_000, 20_000, 80, True)
    assert 0.1 < laid < placed < polish < 1 and 0.35 < placed - laid < 0.55
    assert 0.35 < polish - placed < 0.55


def test_the_bar_moves_while_the_other_rows_are_placed(monkeypatch):
    """Rows beyond the fitted sample are placed a chunk at a time, after the layout: each
    chunk moves the bar, from the layout's end to the polish (the placement's span had been
    the layout's, so the bar stood still while 80,000 rows were placed: the ETA on one core
    at 100k rows was off by 1.5-1.7x at the map's end)."""
    monkeypatch.setattr(projection, "TRANSFORM_CHUNK", 200)
    X, _ = _clusters(1200, seed=4)
    events = []
    project(X, random_state=0, sample_size=400, callback=events.append)
    placed = [e["fraction"] for e in events if e["message"].startswith("placed ")]
    laid = max(e["fraction"] for e in events if e["message"].startswith("laying out"))
    polish = next(e["fraction"] for e in events if e["message"].startswith("polishing"))
    assert len(placed) == 4  # 800 rows, 200 a chunk
    assert laid < placed[0] < placed[1] < placed[2] < placed[3] == polish


def test_the_rows_are_placed_by_as_many_threads_as_their_working_sets_allow(monkeypatch):
    """On 16 cores, sixteen chunks placed at once held ~29 MB each (a 300,000-row audit's
    peak +0.4 GB, issue 63 item 5): eight place at once there, two on two cores, and every
    chunk lands where its rows are."""
    import threading
    from concurrent.futures import Future

    from aflite_core import _validation

    def placed_with(cores: int) -> tuple[int, np.ndarray]:
        monkeypatch.setattr(_validation, "available_cores", lambda: cores)
        running, most, lock = [0], [0], threading.Lock()

        def place_chunk(near, near_d, fitted, start, **_options):
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            threading.Event().wait(0.03)
            with lock:
                running[0] -= 1
            return np.full((len(near), 2), start, dtype=np.float32), near

        monkeypatch.setattr(projection, "_place_chunk", place_chunk)
        chunk = projection.TRANSFORM_CHUNK
        rest = np.arange(20 * chunk)[::-1]  # the rows to place, in any order
        starts = list(range(0, len(rest), chunk))
        coords = np.zeros((len(rest), 2), dtype=np.float32)

        def search(start: int) -> tuple[np.ndarray, np.ndarray]:
            n = len(rest[start:start + chunk])
            return np.zeros((n, 10), dtype=np.int32), np.zeros((n, 10), dtype=np.float32)

        projection._place_rest(coords, search, {s: Future() for s in starts}, None, rest,
                               starts, k=10, a=1.0, b=1.0, seed=0, callback=None,
                               nearest=None)
        return most[0], coords

    for cores, at_once in ((16, 8), (2, 2)):
        most, coords = placed_with(cores)
        assert most == at_once
        chunk_of_row = np.empty(len(coords), dtype=np.float32)
        chunk_of_row[np.arange(len(coords))[::-1]] = (np.arange(len(coords))
                                                       // projection.TRANSFORM_CHUNK
                                                       * projection.TRANSFORM_CHUNK)
        assert (coords[:, 0] == chunk_of_row).all()
