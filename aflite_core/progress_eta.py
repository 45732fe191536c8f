"""The time an audit has left, following the CPU it actually gets.

The progress bar's fraction is in expected seconds of a machine the audit has to itself
(:mod:`aflite_core.progress_plan`). The plain estimate, ``elapsed * (1 - f) / f``, assumes
the audit keeps getting the CPU it got so far on average; on a machine shared with other
jobs it does not (the dashboard's worker runs at a lower priority: when another job starts,
the audit slows down at once, and the plain estimate takes most of the run to notice).

:class:`CpuShare` measures how much of the CPU the audit's threads wanted they got: Linux
keeps, per thread, the time it ran and the time it waited, runnable, for a core
(``/proc/<pid>/task/<tid>/schedstat``); summed over the audit's process and its children,
its share is ``ran / min(ran + waited, cores * wall)``: what it got of what it could have
had. On a machine it has to itself that is 1 whatever the number of threads each stage runs
(threads beyond the cores wait for each other, not for another job).

:class:`EtaClock` counts *effective* seconds -- wall seconds times the share the audit got in
them -- and estimates the effective seconds left as ``effective * (1 - f) / f`` when the bar
moves, counting them down while it stands still (a stage without reports of its own; the
plain estimate rose there: the bar sat at 30 % for 47 s while the ETA went from 2 min 41 s to
4 min 18 s); the wall seconds left are those divided by the share of the last
:data:`WINDOW_SECONDS`. Alone on a
machine (share 1) this is the plain estimate; under a steady load too (the share cancels);
when the load changes, it follows within the window. Where ``schedstat`` is not there (not
Linux, or a kernel without schedstats) the share is taken as 1: the plain estimate.
"""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path

from aflite_core._validation import available_cores

__all__ = ["FULL_SHARE", "WINDOW_SECONDS", "CpuShare", "EtaClock"]

#: The window of the share that scales the time left: recent enough to follow a load that
#: started, long enough to span a stage's bursts.
WINDOW_SECONDS = 15.0
#: While the bar stands still the ETA counts down to this share of what it was when the bar
#: last moved, and stays there until it moves again. A stall longer than planned is a stage
#: that overruns its plan: the map's silent end beside the others, or any stage on a loaded
#: machine (at 10 % of the CPU a 0.6 s stall lasts 6 s). With 0.1 the ETA fell to a tenth of
#: the time left there: worst 5.5-10.6x at every reading under a steady load, 13.9-15.8x
#: from 20 s after a load started; with 0.5, 2.8-3.0x and 3.7-4.0x, quiet runs unchanged
#: (three recordings of ``benchmarks/bench_eta.py``'s runs replayed, 2026-11-30).
STALL_FLOOR = 0.5
#: The share measured that counts as all of the CPU the audit could use (:func:`_share`
#: stretches the shares between half of it and it up to 1; a load's share below half of it is
#: taken as read). The counts are per reading (0.5 s in the dashboard): a core idle in one
#: part of it (one thread running) and threads waiting for each other in another (three on
#: two cores) read as a share below 1 on a machine the audit has to itself: 0.81-0.95 in quiet
#: 20k-row audits, where the estimate following them was off by up to 1.63x against the plain
#: one's 1.25-1.36x. Five recordings of ``bench_eta.py``'s runs replayed (2026-11-30): quiet
#: 1.17-1.44x (1.29-1.61x), steady loads unchanged, 20 s after a load starts and a load that
#: stops within 0.12 (2.28 / 2.85x against 2.24 / 2.73x: the short audit's 15 s window).
FULL_SHARE = 0.85
#: Smallest fraction an ETA is given for (before it, the pace is not known).
MIN_FRACTION = 0.02
_PROC = Path("/proc")
try:
    _TICKS = os.sysconf("SC_CLK_TCK")
except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
    _TICKS = 100


def _thread_stats(pid: int) -> dict[tuple[int, int], tuple[int, int]]:
    """``(pid, tid) -> (ran ns, waited ns)`` of every thread of ``pid``; empty if unknown."""
    stats = {}
    try:
        tasks = list((_PROC / str(pid) / "task").iterdir())
    except OSError:
        return stats
    for task in tasks:
        try:
            ran, waited = (task / "schedstat").read_text().split()[:2]
            stats[(pid, int(task.name))] = (int(ran), int(waited))
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
    return stats


def _children(pid: int) -> list[int]:
    try:
        import psutil  # lazy: +32 ms to import

        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except Exception:  # noqa: BLE001 - psutil missing, the process gone: none counted
        return []


