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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from aflite_core.io import (  # noqa: F401 - re-exported for callers of the exports
    CSV_LINE_TERMINATOR,
    DEFAULT_CHUNK_ROWS,
    FORMULA_PREFIXES,
    NEUTRALIZER,
    neutralize_cell,
    neutralize_frame,
    parquet_safe_table,
    stream_bytes,
    unique_column_name,
    write_csv,
    write_parquet,
)
from aflite_core.measures import registry
from aflite_core.runs._rows import (  # noqa: F401 - re-exported
    SCORE_COLUMNS,
    check_columns,
    iter_row_chunks,
    normalize_row_ids,
    row_export_names,
    select,
)
from aflite_core.runs.folder import (
    SCORES_FILE,
    STATUSES,
    AuditRun,
    check_not_in_run,
    load_run,
)

#: Row exports and the statuses each one contains.
ROW_EXPORTS = {**{s: (s,) for s in STATUSES}, "all": STATUSES}
#: Row exports by the label-issues measure (``label_issues.parquet``): the statuses, and
#: whether the flagged rows are the ones kept (True) or the ones left out (False).
#: ``retained_clean``: the retained rows without the flagged label issues (a harder *and*
#: cleaner set; rows the measure did not score stay); ``flagged``: the flagged rows, every
#: status, for relabelling (their suggested labels: ``--what label_issues``).
LABEL_ISSUE_EXPORTS = {"retained_clean": (("retained",), False), "flagged": (STATUSES, True)}
LABEL_ISSUES_FILE = "label_issues.parquet"


def _label_issue_rows(run: AuditRun, what: str, row_ids: Iterable[Any] | None
                      ) -> tuple[tuple[str, ...], list[Any]]:
    """The statuses and row ids of a :data:`LABEL_ISSUE_EXPORTS` export."""
    statuses, flagged_wanted = LABEL_ISSUE_EXPORTS[what]
    issues = run.read_parquet(LABEL_ISSUES_FILE) if run.has(LABEL_ISSUES_FILE) else None
    if issues is None:
        raise ValueError(f"what: {what!r} needs the label issues of the run "
                         f"({LABEL_ISSUES_FILE}); this run has none (audit it with the "
                         "label_issues measure)")
    flagged = set(issues.loc[issues["is_label_issue"].astype(bool), "row_id"].astype(str))
    ids = run.scores["row_id"]
    keep = ids.astype(str).isin(flagged).to_numpy() == flagged_wanted
    if row_ids is not None:
        keep &= ids.astype(str).isin({str(i) for i in row_ids}).to_numpy()
    return statuses, ids[keep].tolist()


#: The label-issue columns a label-issue row export carries after the row's own.
LABEL_ISSUE_COLUMNS = ("label_quality", "is_label_issue", "suggested_label")


def with_label_issue_columns(chunks: Iterable[pa.Table], issues: pd.DataFrame
                             ) -> Iterator[pa.Table]:
    """Each chunk of rows with its rows' ``label_quality``, ``is_label_issue`` and
    ``suggested_label`` appended (empty for a row the measure did not score; a name the data
    already uses becomes ``aflite_<name>``): the file for relabelling carries what flagged
    each row and the label suggested."""
    by_id = issues.set_index("row_id")
    for table in chunks:
        ids = table.column(0).to_pandas()
        positions = by_id.index.get_indexer(ids)
        found = positions >= 0
        for name in LABEL_ISSUE_COLUMNS:
            values = by_id[name].to_numpy()
            column = pd.Series(values[np.where(found, positions, 0)], dtype=object)
            column[~found] = None
            column_name = unique_column_name(name, table.column_names)
            table = table.append_column(column_name, pa.array(column.tolist(), from_pandas=True))
        yield table


def table_exports() -> dict[str, str]:
    """Table exports and the run file each copies: the scores, then every table a
    registered measure offers (looked up on each call, so plug-in measures are included)."""
    return {
        "scores": SCORES_FILE,
        **{what: file for m in registry.measures() for what, file in m.exports.items()},
    }


