"""A worker killed in the middle of AFLite on Dask (issue 27, item 6): the rows it held are
rebuilt on the workers that remain and the fit ends with the local result, bit for bit; a
cluster that keeps losing workers ends the run with a message, and no run folder is left."""

from __future__ import annotations

import os
import signal

import numpy as np
import pandas as pd
import pytest

import aflite_core.filter._backends as backends_module
from aflite_core.filter._aflite import AFLite
from aflite_core.filter.synthetic import make_planted

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")


@pytest.fixture
def process_cluster():
    """Two worker processes (with nannies, which restart a killed worker).

    The scheduler (in this process) gives up connecting to a worker after 10 s, not Dask's
    30: closing a cluster whose scheduler was still copying data to the killed worker waited
    for that timeout (24 s of teardown)."""
    with dask.config.set({"distributed.comm.timeouts.connect": "10s"}), distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    ) as cluster, distributed.Client(cluster) as client:
        yield cluster, client


def _kill_a_worker_after(client, round_no: int):
    """A round callback that SIGKILLs one worker process when round ``round_no`` ends."""
    pid = next(iter(client.run(os.getpid).values()))
    killed = []

    def callback(info: dict) -> bool:
        if info.get("round") == round_no and not killed:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        return False

    return callback, killed


def test_a_killed_worker_does_not_change_the_result(process_cluster, monkeypatch):
    monkeypatch.setattr(backends_module, "_GROUP_BLOCKS", 1)  # a group per block: both
    X, y, _ = make_planted(12_000, 32, random_state=0)       # workers hold rows
    params = {"target_size": 0.5, "n_partitions": 16, "slice_size": 400, "tau": 0.5,
              "random_state": 0}
    local = AFLite(**params).fit(X, y)
    cluster, client = process_cluster
    callback, killed = _kill_a_worker_after(client, 2)
    recover = backends_module._DaskBackend._recover
    recoveries = []

    def counted(self, error):
        recoveries.append(type(error).__name__)
        return recover(self, error)

    monkeypatch.setattr(backends_module._DaskBackend, "_recover", counted)
    dask = AFLite(**params, backend="dask", scheduler=cluster.scheduler_address,
                  callback=callback).fit(X, y)
    assert killed and local.n_rounds_ > 3
    assert recoveries  # the killed worker's rows were rebuilt elsewhere
    np.testing.assert_array_equal(dask.keep_mask_, local.keep_mask_)
    np.testing.assert_array_equal(dask.predictability_, local.predictability_)
    np.testing.assert_array_equal(dask.removal_round_, local.removal_round_)


def test_a_cluster_that_keeps_losing_workers_fails_clearly_and_leaves_no_run(
        process_cluster, monkeypatch, tmp_path):
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit

    monkeypatch.setattr(backends_module, "MAX_WORKER_LOSSES", 0)
    monkeypatch.setattr(backends_module, "_GROUP_BLOCKS", 1)
    cluster, client = process_cluster
    rng = np.random.default_rng(0)
    words = np.array(["red", "blue", "cat", "dog", "sun", "rain", "big", "old", "car"])
    labels = rng.choice(["yes", "no", "maybe"], 9000)
    frame = pd.DataFrame({"hypothesis": [f"{lab}cue " + " ".join(rng.choice(words, 5))
                                         if rng.random() < 0.5 else " ".join(rng.choice(
                                             words, 6)) for lab in labels],
                          "label": labels})
    pid = next(iter(client.run(os.getpid).values()))
    real_predict = backends_module._DaskBackend.predict
    calls = []

    def kill_then_predict(self, *args, **kwargs):  # a worker dies during the second round
        calls.append(1)
        if len(calls) == 2:
            os.kill(pid, signal.SIGKILL)
        return real_predict(self, *args, **kwargs)

    monkeypatch.setattr(backends_module._DaskBackend, "predict", kill_then_predict)
    config = AuditConfig(representation_params={"n_components": 8}, n_partitions=8,
                         target_size=0.5, slice_size=300, measures=("label_shift",),
                         report=False, backend="dask", scheduler=cluster.scheduler_address)
    root = tmp_path / "runs"
    with pytest.raises(RuntimeError, match="workers left the cluster 1 times during the "
                                           "run .* check the workers' memory limit"):
        run_audit(load_dataset(frame, name="faults"), config, runs_root=root)
    assert len(calls) >= 2
    assert not root.exists() or not any(root.iterdir())


