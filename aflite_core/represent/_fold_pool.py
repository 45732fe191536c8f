"""Independent fold fits on a small thread pool.

The baselines, PVI and the label issues fit one logistic regression per cross-validation
fold, each on one core: Newton-CG's sparse products and scikit-learn's loss run in C with the
GIL released, on one BLAS thread (:func:`~aflite_core.represent.single_blas_thread`).
On a 2-core machine two such fits side by side take 0.64 of the time of one after the other
(two hypothesis-only folds of 100k SNLI-like rows: 1.52 s -> 0.98 s, the same predictions).

:func:`map_folds` runs the fits of one measure on :func:`fold_threads` threads. Each task is a
whole fit (its own rows, its own model, nothing shared but read-only features), so its result
does not depend on which thread ran it or when: results come back in submission order and
are bit-identical to a single thread (``tests/represent/test_fold_pool.py``; the golden run of
``tests/test_golden_run.py`` holds). BLAS is held to one thread for the whole pool, so the
fits never oversubscribe the cores.

``AFLITE_FOLD_THREADS`` sets the pool size (``1`` runs the folds one after the other in the
calling thread); the default is the number of cores this process may use, at most
:data:`MAX_THREADS`.

**On Dask.** Inside :func:`on_dask` (the audit's measures when it runs with a scheduler),
:func:`map_folds` sends the fits to the client's workers instead, as joblib's
``parallel_backend`` context sends scikit-learn's: the fit function, with the features it
closes over, is scattered once (the workers pass it on among themselves), and each fold is
one task holding only its row indices. A task fits on one BLAS thread as the local pool
does, so the results are the same bit for bit (``tests/filter/test_dask_backend.py``); they come
back, and progress is reported, in submission order.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from contextvars import ContextVar
from typing import Any, TypeVar

from aflite_core import blas_threads
from aflite_core._validation import available_cores, scratch_threads
from aflite_core.errors import LostOnCluster  # noqa: F401 - re-exported: raised here

__all__ = ["FOLD_THREADS_ENV", "MAX_THREADS", "DaskFolds", "LostOnCluster", "available_cores",
           "cluster_workers", "dask_folds", "departed_workers", "fold_share", "fold_threads",
           "lost_on_cluster", "map_folds", "map_streamed", "on_dask"]



T = TypeVar("T")
R = TypeVar("R")

#: Environment variable overriding the pool size.
FOLD_THREADS_ENV = "AFLITE_FOLD_THREADS"
#: The default pool never exceeds this many threads (more fold fits side by side hold more
#: fold features in memory for little gain: a measure has 2 to 35 fits).
MAX_THREADS = 4


def fold_threads() -> int:
    """Threads :func:`map_folds` uses: ``$AFLITE_FOLD_THREADS`` if set, else the cores this
    process may use, at most :data:`MAX_THREADS`.

    Raises
    ------
    ValueError
        When ``$AFLITE_FOLD_THREADS`` is not a positive integer, or is more than the cores
        this process may use (more threads than cores only wait on each other).
    """
    raw = os.environ.get(FOLD_THREADS_ENV, "").strip()
    cores = available_cores()
    if not raw:
        return max(1, min(MAX_THREADS, cores))
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= cores:
        raise ValueError(f"{FOLD_THREADS_ENV} must be a positive integer (threads for fold "
                         f"fits) of at most {cores}, the cores this process may use; got "
                         f"{raw[:40]!r}")
    return value


class DaskFolds:
    """Where :func:`map_folds` sends its fits inside :func:`on_dask`, and how many it sent.

    Attributes
    ----------
    client : dask.distributed.Client
    tasks : int
        Fits sent to the workers so far in this context.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.tasks = 0


_ON_DASK: ContextVar[DaskFolds | None] = ContextVar("aflite_fold_client", default=None)


@contextlib.contextmanager
def on_dask(client: Any) -> Iterator[DaskFolds | None]:
    """Within this context (this thread's), :func:`map_folds` fits on ``client``'s workers.

    Parameters
    ----------
    client : dask.distributed.Client or None
        None leaves the folds on the local thread pool.

    Yields
    ------
    DaskFolds or None
        Its ``tasks`` counts the fits sent (0: the code inside fitted no folds).
    """
    record = None if client is None else DaskFolds(client)
    token = _ON_DASK.set(record)
    try:
        yield record
    finally:
        _ON_DASK.reset(token)