class CpuShare:
    """Seconds a process and its children ran, and waited runnable for a core, since this
    object was made (see the module docstring).

    Parameters
    ----------
    pid : int or None
        The process (its children are counted too); None: this process.
    """

    def __init__(self, pid: int | None = None) -> None:
        self.pid = os.getpid() if pid is None else int(pid)
        self.available = (_PROC / str(self.pid) / "task").is_dir() and bool(
            _thread_stats(self.pid))
        self._last: dict[tuple[int, int], tuple[int, int]] = {}
        self.ran = self.waited = 0.0
        self._first = True
        self.sample()

    def sample(self) -> tuple[float, float]:
        """``(ran, waited)`` seconds since this object was made; ``(0, 0)`` when the system
        does not tell.

        ``ran`` is each process's CPU time (its threads that ended included); ``waited`` sums
        the live threads' waits (a thread that ended between two samples takes its last wait
        with it: the share errs towards 1, the plain estimate)."""
        if not self.available:
            return 0.0, 0.0
        now: dict[tuple[int, int], tuple[int, int]] = {}
        for pid in [self.pid, *_children(self.pid)]:
            now[(pid, 0)] = (_cpu_ns(pid), 0)
            now.update(_thread_stats(pid))
        if not self._first:
            for key, (ran, waited) in now.items():
                before = self._last.get(key, (0, 0))  # started since: all of it
                if key[1] == 0:
                    self.ran += max(ran - before[0], 0) / 1e9
                else:
                    self.waited += max(waited - before[1], 0) / 1e9
        self._first = False
        self._last = now
        return self.ran, self.waited


def _cpu_ns(pid: int) -> int:
    """User + system CPU of ``pid`` (every thread, ended ones included), in nanoseconds."""
    try:
        fields = (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    except (OSError, ValueError, IndexError):
        return 0
    return ticks * 1_000_000_000 // _TICKS


class EtaClock:
    """Estimates the seconds an audit has left (see the module docstring).

    Feed it :meth:`update` with the wall clock, the bar's fraction and the CPU counts of
    :meth:`CpuShare.sample` (``(0, 0)`` when not known) as often as the display refreshes.
    """

    def __init__(self, *, cores: int | None = None, window: float = WINDOW_SECONDS) -> None:
        self.cores = max(int(cores if cores is not None else available_cores()), 1)
        self.window = float(window)
        self.effective = 0.0
        self._start: float | None = None
        self._last: tuple[float, float, float] | None = None  # wall, ran, waited
        self._recent: deque[tuple[float, float, float]] = deque()
        self.fraction = 0.0
        self._left_at_change = 0.0  # effective seconds left when the fraction last moved
        self._effective_at_change = 0.0

    def update(self, wall: float, fraction: float, cpu: tuple[float, float] = (0.0, 0.0)
               ) -> None:
        """A new reading: ``wall`` seconds (any monotonic clock), the bar's ``fraction``,
        ``cpu = (ran, waited)`` cumulative seconds."""
        ran, waited = float(cpu[0]), float(cpu[1])
        before = self.fraction
        self.fraction = max(self.fraction, min(max(float(fraction), 0.0), 1.0))
        if self._start is None:
            self._start = wall
            self._last = (wall, ran, waited)
            self._recent.append(self._last)
            return
        last_wall, last_ran, last_waited = self._last
        if wall <= last_wall:
            return
        self.effective += (wall - last_wall) * _share(ran - last_ran, waited - last_waited,
                                                      wall - last_wall, self.cores)
        self._last = (wall, ran, waited)
        self._recent.append(self._last)
        while len(self._recent) > 2 and self._recent[1][0] <= wall - self.window:
            self._recent.popleft()
        if self.fraction > before:
            f = self.fraction
            self._left_at_change = self.effective * (1 - f) / f if f > 0 else 0.0
            self._effective_at_change = self.effective

    def share_now(self) -> float:
        """The share of the CPU the audit got over the last window (1 when not known)."""
        if len(self._recent) < 2:
            return 1.0
        (w0, r0, q0), (w1, r1, q1) = self._recent[0], self._recent[-1]
        return _share(r1 - r0, q1 - q0, w1 - w0, self.cores)

    def eta(self) -> float | None:
        """Seconds left; None before :data:`MIN_FRACTION` of the bar or once it is full."""
        f = self.fraction
        if not MIN_FRACTION <= f < 1 or self._start is None:
            return None
        # counted down while the bar stands still (a stage without reports of its own):
        # the plain estimate would rise instead; once the count is spent, half of it
        since = self.effective - self._effective_at_change
        left = max(self._left_at_change - since, STALL_FLOOR * self._left_at_change)
        return left / self.share_now()


def _share(ran: float, waited: float, wall: float, cores: int) -> float:
    """``ran / min(ran + waited, cores * wall)`` within [0.02, 1], the part above
    ``FULL_SHARE / 2`` stretched so that :data:`FULL_SHARE` reads as 1; 1 when the threads
    hardly asked for a core (asleep, waiting on a disk or a child: nothing says the CPU held
    them back).

    Examples
    --------
    >>> [round(_share(r, 0.2, 0.5, 2), 3) for r in (0.1, 0.3, 0.6, 0.85)]
    [0.333, 0.662, 0.865, 1.0]
    """
    wanted = min(ran + waited, cores * max(wall, 1e-9))
    if wanted <= 0.05 * max(wall, 1e-9):
        return 1.0
    share, half = ran / wanted, FULL_SHARE / 2
    if share > half:  # stretched to 1 at FULL_SHARE; a load's share below half of it as read
        share = half + (share - half) * (1 - half) / (FULL_SHARE - half)
    return min(max(share, 0.02), 1.0)