def test_fold_fits_survive_the_death_of_the_worker_holding_their_fit(tmp_path):
    """The measures' fold fits on Dask share one scattered fit function, which Dask cannot
    recompute. One worker (its nanny restarts it): the first fit kills it, and the fit
    function with it; the fits are sent again and every result is the local one."""
    from aflite_core.represent._fold_pool import map_folds, on_dask

    marker = str(tmp_path / "killed")

    def fit(task: int) -> int:  # nested: Dask's cloudpickle sends it by value
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)  # the worker process dies mid-task
        return task * task

    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    ) as cluster, distributed.Client(cluster) as client, on_dask(client) as record:
        done = []
        results = map_folds(fit, list(range(6)), on_done=lambda i, r: done.append(i))
    assert results == [i * i for i in range(6)]
    assert os.path.exists(marker) and record.tasks > 6  # sent again after the death
    assert done == list(range(6))  # each result reported once, in order


def test_a_fit_that_fails_on_its_own_is_not_sent_again(tmp_path):
    from aflite_core.represent._fold_pool import map_folds, on_dask

    def fit(task: int) -> int:
        raise ValueError(f"bad fold {task}")

    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    ) as cluster, distributed.Client(cluster) as client, on_dask(client) as record, \
            pytest.raises(ValueError, match="bad fold 0"):
        map_folds(fit, [0, 1, 2])
    assert record.tasks == 3


class _TruncatingClient:
    """A client of the distributed releases (2025.1-2026.6) whose ``scheduler_info()`` lists
    five workers unless asked for all with ``n_workers=-1``."""

    def __init__(self, workers: list[str]) -> None:
        self.workers = workers

    def scheduler_info(self, n_workers: int = 5) -> dict:
        shown = self.workers if n_workers == -1 else self.workers[:n_workers]
        return {"workers": {w: {} for w in shown}}


class _OldClient(_TruncatingClient):
    """A client of the releases before the argument (every worker, no ``n_workers``)."""

    def scheduler_info(self) -> dict:  # noqa: D102 - the old signature
        return {"workers": {w: {} for w in self.workers}}


@pytest.mark.parametrize("client_type", [_TruncatingClient, _OldClient])
def test_a_cluster_of_more_than_five_workers_is_seen_whole(client_type):
    """On a release whose scheduler_info() shows five workers, the sixth to eighth were taken
    for departed (AFLite would rebuild their groups, the fold fits be sent again) and AFLite
    placed its block groups on five workers only."""
    from aflite_core.represent._fold_pool import cluster_workers, departed_workers

    workers = [f"tcp://10.0.0.{i}:4000" for i in range(8)]
    client = client_type(workers)
    assert cluster_workers(client) == set(workers)
    assert departed_workers(client, workers, wait_s=0) == set()
    assert departed_workers(client, [*workers, "tcp://10.0.0.99:4000"], wait_s=0) == {
        "tcp://10.0.0.99:4000"}


