"""CSV and Parquet exports of a run, streamed to disk in chunks.

Row exports (``retained``, ``removed``, ``warmup``, ``excluded``, ``all``) carry
``row_id``, every original column with its original value, then ``status``,
``predictability`` and ``removal_round``. Table exports (``scores``, ``cues``, ``knn``,
``projection``) copy the run's table. Both read the run's Parquet files batch by batch,
so memory stays bounded by ``chunk_rows`` whatever the size of the run.

CSV files are UTF-8 (no BOM), RFC 4180: comma-separated, ``"`` quoting where needed,
CRLF line ends (so that a lone ``\\r`` inside a value is always quoted and survives).

Spreadsheet safety (``sanitize=True``, the default): a text cell, or a header, that
starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is prefixed with a
single quote ``'`` so that Excel, LibreOffice and Google Sheets show it as text instead of
evaluating it as a formula (OWASP "CSV injection"). Numeric columns (``predictability``,
``removal_round``, numeric input columns) are never changed. The prefix is visible in the
cell; for machine use pass ``sanitize=False`` (CLI ``--no-sanitize``), which writes every
value exactly as it was read.
"""

from __future__ import annotations

import io
import os
import secrets
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from aflite_core.runs.folder import (
    CUES_FILE,
    DATASET_FILE,
    KNN_FILE,
    PROJECTION_FILE,
    SCORES_FILE,
    STATUSES,
    AuditRun,
    check_not_in_run,
    load_run,
)

#: First characters that make a spreadsheet evaluate a cell.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
#: What is prepended to a dangerous cell.
NEUTRALIZER = "'"
#: Row exports and the statuses each one contains.
ROW_EXPORTS = {**{s: (s,) for s in STATUSES}, "all": STATUSES}
#: Table exports and the run file each one copies.
TABLE_EXPORTS = {
    "scores": SCORES_FILE,
    "cues": CUES_FILE,
    "knn": KNN_FILE,
    "projection": PROJECTION_FILE,
}
FORMATS = ("csv", "parquet")
#: Columns added to row exports after the original columns.
SCORE_COLUMNS = ("status", "predictability", "removal_round")
CSV_LINE_TERMINATOR = "\r\n"
DEFAULT_CHUNK_ROWS = 50_000

_PREFIX_SET = frozenset(FORMULA_PREFIXES)


# --------------------------------------------------------------------------- sanitising


def neutralize_cell(value: Any) -> Any:
    """Return ``value`` with a leading ``'`` if it is text starting with a formula character."""
    if isinstance(value, str) and value[:1] in _PREFIX_SET:
        return NEUTRALIZER + value
    return value


