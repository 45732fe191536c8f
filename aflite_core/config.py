"""Audit parameters: :class:`AuditConfig` and the one source of their defaults.

:func:`suggest_config` gives the defaults for a dataset of ``n`` audited rows; the CLI
(``python -m aflite_core run``), the dashboard's Audit page, its automatic audit of the
bundled sample and the Python API all start from it, so the same file audited with defaults
from any of them gives the same run.

Size-scaled AFLite defaults (``n`` = rows that take part in the audit):

============  ====  =====================  =====================  =======
rows n        m     train size t (rows)    slice size k           target
============  ====  =====================  =====================  =======
<= 10,000     32    40% of n               5% of n                50%
<= 100,000    64    40% of n               2.5% of n              50%
> 100,000     64    min(50,000, n/10)      min(10,000, n/50)      1/3
============  ====  =====================  =====================  =======

The last row is the AFLite paper's SNLI setting (m=64, t=50k, k=10k, target 182k of 550k);
tau is 0.75 throughout. As in the paper, t is a fixed number of rows drawn afresh each round
(not a share of the shrinking set) and below the target size, so every round's models train
on the same amount of data and t < |S| holds to the last round. Each measure's options
start at the defaults it declares in the measure registry (:mod:`aflite_core.measures.registry`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aflite_core._validation import (
    check_choice,
    check_int,
    check_size,
)
from aflite_core._validation import resolve_size as _resolve_size
from aflite_core.filter import INSTANCES, SPLIT_POLICIES, filter_units
from aflite_core.measures import registry
from aflite_core.parameters import (  # noqa: F401 - re-exported: config's public names
    DEFAULT_COMPONENTS,
    DEFAULT_TAU,
    FILTER_PARAM,
    FILTERS,
    PARAMETERS,
    REPRESENTATION_PARAM,
    REPRESENTATIONS,
    SCALED,
    STRATEGIES,
    check_value,
)
from aflite_core.represent import fold_threads

#: Keyword arguments of :class:`~aflite_core.filter.ZFilter` that ``filter_params``
#: may set (with ``filter="z"``).
Z_FILTER_PARAMS = (*(p.name for p in PARAMETERS if p.where == FILTER_PARAM), "batch_size")
#: Keyword arguments of ``build_representation`` that ``representation_params`` may set
#: (the declared parameters, plus the embedding file and the encoder model).
REPRESENTATION_PARAMS = (*(p.name for p in PARAMETERS if p.where == REPRESENTATION_PARAM),
                         "path", "model")
#: AuditConfig fields whose default (``None``) is scaled to the data by :meth:`~AuditConfig.scaled`.
SCALED_FIELDS = ("target_size", "n_partitions", "train_size", "slice_size")


@dataclass
class AuditConfig:
    """Parameters of one audit run.

    Attributes
    ----------
    representation : str, default "tfidf_svd"
        One of ``tfidf_svd``, ``warmup``, ``precomputed``, ``static``,
        ``sentence_transformers`` (the last two are text encoders, optional extras).
    representation_params : dict
        Extra arguments of ``build_representation``: ``n_components``, ``warmup_fraction``,
        ``path`` (precomputed), ``model`` and ``combine`` (the encoders).
    target_size : int, float or None, default None
        Rows AFLite keeps: an int, or a fraction in (0, 1) of the filterable rows
        (included rows minus warm-up rows). ``None``: scaled to the data, as
        :func:`suggest_config` does (:meth:`scaled`; ``run_audit`` applies it).
    n_partitions, train_size, slice_size : default None
        Passed to :class:`~aflite_core.filter.AFLite`; ``None``: scaled to the data
        (:func:`size_defaults`; ``slice_size`` is 1 with ``strategy="greedy"``).
    tau, strategy, random_state
        Passed to :class:`~aflite_core.filter.AFLite`.
    measures : tuple of str or None
        Measures to compute after AFLite, by name (see
        :func:`aflite_core.measures.registry.names`); ``None`` = the registry's defaults.
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
    split_policy : {"auto", "train_only", "joint", "per_split"}, default "auto"
        Which rows AFLite filters (see :mod:`aflite_core.filter._policy`): ``auto`` filters
        the training split only (dev/test kept and scored) when the split column has
        training rows and others, else every row jointly.
    instance : {"auto", "row", "question"}, default "auto"
        ``auto``: a question for multiple-choice data (kept or removed whole), else a row.
    group_partitions : {"auto", "on", "off"}, default "auto"
        ``"on"``: AFLite's partitions train on whole groups of the dataset
        (``dataset.groups()``), so a row is never scored by a model that saw its group (e.g.
        the same claim with the other label, another hypothesis of its premise). ``"off"``:
        the paper's draws of rows. ``"auto"``: on for row-level AFLite on data with groups
        none of which holds more than 25 % of the filtered rows
        (:func:`aflite_core.pipeline.partition_groups`). ``True`` / ``False`` are read as
        ``"on"`` / ``"off"``.
    scheduler : str or None
        With ``backend="dask"``: ``"tcp://HOST:PORT"`` of an existing scheduler, or
        ``"local:N"`` for a local cluster of N workers (``None`` = ``"local:2"``-like default
        of :class:`~aflite_core.filter.AFLite`).
    filter : {"aflite", "z"}, default "aflite"
        ``"z"`` runs the Z-filter (:class:`~aflite_core.filter.ZFilter`) on the
        hypothesis words instead of AFLite: rows leave until no word's |z| passes the
        Bonferroni threshold, or ``target_size`` is reached. The run folder is the same;
        AFLite's ``n_partitions``, ``train_size``, ``slice_size``, ``tau`` and ``strategy``
        are unused (see ``docs/zfilter.md``).
    filter_params : dict
        Z-filter options: ``alpha``, ``min_count``, ``until``, ``batch_size``.
    """

    representation: str = "tfidf_svd"
    representation_params: dict = field(default_factory=dict)
    target_size: int | float | None = None
    n_partitions: int | None = None
    train_size: int | float | None = None
    slice_size: int | float | None = None
    tau: float = 0.75
    strategy: str = "greedy_slicing"
    random_state: int = 0
    measures: tuple[str, ...] | None = None
    measure_params: dict = field(default_factory=dict)
    report: bool = True
    backend: str = "local"
    scheduler: str | None = None
    split_policy: str = "auto"
    instance: str = "auto"
    group_partitions: str = "auto"
    filter: str = "aflite"
    filter_params: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        # the measures' options are checked when the config is made: a bad option is refused
        # before any data is read (the rest waits for validate(), which fills defaults in)
        self._check_measure_params()

    def _check_measure_params(self) -> None:
        """Every measure option against its declaration (:mod:`aflite_core.schema`): an
        unknown measure or key is refused listing the allowed ones, a value out of its
        declaration with what was expected and what arrived."""
        if not self.measure_params:
            return

        if not isinstance(self.measure_params, Mapping) or not all(
            isinstance(v, Mapping) for v in self.measure_params.values()
        ):
            raise TypeError(
                "measure_params: expected a dict of dicts such as "
                f"{{'projection': {{'method': 'pca'}}}}, got {self.measure_params!r}"
            )
        known = registry.names()
        bad = sorted(set(self.measure_params) - set(known))
        if bad:
            raise ValueError(f"measure_params: unknown measure(s) {bad}; expected some of "
                             f"{list(known)}")
        for name, values in self.measure_params.items():
            registry.get(name).check_params(values)

    def validate(self) -> AuditConfig:
        """Check the values that can be checked without data; return ``self``.

        Raises
        ------
        ValueError, TypeError
            Naming the field, what was expected and what arrived.
        """
        if isinstance(self.group_partitions, bool):  # the switch of earlier versions
            self.group_partitions = "on" if self.group_partitions else "off"
        check_choice("representation", self.representation, REPRESENTATIONS)
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
        for name, value in self.representation_params.items():
            declared = _PARAMETER.get(name)
            if declared is not None and declared.where == REPRESENTATION_PARAM:
                check_value(declared, value)
        for name in ("target_size", "train_size", "slice_size", "n_partitions", "tau",
                     "strategy"):
            if getattr(self, name) is not None or name not in SCALED_FIELDS:
                check_value(_PARAMETER[name], getattr(self, name))
        if self.strategy == "greedy" and self.slice_size not in (None, 1):
            raise ValueError(f"slice_size: expected None or 1 for strategy='greedy' (one row "
                             f"per round), got {self.slice_size!r}")
        self._validate_filter()
        check_choice("backend", self.backend, ("local", "dask"))
        check_choice("split_policy", self.split_policy, SPLIT_POLICIES)
        check_choice("instance", self.instance, INSTANCES)
        check_value(_PARAMETER["group_partitions"], self.group_partitions)
        if self.scheduler is not None and self.backend != "dask":
            raise ValueError(
                f"scheduler: only used with backend='dask', got scheduler={self.scheduler!r} "
                f"with backend={self.backend!r}"
            )
        if self.scheduler is not None:
            from aflite_core.filter import check_scheduler  # lazy: +198 ms to import

            check_scheduler(self.scheduler, self.backend)  # local:N bounded, addresses
        check_value(_PARAMETER["random_state"], self.random_state)
        fold_threads()  # $AFLITE_FOLD_THREADS checked before any data is read
        known = registry.names()
        if self.measures is None:
            self.measures = registry.default_names()
        measures = (self.measures,) if isinstance(self.measures, str) else tuple(self.measures)
        bad = [m for m in measures if m not in known]
        if bad:
            raise ValueError(f"measures: unknown {bad}; expected some of {known}")
        self.measures = measures
        if not isinstance(self.measure_params, Mapping):
            raise TypeError("measure_params: expected a dict of dicts such as "
                            f"{{'projection': {{'method': 'pca'}}}}, got "
                            f"{self.measure_params!r}")
        self._check_measure_params()
        return self

    def _validate_filter(self) -> None:
        check_choice("filter", self.filter, FILTERS)
        if not isinstance(self.filter_params, Mapping):
            raise TypeError(f"filter_params: expected a dict, got "
                            f"{type(self.filter_params).__name__}")
        unknown = sorted(set(self.filter_params) - set(Z_FILTER_PARAMS))
        if unknown:
            raise ValueError(f"filter_params: unknown key(s) {unknown}; expected some of "
                             f"{Z_FILTER_PARAMS} (Z-filter options)")
        if self.filter == "aflite":
            if self.filter_params:
                raise ValueError("filter_params: only used with filter='z', got "
                                 f"{dict(self.filter_params)!r} with filter='aflite'")
            return
        if self.backend != "local":
            raise ValueError("backend: the Z-filter runs locally; use backend='local'")
        if self.group_partitions == "on":
            raise ValueError("group_partitions: AFLite's partitions only; the Z-filter has "
                             "none (use filter='aflite' or group_partitions='off')")
        params = self.filter_params
        for name in ("alpha", "min_count", "until"):
            if name in params:
                check_value(_PARAMETER[name], params[name])
        if params.get("batch_size") is not None:
            check_size("batch_size", params["batch_size"], allow_all=True)

    def scaled(self, n_units: int) -> AuditConfig:
        """This configuration with every ``None`` of :data:`SCALED_FIELDS` filled in for
        ``n_units`` filtered rows (or questions), by the rules of :func:`suggest_config`.

        ``run_audit`` calls it with the units the filter will see, so ``AuditConfig()`` and
        ``suggest_config(dataset)`` give the same run.
        """
        missing = [f for f in SCALED_FIELDS if getattr(self, f) is None]
        if not missing:
            return self
        hint = size_defaults(n_units)
        values = {"target_size": hint.target_rows, "n_partitions": hint.n_partitions,
                  "train_size": hint.train_size, "slice_size": hint.slice_size}
        if self.strategy == "greedy":
            values["slice_size"] = 1
        if self.target_size is not None and self.train_size is None:
            # t is fixed rows below the target: a smaller target given by the user brings
            # the default t down with it (t = 80 % of the target) instead of failing
            target = resolve_size("target_size", self.target_size, hint.n)
            if isinstance(values["train_size"], int) and values["train_size"] >= target:
                values["train_size"] = max(1, (4 * target) // 5)
        return dataclasses.replace(self, **{f: values[f] for f in missing})

    def to_dict(self) -> dict:
        """The configuration as plain values (for ``summary.json``); a Dask client given as
        ``scheduler`` is written as its scheduler's address (a client cannot be copied)."""
        client = None if isinstance(self.scheduler, str) else self.scheduler
        data = dataclasses.asdict(self if client is None
                                  else dataclasses.replace(self, scheduler=None))
        if client is not None:
            scheduler = getattr(client, "scheduler", None)
            data["scheduler"] = str(getattr(scheduler, "address", None) or type(client).__name__)
        if self.measures is None:
            data["measures"] = list(registry.default_names())
        else:
            data["measures"] = list(self.measures)
        return data