@pytest.mark.parametrize("streamed", [False, True])
def test_the_cue_map_reduce_survives_a_worker_killed_mid_chunk(tmp_path, snli_dir, streamed):
    """The cue table's map tasks carry their chunk's rows (Dask retries a task whose worker
    died) and, sent by map_folds, share one scattered extraction function (sent again when
    its holder died); sent one at a time as their texts are read (map_streamed, the
    measure's path), each carries its function: a worker killed in the middle of the first
    chunk leaves the table of all rows at once."""
    from aflite_core.cues import count_tables
    from aflite_core.cues.statistics import cue_tables
    from aflite_core.io.datasets import load_dataset
    from aflite_core.represent._fold_pool import map_folds, map_streamed, on_dask

    data = load_dataset(snli_dir / "snli_dev.csv")
    data = data.subset(data.row_ids()[:3000])
    scopes = {"full": None, "retained": data.row_ids()[::2]}
    marker = str(tmp_path / "killed")

    def mapper(fn, tasks, on_done=None):
        def dying_once(task):  # nested: Dask's cloudpickle sends it by value
            if not os.path.exists(marker):
                open(marker, "w").close()
                os._exit(1)  # the worker process dies mid-chunk
            return fn(task)

        return (map_streamed if streamed else map_folds)(dying_once, tasks, on_done=on_done)

    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    ) as cluster, distributed.Client(cluster) as client, on_dask(client) as record:
        chunked = count_tables.cue_tables(data, scopes, chunk_rows=1000, mapper=mapper,
                                          streamed=streamed, seed_cache=not streamed)
    assert os.path.exists(marker) and record.tasks >= 3
    local = cue_tables(data, scopes, cache_dir=tmp_path / "cache")
    pd.testing.assert_frame_equal(local, chunked, check_exact=True)


def test_phi_on_the_workers_survives_a_worker_killed_mid_svd(tmp_path, snli_dir, monkeypatch):
    """Φ's partitions live on the workers (scattered texts, their TF-IDF and basis rows),
    which Dask cannot recompute: a worker killed in the middle of the SVD's first product
    (its nanny restarts it) makes the build start again from the driver's texts, and Φ is the
    local one bit for bit."""
    import aflite_core.represent._partitioned_svd as partitioned_module
    from aflite_core.represent._builders import SVD_N_ITER, _svd, tfidf_blocks
    from aflite_core.represent._partitions import DaskPartitions

    frame = pd.read_csv(snli_dir / "snli_train_sample.csv", keep_default_na=False)
    hypotheses, premises = frame["hypothesis"].tolist(), frame["premise"].tolist()
    marker = str(tmp_path / "killed")
    step = partitioned_module._gram_step

    def dying_once(M, acc, D):  # nested: Dask's cloudpickle sends it by value
        if acc is not None and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)  # the worker holding the second partition dies mid-product
        return step(M, acc, D)

    monkeypatch.setattr(partitioned_module, "_gram_step", dying_once)
    restarts = []
    build = partitioned_module._build
    monkeypatch.setattr(partitioned_module, "_build",
                        lambda runner, *a: restarts.append(1) or build(runner, *a))
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    ) as cluster, distributed.Client(cluster) as client:
        X, _, _ = partitioned_module.partitioned_tfidf_svd(
            DaskPartitions(client), hypotheses, premises, n_components=16, random_state=0,
            n_iter=SVD_N_ITER, partition_rows=16_384)
    assert os.path.exists(marker) and len(restarts) == 2  # the first build, then one again
    expected, _ = _svd(tfidf_blocks(hypotheses, premises), 16, 0)
    np.testing.assert_array_equal(X, expected)


def test_phi_left_on_the_workers_survives_a_worker_killed_mid_aflite(process_cluster, snli_dir,
                                                                    monkeypatch):
    """Φ's rows left on the workers (``resident=True``) and AFLite's working copies built
    from them: a worker killed after round 2 takes its partitions of Φ and its working copies
    with it. Φ is built again from the texts on the worker that remains (once), the lost
    working copies from it, and the fit ends with the result on the array, bit for bit."""
    from aflite_core.represent._builders import SVD_N_ITER, _svd, tfidf_blocks
    from aflite_core.represent._partitioned_svd import partitioned_tfidf_svd
    from aflite_core.represent._partitions import DaskPartitions

    monkeypatch.setattr(backends_module, "_GROUP_BLOCKS", 1)  # groups on both workers
    frame = pd.read_csv(snli_dir / "snli_train_sample.csv", keep_default_na=False)
    hypotheses, premises = frame["hypothesis"].tolist(), frame["premise"].tolist()
    y = frame["label"].to_numpy()
    whole, _ = _svd(tfidf_blocks(hypotheses, premises), 16, 0)
    cluster, client = process_cluster
    X, _, _ = partitioned_tfidf_svd(DaskPartitions(client), hypotheses, premises,
                                    n_components=16, random_state=0, n_iter=SVD_N_ITER,
                                    partition_rows=16_384, resident=True)
    holders = X.holders()
    assert len(set(holders)) == 2  # the killed worker holds a partition of Φ
    params = {"target_size": 0.5, "n_partitions": 16, "random_state": 0}
    local = AFLite(**params).fit(whole, y)
    callback, killed = _kill_a_worker_after(client, 2)
    dask = AFLite(**params, backend="dask", scheduler=client, callback=callback).fit(X, y)
    assert killed and local.n_rounds_ > 3
    assert X.restores == 1  # Φ built again once
    np.testing.assert_array_equal(dask.keep_mask_, local.keep_mask_)
    np.testing.assert_array_equal(dask.predictability_, local.predictability_)
    np.testing.assert_array_equal(dask.removal_round_, local.removal_round_)
    assert X.whole_gathers == 0


