"""Which column is which: :class:`ColumnMapping`, the names each role is recognised by (SNLI,
MNLI, SICK, ARCT, FEVER and common variants), guess_roles, and the checks and messages of an
explicit mapping (a missing or misspelt column names the closest one and the delimiter a file
may really use).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from aflite_core.io._readers import (
    ColumnError,
    DatasetFormatError,
    DuplicateIdError,
    RawTable,
    short_repr,
)

HYPOTHESIS_NAMES = (
    "hypothesis",
    "sentence2",
    "sentence_b",
    "text_b",
    "claim",
    "question",
    "text",
    "sentence",
    "content",
    "review",
    "document",
    "utterance",
    "tweet",
    "comment",
    "body",
)
PREMISE_NAMES = ("premise", "sentence1", "sentence_a", "text_a", "evidence", "context", "passage")
LABEL_NAMES = (
    "label",
    "gold_label",
    "gold",
    "labels",
    "class",
    "target",
    "category",
    "verdict",
    "stance",
    "sentiment",
    "entailment_label",
    "y",
)
SPLIT_NAMES = ("split", "set", "fold", "partition", "subset", "semeval_set")
ID_NAMES = ("pairid", "pair_id", "guid", "uid", "id", "example_id", "sample_id", "idx")

#: Labels written into expanded multiple-choice rows.
RIGHT, WRONG = "right", "wrong"


# --------------------------------------------------------------------- data types


#: ``premise=""`` / ``split=""`` / ``group=""``: no such column (do not guess one).
NO_COLUMN = ""

@dataclass(frozen=True)
class ColumnMapping:
    """Which columns of :attr:`AuditDataset.frame` play which role.

    ``premise`` is None for single-text data. ``id`` is the column the row ids come
    from (``id=``; for multiple-choice data, the question ids), None when row ids are
    positions. ``group`` is the column whose equal values form a group that every seeded
    train/test split keeps on one side (multiple-choice: the question id; NLI: the premise
    when premises repeat), None for no grouping.
    """

    hypothesis: str
    label: str
    premise: str | None = None
    split: str | None = None
    id: str | None = None
    group: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        """The mapping as a JSON-ready dict."""
        return asdict(self)


# ------------------------------------------------------------------ loading steps


def column_names(raw: RawTable) -> list[str]:
    """The file's column names as str."""
    return [str(c) for c in raw.frame.columns]


# ------------------------------------------------------------------ column roles


def normalized_name(name: str) -> str:
    return re.sub(r"[\s_\-.]+", "", str(name).strip().lower())


def find(
    names: list[str], candidates: Sequence[str], taken: set[str], raw: RawTable, role: str
) -> str | None:
    """First candidate present among ``names`` (normalised match), or None."""
    for cand in candidates:
        key = normalized_name(cand)
        hits = [n for n in names if normalized_name(n) == key and n not in taken]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            exact = [n for n in hits if n == cand]
            if len(exact) == 1:
                return exact[0]
            raise ColumnError(
                f"{raw.name}: cannot tell which column is the {role}: "
                f"{', '.join(map(repr, hits))} all match; pass {role}='<column>'"
            )
    return None


def columns_text(names: list[str]) -> str:
    shown = ", ".join(map(short_repr, names[:30]))
    return shown + (f", ... ({len(names)} columns)" if len(names) > 30 else "")


def _closest(wanted: Sequence[str], names: list[str]) -> str | None:
    by_norm = {normalized_name(n): n for n in names}
    best: tuple[float, str] | None = None
    for w in wanted:
        for match in difflib.get_close_matches(normalized_name(w), list(by_norm), n=1, cutoff=0.6):
            score = difflib.SequenceMatcher(None, normalized_name(w), match).ratio()
            if best is None or score > best[0]:
                best = (score, by_norm[match])
    return best[1] if best else None