def neutralize_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Neutralise every text cell and header of ``frame`` (a new frame is returned).

    Numeric, boolean and datetime columns are left alone; text, object and categorical
    columns are checked cell by cell (vectorised for pandas string dtypes).
    """
    out = frame.copy()
    types = pd.api.types
    for position in range(frame.shape[1]):
        series = frame.iloc[:, position]
        dtype = series.dtype
        if types.is_numeric_dtype(dtype) or types.is_bool_dtype(dtype) or (
            types.is_datetime64_any_dtype(dtype) or types.is_timedelta64_dtype(dtype)
        ):
            continue
        if types.is_string_dtype(dtype) and not types.is_object_dtype(dtype):
            flag = series.str.slice(0, 1).isin(_PREFIX_SET).fillna(False).to_numpy(dtype=bool)
            if flag.any():
                values = series.astype(object).to_numpy(copy=True)
                values[flag] = [NEUTRALIZER + v for v in values[flag]]
                out.isetitem(position, pd.Series(values, index=frame.index, dtype=dtype))
        else:
            out.isetitem(position, series.astype(object).map(neutralize_cell))
    out.columns = [neutralize_cell(str(c)) for c in frame.columns]
    return out


# --------------------------------------------------------------------------- parquet safety


def _stringify(value: Any) -> Any:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    if isinstance(value, str):
        return value.encode("utf-8", errors="surrogatepass").decode("utf-8", "backslashreplace")
    return str(value)


def parquet_safe_table(frame: pd.DataFrame) -> tuple[pa.Table, dict[str, str]]:
    """Convert ``frame`` (index dropped) to an Arrow table that Parquet can store.

    Columns Arrow cannot type (mixed Python objects, lone surrogates in text) are
    converted to text, cell by cell; column names become strings.

    Returns
    -------
    table : pyarrow.Table
    converted : dict
        ``{column: reason}`` for every column that had to be converted.
    """
    frame = frame.reset_index(drop=True)
    names = [str(c) for c in frame.columns]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"cannot store a table with duplicate column names {dup} as Parquet")
    frame.columns = names
    try:
        return pa.Table.from_pandas(frame, preserve_index=False), {}
    except (pa.ArrowException, ValueError, TypeError, UnicodeError):
        pass
    converted: dict[str, str] = {}
    fixed = frame.copy()
    for column in names:
        try:
            pa.Table.from_pandas(frame[[column]], preserve_index=False)
        except (pa.ArrowException, ValueError, TypeError, UnicodeError) as exc:
            fixed[column] = frame[column].map(_stringify).astype(object)
            converted[column] = f"stored as text ({type(exc).__name__}: {str(exc)[:120]})"
    return pa.Table.from_pandas(fixed, preserve_index=False), converted


# --------------------------------------------------------------------------- writers


def _open_target(out: str | os.PathLike | IO[bytes], overwrite: bool):
    """Return (binary handle, temp path, final path); temp path None for file objects."""
    if hasattr(out, "write"):
        return out, None, None
    final = check_not_in_run(out)
    if final.is_dir():
        raise IsADirectoryError(f"export target {final} is a folder; give a file name")
    if final.exists() and not overwrite:
        raise FileExistsError(f"export target {final} already exists; pass overwrite to replace it")
    if not final.parent.is_dir():
        raise FileNotFoundError(f"folder {final.parent} of the export target does not exist")
    tmp = final.parent / f".{final.name}.part-{secrets.token_hex(4)}"
    return open(tmp, "wb"), tmp, final  # noqa: SIM115 - closed by _finish


def _finish(handle, tmp: Path | None, final: Path | None, ok: bool) -> None:
    if tmp is None:
        return
    handle.close()
    if ok:
        os.replace(tmp, final)
    else:
        tmp.unlink(missing_ok=True)


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    return table.to_pandas()


def write_csv(
    chunks: Iterable[pa.Table | pd.DataFrame],
    out: str | os.PathLike | IO[bytes],
    *,
    sanitize: bool = True,
    overwrite: bool = False,
) -> int:
    """Stream table chunks into one CSV file (header from the first chunk).

    Parameters
    ----------
    chunks : iterable of pyarrow.Table or DataFrame
        Chunks with identical columns; the index of DataFrames is not written.
    out : path or binary file object
        Target; a path is written through a temporary file and renamed at the end.
    sanitize : bool, default True
        Neutralise formula-like text cells (see the module docstring).
    overwrite : bool, default False
        Replace an existing file.

    Returns
    -------
    int
        Number of data rows written.
    """
    handle, tmp, final = _open_target(out, overwrite)
    ok = False
    n_rows = 0
    text = io.TextIOWrapper(handle, encoding="utf-8", newline="", write_through=True)
    try:
        first = True
        for chunk in chunks:
            frame = _to_pandas(chunk) if isinstance(chunk, pa.Table) else chunk
            if sanitize:
                frame = neutralize_frame(frame)
            frame.to_csv(text, header=first, index=False, lineterminator=CSV_LINE_TERMINATOR)
            first = False
            n_rows += len(frame)
        text.flush()
        ok = True
    finally:
        text.detach()
        _finish(handle, tmp, final, ok)
    return n_rows


def write_parquet(
    chunks: Iterable[pa.Table | pd.DataFrame],
    out: str | os.PathLike | IO[bytes],
    *,
    schema: pa.Schema | None = None,
    overwrite: bool = False,
) -> int:
    """Stream table chunks into one Parquet file.

    ``schema`` is used when there are no chunks (an empty export still has columns);
    otherwise the first chunk's schema is used and later chunks are cast to it.

    Returns
    -------
    int
        Number of rows written.
    """
    handle, tmp, final = _open_target(out, overwrite)
    ok = False
    writer = None
    n_rows = 0
    try:
        for chunk in chunks:
            table = chunk if isinstance(chunk, pa.Table) else parquet_safe_table(chunk)[0]
            if writer is None:
                writer = pq.ParquetWriter(handle, table.schema)
            elif not table.schema.equals(writer.schema):
                table = table.cast(writer.schema)
            writer.write_table(table)
            n_rows += table.num_rows
        if writer is None:
            writer = pq.ParquetWriter(handle, schema if schema is not None else pa.schema([]))
        writer.close()
        ok = True
    finally:
        if writer is not None and not ok:
            writer.close()
        _finish(handle, tmp, final, ok)
    return n_rows


# --------------------------------------------------------------------------- chunk sources


def unique_column_name(name: str, taken: Iterable[str]) -> str:
    """``name``, or ``aflite_<name>``, ``aflite_<name>_2``, ... if it is already taken."""
    taken = set(taken)
    if name not in taken:
        return name
    candidate, k = f"aflite_{name}", 1
    while candidate in taken:
        k += 1
        candidate = f"aflite_{name}_{k}"
    return candidate


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


def _normalize_row_ids(row_ids: Iterable[Any] | None, known: pd.Series) -> np.ndarray | None:
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


def _select(table: pa.Table, columns: Sequence[str] | None) -> pa.Table:
    return table if columns is None else table.select(list(columns))


def _check_columns(columns: Sequence[str] | None, available: Sequence[str], keep: str | None):
    if columns is None:
        return None
    columns = [str(c) for c in columns]
    unknown = [c for c in columns if c not in available]
    if unknown:
        raise ValueError(f"columns: unknown column(s) {unknown}; available: {list(available)}")
    if keep is not None and keep not in columns:
        columns = [keep, *columns]
    return list(dict.fromkeys(columns))


def _frame_batches(run: AuditRun, chunk_rows: int) -> Iterator[pa.Table]:
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


def _original_columns(run: AuditRun) -> list[str]:
    id_col = run.dataset_row_id_column
    if run.has(DATASET_FILE):
        names = pq.ParquetFile(run.path / DATASET_FILE).schema_arrow.names
    else:
        names = [id_col, *map(str, run.frame.columns)]
    return [n for n in names if n != id_col]


def iter_row_chunks(
    run: AuditRun,
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
    scores = run.scores
    original = _original_columns(run)
    names = row_export_names(original)
    added = [names[c] for c in SCORE_COLUMNS] if with_scores else []
    available = [names["row_id"], *original, *added]
    selected = _check_columns(columns, available, keep=names["row_id"]) or available
    wanted = _normalize_row_ids(row_ids, scores["row_id"])
    status = scores["status"].astype(str).to_numpy()
    keep = np.isin(status, list(statuses))
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
            part = part.append_column(names["removal_round"], pa.array(removal_round[idx]))
        if part.num_rows or not yielded:
            yielded = True
            yield _select(part, selected)
    if offset != len(scores):
        raise ValueError(
            f"run {run.path}: {DATASET_FILE} has {offset} rows, {SCORES_FILE} has {len(scores)}"
        )


def iter_table_chunks(
    run: AuditRun,
    what: str,
    *,
    columns: Sequence[str] | None = None,
    row_ids: Iterable[Any] | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> Iterator[pa.Table]:
    """Yield one of the run's tables (``scores``, ``cues``, ``knn``, ``projection``).

    ``row_ids`` filters tables that have a ``row_id`` column and is an error otherwise.
    """
    if what not in TABLE_EXPORTS:
        raise ValueError(f"what: expected one of {sorted(TABLE_EXPORTS)}, got {what!r}")
    filename = TABLE_EXPORTS[what]
    if not run.has(filename):
        raise FileNotFoundError(f"run {run.path} has no {filename}: {what} was not computed")
    source = pq.ParquetFile(run.path / filename)
    available = source.schema_arrow.names
    selected = _check_columns(columns, available, keep=None)
    wanted = None
    if row_ids is not None:
        if "row_id" not in available:
            raise ValueError(f"row_ids: the {what} table has no row_id column to filter on")
        wanted = _normalize_row_ids(row_ids, run.scores["row_id"])
    yielded = False
    for batch in source.iter_batches(batch_size=chunk_rows):
        table = pa.Table.from_batches([batch])
        if wanted is not None:
            ids = table.column("row_id").to_numpy(zero_copy_only=False)
            table = table.filter(pa.array(np.isin(ids, wanted), type=pa.bool_()))
        if table.num_rows or not yielded:
            yielded = True
            yield _select(table, selected)
    if not yielded:
        yield _select(source.schema_arrow.empty_table(), selected)


# --------------------------------------------------------------------------- public entry


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_run` wrote."""

    path: Path | None
    what: str
    format: str
    n_rows: int
    sanitized: bool


