"""``run_audit``: dataset -> Φ -> AFLite -> measures -> one run folder.

The representation and AFLite are essential: if either fails, the run fails and no
folder is left. Each measure (cue statistics, KNN distances, projection, baselines,
duplicates) is optional (``AuditConfig.measures``); a measure that fails is recorded in
``summary.json`` under ``measures`` with its error message and the run still completes.

Progress goes to ``callback(event)`` with ``stage``, ``message`` and ``fraction`` (0..1
of the whole run, never decreasing); AFLite rounds add the round keys of
:class:`aflite_core.filter.AFLite`. Returning ``True`` from the callback cancels the run:
:class:`AuditCancelled` is raised and nothing is left on disk.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import os
import platform
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aflite_core import __version__
from aflite_core._validation import available_cores
from aflite_core.audit_client import audit_client
from aflite_core.config import (  # noqa: F401 - re-exported: the pipeline's public API
    REPRESENTATION_PARAMS,
    REPRESENTATIONS,
    STRATEGIES,
    AuditConfig,
    resolve_size,
    suggest_config,
)
from aflite_core.errors import (
    AuditCancelled,  # noqa: F401 - re-exported: its public home
)
from aflite_core.filter import FilterPlan, filter_units, plan_filter, select_rows
from aflite_core.heap_trim import release_free_heap
from aflite_core.io import LINKED_TEXT, label_factors, shared_strings, short_repr, str_codes
from aflite_core.measure_runs import Progress as _Progress
from aflite_core.measure_runs import learn_pace, run_measures, stage_plan, work_ahead
from aflite_core.measures import registry
from aflite_core.represent import is_partitioned, on_cluster, phi_folder_for, phi_on_disk
from aflite_core.runs import (
    REPORT_FILE,
    STATUSES,
    RunWriter,
    default_run_name,
    unique_run_name,
    utc_now_iso,
)
from aflite_core.scores import build_scores

#: Most distinct labels an audit accepts: each AFLite round holds ``m x labels x d`` class
#: sums (64 x 1,000 x 256 float64 = 131 MB); more labels usually means a wrong label column.
MAX_LABELS = 1000

EventCallback = Callable[[dict], Any]


def check_labels(dataset) -> None:
    """Refuse data AFLite cannot filter: fewer than 2 labels, more than :data:`MAX_LABELS`
    labels, or a label with a single row.

    Checked on the audited (included) rows before any work starts, so the message can
    name the file, the label column and the offending labels and rows.

    Raises
    ------
    ValueError
        Naming the dataset, the label column, the labels concerned and what to do.
    """
    codes, uniq = str_codes(dataset.label_objects())  # np.unique's, no str copy per row
    column = dataset.columns.label
    counts = np.bincount(codes, minlength=len(uniq))
    n = len(codes)
    if len(uniq) < 2:
        only = short_repr(str(uniq[0])) if len(uniq) else "(none)"
        raise ValueError(
            f"{dataset.name}: cannot audit: all {n:,} audited rows have the label {only}, and "
            f"AFLite needs at least 2 labels; check that {column!r} is the label column"
        )
    if len(uniq) > MAX_LABELS:
        raise ValueError(
            f"{dataset.name}: cannot audit: the label column {column!r} has {len(uniq):,} "
            f"distinct values for {n:,} audited rows; AFLite's models learn one mean per label "
            f"per partition and are limited to {MAX_LABELS:,} labels: check that {column!r} is "
            "the label column, or group its values into fewer labels"
        )
    singles = uniq[counts == 1]
    if len(singles):
        ids, labels = dataset.row_ids(), uniq[codes]
        wanted = set(singles[:5].tolist())
        first = {lab: rid for lab, rid in zip(labels.tolist(), ids.tolist(), strict=True)
                 if lab in wanted}  # fmt: skip
        shown = ", ".join(f"{short_repr(str(lab))} (row_id {first[str(lab)]!r})"
                          for lab in singles[:5])  # fmt: skip
        more = f" and {len(singles) - 5:,} more" if len(singles) > 5 else ""
        many = (
            f"; the column has {len(uniq):,} distinct values for {n:,} rows: is it really the "
            "label?"
            if len(uniq) > n / 2
            else ""
        )
        raise ValueError(
            f"{dataset.name}: cannot audit: {len(singles):,} label(s) have a single audited row: "
            f"{shown}{more}; AFLite needs at least 2 rows per label: relabel or remove those "
            f"rows, or check that {column!r} is the label column{many}"
        )


# --------------------------------------------------------------------------- helpers


def library_versions() -> dict[str, str]:
    """Versions recorded in ``summary.json``."""
    versions = {"python": platform.python_version(), "aflite_core": __version__}
    for module, key in (("numpy", "numpy"), ("sklearn", "scikit-learn"), ("pandas", "pandas"),
                        ("pyarrow", "pyarrow"), ("scipy", "scipy")):  # fmt: skip
        try:
            versions[key] = importlib.import_module(module).__version__
        except ImportError:  # pragma: no cover - all are requirements
            versions[key] = "missing"
    return versions


def _counts(codes: np.ndarray, names: np.ndarray) -> dict[str, int]:
    """Rows per label (``names[codes]``, names sorted), most first: np.unique's counts."""
    counts = np.bincount(codes, minlength=len(names))
    present = np.flatnonzero(counts)
    order = present[np.argsort(-counts[present], kind="stable")]
    return {str(names[i]): int(counts[i]) for i in order}


