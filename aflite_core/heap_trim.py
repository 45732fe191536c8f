"""Give the memory a finished stage freed back to the operating system.

glibc's allocator keeps freed heap memory in its arenas (one per thread that allocated: the
fold pool's, the SVD's) for reuse, and fragments of it stay mapped after the arrays in them
are gone: in a default audit of 1M rows the process held 1.6 GB more than its live
allocations by the last measures, and every stage's peak sat on top of that.
``malloc_trim(0)`` hands the free pages of every arena back, and Arrow's memory pool
(mimalloc or jemalloc; the readers' and writers' buffers) is asked to do the same
(``release_unused``); neither changes a value. Elsewhere
(macOS, Windows, musl) there is nothing to call and :func:`release_free_heap` does nothing.

The process-wide settings the command line's audit and the dashboard's audit worker make
live here too: the arenas (:func:`limit_arenas`), Arrow's pool (:func:`arrow_on_c_heap`),
glibc's thresholds (:func:`map_large_allocations`) and NumPy's page size
(:func:`numpy_small_pages`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import importlib
import os
import sys

__all__ = ["ARENA_MAX", "HEAP_THRESHOLD", "HUGEPAGE_ENV", "MMAP_THRESHOLD", "arrow_on_c_heap",
           "limit_arenas", "map_large_allocations", "numpy_small_pages", "release_free_heap"]


@functools.lru_cache(maxsize=1)
def _glibc():
    """The C library when it is glibc (it has ``malloc_trim``), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:  # glibc's soname first: find_library would run ldconfig in a subprocess
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c"))
        except OSError:
            return None
    if getattr(libc, "malloc_trim", None) is None:  # not glibc (musl)
        return None
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.malloc_trim.restype = ctypes.c_int
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt.restype = ctypes.c_int
    return libc


def release_free_heap() -> bool:
    """Return the heap's free pages to the system (glibc); True when anything was released.

    Returns
    -------
    bool
        ``malloc_trim(0)``'s answer; False where there is no ``malloc_trim``.
    """
    libc = _glibc()
    arrow = sys.modules.get("pyarrow")  # its pool (mimalloc, jemalloc) keeps freed pages too
    if arrow is not None:
        arrow.default_memory_pool().release_unused()
    return bool(libc.malloc_trim(0)) if libc is not None else False


#: glibc's ``mallopt`` option numbers of ``M_TRIM_THRESHOLD``, ``M_MMAP_THRESHOLD`` and
#: ``M_ARENA_MAX``.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
#: The arenas an audit's process allocates from (:func:`limit_arenas`).
ARENA_MAX = 2


def limit_arenas(count: int = ARENA_MAX) -> bool:
    """Let the threads of this process allocate from at most ``count`` glibc arenas (glibc's
    ``M_ARENA_MAX``; by default up to eight per core); True when set.

    Each thread that allocates gets an arena of its own, and what it frees stays in that
    arena for its reuse: on many cores the fold pool's, the measures' and the map's threads
    each kept their own free memory, so the peak grew with the cores. A default audit of
    100,000 rows peaked at 1,344 MB on 2 of a 16-core host's cores and 2,107 MB on all 16
    (``bench_cores.py --cores 1,2,4,8,16``, 2026-11-30); on two cores made to run 16 threads
    wherever it counts the cores, 2,047 MB; with ``MALLOC_ARENA_MAX=2`` 1,449 MB (four: 1,508),
    with this call 1,495-1,544 MB (two threads: 1,207-1,232).
    Most allocations are made under the GIL anyway, so the threads seldom wait on an arena.
    Set it before the audit's threads start (earlier threads keep theirs); it holds for the
    whole process, so the command line and the dashboard's audit worker set it, not the
    library. Nothing elsewhere (macOS, Windows, musl): False.

    Parameters
    ----------
    count : int
        The most arenas, at least 1.
    """
    if count < 1:
        raise ValueError(f"count: expected at least 1 arena, got {count}")
    libc = _glibc()
    return libc is not None and bool(libc.mallopt(_M_ARENA_MAX, int(count)))


