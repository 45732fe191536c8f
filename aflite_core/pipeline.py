"""``run_audit``: dataset -> Φ -> AFLite -> measures -> one run folder.

The representation and AFLite are essential: if either fails, the run fails and no
folder is left. Each measure (cue statistics, KNN distances, projection, baselines,
duplicates) is optional (``AuditConfig.measures``); a measure that fails is recorded in
``summary.json`` under ``measures`` with its error message and the run still completes.

Progress goes to ``callback(event)`` with ``stage``, ``message`` and ``fraction`` (0..1
of the whole run, never decreasing); AFLite rounds add the round keys of
:class:`aflite_core.filter.aflite.AFLite`. Returning ``True`` from the callback cancels the run:
:class:`AuditCancelled` is raised and nothing is left on disk.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
import platform
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aflite_core import __version__
from aflite_core.runs.folder import (
    BASELINES_FILE,
    CUES_FILE,
    DUPLICATES_FILE,
    INOCULATION_FILE,
    KNN_EXAMPLES_FILE,
    KNN_FILE,
    PROJECTION_FILE,
    REPORT_FILE,
    RunWriter,
    default_run_name,
    unique_run_name,
    utc_now_iso,
)

REPRESENTATIONS = ("tfidf_svd", "warmup", "precomputed", "sentence_transformers")
STRATEGIES = ("greedy_slicing", "slice_sampling", "greedy")
#: Optional measures ``run_audit`` knows, in the order they run. ``inoculation`` uses the
#: retained rows as the challenge set (Liu et al. 2019) and is off by default.
MEASURES = ("cues", "knn", "projection", "baselines", "duplicates", "inoculation")
DEFAULT_MEASURES = ("cues", "knn", "projection", "baselines")
#: Most distinct labels an audit accepts: each AFLite round holds ``m x labels x d`` class
#: sums (64 x 1,000 x 256 float64 = 131 MB); more labels usually means a wrong label column.
MAX_LABELS = 1000
#: Keyword arguments of ``build_representation`` that ``representation_params`` may set.
REPRESENTATION_PARAMS = ("n_components", "warmup_fraction", "path", "model")

# share of the whole run's progress bar given to each stage group
_SPAN_REPRESENTATION = (0.0, 0.15)
_SPAN_AFLITE = (0.15, 0.65)
_SPAN_MEASURES = (0.65, 0.92)
_SPAN_WRITE = (0.92, 0.96)
_SPAN_REPORT = (0.96, 1.0)

EventCallback = Callable[[dict], Any]


class AuditCancelled(Exception):
    """The callback asked to stop; no run folder was written."""


@dataclass
class AuditConfig:
    """Parameters of one audit run.

    Attributes
    ----------
    representation : str, default "tfidf_svd"
        One of ``tfidf_svd``, ``warmup``, ``precomputed``, ``sentence_transformers``.
    representation_params : dict
        Extra arguments of ``build_representation``: ``n_components``, ``warmup_fraction``,
        ``path`` (precomputed), ``model`` (sentence-transformers).
    target_size : int or float, default 0.5
        Rows AFLite keeps: an int, or a fraction in (0, 1) of the filterable rows
        (included rows minus warm-up rows).
    n_partitions, train_size, slice_size, tau, strategy, random_state
        Passed to :class:`~aflite_core.filter.aflite.AFLite` (``slice_size=None`` uses its
        size-scaled default).
    measures : tuple of str
        Optional measures to compute, from ``cues``, ``knn``, ``projection``,
        ``baselines``, ``duplicates``, ``inoculation``.
    measure_params : dict
        Extra keyword arguments per measure, e.g. ``{"projection": {"method": "pca"},
        "baselines": {"n_random_draws": 2}}``, passed to ``projection.project``,
        ``probes.run_baselines``, ``duplicates.find_duplicates``,
        ``inoculation.inoculate`` (``knn`` and ``cues`` take none).
    report : bool, default True
        Write ``report.html`` into the run folder.
    backend : {"local", "dask"}, default "local"
        Where AFLite's partitions run; ``"dask"`` fans each round out over a Dask cluster
        (see ``docs/scaling.md``). Results are identical for the same ``random_state``.
    scheduler : str or None
        With ``backend="dask"``: ``"tcp://HOST:PORT"`` of an existing scheduler, or
        ``"local:N"`` for a local cluster of N workers (``None`` = ``"local:2"``-like default
        of :class:`~aflite_core.filter.aflite.AFLite`).
    """

    representation: str = "tfidf_svd"
    representation_params: dict = field(default_factory=dict)
    target_size: int | float = 0.5
    n_partitions: int = 64
    train_size: int | float = 0.5
    slice_size: int | float | None = None
    tau: float = 0.75
    strategy: str = "greedy_slicing"
    random_state: int = 0
    measures: tuple[str, ...] = DEFAULT_MEASURES
    measure_params: dict = field(default_factory=dict)
    report: bool = True
    backend: str = "local"
    scheduler: str | None = None

    def validate(self) -> AuditConfig:
        """Check the values that can be checked without data; return ``self``.

        Raises
        ------
        ValueError, TypeError
            Naming the field, what was expected and what arrived.
        """
        if self.representation not in REPRESENTATIONS:
            raise ValueError(
                f"representation: expected one of {REPRESENTATIONS}, got {self.representation!r}"
            )
        if not isinstance(self.representation_params, Mapping):
            raise TypeError(
                "representation_params: expected a dict, got "
                f"{type(self.representation_params).__name__}"
            )
        unknown = sorted(set(self.representation_params) - set(REPRESENTATION_PARAMS))
        if unknown:
            raise ValueError(
                f"representation_params: unknown key(s) {unknown}; "
                f"expected some of {REPRESENTATION_PARAMS}"
            )
        _check_size("target_size", self.target_size)
        _check_size("train_size", self.train_size)
        if self.slice_size is not None:
            _check_size("slice_size", self.slice_size)
        if isinstance(self.n_partitions, bool) or not isinstance(
            self.n_partitions, (int, np.integer)
        ):
            raise TypeError(f"n_partitions: expected an int, got {self.n_partitions!r}")
        if self.n_partitions < 1:
            raise ValueError(f"n_partitions: expected >= 1, got {self.n_partitions}")
        if isinstance(self.tau, bool) or not isinstance(self.tau, (int, float, np.number)):
            raise TypeError(f"tau: expected a number in [0, 1], got {self.tau!r}")
        if not 0.0 <= float(self.tau) <= 1.0:
            raise ValueError(f"tau: expected a number in [0, 1], got {self.tau!r}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy: expected one of {STRATEGIES}, got {self.strategy!r}")
        if self.backend not in ("local", "dask"):
            raise ValueError(f"backend: expected 'local' or 'dask', got {self.backend!r}")
        if self.scheduler is not None and self.backend != "dask":
            raise ValueError(
                f"scheduler: only used with backend='dask', got scheduler={self.scheduler!r} "
                f"with backend={self.backend!r}"
            )
        if isinstance(self.random_state, bool) or not isinstance(
            self.random_state, (int, np.integer)
        ):
            raise TypeError(f"random_state: expected an int, got {self.random_state!r}")
        measures = (self.measures,) if isinstance(self.measures, str) else tuple(self.measures)
        bad = [m for m in measures if m not in MEASURES]
        if bad:
            raise ValueError(f"measures: unknown {bad}; expected some of {MEASURES}")
        self.measures = measures
        if not isinstance(self.measure_params, Mapping) or not all(
            isinstance(v, Mapping) for v in self.measure_params.values()
        ):
            raise TypeError(
                "measure_params: expected a dict of dicts such as "
                f"{{'projection': {{'method': 'pca'}}}}, got {self.measure_params!r}"
            )
        bad = sorted(set(self.measure_params) - set(MEASURES))
        if bad:
            raise ValueError(f"measure_params: unknown measure(s) {bad}; expected {MEASURES}")
        return self

    def to_dict(self) -> dict:
        """The configuration as plain values (for ``summary.json``)."""
        data = dataclasses.asdict(self)
        data["measures"] = list(self.measures)
        return data


def _check_size(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: expected an int or a fraction in (0, 1), got {value!r}")
    if isinstance(value, (float, np.floating)):
        if not 0.0 < float(value) < 1.0:
            raise ValueError(
                f"{name}: a float must be a fraction in (0, 1); got {value!r} "
                "(pass an int for a number of rows)"
            )
    elif value < 1:
        raise ValueError(f"{name}: expected a positive number of rows, got {value!r}")


def resolve_size(name: str, value: int | float, n: int) -> int:
    """An int size, or ``ceil(value * n)`` for a fraction (as AFLite rounds), at least 1."""
    _check_size(name, value)
    if isinstance(value, (float, np.floating)):
        return max(1, math.ceil(float(value) * n - 1e-9))
    return int(value)


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
    from aflite_core.io.readers import short_repr

    labels = np.asarray(dataset.labels(), dtype=str)
    column = dataset.columns.label
    uniq, counts = np.unique(labels, return_counts=True)
    n = len(labels)
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
        ids = dataset.row_ids()
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


# --------------------------------------------------------------------------- progress


class _Progress:
    """Emit monotone progress events and turn a ``True`` reply into a cancellation."""

    def __init__(self, callback: EventCallback | None) -> None:
        self.callback = callback
        self.fraction = 0.0
        self.cancelled = False

    def emit(self, stage: str, message: str, fraction: float, **extra: Any) -> bool:
        self.fraction = max(self.fraction, min(1.0, float(fraction)))
        if self.callback is None:
            return False
        event = {"stage": stage, "message": message, "fraction": self.fraction, **extra}
        if self.callback(event) is True:
            self.cancelled = True
        return self.cancelled

    def step(self, stage: str, message: str, fraction: float, **extra: Any) -> None:
        """Emit and raise :class:`AuditCancelled` if the callback asked to stop."""
        if self.emit(stage, message, fraction, **extra):
            raise AuditCancelled(f"audit cancelled during {stage}")

    def sub(self, stage: str, span: tuple[float, float]) -> Callable[[dict], None]:
        """A callback for a measure module mapping its 0..1 fraction into ``span``."""

        def callback(info: dict) -> None:
            inner = float(info.get("fraction", 0.0) or 0.0)
            message = str(info.get("message", stage))
            self.step(stage, message, span[0] + (span[1] - span[0]) * min(max(inner, 0.0), 1.0))

        return callback


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


def _counts(values: np.ndarray) -> dict[str, int]:
    labels, counts = np.unique(np.asarray(values, dtype=str), return_counts=True)
    order = np.argsort(-counts, kind="stable")
    return {str(labels[i]): int(counts[i]) for i in order}


def _history_records(history: Any) -> list[dict]:
    if history is None:
        return []
    if isinstance(history, pd.DataFrame):
        return history.to_dict(orient="records")
    return list(history)


@dataclass
class _State:
    """Everything the measures need, computed once."""

    dataset: Any
    representation: Any
    config: AuditConfig
    filt: np.ndarray  # bool over representation rows: filterable (not warm-up)
    y: np.ndarray  # labels of the representation rows
    keep: np.ndarray  # bool over filterable rows: retained
    scores: pd.DataFrame
    retained_ids: np.ndarray


def _build_scores(dataset, rep, model, y_all: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    frame_ids = dataset.frame.index.to_numpy()
    n = len(frame_ids)
    included_pos = np.flatnonzero(dataset.included_mask)
    if len(rep.row_ids) != len(included_pos) or not np.array_equal(
        np.asarray(rep.row_ids, dtype=object), frame_ids[included_pos].astype(object)
    ):
        raise RuntimeError("representation rows do not match the dataset's included rows")
    warm = np.asarray(rep.warmup_mask, dtype=bool)
    status = np.full(n, "excluded", dtype=object)
    predictability = np.full(n, np.nan)
    removal_round = np.full(n, -1, dtype=np.int64)
    status[included_pos[warm]] = "warmup"
    filt_pos = included_pos[~warm]
    keep = np.asarray(model.keep_mask_, dtype=bool)
    status[filt_pos] = np.where(keep, "retained", "removed")
    predictability[filt_pos] = np.asarray(model.predictability_, dtype=float)
    removal_round[filt_pos] = np.asarray(model.removal_round_, dtype=np.int64)
    scores = pd.DataFrame(
        {
            "row_id": frame_ids,
            "status": pd.array(status, dtype="string"),
            "predictability": predictability,
            "removal_round": removal_round,
            "label": pd.array(np.asarray(y_all, dtype=object), dtype="string"),
        }
    )
    return scores, frame_ids[filt_pos[keep]]


# --------------------------------------------------------------------------- measures


def _measure_cues(state: _State, writer: RunWriter, progress: _Progress,
                  span: tuple[float, float]) -> dict:
    from aflite_core.cues import statistics as cues

    progress.step("cues", "cue statistics of the full and the retained data", span[0])
    table = cues.cue_tables(
        state.dataset,
        {"full": None, "retained": state.retained_ids},
        random_state=state.config.random_state,
    )
    writer.write_parquet(CUES_FILE, table)
    return {"artifacts": [CUES_FILE], "n_rows": int(len(table)), "attrs": dict(table.attrs)}


def _measure_knn(state: _State, writer: RunWriter, progress: _Progress,
                 span: tuple[float, float]) -> dict:
    from aflite_core.measures import knn

    rep = state.representation
    X = rep.X[state.filt]
    y = state.y[state.filt]
    ids = np.asarray(rep.row_ids)[state.filt]
    splits = state.dataset.splits()
    splits = None if splits is None else np.asarray(splits)[state.filt]
    held = knn.heldout_mask(y, splits=splits, random_state=state.config.random_state)
    result = knn.knn_distance_measures(
        X[~held], y[~held], X[held], y[held],
        retained_mask=state.keep[~held],
        train_row_ids=ids[~held], heldout_row_ids=ids[held],
        random_state=state.config.random_state,
        callback=progress.sub("knn", span),
    )  # fmt: skip
    writer.write_parquet(KNN_FILE, result.table)
    writer.write_parquet(KNN_EXAMPLES_FILE, result.per_example)
    return {"artifacts": [KNN_FILE, KNN_EXAMPLES_FILE], "params": result.params}


def _measure_projection(state: _State, writer: RunWriter, progress: _Progress,
                        span: tuple[float, float]) -> dict:
    from aflite_core.measures import projection

    rep = state.representation
    params = {"random_state": state.config.random_state,
              **state.config.measure_params.get("projection", {})}
    table = projection.project(rep.X, row_ids=np.asarray(rep.row_ids),
                               callback=progress.sub("projection", span), **params)
    writer.write_parquet(PROJECTION_FILE, table)
    return {"artifacts": [PROJECTION_FILE], "params": params}


def _measure_baselines(state: _State, writer: RunWriter, progress: _Progress,
                       span: tuple[float, float]) -> dict:
    from aflite_core.measures import baselines as probes

    rep = state.representation
    hypotheses = [h for h, f in zip(state.dataset.hypotheses(), state.filt, strict=True) if f]
    params = {"random_state": state.config.random_state,
              **state.config.measure_params.get("baselines", {})}
    result = probes.run_baselines(
        state.y[state.filt], state.keep, hypotheses=hypotheses, X=rep.X[state.filt],
        callback=progress.sub("baselines", span), **params,
    )
    writer.write_json(BASELINES_FILE, result)
    return {"artifacts": [BASELINES_FILE], "params": params}


def _filtered_texts(state: _State) -> tuple[list[str], list[str] | None]:
    keep = state.filt
    hyps = [h for h, f in zip(state.dataset.hypotheses(), keep, strict=True) if f]
    prems = state.dataset.premises()
    if prems is not None:
        prems = [p for p, f in zip(prems, keep, strict=True) if f]
    return hyps, prems


def _measure_duplicates(state: _State, writer: RunWriter, progress: _Progress,
                        span: tuple[float, float]) -> dict:
    from aflite_core.measures import duplicates

    rep = state.representation
    hyps, prems = _filtered_texts(state)
    params = dict(state.config.measure_params.get("duplicates", {}))
    progress.step("duplicates", "exact and near duplicates", span[0])
    result = duplicates.find_duplicates(
        hyps, premises=prems, X=rep.X[state.filt], retained_mask=state.keep,
        row_ids=np.asarray(rep.row_ids)[state.filt], **params,
    )
    writer.write_json(DUPLICATES_FILE, result.to_dict())
    writer.write_parquet("duplicates_exact.parquet", result.exact_groups)
    writer.write_parquet("duplicates_near.parquet", result.near_pairs)
    return {"artifacts": [DUPLICATES_FILE, "duplicates_exact.parquet",
                          "duplicates_near.parquet"], "params": result.params}


def _measure_inoculation(state: _State, writer: RunWriter, progress: _Progress,
                         span: tuple[float, float]) -> dict:
    from aflite_core.measures import inoculation

    hyps, prems = _filtered_texts(state)
    texts = np.asarray(inoculation.pair_texts(prems, hyps), dtype=object)
    labels = state.y[state.filt]
    params = {"random_state": state.config.random_state,
              **state.config.measure_params.get("inoculation", {})}
    parts = inoculation.split_for_inoculation(len(labels), state.keep,
                                              random_state=params["random_state"])
    data = {k: (list(texts[idx]), labels[idx]) for k, idx in parts.items()}
    result = inoculation.inoculate(
        data["original_train"], data["original_test"], data["challenge_train"],
        data["challenge_test"], callback=progress.sub("inoculation", span), **params,
    )
    writer.write_json(INOCULATION_FILE, result.to_dict())
    return {"artifacts": [INOCULATION_FILE], "outcome": result.outcome_label}


_MEASURE_FUNCS: dict[str, Callable[..., dict]] = {
    "cues": _measure_cues,
    "knn": _measure_knn,
    "projection": _measure_projection,
    "baselines": _measure_baselines,
    "duplicates": _measure_duplicates,
    "inoculation": _measure_inoculation,
}


def _run_measure(name: str, state: _State, writer: RunWriter, progress: _Progress,
                 span: tuple[float, float]) -> dict:
    func = _MEASURE_FUNCS.get(name)
    if func is None:
        return {"status": "unavailable",
                "error": f"measure {name!r} is not available in this version of aflite_core"}
    start = time.perf_counter()
    present = set(writer.files())
    try:
        info = func(state, writer, progress, span)
    except AuditCancelled:
        raise
    except Exception as exc:  # noqa: BLE001 - a measure must not sink the run
        for leftover in set(writer.files()) - present:  # no half-written artifact
            writer.file(leftover).unlink(missing_ok=True)
        return {
            "status": "error",
            "error": f"{type(exc).__name__}: {exc}",
            "seconds": round(time.perf_counter() - start, 3),
        }
    return {"status": "ok", "seconds": round(time.perf_counter() - start, 3), **info}


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
        Parameters (default: ``AuditConfig()``).
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
    """
    config = (config or AuditConfig()).validate()
    check_labels(dataset)
    progress = _Progress(callback)
    created = utc_now_iso()
    params = config.to_dict()
    if name is None:
        name = unique_run_name(runs_root, default_run_name(dataset.name, params))
    timings: dict[str, float] = {}
    start_all = time.perf_counter()
    with RunWriter(runs_root, name, overwrite=overwrite) as writer:
        progress.step("representation", f"building the {config.representation} representation",
                      _SPAN_REPRESENTATION[0])
        t0 = time.perf_counter()
        rep = _build_representation(dataset, config)
        timings["representation"] = round(time.perf_counter() - t0, 3)
        progress.step("representation", f"representation ready: {rep.X.shape[1]} features",
                      _SPAN_REPRESENTATION[1])

        y = np.asarray(dataset.labels(), dtype=object)
        filt = ~np.asarray(rep.warmup_mask, dtype=bool)
        n_filt = int(filt.sum())
        target = resolve_size("target_size", config.target_size, n_filt)
        if target >= n_filt:
            raise ValueError(
                f"target_size: must be smaller than the {n_filt:,} filterable rows "
                f"(included rows minus warm-up), got {target:,}"
            )
        t0 = time.perf_counter()
        model = _fit_aflite(rep.X[filt], y[filt], config, target, n_filt, progress)
        timings["aflite"] = round(time.perf_counter() - t0, 3)

        scores, retained_ids = _build_scores(dataset, rep, model, dataset.labels(False))
        state = _State(dataset=dataset, representation=rep, config=config, filt=filt, y=y,
                       keep=np.asarray(model.keep_mask_, dtype=bool), scores=scores,
                       retained_ids=retained_ids)

        progress.step("write", "writing scores and rows", _SPAN_AFLITE[1])
        t0 = time.perf_counter()
        writer.write_dataset(dataset.frame)
        writer.write_scores(scores)
        writer.write_row_csvs()
        timings["write"] = round(time.perf_counter() - t0, 3)

        measures: dict[str, dict] = {}
        chosen = [m for m in MEASURES if m in config.measures]
        width = (_SPAN_MEASURES[1] - _SPAN_MEASURES[0]) / max(len(chosen), 1)
        for i, measure in enumerate(chosen):
            span = (_SPAN_MEASURES[0] + i * width, _SPAN_MEASURES[0] + (i + 1) * width)
            progress.step(measure, f"computing {measure}", span[0])
            measures[measure] = _run_measure(measure, state, writer, progress, span)
            if "seconds" in measures[measure]:
                timings[measure] = measures[measure]["seconds"]
            outcome = measures[measure]
            message = "done" if outcome["status"] == "ok" else f"{outcome['status']}: " + str(
                outcome.get("error", "")
            )
            progress.step(measure, message, span[1], status=outcome["status"])

        progress.step("write", "writing summary", _SPAN_WRITE[0])
        summary = _summary(dataset, config, rep, model, scores, target, created, measures)
        summary["timings"] = {**timings, "total": round(time.perf_counter() - start_all, 3)}
        writer.write_summary(summary)
        if config.report:
            progress.step("report", "writing the HTML report", _SPAN_REPORT[0])
            t0 = time.perf_counter()
            _write_report(writer, summary)
            timings["report"] = round(time.perf_counter() - t0, 3)
            summary["timings"] = {**timings, "total": round(time.perf_counter() - start_all, 3)}
            writer.write_summary(summary)
        progress.step("write", "run complete", _SPAN_REPORT[1])
    return writer.path


