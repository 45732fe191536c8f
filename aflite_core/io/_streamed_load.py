"""Load data with its texts straight to disk, a shard or piece at a time: :func:`load_to_disk`.

:func:`~aflite_core.io.datasets.load_dataset` holds every row's text while it checks the rows
(0.62 GB of Arrow text at 5M SNLI-like rows, more with long texts), and only then does an
audit on a cluster move the texts to a file (:meth:`~aflite_core.io.datasets.AuditDataset.
with_texts_on_disk`). Here the shards come one at a time (read on the cluster's workers with a
``map_shards`` that can ``stream``, e.g. the CLI's :class:`~aflite_core.commands._input.
ShardsOnCluster`, else here), and each shard, before the next is taken:

1. is checked to have the first shard's columns (refused, naming it, as the whole load does);
2. gives the per-row facts the loader's checks read of its premise and hypothesis
   (:class:`~aflite_core.io._text_facts.TextFacts`: missing, blank, length, hashes);
3. is appended to the run's ``dataset.parquet`` (row id first, as :func:`~aflite_core.io.
   texts_on_disk.write_frame` writes it);
4. keeps in memory only the columns the checks read (label, split, group, id and question
   columns, numbers) and, for each other text column, a one-byte placeholder.

The shards' lean tables are then checked as one (:func:`~aflite_core.io.datasets.
prepare_dataset` with the facts) and the dataset is the one ``load_dataset(...).
with_texts_on_disk(path)`` gives: the same frame, exclusions, report, groups and texts, and
the file byte for byte. At most one shard's text is in this process at a time.

One file is taken a piece at a time as well (:mod:`aflite_core.io._file_pieces`: a Parquet
file's row groups and a TSV or JSON Lines file's parts read by ``map_shards`` too, a CSV file
parsed here), and so is a Hugging Face ``datasets`` folder (:mod:`aflite_core.io._hf_pieces`,
read here). Data the streamed load does not change but must see whole is loaded whole (the
result is the same; ``loaded_whole_because`` says why): multiple-choice data (``choices=``),
a per-choice layout, a text column that is not Arrow text in every shard, a shard whose
columns Parquet cannot type as they are or whose types differ from the first shard's, and a
first shard whose column roles cannot be guessed (the whole load then says why).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from aflite_core.errors import (
    DatasetError,
    LoadWhole,  # noqa: F401 - re-exported: raised here
)
from aflite_core.io._column_roles import ID_NAMES, guess_mapping, normalized_name
from aflite_core.io._file_pieces import FilePieces, Unstreamable, file_pieces
from aflite_core.io._per_choice import QUESTION_NAMES
from aflite_core.io._readers import MAX_LINE_BYTES, RawTable
from aflite_core.io._tables import parquet_safe_table, unique_column_name
from aflite_core.io._text_columns import arrow_text
from aflite_core.io._text_facts import TextFacts, fact_trims
from aflite_core.io._texts_on_disk import (
    ROW_GROUP,
    TextsFile,
    row_group_starts,
    texts_off_frame,
    write_row_groups,
)

__all__ = ["load_to_disk"]

#: The one category of a text column's placeholder: the checks never read those columns.
_PLACEHOLDER = ""


_Whole = LoadWhole  # the data must be loaded whole; the message says why


def load_to_disk(source: Any, path: str | os.PathLike, *, map_shards: Any = None,
                 name: str | None = None, format: str | None = None,
                 encoding: str | None = None, max_bytes: int | None = None,
                 max_line_bytes: int | None = MAX_LINE_BYTES, **options: Any) -> Any:
    """``load_dataset(source, ...).with_texts_on_disk(path)``, without every row's text in
    this process when ``source`` is a folder or a glob of shards.

    Parameters
    ----------
    source : str or Path
        As :func:`~aflite_core.io.datasets.load_dataset` takes it.
    path : str or Path
        The Parquet file the texts go to (the run's ``dataset.parquet``); replaced.
    map_shards : callable, optional
        ``load_dataset``'s ``map_shards``; with a ``stream(read, paths)`` method (an iterator
        of the shards' tables in order) the shards are read there one at a time.
    name, format, encoding, max_bytes, max_line_bytes, **options
        As :func:`~aflite_core.io.datasets.load_dataset` (the column options: premise,
        hypothesis, label, split, id, group, question, choices, answer, answer_base).

    Returns
    -------
    AuditDataset
        Its texts read from ``path`` (``texts_file``); ``loaded_by`` says how:
        ``"streamed"`` or ``"whole"`` (then ``loaded_whole_because`` says why).

    Raises
    ------
    DatasetError
        As :func:`~aflite_core.io.datasets.load_dataset`; ``path`` is then removed.
    """
    from aflite_core.io.datasets import load_dataset  # lazy: +38 ms to import

    path = Path(path)
    read_options = {"format": format, "encoding": encoding, "max_bytes": max_bytes,
                    "max_line_bytes": max_line_bytes}
    try:
        try:
            dataset = _streamed(source, path, map_shards=map_shards, name=name,
                                read_options=read_options, options=options)
            dataset.loaded_by = "streamed"
            return dataset
        except _Whole as exc:
            path.unlink(missing_ok=True)
            because = str(exc)
        dataset = load_dataset(source, name=name, map_shards=map_shards, **read_options,
                               **options).with_texts_on_disk(path)
        dataset.loaded_by, dataset.loaded_whole_because = "whole", because
        return dataset
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _streamed(source: Any, path: Path, *, map_shards: Any, name: str | None,
              read_options: dict, options: dict) -> Any:
    from aflite_core.io import shards  # lazy: +19 ms to import

    # lazy: +38 ms to import
    from aflite_core.io.datasets import LINKED_TEXT, NotStreamable, prepare_dataset

    folder = isinstance(source, (str, os.PathLike)) and Path(source).is_dir()
    if options.get("choices") is not None:
        raise _Whole("multiple-choice data")
    if folder and any((Path(source) / f).is_file() for f in (shards.HF_STATE, shards.HF_DICT)):
        from aflite_core.io._hf_pieces import DatasetFolderPieces  # lazy: +21 ms to import

        path_ = Path(source)
        name = name or shards.sharded_name(path_)
        # the Arrow files hold the values as they are in memory: their size is what is read
        shards.check_total_size(shards.hf_folder_files(path_, name), name,
                                 read_options["max_bytes"])
        stream: _Shards | _Pieces | DatasetFolderPieces = DatasetFolderPieces(
            path_, name, max_cell=read_options["max_line_bytes"])
    elif folder or shards.looks_like_glob(source):
        stream = _Shards(source, name, read_options, map_shards)
    else:
        try:
            pieces = file_pieces(source, name=name, split=hasattr(map_shards, "stream"),
                                 **read_options)
            stream = _Pieces(pieces, map_shards)
        except Unstreamable as exc:
            raise _Whole(str(exc)) from None

    writer = _ShardWriter(path)
    lean: list[RawTable] = []
    facts: dict[str, list[TextFacts]] = {}
    layout: _Layout | None = None
    try:
        i = -1
        for table in stream.tables():  # not enumerate: its kept tuple would hold the last one
            i += 1
            if layout is None:
                layout = _Layout.of(replace(table, name=stream.name), options)
            else:
                _same_columns(table, lean[0], stream.part(i), stream.part(0), stream.name)
            trims = layout.trims
            for column, trim in trims.items():
                facts.setdefault(column, []).append(
                    TextFacts.of(table.frame[column], trim=trim).computed())
            writer.append(table.frame, layout, options.get("id"))
            lean.append(layout.lean(table, stream.part(i)))
            del table
            _release_arrow_pool()  # the shard's buffers, not kept under the next one's
        info = writer.close()
    except Unstreamable as exc:
        raise _Whole(str(exc)) from None
    finally:
        stream.close()
        writer.abort()
    raw = stream.join(lean)
    del lean
    joined = {column: TextFacts.concat(parts) for column, parts in facts.items()}
    del facts
    try:
        dataset = prepare_dataset(raw, facts=joined, **options)
    except NotStreamable as exc:
        raise _Whole(str(exc)) from None
    mapping = dataset.columns
    if mapping.group is not None and mapping.group in layout.placeholders:
        # grouped by the premise's text (linking made one giant group): the groups read it
        dataset.frame[mapping.group] = pd.read_parquet(
            path, columns=[mapping.group])[mapping.group].array
        dataset.report.n_groups = dataset.count_groups()
    components = (dataset._linked_components() if mapping.group == LINKED_TEXT else None)
    return _on_disk(dataset, path, info, layout, components)


class _Layout:
    """Which columns a shard keeps in memory, and the facts it gives (from the first shard's
    columns and the caller's options)."""

    def __init__(self, columns: list[str], placeholders: set[str], trims: dict[str, str],
                 row_id: str) -> None:
        self.columns = columns
        self.placeholders = placeholders
        self.trims = trims
        self.row_id = row_id

    @classmethod
    def of(cls, first: RawTable, options: dict) -> _Layout:
        """The layout of the first shard (named as the whole data): the roles guessed as the
        whole load guesses them (a role it cannot find: :class:`_Whole`, and the whole load
        says why)."""
        columns = [str(c) for c in first.frame.columns]
        roles = {role: options.get(role) for role in ("premise", "hypothesis", "label", "split")}
        named = [*roles.values(), *(options.get(k) for k in ("id", "group", "question"))]
        if any(c and c not in columns for c in named):
            raise _Whole("a column named by an option is not in the first shard")
        try:
            mapping = guess_mapping(first, [*columns, *(c for c in first.dropped
                                                         if c not in columns)], **roles)
        except DatasetError as exc:
            raise _Whole(f"column roles: {exc}") from None
        if any(c in first.dropped for c in (mapping.premise, mapping.hypothesis, mapping.label,
                                            mapping.split) if c):
            raise _Whole("a role names a column the reader left out")
        premise = mapping.premise
        hypothesis = mapping.hypothesis
        read = {mapping.label, mapping.split, options.get("group"), options.get("id"),
                options.get("question")}
        id_names = {normalized_name(n) for n in ID_NAMES}
        for column in columns:
            if normalized_name(column) in id_names or (column.lower() in QUESTION_NAMES
                                             and column not in (premise, hypothesis)):
                read.add(column)
        placeholders = {c for c in columns
                        if c not in read and arrow_text(first.frame[c]) is not None}
        return cls(columns, placeholders, fact_trims(premise, hypothesis),
                   unique_column_name("row_id", columns))

    def lean(self, table: RawTable, shard: str) -> RawTable:
        """``table`` with a one-byte placeholder instead of each text column no check reads
        (:class:`_Whole` when such a column is not Arrow text in this shard)."""
        frame = table.frame.copy(deep=False)
        placeholder = pd.Categorical.from_codes(np.zeros(len(frame), dtype=np.int8),
                                                [_PLACEHOLDER])
        for column in self.placeholders:
            if arrow_text(frame[column]) is None:
                raise _Whole(f"shard {shard}: column {column!r} is not text as in the first")
            frame[column] = placeholder
        return replace(table, frame=frame)


class _ShardWriter:
    """The shards' rows appended to one Parquet file as :func:`~aflite_core.io._texts_on_disk.
    write_frame` writes a frame: the row id first, then every column."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer: Any = None
        self._schema: Any = None
        self._rows = 0
        self._columns: list[str] = []
        self._pending: list[Any] = []  # rows not yet in a whole row group
        self._pending_rows = 0

    def append(self, frame: pd.DataFrame, layout: _Layout, id_column: str | None) -> None:
        data = frame.copy(deep=False)
        data.columns = [str(c) for c in data.columns]
        ids = (np.arange(self._rows, self._rows + len(frame), dtype=np.int64)
               if id_column is None else frame[id_column].to_numpy())
        data.insert(0, layout.row_id, ids)
        table, converted = parquet_safe_table(data)
        del data
        if converted:
            raise _Whole(f"columns Parquet stores as text (values of mixed types): "
                         f"{sorted(converted)}")
        if self._writer is None:
            self._schema = table.schema
            self._columns = [str(c) for c in frame.columns]
            self._writer = pq.ParquetWriter(self.path, self._schema)
        elif not table.schema.equals(self._schema, check_metadata=False):
            # loaded whole, the shards' columns are joined (numbers and texts: an object
            # column stored as text); not cast here, which could give other values
            raise _Whole("a shard's or piece's column types differ from the first one's")
        self._rows += len(frame)
        # whole row groups of ROW_GROUP rows across the shards' ends, as write_frame makes
        # them: the same file, byte for byte, as the frame written at once
        self._pending.append(table)
        self._pending_rows += table.num_rows
        if self._pending_rows >= ROW_GROUP:
            self._flush(self._pending_rows - self._pending_rows % ROW_GROUP)

    def abort(self) -> None:
        """Close the file without the rows left (after an error: the file is removed)."""
        if self._writer is not None:
            self._pending, self._pending_rows = [], 0
            self._writer.close()
            self._writer = None

    def _flush(self, rows: int) -> None:
        pending = pa.concat_tables(self._pending)
        write_row_groups(self._writer, pending.slice(0, rows))
        rest = pending.slice(rows)
        self._pending, self._pending_rows = ([rest] if rest.num_rows else []), rest.num_rows

    def close(self) -> dict:
        """Close the file (again: nothing); :func:`~aflite_core.io.write_frame`'s
        answer."""
        if self._writer is not None:
            if self._pending_rows:
                self._flush(self._pending_rows)
            self._writer.close()
            self._writer = None
        return {"row_id_column": None, "n_rows": self._rows, "columns": self._columns,
                "converted_columns": {}}


class _ShardStream:
    """The shards' tables (or a file's pieces: ``files`` are then its pieces' items) in
    order, read by ``map_shards.stream`` (on a cluster's workers) or here; a shard the
    workers cannot open is read here, with a notice."""

    def __init__(self, read: Callable, files: Sequence[Any], map_shards: Any, *,
                 one_file: bool = False) -> None:
        self._read, self._files, self._one_file = read, list(files), one_file
        self._remote = getattr(map_shards, "stream", None)
        self.engine = str(getattr(map_shards, "engine", "local")) if self._remote else "local"
        self.notice = ""
        self._source: Any = None

    def tables(self) -> Iterator[RawTable]:
        if self._remote is None:
            for file in self._files:
                yield self._read(file)
            return
        self._source = self._remote(self._read, self._files)
        for file in self._files:
            try:
                yield next(self._source)
            except FileNotFoundError as exc:  # the workers do not see the driver's files
                what, it = ("the file was", "it") if self._one_file else ("the shards were",
                                                                          "them")
                self.notice = (f"{what} read here: the cluster's workers could not open {it} "
                               f"({exc}); put {it} on storage the workers share to read {it} "
                               "there")
                self.close()
                self._remote, self.engine = None, "local"
                index = self._files.index(file)
                for rest in self._files[index:]:
                    yield self._read(rest)
                return

    def close(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source = None

    def noted(self, raw: RawTable) -> RawTable:
        """``raw`` with where it was read (``read_by``) and the notice, if any."""
        raw.read_by = self.engine
        if self.notice:
            raw.warnings.append(self.notice)
        return raw


def _shard_tables(read: Callable, max_bytes: int | None, files: Sequence[Path],
                  map_shards: Any) -> _ShardStream:
    from aflite_core.io.shards import read_shard  # lazy: +19 ms to import

    return _ShardStream(functools.partial(read_shard, read, max_bytes), files, map_shards)


class _Shards:
    """A folder or glob's shards, a shard at a time, then joined as the whole load joins
    them (:func:`~aflite_core.io.shards.read_sharded`)."""

    def __init__(self, source: Any, name: str | None, read_options: dict,
                 map_shards: Any) -> None:
        from aflite_core.io import shards  # lazy: +19 ms to import

        self.name = name = name or shards.sharded_name(source)  # as read_source names it
        files = shards._shard_files(source, name)
        shards.check_total_size(files, name, read_options["max_bytes"])
        self._names = [shards._relative(f, source) for f in files]
        read = shards.shard_reader(read_options["format"], read_options["encoding"],
                                   read_options["max_line_bytes"])
        self._stream = _shard_tables(read, read_options["max_bytes"], files, map_shards)

    def tables(self) -> Iterator[RawTable]:
        return self._stream.tables()

    def part(self, i: int) -> str:
        return self._names[i]

    def close(self) -> None:
        self._stream.close()

    def join(self, lean: list[RawTable]) -> RawTable:
        from aflite_core.io import shards  # lazy: +19 ms to import

        return self._stream.noted(shards._concatenate(lean, self._names, self.name))


class _Pieces:
    """One file's pieces (:func:`~aflite_core.io._file_pieces.file_pieces`): a Parquet
    file's row groups read through ``map_shards`` (on the workers when it can stream), a
    CSV/TSV file parsed here."""

    def __init__(self, pieces: FilePieces, map_shards: Any) -> None:
        self.pieces, self.name = pieces, pieces.name
        self._stream = (_ShardStream(pieces.read, pieces.items, map_shards, one_file=True)
                        if pieces.read is not None else None)

    def tables(self) -> Iterator[RawTable]:
        source = self._stream.tables() if self._stream is not None else self.pieces.local()
        while True:  # no loop variable: it would hold a piece while the next is read
            try:
                taken = self.pieces.take(next(source))
            except StopIteration:
                return
            if taken is not None:  # (a part of a file without rows)
                yield taken
            del taken

    def part(self, i: int) -> str:
        return f"{self.name} (piece {i + 1})"

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
        self.pieces.close()

    def join(self, lean: list[RawTable]) -> RawTable:
        raw = self.pieces.join([t.frame for t in lean], [t.lines for t in lean])
        return raw if self._stream is None else self._stream.noted(raw)


def _same_columns(table: RawTable, first: RawTable, shard: str, first_shard: str,
                  name: str) -> None:
    from aflite_core.io.shards import check_same_columns  # lazy: +19 ms to import

    check_same_columns(list(first.frame.columns), list(table.frame.columns), shard,
                       first_shard, name)


def _on_disk(dataset: Any, path: Path, info: dict, layout: _Layout,
             components: np.ndarray | None) -> Any:
    """The dataset as :func:`~aflite_core.io._texts_on_disk.move_texts` leaves it
    (:func:`~aflite_core.io._texts_on_disk.texts_off_frame`): the file's text columns are the
    Arrow text columns and the placeholders."""
    frame = dataset.frame
    texts = tuple(str(c) for c in frame.columns
                  if c in layout.placeholders or arrow_text(frame[c]) is not None)
    written = TextsFile(path=path, columns=texts, info={**info, "row_id_column": layout.row_id},
                        starts=row_group_starts(pq.ParquetFile(path)))
    return texts_off_frame(dataset, written, components)


def _release_arrow_pool() -> None:
    """Hand the Arrow memory pool's freed pages back (mimalloc and jemalloc keep them: a
    shard's text read, written and dropped stayed in the process)."""
    pa.default_memory_pool().release_unused()