def test_knn_on_phi_left_on_the_workers_survives_a_worker_killed_mid_search(
        process_cluster, snli_dir, tmp_path, monkeypatch):
    """KNN over Φ's rows left on the workers normalises and searches each reference set
    where its rows are: the first search kills its worker (and the partition of Φ it held).
    Φ is built again, the sets searched again, and the tables are those of the search of the
    array on the driver, bit for bit."""
    import aflite_core.measures.knn as knn_module
    from aflite_core.represent._builders import SVD_N_ITER, _svd, tfidf_blocks
    from aflite_core.represent._fold_pool import on_dask
    from aflite_core.represent._partitioned_svd import partitioned_tfidf_svd
    from aflite_core.represent._partitions import DaskPartitions

    frame = pd.concat([pd.read_csv(snli_dir / f"snli_{part}.csv", keep_default_na=False)
                       for part in ("train_sample", "dev")], ignore_index=True)
    hypotheses, premises = frame["hypothesis"].tolist(), frame["premise"].tolist()
    y = frame["label"].to_numpy()
    train = np.flatnonzero(frame["split"].to_numpy() == "train")
    held = np.flatnonzero(frame["split"].to_numpy() == "dev")[:500]
    whole, _ = _svd(tfidf_blocks(hypotheses, premises), 16, 0)
    expected = knn_module.knn_distance_measures(whole, y[train], whole, y[held],
                                                train_rows=train, heldout_rows=held,
                                                random_state=0)
    marker = str(tmp_path / "killed")
    search = knn_module._search_set

    def dying_once(pieces, Qn, K, block_rows):  # nested: Dask's cloudpickle sends it by value
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
        return search(pieces, Qn, K, block_rows)

    monkeypatch.setattr(knn_module, "_search_set", dying_once)
    cluster, client = process_cluster
    X, _, _ = partitioned_tfidf_svd(DaskPartitions(client), hypotheses, premises,
                                    n_components=16, random_state=0, n_iter=SVD_N_ITER,
                                    partition_rows=16_384, resident=True)
    with on_dask(client) as folds:
        got = knn_module.knn_distance_measures(X, y[train], X, y[held], train_rows=train,
                                               heldout_rows=held, random_state=0)
    assert os.path.exists(marker) and X.restores == 1 and folds.tasks > 0
    pd.testing.assert_frame_equal(got.table, expected.table, check_exact=True)
    pd.testing.assert_frame_equal(got.per_example, expected.per_example, check_exact=True)
    assert X.whole_gathers == 0


