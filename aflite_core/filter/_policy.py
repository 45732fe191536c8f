"""Which rows AFLite filters, which it only scores, and what one instance is.

Split policies (``AuditConfig.split_policy``):

``train_only`` (the default when the split column has training rows and other rows)
    AFLite filters the training split; dev/test/trial rows are never removed, and are scored
    by models trained on the retained training rows (:meth:`AFLite.score_heldout`). This is
    what a curator publishing a filtered training set wants: the evaluation splits stay
    comparable with earlier results (SICK filtered jointly lost half of TEST).
``joint``
    Every row is filtered together, whatever its split (the AFLite paper's recipe on SNLI's
    training set; the default without a usable split column).
``per_split``
    Each split value is filtered on its own, towards the same target fraction.

Instances (``AuditConfig.instance``): ``row``, or ``question`` for multiple-choice data (the
default there): a question is kept or removed whole (:mod:`aflite_core.filter._multiple_choice`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aflite_core._validation import check_choice

SPLIT_POLICIES = ("auto", "train_only", "joint", "per_split")
INSTANCES = ("auto", "row", "question")


@dataclass(frozen=True)
class FilterPlan:
    """The resolved policy, over the dataset's *included* rows.

    Attributes
    ----------
    policy : {"train_only", "joint", "per_split"}
    instance : {"row", "question"}
    blocks : list of (name, ndarray of bool)
        Rows filtered together: one block, or one per split value with ``per_split``.
    scored : ndarray of bool
        Rows never filtered, scored with models of the retained rows (``train_only``).
    questions : ndarray or None
        Question id of every row when ``instance == "question"``.
    description : str
        One sentence for the summary and the report.
    """

    policy: str
    instance: str
    blocks: list[tuple[str, np.ndarray]]
    scored: np.ndarray
    questions: np.ndarray | None = None
    description: str = ""
    split_sizes: dict[str, int] = field(default_factory=dict)

    @property
    def filtered(self) -> np.ndarray:
        """Rows in any block."""
        out = np.zeros(len(self.scored), dtype=bool)
        for _, rows in self.blocks:
            out |= rows
        return out


def question_ids(dataset: Any) -> np.ndarray | None:
    """Question id of each included row of multiple-choice data, else None."""
    if getattr(dataset.report, "n_questions", None) is None:
        return None
    column = next((c for c in dataset.frame.columns if str(c).startswith("question_id")), None)
    if column is None:
        return None
    return np.asarray(dataset.frame.loc[dataset.included_mask, column].astype(str))


def _split_roles(dataset: Any) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Split value of each included row (as written, trimmed) and whether it is training."""
    from aflite_core.io import label_factors  # lazy: +401 ms to import
    from aflite_core.splits import TRAIN_VALUES  # lazy: +405 ms to import

    column = dataset.columns.split
    if column is None:
        return None, None
    # the distinct values trimmed and compared, then broadcast (a str per row was made three
    # times: 0.25 GB each at 5M rows); the values of dataset.splits(), one str per value
    ids, names = label_factors(dataset.frame[column])
    names = np.asarray([str(s).strip() for s in names], dtype=object)
    ids = ids[dataset.included_mask]
    train = np.isin(np.char.lower(names.astype(str)), list(TRAIN_VALUES))
    return names[ids], train[ids]


def plan_filter(dataset: Any, exclude: np.ndarray | None = None, *,
                split_policy: str = "auto", instance: str = "auto") -> FilterPlan:
    """Resolve the split policy and the instance for ``dataset``.

    Parameters
    ----------
    dataset : AuditDataset
    exclude : ndarray of bool, optional
        Included rows that take no part (warm-up rows).
    split_policy : {"auto", "train_only", "joint", "per_split"}
    instance : {"auto", "row", "question"}

    Raises
    ------
    ValueError
        For ``train_only``/``per_split`` without a usable split column, or ``question`` on
        data that is not multiple choice.
    """
    check_choice("split_policy", split_policy, SPLIT_POLICIES)
    check_choice("instance", instance, INSTANCES)
    n = int(dataset.report.n_included)
    usable = np.ones(n, dtype=bool) if exclude is None else ~np.asarray(exclude, dtype=bool)
    questions = question_ids(dataset)
    if instance == "question" and questions is None:
        raise ValueError("instance: 'question' needs multiple-choice data: load a wide file "
                         "with choices=[...] and answer=..., or a per-choice file with "
                         "question=COL")
    resolved_instance = "question" if (instance == "auto" and questions is not None) \
        else ("row" if instance == "auto" else instance)
    values, train = _split_roles(dataset)
    has_pair = train is not None and train.any() and not train.all()
    policy = split_policy
    if policy == "auto":
        policy = "train_only" if has_pair else "joint"
    if policy in ("train_only", "per_split") and values is None:
        raise ValueError(f"split_policy: {policy!r} needs a split column; this dataset has "
                         "none (use 'joint')")
    if policy == "train_only" and not has_pair:
        raise ValueError("split_policy: 'train_only' needs training rows (split 'train') and "
                         "other rows in the split column; use 'joint'")
    sizes = {} if values is None else {str(v): int((values == v).sum())
                                       for v in dict.fromkeys(values.tolist())}
    scored = np.zeros(n, dtype=bool)
    if policy == "train_only":
        blocks = [("train", usable & train)]
        scored = usable & ~train
        text = (f"AFLite filtered the training split ({int(blocks[0][1].sum()):,} rows); the "
                f"other {int(scored.sum()):,} rows were kept and scored by models trained on "
                "the retained training rows")
    elif policy == "per_split":
        blocks = [(str(v), usable & (values == v)) for v in dict.fromkeys(values.tolist())]
        text = "AFLite filtered each split on its own: " + ", ".join(
            f"{name} ({int(rows.sum()):,} rows)" for name, rows in blocks)
    else:
        blocks = [("all", usable)]
        text = f"AFLite filtered all {int(usable.sum()):,} rows together"
        if values is not None:
            text += " (every split jointly)"
    if resolved_instance == "question":
        text += "; a question is the instance (kept or removed whole)"
    return FilterPlan(policy=policy, instance=resolved_instance, blocks=blocks, scored=scored,
                      questions=questions if resolved_instance == "question" else None,
                      description=text + ".", split_sizes=sizes)


def filter_units(dataset: Any, *, split_policy: str = "auto", instance: str = "auto") -> int:
    """How many instances (rows, or questions) AFLite will filter: what
    :func:`aflite_core.config.suggest_config` scales its defaults to."""
    plan = plan_filter(dataset, split_policy=split_policy, instance=instance)
    rows = plan.filtered
    if plan.questions is not None:
        return int(len(np.unique(plan.questions[rows])))
    return int(rows.sum())