def _build_representation(dataset, config: AuditConfig):
    from aflite_core.represent.builders import build_representation

    kwargs = {k: v for k, v in config.representation_params.items() if v is not None}
    return build_representation(
        dataset, config.representation, random_state=config.random_state, **kwargs
    )


def _fit_aflite(X, y, config: AuditConfig, target: int, n_filt: int, progress: _Progress):
    from aflite_core.filter.aflite import AFLite

    lo, hi = _SPAN_AFLITE
    to_remove = max(n_filt - target, 1)

    def on_round(info: dict) -> bool:
        done = (n_filt - int(info.get("size", n_filt))) / to_remove
        message = (
            f"round {info.get('round')}: {int(info.get('size', 0)):,} rows "
            f"(removed {int(info.get('removed', 0)):,}, target {target:,})"
        )
        extra = {k: info[k] for k in ("round", "size", "removed", "removed_total",
                                      "target_size", "seconds", "elapsed") if k in info}
        return progress.emit("aflite", message, lo + (hi - lo) * min(max(done, 0.0), 1.0),
                             **extra)

    kwargs: dict[str, Any] = {
        "target_size": target,
        "n_partitions": config.n_partitions,
        "train_size": config.train_size,
        "tau": config.tau,
        "strategy": config.strategy,
        "random_state": config.random_state,
        "callback": on_round,
        "backend": config.backend,
        "scheduler": config.scheduler,
    }
    if config.slice_size is not None:
        kwargs["slice_size"] = config.slice_size
    progress.step("aflite", f"AFLite on {n_filt:,} rows, target {target:,}", lo)
    model = AFLite(**kwargs).fit(X, y)
    if progress.cancelled:
        raise AuditCancelled("audit cancelled during aflite")
    return model