def test_the_audits_phi_left_on_the_workers_is_built_again_from_the_dataset(
        process_cluster, snli_dir, monkeypatch):
    """``build_representation(..., resident=True)``: a worker holding Φ's rows killed
    before they are read; the next read builds Φ again from the dataset's texts (not from
    lists of them kept for the purpose) and gets the local Φ, bit for bit."""
    import aflite_core.represent._partitioned_svd as partitioned_module
    from aflite_core.io.datasets import load_dataset
    from aflite_core.represent._builders import build_representation

    monkeypatch.setattr(partitioned_module, "PARTITION_ROWS", 16_384)
    frame = pd.read_csv(snli_dir / "snli_train_sample.csv", keep_default_na=False)
    dataset = load_dataset(frame, name="phi")
    local = build_representation(dataset, "tfidf_svd", n_components=16)
    cluster, client = process_cluster
    rep = build_representation(dataset, "tfidf_svd", n_components=16, client=client,
                               resident=True)
    assert rep.params["resident"] is True and rep.X.holders()[0]
    os.kill(next(iter(client.run(os.getpid).values())), signal.SIGKILL)
    np.testing.assert_array_equal(rep.X[np.arange(0, 20_000, 7)], local.X[::7])
    assert rep.X.restores == 1
    np.testing.assert_array_equal(np.asarray(rep.X), local.X)


def test_two_readers_that_find_phi_lost_build_it_again_once(process_cluster, snli_dir):
    """Measures run side by side on threads: two of them reading Φ's rows just after a
    worker holding some died both find them lost; one builds Φ again, the other reads the
    new partitions (one restore, not two), and both get the local rows."""
    import threading

    from aflite_core.represent._builders import SVD_N_ITER, _svd, tfidf_blocks
    from aflite_core.represent._partitioned_svd import partitioned_tfidf_svd
    from aflite_core.represent._partitions import DaskPartitions

    frame = pd.read_csv(snli_dir / "snli_train_sample.csv", keep_default_na=False)
    hypotheses, premises = frame["hypothesis"].tolist(), frame["premise"].tolist()
    whole, _ = _svd(tfidf_blocks(hypotheses, premises), 16, 0)
    cluster, client = process_cluster
    X, _, _ = partitioned_tfidf_svd(DaskPartitions(client), hypotheses, premises,
                                    n_components=16, random_state=0, n_iter=SVD_N_ITER,
                                    partition_rows=16_384, resident=True)
    assert len(set(X.holders())) == 2
    os.kill(next(iter(client.run(os.getpid).values())), signal.SIGKILL)
    start, read = threading.Barrier(2), [None, None]

    def reader(i: int) -> None:
        start.wait()
        read[i] = X[np.arange(i, 20_000, 3)]

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    for i in range(2):
        np.testing.assert_array_equal(read[i], whole[i::3])
    assert X.restores == 1


def test_pvi_counted_on_the_workers_survives_the_death_of_the_worker_holding_the_counts(
        tmp_path, snli_dir, monkeypatch):
    """PVI above its threshold on a cluster: the count matrix and the fold evaluator are tasks'
    results on a worker, never on the driver. One worker (its nanny restarts it) dies in the
    first fold: the counts and the evaluator die with it, Dask computes them again from the
    counting tasks' own texts, and the table is the local one bit for bit."""
    from aflite_core.measures import pvi
    from aflite_core.represent._fold_pool import on_dask

    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False).iloc[:2000]
    hypotheses, labels = frame["hypothesis"].tolist(), frame["label"].to_numpy()
    here = pvi.hypothesis_only_pvi(hypotheses, labels, n_splits=2, random_state=3)
    monkeypatch.setattr(pvi, "WORKER_COUNTS_MIN_ROWS", 1000)
    monkeypatch.setattr(pvi, "COUNT_CHUNK_ROWS", 600)
    marker = str(tmp_path / "killed")
    fit_fold = pvi._fit_fold

    def dying_fit(fold, folds_model, **kwargs):  # nested: sent by value
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)  # the worker process dies with the counts and the evaluator
        return fit_fold(fold, folds_model, **kwargs)

    monkeypatch.setattr(pvi, "_fit_fold", dying_fit)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    ) as cluster, distributed.Client(cluster) as client, on_dask(client) as record:
        there = pvi.hypothesis_only_pvi(hypotheses, labels, n_splits=2, random_state=3)
    assert os.path.exists(marker) and record.tasks > 2  # the folds were sent again
    pd.testing.assert_frame_equal(there, here, check_exact=True)
