"""The measure registry: one object per before/after measure, found by looking at the folder.

A measure is a module of :mod:`aflite_core.measures` that defines ``MEASURE``, a
:class:`Measure`. The pipeline, the run-folder reader, the exports, the HTML report, the
dashboard's parameter form, its progress stage names and its Report page all loop over
:func:`measures`, so adding a measure means adding one module (and its test)::

    # aflite_core/measures/my_measure.py
    def compute(ctx: MeasureContext) -> MeasureResult: ...
    def tables(run) -> dict[str, pd.DataFrame]: ...
    MEASURE = Measure(name="my_measure", label="My measure", compute=compute,
                      files=("my_measure.parquet",), tables=tables)

``compute`` gets a :class:`MeasureContext` (the dataset, Φ, the AFLite result, the options)
and returns a :class:`MeasureResult` (tables and JSON documents by file name, plus a few
summary values); it never writes files itself. ``tables`` turns the stored files back into the
before/after tables a reader sees, drawn alike by the HTML report and the dashboard.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

import aflite_core.measures as package
from aflite_core.errors import MeasureSkipped  # re-exported: what a measure raises to skip
from aflite_core.io import RowTexts, compact_categorical, str_codes
from aflite_core.represent import is_partitioned
from aflite_core.schema import Option, check_options  # Option re-exported: the one schema

__all__ = [
    "Measure",
    "MeasureContext",
    "MeasureResult",
    "MeasureSkipped",
    "Option",
    "default_names",
    "get",
    "measures",
    "names",
]


def _checked_rows(rows: Any, n: int) -> np.ndarray:
    """``rows`` as int64 positions below ``n`` (an IndexError otherwise, as indexing gives)."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        raise IndexError(f"rows: expected positions in [0, {n}), got [{rows.min()}, "
                         f"{rows.max()}]")
    return rows


