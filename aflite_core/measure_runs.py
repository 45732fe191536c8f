"""How an audit runs its measures: progress, one measure, and the measures run beside the others.

:func:`run_measures` runs the chosen measures in registry order, except those declared
``Measure.beside``: they start first, one after another on a thread of their own, while the
others run in order on the calling thread, and the audit waits for them before its summary
(up to :data:`BESIDE_MAX_ROWS` audited rows, :data:`BESIDE_MAX_ROWS_MANY_CORES` on
:data:`BESIDE_MANY_CORES` cores or more; above, and on a Dask cluster, every measure runs in
turn: :func:`beside_measures`).
The map is such a measure: its layout is one numba kernel on one core without the GIL, so on a
two-core machine the other core would otherwise idle through it (a default audit of SNLI dev
7.0 -> 6.1 s, of 100,000 rows 35.6 -> 33.7 s, ``benchmarks/bench_pipeline.py``).

What running side by side must not change, and how it does not:

- **the results**: a measure reads the shared state (Φ as a read-only view, the labels, the
  texts) and returns its tables; it writes nothing until it is done, and then only its own files,
  so a failing measure removes only what it wrote, not what the other side wrote meanwhile;
- **BLAS**: threadpoolctl's limits are process-wide, and two sides setting and restoring them
  interleaved could leave them at either value; while a beside measure runs, BLAS is held at one
  thread (each side has its core) and every nested limit sets and restores that same one; the
  hold is lifted between two measures once the side is done. The tables are the same bit for
  bit as with every measure in order (``tests/test_pipeline_beside.py``);
- **the progress bar**: the beside measures' span is the last one before the report; their
  progress is *added* to the bar's position, so the bar counts the work of both sides, stays
  monotone, and stands at the same place as in order when both are done. Their work fills
  their span on the plan's knee (:func:`stage_plan`), and once the others end, what they have
  left fills the rest of it in step (:meth:`_Side.wait`);
- **cancelling**: the first side to see the callback's ``True`` raises; the other stops at its
  next progress report, and the audit waits for the side thread before the run folder goes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from aflite_core import blas_threads, progress_pace, progress_plan
from aflite_core._validation import available_cores
from aflite_core.ahead_bounds import AHEAD_MAX_ROWS, AHEAD_MIN_CORES, AHEAD_MIN_ROWS
from aflite_core.errors import AuditCancelled, MeasureSkipped
from aflite_core.heap_trim import release_free_heap
from aflite_core.measures import Measure, MeasureContext, MeasureResult, registry
from aflite_core.represent import on_dask
from aflite_core.runs import RunWriter

__all__ = ["AHEAD_MAX_ROWS", "AHEAD_MIN_CORES", "AHEAD_MIN_ROWS", "BESIDE_MANY_CORES",
           "BESIDE_MAX_ROWS", "BESIDE_MAX_ROWS_MANY_CORES",
           "EarlierTables", "Progress", "StagePlan", "ahead_measures", "beside_measures",
           "learn_pace", "run_measure", "run_measures", "stage_plan", "warm_ahead", "work_ahead"]

EventCallback = Callable[[dict], Any]

#: Audited rows up to which the measures declared beside run beside the others (in turn
#: above). At 1M rows the map beside KNN raised the audit's peak from 3.43 to 4.12 GB, past
#: the 4 GB budget, for no gain in time (214.9 s against 211.6-225.2 s in turn: each side's
#: products on one BLAS thread, KNN 28.7 -> 62.8 s; ``bench_pipeline.py --sizes 1000000``).
BESIDE_MAX_ROWS = 250_000
#: Cores from which they run beside the others up to :data:`BESIDE_MAX_ROWS_MANY_CORES`
#: rows: on a 16-core host the map of 300,000 rows took 10.6 s in turn with one or two of
#: the cores busy but for a 3 s burst, and of 1M rows 18.4 s (``bench_cores.py --cores 16
#: --keep``, 2026-11-30), while KNN and the fold-fitting measures used at most four.
BESIDE_MANY_CORES = 8
#: Audited rows up to which they run beside the others on :data:`BESIDE_MANY_CORES` cores or
#: more. At 1M rows the map beside the others raised the peak from 2,164 to 2,525 MB (16
#: threads on the 2-core machine, its affinity patched; two cores alone: 1.80 GB), past
#: issue 63's 2 GB and +25 %; the map's working set grows with the rows.
BESIDE_MAX_ROWS_MANY_CORES = 500_000


def ahead_measures(measures: Sequence[Measure], n_rows: int, *, cores: int,
                   local: bool = True) -> list[Measure]:
    """The measures of ``measures`` whose work ahead (``Measure.ahead``) :func:`work_ahead`
    starts in an audit of ``n_rows`` rows on ``cores`` cores: none below
    :data:`AHEAD_MIN_ROWS` rows; locally, none on fewer than :data:`AHEAD_MIN_CORES` cores
    or above :data:`AHEAD_MAX_ROWS` rows. On a Dask cluster (``local`` False) ``cores`` is
    not asked and the rows have no upper bound: the work ahead is tasks on the workers, a
    chunk of rows each, and this process holds none of it."""
    if n_rows < AHEAD_MIN_ROWS or (local and (cores < AHEAD_MIN_CORES
                                              or n_rows > AHEAD_MAX_ROWS)):
        return []
    return [m for m in measures if m.ahead is not None]


@contextlib.contextmanager
def warm_ahead(measures: Sequence[Measure], *, cores: int, local: bool = True
               ) -> Iterator[Callable[[int], None]]:
    """Before the data is read: start what the work ahead of ``measures`` will need
    (``Measure.warm``), on :data:`AHEAD_MIN_CORES` cores or more and not on a cluster, and
    yield ``loaded(n_rows)``: once the data is read, it ends what an audit of ``n_rows``
    audited rows will not use (:func:`ahead_measures`). On leaving, what is left is ended
    (a load that failed; what the work ahead took is its own by then).

    The cue measure's child process then loads NLTK and the tagger while this process reads
    the data, on a core the load leaves idle. A ``warm`` that fails is ignored: the work
    ahead starts its own as before.
    """
    ends: dict[str, Callable[[], None]] = {}
    if local and cores >= AHEAD_MIN_CORES:
        for measure in measures:
            if measure.warm is not None and measure.ahead is not None:
                with contextlib.suppress(Exception):
                    ends[measure.name] = measure.warm()

    def loaded(n_rows: int) -> None:
        used = {m.name for m in ahead_measures(measures, n_rows, cores=cores, local=local)}
        for name in [name for name in ends if name not in used]:
            with contextlib.suppress(Exception):
                ends.pop(name)()

    try:
        yield loaded
    finally:
        for end in ends.values():
            with contextlib.suppress(Exception):
                end()


@contextlib.contextmanager
def work_ahead(measures: Sequence[Measure], dataset: Any, params: dict[str, dict], *,
               cores: int, client: Any = None) -> Iterator[list[str]]:
    """Start the work ahead (``Measure.ahead``) of :func:`ahead_measures`, each on a thread of
    its own, and yield their names; on leaving, ask them to stop and wait for them. With a
    Dask ``client`` each runs inside :func:`~aflite_core.represent.on_dask` of it: the cue
    measure's then tags its chunks by tasks on the workers, at a priority below the audit's
    own tasks.

    Entered once the data is loaded, before Φ: the cue measure's token counts and tagging
    (a child process) then use the cores Φ's and the filter's serial steps leave idle, and
    the cue measure reads them from the cache (2026-11-30, 100,000 rows on two cores: the
    cores were busy 1.3 of 2 through Φ, AFLite and the rows' writing; the cue stage took
    7.6 s, 0.55 s with its work done ahead). By the time the measures have run, a measure's
    ``compute`` has waited for its work ahead, so asking it to stop cuts short only what no
    measure read: an audit cancelled or failed before its measures. A failing ahead is
    ignored: its measure's ``compute`` does the work and says what went wrong.
    """
    chosen = ahead_measures(measures, int(dataset.included_mask.sum()), cores=cores,
                            local=client is None)
    stop = threading.Event()

    def run(measure: Measure) -> None:
        # a failure is compute's to meet and report: it does the work itself
        with contextlib.suppress(Exception), on_dask(client):
            measure.ahead(dataset, params.get(measure.name, {}), stop)

    threads = [threading.Thread(target=run, args=(m,), name=f"ahead-{m.name}", daemon=True)
               for m in chosen]
    for thread in threads:
        thread.start()
    try:
        yield [m.name for m in chosen]
    finally:
        stop.set()
        for thread in threads:
            thread.join()


class EarlierTables(dict):
    """The tables of succeeded measures that later ones read (``MeasureContext.earlier``):
    one dict shared by an audit's contexts, holding only the files some measure ``reads``."""

    def __init__(self, wanted: Any = ()) -> None:
        super().__init__()
        self.wanted = frozenset(wanted)

    def keep(self, tables: dict) -> None:
        """Hold the tables of ``tables`` (run file -> DataFrame) that a measure reads."""
        self.update({name: table for name, table in tables.items() if name in self.wanted})


