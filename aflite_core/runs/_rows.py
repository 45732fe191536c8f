"""The rows of a run as Arrow tables, streamed in input order (exports and the CSV files).

Each chunk has ``row_id``, the original columns and, optionally, the audit's columns
(``status``, ``predictability``, ``removal_round``), renamed when an original column
already has that name. Only the run's files are read (``dataset.parquet`` batch by batch,
``scores.parquet``), so this module depends on the folder *layout*, not on its reader.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from aflite_core.io import DEFAULT_CHUNK_ROWS, shared_strings, unique_column_name
from aflite_core.runs._layout import DATASET_FILE, SCORES_COLUMNS, SCORES_FILE, STATUSES

#: Columns added to row exports after the original columns.
SCORE_COLUMNS = ("status", "predictability", "removal_round")


def row_export_names(original_columns: Sequence[str]) -> dict[str, str]:
    """Names used for the added columns of a row export, avoiding original names.

    Returns ``{"row_id": ..., "status": ..., "predictability": ..., "removal_round": ...}``.
    """
    taken = set(map(str, original_columns))
    names = {}
    for key in ("row_id", *SCORE_COLUMNS):
        names[key] = unique_column_name(key, taken)
        taken.add(names[key])
    return names


def normalize_row_ids(row_ids: Iterable[Any] | None, known: pd.Series) -> np.ndarray | None:
    """Coerce a user row-id filter to the dtype of the run's ids; unknown ids are an error."""
    if row_ids is None:
        return None
    wanted = list(row_ids)
    if pd.api.types.is_integer_dtype(known.dtype):
        try:
            values = np.array([int(v) for v in wanted], dtype=np.int64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"row_ids: this run has integer row ids; {exc}") from None
    else:
        values = np.array([str(v) for v in wanted], dtype=object)
    unknown = pd.Index(values).difference(pd.Index(known.to_numpy()))
    if len(unknown):
        shown = ", ".join(map(repr, unknown[:5].tolist()))
        raise ValueError(f"row_ids: {len(unknown)} id(s) not in this run, e.g. {shown}")
    return values


def select(table: pa.Table, columns: Sequence[str] | None) -> pa.Table:
    return table if columns is None else table.select(list(columns))


def check_columns(columns: Sequence[str] | None, available: Sequence[str], keep: str | None):
    if columns is None:
        return None
    columns = [str(c) for c in columns]
    unknown = [c for c in columns if c not in available]
    if unknown:
        raise ValueError(f"columns: unknown column(s) {unknown}; available: {list(available)}")
    if keep is not None and keep not in columns:
        columns = [keep, *columns]
    return list(dict.fromkeys(columns))


def _frame_batches(run: Any, chunk_rows: int) -> Iterator[pa.Table]:
    """The original frame as Arrow tables with the row-id column first, in input order."""
    if run.has(DATASET_FILE):
        source = pq.ParquetFile(run.path / DATASET_FILE)
        id_col = run.dataset_row_id_column
        for batch in source.iter_batches(batch_size=chunk_rows):
            table = pa.Table.from_batches([batch])
            yield table
        return
    # older folder without dataset.parquet: rebuilt in memory from the CSV files
    frame = run.frame
    id_col = run.dataset_row_id_column
    for start in range(0, max(len(frame), 1), chunk_rows):
        part = frame.iloc[start : start + chunk_rows]
        ids = pd.Series(part.index.to_numpy(), name=id_col)
        yield pa.Table.from_pandas(
            pd.concat([ids, part.reset_index(drop=True)], axis=1), preserve_index=False
        )


def _original_columns(run: Any) -> list[str]:
    id_col = run.dataset_row_id_column
    if run.has(DATASET_FILE):
        names = pq.ParquetFile(run.path / DATASET_FILE).schema_arrow.names
    else:
        names = [id_col, *map(str, run.frame.columns)]
    return [n for n in names if n != id_col]


def iter_row_chunks(
    run: Any,
    statuses: Sequence[str] = STATUSES,
    *,
    columns: Sequence[str] | None = None,
    row_ids: Iterable[Any] | None = None,
    with_scores: bool = True,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> Iterator[pa.Table]:
    """Yield the rows of ``run`` with the given statuses as Arrow tables, in input order.

    Each table has ``row_id``, the original columns (or ``columns``), and, when
    ``with_scores``, ``status``, ``predictability`` and ``removal_round``. At least one
    (possibly empty) table is yielded so that the columns are always known.
    """
    bad = [s for s in statuses if s not in STATUSES]
    if bad:
        raise ValueError(f"statuses: expected values from {STATUSES}, got {bad}")
    # the columns used (statuses as codes when read here, not a str per row: 5M rows)
    scores = run.score_columns(list(SCORES_COLUMNS))
    original = _original_columns(run)
    names = row_export_names(original)
    added = [names[c] for c in SCORE_COLUMNS] if with_scores else []
    available = [names["row_id"], *original, *added]
    selected = check_columns(columns, available, keep=names["row_id"]) or available
    wanted = normalize_row_ids(row_ids, scores["row_id"])
    status = shared_strings(scores["status"])  # one str per status, shared by its rows
    keep = scores["status"].isin(list(statuses)).to_numpy(dtype=bool, copy=True)
    if wanted is not None:
        # hash-based membership: np.isin on object (string) ids is rows x ids
        keep &= scores["row_id"].isin(wanted).to_numpy()
    predictability = scores["predictability"].to_numpy(dtype=np.float64)
    removal_round = scores["removal_round"].to_numpy(dtype=np.int64)
    score_ids = scores["row_id"].to_numpy()
    id_col = run.dataset_row_id_column
    offset = 0
    yielded = False
    for table in _frame_batches(run, chunk_rows):
        n = table.num_rows
        ids = table.column(id_col).to_numpy(zero_copy_only=False)
        if n and not np.array_equal(ids, score_ids[offset : offset + n]):
            raise ValueError(
                f"run {run.path}: row order of {DATASET_FILE} does not match {SCORES_FILE}"
            )
        mask = keep[offset : offset + n]
        part = table.filter(pa.array(mask, type=pa.bool_()))
        idx = np.flatnonzero(mask) + offset
        offset += n
        id_array = part.column(id_col)
        part = part.drop_columns([id_col])
        part = part.add_column(0, names["row_id"], id_array)
        if with_scores:
            part = part.append_column(names["status"], pa.array(status[idx], type=pa.string()))
            part = part.append_column(names["predictability"], pa.array(predictability[idx]))
            # -1 marks "not removed" in scores.parquet; an export shows an empty cell
            rounds = removal_round[idx]
            part = part.append_column(names["removal_round"],
                                      pa.array(rounds, mask=rounds < 0, type=pa.int64()))
        if part.num_rows or not yielded:
            yielded = True
            yield select(part, selected)
    if offset != len(scores):
        raise ValueError(
            f"run {run.path}: {DATASET_FILE} has {offset} rows, {SCORES_FILE} has {len(scores)}"
        )
