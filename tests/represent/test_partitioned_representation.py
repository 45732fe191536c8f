"""Φ's ``tfidf_svd`` over row partitions is the all-rows Φ, bit for bit (issue 27 item 2:
the representation on the cluster's workers, the driver never holding the TF-IDF or the
SVD's basis)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import aflite_core.represent._partitioned_svd as partitioned_module
from aflite_core.represent._builders import SVD_N_ITER, _svd, tfidf_blocks
from aflite_core.represent._partitioned_svd import (
    MIN_LAST_ROWS,
    _tfidf,
    partition_bounds,
    partitioned_tfidf_svd,
)
from aflite_core.represent._partitions import LocalPartitions

CHUNK = 16_384


@pytest.fixture(scope="module")
def texts(snli_dir):
    """36,000 SNLI-like rows (more than two 16,384-row partitions): the SNLI dev pairs
    drawn with repeats (premises repeat, as in SNLI), each hypothesis with two more words of
    the vocabulary, so later partitions hold words the first does not."""
    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(frame), 36_000)
    vocabulary = np.array(sorted({w for h in frame["hypothesis"] for w in h.split()}))
    hypotheses = [f"{h} {' '.join(rng.choice(vocabulary, 2))}"
                  for h in frame["hypothesis"].to_numpy()[idx]]
    premises = frame["premise"].to_numpy()[idx].tolist()
    return hypotheses, premises


def _same_matrix(a: sp.csr_matrix, b: sp.csr_matrix) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype == np.float32
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)  # each row's entry order too
    np.testing.assert_array_equal(a.data, b.data)


def _partitioned_matrix(hypotheses, premises, max_features=50_000, min_df=None):
    runner = LocalPartitions()
    parts, n_features = _tfidf(runner, hypotheses, premises,
                               partition_bounds(len(hypotheses), CHUNK), max_features, min_df)
    return sp.vstack(parts, format="csr"), n_features, len(parts)


def test_the_tfidf_of_partitions_is_the_all_rows_tfidf(texts):
    hypotheses, premises = texts
    whole = tfidf_blocks(hypotheses, premises)
    parts, n_features, n_parts = _partitioned_matrix(hypotheses, premises)
    assert n_parts == 3 and n_features == whole.shape[1]
    _same_matrix(parts, whole)


def test_the_vocabulary_cap_and_hypotheses_alone(texts):
    """``max_features`` keeps the same words (the same argsort over the same counts, ties
    included), and a file without premises has one block."""
    hypotheses, premises = texts
    for kwargs in ({"max_features": 300}, {"max_features": 2_000, "min_df": 5}):
        whole = tfidf_blocks(hypotheses, premises, **kwargs)
        _same_matrix(_partitioned_matrix(hypotheses, premises, **kwargs)[0], whole)
    _same_matrix(_partitioned_matrix(hypotheses, None)[0], tfidf_blocks(hypotheses))


def test_partitions_without_words_and_the_min_df_fallback(texts):
    """A partition whose premises hold no word, premises with no word at all (the block is
    left out) and a vocabulary where min_df leaves nothing (the fallback to min_df=1)."""
    hypotheses, premises = (list(t[:20_000]) for t in texts)
    premises[:CHUNK] = ["..."] * CHUNK  # the first partition's premises: punctuation only
    _same_matrix(_partitioned_matrix(hypotheses, premises)[0], tfidf_blocks(hypotheses, premises))
    _same_matrix(_partitioned_matrix(hypotheses, ["?"] * 20_000)[0],
                 tfidf_blocks(hypotheses, ["?"] * 20_000))
    unique = [f"w{i}" for i in range(20_000)]  # every word once: min_df=2 keeps none
    _same_matrix(_partitioned_matrix(unique, None)[0], tfidf_blocks(unique))


def test_phi_over_partitions_is_the_local_phi_bit_for_bit(texts):
    hypotheses, premises = texts
    X, info = _svd(tfidf_blocks(hypotheses, premises), 64, 3)
    Y, n_features, explained = partitioned_tfidf_svd(
        LocalPartitions(), hypotheses, premises, n_components=64, random_state=3,
        n_iter=SVD_N_ITER, partition_rows=CHUNK)
    assert Y.dtype == np.float32 and Y.shape == X.shape == (36_000, 64)
    np.testing.assert_array_equal(Y, X)
    assert n_features == info["n_features_tfidf"] and explained == info["explained_variance"]


def test_the_products_column_groups_leave_phi_unchanged(texts):
    """On a cluster each ``Mᵀ M D`` goes in column groups (a wavefront over the workers):
    scipy's kernels go entry by entry, so six groups give the one-group Φ bit for bit."""
    hypotheses, premises = (list(t[:20_000]) for t in texts)

    class SixGroups(LocalPartitions):
        n_workers = 3  # 2 groups per worker

    X, _ = _svd(tfidf_blocks(hypotheses, premises), 48, 5)
    Y, _, _ = partitioned_tfidf_svd(SixGroups(), hypotheses, premises, n_components=48,
                                    random_state=5, n_iter=SVD_N_ITER, partition_rows=CHUNK)
    np.testing.assert_array_equal(Y, X)