def _history_records(history: Any) -> list[dict]:
    if history is None:
        return []
    if isinstance(history, pd.DataFrame):
        return history.to_dict(orient="records")
    return list(history)


# --------------------------------------------------------------------------- measures


#: Optional measures ``run_audit`` knows, in the order they run (see the registry).
MEASURES = registry.names()
#: The measures of a default audit.
DEFAULT_MEASURES = registry.default_names()


# --------------------------------------------------------------------------- main entry


def run_audit(
    dataset,
    config: AuditConfig | None = None,
    *,
    runs_root: str | os.PathLike,
    name: str | None = None,
    callback: EventCallback | None = None,
    overwrite: bool = False,
) -> Path:
    """Audit ``dataset`` and write one complete run folder.

    Parameters
    ----------
    dataset : AuditDataset
        From :func:`aflite_core.io.datasets.load_dataset`.
    config : AuditConfig, optional
        Parameters (default: ``AuditConfig()``). A size left ``None`` is scaled to the rows
        (or questions) the filter sees (:meth:`AuditConfig.scaled`), as ``suggest_config``
        scales it.
    runs_root : path
        Folder holding the runs; created if missing.
    name : str, optional
        Run name, sanitised (see :func:`aflite_core.runs.folder.sanitize_run_name`). Default:
        derived from the data name, the key parameters and the UTC time, made unique.
    callback : callable, optional
        Receives progress events (see the module docstring); returning ``True`` cancels.
    overwrite : bool, default False
        Replace an existing run of the same name (only with an explicit ``name``).

    Returns
    -------
    pathlib.Path
        The completed run folder.

    Raises
    ------
    AuditCancelled
        If the callback asked to stop (nothing is left on disk).
    ValueError, TypeError
        For invalid parameters or data (e.g. a single label, ``target_size`` too large).
    FileExistsError
        If a run called ``name`` exists and ``overwrite`` is False.

    Examples
    --------
    >>> import tempfile
    >>> from aflite_core import AuditConfig, load_dataset, load_run, run_audit
    >>> from aflite_core.data import SAMPLE
    >>> sample = load_dataset(SAMPLE)
    >>> small = load_dataset(sample.frame.head(600).reset_index(), name="small.csv")
    >>> config = AuditConfig(target_size=300, n_partitions=8, measures=(), report=False,
    ...                      random_state=0)
    >>> path = run_audit(small, config, runs_root=tempfile.mkdtemp(), name="toy")
    >>> path.name, load_run(path).sizes["retained"]
    ('toy', 393)
    """
    config = (config or AuditConfig()).validate()
    check_labels(dataset)
    config = config.scaled(filter_units(dataset, split_policy=config.split_policy,
                                        instance=config.instance))
    plan = stage_plan(dataset, config)
    progress = _Progress(callback, plan.spans, plan.knee)
    created = utc_now_iso()
    generated = name is None  # a generated name never fails: a taken one gets a suffix
    if generated:
        name = unique_run_name(runs_root, default_run_name(dataset.name, config.to_dict()))
    timings: dict[str, float] = {}
    start_all = time.perf_counter()
    replace = overwrite and not generated
    chosen = [m for m in registry.measures() if m.name in config.measures]
    with _fewer_collections(int(dataset.included_mask.sum())), \
            RunWriter(runs_root, name, overwrite=replace, unique=generated) as writer, \
            audit_client(config) as client, \
            work_ahead(chosen, dataset, config.measure_params, cores=available_cores(),
                       client=client):
        # the first event names the temporary folder: a supervisor whose worker process is
        # killed removes it (a worker that stops normally removes it itself)
        progress.step("representation", f"building the {config.representation} "
                      "representation", progress.span("representation")[0],
                      temp_folder=str(writer.tmp))
        # AFLite and the measures' fold fits share the audit's one client (and its cluster)
        on_client = config if client is None else dataclasses.replace(config, scheduler=client)
        rep, filtered, target, shared = _represent_and_filter(dataset, on_client, progress,
                                                              timings, writer.tmp)
        _write_rows(writer, dataset, shared["scores"], progress, timings, rep)
        # each chosen measure, its progress span weighted by its cost; those declared beside
        # on a thread of their own; with a client, the others' fold fits on its workers
        measures = run_measures(chosen, writer, shared, random_state=config.random_state,
                                params=config.measure_params, progress=progress,
                                timings=timings, client=client)
        if is_partitioned(rep.X):  # the workers may free Φ's rows now (or its file goes)
            if on_cluster(rep.X):
                rep.params["whole_gathers"] = rep.X.whole_gathers
            rep.X.release()
        progress.step("report", "writing summary", progress.span("report")[0])
        summary = _summary(dataset, config, rep, filtered, shared["scores"], created,
                           measures)
        summary["engines"] = stage_engines(config, filtered, measures, rep, dataset)
        summary["timings"] = {**timings, "total": round(time.perf_counter() - start_all, 3)}
        writer.write_summary(summary)
        failed = {name for name, outcome in measures.items() if outcome["status"] != "ok"}
        del rep, filtered, shared, measures
        if config.report:
            # the report reads the run folder: the per-row vectors held so far not under its
            # peak (a full collection: 0.18 s at 100,000 rows, serial, so only before a report)
            gc.collect()
            release_free_heap()
            progress.step("report", "writing the HTML report", progress.span("report")[0])
            t0 = time.perf_counter()
            _write_report(writer, summary, progress.sub("report", progress.span("report")))
            timings["report"] = round(time.perf_counter() - t0, 3)
            summary["timings"] = {**timings, "total": round(time.perf_counter() - start_all, 3)}
            writer.write_summary(summary)
        progress.step("write", "run complete", 1.0)
    learn_pace(plan, progress, failed)  # this machine's pace, for the next audit's bar
    return writer.path