#: The table exports of the measures registered at import time (see :func:`table_exports`).
TABLE_EXPORTS = table_exports()
FORMATS = ("csv", "parquet")


# --------------------------------------------------------------------------- sanitising


# --------------------------------------------------------------------------- parquet safety


# --------------------------------------------------------------------------- writers


# --------------------------------------------------------------------------- chunk sources


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
    tables = table_exports()
    if what not in tables:
        raise ValueError(f"what: expected one of {sorted(tables)}, got {what!r}")
    filename = tables[what]
    if not run.has(filename):
        raise FileNotFoundError(f"run {run.path} has no {filename}: {what} was not computed")
    source = pq.ParquetFile(run.path / filename)
    available = source.schema_arrow.names
    selected = check_columns(columns, available, keep=None)
    wanted = None
    if row_ids is not None:
        if "row_id" not in available:
            raise ValueError(f"row_ids: the {what} table has no row_id column to filter on")
        wanted = normalize_row_ids(row_ids, run.scores["row_id"])
    yielded = False
    for batch in source.iter_batches(batch_size=chunk_rows):
        table = pa.Table.from_batches([batch])
        if wanted is not None:
            ids = table.column("row_id").to_numpy(zero_copy_only=False)
            table = table.filter(pa.array(np.isin(ids, wanted), type=pa.bool_()))
        if "removal_round" in table.column_names:
            table = without_round_sentinel(table)
        if table.num_rows or not yielded:
            yielded = True
            yield select(table, selected)
    if not yielded:
        yield select(source.schema_arrow.empty_table(), selected)


