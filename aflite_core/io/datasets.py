"""Load a dataset for auditing without losing anything: :func:`load_dataset`.

The result, an :class:`AuditDataset`, holds every original column with its original
values (CSV/TSV cells stay strings exactly as written), a stable ``row_id`` per row,
which rows take part in the audit (and why the others do not), and a
:class:`ValidationReport`. Reading the bytes lives in :mod:`aflite_core.io._readers`;
this module interprets the columns.

Column roles are guessed when not given (names compared case-insensitively, ignoring
``_``, ``-`` and spaces), in this order of preference:

* hypothesis: ``hypothesis``, ``sentence2`` (SNLI/MNLI), ``sentence_B``, ``text_b``,
  ``claim``, ``question``, then single-text names ``text``, ``sentence``, ``content``,
  ``review``, ``document``, ``utterance``, ``tweet``, ``comment``, ``body``;
* premise: ``premise``, ``sentence1``, ``sentence_A``, ``text_a``, ``evidence``,
  ``context``, ``passage`` (none found: a single-text dataset, ``premise`` is None);
* label: ``label``, ``gold_label``, ``gold``, ``labels``, ``class``, ``target``,
  ``category``, ``verdict``, ``stance``, ``sentiment``, ``entailment_label``, ``y``;
* split: ``split``, ``set``, ``fold``, ``partition``, ``subset``, ``SemEval_set``.

A published id column (``pairID``, ``pair_id``, ``guid``, ``id``, ...) is recognised and
reported as :attr:`ValidationReport.suggested_id` when its values are unique, but row ids
stay positions unless ``id=`` is passed: positions are always unique and stable, and the
id column is kept in the frame (and in every export) anyway.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from aflite_core.errors import NotStreamable  # noqa: F401 - re-exported: raised here
from aflite_core.heap_trim import release_free_heap
from aflite_core.io._choices import expand_choices, mc_locator
from aflite_core.io._column_roles import (  # noqa: F401 - names, guess_roles: re-exported
    HYPOTHESIS_NAMES,
    ID_NAMES,
    LABEL_NAMES,
    NO_COLUMN,
    PREMISE_NAMES,
    RIGHT,
    SPLIT_NAMES,
    WRONG,
    ColumnMapping,
    check_scalar_columns,
    column_names,
    guess_mapping,
    guess_roles,
    require_column,
    row_index,
    suggest_id,
)
from aflite_core.io._linked_groups import linked_components, linked_text_groups  # noqa: F401
from aflite_core.io._load_report import ValidationReport
from aflite_core.io._load_report import build_report as _build_report
from aflite_core.io._per_choice import REASON_NOT_ONE_CORRECT, apply_per_choice, find_per_choice
from aflite_core.io._readers import (
    FORMATS,
    MAX_LINE_BYTES,
    ColumnError,
    DatasetError,
    DatasetFormatError,
    DatasetSizeError,
    DuplicateIdError,
    RawTable,
)
from aflite_core.io._tables import index_values
from aflite_core.io._text_columns import (
    RowTexts,
    count_distinct,
    equal_codes,
    label_factors,
    label_objects,
    mixed_types,
    row_positions,
)
from aflite_core.io._text_facts import TextFacts, text_facts
from aflite_core.io._texts_on_disk import (
    ColumnOnDisk,
    TextsFile,
    all_texts,
    column_hashes,
    move_texts,
)
from aflite_core.io.shards import read_source as read_table

__all__ = [
    "FORMATS",
    "AuditDataset",
    "ColumnError",
    "ColumnMapping",
    "DatasetError",
    "DatasetFormatError",
    "DatasetSizeError",
    "DuplicateIdError",
    "RawTable",
    "ValidationReport",
    "load_dataset",
    "read_table",
]

#: Exclusion reasons (values of :attr:`AuditDataset.exclusion` and keys of
#: :attr:`ValidationReport.excluded`).
REASON_DASH = "label '-'"
REASON_EMPTY_LABEL = "empty label"
REASON_EMPTY_TEXT = "empty text"
#: Premise data is grouped when more than this share of the included rows shares its premise
#: or its hypothesis with another row: any shared text (SNLI dev ~100 %; the SNLI train sample
#: 18 %, whose 1,371 shared premises were once split across folds under a 20 % threshold).
REPEATED_PREMISE_SHARE = 0.0
#: ``columns.group`` of rows grouped by linked texts: rows sharing a premise *or* a
#: hypothesis, transitively (FEVER-Symmetric pairs each claim with two evidences and each
#: evidence with two claims; grouping by premise alone still splits a claim across folds).
LINKED_TEXT = "(premise or hypothesis)"
#: Linked groups are used only while the largest holds at most this share of the rows
#: (else one giant group would defeat every split); the premise column is used instead.
MAX_LINKED_GROUP_SHARE = 0.25


@dataclass(eq=False)
class AuditDataset:
    """A loaded dataset: original frame, column roles, exclusions and report.

    ``frame`` holds all original columns with their original values in input order,
    indexed by ``row_id``. ``exclusion`` (same index) is ``""`` for included rows and the
    reason otherwise. The helpers return values of the *included* rows in frame order
    unless ``included_only=False``.
    """

    frame: pd.DataFrame
    columns: ColumnMapping
    exclusion: pd.Series
    name: str
    content_hash: str
    report: ValidationReport
    #: The linked-text components, once per frame and text columns (:meth:`_linked_components`).
    _components: tuple[pd.DataFrame, tuple, np.ndarray] | None = field(
        default=None, init=False, repr=False)
    #: :attr:`included_mask`, once per ``exclusion`` series (the series and its mask).
    _included: tuple[pd.Series, np.ndarray] | None = field(default=None, init=False,
                                                            repr=False)
    #: Where its shards were read (``RawTable.read_by``): ``"local"`` or ``"dask"``.
    read_by: str = "local"
    #: How :func:`~aflite_core.io.load_to_disk` loaded it: ``"streamed"`` (a
    #: shard's text at a time) or ``"whole"`` (every row's text at once, as here).
    loaded_by: str = "whole"
    #: Why ``load_to_disk`` loaded it whole (what it could not stream), else ``""``.
    loaded_whole_because: str = ""
    #: The file its text columns moved to (:meth:`with_texts_on_disk`; not in ``frame``).
    texts_file: TextsFile | None = None

    def with_texts_on_disk(self, path: Any) -> AuditDataset:
        """This dataset, its texts read from the file ``path`` (:func:`move_texts`)."""
        linked = self.columns.group == LINKED_TEXT  # its groups computed first, then kept
        return move_texts(self, path, components=self._linked_components() if linked else None)

    def text_column(self, column: str) -> pd.Series | ColumnOnDisk:
        """A column of texts: from ``frame``, or from :attr:`texts_file` when moved there."""
        if self.texts_file is None or column in self.frame.columns:
            return self.frame[column]
        return self.texts_file.column(column)

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def included_mask(self) -> np.ndarray:
        """Boolean array over ``frame`` rows, True for rows taking part in the audit.

        Read-only, made once per ``exclusion`` series (a new series makes it again; the
        series is not changed in place): comparing 1M reasons took 30-50 ms, and the audit
        asks for it in every stage (0.4 s of the 1M audit's serial main thread, py-spy)."""
        cached = self._included
        if cached is None or cached[0] is not self.exclusion:
            mask = (self.exclusion == "").to_numpy(dtype=bool)  # categorical: codes compared
            mask.setflags(write=False)
            cached = self._included = (self.exclusion, mask)
        return cached[1]

    def _select(self, values: np.ndarray | list, included_only: bool) -> Any:
        if not included_only:
            return values
        mask = self.included_mask
        if isinstance(values, list):
            return [v for v, keep in zip(values, mask, strict=True) if keep]
        return values[mask]

    def row_ids(self, included_only: bool = True) -> np.ndarray:
        """Row ids (int64 positions, or the ``id=`` column's values)."""
        return self._select(index_values(self.frame.index), included_only)

    def hypotheses(self, included_only: bool = True) -> list[str]:
        """Hypothesis (or single) texts as str; missing values become ``""``."""
        return self._select(all_texts(self.text_column(self.columns.hypothesis)), included_only)

    def premises(self, included_only: bool = True) -> list[str] | None:
        """Premise texts as str, or None for single-text data."""
        if self.columns.premise is None:
            return None
        return self._select(all_texts(self.text_column(self.columns.premise)), included_only)

    def hypothesis_texts(self, included_only: bool = True) -> RowTexts:
        """The texts of :meth:`hypotheses` as a lazy :class:`RowTexts` (made a chunk at a
        time, ``take(rows)`` for some): no list of every row's text."""
        mask = self.included_mask if included_only else None  # None: every row's
        return RowTexts(self.text_column(self.columns.hypothesis), row_positions(mask))

    def premise_texts(self, included_only: bool = True) -> RowTexts | None:
        """The premises as :meth:`hypothesis_texts`, or None for single-text data."""
        mask = self.included_mask if included_only else None
        column = self.columns.premise
        return None if column is None else RowTexts(self.text_column(column), row_positions(mask))

    def labels(self, included_only: bool = True) -> np.ndarray:
        """Labels as a str array, surrounding whitespace removed (``1.0`` reads ``"1"``)."""
        return self._select(_label_array(self.frame[self.columns.label]), included_only)

    def label_objects(self, included_only: bool = True) -> np.ndarray:
        """The labels of :meth:`labels` as an object array holding one str per label: 8 bytes
        a row (the str array is 4 bytes a character a row; ``astype(object)`` of it makes a
        str per row, 0.29 GB at 5M rows)."""
        return self._select(label_objects(self.frame[self.columns.label]), included_only)

    def splits(self, included_only: bool = True) -> np.ndarray | None:
        """Split names as a str array, or None when there is no split column."""
        if self.columns.split is None:
            return None
        return self._select(_label_array(self.frame[self.columns.split]), included_only)

    def groups(self, included_only: bool = True) -> np.ndarray | None:
        """Group of each row as a str array (rows of a group stay on one side of every
        seeded split), or None when the data has no group column."""
        if self.columns.group is None:
            return None
        if self.columns.group == LINKED_TEXT:
            groups = self._linked_components().astype(str)
            return self._select(groups, included_only)
        return self._select(_label_array(self.frame[self.columns.group]), included_only)

    def group_codes(self, included_only: bool = True) -> np.ndarray | None:
        """The groups of :meth:`groups` as int64 codes (equal codes = the same group), or
        None: what AFLite's partitions and the size checks count, without building a string
        per row (at 1M rows the strings cost 0.2 s a call and sorting them 0.5 s)."""
        if self.columns.group is None:
            return None
        if self.columns.group == LINKED_TEXT:
            return self._select(self._linked_components().astype(np.int64), included_only)
        codes = label_factors(self.frame[self.columns.group])[0]  # the ids of groups()' names
        return self._select(np.asarray(codes, dtype=np.int64), included_only)

    def _linked_components(self) -> np.ndarray:
        """Component of each row in the graph of rows linked by a shared text (read only:
        the array is kept for the next call on the same frame and columns)."""
        premise = self.columns.premise
        key = (premise, self.columns.hypothesis)
        if self._components is not None:
            frame, columns, components = self._components
            if frame is self.frame and columns == key:
                return components
        prem = None if premise is None else equal_codes(column_hashes(self.text_column(premise)))
        hyp = equal_codes(column_hashes(self.text_column(self.columns.hypothesis)))
        components = linked_components(prem, hyp)
        components.flags.writeable = False
        self._components = (self.frame, key, components)
        return components

    def set_linked_components(self, components: np.ndarray) -> None:
        """Keep ``components`` as this frame's linked-text groups (:meth:`_linked_components`
        of the same frame and text columns; made by the caller from the texts' hashes)."""
        if len(components) != len(self.frame):
            raise ValueError(f"components: expected {len(self.frame)} rows, got "
                             f"{len(components)}")
        components.flags.writeable = False
        self._components = (self.frame, (self.columns.premise, self.columns.hypothesis),
                            components)

    def count_groups(self) -> int:
        """Distinct groups among the included rows (0 without a group column)."""
        if self.columns.group is None:
            return 0
        if self.columns.group == LINKED_TEXT:
            ids = self._linked_components()
        else:
            ids, _ = label_factors(self.frame[self.columns.group])
        return count_distinct(ids[self.included_mask])

    def subset(self, row_ids: Sequence[Any] | np.ndarray) -> AuditDataset:
        """A new dataset with only the given rows (kept in frame order).

        The report is recomputed for the subset; ``content_hash`` becomes the SHA-256 of
        the parent's hash and the chosen row ids, so caches keyed on it stay correct.
        """
        if self.texts_file is not None:
            raise ValueError("subset: this dataset's texts were moved to a file "
                             f"({self.texts_file.path}); subset it before moving them")
        wanted = pd.Index(np.asarray(row_ids).ravel())
        missing = wanted.difference(self.frame.index)
        if len(missing):
            shown = ", ".join(map(repr, missing[:5].tolist()))
            raise ValueError(f"row_ids: {len(missing)} id(s) not in the dataset, e.g. {shown}")
        keep = self.frame.index.isin(wanted)
        frame = self.frame[keep].copy()
        exclusion = self.exclusion[keep].copy()
        digest = hashlib.sha256(self.content_hash.encode())
        for rid in frame.index.tolist():
            digest.update(b"\0" + str(rid).encode())
        report = _build_report(
            frame,
            self.columns,
            exclusion,
            text_facts(frame, self.columns.premise, self.columns.hypothesis),
            source=self.report.source,
            fmt=self.report.format,
            warnings=[],
            n_questions=None,
            suggested_id=self.report.suggested_id,
            encoding=self.report.encoding,
        )
        return replace(
            self, frame=frame, exclusion=exclusion, content_hash=digest.hexdigest(), report=report
        )


# ---------------------------------------------------------------------- loading


def load_dataset(
    source: Any,
    *,
    premise: str | None = None,
    hypothesis: str | None = None,
    label: str | None = None,
    split: str | None = None,
    id: str | None = None,
    format: str | None = None,
    choices: Sequence[str] | None = None,
    answer: str | None = None,
    name: str | None = None,
    max_bytes: int | None = None,
    encoding: str | None = None,
    answer_base: int | None = None,
    max_line_bytes: int | None = MAX_LINE_BYTES,
    group: str | None = None,
    question: str | None = None,
    map_shards: Callable | None = None,
) -> AuditDataset:
    """Read a dataset file and prepare it for auditing, keeping every original value.

    Parameters
    ----------
    source : str, pathlib.Path, file-like or bytes
        A path, or an object with ``read()`` returning bytes (e.g. a Streamlit
        ``UploadedFile``, read from its start), or the bytes themselves.
    premise, hypothesis, label, split : str, optional
        Column names; guessed when omitted (see the module docstring). With no premise
        column the data is single-text and ``columns.premise`` is None. ``""``
        (:data:`NO_COLUMN`) for ``premise`` or ``split`` means "none": not guessed.
    id : str, optional
        Column whose values become the row ids (must be unique and present). Default:
        0-based positions (int64).
    format : {"csv", "tsv", "jsonl", "json", "parquet"}, optional
        Default: from the file suffix (``.csv``, ``.tsv``, ``.jsonl``, ``.json``,
        ``.parquet``, each optionally ``.gz``), else sniffed from the content. Gzip is
        recognised by its magic number whatever the name says.
    choices : sequence of str, optional
        Multiple-choice data: the columns holding the k choices. Each question becomes k
        rows with row id ``"{question}:{k}"`` (question = the ``id=`` value or the 0-based
        position), new columns ``question_id``, ``choice_index``, ``choice`` (the
        hypothesis) and ``label`` (``right``/``wrong``) -- suffixed ``_mc`` if the file
        already has such a column -- plus every original column. The premise is the
        context column (``premise=`` or guessed; none for choice-only data).
    answer : str, optional
        With ``choices``: the column naming the right choice, as the choice's text
        (exact match after trimming whitespace), a letter ``A``, ``B``, ... or an index.
        Indices are 0-based if a 0 occurs, 1-based if k occurs; when neither occurs the
        base is ambiguous and ``answer_base`` must say. Rows with an empty answer are
        expanded and excluded (``empty label``).
    name : str, optional
        Name used in messages and for format detection (default: the file name or the
        object's ``.name``).
    max_bytes : int, optional
        Refuse inputs larger than this, gzip data expanding past it and Parquet data
        decoding past it (:class:`DatasetSizeError`; reading stops at the ceiling).
    max_line_bytes : int or None, default 64 MiB
        Refuse a text table (CSV, TSV, JSON Lines) with a line longer than this, or a CSV
        cell of more characters, where it is met while the file is read or decompressed
        (:class:`DatasetSizeError` naming the line); None for no limit.
    encoding : str, optional
        Text encoding. Default: UTF-8, or UTF-16/UTF-32/UTF-8 as announced by a
        byte-order mark. There is no silent fallback: undecodable bytes raise a
        :class:`DatasetFormatError` naming the line and byte offset.
    answer_base : {0, 1}, optional
        Force 0- or 1-based answer indices (multiple-choice only).
    group : str, optional
        Column whose equal values form a group kept on one side of every seeded split
        (hold-outs, cross-validation folds). Default (None): the question id for
        multiple-choice data; for premise/hypothesis data, as soon as any row shares its
        premise or hypothesis with another (more than :data:`REPEATED_PREMISE_SHARE` of the
        rows), the rows linked by a shared premise or hypothesis (or the premise column when
        linking would make one group of more than a quarter of the rows), noted in
        ``report.notes``. ``""`` for no groups (a warning says so when texts are shared).
    question : str, optional
        Per-choice (long) multiple-choice data: the column naming each row's question, the
        label saying whether the row's choice is correct (correct/incorrect, 1/0,
        true/false, ...; see :mod:`aflite_core.io._per_choice`). Default (None): detected
        when a question-like column groups the rows with exactly one correct choice each
        (said in ``report.notes``); ``""``: never (the rows are audited one by one).
    map_shards : callable, optional
        A folder or glob of shards: ``map_shards(read, paths)`` reads them elsewhere (the
        CLI's ``--scheduler``: one task per shard on the cluster's workers;
        :func:`aflite_core.io.shards.read_sharded`); ``read_by`` says where.

    Returns
    -------
    AuditDataset

    Raises
    ------
    DatasetError
        Or a subclass: :class:`DatasetFormatError` (unreadable input, bad line, wrong
        structure, encoding), :class:`ColumnError` (missing, duplicate or unusable
        columns), :class:`DuplicateIdError`, :class:`DatasetSizeError`. Also raised when
        no row is left to audit.

    Notes
    -----
    Rows whose label is ``-`` (SNLI's "no gold label") or empty/whitespace/missing, and
    rows whose hypothesis text is empty or whitespace-only, are excluded from the audit
    but kept in ``frame``; ``exclusion`` and ``report.excluded`` say why.

    Examples
    --------
    The bundled SNLI sample; the column roles are found from their names:

    >>> from aflite_core import load_dataset
    >>> from aflite_core.data import SAMPLE
    >>> dataset = load_dataset(SAMPLE)
    >>> len(dataset.frame), dataset.columns.label, dataset.columns.split
    (4000, 'label', 'split')

    A table in memory works the same way (every original column is kept):

    >>> import pandas as pd
    >>> frame = pd.DataFrame({"sentence": ["a cat sleeps", "nobody sleeps", "-"],
    ...                       "gold": ["yes", "no", "-"], "source": ["x", "y", "z"]})
    >>> toy = load_dataset(frame, name="toy.csv", hypothesis="sentence", label="gold")
    >>> list(toy.frame.columns), toy.exclusion.tolist()
    (['sentence', 'gold', 'source'], ['', '', "label '-'"])
    """
    raw = read_table(source, name=name, format=format, encoding=encoding, max_bytes=max_bytes,
                     max_line_bytes=max_line_bytes, map_shards=map_shards)
    # the read's freed buffers handed back: the checks' arrays of 1 MB or more take pages of
    # their own under the CLI's malloc settings, so they would not reuse them (3 ms at 1M rows;
    # the load's peak -17 MB, -40 MB without those settings, a later load's -100 MB)
    release_free_heap()
    return prepare_dataset(raw, premise=premise, hypothesis=hypothesis, label=label,
                           split=split, id=id, choices=choices, answer=answer,
                           answer_base=answer_base, group=group, question=question)


def prepare_dataset(
    raw: RawTable,
    *,
    premise: str | None = None,
    hypothesis: str | None = None,
    label: str | None = None,
    split: str | None = None,
    id: str | None = None,
    choices: Sequence[str] | None = None,
    answer: str | None = None,
    answer_base: int | None = None,
    group: str | None = None,
    question: str | None = None,
    facts: dict[str, TextFacts] | None = None,
) -> AuditDataset:
    """:func:`load_dataset` of a table already read (the options as there).

    ``facts``: the premise's and hypothesis' :class:`~aflite_core.io._text_facts.TextFacts`,
    made by the caller (the streamed load: ``raw.frame``'s texts are then not read, and may
    be placeholders); default: from ``raw.frame``'s columns.

    Raises
    ------
    NotStreamable
        With ``facts``, multiple-choice data (``choices``) or a per-choice layout: they make
        new rows or columns, so the caller must load the data whole.
    """
    roles = {"premise": premise, "hypothesis": hypothesis, "label": label, "split": split}
    _refuse_dropped(raw, *roles.values(), id, answer, group, question, *(choices or ()))
    _require_named_columns(raw, {**roles, "id": id, "answer": answer, "group": group})
    suggested_id = suggest_id(raw.frame, column_names(raw)) if id is None else None
    if choices is not None and question:
        raise ColumnError(f"{raw.name}: question= names the question column of a per-choice "
                          "file (one row per choice); with choices=[...] (one row per "
                          "question) leave it out")
    if choices is not None and facts is not None:
        raise NotStreamable("multiple-choice data (choices=) makes a row per choice")
    if choices is not None:  # multiple choice: one row per (question, choice)
        frame, mapping = expand_choices(
            raw, choices=choices, answer=answer, id_column=id, answer_base=answer_base, **roles
        )
        n_questions: int | None = len(raw.frame)
        locate = mc_locator(raw, len(choices))
        per_choice = None
    else:
        frame, mapping = _map_columns(
            raw, id_column=id, answer=answer, answer_base=answer_base, **roles
        )
        if question:
            require_column(question, column_names(raw), raw, "question")
        per_choice = find_per_choice(frame, mapping, question)
        n_questions = None
        if per_choice is not None:
            if facts is not None:
                raise NotStreamable("per-choice questions add a question id and a label column")
            frame, mapping = apply_per_choice(frame, mapping, per_choice)
            n_questions = per_choice.n_questions
        locate = raw.where

    facts = text_facts(frame, mapping.premise, mapping.hypothesis, facts)
    exclusion = _exclusions(frame, mapping, facts)
    if per_choice is not None and per_choice.n_bad_questions:
        exclusion[per_choice.bad_rows] = REASON_NOT_ONE_CORRECT
    mapping, group_note, group_warning, components = _group_column(
        frame, mapping, exclusion, group, multiple_choice=n_questions is not None, facts=facts)
    report = _build_report(
        frame,
        mapping,
        exclusion,
        facts,
        source=raw.name,
        fmt=raw.format,
        warnings=list(raw.warnings),
        n_questions=n_questions,
        suggested_id=suggested_id,
        encoding=raw.encoding,
    )
    label_note = _label_type_note(frame, mapping.label)
    if label_note:
        report.warnings.append(label_note)
    _require_included_rows(raw, mapping, report, locate)
    if group_note:
        report.notes.append(group_note)
    if group_warning:
        report.warnings.append(group_warning)
    if per_choice is not None:
        report.notes.insert(0, per_choice.note())
        if per_choice.n_bad_questions:
            report.warnings.append(
                f"{per_choice.n_bad_questions:,} question(s) of column {per_choice.question!r} "
                "do not have exactly one correct choice among two or more rows; their "
                f"{int(per_choice.bad_rows.sum()):,} rows are excluded")
    dataset = AuditDataset(
        frame=frame,
        columns=mapping,
        exclusion=exclusion,
        name=raw.name,
        content_hash=raw.content_hash,
        report=report,
        read_by=raw.read_by,
    )
    if components is not None:  # from the facts' hashes: the texts are not read again
        dataset.set_linked_components(components)
    if mapping.group is not None:
        report.n_groups = dataset.count_groups()
    return dataset


def _require_named_columns(raw: RawTable, named: dict[str, str | None]) -> None:
    """Every column named by an argument (``argument -> column``, None: not given) exists."""
    names = column_names(raw)
    for arg, value in named.items():
        if value is not None and value != NO_COLUMN:
            require_column(value, names, raw, arg)


def _map_columns(
    raw: RawTable,
    *,
    premise: str | None,
    hypothesis: str | None,
    label: str | None,
    split: str | None,
    id_column: str | None,
    answer: str | None,
    answer_base: int | None,
) -> tuple[pd.DataFrame, ColumnMapping]:
    """Column roles of (non-multiple-choice) data, and the frame indexed by row id."""
    if answer is not None or answer_base is not None:
        raise ColumnError(
            f"{raw.name}: answer=/answer_base= only apply to multiple-choice data; "
            "pass choices=[...] with the columns holding the choices"
        )
    names = column_names(raw)
    mapping = guess_mapping(raw, [*names, *(c for c in raw.dropped if c not in names)],
                             premise, hypothesis, label, split)
    _refuse_dropped(raw, *asdict(mapping).values())
    check_scalar_columns(raw, asdict(mapping))
    frame = raw.frame.copy(deep=False)
    frame.index = row_index(raw, id_column)
    return frame, replace(mapping, id=id_column)


def _refuse_dropped(raw: RawTable, *columns: str | None) -> None:
    """Refuse a role naming a column the reader left out (binary that is not UTF-8, nested
    values), with the reader's reason; unused, such a column only costs a warning."""
    for column in columns:
        if column is not None and column in raw.dropped:
            raise DatasetFormatError(raw.dropped[column])
        if column is not None and column in raw.retyped:  # typed differently by the shards
            raise DatasetFormatError(raw.retyped[column].replace("; it is read as text in "
                                                                 "every one", "", 1))


def _group_column(frame: pd.DataFrame, mapping: ColumnMapping, exclusion: pd.Series,
                  group: str | None, *, multiple_choice: bool, facts: dict[str, TextFacts]
                  ) -> tuple[ColumnMapping, str, str, np.ndarray | None]:
    """The mapping with its group column, a note when the loader chose it, a warning when
    rows share a text but grouping was turned off (``group=''``), and, when the groups are
    the rows linked by a shared text, every row's group (:meth:`AuditDataset.
    set_linked_components`)."""
    if group is not None and group != NO_COLUMN:
        return replace(mapping, group=group), "", "", None
    if multiple_choice and group is None:
        question = next(c for c in frame.columns if str(c).startswith("question_id"))
        return replace(mapping, group=str(question)), "", "", None
    if mapping.premise is None or multiple_choice:
        return mapping, "", "", None
    included = exclusion.to_numpy() == ""
    every = bool(included.all())
    # each side's text code on every row (a missing cell as ""), from one pass over its
    # hashes; from them the included rows' codes with a missing cell apart, and whether
    # another included row holds the same text
    premise, hypothesis = facts[mapping.premise], facts[mapping.hypothesis]
    codes = {"premise": equal_codes(premise.hashes), "hypothesis": equal_codes(hypothesis.hashes)}
    missing = {"premise": premise.missing, "hypothesis": hypothesis.missing}
    apart: dict[str, np.ndarray] = {}
    sharing = np.zeros(int(included.sum()), dtype=bool)
    for side in ("premise", "hypothesis"):
        side_codes = codes[side]
        if missing[side].any():  # the missing cells: one code of their own
            side_codes = np.where(missing[side], len(included), side_codes)
        apart[side] = side_codes if every else side_codes[included]
        sharing |= np.bincount(apart[side])[apart[side]] > 1
    shared = float(sharing.mean()) if len(sharing) else 0.0
    if group == NO_COLUMN:
        warning = "" if not sharing.any() else (
            f"{int(sharing.sum()):,} rows ({shared:.1%}) share their premise or hypothesis "
            "with another row, but no grouping is applied (group=''): a seeded split may put "
            "a shared text on both sides, so a model meets on the test side a text it learnt "
            "with another label, and the hold-out figures (cues, KNN, baselines, PVI) mix "
            "memorisation into them.")
        return mapping, "", warning, None
    if shared <= REPEATED_PREMISE_SHARE:
        return mapping, "", "", None
    del sharing
    if missing["premise"].any():  # no premise: linked by its hypothesis alone
        apart["premise"][missing["premise"] if every else missing["premise"][included]] = -1
    linked = linked_components(apart["premise"], apart["hypothesis"])
    del apart
    sizes = np.bincount(linked)
    largest = sizes.max() / len(linked)
    if largest <= MAX_LINKED_GROUP_SHARE:
        note = (f"{shared:.0%} of the rows share their premise or hypothesis with another "
                f"row: rows linked by a shared premise or hypothesis form "
                f"{len(sizes):,} groups, and every train/test split keeps a group "
                "together (otherwise a model learns a text on one side and meets it with "
                "another label on the other, and scores below chance). Pass group='' to "
                "turn this off.")
        # every row's group, an excluded row's too, a missing premise linked as ""
        # (AuditDataset._linked_components): the ones above when every row is included and
        # no premise is missing
        if not every or missing["premise"].any():
            linked = linked_components(codes["premise"], codes["hypothesis"])
        return replace(mapping, group=LINKED_TEXT), note, "", linked
    note = (f"{shared:.0%} of the rows share their premise or hypothesis with another row; "
            f"linking them would make one group of {largest:.0%} of the rows, so rows are "
            f"grouped by the premise column {mapping.premise!r} instead: every train/test "
            "split keeps a premise's hypotheses together. Pass group='' to turn this off.")
    return replace(mapping, group=mapping.premise), note, "", None


def _require_included_rows(
    raw: RawTable, mapping: ColumnMapping, report: ValidationReport, locate: Callable[[int], str]
) -> None:
    """Refuse a dataset whose rows are all excluded, saying why and where."""
    if report.n_included:
        return
    reasons = ", ".join(f"{k}: {v}" for k, v in report.excluded.items())
    raise DatasetError(
        f"{raw.name}: no rows left to audit: all {report.n_read} rows are excluded "
        f"({reasons}; first at {locate(0)}); check the label column {mapping.label!r} and the "
        f"text column {mapping.hypothesis!r}"
    )


# ---------------------------------------------------------- exclusion and report


def _label_array(series: pd.Series) -> np.ndarray:
    ids, names = label_factors(series)
    return names[ids]


def _label_type_note(frame: pd.DataFrame, column: str) -> str | None:
    """A warning when the label column mixes booleans, numbers and text."""
    series = frame[column]
    if series.dtype != object or not mixed_types(series):
        return None
    kinds = sorted({type(v).__name__ for v in series.dropna().tolist()})
    return (
        f"the label column {column!r} mixes value types ({', '.join(kinds)}); labels are "
        "compared as text: true/false are 'True'/'False', numbers as written (1 and 1.0 are "
        "'1', the same label as the text \"1\")"
    )


def _exclusions(frame: pd.DataFrame, mapping: ColumnMapping, facts: dict[str, TextFacts]
                ) -> pd.Series:
    ids, names = label_factors(frame[mapping.label])
    reason = np.full(len(frame), "", dtype=object)
    reason[facts[mapping.hypothesis].blank] = REASON_EMPTY_TEXT
    reason[(names == "")[ids]] = REASON_EMPTY_LABEL
    reason[(names == "-")[ids]] = REASON_DASH
    return pd.Series(reason, index=frame.index, name="exclusion", dtype=object)