def infer_format(out: str | os.PathLike | IO[bytes], format: str | None) -> str:
    """``format`` if given, else from the file suffix (``.parquet``/``.pq`` or CSV)."""
    if format is not None:
        fmt = str(format).lower()
        if fmt not in FORMATS:
            raise ValueError(f"format: expected one of {FORMATS}, got {format!r}")
        return fmt
    if hasattr(out, "write"):
        return "csv"
    return "parquet" if Path(out).suffix.lower() in (".parquet", ".pq") else "csv"


def export_run(
    run: AuditRun | str | os.PathLike,
    what: str,
    out: str | os.PathLike | IO[bytes],
    *,
    format: str | None = None,
    columns: Sequence[str] | None = None,
    row_ids: Iterable[Any] | None = None,
    sanitize: bool = True,
    overwrite: bool = False,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> ExportResult:
    """Export part of a run as CSV or Parquet, streamed in chunks.

    Parameters
    ----------
    run : AuditRun or path
        The run (folder).
    what : {"retained", "removed", "warmup", "excluded", "all", "scores", "cues", "knn", \
"projection"}
        Rows by status (original columns plus ``row_id``, ``status``, ``predictability``,
        ``removal_round``), or one of the run's tables.
    out : path or binary file object
        Target file; written through a temporary file and renamed at the end.
    format : {"csv", "parquet"}, optional
        Default: from the suffix of ``out`` (CSV unless ``.parquet``/``.pq``).
    columns : sequence of str, optional
        Only these columns, in this order (``row_id`` is always kept for row exports).
    row_ids : iterable, optional
        Only these rows (e.g. the rows matching the dashboard's Explore filter).
    sanitize : bool, default True
        CSV only: neutralise formula-like cells for spreadsheets. ``False`` writes the
        exact values (machine use).
    overwrite : bool, default False
        Replace an existing file.
    chunk_rows : int, default 50000
        Rows per chunk.

    Returns
    -------
    ExportResult
    """
    if not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
        raise ValueError(f"chunk_rows: expected a positive integer, got {chunk_rows!r}")
    fmt = infer_format(out, format)
    run = run if isinstance(run, AuditRun) else load_run(run)
    if what in ROW_EXPORTS:
        chunks = iter_row_chunks(
            run, ROW_EXPORTS[what], columns=columns, row_ids=row_ids, chunk_rows=chunk_rows
        )
    elif what in TABLE_EXPORTS:
        chunks = iter_table_chunks(
            run, what, columns=columns, row_ids=row_ids, chunk_rows=chunk_rows
        )
    else:
        choices = sorted([*ROW_EXPORTS, *TABLE_EXPORTS])
        raise ValueError(f"what: expected one of {choices}, got {what!r}")
    if fmt == "csv":
        n = write_csv(chunks, out, sanitize=sanitize, overwrite=overwrite)
    else:
        n = write_parquet(chunks, out, overwrite=overwrite)
    path = None if hasattr(out, "write") else Path(out)
    return ExportResult(
        path=path, what=what, format=fmt, n_rows=n, sanitized=sanitize and fmt == "csv"
    )


def export_bytes(run: AuditRun | str | os.PathLike, what: str, **kwargs: Any) -> bytes:
    """Like :func:`export_run` but return the file's bytes (for a download button).

    Only for exports that fit in memory; prefer :func:`export_run` to a file for big runs.
    """
    buffer = io.BytesIO()
    export_run(run, what, buffer, **kwargs)
    return buffer.getvalue()
