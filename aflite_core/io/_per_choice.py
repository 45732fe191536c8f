"""Per-choice (long) multiple-choice files: one row per choice, a question column, and a
label saying whether that choice is the correct one.

ARCT's published files are like this (``id`` names the question, ``label`` is ``correct`` or
``incorrect``). Given ``question=COL`` (CLI ``--question COL``), or detected when a column
groups the rows so that every group of two or more rows has exactly one correct choice, the
data is audited per question, like a wide file expanded by :mod:`aflite_core.io._choices`:
a question id column and a ``right``/``wrong`` label column are added (the file's own
columns are kept as they are), and AFLite keeps or removes each question whole.

Correct / incorrect are read case-insensitively from ``correct``/``incorrect``,
``right``/``wrong``, ``true``/``false``, ``1``/``0`` and ``yes``/``no`` (booleans and 0/1
numbers too). A question without exactly one correct choice is excluded from the audit with
the reason :data:`REASON_NOT_ONE_CORRECT` and counted in a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from aflite_core.errors import ColumnError
from aflite_core.io._column_roles import RIGHT, WRONG, ColumnMapping
from aflite_core.io._text_columns import label_factors

#: Label values read as "this choice is correct" / "incorrect" (lower-cased, trimmed).
CORRECT_VALUES = frozenset({"correct", "right", "true", "1", "yes", "1.0"})
INCORRECT_VALUES = frozenset({"incorrect", "wrong", "false", "0", "no", "0.0"})
#: Column names tried, in order, when looking for the question column of a long file.
QUESTION_NAMES = ("question_id", "qid", "question", "id", "example_id", "item_id", "group",
                  "group_id", "pair_id", "pairid", "uid")
#: Exclusion reason of the rows of a question without exactly one correct choice.
REASON_NOT_ONE_CORRECT = "question without exactly one correct choice"
#: Share of questions that may lack exactly one correct choice for detection to still
#: take a column as the question column.
DETECT_MAX_BAD_SHARE = 0.02


@dataclass(frozen=True)
class PerChoice:
    """The long layout found in (or asked of) a file.

    Attributes
    ----------
    question : str
        The file's question column.
    question_id_column, label_column : str
        The columns added: the question id (text) and ``right``/``wrong``.
    n_questions : int
        Questions with exactly one correct choice.
    bad_rows : np.ndarray of bool
        Rows of the questions without exactly one correct choice (excluded).
    flags : np.ndarray of int8
        Each row's label read as 1 (correct), 0 (incorrect) or -1 (missing).
    n_bad_questions : int
    detected : bool
        Found without ``question=``.
    """

    question: str
    question_id_column: str
    label_column: str
    n_questions: int
    bad_rows: np.ndarray
    n_bad_questions: int
    detected: bool
    flags: np.ndarray

    def note(self) -> str:
        """What the validation report says about the layout."""
        how = ("detected" if self.detected else f"from question={self.question!r}")
        return (f"per-choice multiple-choice layout ({how}): column {self.question!r} groups "
                f"the rows into {self.n_questions:,} questions with exactly one correct "
                "choice each; AFLite keeps or removes a question whole"
                + (" (pass question='' to audit the rows one by one)" if self.detected else ""))


def correct_flags(values: pd.Series) -> np.ndarray | None:
    """1 (correct), 0 (incorrect) or -1 (missing) per value; None if any present value is
    neither."""
    ids, names = label_factors(values)  # each distinct label read once
    flags = np.full(len(names), -1, dtype=np.int8)
    for i, name in enumerate(names):
        text = str(name).strip().lower()
        if text in CORRECT_VALUES:
            flags[i] = 1
        elif text in INCORRECT_VALUES:
            flags[i] = 0
        elif text:
            return None
    return flags[ids]


def _question_stats(codes: np.ndarray, flags: np.ndarray) -> tuple[int, np.ndarray, int]:
    """``(good questions, bad-row mask, bad questions)``: a good question has two or more
    rows and exactly one correct one; a row with a missing label makes its question bad."""
    n_groups = int(codes.max()) + 1 if len(codes) else 0
    size = np.bincount(codes, minlength=n_groups)
    n_right = np.bincount(codes, weights=(flags == 1), minlength=n_groups)
    n_missing = np.bincount(codes, weights=(flags < 0), minlength=n_groups)
    good = (size >= 2) & (n_right == 1) & (n_missing == 0)
    return int(good.sum()), ~good[codes], int((~good).sum())


def _unique(base: str, existing: set[str]) -> str:
    name = base
    while name in existing:
        name = f"{name}_mc"
    return name


def find_per_choice(frame: pd.DataFrame, mapping: ColumnMapping, question: str | None
                    ) -> PerChoice | None:
    """The long layout of ``frame``: from ``question`` (a column name), or detected when it
    is ``None``; ``""`` (or nothing found) gives ``None``.

    Raises
    ------
    ColumnError
        ``question`` names a column whose groups are not per-choice questions, or the label
        column does not say correct / incorrect.
    """
    if question == "":
        return None
    flags = correct_flags(frame[mapping.label])
    existing = {str(c) for c in frame.columns}
    if question is not None:
        if flags is None:
            seen = sorted({str(v) for v in frame[mapping.label].dropna().unique()})[:6]
            raise ColumnError(
                f"question={question!r}: the label column {mapping.label!r} must say whether "
                f"each row's choice is correct (correct/incorrect, right/wrong, true/false, "
                f"1/0, yes/no), got values such as {seen}")
        return _layout(frame, question, flags, existing, detected=False, strict=True)
    if flags is None or not (flags == 1).any():
        return None
    taken = {mapping.premise, mapping.hypothesis, mapping.label, mapping.split}
    by_lower = {str(c).lower(): str(c) for c in frame.columns if str(c) not in taken}
    for name in QUESTION_NAMES:
        column = by_lower.get(name)
        if column is not None:
            found = _layout(frame, column, flags, existing, detected=True, strict=False)
            if found is not None:
                return found
    return None


def _layout(frame: pd.DataFrame, column: str, flags: np.ndarray, existing: set[str], *,
            detected: bool, strict: bool) -> PerChoice | None:
    values = frame[column]
    codes, uniques = pd.factorize(values.astype("string"), use_na_sentinel=True)
    if (codes < 0).any():
        if strict:
            raise ColumnError(f"question={column!r}: {int((codes < 0).sum()):,} rows have no "
                              "question id")
        return None
    if len(uniques) == len(values):  # every row its own question: not per-choice data
        if strict:
            raise ColumnError(f"question={column!r}: every row has its own value, so no "
                              "question has several choices; name the column that groups "
                              "the choices of a question")
        return None
    n_good, bad_rows, n_bad = _question_stats(codes, flags)
    if not strict and (n_good == 0 or n_bad > DETECT_MAX_BAD_SHARE * (n_good + n_bad)):
        return None
    if n_good == 0:
        raise ColumnError(f"question={column!r}: no question has exactly one correct choice "
                          "among two or more rows")
    question_id = _unique("question_id", existing)
    label = _unique("choice_label", existing | {question_id})
    return PerChoice(column, question_id, label, n_good, bad_rows, n_bad, detected, flags)


def apply_per_choice(frame: pd.DataFrame, mapping: ColumnMapping, layout: PerChoice
                     ) -> tuple[pd.DataFrame, ColumnMapping]:
    """The frame with the question id and ``right``/``wrong`` label columns added (first),
    and the mapping that audits it per question (label: the new column; group: the
    question)."""
    labels = np.where(layout.flags == 1, RIGHT, WRONG).astype(object)
    labels[layout.bad_rows] = ""
    added = pd.DataFrame({
        layout.question_id_column: frame[layout.question].astype("string").astype(object),
        layout.label_column: labels,
    }, index=frame.index)
    out = pd.concat([added, frame], axis=1)
    return out, replace(mapping, label=layout.label_column, group=layout.question_id_column)