def beside_measures(measures: Sequence[Measure], n_rows: int, *, local: bool = True,
                    cores: int | None = None) -> list[Measure]:
    """The measures of ``measures`` that run beside the others in an audit of ``n_rows`` rows on
    ``cores`` cores (default: those this process may use): those declared ``beside``, up to
    :data:`BESIDE_MAX_ROWS` rows (:data:`BESIDE_MAX_ROWS_MANY_CORES` from
    :data:`BESIDE_MANY_CORES` cores on), and none on a Dask cluster (``local`` False): there the
    map's layout is a task that holds a worker's thread, and every task that reads the rows of Φ
    that worker keeps waits behind it (the slices at 100,000 rows on two workers: 9.9 s beside
    the map, 2.1 s in turn; the whole audit 44.9 s and 43.9 s,
    ``benchmarks/bench_distributed.py``)."""
    cores = available_cores() if cores is None else cores
    top = BESIDE_MAX_ROWS_MANY_CORES if cores >= BESIDE_MANY_CORES else BESIDE_MAX_ROWS
    if not local or n_rows > top:
        return []
    return [m for m in measures if m.beside]


class Progress:
    """Emit monotone progress events and turn a ``True`` reply into a cancellation.

    Thread-safe: the measures run beside the others report from their own thread. Their
    progress (:meth:`side_step`) is added to the position the other stages reached.
    """

    def __init__(self, callback: EventCallback | None,
                 spans: dict[str, tuple[float, float]] | None = None,
                 knee: tuple[float, float] = (1.0, 1.0)) -> None:
        self.callback = callback
        self.fraction = 0.0
        self.cancelled = False
        self.spans = spans or {}
        #: The beside measures' knee (:func:`stage_plan`): the share of their work done, and
        #: of their span filled, when the other measures are planned to end.
        self.knee = knee
        self._main = 0.0  # where the stages run in order reached
        self._side = 0.0  # the share of the bar the beside measures did meanwhile
        self._lock = threading.RLock()
        #: When each stage run in order first reported, and the last report (perf_counter):
        #: each stage's seconds, for this machine's pace (:func:`learn_pace`).
        self.began: dict[str, float] = {}
        self.last_at: float | None = None
        #: When the beside measures first reported and when they ended (None: not yet).
        self.side_times: list[float | None] = [None, None]

    def span(self, stage: str) -> tuple[float, float]:
        """The part of the bar ``stage`` fills (see :mod:`aflite_core.progress_plan`)."""
        return self.spans.get(stage, (self.fraction, self.fraction))

    def _emit(self, stage: str, message: str, **extra: Any) -> bool:
        self.fraction = max(self.fraction, min(1.0, self._main + self._side))
        if self.callback is None:
            return self.cancelled
        event = {"stage": stage, "message": message, "fraction": self.fraction, **extra}
        if self.callback(event) is True:
            self.cancelled = True
        return self.cancelled

    def emit(self, stage: str, message: str, fraction: float, **extra: Any) -> bool:
        """Report ``stage`` at ``fraction`` of the bar (plus what the beside measures did)."""
        with self._lock:
            self.last_at = time.perf_counter()
            self.began.setdefault(stage, self.last_at)
            self._main = max(self._main, float(fraction))
            return self._emit(stage, message, **extra)

    def step(self, stage: str, message: str, fraction: float, **extra: Any) -> None:
        """Emit and raise :class:`AuditCancelled` if the callback asked to stop."""
        if self.emit(stage, message, fraction, **extra):
            raise AuditCancelled(f"audit cancelled during {stage}")

    def side_step(self, stage: str, message: str, done: float) -> None:
        """A beside measure did ``done`` of the bar in all (its fraction times its span's
        width); raise :class:`AuditCancelled` if the audit was cancelled. The event says
        ``"beside": True``, so that a display can keep naming the stage run in order (the
        two threads' events interleave)."""
        with self._lock:
            if self.side_times[0] is None:
                self.side_times[0] = time.perf_counter()
            self._side = max(self._side, float(done))
            if self._emit(stage, message, beside=True):
                raise AuditCancelled(f"audit cancelled during {stage}")

    def side_ended(self) -> None:
        """The beside measures' thread has nothing left to do (called from it)."""
        with self._lock:
            self.side_times[1] = time.perf_counter()

    def stage_intervals(self) -> dict[str, tuple[float, float]]:
        """Each stage run in order: ``(start, end)``, from its first report to the next
        stage's (the last one's: to the last report)."""
        with self._lock:
            order = sorted(self.began.items(), key=lambda item: item[1])
            ends = [start for _, start in order[1:]] + [self.last_at or 0.0]
            return {stage: (start, end) for (stage, start), end in zip(order, ends, strict=True)}

    def side_done(self) -> None:
        """The beside measures are done and the stages in order reached their span: count
        their work once, as the position in order."""
        with self._lock:
            self._side = 0.0

    def sub(self, stage: str, span: tuple[float, float]) -> Callable[[dict], None]:
        """A callback for a measure module mapping its 0..1 fraction into ``span``."""

        def callback(info: dict) -> None:
            inner = float(info.get("fraction", 0.0) or 0.0)
            message = str(info.get("message", stage))
            self.step(stage, message, span[0] + (span[1] - span[0]) * min(max(inner, 0.0), 1.0))

        return callback