def stage_engines(config: AuditConfig, filtered: _Filtered, measures: dict,
                  representation: Any = None, dataset: Any = None) -> dict[str, str]:
    """Where each stage ran: ``"dask"`` (tasks on the scheduler) or ``"local"``. On Dask so
    far: shards read by the CLI's workers (``dataset.read_by``), ``tfidf_svd`` (its params
    say ``"engine": "dask"``), row-level AFLite, and the measures whose outcome says
    ``"engine": "dask"`` (fold fits, KNN's search, the map's placement, the cue table)."""
    on_dask = (config.backend == "dask" and config.filter == "aflite"
               and filtered.plan.questions is None)
    params = getattr(representation, "params", None) or {}
    engines = {"read": getattr(dataset, "read_by", "local"),
               "representation": params.get("engine", "local"),
               "aflite": "dask" if on_dask else "local", "write": "local"}
    engines.update({name: outcome.get("engine", "local") for name, outcome in measures.items()
                    if outcome.get("status") == "ok"})
    if config.report:
        engines["report"] = "local"
    return engines


def _represent_and_filter(dataset, config: AuditConfig, progress: _Progress, timings: dict,
                          folder: Path) -> tuple[Any, _Filtered, int, dict]:
    """Build Φ (kept in ``folder`` from 250,000 rows: ``represent.phi_folder_for``), run AFLite;
    return ``(representation, filtered, target, shared state)``.

    The shared state is what every measure's :class:`MeasureContext` is built from.
    """
    progress.step("representation", f"building the {config.representation} representation",
                  progress.span("representation")[0])
    t0 = time.perf_counter()
    phi_folder = phi_folder_for(folder, int(dataset.included_mask.sum()))  # read by blocks
    rep = _build_representation(dataset, config, progress, phi_folder)
    if phi_folder and type(rep.X) is np.ndarray and phi_folder_for(folder, *rep.X.shape):
        rep.X = phi_on_disk(rep.X, phi_folder)  # not tfidf_svd's: Φ moves there now
    release_free_heap()  # the SVD's buffers: not under AFLite's peak (heap_trim)
    timings["representation"] = round(time.perf_counter() - t0, 3)
    progress.step("representation", f"representation ready: {rep.X.shape[1]} features",
                  progress.span("representation")[1])

    # each label's str object shared by its rows (np.asarray(..., dtype=object) made one
    # per row, kept for the whole audit: 20 MB at 300k rows, about 0.33 GB at 5M)
    y = dataset.label_objects()
    filt = ~np.asarray(rep.warmup_mask, dtype=bool)
    plan = plan_filter(dataset, ~filt, split_policy=config.split_policy,
                       instance=config.instance)
    t0 = time.perf_counter()
    groups, grouping = partition_groups(dataset, config, filt, plan)
    features = rep.X if config.filter == "aflite" else _word_features(dataset)
    filtered = _filter(features, y, filt, plan, config, progress, groups)
    filtered.grouping = grouping
    release_free_heap()  # AFLite's working copies: not under the measures' peaks
    timings["aflite"] = round(time.perf_counter() - t0, 3)

    scores, retained_ids = build_scores(
        dataset, rep, keep=filtered.keep, predictability=filtered.predictability,
        removal_round=filtered.removal_round, unfiltered=filtered.unfiltered,
        labels=dataset.label_objects(False))
    # the scores hold them now: not a second copy for the whole audit (80 MB at 5M rows)
    filtered.predictability = filtered.removal_round = None
    def refit(random_state: int) -> np.ndarray:
        """AFLite again with another seed (same plan, groups and parameters), silently."""
        other = dataclasses.replace(config, random_state=int(random_state))
        return _filter(features, y, filt, plan, other, _Progress(None), groups).keep

    shared = {"dataset": dataset, "representation": rep, "filterable": filt, "labels": y,
              "keep": filtered.keep, "scores": scores, "retained_ids": retained_ids,
              "refit": refit, "datamap": filtered.datamap,
              # AFLite's group codes are the measures' (dataset.group_codes()): one copy
              "group_codes": groups,
              "datamap_grouped": bool(groups is not None or plan.questions is not None
                                      or dataset.columns.group is None)}
    return rep, filtered, filtered.target, shared


