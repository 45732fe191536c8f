"""Every run parameter, declared once: default, bounds, choices, help, flag and label.

The CLI's ``run`` flags (:mod:`aflite_core.commands.run`), the dashboard's parameter form
(``ui/audit/view.py``), :func:`aflite_core.config.suggest_config` and the table of defaults in
``docs/architecture.md`` (:func:`defaults_table`) are all built from :data:`PARAMETERS` and
from the options the measures declare in :mod:`aflite_core.measures.registry`;
``tests/test_parameters.py`` checks that they agree.

A parameter whose ``default`` is :data:`SCALED` takes its value from the size of the data
(:func:`aflite_core.config.size_defaults`): ``AuditConfig()`` leaves it ``None`` and the audit
fills it in for the rows (or questions) it filters, exactly as ``suggest_config`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aflite_core.filter import INSTANCES, SPLIT_POLICIES
from aflite_core.measures import registry
from aflite_core.schema import SCALED, Option

#: Representations Φ (the last two are text encoders, optional extras).
REPRESENTATIONS = ("tfidf_svd", "warmup", "precomputed", "static", "sentence_transformers")
#: AFLite's strategies (greedy: one row per round, the slice size is 1).
STRATEGIES = ("greedy_slicing", "slice_sampling", "greedy")
#: Whether AFLite's partitions train on whole groups (see :data:`AuditConfig.group_partitions`).
GROUP_PARTITIONS = ("auto", "on", "off")
#: Filters an audit can run: AFLite, or the Z-filter (:mod:`aflite_core.filter._zfilter`).
FILTERS = ("aflite", "z")
#: How an encoder makes one row of Φ from the premise u and the hypothesis v.
COMBINE_MODES = ("interaction", "concat", "hypothesis")
#: Z-filter stopping rules.
Z_UNTIL = ("threshold", "target_size")
#: Dimensions of the default TF-IDF + SVD representation.
DEFAULT_COMPONENTS = 256
#: tau of every default audit.
DEFAULT_TAU = 0.75

#: Where a parameter lives in :class:`~aflite_core.config.AuditConfig`.
FIELD, FILTER_PARAM, REPRESENTATION_PARAM = "field", "filter_params", "representation_params"


@dataclass(frozen=True)
class Parameter(Option):
    """One run parameter: an :class:`~aflite_core.schema.Option` with a ``run`` flag and a
    place in :class:`~aflite_core.config.AuditConfig`.

    Attributes
    ----------
    flag : str
        The ``run`` command's flag.
    where : {"field", "filter_params", "representation_params"}
        Where the value goes in ``AuditConfig`` (``name`` is the field, or the key).
    section : str
        ``aflite``, ``z`` (Z-filter), ``representation`` or ``audit``: which part of the form
        and of ``run --help`` shows it.

    The rest (name, label, help, kind, default, choices, bounds, ``scaled_rule``,
    ``cli_syntax``) is the option's; a ``size`` is a number of rows (int >= 1) or a fraction
    in (0, 1).
    """

    flag: str = field(default="", kw_only=True)
    where: str = field(default=FIELD, kw_only=True)
    section: str = field(default="aflite", kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.flag.startswith("--"):
            raise ValueError(f"parameter {self.name!r}: expected a flag such as --tau, got "
                             f"{self.flag!r}")

    @property
    def dest(self) -> str:
        """The argparse destination of :attr:`flag`."""
        return self.flag.lstrip("-").replace("-", "_")


def _p(name: str, flag: str, label: str, help: str, kind: str, default: Any,
       **declared: Any) -> Parameter:
    """A :class:`Parameter` written in the order the table below reads."""
    return Parameter(name, label, default, help=help, kind=kind, flag=flag, **declared)


_SIZE_RULE = "<= 10k rows: {small}; <= 100k: {medium}; above: {large}"

PARAMETERS: tuple[Parameter, ...] = (
    _p("filter", "--filter", "Filter", "AFLite removes the rows linear models on Φ "
              "predict best; the Z-filter removes rows until no hypothesis word's label "
              "distribution differs significantly from the data's (|z| under the Bonferroni "
              "threshold) or the target size is reached.", "choice", "aflite",
              choices=FILTERS, section="audit"),
    _p("target_size", "--target-size", "Target size (rows)", "How many rows the "
              "filter keeps at least (a number of rows, or a fraction of the filterable "
              "rows); it never goes below this size.", "size", SCALED,
              scaled_rule=_SIZE_RULE.format(small="50%", medium="50%", large="1/3")),
    _p("n_partitions", "--partitions", "Partitions m", "m: random train/held-out "
              "splits per round; more gives steadier scores.", "int", SCALED,
              minimum=1, maximum=512,
              scaled_rule=_SIZE_RULE.format(small="32", medium="64", large="64")),
    _p("train_size", "--train-size", "Train size t (share, or rows if ≥ 1)",
              "t: rows each split trains on (or a fraction of the current set); the rest "
              "is held out.", "size", SCALED,
              scaled_rule=_SIZE_RULE.format(small="40% of n", medium="40% of n",
                                            large="min(50,000, n/10)")
              + "; below the target: 80% of a smaller target"),
    _p("slice_size", "--slice-size", "Slice size k (rows)", "k: at most this many "
              "of the most predictable rows are removed per round (1 with the greedy "
              "strategy).", "size", SCALED,
              scaled_rule=_SIZE_RULE.format(small="5% of n", medium="2.5% of n",
                                            large="min(10,000, n/50)")
              + "; 1 for strategy greedy"),
    _p("tau", "--tau", "Threshold τ", "Only rows predicted right at least this share "
              "of the time can be removed.", "float", DEFAULT_TAU, minimum=0.0, maximum=1.0),
    _p("strategy", "--strategy", "Strategy", "greedy slicing = the paper's AFLite; "
              "slice sampling draws k by predictability; greedy removes one row per round.",
              "choice", "greedy_slicing", choices=STRATEGIES),
    _p("group_partitions", "--group-partitions", "AFLite's partitions keep groups "
              "together", "on: each partition trains on whole groups (a premise's "
              "hypotheses, linked texts, the --group column), so no row is scored by a model "
              "that saw its group; off: rows, as in the paper; auto: on when the data has "
              "groups and none holds more than 25% of the filtered rows.", "choice", "auto",
              choices=GROUP_PARTITIONS),
    _p("random_state", "--seed", "Seed", "Seed of every random choice; same data + "
              "parameters + seed = same result.", "int", 0, minimum=0, maximum=2**32 - 1,
              section="audit"),
    _p("split_policy", "--split-policy", "Split policy", "auto: filter the train "
              "split only and keep dev/test (scored by models of the retained train rows) "
              "when there is a split column with train rows, else every row together; "
              "joint: every row together (the paper); per_split: each split on its own.",
              "choice", "auto", choices=SPLIT_POLICIES, section="audit"),
    _p("instance", "--instance", "Instance", "auto: a question for multiple-choice "
              "data (kept or removed whole), else a row.", "choice", "auto",
              choices=INSTANCES, section="audit"),
    _p("alpha", "--z-alpha", "Z-filter level α", "Family-wise level of the z tests "
              "(two-sided, Bonferroni over every word and label).", "float", 0.01,
              where=FILTER_PARAM, minimum=0.0, maximum=1.0, open_bounds=True, section="z"),
    _p("until", "--z-until", "Z-filter stops", "threshold: stop once no word's |z| "
              "passes the threshold (or at the target size); target_size: go on to the "
              "target size.", "choice", "threshold", where=FILTER_PARAM, choices=Z_UNTIL,
              section="z"),
    _p("min_count", "--z-min-count", "Z-filter minimum count", "Words in fewer rows "
              "than this are not tested.", "int", 5, where=FILTER_PARAM, minimum=1,
              maximum=10_000, section="z"),
    _p("representation", "--representation", "Representation Φ", "Features Φ the "
              "linear models see (AFLite needs a fixed representation).", "choice",
              "tfidf_svd", choices=REPRESENTATIONS, section="representation",
              cli_syntax="tfidf-svd | warmup | precomputed:PATH | static:NAME | "
                         "sentence-transformers:NAME (NAME: a model folder, a packaged model "
                         "such as all-MiniLM-L6-v2, or a hub name, which may download it)"),
    _p("n_components", "--n-components", "Dimensions", "Dimension of Φ (TF-IDF reduced "
              "by SVD, or the warm-up model's hidden layer).", "int", DEFAULT_COMPONENTS,
              where=REPRESENTATION_PARAM, minimum=2, maximum=1024, section="representation"),
    _p("warmup_fraction", "--warmup-fraction", "Warm-up fraction", "Share of rows used "
              "to train the warm-up model; they are not filtered.", "float", 0.1,
              where=REPRESENTATION_PARAM, minimum=0.02, maximum=0.5, section="representation"),
    _p("combine", "--combine", "Premise and hypothesis", "Encoders: how the premise (u) "
              "and hypothesis (v) embeddings make one row of Φ: [u, v, |u−v|, u·v], [u, v] "
              "or v alone.", "choice", "interaction", where=REPRESENTATION_PARAM,
              choices=COMBINE_MODES, section="representation"),
)

BY_NAME: dict[str, Parameter] = {p.name: p for p in PARAMETERS}


def get(name: str) -> Parameter:
    """The parameter called ``name``.

    Raises
    ------
    KeyError
        Naming the parameters there are.
    """
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no parameter {name!r}; expected one of {sorted(BY_NAME)}") from None


def check_value(parameter: Option, value: Any) -> Any:
    """Check ``value`` against the declaration (:meth:`~aflite_core.schema.Option.check`);
    return it.

    Raises
    ------
    TypeError, ValueError
        ``"{name}: expected ..., got ..."``.
    """
    return parameter.check(value)


def shown_default(parameter: Option) -> str:
    """The default as help texts and the table show it."""
    return parameter.shown_default()


def measure_flag(measure: str, option: str) -> str:
    """The ``run`` flag of a measure's option: ``--projection-n-neighbors``."""
    return f"--{measure.replace('_', '-')}-{option.replace('_', '-')}"


def defaults_table(measures: Mapping[str, Any] | None = None) -> str:
    """The Markdown table of every run parameter: flag, default, bounds or choices.

    ``measures`` (default: the registry's) adds a row per measure option, flag
    ``--<measure>-<option>``. ``docs/architecture.md`` holds this table (a test keeps it
    equal).
    """
    rows = ["| parameter | `run` flag | default | allowed |", "|---|---|---|---|"]
    for p in PARAMETERS:
        where = p.name if p.where == FIELD else f"{p.where}[{p.name!r}]"
        rows.append(f"| `{where}` | `{p.flag}` | {p.shown_default()} | {p.allowed()} |")
    for measure in (registry.measures() if measures is None else measures.values()):
        for option in measure.options:
            flag = (option.cli_syntax if option.name in measure.inputs
                    else measure_flag(measure.name, option.name))
            rows.append(f"| `measure_params[{measure.name!r}][{option.name!r}]` | "
                        f"`{flag}` | "
                        f"{option.shown_default()} | {option.allowed()} |")
    return "\n".join(rows) + "\n"
