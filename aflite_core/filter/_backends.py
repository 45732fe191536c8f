"""Where AFLite's row blocks live and its per-block work runs: threads (``local``) or the
workers of a ``dask.distributed`` cluster (``dask``), with results reduced in a fixed order so
the mask does not depend on the backend or on ``n_jobs``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from aflite_core import blas_threads
from aflite_core._validation import (
    available_cores,
    resolve_n_jobs,
)
from aflite_core.filter._linear import (
    count_correct,
    fit_partition_lda,
    heldout_stats,
    partition_class_sums,
    row_stats,
)
from aflite_core.filter._rounds import (
    release_pages,
)
from aflite_core.filter._scheduler import connect
from aflite_core.represent import cluster_workers, departed_workers, is_partitioned

BACKENDS = ("local", "dask")
_BLOCK_TARGET_BYTES = 2 << 20
_BLOCK_MARGIN_ELEMENTS = 1 << 22
_GROUP_BLOCKS = 64
MAX_BLOCK_ROWS = 4096


#: Times workers may leave the cluster during one AFLite fit before it gives up (each time,
#: the row groups they held are rebuilt on the workers that remain; see _DaskBackend).
MAX_WORKER_LOSSES = 3
#: Seconds a recovery waits for a worker when the cluster has none left: a worker killed and
#: restarted by its nanny is back within seconds (in one CI run of
#: ``tests/represent/test_dask_faults.py`` the scheduler listed no worker at the recovery after
#: one of two was killed, and the fit failed; the same test then passed three times in turn).
NO_WORKER_WAIT_S = 30.0
def resolve_workers(n_jobs: Any, backend: str) -> int:
    """Threads (local backend) or local-cluster workers (Dask backend) for ``n_jobs``.

    ``None`` means one thread locally and every core for a Dask cluster.
    """
    workers = resolve_n_jobs(n_jobs)
    if backend == "dask" and n_jobs is None:
        return available_cores()
    return workers


# -- row blocks and kernels -----------------------------------------------------------------
def rows_per_block(d: int, m: int, n_classes: int) -> int:
    """Rows per block: a few MiB of features (cache-friendly products), bounded margin
    temporaries, a multiple of 1024 between 1024 and ``MAX_BLOCK_ROWS``."""
    rows = min(_BLOCK_TARGET_BYTES // (4 * d),
               _BLOCK_MARGIN_ELEMENTS // (m * max(n_classes - 1, 1)))
    return int(min(max(1024, rows // 1024 * 1024), MAX_BLOCK_ROWS))


class RowBlocks:
    """Driver-side layout of the row blocks and of each block's working copy.

    Block ``b`` covers input rows ``starts[b]:stops[b]``. Its *working copy* (held by the
    backend) is a centred float32 copy of the rows ``rows[b]`` (global row ids, ordered by
    class, class ``c`` at ``bounds[b][c]:bounds[b][c + 1]``). Rows removed by AFLite stay in
    the working copy, masked out, until fewer than ``_COMPACT_BELOW`` of its rows are alive;
    then the copy is compacted. Blocks are gathered into fixed *groups* of ``_GROUP_BLOCKS``
    consecutive blocks: per-block results are summed group by group, then over groups, always
    in this order (on Dask too, where a group's shares are folded in block order). None of
    it depends on ``n_jobs``, on the workers or on the backend, so every backend computes
    bit-identical numbers.
    """

    def __init__(self, codes: np.ndarray, n_classes: int, block_rows: int) -> None:
        n = len(codes)
        self.codes = codes
        self.classes = np.arange(n_classes + 1)
        self.starts = np.arange(0, n, block_rows)
        self.stops = np.minimum(self.starts + block_rows, n)
        # row ids and positions as int32 below 2**31 rows: they are held, and drawn from,
        # every round (the rows of S and their positions: 8 bytes a row each as int64)
        self.index_dtype = np.int32 if n < 2**31 else np.int64
        self.rows = [
            (s + np.argsort(codes[s:e], kind="stable")).astype(self.index_dtype)
            for s, e in zip(self.starts, self.stops, strict=True)
        ]
        self.bounds = [np.searchsorted(codes[r], self.classes) for r in self.rows]
        self.groups = [
            range(g, min(g + _GROUP_BLOCKS, len(self.starts)))
            for g in range(0, len(self.starts), _GROUP_BLOCKS)
        ]

    def __len__(self) -> int:
        return len(self.starts)

    def alive_positions(self, alive: np.ndarray) -> list[np.ndarray]:
        """Per block, the positions of the alive rows in its working copy."""
        return [np.flatnonzero(alive[r]).astype(self.index_dtype) for r in self.rows]

    def compact(self, b: int, keep: np.ndarray) -> None:
        self.rows[b] = self.rows[b][keep]
        self.bounds[b] = np.searchsorted(self.codes[self.rows[b]], self.classes)


def _gather(source: np.ndarray, rows: Any, shift: np.ndarray) -> np.ndarray:
    """Rows of ``source`` as a new float32 C-contiguous array, centred by ``shift``."""
    block = source[rows]
    if isinstance(rows, slice) or type(block) is not np.ndarray or not block.flags.c_contiguous:
        block = np.array(block, dtype=np.float32, order="C", copy=True)
    block -= shift
    return block


def round_model(group_sums: list[np.ndarray], counts: np.ndarray, shift: np.ndarray,
                factor: Any) -> Any:
    """A round's stacked model from its groups' partition class sums (added in group order)
    and the covariance ``factor`` of S (a future is waited for), margins ready."""
    sums = np.zeros(np.shape(group_sums[0]))
    for part in group_sums:
        sums += part
    if hasattr(factor, "result"):
        factor = factor.result()
    model = fit_partition_lda(None, sums, counts, shift=shift, factor=factor)
    model.margins()
    return model


def _sum_in_order(parts, start: Any = None) -> Any:
    """Sum in the given order from float64 zeros, or from a copy of ``start`` (one fixed
    association: a sum carried on from an earlier part's is bit-identical to all parts summed
    in one go; ``start`` may be a Dask task's result, so it is not changed in place)."""
    total = None if start is None else np.array(start, dtype=np.float64)
    for part in parts:
        if total is None:
            total = np.zeros(np.shape(part), dtype=np.float64)
        total += part
    return total


def _stats_in_order(parts, start: Any = None) -> tuple[int, np.ndarray, np.ndarray]:
    """:func:`_sum_in_order` of row statistics ``(n, column sums, Gram matrix)``."""
    parts = list(parts)
    n, sums, grams = (0, None, None) if start is None else start
    return (n + sum(p[0] for p in parts), _sum_in_order((p[1] for p in parts), sums),
            _sum_in_order((p[2] for p in parts), grams))


class _LocalBackend:
    """Working copies in this process; threads over blocks when ``n_jobs > 1``."""

    #: The rounds' train masks come as bool arrays (``_draw_round``'s ``packed``).
    packed_masks = False

    def __init__(self, X, shift, blocks: RowBlocks, n_jobs: int) -> None:
        self._groups = blocks.groups
        self._pool = ThreadPoolExecutor(n_jobs) if n_jobs > 1 else None
        # All working copies live in one buffer (block b at rows offsets[b]:offsets[b + 1]) and
        # are compacted in place, so the run allocates the copy of the features once.
        offsets = np.cumsum([0, *(len(r) for r in blocks.rows)])
        self._buffer = np.empty((offsets[-1], X.shape[1]), dtype=np.float32)

        def build(b):
            wc = self._buffer[offsets[b] : offsets[b + 1]]
            np.subtract(np.asarray(X[blocks.rows[b]]), shift, out=wc)
            release_pages(X, blocks.starts[b], blocks.stops[b])
            return wc

        self._wc = self._map(build, range(len(blocks)))

    def features(self, positions: list[np.ndarray]) -> np.ndarray:
        """Centred features of the given working-copy positions, block after block."""
        return np.concatenate([wc[p] for wc, p in zip(self._wc, positions, strict=True)])

    def submit(self, fn, *args):
        """``fn(*args)`` on a pool thread (a future) when there is a pool, else at once."""
        if self._pool is None:
            return fn(*args)
        return self._pool.submit(fn, *args)

    def _map(self, fn, items):
        if self._pool is None:
            return [fn(i) for i in items]
        return list(self._pool.map(fn, items))

    def group_row_stats(self):
        out = []
        for g in self._groups:  # one group at a time bounds the per-block Gram matrices held
            parts = self._map(lambda b: row_stats(self._wc[b]), g)
            out.append(_stats_in_order(parts))
        return out

    def group_class_sums(self, bounds, train_w):
        out = []
        for g in self._groups:
            parts = self._map(
                lambda b: partition_class_sums(self._wc[b], bounds[b], train_w[b]), g
            )
            out.append(_sum_in_order(parts))
        return out

    def count_correct(self, bounds, train_w, model, datamap: bool = False):
        kernel = heldout_stats if datamap else count_correct
        return self._map(
            lambda b: kernel(self._wc[b], bounds[b], ~train_w[b], model),
            range(len(self._wc)),
        )

    def predict(self, bounds, train_w, counts, shift, factor, datamap: bool = False):
        """A round: its class sums, its model (:func:`round_model`), each block's counts."""
        model = round_model(self.group_class_sums(bounds, train_w), counts, shift, factor)
        return self.count_correct(bounds, train_w, model, datamap)

    def compact(self, keeps: dict[int, np.ndarray]) -> None:
        for b, keep in keeps.items():
            wc = self._wc[b]
            wc[: len(keep)] = wc[keep]  # the gather makes a copy first, so this is safe
            self._wc[b] = wc[: len(keep)]

    def close(self) -> None:
        self._wc = []
        self._buffer = None
        if self._pool is not None:
            self._pool.shutdown()


# Dask task functions: one task handles the list of working copies of one share (a run of
# consecutive blocks of one group, :func:`split_groups`).
def _dask_build(raw, local_rows, shift):
    return [_gather(raw, rows, shift) for rows in local_rows]


def _dask_build_pieces(pieces, local_rows, shift):
    """:func:`_dask_build` of a group whose rows come as pieces of Φ's partitions."""
    raw = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
    return _dask_build(raw, local_rows, shift)


def _dask_take(wcs, positions):
    """The rows at ``positions`` of a share's working copies, block after block."""
    return np.concatenate([wc[p] for wc, p in zip(wcs, positions, strict=True)])


class _Later:
    """``fn(*args)``, computed when :meth:`result` is first called (arguments that are
    :class:`_Later` are resolved first)."""

    def __init__(self, fn: Callable, *args: Any) -> None:
        self._fn, self._args, self._done, self._value = fn, args, False, None

    def result(self) -> Any:
        if not self._done:
            args = [a.result() if isinstance(a, _Later) else a for a in self._args]
            self._value, self._done, self._args = self._fn(*args), True, ()
        return self._value


def _dask_compact(wcs, keeps):
    return [wc[keeps[i]] if i in keeps else wc for i, wc in enumerate(wcs)]


def _unpack(packed, n_rows):
    return np.unpackbits(packed, axis=1, count=n_rows).astype(bool)


def _dask_class_parts(wcs, bounds, packed):
    """A share's per-block partition class sums, in block order."""
    return [partition_class_sums(wc, b, _unpack(p, wc.shape[0]))
            for wc, b, p in zip(wcs, bounds, packed, strict=True)]


def _dask_row_parts(wcs):
    """A share's per-block row statistics, in block order."""
    return [row_stats(wc) for wc in wcs]


def _dask_count_correct(wcs, bounds, packed, model, datamap=False):
    """A share's per-block correct counts (with ``datamap``, :func:`heldout_stats`)."""
    kernel = heldout_stats if datamap else count_correct
    return [
        kernel(wc, b, ~_unpack(p, wc.shape[0]), model)
        for wc, b, p in zip(wcs, bounds, packed, strict=True)
    ]


def split_groups(groups: list[range], n_workers: int) -> list[tuple[int, range, int]]:
    """The block groups cut into *shares* for ``n_workers`` workers, as ``(group, blocks,
    worker)`` in block order: the blocks are dealt out as ``n_workers`` runs of (nearly) equal
    length, and a run that crosses a group's end is cut there. A group of 64 blocks was one
    task on one worker, so at 100k rows (49 blocks, one group) one worker did all of AFLite
    while the others waited; now each worker has its run, and a group's sums are carried
    over its shares in block order (:func:`_sum_in_order` with ``start``).

    >>> split_groups([range(0, 5), range(5, 6)], 2)
    [(0, range(0, 3), 0), (0, range(3, 5), 1), (1, range(5, 6), 1)]
    """
    n_blocks = sum(len(g) for g in groups)
    n_workers = max(1, min(n_workers, n_blocks))
    cuts = [n_blocks * w // n_workers for w in range(n_workers + 1)]
    shares = []
    for i, g in enumerate(groups):
        for w in range(n_workers):
            lo, hi = max(g.start, cuts[w]), min(g.stop, cuts[w + 1])
            if lo < hi:
                shares.append((i, range(lo, hi), w))
    return shares


class _DaskBackend:
    """Working copies held by the workers of a dask.distributed cluster.

    The block groups are cut into shares (:func:`split_groups`: each worker a run of about
    the same number of blocks), and each share's raw rows are scattered once, to its worker,
    which builds the centred working copies and keeps them for the whole run; no feature
    crosses the network after that. A round is one graph, gathered once (:meth:`predict`):
    each share's task receives its blocks' class bounds and packed train masks (``m * rows /
    8`` bytes in all) and returns its blocks' partition class sums (``m * C * d`` float32 a
    block); a group's sums are folded share after share, on the workers, in block order
    (:func:`_sum_in_order`: the running float64 sum goes from one share's worker to the next),
    so they, and every number after them, are bit-identical to the local backend's; a task
    fits the round's model from them, and each share's task counts its rows' correct
    predictions with it (int32 a row), which are all the driver receives.

    **A lost worker.** Scattered data cannot be recomputed by Dask, so when a worker holding
    a share's working copies leaves (killed, out of memory, its machine gone), the round's
    results for that share fail. The backend then rebuilds those shares from ``X`` (which the
    driver holds) with their current rows on the workers that remain, and runs the step
    again: the rebuilt copies equal the lost ones (a compaction only drops rows), so the
    results stay bit-identical. After :data:`MAX_WORKER_LOSSES` such losses, or with no
    worker left, it fails with a message that says so.
    """

    #: The rounds' train masks come packed (``_draw_round``'s ``packed``), as they travel.
    packed_masks = True

    def __init__(self, X, shift, blocks: RowBlocks, scheduler, n_jobs: int) -> None:
        self._client, self._owned = connect(scheduler, n_jobs)
        self._groups = blocks.groups
        self._shares: list[tuple[int, range, int]] = []
        self._X, self._shift, self._rows = X, shift, blocks.rows
        self._starts, self._stops = blocks.starts, blocks.stops
        self._wc: list = []
        self._holders: list[str] = []
        self.worker_losses = 0
        self._restores_seen = X.restores if is_partitioned(X) else 0
        try:
            self._scatter()
        except BaseException:
            self.close()
            raise

    def _workers(self) -> list[str]:
        """The cluster's workers; when it has none, those that join within
        :data:`NO_WORKER_WAIT_S` (a nanny restarting a killed worker takes seconds)."""
        workers = sorted(cluster_workers(self._client))
        if not workers:
            with contextlib.suppress(Exception):  # Dask's TimeoutError: none came
                self._client.wait_for_workers(1, timeout=NO_WORKER_WAIT_S)
            workers = sorted(cluster_workers(self._client))
        if not workers:
            raise RuntimeError("AFLite on Dask: the cluster has no worker left; start "
                               "workers (or use backend='local') and run again")
        return workers

    def _resident(self) -> bool:
        """Whether X's rows are partitions on this very client's workers (Φ built there)."""
        return is_partitioned(self._X) and getattr(self._X.runner, "client", None) \
            is self._client

    def _build(self, k: int, worker: str, workers: list[str]) -> tuple[Any, str]:
        """Share ``k``'s working copies, built on ``worker`` from X's current rows (X's rows
        on the workers: built from pieces of its partitions, on the one of ``workers``
        holding most of them, the rows never passing through the driver); the future and
        its worker."""
        share = self._shares[k][1]
        start, stop = self._starts[share[0]], self._stops[share[-1]]
        local_rows = [self._rows[b] - start for b in share]
        if self._resident():
            pieces, holder = self._X.pieces(start, stop)
            worker = holder if holder in workers else worker
            future = self._client.submit(_dask_build_pieces, pieces, local_rows, self._shift,
                                         workers=[worker], pure=False)
            self._X.runner.release(pieces)  # the build task keeps what it needs
            return future, worker
        raw = self._client.scatter(np.ascontiguousarray(self._X[start:stop]),
                                   workers=[worker])
        release_pages(self._X, start, stop)
        return self._client.submit(_dask_build, raw, local_rows, self._shift,
                                   workers=[worker], pure=False), worker

    def _scatter(self) -> None:
        from distributed import wait  # lazy: +502 ms to import

        workers = self._workers()
        self._shares = split_groups(self._groups, len(workers))
        for k, (_, _, w) in enumerate(self._shares):
            future, worker = self._build(k, workers[w], workers)
            self._wc.append(future)
            self._holders.append(worker)
        wait(self._wc)

    def _lost_shares(self) -> list[int]:
        """Shares whose worker has left (asked again for up to 2 s: the scheduler may learn
        of a death a moment after the client does)."""
        gone = departed_workers(self._client, self._holders)
        return [k for k, w in enumerate(self._holders) if w in gone]

    def _recover(self, error: BaseException) -> None:
        """Rebuild the shares whose worker left, or re-raise ``error`` if none did."""
        lost = self._lost_shares()
        resident = is_partitioned(self._X)
        phi_lost = resident and (self._X.restores != self._restores_seen or self._X.lost())
        if not lost and not phi_lost:
            raise error
        self.worker_losses += 1
        if self.worker_losses > MAX_WORKER_LOSSES:  # before building Φ again for nothing
            raise RuntimeError(
                f"AFLite on Dask: workers left the cluster {self.worker_losses} times during "
                f"the run (last: {len(lost)} of {len(self._shares)} row shares lost); check "
                "the workers' memory limit and logs, or run with backend='local'") from error
        if phi_lost:
            # X's partitions on a departed worker went with it: X is built again (here or
            # by another reader already), and a share built (or being built) from them is
            # rebuilt too
            self._X.restore_lost()
            self._restores_seen = self._X.restores
            lost = sorted({*lost, *(k for k, f in enumerate(self._wc)
                                    if f.status in ("error", "cancelled", "lost"))})
        workers = self._workers()
        for j, k in enumerate(lost):
            try:
                self._wc[k], self._holders[k] = self._build(k, workers[j % len(workers)],
                                                            workers)
            except Exception:  # noqa: BLE001 - that worker left too: the next try sees it
                self._holders[k] = ""

    def _gather(self, make: Callable[[], list]) -> list:
        """``client.gather(make())``, rebuilding lost shares and trying again."""
        while True:
            try:
                return self._client.gather(make())
            except Exception as exc:  # noqa: BLE001 - _recover re-raises what it can't mend
                error = exc
            self._recover(error)

    def submit(self, fn, *args):
        """``fn(*args)`` on the driver when its result is first asked for (a :class:`_Later`):
        the removed rows' features (:meth:`features`) travel meanwhile. The rounds ask in
        the order they submit, so the random stream and the statistics of S are used in the
        same order as by the local backend."""
        return _Later(fn, *args)

    def features(self, positions: list[np.ndarray]) -> _Later:
        """Centred features of the given working-copy positions (before this round's
        compaction), block after block, as a :class:`_Later`: tasks take them from the
        shares' working copies (the same float32 values as ``X[rows] - shift``) while the
        driver draws the next round; read from X on the driver when a worker left meanwhile.
        Read from X at once, they cost a round trip to Φ's partitions every round (0.24 s of
        AFLite's 3 s at 100k rows on two local workers)."""
        rows = np.concatenate([r[p] for r, p in zip(self._rows, positions, strict=True)])
        takes = [self._client.submit(_dask_take, self._wc[k], [positions[b] for b in blocks],
                                     pure=False)
                 for k, (_, blocks, _) in enumerate(self._shares)]

        def taken() -> np.ndarray:
            try:
                return np.concatenate(self._client.gather(takes))
            except Exception:  # noqa: BLE001 - a worker left: X on the driver has the rows
                return _gather(self._X, rows, self._shift)

        return _Later(taken)

    def _folded(self, parts: list, fold) -> list:
        """Per group, its shares' ``parts`` (futures) folded in block order: ``fold(parts,
        start)``, ``start`` the group's sum over the shares before."""
        totals: list = [None] * len(self._groups)
        for (i, _, _), part in zip(self._shares, parts, strict=True):
            totals[i] = self._client.submit(fold, part, totals[i], pure=False)
        return totals

    def _per_share(self, fn, bounds, train_w, *extra):
        """``fn`` on every share, as futures. ``train_w``: each block's masks packed (uint8,
        :attr:`packed_masks`) or as bools."""
        packed = [train_w[b] if train_w[b].dtype == np.uint8
                  else np.packbits(train_w[b], axis=1) for b in range(len(train_w))]
        return [self._client.submit(fn, self._wc[k], [bounds[b] for b in blocks],
                                    [packed[b] for b in blocks], *extra, pure=False)
                for k, (_, blocks, _) in enumerate(self._shares)]

    def group_row_stats(self):
        return self._gather(lambda: self._folded(
            [self._client.submit(_dask_row_parts, f, pure=False) for f in self._wc],
            _stats_in_order))

    def group_class_sums(self, bounds, train_w):
        return self._gather(lambda: self._folded(
            self._per_share(_dask_class_parts, bounds, train_w), _sum_in_order))

    def predict(self, bounds, train_w, counts, shift, factor, datamap: bool = False):
        """A round as one graph, gathered once: the shares' class sums, folded per group, the
        model fitted on a worker from them (:func:`round_model`), each share's counts with
        it. The driver waited for the sums, fitted and sent the model back: two round trips
        a round instead of one (at 100k rows on two local workers, 18 rounds)."""
        if hasattr(factor, "result"):
            factor = factor.result()

        def make() -> list:
            sums = self._folded(self._per_share(_dask_class_parts, bounds, train_w),
                                _sum_in_order)
            model = self._client.submit(round_model, sums, counts, shift, factor, pure=False)
            return self._per_share(_dask_count_correct, bounds, train_w, model, datamap)

        return [counts for share in self._gather(make) for counts in share]

    def compact(self, keeps: dict[int, np.ndarray]) -> None:
        for k, (_, blocks, _) in enumerate(self._shares):
            local = {b - blocks[0]: keeps[b] for b in blocks if b in keeps}
            if local:
                self._wc[k] = self._client.submit(_dask_compact, self._wc[k], local, pure=False)

    def close(self) -> None:
        try:
            if self._wc:
                self._client.cancel(self._wc)
        finally:
            self._wc = []
            for obj in reversed(self._owned):
                obj.close()


@contextlib.contextmanager
def single_threaded_blas():
    """Limit BLAS to one thread while AFLite runs (parallelism comes from ``n_jobs``).

    Many small BLAS calls with several BLAS threads spin-wait badly when the cores are shared
    (a 256 x 256 Cholesky took 0.2 s instead of 2 ms on a busy 2-core machine); AFLite's own
    threads over row blocks give the same speed-up on an idle machine, deterministically.
    """
    with blas_threads.limit(1):
        yield


def make_backend(name: str, scheduler: Any, X, shift, blocks: RowBlocks, n_jobs: int):
    if name == "dask":
        return _DaskBackend(X, shift, blocks, scheduler, n_jobs)
    return _LocalBackend(X, shift, blocks, n_jobs)

