"""Multiple-choice data as rows: a wide file (one row per question, a column per choice and an
answer column) expanded into one row per choice, with the answer read as a number (0- or
1-based, inferred) or as the text of a choice.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from aflite_core.io._column_roles import (
    PREMISE_NAMES,
    RIGHT,
    SPLIT_NAMES,
    WRONG,
    ColumnMapping,
    check_ids,
    check_scalar_columns,
    column_names,
    columns_text,
    find,
    require_column,
)
from aflite_core.io._readers import (
    ColumnError,
    RawTable,
    short_repr,
)
from aflite_core.io._text_columns import (
    as_text,
)

# -------------------------------------------------------------- multiple choice


def _unique_name(base: str, existing: set[str]) -> str:
    name = base
    while name in existing:
        name = f"{name}_mc"
    return name


def mc_locator(raw: RawTable, k: int) -> Callable[[int], str]:
    def where(position: int) -> str:
        return f"{raw.where(position // k)}, choice {position % k}"

    return where


def expand_choices(
    raw: RawTable,
    *,
    choices: Sequence[str],
    answer: str | None,
    premise: str | None,
    hypothesis: str | None,
    label: str | None,
    split: str | None,
    id_column: str | None,
    answer_base: int | None,
) -> tuple[pd.DataFrame, ColumnMapping]:
    """One row per (question, choice), with every original column, and its mapping."""
    choices, answer = _check_choice_arguments(
        raw, choices, answer=answer, hypothesis=hypothesis, label=label, answer_base=answer_base
    )
    premise, split = _choice_context_roles(
        raw, choices, answer=answer, premise=premise, split=split, id_column=id_column
    )
    roles = {"premise": premise, "split": split, "answer": answer}
    check_scalar_columns(raw, roles | {f"choice {c!r}": c for c in choices})
    index = _answer_indices(raw, raw.frame, choices, answer, answer_base)
    questions = _question_ids(raw, id_column)
    columns = _mc_column_names(set(column_names(raw)))
    out = _expanded_frame(raw.frame, choices, index, questions, columns,
                          positions=id_column is None)
    _, _, choice_col, label_col = columns
    mapping = ColumnMapping(
        hypothesis=choice_col, label=label_col, premise=premise, split=split, id=id_column
    )
    return out, mapping


def _check_choice_arguments(
    raw: RawTable,
    choices: Sequence[str],
    *,
    answer: str | None,
    hypothesis: str | None,
    label: str | None,
    answer_base: int | None,
) -> tuple[list[str], str]:
    """The ``choices=`` columns as a list and the ``answer=`` column, after checking both."""
    if isinstance(choices, str) or not isinstance(choices, Sequence):
        raise TypeError(f"choices: expected a list of column names, got {choices!r}")
    choices = list(choices)
    if len(choices) < 2:
        raise ValueError(f"choices: expected at least 2 columns, got {choices!r}")
    if len(set(choices)) != len(choices):
        raise ValueError(f"choices: a column is listed twice in {choices!r}")
    names = column_names(raw)
    for col in choices:
        require_column(col, names, raw, "choices")
    if answer is None:
        raise ColumnError(
            f"{raw.name}: answer= is required with choices=: name the column holding the "
            f"right choice (its index or text); columns are {columns_text(names)}"
        )
    if hypothesis is not None or label is not None:
        raise ColumnError(
            f"{raw.name}: with choices= the hypothesis is each choice and the label is "
            "right/wrong; do not pass hypothesis= or label="
        )
    if answer_base not in (None, 0, 1) or isinstance(answer_base, bool):
        raise ValueError(f"answer_base: expected 0, 1 or None, got {answer_base!r}")
    return choices, answer


def _choice_context_roles(
    raw: RawTable,
    choices: list[str],
    *,
    answer: str,
    premise: str | None,
    split: str | None,
    id_column: str | None,
) -> tuple[str | None, str | None]:
    """Premise (the context) and split columns of multiple-choice data: given or guessed."""
    names = column_names(raw)
    taken = {*choices, answer} | ({id_column} if id_column else set())
    if premise is None:
        premise = find(names, PREMISE_NAMES, taken, raw, "premise")
    if split is None:
        split = find(names, SPLIT_NAMES, taken | {premise}, raw, "split")
    return premise or None, split or None


def _question_ids(raw: RawTable, id_column: str | None) -> list[Any]:
    """Each question's id: the ``id=`` column's values (checked unique) or its position."""
    if id_column is None:
        return list(range(len(raw.frame)))
    check_ids(raw, raw.frame[id_column], id_column, raw.where)
    return raw.frame[id_column].tolist()


def _mc_column_names(existing: set[str]) -> tuple[str, str, str, str]:
    """Names of the new question-id, choice-index, choice and label columns.

    Each is suffixed ``_mc`` (repeatedly) while the file already has a column of that name.
    """
    question = _unique_name("question_id", existing)
    index = _unique_name("choice_index", existing | {question})
    choice = _unique_name("choice", existing | {question, index})
    label = _unique_name("label", existing | {question, index, choice})
    return question, index, choice, label


def _expanded_frame(
    frame: pd.DataFrame,
    choices: list[str],
    answer_index: np.ndarray,
    questions: list[Any],
    columns: tuple[str, str, str, str],
    *,
    positions: bool,
) -> pd.DataFrame:
    """The k rows of every question: new columns first, then the question's original row.

    ``positions``: the question ids are row positions (stored as int64).
    """
    q_col, i_col, c_col, l_col = columns
    k = len(choices)
    n = len(frame)
    rep = np.repeat(np.arange(n), k)
    choice_index = np.tile(np.arange(k, dtype=np.int64), n)
    choice_values = np.empty(n * k, dtype=object)
    for j, col in enumerate(choices):
        choice_values[j::k] = frame[col].to_numpy(dtype=object)
    answer_rep = np.repeat(answer_index, k)
    labels = np.where(choice_index == answer_rep, RIGHT, WRONG).astype(object)
    labels[answer_rep < 0] = ""
    original = frame.iloc[rep].reset_index(drop=True)
    new = pd.DataFrame(
        {
            q_col: pd.Series(np.repeat(np.asarray(questions, dtype=object), k), dtype=object),
            i_col: choice_index,
            c_col: pd.Series(choice_values, dtype=object),
            l_col: pd.Series(labels, dtype=object).astype(str),
        }
    )
    if positions:
        new[q_col] = new[q_col].astype(np.int64)
    out = pd.concat([new, original], axis=1)
    out.index = pd.Index(
        [f"{q}:{j}" for q, j in zip(new[q_col].tolist(), choice_index.tolist(), strict=True)],
        name="row_id",
        dtype=object,
    )
    return out


def _int_like(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)) and np.isfinite(v) and float(v).is_integer():
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"\s*[+-]?\d+\s*", v):
        return int(v)
    return None


@dataclass
class _Answers:
    """The ``answer=`` column of multiple-choice data, next to the choices' texts."""

    raw: RawTable
    column: str
    choices: list[str]
    values: list[Any]  # the answer cell of each question
    choice_texts: list[list[str]]  # [choice][question] -> the choice's trimmed text
    present: list[int]  # questions whose answer is not empty
    ints: dict[int, int | None]  # question in ``present`` -> its answer as an int, if it is one

    @classmethod
    def read(cls, raw: RawTable, frame: pd.DataFrame, choices: list[str], column: str
             ) -> _Answers:
        values = frame[column].tolist()
        texts = [[as_text(v).strip() for v in frame[c].tolist()] for c in choices]
        present = [i for i, v in enumerate(values) if as_text(v).strip() != ""]
        ints = {i: _int_like(values[i]) for i in present}
        return cls(raw, column, choices, values, texts, present, ints)

    @property
    def k(self) -> int:
        """Number of choices."""
        return len(self.choices)

    def text(self, i: int) -> str:
        """Question ``i``'s answer as trimmed text."""
        return as_text(self.values[i]).strip()

    def matches(self, i: int) -> list[int]:
        """Choices whose text equals question ``i``'s answer."""
        a = self.text(i)
        return [j for j in range(self.k) if self.choice_texts[j][i] == a]

    def all_match_one_choice(self) -> bool:
        """Every answer is the text of exactly one of its question's choices."""
        return all(len(self.matches(i)) == 1 for i in self.present)