def _summary(dataset, config, rep, model, scores: pd.DataFrame, target: int, created: str,
             measures: dict) -> dict:
    status = scores["status"].astype(str).to_numpy()
    labels = scores["label"].astype(str).to_numpy()
    sizes = {s: int((status == s).sum()) for s in ("retained", "removed", "warmup", "excluded")}
    sizes = {
        "input": int(len(scores)),
        "included": int(len(scores) - sizes["excluded"]),
        "filtered": sizes["retained"] + sizes["removed"],
        **sizes,
    }
    filtered = np.isin(status, ["retained", "removed"])
    report = dataset.report
    parameters = config.to_dict()
    parameters["target_size_rows"] = int(getattr(model, "target_size_", target))
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
        },
        "versions": library_versions(),
        "input": {
            "name": dataset.name,
            "sha256": dataset.content_hash,
            "n_rows": int(len(dataset.frame)),
            "columns": dataset.columns.to_dict(),
            "excluded": dict(report.excluded),
            "warnings": list(report.warnings),
        },
        "sizes": sizes,
        "labels": {
            "before": _counts(labels[filtered]),
            "after": _counts(labels[status == "retained"]),
            "removed": _counts(labels[status == "removed"]),
            "warmup": _counts(labels[status == "warmup"]),
        },
        "history": _history_records(getattr(model, "history_", None)),
        "measures": measures,
    }


def _write_report(writer: RunWriter, summary: dict) -> None:
    from aflite_core.report.html import build_report

    try:
        text = build_report(writer.open_partial(summary))
    except Exception as exc:  # noqa: BLE001 - the report must not sink a finished audit
        summary.setdefault("measures", {})["report"] = {
            "status": "error",
            "error": f"{type(exc).__name__}: {exc}",
        }
        return
    writer.write_text(REPORT_FILE, text)
    summary.setdefault("measures", {})["report"] = {"status": "ok", "artifacts": [REPORT_FILE]}


__all__ = [
    "AuditCancelled",
    "AuditConfig",
    "run_audit",
    "check_labels",
    "resolve_size",
    "library_versions",
    "MEASURES",
    "DEFAULT_MEASURES",
    "MAX_LABELS",
]
