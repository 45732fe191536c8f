"""How the audit reaches a Dask cluster: the ``scheduler`` values it accepts
(:func:`check_scheduler`), a check that an address is a Dask scheduler before a client waits on
it (:func:`probe_scheduler`), and the client it opens (:func:`connect`: an address, a client, or
a LocalCluster it starts, whose workers get :data:`WORKER_ENVIRON`).
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any
from urllib.parse import urlsplit

from aflite_core._validation import available_cores


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
        with _short_message_logs(), worker_environ():
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


#: Environment variables the worker processes of the LocalClusters the audit starts get, beside
#: Dask's own (``distributed.nanny.pre-spawn-environ``). Dask's nanny sets
#: ``MALLOC_TRIM_THRESHOLD_=65536``, and setting any glibc malloc variable turns off glibc's
#: sliding mmap threshold: every allocation of 128 KiB or more (a block's masks, margins,
#: partition sums) became an ``mmap``, its pages faulted in again each time. A block's
#: partition class sums took 1.0 ms on a worker against 0.6 ms in a plain process, and
#: AFLite's 100k-row run on two workers 4.4 s against 3.6 s. 32 MiB is glibc's own ceiling
#: for its sliding threshold; the trim threshold stays Dask's. A cluster of your own: give
#: its workers the same variable (``docs/scaling.md``, *Starting a cluster*).
WORKER_ENVIRON = {"MALLOC_MMAP_THRESHOLD_": 32 << 20}


def worker_environ():
    """Dask's configuration with :data:`WORKER_ENVIRON` added to the variables a nanny sets
    in the worker it starts (read when the nanny is created: wrap the LocalCluster's start)."""
    import dask  # lazy: +174 ms to import

    return dask.config.set({f"distributed.nanny.pre-spawn-environ.{name}": value
                            for name, value in WORKER_ENVIRON.items()})