def _answer_indices(
    raw: RawTable, frame: pd.DataFrame, choices: list[str], answer: str, answer_base: int | None
) -> np.ndarray:
    """0-based index of the right choice per question (-1 when the answer is empty).

    Answers are read as indices when ``answer_base`` is given or every answer is an
    integer (the base then inferred by :func:`_infer_answer_base`), else as choice texts
    or letters (:func:`_answers_by_text`).
    """
    answers = _Answers.read(raw, frame, choices, answer)
    all_int = bool(answers.present) and all(v is not None for v in answers.ints.values())
    if answer_base is None and all_int:
        answer_base = _infer_answer_base(answers)  # None: read them as texts after all
    if answer_base is None:
        chosen = _answers_by_text(answers)
    else:
        chosen = _answers_by_number(answers, answer_base)
    index = np.full(len(answers.values), -1, dtype=np.int64)
    for i in answers.present:
        index[i] = chosen[i]
    return index


def _infer_answer_base(answers: _Answers) -> int | None:
    """0 or 1 for integer answers: 0-based if a 0 occurs, 1-based if k occurs.

    When neither occurs the base is ambiguous: None if every answer is also the text of
    exactly one choice (read them as texts), else an error asking for ``answer_base``.
    """
    raw, k, where = answers.raw, answers.k, answers.raw.where
    has0 = any(v == 0 for v in answers.ints.values())
    hask = any(v == k for v in answers.ints.values())
    if has0 and hask:
        first = next(i for i in answers.present if answers.ints[i] == k)
        raise ColumnError(
            f"{raw.name}: {where(first)}: answer {short_repr(answers.values[first])} in column "
            f"{answers.column!r} is out of range for {k} choices read as 0-based (0 also occurs)"
        )
    if has0 or hask:
        return 0 if has0 else 1
    if answers.all_match_one_choice():
        return None
    raise ColumnError(
        f"{raw.name}: column {answers.column!r} holds answer indices between 1 and {k - 1} "
        f"only, which read as 0-based or as 1-based for {k} choices; pass "
        "answer_base=0 or answer_base=1"
    )


