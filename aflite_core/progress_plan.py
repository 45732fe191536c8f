"""How an audit's progress bar is shared among its stages: in proportion to their expected time.

The dashboard's ETA is ``elapsed * (1 - fraction) / fraction``. That is right only when the
fraction grows in step with time, so each stage's span of the bar is its share of the expected
seconds: a fixed part plus a part per 100,000 audited rows, measured on two cores by
``benchmarks/bench_pipeline.py`` (10k, 100k and 1M rows, default settings; between the sizes
measured, :func:`stage_per_100k` interpolates). A slower or faster
machine scales every stage alike, which the ETA's ``elapsed`` absorbs; what must hold is the
*ratio* between stages (checked by that benchmark: the ETA printed at each stage against the
time that really remained).

The measures' share comes from :attr:`aflite_core.measures.registry.Measure.cost`, in the same
unit (seconds per 100,000 rows).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["AHEAD_SHARE", "BESIDE_SHARE", "BESIDE_SPEED", "DEFAULT_PARALLEL_SHARE",
           "FIXED_SECONDS", "FRONT_STAGES", "MEASURED_SECONDS", "PARALLEL_SHARE", "along_points",
           "beside_plan", "beside_seconds", "core_factor", "expected_seconds", "knee",
           "stage_per_100k", "stage_spans", "with_ahead"]

#: Seconds of the stages outside the measures on two cores at three sizes:
#: :func:`stage_per_100k` interpolates them (never below a stage's fixed part). At 100,000
#: and 1,000,000 rows as measured (``bench_pipeline.py --sizes 100000`` and ``--sizes
#: 1000000``, the default audit, 2026-11-29); at 9,842 rows the earlier plan's (3.6, 1.8,
#: 0.6 and 0.35 s per 100,000 rows after the fixed parts), which the short runs' ETA was
#: tuned with: the seconds measured there (1.07, 0.12, 0.21 s) gave 1.45-1.75x against
#: 1.32-1.52x (three runs each), 1.20-1.22x now. A rate fitted at 100,000 rows alone gave at
#: 1M rows 36.9 s for the representation and 18.1 s for AFLite against 21.4 and 10.7 s
#: measured: the ETA after AFLite was 86.5 s for 143.1 s left (1.65x; 1.36x with these).
#: At 2,000,000 rows as measured (``--sizes 2000000``, 2026-11-29): the line through 100k and
#: 1M gave 41.2 s for the representation and 20.4 s for AFLite against 60.8 and 34.0 s, and
#: the ETA after AFLite 583.6 s for 332.0 s left (1.76x). The 1M and 2M points measured again
#: on 2026-11-30's VM (``--sizes 1000000``: 17.98-19.16, 7.67-7.94, 5.86-5.92, 1.06-1.14 s;
#: ``--sizes 2000000``: 33.06, 19.03, 11.39, 1.76 s), where 2026-11-29's planned the stages
#: before the measures at 1.7x their time at 2M and the ETA in AFLite was 1.68x. AFLite at
#: 100k on that VM: 1.34 s (``--sizes 100000``, 2026-11-30; 2.00 s planned before).
MEASURED_SECONDS: dict[str, tuple[tuple[int, float], ...]] = {
    "representation": ((9_842, 1.254), (100_000, 3.66), (1_000_000, 18.6),
                       (2_000_000, 33.06)),
    "aflite": ((9_842, 0.277), (100_000, 1.35), (1_000_000, 7.8), (2_000_000, 19.03)),
    "write": ((9_842, 0.159), (100_000, 1.09), (1_000_000, 5.9), (2_000_000, 11.39)),
    "report": ((9_842, 0.834), (100_000, 0.58), (1_000_000, 1.1), (2_000_000, 1.76)),
}

#: Seconds any stage takes whatever the size (imports, small fixed work).
FIXED_SECONDS: float = 0.1
#: Stages whose fixed part is larger (bench_pipeline.py at 10k rows): the representation
#: imports scikit-learn's text tools (0.9-1.1 s at 10k rows, 4.3-4.7 s at 100k, 2026-11-26:
#: the measures' faster fits and the CLI's faster exit made its underestimate the 10k ETA's
#: worst error, 1.55-1.60x at 0.6 s, 1.14-1.24x at 0.9 s); the last stage,
#: the HTML report, renders its figures with Plotly and ends with the summary written and the
#: process leaving. Smaller: the label shift and the data map, which read tables already made
#: (0.01-0.03 s and 0.02-0.06 s from 10k to 100k rows, ``bench_pipeline.py``, 2026-11-30).
STAGE_FIXED_SECONDS: dict[str, float] = {"representation": 0.9, "report": 0.8,
                                         "label_shift": 0.02, "datamap": 0.02}

#: Representations other than TF-IDF + SVD, relative to it (the encoders estimate their own
#: time on the Audit page; here only the share of the bar matters).
REPRESENTATION_FACTOR: dict[str, float] = {"tfidf_svd": 1.0}


def stage_per_100k(stage: str, n_rows: int) -> float:
    """Seconds per 100,000 rows of ``stage`` (one of :data:`MEASURED_SECONDS`) at ``n_rows``
    rows, such that :func:`expected_seconds` gives its measured seconds there: linear between
    the measured sizes, along the last two beyond them, from the stage's fixed part at 0
    rows to the first.

    Examples
    --------
    >>> round(stage_per_100k("aflite", 100_000), 6)
    1.25
    >>> stage_per_100k("representation", 1_000_000) < stage_per_100k("representation", 100_000)
    True
    """
    points = MEASURED_SECONDS[stage]
    fixed = STAGE_FIXED_SECONDS.get(stage, FIXED_SECONDS)
    n = max(int(n_rows), 0)
    if not n:
        return 0.0
    sizes = [0, *(size for size, _ in points)]
    seconds = [fixed, *(value for _, value in points)]
    k = next((i for i in range(1, len(sizes)) if n <= sizes[i]), len(sizes) - 1)
    slope = (seconds[k] - seconds[k - 1]) / (sizes[k] - sizes[k - 1])
    total = seconds[k - 1] + slope * (n - sizes[k - 1])
    return max(total - fixed, 0.0) * 100_000 / n


def along_points(points: tuple[tuple[int, float], ...], n: int) -> float:
    """The value at ``n`` of the line through measured ``(size, value)`` points (increasing
    sizes): linear between them, the first value below the first size, along the last two
    beyond the last (a measure's seconds at the sizes it was timed at).

    Examples
    --------
    >>> along_points(((0, 0.0), (10, 1.0), (20, 3.0)), 15), along_points(((10, 1.0), (20, 3.0)), 30)
    (2.0, 5.0)
    """
    sizes = [size for size, _ in points]
    values = [value for _, value in points]
    if n <= sizes[-1]:
        return float(np.interp(n, sizes, values))
    slope = (values[-1] - values[-2]) / (sizes[-1] - sizes[-2])
    return values[-1] + slope * (n - sizes[-1])


def expected_seconds(stages: Iterable[tuple[str, float]], n_rows: int) -> dict[str, float]:
    """Expected seconds of each stage: its fixed part (:data:`STAGE_FIXED_SECONDS`, else
    :data:`FIXED_SECONDS`) ``+ per_100k * n_rows / 100_000``.

    Parameters
    ----------
    stages : iterable of (name, seconds per 100,000 rows)
        In the order the audit runs them.
    n_rows : int
        Audited rows.

    Returns
    -------
    dict
        Stage name -> expected seconds, in the given order.
    """
    scale = max(int(n_rows), 0) / 100_000
    return {name: STAGE_FIXED_SECONDS.get(name, FIXED_SECONDS) + max(float(per_100k), 0.0)
            * scale for name, per_100k in stages}


#: The share of a measure's own time that it adds to the audit when it runs beside the others
#: (:mod:`aflite_core.measure_runs`) while they last, at 10,000 rows and below / at 100,000 and
#: above (linear in between): the two sides share the cores, and the others slow down by
#: about this much of it. Small audits' other measures are mostly one thread of Python, which
#: leaves the map a core; large ones fit folds on both cores (``bench_pipeline.py``,
#: 2026-11-26: the map beside the others added 0.57 s of its 2.15 s at 10k rows, 3.2 s of its
#: 6.7 s at 100k). The measures' own costs are measured beside the map (KNN's 6 s at 100k is
#: twice its time in turn), so at 100k half of the map double-counted once the map and the
#: label issues got faster: the ETA at the map's start overestimated 1.44-1.55x; with 0.3,
#: 1.28-1.31x (``bench_pipeline.py --sizes 100000``, 2026-11-26 15:45 UTC).
BESIDE_SHARE: tuple[float, float] = (0.25, 0.3)


#: How fast a measure beside the others gets on while they run, against its planned speed
#: alone. At 20,000 rows the map (3.9 s planned) outlasted the other measures (3.3-3.4 s) by
#: 0.7-0.8 s of the 7-8 s audit, where taking its overlap at full speed planned it none: its
#: last fifth and its regions, then the report, had a tenth of the bar for a fifth of the
#: time, and the ETA there was 1.47x on a quiet machine and 2.6x on a busy one
#: (``bench_eta.py``, 2026-11-30). 0.8 fits that outlast with the measures' costs measured on
#: 2026-11-30's VM (0.6 fitted their earlier, larger costs).
BESIDE_SPEED: float = 0.8


def beside_plan(beside: float, others: float, n_rows: int = 100_000, *,
                cores: int = 2) -> tuple[float, float, float]:
    """How measures taking ``beside`` seconds (alone) run beside measures taking ``others``
    in an audit of ``n_rows`` rows: while the others last they do :data:`BESIDE_SPEED` of
    their work a second, and add a share (:data:`BESIDE_SHARE`) of it to the audit; the work
    left when the others end adds all of its seconds. On one core the two sides take turns
    on it, so all of it adds.

    Returns
    -------
    added : float
        The seconds they add (their span of the bar).
    knee_work, knee_bar : float
        The share of their work done, and the share of their span filled, when the others
        end (1.0, 1.0: they end first, their span fills in step with their work).

    Examples
    --------
    >>> [round(v, 3) for v in beside_plan(2.0, 10.0)]
    [0.6, 1.0, 1.0]
    >>> [round(v, 3) for v in beside_plan(4.0, 3.75)]
    [1.9, 0.75, 0.474]
    """
    beside, others = max(beside, 0.0), max(others, 0.0)
    if cores <= 1 or beside <= 0.0:
        return beside, 1.0, 1.0
    small, large = BESIDE_SHARE
    t = min(max((int(n_rows) - 10_000) / 90_000, 0.0), 1.0)
    overlap = min(beside, BESIDE_SPEED * others)
    shared = (small + (large - small) * t) * overlap
    added = shared + beside - overlap
    if overlap >= beside:
        return added, 1.0, 1.0
    return added, overlap / beside, shared / added if added > 0 else 1.0


def beside_seconds(beside: float, others: float, n_rows: int = 100_000, *,
                   cores: int = 2) -> float:
    """The seconds that measures taking ``beside`` seconds add to an audit of ``n_rows`` rows
    when they run beside measures taking ``others`` (:func:`beside_plan`'s ``added``).

    Examples
    --------
    >>> round(beside_seconds(2.0, 10.0), 6), beside_seconds(2.0, 0.0)
    (0.6, 2.0)
    >>> round(beside_seconds(2.0, 10.0, n_rows=10_000), 6)
    0.5
    >>> beside_seconds(2.0, 10.0, cores=1)
    2.0
    """
    return beside_plan(beside, others, n_rows, cores=cores)[0]


def knee(share: float, knee_work: float, knee_bar: float) -> float:
    """The share of the beside measures' span filled when ``share`` of their work is done,
    on :func:`beside_plan`'s two lines through ``(knee_work, knee_bar)``.

    Examples
    --------
    >>> knee(0.5, 0.75, 0.5), knee(0.875, 0.75, 0.5), knee(0.3, 1.0, 1.0)
    (0.3333333333333333, 0.75, 0.3)
    """
    share = min(max(share, 0.0), 1.0)
    if knee_work >= 1.0 or share <= knee_work:
        return knee_bar * share / knee_work if knee_work > 0 else knee_bar
    return knee_bar + (1.0 - knee_bar) * (share - knee_work) / (1.0 - knee_work)


#: The stages before the measures, which the measures' work ahead (``Measure.ahead``) runs
#: beside.
FRONT_STAGES: tuple[str, ...] = ("representation", "aflite", "write")
#: The share of the work measures do ahead (planned as their cold cost: the cue measure's
#: first tagging) that :data:`FRONT_STAGES` take longer by, sharing the cores with it; the
#: measure is planned without it. Two cores, cold cue tags (2026-11-30, ``bench_cores.py``):
#: Φ, AFLite and the writing 5.3 -> 6.8 s at 100,000 rows, 11.0 -> 14.8 s at 300,000,
#: against 4.43 s and 8.91 s of cold tagging planned (the cue stage 7.6 -> 0.55 s and
#: 9.0 -> 1.3 s). With 0.3 the ETA at 300k rows was 1.72x the time left in AFLite. On more
#: cores the work ahead tags with a pool of its own (``cues.ahead_jobs``) on the cores the
#: front stages leave idle: the share falls as 2 / cores (a guess from the two-core fit:
#: the share of the cores the tagging takes from them).
AHEAD_SHARE: float = 0.45


def with_ahead(stages: list[tuple[str, float]], ahead: float, *,
               cores: int = 2) -> list[tuple[str, float]]:
    """``stages`` (name, seconds per 100,000 rows) with :data:`AHEAD_SHARE` of ``ahead``
    (the cost of the work done ahead, in the same unit) added to :data:`FRONT_STAGES`, in
    proportion to their own; on more than two cores, ``2 / cores`` of that.

    Examples
    --------
    >>> stages = with_ahead([("representation", 3.0), ("aflite", 1.0), ("cues", 1.0)], 4.0)
    >>> [(name, round(value, 6)) for name, value in stages]
    [('representation', 4.35), ('aflite', 1.45), ('cues', 1.0)]
    >>> stages = with_ahead([("representation", 3.0), ("cues", 1.0)], 4.0, cores=8)
    >>> [(name, round(value, 6)) for name, value in stages]
    [('representation', 3.45), ('cues', 1.0)]
    """
    front = sum(value for name, value in stages if name in FRONT_STAGES)
    if ahead <= 0 or front <= 0:
        return list(stages)
    scale = 1.0 + AHEAD_SHARE * min(1.0, 2 / max(cores, 1)) * ahead / front
    return [(name, value * scale if name in FRONT_STAGES else value) for name, value in stages]


#: The share of each stage's one-core time that divides among the cores the audit may use
#: (the rest runs on one), from its speed-up S measured in turn on one core and on two:
#: ``p = 2 (1 - 1/S)``. The seconds above are two-core seconds; :func:`core_factor` turns
#: them into another core count's, so that the bar's spans keep in step with time on one
#: core as on two (on one core every measure but the representation and AFLite takes
#: 1.5-1.8x its two-core time, and a plan made for two gave an ETA off by 1.6-2.1x).
#: The mean of ``p`` at two sizes: ``benchmarks/bench_cores.py --rows 100000 --cores 1,2
#: --in-turn`` (thirty-third session: speed-ups 1.21, 1.39, 1.05, 1.86, 1.51, 1.67, 1.53,
#: 1.44 of the representation, AFLite, cues, knn, projection, baselines, label issues, pvi)
#: and ``--rows 300000 --cores 1,2`` (2026-11-29, thirty-fourth: 1.26, 1.41, 1.30, 1.82, 1.69,
#: 1.54, 1.55, 1.23; cold cue tags in both). The shares before (from speed-ups 1.09, 1.26,
#: 1.0, 1.57, 1.45, 1.47, 1.31, 1.51, measured earlier the same day) planned the
#: representation and AFLite too fast on one core and PVI too slow: the ETA on one core at
#: 300k rows was off by 1.95x. The slices, the writes and the small stages gain nothing from
#: the second core. The cues' share is their first audit's (the tagging pool, one process a
#: core): speed-ups 1.60, 1.83 and 1.23 at 10k, 100k and 300k rows (2026-11-30, cold tags)
#: give 0.75, 0.91, 0.37; 0.6 (0.28 before, when the cold tagging was planned at 8 s per
#: 100,000 rows: with it measured, 0.28 left the ETA on one core at 100k 1.57x).
PARALLEL_SHARE: dict[str, float] = {
    "representation": 0.38, "aflite": 0.57, "write": 0.0, "cues": 0.6, "slices": 0.0,
    "label_shift": 0.0, "datamap": 0.0, "report": 0.0, "knn": 0.91, "projection": 0.75,
    "baselines": 0.75, "label_issues": 0.70, "pvi": 0.49,
}
#: The parallel share of a stage not in :data:`PARALLEL_SHARE`.
DEFAULT_PARALLEL_SHARE: float = 0.7


def core_factor(stage: str, cores: int) -> float:
    """How many times its two-core seconds ``stage`` takes on ``cores`` cores: Amdahl's law
    with the stage's parallel share ``p`` (:data:`PARALLEL_SHARE`),
    ``(1 - p + p / cores) / (1 - p / 2)``.

    Measured on one and two cores; above two it is the law's extrapolation.

    Examples
    --------
    >>> core_factor("knn", 2)
    1.0
    >>> core_factor("anything", 1) > 1.0 > core_factor("anything", 4)
    True
    """
    p = min(max(PARALLEL_SHARE.get(stage, DEFAULT_PARALLEL_SHARE), 0.0), 1.0)
    k = max(int(cores), 1)
    return (1.0 - p + p / k) / (1.0 - p / 2.0)


def stage_spans(seconds: dict[str, float]) -> dict[str, tuple[float, float]]:
    """Consecutive spans of [0, 1], one per stage, proportional to its expected seconds.

    Examples
    --------
    >>> stage_spans({"a": 1.0, "b": 3.0})
    {'a': (0.0, 0.25), 'b': (0.25, 1.0)}
    """
    total = sum(seconds.values()) or 1.0
    spans, lo = {}, 0.0
    for name, value in seconds.items():
        hi = min(1.0, lo + value / total)
        spans[name] = (lo, hi)
        lo = hi
    if spans:
        last = next(reversed(spans))
        spans[last] = (spans[last][0], 1.0)
    return spans
