"""Φ left where it was built: a matrix whose rows are partitions held by a runner.

:func:`~aflite_core.represent._partitioned_svd.partitioned_tfidf_svd` computes Φ's rows on the
partitions of a :class:`~aflite_core.represent._partitions.DaskPartitions` runner (a worker
each). With ``resident=True`` it leaves them there and returns a :class:`PartitionedRows`:
the driver holds the handles and the partitions' bounds, never the rows.

What reads Φ reads it as it reads an array, a block of rows at a time: ``X[i:j]``,
``X[positions]`` and ``X[mask]`` fetch exactly those rows (one task per run of rows in one
partition, on the worker holding it) and return a new float32 array, the rows the array
would give, bit for bit. ``X.select(rows)`` is a view of some rows (no fetch), as
:class:`~aflite_core.filter._rounds.RowSelection` is of an array; AFLite's Dask backend builds
its working copies from :meth:`PartitionedRows.pieces` on the workers, without the rows
passing through the driver. ``np.asarray(X)`` (:meth:`PartitionedRows.gather`) fetches
every row: for a reader that has not learnt to read by blocks, counted in
:attr:`PartitionedRows.whole_gathers`.

A worker that leaves takes its partitions with it (Dask cannot recompute scattered data):
a fetch that finds one lost calls the ``restore`` it was given (the builder's: Φ built again
from the texts, the same rows bit for bit), at most :data:`MAX_RESTORES` times, then fails
with :class:`~aflite_core.represent._partitions.PartitionLost`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from aflite_core.represent._fold_pool import departed_workers
from aflite_core.represent._partitions import LocalPartitions, PartitionLost, on_one_thread

__all__ = ["MAX_RESTORES", "PartitionedRows", "RowsOnWorkers", "add_rows", "is_partitioned",
           "on_cluster"]

#: Times the partitions are built again after workers holding them left.
MAX_RESTORES = 2


def _take(part: np.ndarray, local: Any) -> np.ndarray:
    """Rows ``local`` (a slice or positions) of one partition, as a new array."""
    return np.array(part[local], copy=True)


def _apply_rows(part: np.ndarray, local: Any, fn: Callable, *shared: Any) -> Any:
    """``fn(part[local], *shared)``: a chunk's function where its rows are."""
    return fn(part[local], *shared)


def _apply_rows_at(part: np.ndarray, local: Any, start: int, fn: Callable, *shared: Any) -> Any:
    """``fn(part[local], start, *shared)``: :func:`_apply_rows` told the chunk's first row."""
    return fn(part[local], start, *shared)


def _sum64(rows: np.ndarray) -> np.ndarray:
    """``rows.sum(axis=0, dtype=float64)``: the sum the driver takes of those rows."""
    return rows.sum(axis=0, dtype=np.float64)


def add_rows(acc: np.ndarray | None, rows: np.ndarray, chunk: int) -> np.ndarray | None:
    """``acc`` (None: nothing yet) plus ``rows``, added one row after the other in float64:
    a NumPy axis-0 reduction adds row after row, so each chunk of ``chunk`` rows is summed
    after the running total (its first row), the same additions in the same order however
    the rows are cut."""
    for lo in range(0, len(rows), chunk):
        block = rows[lo:lo + chunk].astype(np.float64)
        if acc is not None:
            block = np.concatenate([acc[None], block])
        acc = np.add.reduce(block, axis=0)
    return acc


def _running_sum(part: np.ndarray, acc: np.ndarray | None, local: Any,
                 chunk: int) -> np.ndarray | None:
    """:func:`add_rows` of the rows ``part[local]``, where the partition is."""
    return add_rows(acc, part[local], chunk)


def _all_finite(part: np.ndarray) -> bool:
    return bool(np.isfinite(part).all())


def _apply_pieces(pieces: list, fn: Callable, *args: Any) -> Any:
    """``fn`` of the rows ``pieces`` (runs of rows in order) put together, on a worker
    (:meth:`PartitionedRows.map_chunks`' chunks across partitions)."""
    return fn(np.concatenate(pieces), *args)


def _stack(pieces: list, wheres: list, n: int, d: int) -> np.ndarray:
    """The rows ``pieces`` placed at ``wheres`` in one float32 ``(n, d)`` array (on a worker:
    :meth:`PartitionedRows.on_workers`)."""
    out = np.empty((n, d), dtype=np.float32)
    for piece, where in zip(pieces, wheres, strict=True):
        out[where] = piece
    return out


