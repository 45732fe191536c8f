"""numba's compiled code kept on disk in the user cache folder, so a new process loads it.

:func:`jit` is ``numba.njit(cache=True, fastmath=True, nogil=True)``, :func:`exact_jit` the
same without fastmath (a loop that must give the bits a C loop gives). The cache folder is
:func:`numba_cache_dir`: ``$NUMBA_CACHE_DIR`` when the user set it, else ``numba/`` in the
user cache folder (:func:`aflite_core.text.default_cache_dir`). When that folder cannot be
written numba uses its own places (beside the module, then its user-wide folder), and when
none of them is writable the function is compiled in memory instead: the same results, only
slower to start. Importing this module imports numba (about 0.3 s).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from aflite_core.text import default_cache_dir

__all__ = ["exact_jit", "jit", "numba_cache_dir"]


def numba_cache_dir() -> Path | None:
    """The folder numba's compiled code is cached in, made writable, or None.

    ``$NUMBA_CACHE_DIR`` when the user set it; else ``numba/`` in the user cache folder. None
    when that folder cannot be written.
    """
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"])
    folder = default_cache_dir() / "numba"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            pass
    except OSError:
        return None
    return folder


def _configure() -> None:
    folder = numba_cache_dir()
    if folder is None or os.environ.get("NUMBA_CACHE_DIR"):
        return
    os.environ["NUMBA_CACHE_DIR"] = str(folder)
    if "numba" in sys.modules:  # imported already: its configuration was read then
        sys.modules["numba"].config.CACHE_DIR = str(folder)


_configure()

import numba  # noqa: E402  (after the cache folder is chosen)


def jit(function: Callable) -> Callable:
    """``numba.njit(cache=True, fastmath=True, nogil=True)``; compiled in memory only when no
    cache folder is writable."""
    try:
        return numba.njit(cache=True, fastmath=True, nogil=True)(function)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(fastmath=True, nogil=True)(function)


def exact_jit(function: Callable) -> Callable:
    """``numba.njit(cache=True, nogil=True)`` without fastmath: the float operations as
    written and in their order (no fused multiply-add, no reordered sums), for a loop whose
    results must be those of the same loop in C; compiled in memory only when no cache
    folder is writable."""
    try:
        return numba.njit(cache=True, nogil=True)(function)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(nogil=True)(function)
