"""Row partitions that stay where they were put: this process, or a Dask cluster's workers.

The partitioned representation (:mod:`aflite_core.represent._partitioned_svd`) writes its
steps once against two runners:

:class:`LocalPartitions`
    The partitions are the objects themselves and every step runs here, in order (the tests
    compare it, with many small partitions, to the all-rows code).
:class:`DaskPartitions`
    Each partition is scattered to one worker (consecutive partitions to the same worker,
    so a chain of partial sums crosses the network once per worker), and every step on a
    partition is a task pinned to that worker, run on one BLAS thread: what it makes (the
    partition's matrix, its basis rows, its rows of Φ) stays there. Only what a step sends
    back travels: word lists and counts, ``V x l`` partial sums, ``l x l`` Gram chunks, Φ's
    rows when the driver asks for them.

Dask cannot recompute scattered data: when a worker holding a partition leaves, the step
fails with :class:`PartitionLost`, and the caller starts again from its texts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future as Box
from typing import Any

from aflite_core import blas_threads
from aflite_core.errors import PartitionLost  # noqa: F401 - re-exported: raised here
from aflite_core.represent._fold_pool import cluster_workers, lost_data

__all__ = ["SCATTER_TIMEOUT_S", "DaskPartitions", "LocalPartitions", "PartitionLost",
           "scatter_within"]


#: Seconds a scatter to the workers may take before it counts as a lost worker (a scatter
#: aimed at a worker killed a moment before hung for minutes on a loaded machine).
SCATTER_TIMEOUT_S = 120.0


def scatter_within(client: Any, objs: list, timeout: float, **kwargs: Any) -> list:
    """``client.scatter(objs, timeout=timeout, **kwargs)``, given up after ``timeout``
    seconds.

    Dask's own ``timeout`` bounds the scheduler's wait for workers, not the transfer: a
    broadcast aimed at a worker killed a moment before hung for minutes once in the full test
    suite (a loaded machine). Here the call runs on a helper thread and :class:`TimeoutError`
    is raised when it outlasts ``timeout``; the helper ends when the client answers or closes.
    """
    box: Box = Box()

    def run() -> None:
        try:
            box.set_result(client.scatter(objs, timeout=timeout, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            box.set_exception(exc)

    threading.Thread(target=run, name="aflite-scatter", daemon=True).start()
    return box.result(timeout=timeout + 1.0)


def on_one_thread(fn: Callable, *args: Any) -> Any:
    with blas_threads.limit(1):
        return fn(*args)


class LocalPartitions:
    """Partitions held by this process; each step runs in the calling thread, in order."""

    n_workers = 1

    def put(self, parts: Sequence[Any]) -> list:
        """The partitions' handles (here: the partitions)."""
        return list(parts)

    def share(self, obj: Any) -> Any:
        """A handle every partition's step may read (here: ``obj``)."""
        return obj

    def map(self, fn: Callable, handles: Sequence[Any], *shared: Any,
            each: Sequence[tuple] | None = None) -> list:
        """``fn(handle, *each[i], *shared)`` for every partition; handles of the results,
        held where the partition is."""
        each = each or [()] * len(handles)
        return [on_one_thread(fn, h, *own, *shared)
                for h, own in zip(handles, each, strict=True)]

    def chain(self, fn: Callable, handles: Sequence[Any], *shared: Any) -> Any:
        """``acc = fn(handle, acc, *shared)`` over the partitions in order (``acc`` starts
        as None); the handle of the last ``acc``."""
        acc = None
        for h in handles:
            acc = on_one_thread(fn, h, acc, *shared)
        return acc

    def gather(self, handles: Sequence[Any]) -> list:
        """The values of ``handles``, in order."""
        return list(handles)

    def release(self, handles: Sequence[Any]) -> None:
        """Forget ``handles`` (here: nothing to do)."""

    def holder(self, handle: Any) -> str:
        """The worker holding ``handle`` ("" here: this process)."""
        return ""


class DaskPartitions:
    """Partitions scattered on ``client``'s workers; steps are tasks pinned to them.

    Parameters
    ----------
    client : dask.distributed.Client
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.workers = sorted(cluster_workers(client))
        if not self.workers:
            raise PartitionLost("the Dask cluster has no worker")
        self._holder: dict[str, str] = {}

    @property
    def n_workers(self) -> int:
        """The workers the partitions are spread over."""
        return len(self.workers)

    def _where(self, handle: Any) -> str:
        return self._holder[handle.key]

    def holder(self, handle: Any) -> str:
        """The worker holding ``handle`` ("" for a handle this runner did not make)."""
        return self._holder.get(handle.key, "")

    def put(self, parts: Sequence[Any]) -> list:
        n, w = len(parts), len(self.workers)
        handles = []
        for i, part in enumerate(parts):
            worker = self.workers[i * w // max(n, 1)]
            [future] = self._scatter([part], workers=[worker], hash=False)
            self._holder[future.key] = worker
            handles.append(future)
        return handles

    def _scatter(self, objs: list, **kwargs: Any) -> list:
        """``client.scatter``, a :class:`PartitionLost` when it outlasts
        :data:`SCATTER_TIMEOUT_S` or fails for lost data (its worker gone)."""
        try:
            return scatter_within(self.client, objs, SCATTER_TIMEOUT_S, **kwargs)
        except TimeoutError:
            raise PartitionLost(f"a scatter to the workers took more than "
                                f"{SCATTER_TIMEOUT_S:.0f} s (a worker left?)") from None
        except Exception as exc:
            if lost_data(exc):
                raise PartitionLost("a worker left the cluster during a scatter") from exc
            raise

    def share(self, obj: Any) -> Any:
        [future] = self._scatter([obj], broadcast=True, hash=False)
        return future

    def _submit(self, fn: Callable, handle: Any, *args: Any) -> Any:
        worker = self._where(handle)
        future = self.client.submit(on_one_thread, fn, handle, *args, workers=[worker],
                                    allow_other_workers=False, pure=False)
        self._holder[future.key] = worker
        return future

    def map(self, fn: Callable, handles: Sequence[Any], *shared: Any,
            each: Sequence[tuple] | None = None) -> list:
        each = each or [()] * len(handles)
        return [self._submit(fn, h, *own, *shared) for h, own in zip(handles, each, strict=True)]

    def chain(self, fn: Callable, handles: Sequence[Any], *shared: Any) -> Any:
        acc = None
        for h in handles:
            acc = self._submit(fn, h, acc, *shared)
        return acc

    def gather(self, handles: Sequence[Any]) -> list:
        try:
            return self.client.gather(list(handles))
        except Exception as exc:
            if lost_data(exc):
                raise PartitionLost(
                    "a worker holding rows of the representation left the cluster") from exc
            raise

    def release(self, handles: Sequence[Any]) -> None:
        # the client's reference only: a step still queued on a handle keeps its data (a
        # cancel would cancel that step too)
        for h in handles:
            if h is not None:
                self._holder.pop(h.key, None)
                h.release()
