"""The CPUs and memory a container or service allows this process (Linux cgroups).

A container started with ``docker run --cpus=2``, a Kubernetes pod with ``limits: cpu: 2``,
a systemd service with ``CPUQuota=200%`` or a batch job's cgroup may run on a 64-core host
with all 64 CPUs in its affinity: the kernel then lets it use 2 CPUs' worth of time per
period (``cpu.max`` in cgroup v2, ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` in v1) and
stops every thread for the rest of the period once that is spent. An audit that sized its
pools from the affinity alone would start 62 cue tagging processes and 64-thread pools
there: the memory of 64 cores and the speed of 2, with the threads throttled.

:func:`cgroup_cpu_limit` reads the tightest quota on the process's cgroup and its ancestors
(either version; the cgroup file system's root too, where a container sees its own);
:func:`quota_cores` rounds it up to whole cores (as loky, Go and the JVM do), and
:func:`available_cores` takes the smaller of it and the affinity: every pool and worker
count of the package follows that. :func:`limit_native_threads` holds the BLAS, OpenMP and
numba thread pools (which follow the affinity alone) to the same count; the command line's
and the dashboard's audit processes call it. Elsewhere (macOS, Windows, no cgroup file system, no
quota) there is no quota and nothing changes.

The same holds for memory: :func:`usable_memory` is the machine's, or less where the cgroup
sets a limit (``memory.max``, ``memory.limit_in_bytes``), past which the kernel kills the
process: the dashboard starts no more audits at once than it holds.
"""

from __future__ import annotations

import functools
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path

#: Reads one limit in a cgroup's folder (None: none set there, or not readable).
Reader = Callable[[Path], "float | None"]

__all__ = ["CGROUP_ROOT", "NATIVE_THREAD_VARIABLES", "PROC_CGROUP", "available_cores",
           "cgroup_cpu_limit", "cgroup_memory_limit", "limit_native_threads", "quota_cores",
           "usable_memory"]