class RowsOnWorkers:
    """Rows of Φ stacked on one worker of a Dask cluster (:meth:`PartitionedRows.on_workers`):
    tasks read them there (``map_folds(resident=future)``); they never come to this process.

    Attributes
    ----------
    future : distributed.Future
        Of the float32 ``shape`` array; Dask cannot compute it again once the partitions it
        was taken from are gone: a reader that loses it fetches the rows instead.
    shape : tuple of int
    dtype : numpy.dtype
        float32.
    """

    ndim = 2

    def __init__(self, future: Any, shape: tuple[int, int]) -> None:
        self.future, self.shape = future, (int(shape[0]), int(shape[1]))
        self.dtype = np.dtype(np.float32)

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"RowsOnWorkers(shape={self.shape})"

    def all_finite(self) -> bool:
        """Whether every entry is finite (checked on the worker holding the rows)."""
        check = self.future.client.submit(_all_finite, self.future, pure=False)
        try:
            return bool(check.result())
        finally:
            check.release()

    def release(self) -> None:
        """Forget the rows (the worker may free them)."""
        self.future.release()


def is_partitioned(X: Any) -> bool:
    """Whether ``X`` is a :class:`PartitionedRows` (rows held by workers, or by a file:
    :mod:`~aflite_core.represent._phi_on_disk`)."""
    return isinstance(X, PartitionedRows)


def on_cluster(X: Any) -> bool:
    """Whether ``X`` is a :class:`PartitionedRows` whose rows a Dask cluster's workers hold
    (not this process: a local runner, or Φ on disk)."""
    return is_partitioned(X) and getattr(X.runner, "client", None) is not None


class _Store:
    """The partitions' handles, shared by a matrix and its selections, and their restore."""

    def __init__(self, runner: Any, handles: list, bounds: list[tuple[int, int]],
                 restore: Callable[[], tuple[Any, list]] | None) -> None:
        self.runner, self.handles, self.bounds = runner, list(handles), list(bounds)
        self.starts = np.asarray([lo for lo, _ in bounds], dtype=np.int64)
        self.restore = restore
        self.restores = 0
        # measures run on threads side by side: one restore for one loss
        self.lock = threading.RLock()

    def rebuild(self, error: BaseException, generation: int | None = None) -> None:
        """Build the partitions again (``restore``), or re-raise ``error``. ``generation``:
        :attr:`restores` when the caller read the handles; if another thread has restored
        them since, they are new and nothing is done (the caller reads again)."""
        with self.lock:
            if generation is not None and generation != self.restores:
                return
            if self.restore is None or self.restores >= MAX_RESTORES:
                raise PartitionLost(
                    f"Φ on Dask: workers holding its rows left the cluster"
                    f"{f' ({self.restores + 1} times)' if self.restores else ''}; check "
                    "the workers' memory limit and logs, or run without a scheduler"
                ) from error
            old_runner, old = self.runner, self.handles
            self.runner, self.handles = self.restore()
            self.restores += 1
        # what the departed worker held is gone anyway: releasing it may fail
        with contextlib.suppress(Exception):
            old_runner.release(old)

    def holders(self) -> list[str]:
        """The worker of each partition ("" for a local runner)."""
        return [self.runner.holder(h) for h in self.handles]


