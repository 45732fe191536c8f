"""The loader's report: :class:`ValidationReport` and :func:`build_report`.

What loading found (sizes, exclusions by reason, labels, duplicates, text lengths, warnings),
computed from the rows' labels and exclusions and from the text columns' per-row facts
(:class:`~aflite_core.io._text_facts.TextFacts`): the texts themselves are not read here, so
the report of a dataset whose texts never were all in memory (the streamed load) is the one
of the same rows loaded whole.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from aflite_core.io._column_roles import ColumnMapping
from aflite_core.io._readers import short_repr
from aflite_core.io._text_columns import (
    count_distinct,
    distinct_and_conflicting,
    label_factors,
    pair_hashes,
)
from aflite_core.io._text_facts import TextFacts

__all__ = ["ValidationReport", "build_report"]


@dataclass
class ValidationReport:
    """What loading found: sizes, exclusions by reason, labels, warnings, text stats.

    Attributes
    ----------
    source : str
        File name shown in messages.
    n_read : int
        Rows read (after multiple-choice expansion: rows produced).
    n_included : int
        Rows taking part in the audit.
    excluded : dict
        Reason -> number of rows, e.g. ``{"label '-'": 158, "empty label": 2}``.
    label_counts : dict
        Label -> number of included rows, most frequent first.
    warnings : list of str
        Suspicious but valid things (single-example labels, one label only, ...).
    format : str
        File format read.
    duplicates : dict
        Among included rows: ``exact`` (rows whose premise+hypothesis text equals an
        earlier row's), ``normalised`` (same after case-folding, dropping punctuation
        and collapsing whitespace) and ``conflicting_labels`` (normalised groups that
        carry more than one label).
    text_lengths : dict
        ``{"hypothesis": {"min", "median", "max"}, "premise": {...}}`` in characters,
        over included rows.
    n_questions : int or None
        Multiple-choice questions expanded (None for other data).
    suggested_id : str or None
        An id-like column with unique values (e.g. SNLI's ``pairID``) one may pass as
        ``id=``.
    encoding : str or None
        Text encoding used (None for Parquet).
    notes : list of str
        Decisions the loader took that change how the data is audited (e.g. grouping
        rows by premise), each with how to undo it.
    n_groups : int or None
        Groups among the included rows (None without a group column).
    """

    source: str
    n_read: int
    n_included: int
    excluded: dict[str, int]
    label_counts: dict[str, int]
    warnings: list[str] = field(default_factory=list)
    format: str = ""
    duplicates: dict[str, int] = field(default_factory=dict)
    text_lengths: dict[str, dict[str, float]] = field(default_factory=dict)
    n_questions: int | None = None
    suggested_id: str | None = None
    encoding: str | None = None
    notes: list[str] = field(default_factory=list)
    n_groups: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready built-in types."""
        return _jsonable(asdict(self))


def _duplicate_stats(facts: dict[str, TextFacts], mapping: ColumnMapping, mask: np.ndarray,
                     label_ids: np.ndarray) -> dict[str, int]:
    """Rows of the same text (premise and hypothesis) as an earlier one, exactly and after
    normalising (lower case, no punctuation or symbols, collapsed whitespace), and the
    normalised texts given more than one label (included rows only)."""
    n = int(mask.sum())
    if not n:
        return {"exact": 0, "normalised": 0, "conflicting_labels": 0}
    hyp = facts[mapping.hypothesis]
    if n == len(mask):
        mask = slice(None)  # every row: no masked copies
    if mapping.premise is None:
        exact = count_distinct(hyp.hashes[mask])
        normalised = hyp.normalised[mask]
    else:  # one key "premise\0hypothesis": its ends are the premise's left, hypothesis' right
        prem = facts[mapping.premise]
        exact = count_distinct(pair_hashes(prem.hashes[mask], hyp.hashes[mask]))
        normalised = pair_hashes(prem.normalised[mask], hyp.normalised[mask])
    distinct, conflicting = distinct_and_conflicting(normalised, label_ids[mask])
    return {"exact": n - exact, "normalised": n - distinct, "conflicting_labels": conflicting}


def _length_stats(lengths: np.ndarray) -> dict[str, float]:
    if not len(lengths):
        return {"min": 0, "median": 0.0, "max": 0}
    return {
        "min": int(lengths.min()),
        "median": float(np.median(lengths)),
        "max": int(lengths.max()),
    }


def build_report(
    frame: pd.DataFrame,
    mapping: ColumnMapping,
    exclusion: pd.Series,
    facts: dict[str, TextFacts],
    *,
    source: str,
    fmt: str,
    warnings: list[str],
    n_questions: int | None,
    suggested_id: str | None,
    encoding: str | None,
) -> ValidationReport:
    """The :class:`ValidationReport` of ``frame``'s rows: ``exclusion`` (``""``: included),
    the label column of ``frame`` and the premise's and hypothesis' ``facts``
    (:func:`~aflite_core.io._text_facts.text_facts`); the texts are not read."""
    mask = (exclusion.to_numpy() == "").astype(bool)
    reasons = exclusion[~mask].value_counts()
    excluded = {str(k): int(v) for k, v in reasons.items()}
    ids, names = label_factors(frame[mapping.label])
    label_counts = _label_counts(ids[mask], names)
    # the duplicates before the lengths: their temporaries' peak without the lengths' arrays
    duplicates = _duplicate_stats(facts, mapping, mask, ids)
    rows = slice(None) if mask.all() else mask
    lengths = {"hypothesis": _length_stats(facts[mapping.hypothesis].lengths[rows])}
    if mapping.premise is not None:
        lengths["premise"] = _length_stats(facts[mapping.premise].lengths[rows])
    n_included = int(mask.sum())
    return ValidationReport(
        source=source,
        n_read=len(frame),
        n_included=n_included,
        excluded=excluded,
        label_counts=label_counts,
        warnings=list(warnings) + _label_warnings(label_counts, n_included, mapping.label),
        format=fmt,
        duplicates=duplicates,
        text_lengths=lengths,
        n_questions=n_questions,
        suggested_id=suggested_id,
        encoding=encoding,
    )


def _label_counts(ids: np.ndarray, names: np.ndarray) -> dict[str, int]:
    """Label -> count, most frequent first (ties in label order)."""
    counts = np.bincount(ids, minlength=len(names))
    order = sorted(np.flatnonzero(counts).tolist(), key=lambda i: (-counts[i], str(names[i])))
    return {str(names[i]): int(counts[i]) for i in order}


def _label_warnings(label_counts: dict[str, int], n_labels: int, column: str) -> list[str]:
    """Suspicious label distributions: one label only, single-example labels, an id-like
    column (more than 50 distinct values, more than half the rows)."""
    warnings = []
    singles = [str(u) for u, c in label_counts.items() if c == 1]
    if len(label_counts) == 1 and n_labels:
        only = next(iter(label_counts))
        warnings.append(
            f"all {n_labels} included rows have the same label {short_repr(only)}: nothing "
            f"to audit (check the label column {column!r})"
        )
    if singles:
        shown = ", ".join(map(short_repr, singles[:10])) + (" ..." if len(singles) > 10 else "")
        warnings.append(
            f"{len(singles)} label(s) have a single example ({shown}); AFLite and the cue "
            "statistics need at least two per label"
        )
    if len(label_counts) > 50 and len(label_counts) > n_labels / 2:
        warnings.append(
            f"the label column {column!r} has {len(label_counts)} distinct values for "
            f"{n_labels} rows: is it really the label?"
        )
    return warnings


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value