def measure_context(state: dict, measure: Measure, random_state: int, params: dict,
                    report: Callable[[float, str], None]) -> MeasureContext:
    """The :class:`MeasureContext` of ``measure`` from the audit's shared ``state``."""
    return MeasureContext(random_state=random_state, params=dict(params), progress=report,
                          **state)


def run_measure(measure: Measure, ctx: MeasureContext, writer: RunWriter) -> dict:
    """Compute ``measure`` and write its files; return its outcome for ``summary.json``
    (``status`` ok / skipped / error, ``seconds``, ``artifacts`` and the measure's info).

    A measure that is skipped or fails leaves none of its files behind (and only its own:
    another measure may be writing beside it).
    """
    start = time.perf_counter()
    written: list[str] = []
    try:
        result = measure.compute(ctx)
        _write_result(writer, result, written)
        if isinstance(ctx.earlier, EarlierTables):
            ctx.earlier.keep(result.tables)
    except AuditCancelled:
        raise
    except MeasureSkipped as exc:  # does not apply to this run: say why, write nothing
        _remove(writer, written)
        return {"status": "skipped", "reason": str(exc),
                "seconds": round(time.perf_counter() - start, 3)}
    except Exception as exc:  # noqa: BLE001 - a measure must not sink the run
        _remove(writer, written)  # no half-written artifact
        return {
            "status": "error",
            "error": f"{type(exc).__name__}: {exc}",
            "seconds": round(time.perf_counter() - start, 3),
        }
    finally:
        release_free_heap()  # the measure's temporaries: not under the next one's peak
    return {"status": "ok", "seconds": round(time.perf_counter() - start, 3),
            "artifacts": written, **result.info}


