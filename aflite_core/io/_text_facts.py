"""What the loader's checks read of a text column, a row at a time: :class:`TextFacts`.

The loader (:func:`aflite_core.io.datasets.load_dataset`) reads five things of the premise
and hypothesis columns: whether a cell is missing, whether it is blank (the hypothesis: such a
row is excluded), its length (the report's text lengths), a hash of its text (the duplicate
counts, the linked-text groups) and a hash of its normalised text (the near-duplicate
counts). Each is a per-row array that does not depend on the other rows, so it can be made a
shard at a time and the shards' arrays joined (:meth:`TextFacts.concat`): the streamed load
(:mod:`aflite_core.io._streamed_load`) makes them while each shard's texts go to the run's
``dataset.parquet``, then checks the rows without any text in memory.

From a column in memory (:meth:`TextFacts.of`) each array is made when first asked for, as the
loader did before it read them here: the same functions, the same values; for a large Arrow
column the blank rows, lengths, hashes and normalised hashes are made together, at the first
of them asked for, in one compiled visit to each text
(:func:`~aflite_core.io._text_columns.facts_in_one_pass`, the same arrays).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from aflite_core.io._text_columns import (
    MISSING_HASH,
    ONE_PASS_FACTS,
    blank_mask,
    facts_in_one_pass,
    missing_mask,
    normalised_hashes,
    text_hashes,
    text_lengths,
)

__all__ = ["FACTS", "TextFacts", "fact_trims", "text_facts"]

#: The per-row arrays of a :class:`TextFacts`, and their dtypes.
FACTS = {"missing": np.bool_, "blank": np.bool_, "lengths": np.int64, "hashes": np.uint64,
         "normalised": np.uint64}
TRIMS = ("both", "left", "right")


class TextFacts:
    """The loader's per-row facts of one text column.

    Parameters
    ----------
    series : pandas.Series, optional
        The column; each fact is computed from it when first read (and kept).
    trim : {"both", "left", "right"}, default "both"
        Which end of the normalised text is trimmed (:func:`~aflite_core.io._text_columns.
        normalised_hashes`): a premise's left end and a hypothesis' right end, so that the
        pair's hash is that of ``premise + "\\0" + hypothesis`` normalised.
    arrays : mapping, optional
        Facts already made (name -> array, the names of :data:`FACTS`), e.g. joined from the
        shards' (:meth:`concat`); a fact neither given nor computable raises KeyError.

    Attributes
    ----------
    missing, blank, lengths, hashes, normalised : numpy.ndarray
        One value a row: missing cell; missing, empty or whitespace only; characters (0 when
        missing); :func:`~aflite_core.io._text_columns.text_hashes` (a missing cell hashes as
        ``""``); the hash of the normalised text.
    """

    def __init__(self, series: pd.Series | None = None, *, trim: str = "both",
                 arrays: dict[str, np.ndarray] | None = None) -> None:
        if trim not in TRIMS:
            raise ValueError(f"trim: expected one of {TRIMS}, got {trim!r}")
        unknown = sorted(set(arrays or ()) - set(FACTS))
        if unknown:
            raise ValueError(f"arrays: expected names among {sorted(FACTS)}, got {unknown}")
        self._series = series
        self.trim = trim
        self._arrays: dict[str, np.ndarray] = dict(arrays or {})

    @classmethod
    def of(cls, series: pd.Series, *, trim: str = "both") -> TextFacts:
        """The facts of ``series``, each made when first read."""
        return cls(series, trim=trim)

    def _fact(self, name: str) -> np.ndarray:
        if name not in self._arrays:
            series = self._series
            if series is None:
                raise KeyError(f"the text fact {name!r} was neither given nor can be computed "
                               "(no column)")
            if name in ONE_PASS_FACTS and not set(ONE_PASS_FACTS) & set(self._arrays):
                # a large Arrow column: the four from one visit to each text (None: else)
                self._arrays.update(facts_in_one_pass(series, self.trim) or {})
                if name in self._arrays:
                    return self._arrays[name]
            self._arrays[name] = {
                "missing": missing_mask, "blank": blank_mask, "lengths": text_lengths,
                "hashes": text_hashes,
                "normalised": lambda s: normalised_hashes(s, self.trim)}[name](series)
        return self._arrays[name]

    @property
    def missing(self) -> np.ndarray:
        return self._fact("missing")

    @property
    def blank(self) -> np.ndarray:
        return self._fact("blank")

    @property
    def lengths(self) -> np.ndarray:
        return self._fact("lengths")

    @property
    def hashes(self) -> np.ndarray:
        return self._fact("hashes")

    @property
    def normalised(self) -> np.ndarray:
        return self._fact("normalised")

    def hashes_apart(self) -> np.ndarray:
        """:attr:`hashes` with a missing cell as :data:`~aflite_core.io._text_columns.
        MISSING_HASH` (equal to other missing cells only): ``text_hashes(series,
        missing_apart=True)``. A new array."""
        out = self.hashes.copy()
        out[self.missing] = MISSING_HASH
        return out

    def __len__(self) -> int:
        if self._series is not None:
            return len(self._series)
        return len(next(iter(self._arrays.values()))) if self._arrays else 0

    def computed(self, names: Sequence[str] = tuple(FACTS)) -> TextFacts:
        """The facts ``names`` made now, without the column (a shard's facts kept after its
        texts leave memory)."""
        return TextFacts(trim=self.trim, arrays={name: self._fact(name) for name in names})

    @classmethod
    def concat(cls, parts: Sequence[TextFacts]) -> TextFacts:
        """The facts of the rows of ``parts`` one after the other (the shards in order); each
        part must hold the same facts and trim."""
        if not parts:
            raise ValueError("parts: expected at least one TextFacts, got none")
        trims = {part.trim for part in parts}
        names = [set(part._arrays) for part in parts]
        if len(trims) > 1 or any(n != names[0] for n in names):
            raise ValueError("parts: expected the same facts and trim in every part, got "
                             f"trims {sorted(trims)} and facts {[sorted(n) for n in names]}")
        return cls(trim=parts[0].trim, arrays={
            name: np.concatenate([part._arrays[name] for part in parts]).astype(
                FACTS[name], copy=False) for name in sorted(names[0])})


def fact_trims(premise: str | None, hypothesis: str) -> dict[str, str]:
    """The text columns the loader reads facts of, and the end each one's normalised text is
    trimmed at: the premise's left and the hypothesis' right (both ends without a premise), so
    that a pair's hash is that of the pair's normalised text."""
    return ({hypothesis: "both"} if premise is None
            else {premise: "left", hypothesis: "right"})


def text_facts(frame: pd.DataFrame, premise: str | None, hypothesis: str,
               given: dict[str, TextFacts] | None = None) -> dict[str, TextFacts]:
    """The facts the loader reads of ``frame``'s text columns, by column name: ``given``
    when the caller made them (the streamed load), else from the columns, each fact when
    first read (:meth:`TextFacts.of`). The premise's normalised text is trimmed on its left,
    the hypothesis' on its right (both ends without a premise).

    Raises
    ------
    ValueError
        If ``given`` lacks one of the two columns, or its trims are not those.
    """
    trims = fact_trims(premise, hypothesis)
    if given is None:
        return {column: TextFacts.of(frame[column], trim=trim) for column, trim in trims.items()}
    for column, trim in trims.items():
        if column not in given or given[column].trim != trim:
            raise ValueError(f"facts: expected the column {column!r} with trim {trim!r}, got "
                             f"{ {c: f.trim for c, f in given.items()} }")
    return {column: given[column] for column in trims}