def _write_rows(writer: RunWriter, dataset, scores: pd.DataFrame, progress: _Progress,
                timings: dict, rep: Any = None) -> None:
    """The input rows, their scores, the retained/removed CSVs and the compact Φ."""
    progress.step("write", "writing scores and rows", progress.span("write")[0])
    t0 = time.perf_counter()
    if dataset.texts_file is not None:  # the file its texts moved to is that file
        writer.link_dataset(dataset.texts_file, dataset.frame.index)
    else:
        writer.write_dataset(dataset.frame)
    writer.write_scores(scores)
    # the rows' CSVs (Arrow's writer) beside the compact Φ (numpy), each mostly without the
    # GIL: the stage 1.86-2.11 -> 1.21-1.29 s at 300,000 rows on two cores (no measures)
    with ThreadPoolExecutor(1, thread_name_prefix="row-csvs") as pool:
        csvs = pool.submit(writer.write_row_csvs)
        if rep is not None and not on_cluster(rep.X):  # Φ on the workers: not gathered
            writer.write_compact_phi(rep.X, rep.row_ids)
            if getattr(rep, "text_model", None) and rep.text_model.get("components") is not None:
                writer.write_text_model(rep.text_model)
            rep.text_model = None  # written: its components (up to 100 MB) not under the measures
        csvs.result()
    release_free_heap()  # the writers' Arrow buffers: not under the measures' peaks
    timings["write"] = round(time.perf_counter() - t0, 3)


def _stage_spans(dataset, config: AuditConfig) -> dict[str, tuple[float, float]]:
    """Each stage's part of the progress bar (:func:`aflite_core.measure_runs.stage_plan`)."""
    return stage_plan(dataset, config).spans


#: The collector's thresholds during an audit (CPython's default: 700, 10, 10). An audit
#: allocates millions of short-lived lists (token lists, pandas' and scikit-learn's
#: internals) while it holds many live ones: with the defaults the cyclic collector ran 830
#: young and 6 full passes in a 10k-row audit, 0.55 s of its 6.5 s (1.25 s at 100k rows);
#: with these, 10 young passes and no full one, 0.13 s (0.52 s at 100k), and the audit took
#: 5.9-6.3 s against 6.6-6.9 s. Nothing the audit computes depends on when garbage is
#: collected; cyclic garbage waits longer for its pass, which is why it stops at
#: :data:`GC_MAX_ROWS`.
GC_THRESHOLDS = (50_000, 20, 100)
#: Audited rows up to which :data:`GC_THRESHOLDS` apply. At 1M rows the lingering cyclic
#: garbage (pandas and scikit-learn objects holding large arrays) raised the audit's peak from
#: 3.48 to 4.46 GB, past the 4 GB budget, while the collector's passes are a small share of
#: that audit's time; at 100k rows the peak stayed at 1.37 GB.
GC_MAX_ROWS = 250_000