def _write_result(writer: RunWriter, result: MeasureResult, written: list[str]) -> None:
    for filename, table in result.tables.items():
        written.append(filename)
        writer.write_parquet(filename, table, astype=result.astype.get(filename))
    for filename, document in result.documents.items():
        written.append(filename)
        writer.write_json(filename, document)


def _remove(writer: RunWriter, filenames: list[str]) -> None:
    for filename in filenames:
        writer.file(filename).unlink(missing_ok=True)


def run_measures(measures: Sequence[Measure], writer: RunWriter, state: dict, *,
                 random_state: int, params: dict[str, dict], progress: Progress,
                 timings: dict, client: Any = None) -> dict[str, dict]:
    """Run ``measures`` (registry order) and return their outcomes in that order.

    Those declared ``beside`` run on a thread of their own from the start, the others in order on
    this one (see the module docstring; in turn above :data:`BESIDE_MAX_ROWS` rows of
    ``state["labels"]``, :data:`BESIDE_MAX_ROWS_MANY_CORES` on many cores); each outcome's
    seconds go into ``timings``. With a Dask ``client``, the fold fits of the measures run in
    order are tasks on its workers (:func:`aflite_core.represent.on_dask`), and the outcome of a
    measure that sent any says ``"engine": "dask"``.
    """
    outcomes: dict[str, dict] = {}
    state = {**state, "earlier": EarlierTables(f for m in measures for f in m.reads)}
    side = beside_measures(measures, len(state["labels"]), local=client is None)
    on_side = {m.name for m in side}
    with _Side(side, writer, state, random_state, params, progress, client) as beside:
        for measure in measures:
            if measure.name in on_side:
                continue
            beside.release_blas_if_done()
            span = progress.span(measure.name)
            progress.step(measure.name, f"computing {measure.label}", span[0])

            def report(fraction: float, message: str, measure: Measure = measure,
                       span: tuple[float, float] = span) -> None:
                progress.step(measure.name, message or measure.label,
                              span[0] + (span[1] - span[0]) * fraction)

            ctx = measure_context(state, measure, random_state,
                                  params.get(measure.name, {}), report)
            with on_dask(client) as tasks:
                outcomes[measure.name] = run_measure(measure, ctx, writer)
            _mark_engine(outcomes[measure.name], tasks)
            _finished(measure, outcomes[measure.name], progress, timings, span[1])
        outcomes.update(beside.wait())
    for measure in side:
        _finished(measure, outcomes[measure.name], progress, timings,
                  progress.span(measure.name)[1])
    return {m.name: outcomes[m.name] for m in measures}