def _delimiter_hint(raw: RawTable, names: list[str]) -> str:
    if len(names) == 1:
        for sep in (";", "|", "\t", ","):
            if sep in names[0]:
                return (
                    f" The file has a single column whose name contains {sep!r}: it looks "
                    f"separated by {sep!r}; save it as CSV (',') or TSV (tab)."
                )
    return ""


def require_column(column: str, names: list[str], raw: RawTable, arg: str) -> None:
    if column in names:
        return
    close = _closest([column], names)
    hint = f" Did you mean {short_repr(close)}?" if close else ""
    raise ColumnError(
        f"{raw.name}: column {short_repr(column)} ({arg}=) not found; the file has columns "
        f"{columns_text(names)}.{hint}{_delimiter_hint(raw, names)}"
    )


def _missing_role(raw: RawTable, names: list[str], role: str, candidates: Sequence[str]) -> None:
    expected = ", ".join(map(repr, candidates[:8]))
    close = _closest([role, *candidates], names)
    hint = (
        f" The closest is {short_repr(close)}: pass {role}={short_repr(close)} if that is it."
        if close
        else ""
    )
    raise ColumnError(
        f"{raw.name}: no {role} column found: expected one named like {expected}, ...; "
        f"the file has columns {columns_text(names)}.{hint} Otherwise pass "
        f"{role}='<column>'.{_delimiter_hint(raw, names)}"
    )


def guess_roles(columns: Sequence[str]) -> dict[str, str | None]:
    """Guess column roles from column names alone (for form defaults).

    Uses the name lists :data:`LABEL_NAMES`, :data:`HYPOTHESIS_NAMES`, :data:`PREMISE_NAMES`,
    :data:`SPLIT_NAMES`, :data:`ID_NAMES` (case, spaces, ``_``, ``-`` and ``.`` ignored); each
    column is given at most one role, in that order.

    Returns
    -------
    dict
        Role (``label``, ``hypothesis``, ``premise``, ``split``, ``id``) -> column or None.
    """

    def norm(value: str) -> str:
        return re.sub(r"[\s_\-.]+", "", str(value).strip().lower())

    normalised = {norm(c): c for c in reversed(list(columns))}
    taken: set[str] = set()
    roles: dict[str, str | None] = {}
    for role, names in (("label", LABEL_NAMES), ("hypothesis", HYPOTHESIS_NAMES),
                        ("premise", PREMISE_NAMES), ("split", SPLIT_NAMES),
                        ("id", ID_NAMES)):  # fmt: skip
        roles[role] = None
        for candidate in names:
            col = normalised.get(norm(candidate))
            if col is not None and col not in taken:
                roles[role] = col
                taken.add(col)
                break
    return roles


def guess_mapping(
    raw: RawTable,
    names: list[str],
    premise: str | None,
    hypothesis: str | None,
    label: str | None,
    split: str | None,
) -> ColumnMapping:
    taken = {c for c in (premise, hypothesis, label, split) if c}
    if label is None:
        label = find(names, LABEL_NAMES, taken, raw, "label")
        if label is None:
            _missing_role(raw, names, "label", LABEL_NAMES)
        taken.add(label)
    if hypothesis is None:
        hypothesis = find(names, HYPOTHESIS_NAMES, taken, raw, "hypothesis")
        if hypothesis is None:
            _missing_role(raw, names, "hypothesis", HYPOTHESIS_NAMES)
        taken.add(hypothesis)
    if premise is None:
        premise = find(names, PREMISE_NAMES, taken, raw, "premise")
        if premise is not None:
            taken.add(premise)
    if split is None:
        split = find(names, SPLIT_NAMES, taken, raw, "split")
    mapping = ColumnMapping(hypothesis=hypothesis, label=label, premise=premise or None,
                            split=split or None)
    _check_distinct(raw, mapping)
    return mapping