@contextlib.contextmanager
def _fewer_collections(n_rows: int) -> Iterator[None]:
    """:data:`GC_THRESHOLDS` while an audit of ``n_rows`` rows (at most :data:`GC_MAX_ROWS`)
    runs, the caller's thresholds again after."""
    before = gc.get_threshold()
    if n_rows <= GC_MAX_ROWS:
        gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _build_representation(dataset, config: AuditConfig, progress: _Progress | None = None,
                          phi_folder: Path | None = None):
    # lazy: +13 ms to import
    from aflite_core.represent import ENCODER_METHODS, build_representation

    kwargs = {k: v for k, v in config.representation_params.items() if v is not None}
    if progress is not None and (config.representation in ENCODER_METHODS
                                 or config.representation.replace("-", "_") == "tfidf_svd"):
        kwargs["callback"] = progress.sub("representation", progress.span("representation"))
    # with the audit's client, tfidf_svd builds Φ over row partitions on its workers
    client = None if config.backend != "dask" or isinstance(config.scheduler, str | type(None)) \
        else config.scheduler
    if client is not None:  # the driver waits while the workers build Φ: it loads AFLite's
        # modules meanwhile (scikit-learn's estimator base, 0.4 s of one core), which a local
        # audit's TF-IDF has loaded by then, instead of inside the filter's stage
        threading.Thread(target=_load_filter, name="load-filter", daemon=True).start()
    # ... and leaves its rows there: every stage reads them a block at a time
    return build_representation(dataset, config.representation, client=client,
                                resident=client is not None, phi_folder=phi_folder,
                                random_state=config.random_state, **kwargs)


def _load_filter() -> None:
    """Import AFLite's module (the filter's face resolves a name on first use)."""
    with contextlib.suppress(Exception):  # the filter's stage imports it again and says why
        from aflite_core.filter import AFLite  # noqa: F401 - lazy: +400 ms to import


@dataclass
class _Filtered:
    """AFLite's result over the filterable rows (all blocks of the plan, scored rows too)."""

    keep: np.ndarray
    predictability: np.ndarray | None  # None once in the scores (build_scores)
    removal_round: np.ndarray | None
    model: Any  # the largest block's estimator: history, rounds, stop reason (no row arrays)
    target: int
    plan: FilterPlan
    blocks: dict = field(default_factory=dict)
    #: Over the filterable rows: ``confidence``, ``variability``, ``n_heldout`` (the data map
    #: of the held-out predictions, same round as ``predictability``; NaN/0 where unscored).
    datamap: pd.DataFrame | None = None
    #: Over the filterable rows: kept without being filtered (the plan's scored-only rows,
    #: e.g. dev/test when AFLite filters the training split only); None when there are none.
    unfiltered: np.ndarray | None = None
    #: What AFLite's partitions drew: whole groups (and which) or rows, and why.
    grouping: str = ""


#: ``group_partitions="auto"`` draws whole groups only while no group holds more than this
#: share of the filtered rows (the loader's own bound for linked texts,
#: ``io.datasets.MAX_LINKED_GROUP_SHARE``): a group that large trains a partition whole or not
#: at all, which leaves few ways to draw; a partition still fills up to t rows around it.
AUTO_GROUP_MAX_SHARE = 0.25


def partition_groups(dataset, config: AuditConfig, filterable: np.ndarray, plan: FilterPlan
                     ) -> tuple[np.ndarray | None, str]:
    """The groups AFLite's partitions draw whole (None: rows), and what they draw, in words
    (empty for the Z-filter, which has no partitions).

    ``config.group_partitions``: ``"on"`` uses ``dataset.group_codes()`` (an error without
    groups), ``"off"`` draws rows (the paper), ``"auto"`` is ``"on"`` for row-level AFLite
    on data with groups none of which holds more than :data:`AUTO_GROUP_MAX_SHARE` of the
    filtered rows. Without it, a held-out row whose group-mate trained the partition (the
    same claim with the other label, the same hypothesis) is scored by memorisation: on
    FEVER-Symmetric the held-out models then rank 10 % planted label flips at AUROC 0.25,
    grouped 0.58 (``benchmarks/bench_label_issues.py``).
    """
    choice = {True: "on", False: "off"}.get(config.group_partitions, config.group_partitions)
    groups = dataset.group_codes()
    if choice == "on" and groups is None:
        raise ValueError("group_partitions: the dataset has no groups (load it with group=COL)")
    if config.filter != "aflite":
        return None, ""  # the Z-filter has no partitions
    if plan.questions is not None:  # multiple-choice AFLite draws questions whatever the choice
        return groups, "whole questions (a question is kept or removed whole)"
    if choice == "off":
        return None, "rows (group_partitions='off')"
    if choice == "auto":
        if groups is None:
            return None, "rows (the data has no groups)"
        sizes = np.bincount(groups[filterable])
        largest = sizes.max() / max(sizes.sum(), 1) if len(sizes) else 0.0
        if largest > AUTO_GROUP_MAX_SHARE:
            return None, (f"rows (the largest group holds {largest:.0%} of the filtered "
                          f"rows, more than {AUTO_GROUP_MAX_SHARE:.0%}; "
                          "group_partitions='on' draws whole groups anyway)")
    column = dataset.columns.group
    named = ("rows linked by a shared premise or hypothesis" if column == LINKED_TEXT
             else f"the {column!r} column")
    return groups, f"whole groups ({named})"