def dask_folds() -> DaskFolds | None:
    """The :func:`on_dask` context this code runs in, or None (local): for a measure whose
    tasks are coarser on a cluster than on the local pool."""
    return _ON_DASK.get()


#: Whether this thread runs a task of :func:`map_folds`' local pool, and how many such tasks
#: run in this process now (:func:`fold_share`).
_IN_FOLD_TASK: ContextVar[bool] = ContextVar("aflite_in_fold_task", default=False)
_RUNNING = [0]
_RUNNING_LOCK = threading.Lock()


def _local_task(fit: Callable[[T], R], task: T) -> R:
    """``fit(task)`` counted among the running fold tasks (:func:`fold_share`)."""
    token = _IN_FOLD_TASK.set(True)
    with _RUNNING_LOCK:
        _RUNNING[0] += 1
    try:
        return fit(task)
    finally:
        with _RUNNING_LOCK:
            _RUNNING[0] -= 1
        _IN_FOLD_TASK.reset(token)


def fold_share() -> int:
    """Cores the calling fold task may use now: in a task of :func:`map_folds`' local pool,
    the cores this process may use divided among the tasks running (at least one); else 1
    (a task on a Dask worker, or code outside any fold task).

    A fit's sparse products use it (``represent._split_products``): a fold fit running alone,
    the last of a measure's, takes every core; two of them half each. Work beside the fold
    tasks is not counted (the map beside the measures on few cores: a lone fit's products
    then share a core with it for their milliseconds).

    Examples
    --------
    >>> fold_share()
    1
    >>> map_folds(lambda task: fold_share(), [0], threads=1) == [available_cores()]
    True
    """
    if not _IN_FOLD_TASK.get():
        return 1
    with _RUNNING_LOCK:
        running = _RUNNING[0]
    return max(1, available_cores() // max(1, running))


def _fit_task(fit: Callable[..., R], task: T, *resident: Any) -> R:
    """One fold fit on a worker, on one BLAS thread as on the local pool."""
    with blas_threads.limit(1):
        return fit(task, *resident)


#: Times the fits of one map are sent again after the worker holding their scattered fit
#: function left the cluster (Dask retries a task whose worker died, but cannot recompute
#: scattered data: every task that needs it is cancelled).
RESEND_LIMIT = 2
#: Seconds to wait for a worker to hold the fit function again (a nanny restarts a killed
#: worker in about a second).
RESEND_WAIT_S = 30.0


def _map_on_dask(record: DaskFolds, fit: Callable[..., R], tasks: list[T],
                 on_done: Callable[[int, R], object] | None, resident: tuple = ()) -> list[R]:
    """The fits as tasks on ``record.client``'s workers, results in task order; sent again,
    from the first missing result, when a worker holding the fit function or a task's rows
    left."""
    client = record.client
    results: list[R] = []
    resent = 0
    while True:
        # to one worker; the others fetch it from there for their first task (a broadcast
        # waits on every worker, a dying one included)
        [shared] = client.scatter([fit], hash=False)
        # each task's rows scattered, not inlined in the graph: a fold's index arrays of 5M
        # rows are 38 MiB (Dask's "Sending large graph" warning), and the scheduler would
        # keep every task's arguments while its result lives
        sent = client.scatter(list(tasks[len(results):]), hash=False)
        held = client.who_has([shared, *sent])
        holders = {worker for future in (shared, *sent)
                   for worker in held.get(future.key, ())}
        futures = [client.submit(_fit_task, shared, task, *resident, pure=False)
                   for task in sent]
        record.tasks += len(futures)
        try:
            lost = _collect(futures, results, on_done, client, holders)
        except BaseException:
            client.cancel(futures)
            raise
        finally:
            client.cancel([shared, *sent])
        if lost is None:
            return results
        resent += 1
        if resent > RESEND_LIMIT:
            raise LostOnCluster(
                f"fold fits on Dask: the worker holding the fit function left the cluster "
                f"{resent} times; check the workers' memory limit and logs, or run without a "
                "scheduler") from lost
        client.wait_for_workers(1, timeout=RESEND_WAIT_S)


def _collect(futures: list, results: list, on_done: Callable[[int, R], object] | None,
             client: Any, holders: set[str]) -> BaseException | None:
    """Append the futures' results in order (reporting each); the error that ended it when
    the fit function's holder left (the rest is to be sent again), else None. A fit's own
    error, and any error of ``on_done`` (a cancellation), is raised."""
    for future in futures:
        try:
            result = future.result()
        except Exception as exc:
            client.cancel(futures)
            if not lost_data(exc) or not _left(client, holders):
                raise  # the fit's own error (or the cluster's, with its holder alive)
            return exc
        results.append(result)
        if on_done is not None:
            on_done(len(results) - 1, result)
    return None


def map_streamed(fit: Callable[[T], R], tasks: Iterable[T], *,
                 on_done: Callable[[int, R], object] | None = None,
                 workers: Sequence[str | None] | None = None) -> list[R]:
    """:func:`map_folds` for tasks made one at a time (each carrying a chunk of rows read
    just before): inside :func:`on_dask` each is sent to the cluster as soon as it is made
    and dropped here, so the tasks are never all in this process at once; elsewhere
    :func:`map_folds` of them. ``fit`` must be picklable by reference or by value (a
    module-level function or a partial of one): Dask retries a task whose worker died from
    the task's own arguments (no scattered function to lose). ``workers[i]``, where given,
    is the worker the i-th task should run on if it can (another when that one is gone:
    the cue table's chunks where their tags were made ahead, in that worker's cache).
    """
    record = _ON_DASK.get()
    if record is None:
        return map_folds(fit, list(tasks), on_done=on_done)
    client = record.client
    futures = []
    for i, task in enumerate(tasks):
        where = workers[i] if workers is not None and i < len(workers) else None
        hint = {"workers": [where], "allow_other_workers": True} if where else {}
        futures.append(client.submit(_fit_task, fit, task, pure=False, **hint))
        record.tasks += 1
    results: list[R] = []
    try:
        for future in futures:
            results.append(future.result())
            if on_done is not None:
                on_done(len(results) - 1, results[-1])
    except BaseException:
        client.cancel(futures)
        raise
    return results


def stream_ordered(client: Any, fn: Callable[[T], R], items: Iterable[T], *,
                   ahead: int = 0) -> Iterator[R]:
    """``fn`` of each item as tasks on ``client``'s workers, the results yielded in the items'
    order: ``ahead`` tasks (default: two per worker) in flight while this process takes the
    next result, each task let go once its result is taken, the items made only as they are
    sent (an iterator of chunks read one at a time stays one at a time here). Closing the
    iterator cancels the tasks in flight; a task's error is raised as it is. ``fn`` is sent
    by value or reference like any task (a module-level function or a partial of one)."""
    ahead = int(ahead) or 2 * max(len(cluster_workers(client)), 1)
    items = iter(items)
    waiting: deque = deque()
    more = True
    try:
        while True:
            while more and len(waiting) < ahead:
                try:
                    item = next(items)
                except StopIteration:
                    more = False
                    break
                waiting.append(client.submit(fn, item, pure=False))
                del item
            if not waiting:
                return
            future = waiting.popleft()
            result = future.result()
            future.release()
            yield result
            del result
    finally:
        if waiting:
            client.cancel(list(waiting))


def _with_resident(fit: Callable[..., R], resident: Any, task: T) -> R:
    return fit(task, resident)


def _is_future(value: Any) -> bool:
    return type(value).__name__ == "Future" and hasattr(value, "key")


def lost_data(error: BaseException) -> bool:
    """Whether ``error`` is how Dask reports a task it gave up (cancelled for lost data, a
    worker killed, a closed connection), not an error raised by the fit itself."""
    # FutureCancelledError is a CancelledError, CommClosedError an OSError
    return isinstance(error, CancelledError | OSError) or type(error).__name__ == "KilledWorker"


def lost_on_cluster(error: BaseException) -> bool:
    """Whether ``error`` says work was lost with a worker that left (Dask's lost data, a
    killed worker, :class:`LostOnCluster`), not an error of the work itself: a caller may then
    do the work another way (e.g. on rows fetched to this process)."""
    return isinstance(error, LostOnCluster) or lost_data(error)


def _left(client: Any, holders: set[str]) -> bool:
    """Whether a worker in ``holders`` (of the fit function or a task's scattered rows) has
    left (see :func:`departed_workers`): what it held is lost."""
    return bool(holders) and bool(departed_workers(client, holders))


def cluster_workers(client: Any) -> set[str]:
    """The addresses of every worker of ``client``'s cluster.

    ``Client.scheduler_info()`` lists at most five workers by default in the distributed
    releases between 2025.1 and 2026.6 (dask/distributed#9045, undone by #9308), which this
    project's requirement (``>= 2024.1``) admits: on a larger cluster AFLite would have placed
    its block groups on five workers and taken the others for departed. All of them are asked
    for explicitly (``n_workers=-1``) where the release knows the argument.
    """
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:  # releases before the argument list every worker anyway
        info = client.scheduler_info()
    return set(info["workers"])


def departed_workers(client: Any, addresses: Iterable[str], *,
                     wait_s: float = 2.0) -> set[str]:
    """The workers among ``addresses`` no longer in ``client``'s cluster. The scheduler may
    learn of a death a moment after a task of the client failed, so an empty answer is asked
    again for up to ``wait_s`` seconds."""
    addresses = set(addresses)
    deadline = time.monotonic() + wait_s
    while True:
        gone = addresses - cluster_workers(client)
        if gone or time.monotonic() > deadline:
            return gone
        time.sleep(0.1)


#: ``map_folds``' default ``resident``: nothing passed.
_NOTHING = object()


def map_folds(fit: Callable[..., R], tasks: Sequence[T], *,
              on_done: Callable[[int, R], object] | None = None,
              threads: int | None = None, resident: Any = _NOTHING,
              task_bytes: int | None = None) -> list[R]:
    """``[fit(task) for task in tasks]``, the fits side by side on a thread pool.

    Parameters
    ----------
    fit : callable
        One whole fold fit; it must not modify state another task reads.
    tasks : sequence
        One entry per fit.
    on_done : callable, optional
        ``on_done(i, result)``, called in the calling thread for each task in submission order
        as soon as its result (and every earlier one) is ready: progress reports stay in
        order. If it raises (a cancelled audit), the tasks not started are cancelled, the
        running ones finish, and the exception propagates.
    threads : int, optional
        Pool size (default :func:`fold_threads`); 1 runs the fits in the calling thread.
        Inside :func:`on_dask`, the fits are tasks on the client's workers instead (``fit``
        must then pickle: a function of module level or a closure over picklable values).
    resident : optional
        Passed to every fit as ``fit(task, resident)``: a value every fit reads (on a
        cluster it travels once, with the scattered fit function). Inside :func:`on_dask`
        it may be a Dask future (e.g. features built on the workers): each task then
        receives its value on the workers, and it never comes to this process;
        a lost worker's copy is recomputed by Dask from the future's own task.
    task_bytes : int, optional
        About what one task holds while it runs: the default pool then runs no more tasks at
        once than :func:`~aflite_core._validation.scratch_threads` allows
        (``POOL_SCRATCH_BYTES`` in all, two tasks at least), so that the peak does not grow
        with the cores.
        ``threads`` and ``$AFLITE_FOLD_THREADS``, when given, are taken as they are.

    Returns
    -------
    list
        The results, in the order of ``tasks``.
    """
    tasks = list(tasks)
    record = _ON_DASK.get()
    extra = ()
    if _is_future(resident):  # each task gets the future's value where it is
        if record is None:
            raise TypeError("resident: a Dask future is only for fits inside on_dask(client)")
        extra = (resident,)
    elif resident is not _NOTHING:  # a value goes with the fit function (scattered once)
        fit = functools.partial(_with_resident, fit, resident)
    if record is not None and tasks:
        return _map_on_dask(record, fit, tasks, on_done, extra)
    if threads is None:
        threads = fold_threads()
        if task_bytes is not None and not os.environ.get(FOLD_THREADS_ENV, "").strip():
            threads = min(threads, scratch_threads(task_bytes))
    threads = int(threads)
    results: list[R] = []
    with blas_threads.limit(1):
        if threads <= 1 or len(tasks) <= 1:
            for i, task in enumerate(tasks):
                results.append(_local_task(fit, task))
                if on_done is not None:
                    on_done(i, results[-1])
            return results
        pool = ThreadPoolExecutor(max_workers=min(threads, len(tasks)),
                                  thread_name_prefix="fold-fit")
        futures: list[Future] = []
        try:
            futures = [pool.submit(_local_task, fit, task) for task in tasks]
            for i, future in enumerate(futures):
                results.append(future.result())
                if on_done is not None:
                    on_done(i, results[-1])
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    return results