def _mark_engine(outcome: dict, tasks: Any) -> None:
    """``"engine": "dask"`` in the outcome of a measure that sent tasks to the cluster."""
    if tasks is not None and tasks.tasks and outcome["status"] == "ok":
        outcome["engine"] = "dask"


def _finished(measure: Measure, outcome: dict, progress: Progress, timings: dict,
              at: float) -> None:
    if "seconds" in outcome:
        timings[measure.name] = outcome["seconds"]
    message = "done" if outcome["status"] == "ok" else f"{outcome['status']}: " + str(
        outcome.get("error", outcome.get("reason", ""))
    )
    progress.step(measure.name, message, at, status=outcome["status"])


class _Side:
    """The beside measures, one after another on one thread, with BLAS held at one thread
    while they run."""

    def __init__(self, measures: list[Measure], writer: RunWriter, state: dict,
                 random_state: int, params: dict[str, dict], progress: Progress,
                 client: Any = None) -> None:
        self.measures, self.writer, self.state = measures, writer, state
        self.random_state, self.params, self.progress = random_state, params, progress
        self.client = client
        self._pool: ThreadPoolExecutor | None = None
        self._future: Future | None = None
        self._blas: Any = None
        self._total = sum(hi - lo for lo, hi in map(progress.span, (m.name for m in measures)))
        self._work = 0.0  # the share of the bar their work is, done so far (before the knee)
        self._alone: tuple[float, float] | None = None  # (work, filled) when the others ended

    def __enter__(self) -> _Side:
        if self.measures:
            self._blas = blas_threads.limit(1)
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="measure-beside")
            self._future = self._pool.submit(self._run)
        return self

    def _filled(self, work: float) -> float:
        """The bar the beside measures filled once ``work`` of their spans' total is done:
        on the plan's two lines (:func:`~aflite_core.progress_plan.knee`: while the others
        run, each second of theirs fills a share of a second), or, once the others ended
        (:meth:`wait`), on the line from where they were then to the spans' end: what is left
        runs alone."""
        total = self._total
        if total <= 0:
            return work
        alone = self._alone
        if alone is None:
            return total * progress_plan.knee(work / total, *self.progress.knee)
        done, filled = alone
        if done >= total:
            return filled
        return filled + (total - filled) * (work - done) / (total - done)

    def _run(self) -> dict[str, dict]:
        try:
            return self._run_each()
        finally:
            self.progress.side_ended()

    def _run_each(self) -> dict[str, dict]:
        outcomes: dict[str, dict] = {}
        base = 0.0  # the bar's share the earlier beside measures filled
        for measure in self.measures:
            lo, hi = self.progress.span(measure.name)

            def report(fraction: float, message: str, measure: Measure = measure,
                       base: float = base, width: float = hi - lo) -> None:
                work = base + width * min(max(float(fraction), 0.0), 1.0)
                self._work = max(self._work, work)
                self.progress.side_step(measure.name, message or measure.label,
                                        self._filled(work))

            report(0.0, f"computing {measure.label} (beside the other measures)")
            ctx = measure_context(self.state, measure, self.random_state,
                                  self.params.get(measure.name, {}), report)
            with on_dask(self.client) as tasks:
                outcomes[measure.name] = run_measure(measure, ctx, self.writer)
            _mark_engine(outcomes[measure.name], tasks)
            base += hi - lo
        return outcomes

    def release_blas_if_done(self) -> None:
        """Between two measures: give BLAS its threads back once the side is done."""
        if self._blas is not None and self._future is not None and self._future.done():
            self._blas.restore_original_limits()
            self._blas = None

    def wait(self) -> dict[str, dict]:
        """The beside measures' outcomes, once done; the bar then counts them in order."""
        if self._future is None:
            return {}
        if not self._future.done():
            work = self._work
            self._alone = (work, self._filled(work))
            first = self.measures[0]
            self.progress.step(first.name, f"waiting for {first.label}",
                               self.progress.span(first.name)[0])
        outcomes = self._future.result()
        self.progress.side_done()
        return outcomes

    def __exit__(self, *exc: Any) -> None:
        if self._pool is not None:
            if exc[0] is not None:  # the other side stopped: stop this one at its next report
                self.progress.cancelled = True
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._blas is not None:
            self._blas.restore_original_limits()
            self._blas = None


