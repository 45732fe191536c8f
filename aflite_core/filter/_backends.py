"""Where AFLite's row blocks live and its per-block work runs: threads (``local``) or the
workers of a ``dask.distributed`` cluster (``dask``), with results reduced in a fixed order so
the mask does not depend on the backend or on ``n_jobs``.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from aflite_core import blas_threads
from aflite_core._validation import (
    available_cores,
    resolve_n_jobs,
)
from aflite_core.filter._linear import (
    count_correct,
    heldout_stats,
    partition_class_sums,
    row_stats,
)
from aflite_core.filter._rounds import (
    release_pages,
)
from aflite_core.represent import cluster_workers, departed_workers, is_partitioned, scatter_within

BACKENDS = ("local", "dask")
_BLOCK_TARGET_BYTES = 2 << 20
_BLOCK_MARGIN_ELEMENTS = 1 << 22
_GROUP_BLOCKS = 64
MAX_BLOCK_ROWS = 4096


def check_scheduler(scheduler: Any, backend: str) -> None:
    if scheduler is None:
        return
    if backend != "dask":
        raise ValueError(
            f"scheduler: only used with backend='dask', got scheduler={scheduler!r} with "
            f"backend={backend!r}"
        )
    what = ("None, 'local:N' (N >= 1 workers), an address such as 'tcp://HOST:PORT', or a "
            "dask.distributed.Client")
    if hasattr(scheduler, "submit"):
        return
    if not isinstance(scheduler, str):
        raise TypeError(f"scheduler: expected {what}, got {scheduler!r} "
                        f"({type(scheduler).__name__})")
    if scheduler.startswith("local:"):
        count = scheduler[len("local:") :]
        if count.isdigit() and int(count) >= 1:
            cores = available_cores()
            if int(count) > MAX_LOCAL_WORKERS_PER_CORE * cores:
                raise ValueError(
                    f"scheduler: {scheduler!r} asks for {int(count):,} local workers; at most "
                    f"{MAX_LOCAL_WORKERS_PER_CORE} per core ({MAX_LOCAL_WORKERS_PER_CORE * cores}"
                    f" on this machine's {cores} cores): more processes than that only slow "
                    "one machine down. For more workers give the address of a cluster's "
                    "scheduler (tcp://HOST:PORT)")
            return
    elif "://" in scheduler:
        scheme = scheduler.split("://", 1)[0]
        if scheme in SUPPORTED_SCHEMES:
            return
        raise ValueError(
            f"scheduler: the scheme {scheme[:20]!r} of {scheduler[:80]!r} is not supported; "
            f"expected {' or '.join(f'{s}://HOST:PORT' for s in SUPPORTED_SCHEMES)} (a Dask "
            "scheduler's address), or 'local:N'")
    raise ValueError(f"scheduler: expected {what}, got {scheduler[:80]!r}")


#: The address schemes a scheduler may be given with (Dask's inproc:// lives in one process,
#: ws:// and ucx:// need packages and set-ups this product does not check).
SUPPORTED_SCHEMES = ("tcp", "tls")


#: ``local:N`` may start at most this many worker processes per core.
MAX_LOCAL_WORKERS_PER_CORE = 4
#: Seconds a scheduler address has to accept a connection and to start Dask's handshake
#: (Dask's own connect timeout, ``distributed.comm.timeouts.connect``, when that is shorter:
#: :func:`probe_timeout`).
PROBE_TIMEOUT_S = 5.0
#: Times workers may leave the cluster during one AFLite fit before it gives up (each time,
#: the row groups they held are rebuilt on the workers that remain; see _DaskBackend).
MAX_WORKER_LOSSES = 3
#: Seconds a recovery waits for a worker when the cluster has none left: a worker killed and
#: restarted by its nanny is back within seconds (in one CI run of
#: ``tests/represent/test_dask_faults.py`` the scheduler listed no worker at the recovery after
#: one of two was killed, and the fit failed; the same test then passed three times in turn).
NO_WORKER_WAIT_S = 30.0
#: Seconds a broadcast of a round's model may take before it counts as a failure (then
#: handled like a lost worker: its groups rebuilt, or a clear error). A model is a few MB;
#: without a limit, a broadcast that targeted a worker killed a moment before waited
#: forever (seen once in the fault test: the run hung instead of failing).
SCATTER_TIMEOUT_S = 30.0
#: A Dask handshake's first frame is a few hundred bytes; anything announcing more than this
#: is not Dask talking.
_MAX_HANDSHAKE_BYTES = 16 << 20


def probe_timeout() -> float:
    """Seconds :func:`probe_scheduler` waits by default: :data:`PROBE_TIMEOUT_S`, or Dask's
    connect timeout (``distributed.comm.timeouts.connect``) when that is shorter."""
    try:  # the probe is only called with a scheduler, which needs Dask
        import dask.config  # optional dependency
        import distributed  # noqa: F401  # optional dependency: distributed's config defaults
        from dask.utils import parse_timedelta  # optional dependency
    except ImportError:
        return PROBE_TIMEOUT_S
    connect = dask.config.get("distributed.comm.timeouts.connect", default=None)
    if connect is None:
        return PROBE_TIMEOUT_S
    return min(PROBE_TIMEOUT_S, float(parse_timedelta(connect, default="seconds")))


def probe_scheduler(address: str, *, timeout: float | None = None) -> None:
    """Check that ``tcp://HOST:PORT`` is a Dask scheduler before a client connects to it.

    A Dask scheduler writes its handshake as soon as a connection is accepted: eight bytes of
    frame length, then a small message. A client connecting to anything else waits (a web
    server says nothing until asked) or reads a garbage length (and once tried to allocate
    3 EiB). This opens a plain TCP connection, reads those eight bytes with ``timeout`` and
    checks the length is plausible. A ``tls://HOST:PORT`` address is checked for a listener
    (a TLS scheduler waits for the client to speak first, so there is no handshake to read)
    and for a client certificate in Dask's configuration (:func:`_check_tls_client`). Other
    schemes (``inproc://``, ...) are left to the client, which is given a connection timeout.

    Parameters
    ----------
    address : str
        The scheduler's address.
    timeout : float, optional
        Seconds to wait for the connection and for the handshake's start; default
        :func:`probe_timeout` (5 s, or Dask's connect timeout when that is shorter).

    Raises
    ------
    ConnectionError
        Nothing listens there, or the host cannot be reached within ``timeout``.
    ValueError
        Something answers there but it is not a Dask scheduler.
    """
    scheme = address.split("://", 1)[0]
    if scheme not in SUPPORTED_SCHEMES:
        check_scheduler(address, "dask")  # names what is supported
        return
    if timeout is None:
        timeout = probe_timeout()
    parts = urlsplit(address)
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise ValueError(f"scheduler: {address!r} is not an address {scheme}://HOST:PORT "
                         f"({exc})") from exc
    if not host or port is None:
        raise ValueError(f"scheduler: {address!r} is not an address {scheme}://HOST:PORT (the "
                         "port is missing)")
    if scheme == "tls":
        _check_tls_client(address)
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except TimeoutError as exc:
        raise ConnectionError(f"scheduler: {host}:{port} could not be reached within "
                              f"{timeout:g} s; is the address right and the scheduler "
                              "running?") from exc
    except OSError as exc:
        raise ConnectionError(f"scheduler: nothing answers at {host}:{port} "
                              f"({exc.strerror or exc}); start the Dask scheduler there or "
                              "give its address") from exc
    if scheme == "tls":
        sock.close()
        return
    deadline = time.monotonic() + timeout
    with sock:
        head = b""
        try:
            head = _read_until(sock, 8, deadline)
        except TimeoutError:
            raise ValueError(
                f"scheduler: {host}:{port} accepted the connection but sent no Dask handshake "
                f"within {timeout:g} s: it is not a Dask scheduler speaking plain TCP (a web "
                "server, another service on that port, or a scheduler that requires TLS: give "
                f"that one as tls://{host}:{port}, with the client's certificate in Dask's "
                "configuration, docs/scaling.md)") from None
        except OSError as exc:
            raise ConnectionError(f"scheduler: {host}:{port} dropped the connection "
                                  f"({exc.strerror or exc})") from exc
        if len(head) < 8:
            raise ValueError(f"scheduler: {host}:{port} closed the connection without a Dask "
                             "handshake: it is not a Dask scheduler")
        (length,) = struct.unpack("<Q", head)
        if not 0 < length <= _MAX_HANDSHAKE_BYTES:
            raise ValueError(f"scheduler: {host}:{port} answered, but not as a Dask scheduler "
                             f"(its first message claims {length:,} bytes)")
        # the rest of the handshake must follow within the same deadline: a listener that
        # sends a plausible length and then nothing once left the client waiting forever
        try:
            body = _read_until(sock, length, deadline)
        except TimeoutError:
            raise ValueError(
                f"scheduler: {host}:{port} began a Dask handshake ({length:,} bytes announced) "
                f"but did not finish it within {timeout:g} s: it is not a working Dask "
                "scheduler") from None
        except OSError as exc:
            raise ConnectionError(f"scheduler: {host}:{port} dropped the connection "
                                  f"({exc.strerror or exc})") from exc
        if len(body) < length:
            raise ValueError(f"scheduler: {host}:{port} closed the connection in the middle of "
                             "its Dask handshake: it is not a working Dask scheduler")


def _read_until(sock: Any, n: int, deadline: float) -> bytes:
    """Up to ``n`` bytes from ``sock`` (fewer when it closes), all before ``deadline``
    (``time.monotonic()``); TimeoutError when the deadline passes first."""
    data = b""
    while len(data) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(min(n - len(data), 1 << 16))
        if not chunk:
            break
        data += chunk
    return data


#: Dask's configuration keys of a client's TLS certificate (docs/scaling.md says how to set
#: them); the environment variables are DASK_ + the key upper-cased, dots as double
#: underscores and dashes as underscores.
TLS_CLIENT_KEYS = ("distributed.comm.tls.ca-file", "distributed.comm.tls.client.cert",
                   "distributed.comm.tls.client.key")


def _check_tls_client(address: str) -> None:
    """Refuse a ``tls://`` scheduler when Dask's configuration gives this process no CA file
    or no client certificate: the client would fail later with a TypeError about an
    ``ssl_context``."""
    import dask  # lazy: +174 ms to import

    ca_file = dask.config.get(TLS_CLIENT_KEYS[0], default=None)
    cert = dask.config.get(TLS_CLIENT_KEYS[1], default=None)
    if ca_file and cert:
        return
    missing = [key for key, value in zip(TLS_CLIENT_KEYS[:2], (ca_file, cert), strict=True)
               if not value]
    raise ValueError(
        f"scheduler: {address} is a TLS address, and Dask's configuration gives this process "
        f"no {' and no '.join(missing)}: set {', '.join(TLS_CLIENT_KEYS)} (PEM files; the key "
        "may be inside the certificate file) in a Dask config file or as the environment "
        "variables DASK_DISTRIBUTED__COMM__TLS__CA_FILE, DASK_DISTRIBUTED__COMM__TLS__CLIENT__"
        "CERT and DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY (docs/scaling.md)")


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
    in this order, and a Dask task handles one group. None of it depends on ``n_jobs`` or on
    the backend, so every backend computes bit-identical numbers.
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


def _sum_in_order(parts) -> Any:
    """Sum in the given order starting from float64 zeros (one fixed association)."""
    total = None
    for part in parts:
        if total is None:
            total = np.zeros(np.shape(part), dtype=np.float64)
        total += part
    return total


def _group_row_stats(wcs: list[np.ndarray]) -> tuple[int, np.ndarray, np.ndarray]:
    stats = [row_stats(wc) for wc in wcs]
    return (sum(n for n, _, _ in stats), _sum_in_order(t for _, t, _ in stats),
            _sum_in_order(g for _, _, g in stats))


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
            out.append((sum(p[0] for p in parts), _sum_in_order(p[1] for p in parts),
                        _sum_in_order(p[2] for p in parts)))
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


# Dask task functions: one task handles the list of working copies of one block group.
def _dask_build(raw, local_rows, shift):
    return [_gather(raw, rows, shift) for rows in local_rows]


def _dask_build_pieces(pieces, local_rows, shift):
    """:func:`_dask_build` of a group whose rows come as pieces of Φ's partitions."""
    raw = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
    return _dask_build(raw, local_rows, shift)


def _dask_compact(wcs, keeps):
    return [wc[keeps[i]] if i in keeps else wc for i, wc in enumerate(wcs)]


def _unpack(packed, n_rows):
    return np.unpackbits(packed, axis=1, count=n_rows).astype(bool)


def _dask_class_sums(wcs, bounds, packed):
    return _sum_in_order(
        partition_class_sums(wc, b, _unpack(p, wc.shape[0]))
        for wc, b, p in zip(wcs, bounds, packed, strict=True)
    )


def _dask_count_correct(wcs, bounds, packed, model, datamap=False):
    kernel = heldout_stats if datamap else count_correct
    return [
        kernel(wc, b, ~_unpack(p, wc.shape[0]), model)
        for wc, b, p in zip(wcs, bounds, packed, strict=True)
    ]


class _DaskBackend:
    """Working copies held by the workers of a dask.distributed cluster.

    Each block group's raw rows are scattered once, to one worker (round robin), which builds
    the centred working copies and keeps them for the whole run; no feature crosses the
    network after that. Per round, each group task receives its blocks' class bounds and
    packed train masks (``m * rows / 8`` bytes in all) and the stacked model (``d * m *
    (C - 1)`` floats, broadcast once per round), and returns the group's per-partition class
    sums (``m * C * d`` float64) and per-row correct counts (int32).

    **A lost worker.** Scattered data cannot be recomputed by Dask, so when a worker holding
    a group's working copies leaves (killed, out of memory, its machine gone), the round's
    results for that group fail. The backend then rebuilds those groups from ``X`` (which the
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

    def _build(self, i: int, worker: str, workers: list[str]) -> tuple[Any, str]:
        """Group ``i``'s working copies, built on ``worker`` from X's current rows (X's rows
        on the workers: built from pieces of its partitions, on the one of ``workers``
        holding most of them, the rows never passing through the driver); the future and
        its worker."""
        g = self._groups[i]
        start, stop = self._starts[g[0]], self._stops[g[-1]]
        local_rows = [self._rows[b] - start for b in g]
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
        for i in range(len(self._groups)):
            future, worker = self._build(i, workers[i % len(workers)], workers)
            self._wc.append(future)
            self._holders.append(worker)
        wait(self._wc)

    def _lost_groups(self) -> list[int]:
        """Groups whose worker has left (asked again for up to 2 s: the scheduler may learn
        of a death a moment after the client does)."""
        gone = departed_workers(self._client, self._holders)
        return [i for i, w in enumerate(self._holders) if w in gone]

    def _recover(self, error: BaseException) -> None:
        """Rebuild the groups whose worker left, or re-raise ``error`` if none did."""
        lost = self._lost_groups()
        resident = is_partitioned(self._X)
        phi_lost = resident and (self._X.restores != self._restores_seen or self._X.lost())
        if not lost and not phi_lost:
            raise error
        self.worker_losses += 1
        if self.worker_losses > MAX_WORKER_LOSSES:  # before building Φ again for nothing
            raise RuntimeError(
                f"AFLite on Dask: workers left the cluster {self.worker_losses} times during "
                f"the run (last: {len(lost)} of {len(self._groups)} row groups lost); check "
                "the workers' memory limit and logs, or run with backend='local'") from error
        if phi_lost:
            # X's partitions on a departed worker went with it: X is built again (here or
            # by another reader already), and a group built (or being built) from them is
            # rebuilt too
            self._X.restore_lost()
            self._restores_seen = self._X.restores
            lost = sorted({*lost, *(i for i, f in enumerate(self._wc)
                                    if f.status in ("error", "cancelled", "lost"))})
        workers = self._workers()
        for k, i in enumerate(lost):
            try:
                self._wc[i], self._holders[i] = self._build(i, workers[k % len(workers)],
                                                            workers)
            except Exception:  # noqa: BLE001 - that worker left too: the next try sees it
                self._holders[i] = ""

    def _gather(self, make: Callable[[], list]) -> list:
        """``client.gather(make())``, rebuilding lost groups and trying again."""
        while True:
            try:
                return self._client.gather(make())
            except Exception as exc:  # noqa: BLE001 - _recover re-raises what it can't mend
                error = exc
            self._recover(error)

    def submit(self, fn, *args):
        """``fn(*args)``, at once on the driver."""
        return fn(*args)

    def features(self, positions: list[np.ndarray]) -> np.ndarray:
        """Centred features of the given working-copy positions, read from X on the driver."""
        rows = np.concatenate([r[p] for r, p in zip(self._rows, positions, strict=True)])
        return _gather(self._X, rows, self._shift)

    def _per_group(self, fn, bounds, train_w, *extra, model=None):
        """``fn`` on every group; ``model`` (if given) broadcast to the workers first and
        passed before ``extra``, again on each try. ``train_w``: each block's masks packed
        (uint8, :attr:`packed_masks`) or as bools."""
        packed = [[train_w[b] if train_w[b].dtype == np.uint8
                   else np.packbits(train_w[b], axis=1) for b in g] for g in self._groups]

        def make() -> list:
            head = ()
            if model is not None:
                head = tuple(_broadcast(self._client, model, SCATTER_TIMEOUT_S))
            return [self._client.submit(fn, self._wc[i], [bounds[b] for b in g], packed[i],
                                        *head, *extra, pure=False)
                    for i, g in enumerate(self._groups)]

        return self._gather(make)

    def group_row_stats(self):
        return self._gather(lambda: [self._client.submit(_group_row_stats, f)
                                     for f in self._wc])

    def group_class_sums(self, bounds, train_w):
        return self._per_group(_dask_class_sums, bounds, train_w)

    def count_correct(self, bounds, train_w, model, datamap: bool = False):
        per_group = self._per_group(_dask_count_correct, bounds, train_w, datamap,
                                    model=model)
        return [counts for group in per_group for counts in group]

    def compact(self, keeps: dict[int, np.ndarray]) -> None:
        for i, g in enumerate(self._groups):
            local = {b - g[0]: keeps[b] for b in g if b in keeps}
            if local:
                self._wc[i] = self._client.submit(_dask_compact, self._wc[i], local, pure=False)

    def close(self) -> None:
        try:
            if self._wc:
                self._client.cancel(self._wc)
        finally:
            self._wc = []
            for obj in reversed(self._owned):
                obj.close()


def _broadcast(client: Any, obj: Any, timeout: float) -> list:
    """``client.scatter([obj], broadcast=True)``, given up after ``timeout`` seconds
    (:func:`~aflite_core.represent.scatter_within`; the caller counts a
    :class:`TimeoutError` as a lost worker)."""
    try:
        return scatter_within(client, [obj], timeout, broadcast=True)
    except TimeoutError:
        raise TimeoutError(f"AFLite on Dask: broadcasting a round's model took more than "
                           f"{timeout:.0f} s") from None


def connect(scheduler: Any, n_jobs: int) -> tuple[Any, list]:
    """A ``dask.distributed.Client`` for ``scheduler`` and the objects the caller must close.

    Parameters
    ----------
    scheduler : str, Client or None
        A client (used as it is, nothing to close), ``"local:N"`` (a LocalCluster of N
        single-threaded worker processes on loopback, closed with the client), an address
        (probed first: a clear error within seconds when nothing or no Dask scheduler answers)
        or None (the current default client, else a LocalCluster of ``n_jobs`` workers).
    n_jobs : int
        Workers of the LocalCluster started for ``scheduler=None``.

    Returns
    -------
    client : dask.distributed.Client
    owned : list
        What to ``close()``, last first, when done.
    """
    try:
        from distributed import Client, LocalCluster  # optional dependency
    except ImportError as exc:  # pragma: no cover - dask is a runtime requirement
        raise ImportError(
            "backend='dask' needs dask.distributed: pip install 'dask[distributed]'"
        ) from exc
    if scheduler is not None and not isinstance(scheduler, str):
        return scheduler, []
    if scheduler is None:
        try:
            from distributed import default_client  # lazy: +502 ms to import

            return default_client(), []
        except ValueError:
            scheduler = f"local:{max(1, n_jobs)}"
    if scheduler.startswith("local:"):
        with _short_message_logs():
            cluster = LocalCluster(
                n_workers=int(scheduler[len("local:") :]),
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address="127.0.0.1:0",  # HTTP routes on a free loopback port
            )
            try:
                client = Client(cluster)
            except BaseException:
                cluster.close()
                raise
        return client, [cluster, client]
    probe_scheduler(scheduler)
    with _short_message_logs():
        client = Client(scheduler, timeout=2 * PROBE_TIMEOUT_S)
    return client, [client]


#: Messages Dask keeps of each stream of the clients (and the LocalClusters) the audit starts,
#: for its developers' debugging (``distributed.admin.low-level-log-length``, 1,000 by
#: default). A kept message holds its tasks' arguments alive, so the default kept the last
#: thousand tasks' inputs under a megabyte each (partition masks, chunks' columns, fold rows)
#: on the driver for the whole audit.
MESSAGE_LOG_LENGTH = 16


def _short_message_logs():
    """Dask's low-level message logs cut to :data:`MESSAGE_LOG_LENGTH` for what is started
    inside (a stream reads the length when it starts)."""
    import dask  # lazy: +174 ms to import

    return dask.config.set({"distributed.admin.low-level-log-length": MESSAGE_LOG_LENGTH})


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

