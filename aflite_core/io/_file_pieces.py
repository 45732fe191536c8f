"""One data file's rows a piece at a time: :func:`file_pieces`.

The streamed load (:mod:`aflite_core.io._streamed_load`) takes a folder of shards a shard at
a time; a single large file is taken here as a sequence of pieces, each a
:class:`~aflite_core.io._readers.RawTable` of some of its rows, so that no process holds
every row's text:

* **CSV and TSV** (plain or gzipped) are parsed in order by this process, as
  :func:`~aflite_core.io.read_table` parses them (the same stream, decoder, line
  limit and checks: :class:`~aflite_core.io._delimited.DelimitedBatches`), a piece per
  65,536 rows. A CSV field may hold newlines inside quotes, so a CSV file cannot be cut at
  byte offsets without parsing what comes before: it is parsed by one process.
* **JSON Lines** likewise, 65,536 records a piece (:func:`~aflite_core.io._json_tables.
  jsonl_pieces`); each piece's columns are typed over its records, so the pieces must agree
  on every column's type (text in all, integers in all, ...) and give no notice.
* **Parquet** (a plain file on a path) is read by row groups: each piece is one or more
  whole row groups (:data:`PIECE_ROWS` rows or more, or one group), read by
  :func:`read_parquet_piece` -- on a cluster's workers when the caller maps it there. The
  footer is checked first, as the whole read checks it; each piece is read under
  ``max_bytes`` and the pieces' decoded sizes are added here, in order.

Together the pieces are what the whole read gives: the rows in order, the same warnings,
dropped columns and types, line numbers, and ``content_hash`` (:meth:`FilePieces.join`).
Where that cannot be promised piece by piece, :class:`Unstreamable` says why and the caller
reads the file whole: a JSON document, JSON Lines whose pieces type a column differently (a
key missing from some records, integers in one piece and floats in another), a gzipped
Parquet file or a source that is not a path, a Parquet file with a stored pandas
index or a dictionary-typed (Categorical) column, and pieces whose dropped columns or
warnings differ (a binary column that is UTF-8 in one row group and not in another).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from aflite_core.errors import (
    DatasetFormatError,
    Unstreamable,  # noqa: F401 - re-exported: raised here
)
from aflite_core.io._delimited import (
    DelimitedBatches,
    decoded_lines,
    is_utf8,
    no_rows_error,
    text_frame,
)
from aflite_core.io._inflow import open_input
from aflite_core.io._json_tables import jsonl_pieces, no_records_error
from aflite_core.io._line_parts import LineParts, plan_line_parts, read_line_part, whole_warnings
from aflite_core.io._readers import (
    MAX_LINE_BYTES,
    RawTable,
    check_parquet_footer,
    normalise_format,
    parquet_budget_error,
    parquet_errors,
    parquet_frame,
    read_plan,
    source_name,
)
from aflite_core.io._table_checks import check_duplicate_names

__all__ = ["PIECE_ROWS", "FilePieces", "Unstreamable", "file_pieces", "read_parquet_piece"]

#: Rows a Parquet piece gathers (whole row groups) before it is handed on.
PIECE_ROWS = 65_536




@dataclass
class FilePieces:
    """A file's pieces (:func:`file_pieces`).

    ``read`` and ``items``: for Parquet and a TSV/JSON Lines file cut into parts,
    ``read(item)`` gives one piece as ``(RawTable or None, info)``, to be called in
    ``items`` order here or elsewhere (a cluster's workers); for a file parsed in order
    ``read`` is None and :meth:`local` gives the pieces. Each piece is passed through
    :meth:`take` in order; :meth:`join` makes the whole table of the pieces' (possibly
    leaner) frames once every piece was taken.
    """

    name: str
    format: str
    read: Callable[[Any], Any] | None = None
    items: list = field(default_factory=list)
    max_bytes: int | None = None
    _local: Iterator[RawTable] | None = None
    _inflow: Any = None
    _first: RawTable | None = None
    _dtypes: list = field(default_factory=list)
    _parts: LineParts | None = None
    _blank = 0
    _decoding: list[str] = field(default_factory=list)
    _columns: list = field(default_factory=list)
    _decoded = 0
    _rows = 0
    _hash = ""
    _encoding: str | None = None
    _warnings: list[str] = field(default_factory=list)

    def local(self) -> Iterator[RawTable]:
        """The pieces of a text file, parsed here in order."""
        if self._local is None:
            raise TypeError("the pieces are read by read(item)")
        return self._local

    def close(self) -> None:
        """Let go of the file (a text file's stream, read or not)."""
        if self._local is not None:
            self._local.close()
        if self._inflow is not None:
            self._inflow.close()

    def take(self, piece: Any) -> RawTable | None:
        """A piece as read (in order): its table (None: a part without rows), checked to
        agree with the first piece's columns, types, dropped columns and warnings
        (:class:`Unstreamable` otherwise); for Parquet its decoded size added to the
        others' under ``max_bytes``; for a line part its blank lines and decoder's
        warnings kept for the whole file's."""
        if isinstance(piece, tuple):
            piece, info = piece
            if "decoded" in info:
                self._decoded += info["decoded"]
                if self.max_bytes is not None and self._decoded > self.max_bytes:
                    raise parquet_budget_error(self.name, self.max_bytes,
                                               self._rows + len(piece.frame))
            else:
                self._blank += info["blank"]
                self._decoding = self._decoding or info["decoding"]
                if piece is None:
                    return None
                if self._first is None and self._parts.header is not None:
                    check_duplicate_names(self._parts.header, self.name, "header")
        if piece.warnings and self.format == "jsonl":
            raise Unstreamable("a JSON Lines column is typed with a notice (integers "
                               "beyond 64 bits): the notice is the whole file's")
        if self._first is not None and list(piece.frame.columns) != self._columns \
                and set(piece.frame.columns) == set(self._columns):
            # JSON Lines keys met in another order: the whole file's order is the first
            # piece's, which has every key
            piece = replace(piece, frame=piece.frame[self._columns])
        dtypes = list(zip(piece.frame.columns, piece.frame.dtypes, strict=True))
        if self._first is None:
            # what the others must agree with, not its rows
            self._columns = list(piece.frame.columns)
            self._dtypes = dtypes
            self._first = RawTable(pd.DataFrame(columns=piece.frame.columns), piece.name,
                                   piece.format, "", warnings=list(piece.warnings),
                                   column_types=dict(piece.column_types),
                                   dropped=dict(piece.dropped))
        elif (set(piece.dropped) != set(self._first.dropped)
              or piece.warnings != self._first.warnings
              or piece.column_types != self._first.column_types
              or dtypes != self._dtypes):
            raise Unstreamable("the file's pieces differ in their columns, their types or "
                               "the columns dropped or decoded (the whole file decides them)")
        self._rows += len(piece.frame)
        return piece

    def join(self, frames: list[pd.DataFrame], lines: list[np.ndarray | None]) -> RawTable:
        """The whole table of the pieces' frames (in order) and row lines, with the whole
        read's name, format, hash, encoding, warnings, types and dropped columns."""
        first = self._first
        if self._parts is not None:
            if first is None:  # no part held a row
                if self._parts.header is None:
                    raise no_records_error(self.name)
                check_duplicate_names(self._parts.header, self.name, "header")
                raise no_rows_error(self.name, self._parts.header)
            self._warnings = whole_warnings(self._parts, self._blank, self._decoding)
        if first is None:
            raise DatasetFormatError(f"{self.name}: no rows were read")
        frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        frame.index = pd.RangeIndex(len(frame))
        starts = None if any(x is None for x in lines) else np.concatenate(lines)
        warnings = (self._warnings if self.read is None or self._parts is not None
                    else list(first.warnings))
        return RawTable(frame, self.name, self.format, self._hash, starts, self._encoding,
                        list(warnings), dict(first.column_types), dict(first.dropped))


def file_pieces(source: Any, *, name: str | None = None, format: str | None = None,
                encoding: str | None = None, max_bytes: int | None = None,
                max_line_bytes: int | None = MAX_LINE_BYTES,
                split: bool = False) -> FilePieces:
    """The pieces of one data file, read as :func:`~aflite_core.io.read_table`
    reads it whole (same options). ``split``: a TSV or JSON Lines file is cut into parts
    that ``read`` parses apart (:mod:`aflite_core.io._line_parts`; for a caller that maps
    them onto a cluster's workers), where that gives the whole read's table.

    Raises
    ------
    Unstreamable
        The file must be read whole (see the module docstring).
    DatasetError
        What the whole read refuses before its first row (a special file, over
        ``max_bytes``, empty, a Parquet footer it refuses).
    """
    if not isinstance(source, (str, os.PathLike)):
        raise Unstreamable("not a file on a path")
    label = source_name(source, name)
    fmt = normalise_format(format)
    inflow = open_input(source, label, max_bytes)
    try:
        plan = read_plan(inflow, label, fmt, encoding=encoding, max_line_bytes=max_line_bytes)
        if plan.format == "parquet":
            if inflow.gzip:
                raise Unstreamable("a gzipped Parquet file")
            while inflow.read1(1 << 20):  # the content hash, as the whole read takes it
                pass
            pieces = _parquet_pieces(Path(source), label, max_bytes, max_line_bytes)
            pieces._hash = inflow.hexdigest()
            return pieces
        if plan.format not in ("csv", "tsv", "jsonl"):
            raise Unstreamable(f"{plan.format}: a JSON document is parsed whole")
        if split and plan.format in ("tsv", "jsonl"):
            parts = plan_line_parts(inflow, plan.format, plan.codec,
                                    max_line_bytes=max_line_bytes)
            inflow.close()
            if parts is not None:
                return _line_pieces(Path(source), label, parts, max_line_bytes)
            inflow = open_input(source, label, max_bytes)  # read in order, from the start
            plan = read_plan(inflow, label, fmt, encoding=encoding,
                             max_line_bytes=max_line_bytes)
    except BaseException:
        inflow.close()
        raise
    pieces = FilePieces(label, plan.format)
    pieces._encoding = plan.codec
    pieces._inflow = inflow
    pieces._local = (_jsonl_pieces(inflow, plan, pieces) if plan.format == "jsonl"
                     else _delimited_pieces(inflow, plan, pieces, max_line_bytes))
    return pieces


def _delimited_pieces(inflow: Any, plan: Any, pieces: FilePieces,
                      max_line_bytes: int | None) -> Iterator[RawTable]:
    """CSV/TSV pieces, as :func:`~aflite_core.io.read_table` parses the stream."""
    label, codec = pieces.name, plan.codec
    with inflow:
        inflow.watch(plan.guard, nul=is_utf8(codec))
        with decoded_lines(inflow, codec, newline="") as lines:
            batches = DelimitedBatches(
                lines, label, "\t" if plan.format == "tsv" else ",",
                max_cell=max_line_bytes if plan.guard is not None else None,
                check_nul=not is_utf8(codec))
            for arrays, starts in batches:
                piece = RawTable(text_frame(batches.header, [[array] for array in arrays]),
                                 label, plan.format, "", starts, codec)
                del arrays
                yield piece
                del piece  # not held while the next piece is parsed
        pieces._warnings = batches.warnings
        pieces._hash = inflow.hexdigest()


def _line_pieces(path: Path, name: str, parts: LineParts,
                 max_line_bytes: int | None) -> FilePieces:
    read = functools.partial(read_line_part, str(path), name, parts.format, parts.codec,
                             max_line_bytes, parts.header, parts.header_line)
    pieces = FilePieces(name, parts.format, read=read, items=list(parts.items))
    pieces._parts, pieces._hash, pieces._encoding = parts, parts.content_hash, parts.codec
    return pieces


def _jsonl_pieces(inflow: Any, plan: Any, pieces: FilePieces) -> Iterator[RawTable]:
    """JSON Lines pieces, as :func:`~aflite_core.io.read_table` reads the stream,
    each piece's columns typed over its records (:meth:`FilePieces.take` checks that they
    agree)."""
    label, codec = pieces.name, plan.codec
    with inflow:
        inflow.watch(plan.guard, nul=is_utf8(codec))
        with decoded_lines(inflow, codec, newline="\n") as lines:
            for frame, starts, warnings in jsonl_pieces(lines, label,
                                                        check_nul=not is_utf8(codec)):
                piece = RawTable(frame, label, "jsonl", "", starts, codec, warnings)
                del frame
                yield piece
                del piece
            pieces._warnings = list(lines.warnings)
        pieces._hash = inflow.hexdigest()


def _parquet_pieces(path: Path, name: str, max_bytes: int | None,
                    max_cell: int | None = None) -> FilePieces:
    """The row-group pieces of a Parquet file, its footer checked as the whole read does."""
    import pyarrow.parquet as pq  # lazy: +17 ms to import

    with parquet_errors(name):
        pfile = pq.ParquetFile(path)
        check_parquet_footer(pfile, name, max_bytes, max_cell=max_cell)
        schema = pfile.schema_arrow
        meta = pfile.metadata
    if any(pa.types.is_dictionary(f.type) for f in schema):
        raise Unstreamable("a dictionary-typed (Categorical) column: its categories are "
                           "those of the whole file")
    index = (schema.pandas_metadata or {}).get("index_columns") or []
    if any(not (isinstance(i, dict) and i.get("kind") == "range" and i.get("start") == 0
                and i.get("step") == 1) for i in index):
        raise Unstreamable("a stored pandas index")
    items, group, rows, before = [], [], 0, 0
    for i in range(meta.num_row_groups):
        group.append(i)
        rows += meta.row_group(i).num_rows
        if rows >= PIECE_ROWS:
            items.append((tuple(group), before))
            group, before, rows = [], before + rows, 0
    if group:
        items.append((tuple(group), before))
    read = functools.partial(read_parquet_piece, str(path), name, max_bytes, max_cell=max_cell)
    return FilePieces(name, "parquet", read=read, items=items, max_bytes=max_bytes)


def read_parquet_piece(path: str, name: str, max_bytes: int | None,
                       item: tuple[tuple[int, ...], int], *, max_cell: int | None = None
                       ) -> tuple[RawTable, dict]:
    """Some row groups of a Parquet file as the whole read reads them (a task a cluster's
    worker may run): ``item`` is ``(row groups, rows before them)``. Returns the piece and
    ``{"decoded": its decoded size}`` (0 without ``max_bytes``).

    Raises
    ------
    FileNotFoundError
        The file is not on this process's storage (the caller then reads it itself).
    DatasetSizeError
        The piece alone passes ``max_bytes``.
    """
    import pyarrow.parquet as pq  # lazy: +17 ms to import

    if not Path(path).is_file():
        raise FileNotFoundError(f"{path!r} is not on the storage of the process reading it")
    groups, before = item
    with parquet_errors(name):
        schema = pq.ParquetFile(path).schema_arrow
        frame, types, warnings, dropped, decoded = parquet_frame(
            path, schema, name, max_bytes, row_groups=list(groups), rows_before=before,
            max_cell=max_cell)
    frame.index = pd.RangeIndex(len(frame))
    return RawTable(frame, name, "parquet", "", warnings=warnings, column_types=types,
                    dropped=dropped), {"decoded": decoded}