def _scaled(value: int | float | None, part: int, whole: int) -> int | float | None:
    """An int size (rows or questions) scaled to one block; fractions and None unchanged."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and part < whole:
        return max(1, int(round(value * part / whole)))
    return value


def _filter(X: np.ndarray, y: np.ndarray, filt: np.ndarray, plan: FilterPlan,
            config: AuditConfig, progress: _Progress,
            groups: np.ndarray | None = None) -> _Filtered:
    """Run AFLite on each block of ``plan``; score the plan's scored-only rows."""
    n_f = int(filt.sum())
    keep = np.ones(n_f, dtype=bool)
    predictability = np.full(n_f, np.nan)
    removal_round = np.full(n_f, -1, dtype=np.int64)
    datamap = pd.DataFrame({"confidence": np.full(n_f, np.nan),
                            "variability": np.full(n_f, np.nan),
                            "n_heldout": np.zeros(n_f, dtype=np.int64)})

    def units(rows: np.ndarray) -> int:
        return int(len(np.unique(plan.questions[rows]))) if plan.questions is not None \
            else int(rows.sum())

    sizes = {name: units(rows) for name, rows in plan.blocks}
    total = sum(sizes.values())
    what = "questions" if plan.questions is not None else "rows"
    target = resolve_size("target_size", config.target_size, max(total, 1))
    if target >= total:
        raise ValueError(
            f"target_size: must be smaller than the {total:,} filterable {what} (included "
            f"minus warm-up; split policy {plan.policy}), got {target:,}")
    blocks: dict[str, dict] = {}
    main, main_rows, main_size, done = None, None, 0, 0
    for name, rows in plan.blocks:
        n_b = sizes[name]
        if n_b < 2:
            continue
        t_b = target if len(plan.blocks) == 1 else max(1, int(round(target * n_b / total)))
        if t_b >= n_b:
            continue
        span = (done / total, (done + n_b) / total)
        # every row in one block (a file without splits): Φ itself, not a copy of it (1 GB
        # at 1M rows x 256); AFLite never writes into its X. A split's rows: read through
        # (RowSelection), not copied (0.9 GB at 1M rows x 256 with a split column)
        X_b = X if rows.all() else X[rows] if plan.questions is not None \
            else select_rows(X, np.flatnonzero(rows))
        model = _fit_block(X_b, y[rows], None if plan.questions is None
                           else plan.questions[rows], config, t_b, n_b, total, span, progress,
                           groups=None if groups is None else groups[rows])
        del X_b  # a block's copy lives no longer than its fit, as before
        done += n_b
        rows_f = rows[filt]
        keep[rows_f] = np.asarray(model.keep_mask_, dtype=bool)
        predictability[rows_f] = np.asarray(model.predictability_, dtype=float)
        removal_round[rows_f] = np.asarray(model.removal_round_, dtype=np.int64)
        for column in datamap.columns:
            if hasattr(model, f"{column}_"):
                datamap.loc[rows_f, column] = np.asarray(getattr(model, f"{column}_"))
        blocks[name] = {"rows": int(rows.sum()), what: n_b, "target": t_b,
                        "retained": int(np.asarray(model.keep_mask_).sum()),
                        "n_rounds": int(getattr(model, "n_rounds_", 0)),
                        "stop_reason": getattr(model, "stop_reason_", None)}
        if n_b > main_size:
            main, main_rows, main_size = model, rows, n_b
    if main is None:
        raise ValueError(f"target_size: no block of {what} is larger than its target "
                         f"({plan.description[:-1]})")
    scored = plan.scored
    if scored.any() and plan.questions is None:  # train_only: dev/test scored, never removed
        progress.step("aflite", f"scoring {int(scored.sum()):,} held-out rows",
                      progress.span("aflite")[1], heldout=True)
        heldout = main.score_heldout(select_rows(X, np.flatnonzero(scored)), y[scored],
                                     X=select_rows(X, np.flatnonzero(main_rows)),
                                     y=y[main_rows], return_datamap=True)
        predictability[scored[filt]] = heldout["predictability"].to_numpy()
        for column in datamap.columns:
            datamap.loc[scored[filt], column] = heldout[column].to_numpy()
    unfiltered = np.asarray(plan.scored, dtype=bool)[filt]
    for name in _ROW_ATTRIBUTES:  # copied above: not held twice for the whole audit
        main.__dict__.pop(name, None)
    return _Filtered(keep=keep, predictability=predictability, removal_round=removal_round,
                     model=main, target=target, plan=plan, blocks=blocks, datamap=datamap,
                     unfiltered=unfiltered if unfiltered.any() else None)