@dataclass
class MeasureContext:
    """Everything a measure may read, computed once by the pipeline.

    Row-aligned arrays follow the representation's rows (the dataset's included rows, in
    file order); ``filterable`` marks the rows AFLite filtered (not warm-up), and ``keep`` the
    retained ones among those.

    Attributes
    ----------
    dataset : AuditDataset
    representation : Representation
    filterable : np.ndarray of bool
        Over the representation rows.
    labels : np.ndarray
        Label of every representation row.
    keep : np.ndarray of bool
        Over the filterable rows: retained by AFLite.
    scores : pandas.DataFrame
        ``scores.parquet`` as it will be written.
    retained_ids : np.ndarray
        Row ids of the retained rows.
    random_state : int
        The run's seed.
    params : dict
        This measure's options (``AuditConfig.measure_params[name]``).
    progress : callable
        ``progress(fraction, message)`` with ``fraction`` in [0, 1] of this measure; it raises
        the pipeline's cancellation when the user cancels.
    refit : callable, optional
        ``refit(random_state) -> keep`` reruns AFLite with the run's parameters and another
        seed (same plan and groups) and returns its keep mask over the filterable rows: for
        measures that report a spread over AFLite seeds.
    datamap : pandas.DataFrame, optional
        Over the filterable rows: ``confidence``, ``variability`` and ``n_heldout`` of
        AFLite's held-out predictions, in the round of ``predictability`` (see
        :mod:`aflite_core.filter._datamap`); None when the run did not record them.
    datamap_grouped : bool, default True
        The held-out models behind ``datamap`` never trained on a row's group: AFLite's
        partitions drew whole groups, a question is the unit, or the data has no groups.
        False when they drew rows of grouped data (``group_partitions="off"``, or a group
        too large for ``"auto"``): a row may then be scored by memorising a group-mate.
    earlier : dict of str to DataFrame
        Tables of the measures that succeeded earlier in this audit, by run file
        (``"label_issues.parquet"``): those some chosen measure ``reads``
        (:attr:`Measure.reads`); read-only.
    group_codes : np.ndarray, optional
        ``dataset.group_codes()`` over the representation rows when the pipeline already
        made them (AFLite's partitions drew them): :attr:`groups` reads them instead of a
        copy of its own (8 bytes a row); read-only.
    """

    dataset: Any
    representation: Any
    filterable: np.ndarray
    labels: np.ndarray
    keep: np.ndarray
    scores: pd.DataFrame
    retained_ids: np.ndarray
    random_state: int
    params: dict = field(default_factory=dict)
    progress: Callable[[float, str], None] = lambda fraction, message: None
    refit: Callable[[int], np.ndarray] | None = None
    datamap: pd.DataFrame | None = None
    datamap_grouped: bool = True
    earlier: dict = field(default_factory=dict)
    group_codes: np.ndarray | None = None

    # -- views over the filterable rows
    def _filterable_rows(self, values: Any) -> np.ndarray:
        """``values`` (over the representation rows) at the filterable rows, read-only: a
        view of them when every row is filterable (the default audit), not a copy."""
        values = np.asarray(values)
        rows = values.view() if self.filterable.all() else values[self.filterable]
        rows.flags.writeable = False
        return rows

    @property
    def X(self) -> np.ndarray:
        """Φ of the filterable rows, read-only.

        When every row is filterable (no warm-up rows: the default audit) this is Φ itself
        as a read-only view, not a copy: at 1M rows x 256 a copy is 1 GB, and it was the
        KNN measure's peak (4.19 GB of a 1M-row audit)."""
        X = self.representation.X
        if is_partitioned(X):  # Φ's rows on the workers: a view, rows fetched as read
            return X if self.filterable.all() else X.select(self.filterable)
        if self.filterable.all():
            view = X.view()
            view.flags.writeable = False
            return view
        part = X[self.filterable]
        part.flags.writeable = False
        return part

    @property
    def y(self) -> np.ndarray:
        """Labels of the filterable rows (read-only; a view when all rows are)."""
        return self._filterable_rows(self.labels)

    @property
    def row_ids(self) -> np.ndarray:
        """Row ids of the filterable rows (read-only; a view when all rows are)."""
        return self._filterable_rows(self.representation.row_ids)

    @property
    def splits(self) -> np.ndarray | None:
        """Split-column values of the filterable rows, or None without a split column."""
        splits = self.dataset.splits()
        return None if splits is None else np.asarray(splits)[self.filterable]

    @property
    def groups(self) -> np.ndarray | None:
        """Group of each filterable row as an int64 code (equal codes: one group; rows of a
        group stay on one side of every seeded split: the question of a multiple-choice row,
        an NLI premise), or None. Codes, not the group names: every split reads groups as a
        partition (``splits.group_codes``), and the names were a str per row (a premise's
        text, or a component's number as a fixed-width str). Read-only."""
        codes = self.group_codes if self.group_codes is not None else self.dataset.group_codes()
        return None if codes is None else self._filterable_rows(codes)

    def score_rows(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Position in ``scores`` of each filterable row (of ``rows`` among them: positions;
        -1: not there). The pipeline's scores hold every frame row in frame order, so these
        are positions, checked against the row ids (looked up by id otherwise): no index of
        the scores by row id."""
        at = self._score_positions()
        if at is None:  # the scores' rows are the filterable rows, in order
            n = len(self.scores)
            return np.arange(n) if rows is None else _checked_rows(rows, n)
        return at if rows is None else at[np.asarray(rows, dtype=np.int64)]

    def _score_positions(self, included: bool = False) -> np.ndarray | None:
        """:meth:`score_rows` of every filterable row (with ``included``, of every
        representation row: the included rows, warm-up too), or None when they are the
        scores' own rows in order (every row filterable: no array of 8 bytes a row)."""
        mask = self.dataset.included_mask
        keep = None if included or self.filterable.all() else self.filterable
        ids = self.scores["row_id"].to_numpy()
        row_ids = np.asarray(self.representation.row_ids if included else self.row_ids)
        if len(ids) == len(mask):
            if mask.all() and keep is None:  # every row: no copies to compare
                if np.array_equal(ids, row_ids):
                    return None
            else:
                at = np.flatnonzero(mask)
                at = at if keep is None else at[keep]
                if np.array_equal(ids[at], row_ids):
                    return at
        return pd.Index(ids).get_indexer(pd.Index(row_ids, dtype=ids.dtype))

    def scores_categorical(self, column: str, rows: np.ndarray | None = None, *,
                           included: bool = False) -> pd.Categorical | None:
        """``scores[column]`` (``status``, ``label``) of the filterable rows (of ``rows`` among
        them; with ``included``, of the representation's rows: the map's) as
        ``pd.Categorical`` of their strings makes it (the values present, sorted), from the
        scores' own 1-byte codes: no object nor intp code per row. None when the column is
        not categorical of str or a row has no value (the caller converts strings)."""
        values = self.scores.get(column)
        if values is None or not isinstance(values.dtype, pd.CategoricalDtype) or not all(
                isinstance(c, str) for c in values.cat.categories):
            return None
        codes = values.cat.codes.to_numpy()
        at = self._score_positions(included)
        if at is None:
            if rows is not None:
                codes = codes[_checked_rows(rows, len(codes))]
        else:
            at = at if rows is None else at[np.asarray(rows, dtype=np.int64)]
            if (at < 0).any():
                return None
            codes = codes[at]
        if (codes < 0).any():
            return None
        return compact_categorical(codes, values.cat.categories.to_numpy(dtype=object))

    def label_codes(self, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The labels of the filterable rows (of ``rows`` among them) as
        ``str_codes(y[rows])`` gives them, ``(codes, classes)``: ``classes`` the labels
        present, sorted (a str array), ``classes[codes]`` every row's; the codes the smallest
        integers (from the scores' label codes: a byte a row, not two intp arrays)."""
        labels = self.scores_categorical("label", rows)
        if labels is None:
            codes, classes = str_codes(self.y if rows is None
                                       else self.y[np.asarray(rows, dtype=np.int64)])
        else:
            codes, classes = labels.codes, labels.categories.to_numpy(dtype=str)
        return codes.astype(np.min_scalar_type(max(len(classes) - 1, 0))), classes

    def statuses(self, rows: np.ndarray | None = None) -> np.ndarray:
        """``scores``' status of each filterable row (of ``rows`` among them: positions), as
        an object array holding one str per status (``<NA>`` for a row not in ``scores``):
        no Python str per row."""
        status = self.scores_categorical("status", rows)
        if status is not None:
            return status.categories.to_numpy(dtype=object)[status.codes]
        at = self.score_rows(rows)
        codes, classes = str_codes(self.scores["status"])  # the rows' codes, then strs
        status = classes.astype(object)[codes[at]]
        status[at < 0] = str(pd.NA)  # a row missing from scores
        return status

    def texts(self) -> tuple[list[str], list[str] | None]:
        """Hypotheses and premises (None for single-text data) of the filterable rows."""
        keep = self.filterable
        hyps = [h for h, f in zip(self.dataset.hypotheses(), keep, strict=True) if f]
        prems = self.dataset.premises()
        if prems is not None:
            prems = [p for p, f in zip(prems, keep, strict=True) if f]
        return hyps, prems

    def hypothesis_texts(self) -> Sequence[str]:
        """Hypotheses of the filterable rows as a lazy sequence
        (:class:`~aflite_core.io.RowTexts`): the texts of :meth:`texts`, made a
        chunk at a time (``take(rows)`` for a sample), without a list of every row's."""
        return self._row_texts(self.dataset.columns.hypothesis)

    def premise_texts(self) -> Sequence[str] | None:
        """Premises of the filterable rows as :meth:`hypothesis_texts` gives hypotheses, or
        None for single-text data."""
        column = self.dataset.columns.premise
        return None if column is None else self._row_texts(column)

    def _row_texts(self, column: str) -> Sequence[str]:
        dataset = self.dataset
        included = dataset.included_mask
        # every row (the default audit): no positions (8 bytes a row, for each column)
        positions = (None if included.all() and self.filterable.all()
                     else np.flatnonzero(included)[self.filterable])
        return RowTexts(dataset.text_column(column), positions)

    def callback(self) -> Callable[[dict], None]:
        """A ``callback(info)`` for core functions that report ``fraction``/``message``."""

        def callback(info: dict) -> None:
            fraction = float(info.get("fraction", 0.0) or 0.0)
            self.progress(min(max(fraction, 0.0), 1.0), str(info.get("message", "")))

        return callback


@dataclass
class MeasureResult:
    """What a measure computed, by file name; the pipeline writes it into the run folder.

    Attributes
    ----------
    tables : dict
        File name (``.parquet``) -> DataFrame.
    documents : dict
        File name (``.json``) -> JSON-able value.
    info : dict
        Small values for ``summary.json["measures"][name]`` (parameters used, an outcome).
    astype : dict
        File name -> the types some of its table's columns are written as
        (:meth:`~aflite_core.runs.RunWriter.write_parquet`'s ``astype``): a table may
        hold a column narrower than its file does, e.g. a str per row as categorical codes
        (1 byte a row, not an Arrow string of 12-20), written as the strings.
    """

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    documents: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    astype: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Measure:
    """One before/after measure of a run.

    Attributes
    ----------
    name : str
        Identifier (``AuditConfig.measures``, ``--measures``, progress stage name).
    label : str
        Human name (parameter form, progress, report headings).
    compute : callable
        ``compute(ctx: MeasureContext) -> MeasureResult``.
    files : tuple of str
        Files the measure writes into the run folder.
    default : bool
        On in a default audit.
    order : int
        Position among the measures (lower runs and is shown first).
    description : str
        One or two sentences for the report and the form's help.
    tables : callable, optional
        ``tables(run) -> dict[title, DataFrame]``: the before/after tables a reader sees,
        from the stored files (``run.read_parquet(name)`` / ``run.read_json(name)``).
    exports : dict
        Export name -> file name, for ``python -m aflite_core export --what NAME``.
    options : tuple of Option
        Every option ``compute`` reads from ``ctx.params`` (:class:`aflite_core.schema.Option`:
        the CLI flags, the form's widgets, the validation and the docs table are made from
        them); ``ctx.params`` holds each of them, its default filled in when not given.
    cost : float or callable
        Expected seconds per 100,000 audited rows on two cores (``bench_pipeline.py``): the
        measure's share of the progress bar, hence of the ETA (see
        :mod:`aflite_core.progress_plan`); a callable gets the number of audited rows (for a
        measure that samples above some size), and the measure's options as a second
        argument when it takes two (for a measure whose options change its cost, such as
        the map's method). :meth:`expected_cost` calls it.
    cold_cost : callable, optional
        ``cold_cost(dataset, params) -> float``: the seconds per 100,000 rows (two cores) the
        measure adds to :attr:`cost` on this dataset because its on-disk caches do not hold
        it yet (0 when they do): the cue measure's first tagging of a text column is ten
        times its cached run. :meth:`expected_cost` adds it when given the dataset.
    inputs : tuple of str
        Parameters the user must supply that the parameter form cannot offer (files,
        e.g. ``("challenges",)``); the form lists such a measure as unavailable and says
        where to run it.
    row_columns : callable, optional
        ``row_columns(run) -> DataFrame`` indexed by ``row_id``: per-row values the measure
        adds to the rows table the dashboard's Explore page shows, sorts and filters
        (:func:`aflite_core.runs.views.rows_table`); rows it does not cover get NaN.
    figures : callable, optional
        ``figures(run) -> list of plotly Figure``: the measure's charts, drawn once from the
        stored files; the HTML report and the dashboard's Report page both show what
        :meth:`draw` returns (in :mod:`aflite_core.chart_style`'s look), so a measure with a
        chart is its module and its test.
    beside : bool
        Runs on a thread of its own beside the other measures instead of in turn
        (:mod:`aflite_core.measure_runs`): for a measure whose long part keeps one core busy
        without the GIL (the map's layout), so the other core is not idle meanwhile. Its
        results must not depend on the other measures (it cannot ``read`` any).
    reads : tuple of str
        Run files of other measures this one reads from :attr:`MeasureContext.earlier`
        when they ran before it (lower ``order``) and succeeded (the data map reads
        ``label_issues.parquet``); the audit keeps only these tables in memory. A measure's
        results depend on no other measure's but these.
    ahead : callable, optional
        ``ahead(dataset, params, stop)``: work on the loaded data alone that the measure's
        ``compute`` would do first, started beside Φ and the filter (whose cores they leave
        idle) and kept where ``compute`` finds it (an on-disk cache), so that ``compute``
        returns the same results whether it ran or not; it returns when ``stop``
        (a :class:`threading.Event`) is set (:func:`aflite_core.measure_runs.work_ahead`).
        On a Dask cluster it runs inside :func:`aflite_core.represent.on_dask`
        (:func:`~aflite_core.represent.dask_folds` says so): tasks on the workers, there.
        The cue measure tags its texts ahead.
    warm : callable, optional
        ``warm() -> end``: start, before the data is read, what :attr:`ahead` will need, on a
        core the load leaves idle (the cue measure: the child process that tags ahead, loading
        NLTK and the tagger meanwhile); ``end()`` ends it when the audit does no work ahead
        (:func:`aflite_core.measure_runs.warm_ahead`). What it starts changes no result.
    """

    name: str
    label: str
    compute: Callable[[MeasureContext], MeasureResult]
    files: tuple[str, ...]
    default: bool = True
    order: int = 100
    description: str = ""
    tables: Callable[[Any], dict[str, pd.DataFrame]] | None = None
    exports: Mapping[str, str] = field(default_factory=dict)
    options: tuple[Option, ...] = ()
    cost: float | Callable[..., float] = 1.0
    cold_cost: Callable[[Any, Mapping[str, Any]], float] | None = None
    inputs: tuple[str, ...] = ()
    row_columns: Callable[[Any], pd.DataFrame] | None = None
    figures: Callable[[Any], list[Any]] | None = None
    beside: bool = False
    reads: tuple[str, ...] = ()
    ahead: Callable[[Any, Mapping[str, Any], Any], None] | None = None
    warm: Callable[[], Callable[[], None]] | None = None

    def expected_cost(self, n_rows: int, params: Mapping[str, Any] | None = None, *,
                      dataset: Any = None) -> float:
        """Expected seconds per 100,000 rows of this measure on ``n_rows`` rows with the
        options ``params`` (the form's defaults where not given); with ``dataset``, what its
        caches lack adds :attr:`cold_cost`."""
        options = {**self.defaults(n_rows), **(params or {})}
        if not callable(self.cost):
            cost = float(self.cost)
        elif len(inspect.signature(self.cost).parameters) >= 2:
            cost = float(self.cost(n_rows, options))
        else:
            cost = float(self.cost(n_rows))
        if dataset is not None and self.cold_cost is not None:
            cost += max(float(self.cold_cost(dataset, options)), 0.0)
        return cost

    def defaults(self, n_rows: int) -> dict[str, Any]:
        """The options' default values for a dataset of ``n_rows`` audited rows."""
        return {o.name: o.value_for(n_rows) for o in self.options}

    def check_params(self, params: Mapping[str, Any], *, n_rows: int | None = None
                     ) -> dict[str, Any]:
        """``params`` checked against :attr:`options` (an unknown key, or a value out of its
        declaration, is refused naming it: ``measure_params['knn']['ks']: expected ...``);
        with ``n_rows``, every option not given filled in with its default for that many
        rows, as ``compute`` reads them from ``ctx.params``."""
        return check_options(self.options, params, where=f"measure_params[{self.name!r}]",
                             n_rows=n_rows)

    def draw(self, run: Any) -> list[Any]:
        """The measure's figures of ``run`` (empty when it has none or wrote nothing)."""
        if self.figures is None or not any(run.has(f) for f in self.files):
            return []
        return list(self.figures(run))

    def before_after(self, run: Any) -> dict[str, pd.DataFrame]:
        """The measure's before/after tables of ``run`` (empty when it wrote nothing)."""
        if self.tables is None or not any(run.has(f) for f in self.files):
            return {}
        return self.tables(run)


def stored_summary(run: Any, key: str, filename: str, columns: set[str]
                   ) -> tuple[Any, pd.DataFrame | None]:
    """A measure's JSON document (its file, else the summary's entry ``key``) and its
    ``summary`` records as a table, or None when they do not hold ``columns``.

    The measures that keep a JSON summary (duplicates, inoculation) draw their figures from
    it, and the HTML report writes its sections from it.
    """
    data = run.read_json(filename)
    if data is None:
        data = run.summary.get(key)
    records = data.get("summary") if isinstance(data, Mapping) else None
    if not (isinstance(records, list) and records and isinstance(records[0], Mapping)
            and columns <= set(records[0])):
        return data, None
    return data, pd.DataFrame(records)


_EXTRA: dict[str, Measure] = {}


@functools.lru_cache(maxsize=1)
def _discovered() -> tuple[Measure, ...]:
    found: dict[str, Measure] = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_") or info.name == "registry":
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        measure = getattr(module, "MEASURE", None)
        if isinstance(measure, Measure):
            if measure.name in found:
                raise RuntimeError(f"two measures are called {measure.name!r}")
            found[measure.name] = measure
    return tuple(found.values())


def register(measure: Measure) -> Measure:
    """Add a measure defined outside :mod:`aflite_core.measures` (a plug-in); return it."""
    if not isinstance(measure, Measure):
        raise TypeError(f"measure: expected a Measure, got {type(measure).__name__}")
    _EXTRA[measure.name] = measure
    return measure


def measures() -> tuple[Measure, ...]:
    """Every registered measure, in run order."""
    every = {m.name: m for m in _discovered()}
    every.update(_EXTRA)
    return tuple(sorted(every.values(), key=lambda m: (m.order, m.name)))


def names() -> tuple[str, ...]:
    """Names of every measure, in run order."""
    return tuple(m.name for m in measures())


def default_names() -> tuple[str, ...]:
    """Names of the measures on in a default audit."""
    return tuple(m.name for m in measures() if m.default)


def measure_caveats(run: Any, name: str) -> list[str]:
    """The warnings measure ``name`` wrote into the run's ``summary.json`` (its
    ``info["warnings"]``): the one place the HTML report, the Markdown card, the Report page
    and the CLI summary take a measure's caveats from, to print beside its figures."""
    record = ((getattr(run, "summary", None) or {}).get("measures") or {}).get(name)
    warnings = record.get("warnings") if isinstance(record, dict) else None
    return [" ".join(str(w).split()) for w in warnings] if isinstance(warnings, list) else []


def get(name: str) -> Measure:
    """The measure called ``name``.

    Raises
    ------
    ValueError
        If no measure has that name (the message lists them).
    """
    for measure in measures():
        if measure.name == name:
            return measure
    raise ValueError(f"measure: expected one of {names()}, got {name!r}")
