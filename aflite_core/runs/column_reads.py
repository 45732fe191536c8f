"""Parts of a run's Parquet tables read alone: some columns (strings as sorted codes) or
some rows, so that the report of a run of millions of rows never holds a whole table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from aflite_core.errors import RunError

__all__ = ["parquet_rows", "read_columns"]


def read_columns(path: Path, columns: list[str] | None = None,
                 categories: tuple[str, ...] | list[str] = ()) -> pd.DataFrame:
    """The Parquet file's ``columns`` (all when None), those of ``categories`` as pandas
    categoricals with sorted categories (one small code a row; equal values group, compare
    and sort as the strings do; a column the file lacks is ignored)."""
    if not categories:
        return pd.read_parquet(path, columns=columns)
    frame = pd.read_parquet(path, columns=columns, read_dictionary=list(categories))
    for column in categories:
        if column in frame and isinstance(frame[column].dtype, pd.CategoricalDtype):
            values = frame[column].cat
            frame[column] = values.reorder_categories(sorted(values.categories))
    return frame


def parquet_rows(path: Path, positions: np.ndarray, columns: list[str] | None,
                 id_col: str) -> pd.DataFrame:
    """Rows of ``dataset.parquet`` at ``positions`` (in the order given), some columns, indexed
    by the row-id column ``id_col`` (named ``row_id``): a row group at a time.

    Raises
    ------
    KeyError
        If a column is not in the file.
    IndexError
        If a position is past the end.
    RunError
        If the file lacks its row-id column.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    positions = np.asarray(positions, dtype=np.int64)
    data = pq.ParquetFile(path)
    names = [c for c in data.schema_arrow.names if c != id_col]
    wanted = names if columns is None else list(columns)
    unknown = [c for c in wanted if c not in names]
    if unknown:
        raise KeyError(f"{path} has no column(s) {unknown}")
    if id_col not in data.schema_arrow.names:
        raise RunError(f"{path} lacks its row-id column {id_col!r}")
    # a row group at a time, its rows taken before the next is read (Dataset.take read
    # ahead several groups at once: +0.29 GB RSS for the report's 30 examples at 1M rows)
    starts = np.cumsum([0] + [data.metadata.row_group(g).num_rows
                              for g in range(data.num_row_groups)])
    if positions.size and (positions.min() < 0 or positions.max() >= starts[-1]):
        raise IndexError(f"positions: expected 0 <= position < {starts[-1]} (the rows of "
                         f"{path})")
    group_of = np.searchsorted(starts, positions, side="right") - 1
    order = np.argsort(group_of, kind="stable")
    pieces = [data.schema_arrow.empty_table().select([id_col, *wanted])]
    for g in np.unique(group_of):
        rows = positions[order][group_of[order] == g] - starts[g]
        group = data.read_row_group(int(g), columns=[id_col, *wanted])
        pieces.append(group.take(pa.array(rows)))
        del group
    taken = pa.concat_tables(pieces).take(pa.array(np.argsort(order, kind="stable")))
    frame = taken.to_pandas().set_index(id_col)
    frame.index.name = "row_id"
    return frame
