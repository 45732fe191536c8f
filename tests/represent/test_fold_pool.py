"""Fold fits side by side: the same results as one thread, in order, and stoppable."""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest
from planted import planted_texts

from aflite_core.measures import baselines, label_issues, pvi
from aflite_core.represent._fold_pool import FOLD_THREADS_ENV, fold_threads, map_folds
from aflite_core.represent._pair_inputs import pair_texts


def test_the_fits_really_run_side_by_side_and_come_back_in_order():
    """Two tasks that each wait for the other can only finish on two threads."""
    barrier = threading.Barrier(2, timeout=10)
    names = set()

    def fit(task: int) -> int:
        names.add(threading.current_thread().name)
        barrier.wait()
        return task * 10

    seen = []
    assert map_folds(fit, [1, 2], threads=2,
                     on_done=lambda i, r: seen.append((i, r, threading.current_thread()))) \
        == [10, 20]
    assert [(i, r) for i, r, _ in seen] == [(0, 10), (1, 20)]
    assert all(t is threading.main_thread() for _, _, t in seen)  # progress from the caller
    assert len(names) == 2 and all(n.startswith("fold-fit") for n in names)


def test_one_thread_runs_in_the_caller():
    names = []
    map_folds(lambda t: names.append(threading.current_thread()), range(3), threads=1)
    assert names == [threading.main_thread()] * 3


def test_a_cancelled_progress_report_stops_the_tasks_not_started():
    """The first result's report raises (a cancelled audit): the later tasks, held back
    until then, are cancelled instead of run."""
    started, gate = [], threading.Event()

    def fit(task: int) -> int:
        started.append(task)
        if task > 0:
            gate.wait(5)
        return task

    def on_done(i: int, _result) -> None:
        gate.set()
        raise KeyboardInterrupt("cancelled")

    with pytest.raises(KeyboardInterrupt, match="cancelled"):
        map_folds(fit, list(range(40)), threads=2, on_done=on_done)
    assert 2 <= len(started) <= 4


def test_a_failing_fit_propagates_its_error():
    def fit(task: int) -> int:
        if task == 3:
            raise ValueError("fold 3 has one class")
        return task

    with pytest.raises(ValueError, match="fold 3 has one class"):
        map_folds(fit, range(6), threads=2)


def test_pool_size_from_the_environment(monkeypatch):
    from aflite_core.represent import _fold_pool as fold_pool

    monkeypatch.setattr(fold_pool, "available_cores", lambda: 4)  # a 4-core process
    monkeypatch.setenv(FOLD_THREADS_ENV, "3")
    assert fold_threads() == 3
    monkeypatch.delenv(FOLD_THREADS_ENV)
    assert fold_threads() == 4
    monkeypatch.setattr(fold_pool, "available_cores", lambda: 1)  # pinned to one core
    assert fold_threads() == 1
    for bad in ("0", "two", "-1", "2"):  # "2": more threads than the one core allowed
        monkeypatch.setenv(FOLD_THREADS_ENV, bad)
        with pytest.raises(ValueError, match=f"{FOLD_THREADS_ENV} must be a positive integer "
                                             r"\(threads for fold fits\) of at most 1"):
            fold_threads()


def test_tasks_that_hold_much_run_fewer_at_once_on_many_cores(monkeypatch):
    """A 16-core process runs up to four fits at once; tasks that each hold 200 MB run two at
    a time (what two cores hold: the peak may not grow with the cores, issue 63 item 5),
    small ones four; an explicit pool size is taken as it is."""
    from aflite_core import _validation
    from aflite_core.represent import _fold_pool as fold_pool

    monkeypatch.setattr(fold_pool, "available_cores", lambda: 16)
    monkeypatch.setattr(_validation, "available_cores", lambda: 16)
    monkeypatch.delenv(FOLD_THREADS_ENV, raising=False)

    def most_at_once(**options) -> int:
        running, most, lock = [0], [0], threading.Lock()

        def fit(task: int) -> int:
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            threading.Event().wait(0.05)  # long enough for every free thread to start one
            with lock:
                running[0] -= 1
            return task

        assert map_folds(fit, range(12), **options) == list(range(12))
        return most[0]

    assert most_at_once() == 4
    assert most_at_once(task_bytes=200 << 20) == 2
    assert most_at_once(task_bytes=10 << 20) == 4
    assert most_at_once(task_bytes=200 << 20, threads=3) == 3
    monkeypatch.setenv(FOLD_THREADS_ENV, "3")
    assert most_at_once(task_bytes=200 << 20) == 3


def _measures(n: int = 1200) -> dict:
    texts, labels, _ = planted_texts(n=n, seed=3)
    rng = np.random.default_rng(4)
    premises = [" ".join(rng.choice([f"p{i}" for i in range(40)], size=5)) for _ in texts]
    groups = np.arange(n) // 2
    kept = rng.random(n) < 0.6
    table = pvi.hypothesis_only_pvi(texts, labels, n_splits=3, groups=groups, random_state=0)
    _, proba = label_issues.out_of_fold_probabilities(pair_texts(premises, texts), labels,
                                              n_splits=2, groups=groups, random_state=0)
    base = baselines.hypothesis_only_baseline(texts, labels, kept, n_splits=3,
                                              n_random_draws=2, groups=groups, random_state=0)
    return {"pvi": table, "proba": proba, "baseline": base}


def test_fold_fits_on_threads_are_bit_identical_to_one_thread(monkeypatch):
    """PVI, the label issues' probabilities and a baseline's every fold accuracy, on planted
    data, with the folds one after the other and side by side."""
    from aflite_core.represent import _fold_pool as fold_pool

    monkeypatch.setattr(fold_pool, "available_cores", lambda: 4)  # three threads allowed
    monkeypatch.setenv(FOLD_THREADS_ENV, "1")
    one = _measures()
    monkeypatch.setenv(FOLD_THREADS_ENV, "3")
    three = _measures()
    pd.testing.assert_frame_equal(one["pvi"], three["pvi"], check_exact=True)
    np.testing.assert_array_equal(one["proba"], three["proba"])
    for part in ("full", "retained"):
        assert one["baseline"][part]["fold_accuracies"] == \
            three["baseline"][part]["fold_accuracies"]
    assert one["baseline"]["random"]["draw_accuracies"] == \
        three["baseline"]["random"]["draw_accuracies"]
    # and the planted cue is found: the measures did real work
    assert one["baseline"]["full"]["accuracy"] > one["baseline"]["full"]["majority_accuracy"]
    assert one["pvi"]["pvi"].max() > 0.5


def test_fold_tasks_on_dask_send_their_rows_beside_the_graph(cluster):
    """A fold's index arrays go to the workers scattered, not inlined in the task graph: at 5M
    rows each fold's were 38 MiB, and Dask warned "Sending large graph" (here the threshold is
    lowered to 1 MB and the warning raised as an error; it fails with the arrays inlined:
    tried)."""
    import warnings

    import dask

    from aflite_core.represent._fold_pool import on_dask

    _, client = cluster
    n = 400_000
    fold_of = np.arange(n) % 4
    folds = [(np.flatnonzero(fold_of != f), np.flatnonzero(fold_of == f)) for f in range(4)]

    def fit(fold):  # the test rows' sum and the training rows' count
        train, test = fold
        return int(test.sum()), len(train)

    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "1MB"}), \
            warnings.catch_warnings():
        warnings.filterwarnings("error", message="Sending large graph")
        with on_dask(client) as record:
            results = map_folds(fit, folds)
    assert results == [(int(test.sum()), len(train)) for train, test in folds]
    assert record.tasks == 4