def _answers_by_number(answers: _Answers, answer_base: int) -> dict[int, int]:
    """Question -> 0-based right choice, reading answers as ``answer_base``-based indices."""
    raw, k, where = answers.raw, answers.k, answers.raw.where
    idx: dict[int, int] = {}
    for i in answers.present:
        v = answers.ints[i]
        if v is None or not answer_base <= v < k + answer_base:
            lo, hi = answer_base, k - 1 + answer_base
            raise ColumnError(
                f"{raw.name}: {where(i)}: answer {short_repr(answers.values[i])} in column "
                f"{answers.column!r}; expected a {answer_base}-based index between {lo} and {hi}"
            )
        idx[i] = v - answer_base
    disagree = [i for i in answers.present if (m := answers.matches(i)) and m != [idx[i]]]
    if disagree and answers.all_match_one_choice():
        raise ColumnError(
            f"{raw.name}: column {answers.column!r} is ambiguous: its values match choice texts "
            f"and also read as {answer_base}-based indices, pointing at different choices "
            f"({where(disagree[0])}); rename the choices or pass answer_base"
        )
    return idx


def _answers_by_text(answers: _Answers) -> dict[int, int]:
    """Question -> 0-based right choice, reading answers as a choice's text or a letter."""
    raw, where, choices = answers.raw, answers.raw.where, answers.choices
    letters = {chr(ord("A") + j): j for j in range(answers.k)}
    matches = {i: answers.matches(i) for i in answers.present}
    if all(len(m) == 1 for m in matches.values()):
        return {i: m[0] for i, m in matches.items()}
    if all(answers.text(i).upper() in letters for i in answers.present):
        return {i: letters[answers.text(i).upper()] for i in answers.present}
    for i in answers.present:
        if len(matches[i]) > 1:
            raise ColumnError(
                f"{raw.name}: {where(i)}: answer {short_repr(answers.values[i])} matches several "
                f"choices ({', '.join(choices[j] for j in matches[i])}); the right one is "
                "ambiguous"
            )
    bad = next(i for i in answers.present if not matches[i])
    raise ColumnError(
        f"{raw.name}: {where(bad)}: answer {short_repr(answers.values[bad])} in column "
        f"{answers.column!r} is neither a choice index nor the text of one of the choices "
        f"{', '.join(map(repr, choices))}"
    )

