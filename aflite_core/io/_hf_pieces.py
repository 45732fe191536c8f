"""A Hugging Face ``datasets`` folder a piece at a time (the streamed load).

A folder written by ``Dataset.save_to_disk`` holds its rows as Arrow record batches
(:func:`~aflite_core.io.shards.hf_batches`, memory-mapped); a ``DatasetDict`` folder one such
folder per split. :class:`DatasetFolderPieces` gives them as pieces of about
:data:`~aflite_core.io._file_pieces.PIECE_ROWS` rows, each made a table as the whole read makes
one (:func:`~aflite_core.io.shards.arrow_raw`: columns the audit cannot hold dropped,
ClassLabels named), a ``DatasetDict``'s key added as its split column; joined, the pieces'
(lean) frames are the whole read's table (:func:`~aflite_core.io.shards.read_sharded`):
rows, split column, row locations (split and record), warnings, content hash. The folder is
read here, as the whole read reads it: the Arrow files are mapped, not copied.

Pieces of one split whose columns or types differ (a ClassLabel column is the same in every
piece; an integer column with missing values in one piece only is not) raise
:class:`~aflite_core.io._file_pieces.Unstreamable`, and the caller loads the folder whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from aflite_core.io._file_pieces import PIECE_ROWS, FilePieces
from aflite_core.io._readers import RawTable
from aflite_core.io.shards import (
    HF_DICT,
    HF_INFO,
    add_split,
    arrow_raw,
    hf_batches,
    hf_data_files,
    hf_dict_splits,
    hf_digest,
    hf_features,
    hf_split_folder,
    joined_splits,
    split_column,
)

__all__ = ["DatasetFolderPieces"]


class DatasetFolderPieces:
    """The pieces of a ``datasets`` folder (a ``Dataset`` or a ``DatasetDict``), in order,
    with the streamed load's interface: :meth:`tables`, :meth:`part`, :meth:`join`."""

    def __init__(self, path: Path, name: str, *, rows: int | None = None,
                 max_cell: int | None = None) -> None:
        self.name, self._rows, self._max_cell = name, rows or PIECE_ROWS, max_cell
        self._dict = (path / HF_DICT).is_file()
        self._splits = hf_dict_splits(path, name) if self._dict else [None]
        self._path = path
        self._pieces: list[FilePieces] = []
        self._parts: list[str] = []
        self._counts: list[int] = []
        self._column = ""

    def tables(self) -> Iterator[RawTable]:
        for split in self._splits:
            if split is None:
                folder, label = self._path, self.name
            else:
                folder, label = hf_split_folder(self._path, split, self.name), \
                    f"{self.name}/{split}"
            pieces = _dataset_pieces(folder, label, self._rows, self._max_cell)
            self._pieces.append(pieces)
            self._counts.append(0)
            for piece in pieces.local():
                taken = pieces.take(piece)
                del piece
                if split is not None:
                    self._column = self._column or split_column(list(taken.frame.columns))
                    taken = replace(taken, frame=taken.frame.copy(deep=False))
                    add_split(taken.frame, self._column, split)
                self._parts.append(split or self.name)
                self._counts[-1] += 1
                yield taken
                del taken

    def part(self, i: int) -> str:
        """The name a piece's columns are checked under: its split (or the folder)."""
        return self._parts[i]

    def close(self) -> None:
        for pieces in self._pieces:
            pieces.close()

    def join(self, lean: list[RawTable]) -> RawTable:
        """The whole read's table of the pieces' lean tables, in order."""
        tables, start = [], 0
        for pieces, count in zip(self._pieces, self._counts, strict=True):
            mine = lean[start:start + count]
            tables.append(pieces.join([t.frame for t in mine], [t.lines for t in mine]))
            start += count
        if not self._dict:
            return tables[0]
        return joined_splits(tables, [str(s) for s in self._splits], self.name, self._column)


def _dataset_pieces(folder: Path, name: str, rows: int, max_cell: int | None = None
                    ) -> FilePieces:
    """A ``Dataset`` folder's pieces (:class:`~aflite_core.io._file_pieces.FilePieces` read
    here), its content hash the whole read's."""
    files, fingerprint = hf_data_files(folder, name)
    pieces = FilePieces(name, "arrow")
    pieces._hash = hf_digest(files, fingerprint)
    pieces._local = _batches_as_pieces(files, hf_features(folder / HF_INFO), name, rows,
                                       pieces, max_cell)
    return pieces


def _batches_as_pieces(files: list[Path], labels: dict, name: str, rows: int,
                       pieces: FilePieces, max_cell: int | None = None
                       ) -> Iterator[RawTable]:
    group, held, schema = [], 0, None
    made = False
    for file in files:
        for batch, file_schema in hf_batches(file, name, max_cell=max_cell):
            schema = schema or file_schema
            if batch is None:
                continue
            group.append(batch)
            held += batch.num_rows
            if held >= rows:
                piece = arrow_raw(pa.Table.from_batches(group, schema=schema), labels, name, "")
                group, held, made = [], 0, True
                yield piece
                del piece
    if group or not made:  # the rest (an empty dataset: one empty piece, its columns)
        yield arrow_raw(pa.Table.from_batches(group, schema=schema), labels, name, "")
    pieces._warnings = list(pieces._first.warnings) if pieces._first is not None else []
