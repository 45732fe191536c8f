"""BLAS (and OpenMP) thread limits without scanning the loaded libraries each time.

``threadpoolctl.threadpool_limits`` finds the thread pools by walking every shared library
the process has loaded, about 2.6 ms each time with numpy, scipy, scikit-learn and numba
loaded; the audit takes a limit around every fold fit, every map chunk and every measure
beside the others (thousands of times in a small audit's test suite: 21 s of its samples).
:func:`limit` does the same with one ``ThreadpoolController`` per set of loaded modules: it
is built again only when modules were imported since (a new extension module may bring a
new BLAS), so a limit costs about 0.02 ms once the audit's libraries are loaded. The limits
themselves are threadpoolctl's: the same thread counts, so the same numbers.
"""

from __future__ import annotations

import sys
import threading
from contextlib import AbstractContextManager
from typing import Any

__all__ = ["limit"]

_LOCK = threading.Lock()
_CONTROLLER: list[Any] = []  # [modules loaded when it was built, the controller]


def _controller() -> Any:
    """The process's ThreadpoolController, built again when modules were imported since."""
    from threadpoolctl import ThreadpoolController  # lazy: ships with scikit-learn

    loaded = len(sys.modules)
    with _LOCK:
        if not _CONTROLLER or _CONTROLLER[0] != loaded:
            _CONTROLLER[:] = [loaded, ThreadpoolController()]
        return _CONTROLLER[1]


def limit(limits: int = 1, user_api: str | None = "blas") -> AbstractContextManager:
    """``threadpool_limits(limits=limits, user_api=user_api)`` on the cached controller.

    Parameters
    ----------
    limits : int, default 1
        Threads each matching pool may use inside the ``with`` block.
    user_api : {"blas", "openmp"} or None, default "blas"
        The pools limited; None limits every pool (BLAS and OpenMP).

    Examples
    --------
    >>> from aflite_core import blas_threads
    >>> with blas_threads.limit(1):
    ...     pass
    """
    return _controller().limit(limits=limits, user_api=user_api)