def resolve_size(name: str, value: int | float, n: int) -> int:
    """An int size, or ``ceil(value * n)`` for a fraction (as AFLite rounds), at least 1."""
    return _resolve_size(name, value, n)


@dataclass(frozen=True)
class SizeDefaults:
    """The size-scaled AFLite defaults for ``n`` audited rows (see the module docstring)."""

    n: int
    target_fraction: float
    n_partitions: int
    train_fraction: float | None  # None: use train_rows
    train_rows: int
    slice_size: int
    tau: float = DEFAULT_TAU

    @property
    def target_rows(self) -> int:
        """Target size in rows."""
        return max(1, int(round(self.target_fraction * self.n)))

    @property
    def train_size(self) -> int | float:
        """``train_size`` as AuditConfig takes it: a fraction or a number of rows."""
        return self.train_fraction if self.train_fraction is not None else self.train_rows


def size_defaults(n_rows: int) -> SizeDefaults:
    """The size-scaled AFLite defaults for ``n_rows`` audited rows.

    Parameters
    ----------
    n_rows : int
        Rows that take part in the audit (included rows).
    """
    n = max(int(check_int("n_rows", n_rows, minimum=0)), 2)
    train = max(1, (2 * n) // 5)
    if n <= 10_000:
        return SizeDefaults(n, 0.5, 32, None, train, max(1, n // 20))
    if n <= 100_000:
        return SizeDefaults(n, 0.5, 64, None, train, max(1, n // 40))
    train = min(50_000, max(n // 10, 10_000))
    return SizeDefaults(n, 1 / 3, 64, None, train, min(10_000, max(1, n // 50)))


def suggest_config(n_rows: int, *, representation: str = "tfidf_svd",
                   measures: Sequence[str] | None = None, random_state: int = 0,
                   **changes) -> AuditConfig:
    """The default audit of a dataset with ``n_rows`` audited rows.

    Parameters
    ----------
    n_rows : int or AuditDataset
        Rows (or questions) AFLite filters; given a dataset, counted for you
        (:func:`aflite_core.filter.filter_units`: the training split under the default
        split policy, questions for multiple-choice data).
    representation : str, default "tfidf_svd"
        One of :data:`REPRESENTATIONS`; TF-IDF + SVD and the warm-up model get
        :data:`DEFAULT_COMPONENTS` dimensions.
    measures : sequence of str, optional
        Measures to compute; default: the registry's default measures.
    random_state : int, default 0
        Seed of the run.
    **changes
        Any other :class:`AuditConfig` field, set after the defaults. A ``target_size``
        at or below the default train size brings the default ``train_size`` down to 80 %
        of the target (t stays below the target, as AFLite requires).

    Returns
    -------
    AuditConfig
        Validated; ``measure_params`` holds every chosen measure's declared option defaults.
    """
    if hasattr(n_rows, "report") and hasattr(n_rows, "frame"):  # an AuditDataset

        n_rows = filter_units(n_rows, split_policy=changes.get("split_policy", "auto"),
                              instance=changes.get("instance", "auto"))
    check_choice("representation", representation, REPRESENTATIONS)
    n = max(int(check_int("n_rows", n_rows, minimum=0)), 2)
    chosen = tuple(registry.default_names() if measures is None else measures)
    measure_params = {}
    for name in chosen:
        defaults = registry.get(name).defaults(n)
        if defaults:
            measure_params[name] = defaults
    rep_params = ({"n_components": DEFAULT_COMPONENTS}
                  if representation in ("tfidf_svd", "warmup") else {})
    config = AuditConfig(
        representation=representation,
        representation_params=rep_params,
        random_state=random_state,
        measures=chosen,
        measure_params=measure_params,
        **{p.name: p.default for p in PARAMETERS
           if p.where == "field" and p.name not in ("representation", "random_state")
           and p.default != SCALED},
    )
    config = dataclasses.replace(config, **changes) if changes else config
    return config.validate().scaled(n)


_PARAMETER = {p.name: p for p in PARAMETERS}


def estimate_rounds(n: int, target: int, slice_size: int) -> int:
    """Upper bound on AFLite rounds: ``ceil((n - target) / k)``."""
    if slice_size < 1 or target >= n:
        return 0
    return -(-(n - target) // slice_size)
