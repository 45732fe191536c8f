"""Parts of a run's Parquet tables read alone: some columns (strings as sorted codes) or
some rows, so that the report of a run of millions of rows never holds a whole table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from aflite_core.errors import RunError
from aflite_core.io import take_rows
from aflite_core.runs._layout import DATASET_FILE, ROW_CSV_FILES, SCORES_FILE, STATUSES

__all__ = ["frame_from_csvs", "parquet_rows", "read_columns"]


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
    names = pq.read_schema(path).names
    wanted = [c for c in names if c != id_col] if columns is None else list(columns)
    unknown = [c for c in wanted if c not in names or c == id_col]
    if unknown:
        raise KeyError(f"{path} has no column(s) {unknown}")
    if id_col not in names:
        raise RunError(f"{path} lacks its row-id column {id_col!r}")
    frame = take_rows(path, positions, [id_col, *wanted]).to_pandas().set_index(id_col)
    frame.index.name = "row_id"
    return frame


def frame_from_csvs(path: Path, scores: pd.DataFrame) -> pd.DataFrame:
    """The original rows of a run folder written before ``dataset.parquet`` existed, rebuilt
    from its per-status CSV files (every value a string), in input order, index ``row_id``.

    Raises
    ------
    RunError
        A status's CSV file is missing, or its row ids are not those of ``scores``.
    """
    present = set(scores["status"].astype(str))
    parts = []
    missing = []
    for status in STATUSES:
        if status not in present:
            continue
        csv_path = path / ROW_CSV_FILES[status]
        if not csv_path.is_file():
            missing.append(ROW_CSV_FILES[status])
            continue
        parts.append(pd.read_csv(csv_path, dtype=str, keep_default_na=False))
    if missing:
        raise RunError(
            f"run {path} has neither {DATASET_FILE} nor {', '.join(missing)}; "
            "the original rows cannot be shown"
        )
    frame = pd.concat(parts, ignore_index=True)
    ids = scores["row_id"]
    # the CSVs hold row ids as text: map them back to the typed ids of scores.parquet
    by_text = pd.Series(np.arange(len(ids)), index=ids.astype(str).to_numpy())
    order = by_text.reindex(frame["row_id"].to_numpy()).to_numpy()
    if np.isnan(order.astype(float)).any():
        raise RunError(f"run {path}: row ids in the CSV files do not match {SCORES_FILE}")
    frame = frame.iloc[np.argsort(order, kind="stable")].reset_index(drop=True)
    frame.index = pd.Index(ids.to_numpy(), name="row_id")
    return frame.drop(columns="row_id")