#: A block model's fitted per-row arrays, which _filter copies out (0.2 GB at 5M rows).
_ROW_ATTRIBUTES = ("keep_mask_", "predictability_", "removal_round_", "confidence_",
                   "variability_", "n_heldout_")


def _fit_block(X, y, questions, config: AuditConfig, target: int, n_units: int, total: int,
               span: tuple[float, float], progress: _Progress, *,
               groups: np.ndarray | None = None):
    """AFLite (or multiple-choice AFLite) on one block; progress within ``span``."""
    from aflite_core.filter import AFLite, MultipleChoiceAFLite  # lazy: +1318 ms to import

    whole = progress.span("aflite")
    lo = whole[0] + (whole[1] - whole[0]) * span[0]
    hi = whole[0] + (whole[1] - whole[0]) * span[1]
    to_remove = max(n_units - target, 1)
    what = "questions" if questions is not None else "rows"
    step = "Z-filter step" if config.filter == "z" else "AFLite round"

    def on_round(info: dict) -> bool:
        done = (n_units - int(info.get("size", n_units))) / to_remove
        message = (
            f"{step} {info.get('round')}: {int(info.get('size', 0)):,} {what} "
            f"(removed {int(info.get('removed', 0)):,}, target {target:,})"
        )
        extra = {k: info[k] for k in ("round", "size", "removed", "removed_total",
                                      "target_size", "seconds", "elapsed") if k in info}
        return progress.emit("aflite", message, lo + (hi - lo) * min(max(done, 0.0), 1.0),
                             **extra)

    kwargs: dict[str, Any] = {
        "target_size": target,
        "n_partitions": config.n_partitions,
        "train_size": _scaled(config.train_size, n_units, total),
        "tau": config.tau,
        "strategy": config.strategy,
        "random_state": config.random_state,
        "callback": on_round,
    }
    if config.slice_size is not None:
        kwargs["slice_size"] = _scaled(config.slice_size, n_units, total)
    if config.filter == "z":
        return _fit_zfilter(X, y, questions, config, target, n_units, lo, on_round, progress)
    progress.step("aflite", f"AFLite on {n_units:,} {what}, target {target:,}", lo)
    if questions is not None:
        if config.backend != "local":
            raise ValueError("backend: multiple-choice AFLite runs locally only; use "
                             "backend='local' (or instance='row')")
        model = MultipleChoiceAFLite(**kwargs, n_jobs=-1).fit(X, np.asarray(y) == "right",
                                                              groups=questions)
    else:
        # every core: AFLite holds BLAS to one thread and spreads its row blocks over its own
        # threads instead, with the same mask whatever n_jobs (tests/filter/test_aflite.py)
        model = AFLite(**kwargs, backend=config.backend, scheduler=config.scheduler,
                       n_jobs=-1 if config.backend == "local" else None).fit(
            X, y, groups=groups)
    if progress.cancelled:
        raise AuditCancelled("audit cancelled during aflite")
    return model


def _word_features(dataset):
    """The Z-filter's input: hypothesis words of the included rows (the cue tokenizer)."""
    from aflite_core.filter import binary_features  # lazy: +994 ms to import

    return binary_features(dataset.hypotheses(), features="word")[0]


def _fit_zfilter(X, y, questions, config: AuditConfig, target: int, n_units: int, lo: float,
                 on_round, progress: _Progress):
    """The Z-filter on one block (see :mod:`aflite_core.filter._zfilter`)."""
    from aflite_core.filter import ZFilter  # lazy: +994 ms to import

    if questions is not None:
        raise ValueError("instance: the Z-filter filters rows; use instance='row' (or "
                         "filter='aflite' for multiple-choice questions)")
    progress.step("aflite", f"Z-filter on {n_units:,} rows, target {target:,}", lo)
    model = ZFilter(target_size=target, random_state=config.random_state, callback=on_round,
                    **config.filter_params).fit(X, y)
    if progress.cancelled:
        raise AuditCancelled("audit cancelled during the Z-filter")
    return model


def _zfilter_summary(model) -> dict:
    """The Z-filter's statistics for ``summary.json`` (``aflite.zfilter``)."""
    return {"threshold": model.threshold_, "n_tests": model.n_tests_,
            "alpha": float(model.alpha), "min_count": int(model.min_count),
            "until": model.until, "batch_size": model.batch_size_,
            "max_abs_z_before": model.max_abs_z_before_,
            "max_abs_z_after": model.max_abs_z_after_,
            "n_over_threshold_before": model.n_over_threshold_before_,
            "n_over_threshold_after": model.n_over_threshold_after_,
            "score": "predictability = one-word predictability before filtering (largest "
                     "shrunk share of the row's label among rows sharing one of its words); "
                     "removal_round = the Z-filter step the row left in"}