def arrow_on_c_heap() -> bool:
    """Make the C library's allocator Arrow's default memory pool (its compute kernels,
    Parquet's readers and writers, tables built from Python); True when set (glibc only).

    Arrow's own pool (mimalloc in the wheels) keeps a heap per thread that allocated, and a
    thread's freed pages stay in its heap until that thread allocates again; ``release_unused``
    reaches the calling thread's heap only. Arrow's thread pool follows the cores, so the freed
    pages kept grew with them: a default audit of 100,000 rows on two cores made to run 16
    threads wherever it counts the cores peaked at 1,398 MB with mimalloc, +30 % against one
    core (1,079 MB), and at 1,217 MB on glibc's heap (+19 % against 1,026 MB; one and two
    cores 38.3 / 23.2 s against 40.1 / 22.8 s; ``bench_cores.py --cores 1,2 --emulate 16``,
    2026-11-30). glibc's arenas are bounded by :func:`limit_arenas` and emptied by
    :func:`release_free_heap`. The readers already allocate there
    (``aflite_core.io._byte_scan.READER_POOL``). Set it before the audit allocates from Arrow;
    it holds for the whole process, so the command line and the dashboard's audit worker set
    it, not the library. Nothing elsewhere (macOS, Windows, musl): False.
    """
    if _glibc() is None:
        return False
    import pyarrow as pa  # lazy: this module is imported where Arrow need not be

    pa.set_memory_pool(pa.system_memory_pool())
    return True


#: Allocations of this many bytes or more get pages of their own (:func:`map_large_allocations`).
MMAP_THRESHOLD = 1 << 20
#: The threshold that keeps a process's temporaries in the heap: glibc's own ceiling for its
#: sliding one (32 MiB on 64-bit systems). Below it an array of a few MB made and freed over
#: and over (k-means' distance chunks, AFLite's masks) reuses the heap's pages; at
#: :data:`MMAP_THRESHOLD` each was a fresh mapping whose pages were faulted in again.
HEAP_THRESHOLD = 32 << 20


def map_large_allocations(threshold: int = MMAP_THRESHOLD) -> bool:
    """Give every allocation of ``threshold`` bytes or more pages of its own, handed back to
    the system when it is freed (glibc's ``M_MMAP_THRESHOLD``); True when set.

    glibc starts at 128 KiB but raises its threshold to the size of each mapped block freed
    (up to 32 MiB), so after the first large arrays are freed, arrays of a few MB land in the
    heap, between small objects that outlive them, and their pages stay with the process when
    they are freed: the driver of a Dask audit of 5M rows held 0.5-0.7 GB so (RSS less its live
    allocations and libraries), which :func:`release_free_heap` could not hand back. A fixed
    threshold keeps them out of the heap. Costs a system call and fresh pages per large
    allocation: for a process that mostly waits on a cluster. Setting it ends glibc's sliding,
    which also kept the heap's free top up to twice the threshold (``M_TRIM_THRESHOLD``, else
    128 KiB: the top given back and taken again around every temporary), so that is set too.
    Nothing elsewhere (macOS, Windows, musl): False.
    """
    libc = _glibc()
    return (libc is not None and bool(libc.mallopt(_M_MMAP_THRESHOLD, int(threshold)))
            and bool(libc.mallopt(_M_TRIM_THRESHOLD, 2 * int(threshold))))


#: The variable NumPy reads when it is imported: ``0`` keeps it from advising huge pages.
HUGEPAGE_ENV = "NUMPY_MADVISE_HUGEPAGE"


def numpy_small_pages() -> bool:
    """Keep NumPy from asking the kernel for transparent huge pages for its arrays, in this
    process and in the processes it starts from now on; True when changed.

    Where the system gives huge pages on request (``madvise`` in
    ``/sys/kernel/mm/transparent_hugepage/enabled``, as on the test VMs), NumPy asks for them
    for every array of 4 MB or more, and each first touch of 2 MB then faults in a whole zeroed
    huge page (with ``always`` the kernel gives them anyway; with ``never`` it gives none). On
    the 2-core test VM that cost the audit about half its system time: in a default audit of
    100,000 rows on two cores, 17 % of the process's CPU samples were the kernel zeroing huge
    pages (``perf record``; 2,514 huge pages, 5 GB, in a run: ``/proc/vmstat``), and with
    NumPy's advice off the system time fell from 15.1-17.7 to 8.2-9.3 CPU-s and the run from
    52.5-69.6 to 48.7-53.4 s (three pairs, 2026-12-01). Ordinary pages cost more faults (1.7M
    against 0.4M) but no zeroing of pages the arrays do not use, nor huge pages the host must
    first find. Values do not change.

    The user's own ``NUMPY_MADVISE_HUGEPAGE`` (set either way) stands: then nothing is
    changed. Child processes read the variable when they import NumPy, so it is set in this
    process's environment; NumPy, already imported here, is told at once (its private
    ``_set_madvise_hugepage``, where this NumPy has it). Like :func:`limit_arenas`, it holds
    for the whole process: the command line's audit and the dashboard's audit worker call it,
    not the library.
    """
    if os.environ.get(HUGEPAGE_ENV, "").strip():
        return False
    os.environ[HUGEPAGE_ENV] = "0"
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        setter = getattr(module, "_set_madvise_hugepage", None)
        if setter is not None:
            setter(False)
            break
    return True