@dataclasses.dataclass(frozen=True)
class StagePlan:
    """An audit's progress plan (:func:`stage_plan`).

    Attributes
    ----------
    spans : dict
        Stage -> its ``(start, end)`` of the bar, with this machine's pace.
    knee : tuple of float
        The beside measures' knee (:func:`aflite_core.progress_plan.beside_plan`: the share
        of their work done, and of their span filled, when the others end).
    planned : dict
        Stage -> its seconds of the bar before this machine's pace.
    pace_keys : dict
        Stage -> its key in :mod:`aflite_core.progress_pace`, for the stages run in order of
        a local audit (empty on a Dask cluster).
    cores, rows : int
        The cores the plan is for and the audited rows.
    """

    spans: dict[str, tuple[float, float]]
    knee: tuple[float, float]
    planned: dict[str, float]
    pace_keys: dict[str, str]
    cores: int
    rows: int


def stage_plan(dataset: Any, config: Any) -> StagePlan:
    """Each stage's part of the progress bar, in proportion to its expected time on the cores
    this process may use (:func:`aflite_core.progress_plan.core_factor`), with what the
    measures' caches lack (the cue tags of a dataset audited for the first time) and, for a
    local audit, the pace this machine's earlier audits showed
    (:mod:`~aflite_core.progress_pace`). On a Dask cluster the plan's two-core seconds stand
    as they are (its cores are not this process's), no cache is looked into (the workers tag
    their chunks) and no pace is used or learned."""
    local = config.backend != "dask"
    cores = available_cores() if local else 2
    n_rows = int(dataset.included_mask.sum())
    factor = {"representation": progress_plan.REPRESENTATION_FACTOR.get(config.representation,
                                                                        1.0)}
    stages = [(name, progress_plan.stage_per_100k(name, n_rows) * factor.get(name, 1.0))
              for name in ("representation", "aflite", "write")]
    chosen = [m for m in registry.measures() if m.name in config.measures]
    beside = [m.name for m in beside_measures(chosen, n_rows, local=local, cores=cores)]
    ahead = {m.name for m in ahead_measures(chosen, n_rows, cores=cores, local=local)}
    # the beside measures fill the last span: their progress adds to the bar (measure_runs);
    # work done ahead (cold caches) goes to the front stages (progress_plan.with_ahead)
    cost = {m.name: m.expected_cost(n_rows, config.measure_params.get(m.name),
                                    dataset=dataset if local else None) for m in chosen}
    warm = {m.name: m.expected_cost(n_rows, config.measure_params.get(m.name)) for m in chosen}
    stages += [(m.name, warm[m.name] if m.name in ahead else cost[m.name])
               for m in sorted(chosen, key=lambda m: m.name in beside)]
    early = sum(cost[n] - warm[n] for n in ahead)
    stages = progress_plan.with_ahead(stages, early, cores=cores)
    if config.report:
        stages.append(("report", progress_plan.stage_per_100k("report", n_rows)))
    seconds = {name: value * progress_plan.core_factor(name, cores) for name, value
               in progress_plan.expected_seconds(stages, n_rows).items()}
    keys = {}
    if local:
        rep = ("representation" if config.representation == "tfidf_svd"
               else f"representation:{config.representation}")
        for name in seconds:
            if name not in beside:
                keys[name] = (rep if name == "representation" else name) + (
                    "+ahead" if early > 0 and (name in progress_plan.FRONT_STAGES
                                               or name in ahead)
                    else "+cold" if cost.get(name, 0.0) != warm.get(name, 0.0) else "")
    pace = progress_pace.learned_factors(cores, n_rows) if keys else {}
    paced = {name: value * pace.get(keys.get(name, ""), 1.0) for name, value in seconds.items()}
    planned, _ = _with_beside(seconds, beside, chosen, n_rows, cores)
    paced, knee = _with_beside(paced, beside, chosen, n_rows, cores)
    return StagePlan(spans=progress_plan.stage_spans(paced), knee=knee, planned=planned,
                     pace_keys=keys, cores=cores, rows=n_rows)