def _summary(dataset, config, rep, filtered: _Filtered, scores: pd.DataFrame, created: str,
             measures: dict) -> dict:
    model = filtered.model
    # codes of the statuses and labels: to_numpy() of the string columns was a str per row
    status = shared_strings(scores["status"])  # one str per status
    codes, names = str_codes(scores["label"])
    sizes = {s: int((status == s).sum()) for s in STATUSES}
    sizes = {
        "input": int(len(scores)),
        "included": int(len(scores) - sizes["excluded"]),
        "filtered": sizes["retained"] + sizes["removed"],
        **sizes,
    }
    filtered_rows = np.isin(status, ["retained", "removed"])
    report = dataset.report
    parameters = config.to_dict()
    parameters["target_size_rows"] = int(filtered.target)
    if hasattr(model, "slice_size_"):
        parameters["slice_size_rows"] = int(model.slice_size_)
    return {
        "created": created,
        "parameters": parameters,
        "representation": {
            "method": rep.method,
            "params": dict(rep.params or {}),
            "n_features": int(rep.X.shape[1]),
        },
        "aflite": {
            "n_rounds": int(getattr(model, "n_rounds_", 0)),
            "stop_reason": getattr(model, "stop_reason_", None),
            "split_policy": filtered.plan.policy,
            "instance": filtered.plan.instance,
            "description": (filtered.plan.description if config.filter == "aflite" else
                            filtered.plan.description.replace("AFLite", "The Z-filter")),
            "blocks": filtered.blocks,
            "chance": (float(np.mean(model.chance_)) if hasattr(model, "chance_") else None),
            "grouped_partitions": filtered.grouping.startswith("whole"),
            "partition_groups": filtered.grouping,
            **({"zfilter": _zfilter_summary(model)} if config.filter == "z" else {}),
        },
        "splits": _split_sizes(dataset, status),
        "versions": library_versions(),
        "input": {
            "name": dataset.name,
            "format": report.format,  # as read: the curated export's default format
            "sha256": dataset.content_hash,
            "n_rows": int(len(dataset.frame)),
            "columns": dataset.columns.to_dict(),
            "excluded": dict(report.excluded),
            "warnings": list(report.warnings),
        },
        "sizes": sizes,
        "labels": {
            "before": _counts(codes[filtered_rows], names),
            "after": _counts(codes[status == "retained"], names),
            "removed": _counts(codes[status == "removed"], names),
            "unfiltered": _counts(codes[status == "unfiltered"], names),
            "warmup": _counts(codes[status == "warmup"], names),
        },
        "history": _history_records(getattr(model, "history_", None)),
        "measures": measures,
    }


def _split_sizes(dataset, status: np.ndarray) -> dict[str, dict[str, int]]:
    """Per split value: rows before (retained + removed), retained and removed, and the rows
    kept without being filtered (``unfiltered``, e.g. dev/test of a train-only filter)."""
    if dataset.columns.split is None:
        return {}
    ids, names = label_factors(dataset.frame[dataset.columns.split])  # splits()' values
    out: dict[str, dict[str, int]] = {}
    for i in pd.unique(ids):  # in order of first appearance, as dict.fromkeys of every row's
        value, rows = str(names[i]), ids == i
        retained = int((rows & (status == "retained")).sum())
        removed = int((rows & (status == "removed")).sum())
        unfiltered = int((rows & (status == "unfiltered")).sum())
        if retained + removed + unfiltered:
            out[value] = {"before": retained + removed, "retained": retained,
                          "removed": removed, "unfiltered": unfiltered}
    return out


def _write_report(writer: RunWriter, summary: dict, callback: Callable | None = None) -> None:
    from aflite_core.report import build_report  # lazy: +17 ms to import

    try:
        text = build_report(writer.open_partial(summary), callback=callback)
    except AuditCancelled:  # asked to stop while it was written: no run, as in any stage
        raise
    except Exception as exc:  # noqa: BLE001 - the report must not sink a finished audit
        summary.setdefault("measures", {})["report"] = {
            "status": "error",
            "error": f"{type(exc).__name__}: {exc}",
        }
        return
    writer.write_text(REPORT_FILE, text)
    summary.setdefault("measures", {})["report"] = {"status": "ok", "artifacts": [REPORT_FILE]}


__all__ = ["AuditCancelled", "AuditConfig", "run_audit", "check_labels", "resolve_size",
           "library_versions", "MEASURES", "DEFAULT_MEASURES", "MAX_LABELS"]
