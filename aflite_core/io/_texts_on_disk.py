"""A dataset's text columns kept in a Parquet file instead of memory.

An audit reads its texts a chunk, a partition or a sample at a time
(:class:`~aflite_core.io.RowTexts`); none of its stages needs every row's text at
once. With a Dask scheduler the driver holds nothing else of that size, so the CLI writes the
loaded frame once as the run's ``dataset.parquet`` (:func:`write_frame`, the bytes the run
folder gets) and keeps only the other columns in memory
(:meth:`~aflite_core.io.datasets.AuditDataset.with_texts_on_disk`): 0.62 GB of Arrow text at 5M
SNLI-like rows. The texts are then read from the file a row group (:data:`ROW_GROUP` rows) at a
time, and the run folder's ``dataset.parquet`` is that file (linked or copied), not written
again.

Only columns stored as Arrow strings (pandas' ``str`` dtype: CSV, TSV, Parquet and shard
input) move: Parquet gives them back as they were, so every text is the text in memory was.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from aflite_core.io._tables import index_values, parquet_safe_table, unique_column_name
from aflite_core.io._text_columns import arrow_text, text_hashes, texts

__all__ = ["ROW_GROUP", "ColumnOnDisk", "TextsFile", "all_texts", "column_hashes",
           "link_or_copy", "move_texts", "row_group_starts", "take_rows", "texts_off_frame",
           "write_frame", "write_row_groups"]

#: Rows per row group of ``dataset.parquet``: a reader of some rows or of every row a batch
#: at a time (the exports, the report's examples, Explore, the texts on disk) decodes one group
#: at a time, not a whole column (one group of up to 1M rows by pyarrow's default).
ROW_GROUP = 65_536


def write_frame(frame: pd.DataFrame, path: str | os.PathLike, *,
                row_group: int | None = None) -> dict:
    """Write ``frame`` as a run's ``dataset.parquet``: every column plus its index as the
    row-id column ``row_id`` (``aflite_row_id`` when the data has a ``row_id`` column), in
    row groups of ``row_group`` rows (default :data:`ROW_GROUP`); columns Parquet cannot type
    are stored as text.

    Returns
    -------
    dict
        ``row_id_column``, ``n_rows``, ``columns`` and ``converted_columns`` (the run's
        ``summary["dataset"]``).

    Raises
    ------
    ValueError
        If the index (the row ids) has duplicates.
    """
    if frame.index.has_duplicates:
        raise ValueError("dataset frame: row ids (the index) must be unique")
    id_col = unique_column_name("row_id", map(str, frame.columns))
    data = frame.copy(deep=False)
    data.columns = [str(c) for c in data.columns]
    data.insert(0, id_col, index_values(frame.index))
    table, converted = parquet_safe_table(data)
    del data
    with pq.ParquetWriter(path, table.schema) as writer:
        write_row_groups(writer, table, row_group or ROW_GROUP)
    return {"row_id_column": id_col, "n_rows": int(len(frame)),
            "columns": [str(c) for c in frame.columns], "converted_columns": converted}


def write_row_groups(writer: Any, table: Any, rows: int = ROW_GROUP) -> None:
    """``table`` appended to a ``pyarrow.parquet.ParquetWriter`` in row groups of ``rows``
    rows, each written from one contiguous piece of every column: the writer cuts its pages
    where the input's chunks end, so the bytes would otherwise depend on how the rows were
    read (a file read whole is one chunk, a file read a row group at a time is several)."""
    for start in range(0, table.num_rows, rows):
        writer.write_table(table.slice(start, rows).combine_chunks(), row_group_size=rows)


def row_group_starts(source: Any) -> np.ndarray:
    """The first row of each row group of a ``pyarrow.parquet.ParquetFile``, then its rows."""
    meta = source.metadata
    return np.cumsum([0] + [meta.row_group(g).num_rows
                            for g in range(meta.num_row_groups)]).astype(np.int64)


def take_rows(path: str | os.PathLike, positions: np.ndarray, columns: list[str]) -> Any:
    """The rows at ``positions`` (in the order given, repeats allowed) of some ``columns`` of
    the Parquet file ``path``, as a ``pyarrow.Table``: each row group holding some of them
    read, taken from and freed before the next (reading ahead several groups at once cost
    +0.29 GB RSS for the report's 30 examples at 1M rows).

    Raises
    ------
    IndexError
        If a position is outside the file's rows.
    """
    source = pq.ParquetFile(path)
    positions = np.asarray(positions, dtype=np.int64)
    starts = row_group_starts(source)
    if positions.size and (positions.min() < 0 or positions.max() >= starts[-1]):
        raise IndexError(f"positions: expected 0 <= position < {starts[-1]} (the rows of "
                         f"{path})")
    group_of = np.searchsorted(starts, positions, side="right") - 1
    order = np.argsort(group_of, kind="stable")
    pieces = [source.schema_arrow.empty_table().select(columns)]
    for g in np.unique(group_of):
        rows = positions[order][group_of[order] == g] - starts[g]
        group = source.read_row_group(int(g), columns=columns)
        pieces.append(group.take(pa.array(rows)))
        del group
    return pa.concat_tables(pieces).take(pa.array(np.argsort(order, kind="stable")))


def link_or_copy(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """``target`` as the same file as ``source``: a hard link (no bytes written), or a copy
    where the two are on different file systems or links are refused."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


@dataclass(frozen=True)
class TextsFile:
    """The file a dataset's text columns were moved to (:func:`write_frame`'s layout).

    Attributes
    ----------
    path : pathlib.Path
        The Parquet file.
    columns : tuple of str
        The frame's columns kept only here.
    info : dict
        :func:`write_frame`'s answer (the run's ``summary["dataset"]``).
    starts : numpy.ndarray
        The first row of each row group, then the number of rows.
    """

    path: Path
    columns: tuple[str, ...]
    info: dict
    starts: np.ndarray = field(repr=False)

    @classmethod
    def write(cls, frame: pd.DataFrame, path: str | os.PathLike) -> TextsFile:
        """Write ``frame`` (:func:`write_frame`) and name the columns that may leave memory:
        those stored as Arrow strings."""
        path = Path(path)
        info = write_frame(frame, path)
        starts = row_group_starts(pq.ParquetFile(path))
        columns = tuple(str(c) for c in frame.columns if arrow_text(frame[c]) is not None)
        return cls(path=path, columns=columns, info=info, starts=starts)

    def column(self, name: str) -> ColumnOnDisk:
        """One of :attr:`columns`, read a row group at a time."""
        if name not in self.columns:
            raise KeyError(f"{self.path}: {name!r} is not among the texts kept on disk "
                           f"{list(self.columns)}")
        return ColumnOnDisk(self, name)

    def __len__(self) -> int:
        return int(self.starts[-1])


@dataclass(frozen=True)
class ColumnOnDisk:
    """A text column of a :class:`TextsFile`: the texts of some rows, as
    :func:`~aflite_core.io._text_columns.texts` gives them for the column in memory."""

    file: TextsFile
    name: str

    def __len__(self) -> int:
        return len(self.file)

    def texts_at(self, positions: np.ndarray) -> list[str]:
        """The texts of ``positions`` (rows of the frame, in the order given): each row group
        holding some of them read and decoded once, one at a time (:func:`take_rows`).

        Raises
        ------
        IndexError
            If a position is outside the frame.
        """
        taken = take_rows(self.file.path, positions, [self.name])
        # a missing value reads "", as texts() says
        return ["" if text is None else text for text in taken.column(0).to_pylist()]


def all_texts(column: pd.Series | ColumnOnDisk) -> list[str]:
    """Every row's text (:func:`~aflite_core.io._text_columns.texts`) of a column in memory or
    on disk."""
    if isinstance(column, pd.Series):
        return texts(column)
    return column.texts_at(np.arange(len(column)))


def column_hashes(column: pd.Series | ColumnOnDisk) -> np.ndarray:
    """:func:`~aflite_core.io._text_columns.text_hashes` of a column in memory or on disk (read
    a row group at a time: a hash depends on its row's text only)."""
    if isinstance(column, pd.Series):
        return text_hashes(column)

    source = pq.ParquetFile(column.file.path)
    parts = [text_hashes(source.read_row_group(g, columns=[column.name]).to_pandas()[
        column.name]) for g in range(source.num_row_groups)]
    return np.concatenate([np.empty(0, dtype=np.uint64), *parts])


def move_texts(dataset: Any, path: str | os.PathLike, *,
               components: np.ndarray | None = None) -> Any:
    """``dataset`` (an :class:`~aflite_core.io.datasets.AuditDataset`) with its text columns
    read from ``path`` instead of memory.

    The whole frame is written to ``path`` as the run's ``dataset.parquet``
    (:func:`write_frame`); the columns stored as Arrow strings then leave the frame but for
    the label, split and group columns and a multiple-choice question id (what the audit
    reads whole): the premises, the hypotheses and any other text the audit carries without
    reading. The texts are read back from the file a row group at a time
    (:meth:`AuditDataset.text_column`); the run's writer links the file as its
    ``dataset.parquet`` (:meth:`~aflite_core.runs.RunWriter.link_dataset`).
    ``components``: the dataset's linked-text groups (computed from the texts in memory),
    kept for the new frame.

    Returns
    -------
    AuditDataset
        A new dataset; ``dataset`` is unchanged (drop it to free its texts).

    Raises
    ------
    ValueError
        If the dataset's texts were moved already.
    """
    if dataset.texts_file is not None:
        raise ValueError(f"the texts were moved to {dataset.texts_file.path} already")
    written = TextsFile.write(dataset.frame, path)
    return texts_off_frame(dataset, written, components)


def texts_off_frame(dataset: Any, written: TextsFile, components: np.ndarray | None) -> Any:
    """``dataset`` once its frame is in ``written``: the columns of ``written.columns`` leave
    the frame but for the label, split and group columns and a multiple-choice question id
    (what the audit reads whole); the label and split columns become categoricals; the
    linked-text ``components`` (None: none) are kept for the new frame. Shared by
    :func:`move_texts` and the streamed load (:mod:`aflite_core.io._streamed_load`)."""
    mapping = dataset.columns
    kept = {mapping.label, mapping.split, mapping.group}
    moved = tuple(c for c in written.columns
                  if c not in kept and not c.startswith("question_id"))
    frame = dataset.frame.drop(columns=[c for c in dataset.frame.columns if str(c) in moved])
    # what stays and is one of a few texts a row, as categorical codes: the label and split
    # columns (Arrow strings of 12-20 bytes a row, 1 byte as codes: 0.14 GB at 5M rows), the
    # exclusion reasons (a pointer a row); the file holds them as they were
    for column in (mapping.label, mapping.split):
        if column is not None and column in frame.columns \
                and arrow_text(frame[column]) is not None:
            frame[column] = frame[column].astype("category")
    out = replace(dataset, frame=frame, texts_file=replace(written, columns=moved),
                  exclusion=dataset.exclusion.astype("category"))
    if components is not None:  # the same rows and texts: the components stand
        out.set_linked_components(components)
    return out