def without_round_sentinel(table: pa.Table, column: str = "removal_round") -> pa.Table:
    """``table`` with the run folder's ``-1`` (not removed) in ``column`` as an empty cell:
    a kept row has no removal round."""
    i = table.column_names.index(column)
    values = table.column(i)
    return table.set_column(i, column, pc.if_else(pc.less(values, 0),
                                                  pa.scalar(None, values.type), values))


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
    map_chunks: Callable[[Callable, Iterable], Iterable] | None = None,
) -> ExportResult:
    """Export part of a run as CSV or Parquet, streamed in chunks.

    Parameters
    ----------
    run : AuditRun or path
        The run (folder).
    what : {"retained", "removed", "warmup", "excluded", "all", "retained_clean", "flagged", \
"scores", "cues", "knn", "projection", ...}
        Rows by status (original columns plus ``row_id``, ``status``, ``predictability``,
        ``removal_round``), the retained rows without the flagged label issues or the flagged
        rows (:data:`LABEL_ISSUE_EXPORTS`), or one of the run's tables.
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
    map_chunks : callable, optional
        CSV: where each chunk is encoded (:func:`~aflite_core.io.write_csv`'s
        ``map_chunks``; the CLI's ``export --scheduler``: a task per chunk on the cluster's
        workers, :func:`~aflite_core.represent.stream_ordered`); the file is the
        same bytes. Parquet is encoded here (one writer).

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
    elif what in LABEL_ISSUE_EXPORTS:
        statuses, wanted = _label_issue_rows(run, what, row_ids)
        chunks = with_label_issue_columns(
            iter_row_chunks(run, statuses, columns=columns, row_ids=wanted,
                            chunk_rows=chunk_rows), run.read_parquet(LABEL_ISSUES_FILE))
    elif what in table_exports():
        chunks = iter_table_chunks(
            run, what, columns=columns, row_ids=row_ids, chunk_rows=chunk_rows
        )
    else:
        choices = sorted([*ROW_EXPORTS, *LABEL_ISSUE_EXPORTS, *table_exports()])
        raise ValueError(f"what: expected one of {choices}, got {what!r}")
    if fmt == "csv":
        n = write_csv(chunks, out, sanitize=sanitize, overwrite=overwrite,
                      guard=check_not_in_run, map_chunks=map_chunks)
    else:
        n = write_parquet(chunks, out, overwrite=overwrite, guard=check_not_in_run)
    path = None if hasattr(out, "write") else Path(out)
    return ExportResult(
        path=path, what=what, format=fmt, n_rows=n, sanitized=sanitize and fmt == "csv"
    )


def _view_order(table: pd.DataFrame, columns: Sequence[str]) -> tuple[list[str], str]:
    unknown = [c for c in columns if c not in table.columns]
    if unknown:
        raise ValueError(f"columns: not in the rows: {unknown}")
    order = [*columns, *(c for c in table.columns if c not in set(columns))]
    return order, "row_id" if "row_id" not in order else "row_id (index)"


def view_chunks(table: pd.DataFrame, positions: np.ndarray | None, columns: Sequence[str], *,
                chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[pd.DataFrame]:
    """The rows of a table view, ``chunk_rows`` at a time, as :func:`table_view_bytes` writes
    them: the rows at ``positions`` of ``table`` in that order (every row when None),
    ``row_id`` (the index) first, then ``columns``, then the other columns of ``table``.

    Only one chunk is copied at a time, and rows are taken by position: no id matching.
    """
    order, id_name = _view_order(table, columns)
    n = len(table) if positions is None else len(positions)
    for start in range(0, max(n, 1), chunk_rows):
        part = (table.iloc[start:start + chunk_rows] if positions is None
                else table.iloc[np.asarray(positions[start:start + chunk_rows])])
        yield part[order].reset_index(names=id_name)


def table_view_bytes(rows: pd.DataFrame, columns: Sequence[str], *,
                     sanitize: bool = True, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> bytes:
    """A CSV of ``rows`` exactly as a table shows them: in their order, ``row_id`` (the
    index) first, then ``columns`` in that order, then every other column of ``rows`` (the
    original columns a view hid are exported too).

    Parameters
    ----------
    rows : DataFrame
        Indexed by ``row_id``, e.g. the Explore page's filtered and sorted rows.
    columns : sequence of str
        The columns the view shows, in its order (unknown names are an error).
    sanitize : bool, default True
        Neutralise formula-like cells for spreadsheets.
    """
    buffer = io.BytesIO()
    write_csv(view_chunks(rows, None, columns, chunk_rows=chunk_rows), buffer,
              sanitize=sanitize)
    return buffer.getvalue()


#: Rows per chunk of a streamed table view: the rows are copied from the in-memory table a
#: chunk at a time (the copies, the spreadsheet-safe pass and the CSV text of 10,000 rows are
#: a few tens of MB; 50,000 rows took about 250 MB at the peak).
VIEW_CHUNK_ROWS = 10_000


def stream_view_csv(table: pd.DataFrame, positions: np.ndarray | None, columns: Sequence[str],
                    *, sanitize: bool = True, chunk_rows: int = VIEW_CHUNK_ROWS
                    ) -> Iterator[bytes]:
    """:func:`table_view_bytes` of the rows at ``positions`` of ``table``, streamed: byte
    chunks while they are written, one chunk of rows in memory at a time (the dashboard's
    download of the rows a table shows, however many)."""
    _view_order(table, columns)  # refuse unknown columns before streaming
    return stream_bytes(lambda out: write_csv(
        view_chunks(table, positions, columns, chunk_rows=chunk_rows), out, sanitize=sanitize))


def stream_export(run: AuditRun | str | os.PathLike, what: str, **kwargs: Any
                  ) -> Iterator[bytes]:
    """:func:`export_run` streamed: its bytes in chunks while it writes them (a download of a
    whole run's rows or tables with bounded memory, CSV or Parquet)."""
    return stream_bytes(lambda out: export_run(run, what, out, **kwargs))


def export_bytes(run: AuditRun | str | os.PathLike, what: str, **kwargs: Any) -> bytes:
    """Like :func:`export_run` but return the file's bytes (for a download button).

    Only for exports that fit in memory; prefer :func:`export_run` to a file for big runs.
    """
    buffer = io.BytesIO()
    export_run(run, what, buffer, **kwargs)
    return buffer.getvalue()