def _with_beside(seconds: dict[str, float], beside: list[str], chosen: list[Measure],
                 n_rows: int, cores: int) -> tuple[dict[str, float], tuple[float, float]]:
    """``seconds`` with the beside measures' as the time they add, not the time they take,
    and their knee (:func:`~aflite_core.progress_plan.beside_plan`)."""
    if not beside:
        return dict(seconds), (1.0, 1.0)
    own = sum(seconds[name] for name in beside)
    others = sum(seconds[m.name] for m in chosen if m.name not in beside)
    added, *knee = progress_plan.beside_plan(own, others, n_rows, cores=cores)
    scale = added / own if own > 0 else 1.0
    return ({name: value * scale if name in beside else value
             for name, value in seconds.items()}, (knee[0], knee[1]))


def learn_pace(plan: StagePlan, progress: Progress, failed: set[str]) -> dict[str, float]:
    """Record a finished audit's pace (:func:`aflite_core.progress_pace.record_pace`): the
    stages of ``plan.pace_keys`` that ran alone (no beside measure working meanwhile), not
    those in ``failed`` (measures that were skipped or failed: their seconds say nothing of
    their pace); their seconds from ``progress``. Returns the log ratios recorded (empty:
    none, or the pace is off)."""
    if not plan.pace_keys or progress.last_at is None or not progress.began:
        return {}
    first, last = min(progress.began.values()), progress.last_at
    side = progress.side_times
    window = (side[0], side[1] if side[1] is not None else last) if side[0] else None
    planned, taken = {}, {}
    for stage, (start, end) in progress.stage_intervals().items():
        key = plan.pace_keys.get(stage)
        if key is None or stage in failed:
            continue
        if window is not None and start < window[1] and end > window[0]:
            continue
        planned[key], taken[key] = plan.planned[stage], end - start
    return progress_pace.record_pace(planned, taken, planned_total=sum(plan.planned.values()),
                                     taken_total=last - first, cores=plan.cores,
                                     n_rows=plan.rows)