#: Where the cgroup file systems are mounted.
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: This process's cgroups, one line per hierarchy (``id:controllers:path``).
PROC_CGROUP = Path("/proc/self/cgroup")
#: Where a cgroup v1 ``cpu`` hierarchy may be mounted, under :data:`CGROUP_ROOT`.
_V1_CPU_MOUNTS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _own_paths(proc_cgroup: Path, controller: str) -> tuple[str | None, str | None]:
    """This process's cgroup in the v2 hierarchy and in the v1 one of ``controller`` (None:
    not in one)."""
    unified = own = None
    for line in (_read(proc_cgroup) or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            unified = path
        elif controller in controllers.split(","):
            own = path
    return unified, own


def _limits(root: Path, proc_cgroup: Path, controller: str, v1_mounts: tuple[str, ...],
            v2_read: Reader, v1_read: Reader) -> list[float]:
    """Every limit set on this process's cgroup and those above it: what ``v2_read(folder)``
    reads in cgroup v2 and, in the first of ``v1_mounts`` that is a v1 hierarchy (of
    ``controller``), what ``v1_read(folder)`` reads (None: none there)."""
    unified, own = _own_paths(proc_cgroup, controller)
    found: list[float | None] = []
    if (root / "cgroup.controllers").is_file():  # cgroup v2 mounted at the root
        found.extend(v2_read(folder) for folder in _dirs(root, unified))
    for name in v1_mounts:
        mount = root / name
        if (mount / "cgroup.procs").is_file():
            found.extend(v1_read(folder) for folder in _dirs(mount, own))
            break  # the same hierarchy may be mounted under several names
    return [value for value in found if value is not None]


def _number(text: str | None) -> float | None:
    try:
        value = int(text) if text is not None else 0
    except ValueError:
        return None
    return float(value) if value > 0 else None


def _dirs(mount: Path, own: str | None) -> list[Path]:
    """``mount``/``own`` and each folder above it up to ``mount``, that exist (inside a
    container the path the kernel gives may not exist: the container's own cgroup is the
    mount's root)."""
    found = []
    if own:
        parts = [p for p in own.strip("/").split("/") if p and p not in (".", "..")]
        for depth in range(len(parts), 0, -1):
            folder = mount.joinpath(*parts[:depth])
            if folder.is_dir():
                found.append(folder)
    found.append(mount)
    return found


def _limit(quota: str | None, period: str | None) -> float | None:
    """CPUs of a quota and period in microseconds; None when there is no limit ("max", a
    negative quota) or the values do not read as numbers."""
    if quota is None or period is None or quota == "max":
        return None
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def _cpu_max(folder: Path) -> float | None:
    """CPUs of cgroup v2's ``cpu.max`` ("QUOTA PERIOD"; "max PERIOD": none)."""
    words = (_read(folder / "cpu.max") or "").split()
    return _limit(*words) if len(words) == 2 else None


def cgroup_cpu_limit(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP
                     ) -> float | None:
    """The tightest CPU quota on this process, in CPUs (``1.5``: one and a half CPUs' time a
    period), from cgroup v2's ``cpu.max`` and v1's ``cpu.cfs_quota_us`` over
    ``cpu.cfs_period_us`` on its cgroup and every one above it; None when none is set or
    none can be read.

    Parameters
    ----------
    root : Path, default /sys/fs/cgroup
        Where the cgroup file systems are mounted.
    proc_cgroup : Path, default /proc/self/cgroup
        The process's cgroup memberships.

    Returns
    -------
    float or None
    """
    found = _limits(root, proc_cgroup, "cpu", _V1_CPU_MOUNTS, _cpu_max,
                    lambda folder: _limit(_read(folder / "cpu.cfs_quota_us"),
                                          _read(folder / "cpu.cfs_period_us")))
    return min(found) if found else None


def cgroup_memory_limit(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP
                        ) -> int | None:
    """The tightest memory limit on this process's cgroup and every one above it, in bytes
    (cgroup v2's ``memory.max``, v1's ``memory.limit_in_bytes``); None when none is set or
    none can be read. v1 writes "no limit" as a huge number: the caller compares with the
    machine's memory (:func:`usable_memory`).

    Parameters
    ----------
    root, proc_cgroup : Path
        As :func:`cgroup_cpu_limit`'s.

    Returns
    -------
    int or None
    """
    found = _limits(root, proc_cgroup, "memory", ("memory",),
                    lambda folder: _number(_read(folder / "memory.max")),  # "max": none
                    lambda folder: _number(_read(folder / "memory.limit_in_bytes")))
    return int(min(found)) if found else None


def usable_memory() -> int | None:
    """Bytes of memory this process may use: the machine's, or its cgroup's limit where that
    is lower (:func:`cgroup_memory_limit`); None where the machine's cannot be read."""
    try:
        machine = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None
    limit = cgroup_memory_limit() if sys.platform.startswith("linux") else None
    return machine if limit is None else min(machine, limit)


@functools.lru_cache(maxsize=1)
def quota_cores() -> int | None:
    """Whole cores this process's CPU quota allows (:func:`cgroup_cpu_limit` rounded up, at
    least one), or None without a quota; read once a process (Linux only).

    Examples
    --------
    >>> quota_cores() is None or quota_cores() >= 1
    True
    """
    if not sys.platform.startswith("linux"):
        return None
    limit = cgroup_cpu_limit()
    return None if limit is None else max(1, math.ceil(limit - 1e-9))


def _affinity() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def available_cores() -> int:
    """The cores this process may run on: its CPU affinity where the system has one (a
    process pinned with ``taskset`` or a container's cpuset), else every core, and no more
    than its CPU quota allows (a container's ``--cpus``, a pod's CPU limit:
    :func:`quota_cores`). Every pool and worker count of the package follows this, never
    ``os.cpu_count()``.

    Examples
    --------
    >>> 1 <= available_cores() <= (os.cpu_count() or 1)
    True
    """
    cores = _affinity()
    quota = quota_cores()
    return cores if quota is None else min(cores, quota)


#: The thread pools of native libraries :func:`limit_native_threads` sets for the processes
#: this one starts (each library reads its variable when it loads).
NATIVE_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                           "NUMBA_NUM_THREADS")


def limit_native_threads() -> int | None:
    """Hold BLAS, OpenMP and numba to the cores a CPU quota allows, when it allows fewer than
    the affinity: this process's loaded pools through threadpoolctl, and the processes it
    starts through :data:`NATIVE_THREAD_VARIABLES` (a variable the user set is left as it
    is). Process-wide, so the command line and the dashboard's audit worker call it, not the
    library.

    Returns
    -------
    int or None
        The cores they were held to; None when there is no quota below the affinity
        (nothing changed).
    """
    cores = quota_cores()
    if cores is None or cores >= _affinity():  # the libraries follow the affinity already
        return None
    for name in NATIVE_THREAD_VARIABLES:
        os.environ.setdefault(name, str(cores))
    if "numpy" in sys.modules or "scipy" in sys.modules:  # pools already started: set them
        from aflite_core import blas_threads  # lazy: threadpoolctl scans the libraries

        blas_threads.limit(cores, user_api=None)  # kept: not used as a context
    return cores