def test_partition_bounds():
    assert partition_bounds(40_000, CHUNK) == [(0, 16_384), (16_384, 32_768), (32_768, 40_000)]
    # a last partition shorter than MIN_LAST_ROWS joins the one before
    assert partition_bounds(2 * CHUNK + MIN_LAST_ROWS - 1, CHUNK) == [
        (0, CHUNK), (CHUNK, 2 * CHUNK + MIN_LAST_ROWS - 1)]
    assert partition_bounds(10, CHUNK) == [(0, 10)]
    with pytest.raises(ValueError, match="multiple of 16,384, got 1000"):
        partition_bounds(5_000, 1000)


def test_no_word_in_any_hypothesis_is_refused():
    from aflite_core.errors import RepresentationError

    with pytest.raises(RepresentationError, match="hypotheses: no word found"):
        partitioned_tfidf_svd(LocalPartitions(), ["!"] * 40, ["a b"] * 40, n_components=4,
                              random_state=0, n_iter=1)


@pytest.fixture(scope="module")
def client():
    """Two worker processes (not threads of this process: BLAS's thread limit is
    process-wide, and threads of one process setting and restoring it around their tasks
    could let a product run on two threads and round otherwise)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    ) as local, distributed.Client(local) as client:
        yield client


def test_phi_on_two_workers_is_the_local_phi(texts, client, monkeypatch):
    """The partitions on two workers (the first two on one, the third on the other: the
    chain of ``Mᵀ Y`` partial sums crosses once), the same Φ; each partition's steps ran on
    the worker holding it, and nothing is left on the cluster."""
    from aflite_core.represent._partitions import DaskPartitions

    hypotheses, premises = texts
    X, _ = _svd(tfidf_blocks(hypotheses, premises), 32, 0)
    runner = DaskPartitions(client)
    placed = []
    put = runner.put

    def recording(parts):
        handles = put(parts)
        placed.append([runner._holder[h.key] for h in handles])
        return handles

    monkeypatch.setattr(runner, "put", recording)
    Y, _, _ = partitioned_tfidf_svd(runner, hypotheses, premises, n_components=32,
                                    random_state=0, n_iter=SVD_N_ITER, partition_rows=CHUNK)
    np.testing.assert_array_equal(Y, X)
    assert len(placed[0]) == 3 and len(set(placed[0])) == 2
    assert placed[0][0] == placed[0][1] != placed[0][2]
    deadline = time.monotonic() + 10
    while client.who_has() and time.monotonic() < deadline:  # releases are asynchronous
        time.sleep(0.05)
    assert not client.who_has()


def test_an_audit_builds_phi_on_the_cluster_and_leaves_it_there(client, snli_dir, tmp_path,
                                                                 monkeypatch):
    """With a scheduler the audit's Φ is built on the workers (engines: representation dask)
    and stays there: AFLite (the training split filtered, dev and test scored), KNN, the
    slices' clusters and the map read its rows where they are, no stage gathers it whole
    (``whole_gathers`` 0; KNN's training rows normalised and searched on the workers), PVI
    counts the hypotheses and fits its folds on the workers (sent a chunk at a time from the
    frame, its texts read from the file they moved to), and every row's status and
    predictability and every measure's table are the local run's.

    18,000 SNLI rows (14,000 training, 2,000 dev, 2,000 test) in two partitions; the map
    fitted on 2,000 of them (the other 16,000 placed on the workers)."""
    import json

    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit

    monkeypatch.setattr(partitioned_module, "PARTITION_ROWS", CHUNK)
    frame = pd.concat([pd.read_csv(snli_dir / f"snli_{part}.csv", keep_default_na=False,
                                   nrows=rows)
                       for part, rows in (("train_sample", 14_000), ("dev", 2_000),
                                          ("test", 2_000))], ignore_index=True)
    dataset = load_dataset(frame, name="phi", split="split")
    import aflite_core.measures.knn as knn_module

    searched = []
    search = knn_module._search_there
    monkeypatch.setattr(knn_module, "_search_there",
                        lambda *a: searched.append(len(a[2])) or search(*a))
    import aflite_core.measures.pvi as pvi_module

    monkeypatch.setattr(pvi_module, "WORKER_COUNTS_MIN_ROWS", 10_000)
    monkeypatch.setattr(pvi_module, "COUNT_CHUNK_ROWS", 8_000)
    # the slices' features too: the training split's rows in scope, dev and test out of it
    import aflite_core.measures._slices_on_workers as slices_module

    monkeypatch.setattr(slices_module, "WORKER_MIN_ROWS", 10_000)
    import aflite_core.represent._partitioned_counts as counts_module

    counted = []
    count = counts_module.ngram_counts_on_workers

    def watched(client, chunks):
        chunks = list(chunks)
        counted.append([len(chunk) for chunk in chunks])
        return count(client, chunks)

    monkeypatch.setattr(counts_module, "ngram_counts_on_workers", watched)
    from aflite_core.represent._partitioned_rows import PartitionedRows

    stacked = []  # the baselines' probe sample, stacked on a worker
    on_workers = PartitionedRows.on_workers
    monkeypatch.setattr(PartitionedRows, "on_workers",
                        lambda self, index: stacked.append(len(index)) or on_workers(self, index))
    measures = ("knn", "slices", "projection", "baselines", "pvi")
    fast = {"n_partitions": 8, "measures": measures, "report": False,
            "measure_params": {"pvi": {"n_splits": 3}, "projection": {"sample_size": 2_000}}}
    # the driver never lists every row's text (the representation's partitions, the map's
    # region names read the frame a partition or a sample at a time)
    from aflite_core.io.datasets import AuditDataset

    listed: list[str] = []

    def listing(name):
        original = getattr(AuditDataset, name)
        return lambda self, *a, **k: listed.append(name) or original(self, *a, **k)

    for name in ("hypotheses", "premises"):
        monkeypatch.setattr(AuditDataset, name, listing(name))
    address = client.scheduler.address
    # its texts read from the run's dataset file, as the CLI keeps them with a scheduler
    moved = dataset.with_texts_on_disk(tmp_path / "dataset.parquet")
    assert not {"premise", "hypothesis"} & set(moved.frame.columns)
    on_dask = run_audit(moved, AuditConfig(**fast, backend="dask", scheduler=address),
                        runs_root=tmp_path / "dask")
    assert listed == []
    here = run_audit(dataset, AuditConfig(**fast), runs_root=tmp_path / "local")
    summary = json.loads((on_dask / "summary.json").read_text())
    assert summary["engines"]["representation"] == "dask"
    params = summary["representation"]["params"]
    assert params["partitions"] == 2 and params["resident"] is True
    assert params["whole_gathers"] == 0
    assert stacked == [summary["measures"]["baselines"]["params"]["n_rows_sampled"]]
    assert summary["aflite"]["split_policy"] == "train_only"
    assert searched and summary["engines"]["knn"] == "dask"  # searched where the rows are
    assert json.loads((here / "summary.json").read_text())["engines"]["representation"] == "local"
    a, b = (pd.read_parquet(path / "scores.parquet") for path in (on_dask, here))
    assert len(a) == len(frame) and (a["status"] == "unfiltered").sum() == 4_000
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    # PVI's counts on the workers (the local run counts its own): the training split's rows
    # sent 8,000 at a time
    assert len(counted) == 1 and len(counted[0]) > 1 and max(counted[0]) == 8_000
    assert summary["measures"]["slices"]["features"] == "workers"
    for table in ("knn.parquet", "knn_examples.parquet", "slices.parquet",
                  "slices_members.parquet", "projection.parquet", "map_regions.parquet",
                  "pvi.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(on_dask / table),
                                      pd.read_parquet(here / table), check_exact=True)
    baselines = [json.loads((path / "baselines.json").read_text()) for path in (on_dask, here)]
    assert baselines[0] == baselines[1]


def test_resident_phi_reads_like_the_array(texts):
    """Φ left in its partitions (``resident=True``): slices, positions in any order, negative
    positions, masks and selections of selections read the rows the array gives, as new
    arrays; the chunk sums AFLite's column means take and the running sums of its held-out
    fit (a chain over the partitions) are the array's, bit for bit; only a whole read counts
    as a gather."""
    from aflite_core.represent._partitioned_rows import PartitionedRows

    hypotheses, premises = texts
    whole, _, _ = partitioned_tfidf_svd(LocalPartitions(), hypotheses, premises,
                                        n_components=8, random_state=0, n_iter=1,
                                        partition_rows=CHUNK)
    X, _, _ = partitioned_tfidf_svd(LocalPartitions(), hypotheses, premises, n_components=8,
                                    random_state=0, n_iter=1, partition_rows=CHUNK,
                                    resident=True)
    assert isinstance(X, PartitionedRows) and X.shape == whole.shape == (36_000, 8)
    rng = np.random.default_rng(1)
    order = rng.permutation(36_000)[:3000]  # across the three partitions, interleaved
    mask = rng.random(36_000) < 0.3
    for index in (slice(100, 20_000), slice(None, None, 7), order, -order - 1, mask, 35_999):
        np.testing.assert_array_equal(X[index], whole[index])
    part = X[0:10]
    part += 1  # a new array: Φ is not changed
    np.testing.assert_array_equal(X[0:10], whole[0:10])
    rows = np.flatnonzero(mask)
    selection = X.select(rows)
    np.testing.assert_array_equal(selection[order[order < len(rows)]],
                                  whole[rows][order[order < len(rows)]])
    np.testing.assert_array_equal(selection.select(slice(5, 900))[::3], whole[rows][5:900:3])
    sums = X.chunk_sums(5000)  # 16,384-row partitions: some chunks lie in two
    assert len(sums) == 8
    for i, total in enumerate(sums):
        np.testing.assert_array_equal(
            total, whole[i * 5000:(i + 1) * 5000].sum(axis=0, dtype=np.float64))
    from aflite_core.filter._linear import _mean_of_rows

    for some in (rows, np.arange(36_000)[::5], np.arange(16_000, 17_000)):
        np.testing.assert_array_equal(_mean_of_rows(X, some), _mean_of_rows(whole, some))
        np.testing.assert_array_equal(_mean_of_rows(X, some),
                                      whole[some].mean(axis=0, dtype=np.float64))
    assert X.whole_gathers == 0 and X.all_finite()
    np.testing.assert_array_equal(np.asarray(selection), whole[rows])
    assert X.whole_gathers == 1  # shared by the selections
    with pytest.raises(TypeError, match="index rows only"):
        X[0, 1]
    with pytest.raises(IndexError, match="expected shape"):
        X[mask[:-1]]
    with pytest.raises(IndexError, match="out of range"):
        X[np.array([36_000])]


def test_aflite_on_phi_left_on_the_workers_is_aflite_on_the_array(snli_dir, client,
                                                                  monkeypatch):
    """AFLite on Dask over Φ's partitions: the training split's rows (a selection, nothing
    fetched), the working copies built from pieces of the partitions on their workers, the
    removed rows and the held-out scores read from there: the keep mask, predictabilities,
    removal rounds and held-out scores of AFLite on the array, and Φ never gathered."""
    from aflite_core.filter._aflite import AFLite
    from aflite_core.filter._rounds import select_rows
    from aflite_core.represent._partitioned_rows import PartitionedRows
    from aflite_core.represent._partitions import DaskPartitions

    frame = pd.concat([pd.read_csv(snli_dir / f"snli_{part}.csv", keep_default_na=False)
                       for part in ("train_sample", "dev")], ignore_index=True)
    hypotheses, premises = frame["hypothesis"].tolist(), frame["premise"].tolist()
    whole, _ = _svd(tfidf_blocks(hypotheses, premises), 32, 0)
    X, _, _ = partitioned_tfidf_svd(DaskPartitions(client), hypotheses, premises,
                                    n_components=32, random_state=0, n_iter=SVD_N_ITER,
                                    partition_rows=CHUNK, resident=True)
    pieces = []
    original = PartitionedRows.pieces
    monkeypatch.setattr(PartitionedRows, "pieces",
                        lambda self, a, b: pieces.append((a, b)) or original(self, a, b))
    train = np.flatnonzero(frame["split"].to_numpy() == "train")
    dev = np.flatnonzero(frame["split"].to_numpy() == "dev")
    y = frame["label"].to_numpy()
    params = {"target_size": 0.5, "n_partitions": 16, "random_state": 0}
    here = AFLite(**params).fit(select_rows(whole, train), y[train])
    there = AFLite(**params, backend="dask", scheduler=client).fit(select_rows(X, train),
                                                                   y[train])
    assert here.n_rounds_ > 2 and pieces
    for name in ("keep_mask_", "predictability_", "removal_round_"):
        np.testing.assert_array_equal(getattr(there, name), getattr(here, name))
    scored = [model.score_heldout(select_rows(data, dev), y[dev], X=select_rows(data, train),
                                  y=y[train])
              for model, data in ((here, whole), (there, X))]
    np.testing.assert_array_equal(scored[1], scored[0])
    assert X.whole_gathers == 0
    X.release()


_HELD = {"tasks": 0, "limits": None}
_HELD_LOCK = threading.Lock()


def _held_while_any_task_runs(fn, *args):
    """A task wrapper holding BLAS at one thread from the first overlapping task's start to
    the last one's end, then restoring what the first found: it made the worker threads'
    restore land after the driver's own limit had begun, every time."""
    from threadpoolctl import threadpool_limits

    with _HELD_LOCK:
        if _HELD["tasks"] == 0:
            _HELD["limits"] = threadpool_limits(limits=1, user_api="blas")
        _HELD["tasks"] += 1
    try:
        return fn(*args)
    finally:
        with _HELD_LOCK:
            _HELD["tasks"] -= 1
            if _HELD["tasks"] == 0:
                _HELD["limits"].restore_original_limits()


def test_worker_threads_of_this_process_cannot_undo_the_drivers_blas_limit(texts, cluster,
                                                                           monkeypatch):
    """On a cluster whose workers are threads of the driver's process, a task restores the
    BLAS limit it found when it started; the driver's dense steps (LU, QR, eigh) must not run
    on two threads because a TF-IDF task outlived the start of the SVD. The build holds the
    limit around every task's lifetime: the local Φ, bit for bit."""
    import aflite_core.represent._partitions as partitions_module
    from aflite_core.represent._partitions import DaskPartitions

    monkeypatch.setattr(partitions_module, "on_one_thread", _held_while_any_task_runs)
    hypotheses, premises = texts
    X, _ = _svd(tfidf_blocks(hypotheses, premises), 32, 0)
    Y, _, _ = partitioned_tfidf_svd(DaskPartitions(cluster[1]), hypotheses, premises,
                                    n_components=32, random_state=0, n_iter=SVD_N_ITER,
                                    partition_rows=CHUNK)
    np.testing.assert_array_equal(Y, X)


@pytest.mark.parametrize("where", ["here", "workers"])
def test_the_maps_reduction_and_the_clusters_of_phi_on_the_workers(where, client):
    """The map's reduction of Φ and the slices' cluster assignment (unless asked to fetch
    each chunk) run where Φ's rows are, a 65,536-row chunk a task (a partition of the
    audit's size holds exactly one chunk; a chunk across two partitions is fetched and done
    here): the same reduced rows and the same clusters as from the array, bit for bit."""
    from aflite_core.measures._map_reduction import reduce_unit_rows
    from aflite_core.measures._neighbors import l2_normalize
    from aflite_core.measures.slices import cluster_codes, cluster_features
    from aflite_core.represent._partitioned_rows import PartitionedRows
    from aflite_core.represent._partitions import DaskPartitions

    rng = np.random.default_rng(0)
    whole = rng.standard_normal((140_000, 24)).astype(np.float32)
    whole[:, :3] += rng.integers(0, 4, (140_000, 1)).astype(np.float32) * 3  # clusters
    bounds = [(0, 65_536), (65_536, 131_072), (131_072, 140_000)]
    runner = LocalPartitions() if where == "here" else DaskPartitions(client)
    X = PartitionedRows(runner, runner.put([whole[lo:hi] for lo, hi in bounds]), bounds, 24)
    unit_sample = l2_normalize(whole[::50])
    np.testing.assert_array_equal(reduce_unit_rows(X, unit_sample, 8, 0),
                                  reduce_unit_rows(whole, unit_sample, 8, 0))
    rows = np.arange(3, 140_000)  # chunks across partitions too
    for some in (None, rows):
        here = cluster_features(whole, 6, rows=some, random_state=0)
        there = cluster_features(X, 6, rows=some, random_state=0)
        assert (here.X != there.X).nnz == 0 and list(here.value) == list(there.value)
        codes, k = cluster_codes(X, 6, rows=some, random_state=0, fetch=True)  # fetched
        np.testing.assert_array_equal(codes, here.X.tocsr().indices)  # one cluster a row
        assert k == 6
    assert X.whole_gathers == 0


def test_the_maps_other_rows_are_placed_where_phi_is(client, monkeypatch):
    """UMAP on a cluster with Φ left on the workers: the fitted sample's reduced rows are
    made on the driver, laid out by a task, and every other chunk is reduced, searched and
    placed by a task where its rows are (across two partitions: on a worker, from its
    pieces): the map of the array, bit for bit, and neither the reduced matrix of every row
    nor its chunks are made on the driver, nor the layout nor the polish run there."""
    from aflite_core.measures import projection
    from aflite_core.represent._fold_pool import on_dask
    from aflite_core.represent._partitioned_rows import PartitionedRows
    from aflite_core.represent._partitions import DaskPartitions

    rng = np.random.default_rng(1)
    whole = rng.standard_normal((9_000, 96)).astype(np.float32)
    whole[:, :4] += rng.integers(0, 3, (9_000, 1)).astype(np.float32) * 2
    bounds = [(0, 4_000), (4_000, 9_000)]
    runner = DaskPartitions(client)
    X = PartitionedRows(runner, runner.put([whole[lo:hi] for lo, hi in bounds]), bounds, 96)
    monkeypatch.setattr(projection, "TRANSFORM_CHUNK", 1_500)
    options = {"method": "umap", "sample_size": 2_000, "random_state": 0, "pca_dims": 16}
    here = projection.project(whole, **options)
    placed = []  # the chunks placed in this process
    place_rows = projection._place_rows
    monkeypatch.setattr(projection, "_place_rows",
                        lambda rows, start, *a: placed.append(start) or place_rows(rows, start,
                                                                                  *a))

    def no_whole_matrix(*args, **kwargs):
        raise AssertionError("the reduced rows of every row were made on the driver")

    monkeypatch.setattr(projection, "reduce_unit_rows", no_whole_matrix)
    from aflite_core.measures import _umap_layout

    laid_out = []  # layouts and polishes run in this process (the workers import their own)
    layout, polish = _umap_layout.layout, _umap_layout.polish
    monkeypatch.setattr(_umap_layout, "layout",
                        lambda *a, **k: laid_out.append("layout") or layout(*a, **k))
    monkeypatch.setattr(_umap_layout, "polish",
                        lambda *a, **k: laid_out.append("polish") or polish(*a, **k))
    with on_dask(client) as record:
        there = projection.project(X, **options)
    # 7,000 other rows in 5 chunks, every one placed on the workers (their copy of the
    # function records elsewhere), the one across the partitions' boundary too (put together
    # there from its two pieces); the layout and the polish tasks of their own: numba never
    # loads here
    assert record.tasks == 7 and placed == [] and laid_out == []
    assert projection.projection_info(there)["polished"] is True
    pd.testing.assert_frame_equal(there, here, check_exact=True)
    assert X.whole_gathers == 0


def _probe_context(dataset, X, keep):
    from types import SimpleNamespace

    from aflite_core.measures.registry import MeasureContext

    included = dataset.row_ids()
    rep = SimpleNamespace(X=X, row_ids=included, warmup_mask=np.zeros(len(included), bool))
    messages = []
    ctx = MeasureContext(dataset=dataset, representation=rep,
                         filterable=np.ones(len(included), dtype=bool),
                         labels=dataset.label_objects(), keep=keep, scores=pd.DataFrame(),
                         retained_ids=np.empty(0), random_state=0,
                         params={"n_splits": 2, "n_random_draws": 2, "max_rows": 6_000},
                         progress=lambda fraction, message: messages.append(message))
    return ctx, messages


def test_the_probe_fits_where_its_sample_is_and_without_it_when_it_is_lost(
        snli_dir, client, monkeypatch):
    """The baselines on Φ left on the workers: the linear probe's sample is stacked on a
    worker (``on_workers``: the rows ``X[rows]`` gives, bit for bit) and its fold fits read
    it there; nothing is fetched, and baselines.json is the one from Φ as an array. When the
    worker holding the sample is lost (its future cancelled here), the baselines run again on
    the sample fetched to the driver: the same numbers, and the progress says so."""
    from aflite_core.io.datasets import load_dataset
    from aflite_core.measures import baselines
    from aflite_core.represent._fold_fits import evaluator
    from aflite_core.represent._fold_pool import on_dask
    from aflite_core.represent._on_use import text_model
    from aflite_core.represent._partitioned_rows import PartitionedRows, RowsOnWorkers
    from aflite_core.represent._partitions import DaskPartitions

    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False)
    dataset = load_dataset(frame, name="probe", group="premise")
    n = len(dataset.row_ids())
    rng = np.random.default_rng(0)
    whole = rng.standard_normal((n, 12)).astype(np.float32)
    codes = pd.factorize(dataset.label_objects())[0]
    whole[:, :3] += (codes[:, None] == np.arange(3)) * rng.random((n, 1)).astype(np.float32)
    keep = rng.random(n) < 0.6
    bounds = [(0, n // 3), (n // 3, n)]
    runner = DaskPartitions(client)
    X = PartitionedRows(runner, runner.put([whole[lo:hi] for lo, hi in bounds]), bounds, 12)
    rows = np.sort(rng.choice(n, 3_000, replace=False))
    held = X.on_workers(rows)
    assert isinstance(held, RowsOnWorkers) and held.shape == (3_000, 12) and held.all_finite()
    np.testing.assert_array_equal(held.future.result(), whole[rows])
    with pytest.raises(TypeError, match="for the linear probe"):
        evaluator(text_model("hypothesis_only"), held, codes[rows])
    held.release()
    with pytest.raises(TypeError, match="local runner"):
        PartitionedRows(LocalPartitions(), [whole], [(0, n)], 12).on_workers(rows)

    local = baselines._baselines(_probe_context(dataset, whole, keep)[0])
    expected, sampled = local.documents, local.info["params"]["n_rows_sampled"]
    assert 6_000 <= sampled < n  # a sample of whole groups
    stacked = []
    on_workers = PartitionedRows.on_workers
    monkeypatch.setattr(PartitionedRows, "on_workers",
                        lambda self, index: stacked.append(len(index)) or on_workers(self, index))
    with on_dask(client) as fits:
        there = baselines._baselines(_probe_context(dataset, X, keep)[0]).documents
    assert stacked == [sampled] and fits.tasks > 0 and X.whole_gathers == 0
    assert there == expected
    fetched = []
    take = PartitionedRows.__getitem__
    monkeypatch.setattr(PartitionedRows, "__getitem__",
                        lambda self, index: fetched.append(len(index)) or take(self, index))

    def lost(self, index):
        held = on_workers(self, index)
        client.cancel([held.future])  # as Dask reports a result whose worker left
        return held

    monkeypatch.setattr(PartitionedRows, "on_workers", lost)
    ctx, messages = _probe_context(dataset, X, keep)
    with on_dask(client):
        again = baselines._baselines(ctx).documents
    assert again == expected and fetched == [sampled]
    assert any("worker holding Φ's sample left" in m for m in messages)
    X.release()
