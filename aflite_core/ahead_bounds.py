"""When an audit does work ahead (``Measure.ahead``: the cue measure's token counts and
tags made in a child process beside Φ and the filter): the cores and the rows.

A base module of constants, light on purpose, so that the command line's audit and the
dashboard's audit worker can tell before their own imports whether to start that child
(:func:`aflite_core.cues.start_spare_child`), while they import and read
(:func:`aflite_core.commands.warm_early`, :mod:`aflite_core.worker`). The measure runner reads
the same bounds (:func:`aflite_core.measure_runs.ahead_measures`).
"""

from __future__ import annotations

__all__ = ["AHEAD_MAX_ROWS", "AHEAD_MIN_CORES", "AHEAD_MIN_ROWS", "ahead_possible"]

#: Cores from which the measures' work ahead (``Measure.ahead``) starts: on one core it would
#: only take turns with Φ and the filter.
AHEAD_MIN_CORES = 2
#: Audited rows from which the work ahead starts: below, Φ and the filter are done before the
#: child process has loaded what it tags with (about 1.5 s of one core), and the cue measure
#: waits for it. Two cores, a fresh annotation cache (2026-11-30, ``/tmp`` script timing the
#: CLI audit): SNLI dev (9,842 rows) 5.45-5.52 s ahead against 5.22-5.37 s in the measure;
#: 30,000 rows 10.33 s against 10.94 s; 100,000 rows 24.1 s against 27.4 s.
AHEAD_MIN_ROWS = 20_000
#: Audited rows up to which the work ahead starts: as far as it was measured. Its child
#: process holds the texts, their token counts and tags (not the audit's process: its texts
#: are sent a chunk at a time). ``bench_pipeline.py --sizes 1000000`` on two cores
#: (2026-11-30): 137.1 s and a peak of 1,819 MB, against 154.8 s and 1,810 MB the day
#: before; ``bench_cores.py --rows 300000 --cores 2``: 51.95 s and 1,164 MB against 54.74 s
#: and 1,225 MB.
AHEAD_MAX_ROWS = 1_000_000


def ahead_possible(n_rows: int | None, *, cores: int, local: bool = True) -> bool:
    """Whether an audit of ``n_rows`` audited rows (None: not known yet) on ``cores`` cores,
    locally or on a cluster (``local`` False), may do work ahead: the bounds above.

    >>> ahead_possible(None, cores=2), ahead_possible(1_000, cores=2)
    (True, False)
    >>> ahead_possible(100_000, cores=1), ahead_possible(100_000, cores=8, local=False)
    (False, False)
    """
    return (local and cores >= AHEAD_MIN_CORES
            and (n_rows is None or AHEAD_MIN_ROWS <= n_rows <= AHEAD_MAX_ROWS))
