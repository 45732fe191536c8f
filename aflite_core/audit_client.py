"""The audit's one Dask client: opened once, shared by the CLI's reading and ``run_audit``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from aflite_core._validation import available_cores

__all__ = ["audit_client"]

_OPEN_CLIENT: ContextVar[Any] = ContextVar("aflite_audit_client", default=None)


@contextlib.contextmanager
def audit_client(config: Any) -> Iterator[Any]:
    """The audit's one Dask client when ``config`` runs with a scheduler
    (``backend="dask"``), else None; a cluster it started (``local:N``) is closed at the end.

    Inside it (this thread's context), a nested call yields the same client: the CLI opens it
    to read a dataset's shards on the workers, and ``run_audit`` then audits on it.
    """
    if config.backend != "dask":
        yield None
        return
    if _OPEN_CLIENT.get() is not None:
        yield _OPEN_CLIENT.get()
        return
    from aflite_core.filter import connect  # lazy: +2173 ms to import

    client, owned = connect(config.scheduler, available_cores())
    token = _OPEN_CLIENT.set(client)
    try:
        yield client
    finally:
        _OPEN_CLIENT.reset(token)
        for obj in reversed(owned):
            obj.close()