def _check_distinct(raw: RawTable, mapping: ColumnMapping) -> None:
    roles = {k: v for k, v in asdict(mapping).items() if v is not None}
    seen: dict[str, str] = {}
    for role, col in roles.items():
        if col in seen:
            raise ColumnError(
                f"{raw.name}: column {col!r} is used both as {seen[col]} and as {role}; "
                "each role needs its own column"
            )
        seen[col] = role


def check_scalar_columns(raw: RawTable, roles: dict[str, str | None]) -> None:
    """Role columns (text, label, split, ...) must hold one scalar per row, not
    lists or structs; ``roles`` maps a role name to its column (None: absent)."""
    for role, col in roles.items():
        if col is None or raw.frame[col].dtype != object:
            continue
        for i, v in enumerate(raw.frame[col].tolist()):
            if isinstance(v, (list, tuple, dict, np.ndarray)):
                kind = raw.column_types.get(col) or type(v).__name__
                raise DatasetFormatError(
                    f"{raw.name}: column {col!r} ({role}) holds nested values ({kind}) at "
                    f"{raw.where(i)}; expected one text or number per row -- flatten it or "
                    "choose another column"
                )


def suggest_id(frame: pd.DataFrame, names: list[str]) -> str | None:
    for cand in ID_NAMES:
        hits = [n for n in names if normalized_name(n) == normalized_name(cand)]
        if len(hits) == 1:
            col = frame[hits[0]]
            if not col.isna().any() and col.is_unique:
                return hits[0]
    return None


def row_index(raw: RawTable, id_column: str | None) -> pd.Index:
    n = len(raw.frame)
    if id_column is None:
        return pd.RangeIndex(n, name="row_id")
    values = raw.frame[id_column]
    check_ids(raw, values, id_column, raw.where)
    return pd.Index(values.to_numpy(), name="row_id")


def check_ids(raw: RawTable, values: pd.Series, column: str, where: Any) -> None:
    missing = np.flatnonzero(values.isna().to_numpy())
    if len(missing):
        at = ", ".join(where(int(i)) for i in missing[:5])
        raise ColumnError(
            f"{raw.name}: id column {column!r} has {len(missing)} missing value(s) ({at}); "
            "every row needs an id, or omit id= to use positions"
        )
    dup = values.duplicated(keep=False).to_numpy()
    if dup.any():
        groups: dict[Any, list[int]] = {}
        for i in np.flatnonzero(dup):
            groups.setdefault(values.iat[int(i)], []).append(int(i))
        parts = [
            f"{short_repr(k)} ({', '.join(where(i) for i in v[:4])}"
            f"{', ...' if len(v) > 4 else ''})"
            for k, v in list(groups.items())[:5]
        ]
        more = f" and {len(groups) - 5} more" if len(groups) > 5 else ""
        raise DuplicateIdError(
            f"{raw.name}: id column {column!r} has duplicate values: {'; '.join(parts)}{more}; "
            "ids must be unique (omit id= to use row positions)"
        )
    if values.dtype == object and pd.api.types.infer_dtype(values, skipna=True) != "string":
        # ids of mixed types (1 and "1") are stored as text in the run folder
        texts = pd.Series([_id_text(v) for v in values.tolist()], dtype=object)
        clash = texts.duplicated(keep=False).to_numpy()
        if clash.any():
            first = texts.iat[int(np.flatnonzero(clash)[0])]
            rows = np.flatnonzero((texts == first).to_numpy())[:4]
            shown = ", ".join(f"{short_repr(values.iat[int(i)])} ({where(int(i))})" for i in rows)
            raise DuplicateIdError(
                f"{raw.name}: id column {column!r} has values that differ in type but are the "
                f"same id once stored as text ({first!r}): {shown}; ids must be unique as "
                "text (omit id= to use row positions)"
            )


def _id_text(value: Any) -> str:
    """An id as the run folder stores a mixed-type id column (text)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    return value if isinstance(value, str) else str(value)