class PartitionedRows:
    """A float32 matrix whose rows are partitions held by a runner (Φ on the workers).

    Parameters
    ----------
    runner : DaskPartitions or LocalPartitions
        Holds the partitions (:mod:`~aflite_core.represent._partitions`).
    handles : list
        One per partition, in row order: ``runner``'s handles of float32 ``(rows, d)`` arrays.
    bounds : list of (int, int)
        ``(start, stop)`` of each partition, consecutive from 0.
    n_columns : int
        d.
    restore : callable, optional
        Called when partitions were lost: returns ``(runner, handles)`` of the same rows built
        again. Without it a lost partition is an error.

    Attributes
    ----------
    shape : tuple of int
    dtype : numpy.dtype
        float32.
    whole_gathers : int
        Times every row was fetched at once (:meth:`gather`), this matrix and its selections.
    """

    ndim = 2

    def __init__(self, runner: Any, handles: list, bounds: list[tuple[int, int]],
                 n_columns: int, *, restore: Callable[[], tuple[Any, list]] | None = None
                 ) -> None:
        if len(handles) != len(bounds):
            raise ValueError(f"handles: expected one per partition ({len(bounds)}), got "
                             f"{len(handles)}")
        cuts = [lo for lo, _ in bounds] + [bounds[-1][1] if bounds else 0]
        if bounds and (cuts[0] != 0 or any(hi != cuts[i + 1] for i, (_, hi) in
                                           enumerate(bounds))):
            raise ValueError(f"bounds: expected consecutive (start, stop) from 0, got {bounds}")
        self._store = _Store(runner, handles, bounds, restore)
        self._rows: np.ndarray | None = None
        self._counter = [0]
        self.shape = (cuts[-1], int(n_columns))
        self.dtype = np.dtype(np.float32)

    # -- views -------------------------------------------------------------------------
    @property
    def whole_gathers(self) -> int:
        return self._counter[0]

    @property
    def restores(self) -> int:
        """Times the partitions were built again after workers holding some left."""
        return self._store.restores

    def holders(self) -> list[str]:
        """The worker holding each partition now ("" for a local runner)."""
        return self._store.holders()

    @property
    def runner(self) -> Any:
        """The runner holding the partitions now (another one after a restore)."""
        return self._store.runner

    @property
    def handles(self) -> list:
        """The partitions' handles, in row order."""
        return list(self._store.handles)

    def restore_with(self, restore: Callable[[], tuple[Any, list]] | None) -> None:
        """Set what builds the partitions again when workers holding some left."""
        self._store.restore = restore

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"PartitionedRows(shape={self.shape}, partitions={len(self._store.bounds)}"
                f"{'' if self._rows is None else ', a selection'})")

    def positions(self, index: Any = slice(None)) -> np.ndarray:
        """The rows of the whole matrix that ``self[index]`` reads, in order."""
        n = self.shape[0]
        if isinstance(index, slice):
            local = np.arange(*index.indices(n), dtype=np.int64)
        else:
            index = np.asarray(index)
            if index.dtype == bool:
                if index.shape != (n,):
                    raise IndexError(f"boolean index: expected shape ({n},), got {index.shape}")
                local = np.flatnonzero(index)
            elif index.ndim <= 1 and (index.size == 0 or index.dtype.kind in "iu"):
                local = np.atleast_1d(index).astype(np.int64, copy=False)
                if local.size and (local.min() < -n or local.max() >= n):
                    raise IndexError(f"row index out of range for {n} rows")
                local = np.where(local < 0, local + n, local)
            else:
                raise IndexError(f"PartitionedRows: index rows by a slice, positions or a "
                                 f"boolean mask, got {index.dtype} of shape {index.shape}")
        return local if self._rows is None else self._rows[local]

    def select(self, rows: Any) -> PartitionedRows:
        """The rows ``rows`` (positions or a mask of this matrix's rows) as a matrix of their
        own, read through (nothing fetched)."""
        view = object.__new__(PartitionedRows)
        view._store, view._counter = self._store, self._counter
        view._rows = self.positions(rows)
        view.shape = (len(view._rows), self.shape[1])
        view.dtype = self.dtype
        return view

    # -- reading -----------------------------------------------------------------------
    def _runs(self, positions: np.ndarray) -> list[tuple[int, Any, int, int]]:
        """``(partition, local slice or positions, out start, out stop)`` per run of
        ``positions`` inside one partition."""
        store = self._store
        part = np.searchsorted(store.starts, positions, side="right") - 1
        cuts = [0, *(np.flatnonzero(np.diff(part)) + 1).tolist(), len(positions)]
        runs = []
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            p = int(part[a])
            local = positions[a:b] - store.starts[p]
            if b - a > 1 and local[-1] - local[0] == b - a - 1 and np.all(np.diff(local) == 1):
                local = slice(int(local[0]), int(local[-1]) + 1)
            elif b - a == 1:
                local = slice(int(local[0]), int(local[0]) + 1)
            runs.append((p, local, a, b))
        return runs

    def _by_partition(self, positions: np.ndarray) -> list[tuple[int, Any, Any]]:
        """``(partition, local slice or positions, where in the output)`` per partition that
        ``positions`` (in any order) reach: one task per partition, however they interleave."""
        store = self._store
        part = np.searchsorted(store.starts, positions, side="right") - 1
        order = np.argsort(part, kind="stable")
        cuts = [0, *(np.flatnonzero(np.diff(part[order])) + 1).tolist(), len(positions)]
        out = []
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            where = order[a:b]
            p = int(part[where[0]])
            local = positions[where] - store.starts[p]
            if local[-1] - local[0] == b - a - 1 and np.all(np.diff(local) == 1):
                local = slice(int(local[0]), int(local[-1]) + 1)
            if b - a == len(positions) or (where[-1] - where[0] == b - a - 1
                                           and np.all(np.diff(where) == 1)):
                where = slice(int(where[0]), int(where[-1]) + 1)
            out.append((p, local, where))
        return out

    def _fetch(self, positions: np.ndarray) -> np.ndarray:
        """The rows at ``positions``: every partition's taken where it is, each copied into
        the result as it arrives and then dropped (gathered all at once they were held
        beside the result: twice the rows' bytes, 0.5 GB for the baselines' sample of 2M)."""
        out = np.empty((len(positions), self.shape[1]), dtype=np.float32)
        if not len(positions):
            return out
        reads = self._by_partition(positions)

        def place(i: int, piece: np.ndarray) -> None:
            out[reads[i][2]] = piece

        self._on_partitions(_take, [p for p, _, _ in reads],
                            [(local,) for _, local, _ in reads], consume=place)
        return out

    def _on_partitions(self, fn: Callable, parts: list[int], each: list[tuple] | None = None,
                       consume: Callable[[int, Any], None] | None = None) -> list | None:
        """``[fn(partition p, *each[i]) for i, p in enumerate(parts)]``, each where its
        partition is; the partitions built again (and ``fn`` run again) when lost.

        With ``consume``, each result is fetched alone and given to ``consume(i, result)``,
        then dropped (None is returned): at most one result held here beside what
        ``consume`` keeps. After a lost partition every result is given again."""
        store = self._store
        while True:
            runner, generation = store.runner, store.restores
            handles = runner.map(fn, [store.handles[p] for p in parts], each=each)
            try:
                if consume is None:
                    return runner.gather(handles)
                for i in range(len(handles)):
                    [result] = runner.gather([handles[i]])
                    runner.release([handles[i]])
                    handles[i] = None
                    consume(i, result)
                    del result
                return None
            except PartitionLost as exc:
                store.rebuild(exc, generation)
            finally:
                runner.release([h for h in handles if h is not None])

    def on_workers(self, index: Any = slice(None)) -> RowsOnWorkers:
        """The rows ``self[index]`` stacked on one worker, never fetched here: each
        partition's rows taken where it is, then placed in one array by a task (the same
        array, bit for bit, as ``self[index]``). Partitions lost meanwhile are built again
        (as for a fetch). Only for partitions on a Dask cluster.

        Raises
        ------
        TypeError
            For partitions this process holds (a local runner): index the rows instead.
        ValueError
            For no row.
        """
        store = self._store
        positions = self.positions(index)
        if not len(positions):
            raise ValueError("on_workers: expected at least one row, got none")
        reads = self._by_partition(positions)
        while True:
            runner, generation = store.runner, store.restores
            client = getattr(runner, "client", None)
            if client is None:
                raise TypeError("on_workers: the partitions are held by this process (a local "
                                "runner), not a Dask cluster; index the rows instead")
            pieces = runner.map(_take, [store.handles[p] for p, _, _ in reads],
                                each=[(local,) for _, local, _ in reads])
            stacked = client.submit(_stack, pieces, [where for _, _, where in reads],
                                    len(positions), self.shape[1], pure=False)
            check = client.submit(len, stacked, pure=False)  # its rows stay where they are
            try:
                runner.gather([check])
                return RowsOnWorkers(stacked, (len(positions), self.shape[1]))
            except PartitionLost as exc:
                stacked.release()
                store.rebuild(exc, generation)
            finally:
                check.release()
                runner.release(pieces)

    def __getitem__(self, index: Any) -> np.ndarray:
        if isinstance(index, tuple):
            raise TypeError("PartitionedRows: index rows only (X[rows])")
        if isinstance(index, int | np.integer):
            return self._fetch(self.positions([int(index)]))[0]
        return self._fetch(self.positions(index))

    def gather(self) -> np.ndarray:
        """Every row, fetched at once (counted in :attr:`whole_gathers`)."""
        self._counter[0] += 1
        return self._fetch(self.positions())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        rows = self.gather()
        return rows if dtype is None else rows.astype(dtype, copy=False)

    def all_finite(self) -> bool:
        """Whether every entry of the whole matrix is finite (checked where the rows are)."""
        return all(self._on_partitions(_all_finite, list(range(len(self._store.handles)))))

    def chunk_sums(self, step: int) -> list[np.ndarray]:
        """``[self[i:i + step].sum(axis=0, dtype=float64) for i in range(0, n, step)]``,
        each chunk summed on the worker holding its rows (:meth:`map_chunks`): the same
        sums, bit for bit, without the rows travelling."""
        return list(self.map_chunks(_sum64, step))

    def map_chunks(self, fn: Callable, step: int, *shared: Any,
                   with_start: bool = False) -> Iterator[Any]:
        """``fn(self[i:i + step], *shared)`` for ``i = 0, step, 2 step, ...``, in order
        (``fn(self[i:i + step], i, *shared)`` with ``with_start``: a chunk's own seed).

        A chunk whose rows lie in one partition is given to ``fn`` on the worker holding it
        (its result travels, not the rows; ``fn`` must not modify them: on a local runner it
        gets a view); on a Dask cluster a chunk across partitions is put together from their
        pieces on a worker and given to ``fn`` there (so this process need not load what
        ``fn`` uses), with a local runner it is fetched and given to ``fn`` here. ``fn`` must
        give the same result wherever it runs (row-wise work, sums in a fixed order: the rows
        it gets are the same). Results are fetched one at a time, so at most one chunk's
        result is held here beside what the caller keeps. ``shared`` is sent to the workers
        once.
        """
        store, n = self._store, self.shape[0]
        starts = list(range(0, n, step))
        i = 0
        while i < len(starts):
            runner, generation = store.runner, store.restores
            client = getattr(runner, "client", None)
            sent = [runner.share(obj) for obj in shared]
            pending: dict[int, Any] = {}
            for j in range(i, len(starts)):
                runs = self._runs(self.positions(slice(starts[j], starts[j] + step)))
                if len(runs) == 1:
                    p, local, _, _ = runs[0]
                    [pending[j]] = runner.map(
                        _apply_rows_at if with_start else _apply_rows, [store.handles[p]], fn,
                        *sent, each=[(local, starts[j]) if with_start else (local,)])
                elif client is not None:
                    taken = runner.map(_take, [store.handles[p] for p, _, _, _ in runs],
                                       each=[(local,) for _, local, _, _ in runs])
                    pending[j] = client.submit(
                        on_one_thread, _apply_pieces, taken, fn,
                        *((starts[j],) if with_start else ()), *sent, pure=False)
                    runner.release(taken)  # kept by the scheduler until that task ran
            try:
                while i < len(starts):
                    if i in pending:
                        handle = pending.pop(i)
                        [result] = runner.gather([handle])
                        runner.release([handle])
                    else:
                        result = fn(self[starts[i]:starts[i] + step],
                                    *((starts[i],) if with_start else ()), *shared)
                    yield result
                    i += 1
            except PartitionLost as exc:
                store.rebuild(exc, generation)
            finally:
                runner.release([*pending.values(), *(h for h in sent if h is not None)])

    def running_sum(self, rows: Any, chunk: int = 4096) -> np.ndarray | None:
        """The float64 sum of ``self[rows]`` added row after row in their order (what
        ``linear._mean_of_rows`` takes), as a chain of tasks passing the running total from
        partition to partition: ``d`` floats travel per hop, not the rows. None for no row.
        The rows are taken in runs inside one partition; each run continues the total."""
        store = self._store
        runs = self._runs(self.positions(rows))
        while True:
            acc, generation = None, store.restores
            for p, local, _, _ in runs:
                acc = store.runner.map(_running_sum, [store.handles[p]],
                                       each=[(acc, local, chunk)])[0]
            if acc is None:
                return None
            try:
                [total] = store.runner.gather([acc])
                return total
            except PartitionLost as exc:
                store.rebuild(exc, generation)

    # -- for tasks on the workers ------------------------------------------------------
    def pieces(self, start: int, stop: int) -> tuple[list, str]:
        """Handles of the rows ``self[start:stop]``, one per run of them inside one
        partition, in order (their concatenation is those rows), and the worker holding
        most of them ("" for a local runner).

        The handles are the runner's (futures of its client on Dask: a task given them
        receives the arrays); the caller releases them (``runner.release``)."""
        runs = self._runs(self.positions(slice(start, stop)))
        store = self._store
        handles = store.runner.map(_take, [store.handles[p] for p, _, _, _ in runs],
                                   each=[(local,) for _, local, _, _ in runs])
        holders, held = store.holders(), {}
        for p, _, a, b in runs:
            held[holders[p]] = held.get(holders[p], 0) + b - a
        return handles, max(held, key=held.get, default="")

    def lost(self) -> bool:
        """Whether a worker holding one of the partitions has left the cluster."""
        store = self._store
        if isinstance(store.runner, LocalPartitions):
            return False

        holders = {h for h in store.holders() if h}
        # the scheduler may learn of a death a moment after a task failed: asked for 2 s
        return bool(departed_workers(store.runner.client, holders))

    def restore_lost(self) -> bool:
        """Build the partitions again if a worker holding one left; whether it did (False
        too when another thread has just done it: the partitions are then whole)."""
        with self._store.lock:
            if not self.lost():
                return False
            self._store.rebuild(PartitionLost("a worker holding rows of Φ left the cluster"))
            return True

    def release(self) -> None:
        """Forget the partitions (the workers may free them); the matrix is unusable after."""
        store = self._store
        store.runner.release(store.handles)
        store.handles = [None] * len(store.handles)
