"""Checks every table reader applies to a header, and how messages quote values from data.

Shared by the delimited-text reader (``aflite_core.io._delimited``) and the JSON and Parquet
readers (``aflite_core.io._readers``).
"""

from __future__ import annotations

from typing import Any

from aflite_core._validation import fmt_bytes
from aflite_core.errors import ColumnError, DatasetFormatError, DatasetSizeError

#: Most columns a dataset may have. Text datasets have tens of columns; a file with tens of
#: thousands is almost always a transposed or broken export, and every step that keeps every
#: original column (run folders, exports) scales with columns x rows (10,000 columns took
#: 85 s to audit, 100,000 ran past 400 s).
MAX_COLUMNS = 2_000


def check_column_count(n_columns: int, name: str) -> None:
    """Refuse a table with more than :data:`MAX_COLUMNS` columns, before it is built."""
    if n_columns > MAX_COLUMNS:
        raise DatasetSizeError(
            f"{name}: {n_columns:,} columns, more than the {MAX_COLUMNS:,} a dataset may have; "
            "is the file transposed, or is a text column split on a separator? Keep the "
            "columns the audit needs (premise, hypothesis, label, split, id) and a few more")


def check_duplicate_names(names: list[Any], name: str, where: str) -> None:
    """Refuse two columns of one name (``where``: "header", "columns", ...)."""
    seen: dict[Any, list[int]] = {}
    for i, col in enumerate(names):
        seen.setdefault(col, []).append(i + 1)
    dups = {k: v for k, v in seen.items() if len(v) > 1}
    if dups:
        parts = "; ".join(
            f"{short_repr(k)} at positions {', '.join(map(str, v[:10]))}"
            for k, v in list(dups.items())[:5]
        )
        raise ColumnError(
            f"{name}: duplicate column names in the {where}: {parts}; rename them so every "
            "column has a distinct name"
        )


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to about ``limit`` characters for messages.

    Values quoted in error messages come from the data (column names, ids, labels) and
    may be a megabyte long; the cut keeps every message one readable line.
    """
    text = repr(value)
    if len(text) <= limit:
        return text
    if isinstance(value, str):
        return f"{value[: max(limit - 20, 8)]!r}... ({len(value):,} characters)"
    return text[:limit] + "..."


def cell_error(name: str, record: int, column: Any, size: int,
               max_cell: int) -> DatasetFormatError:
    """The refusal of a cell over the cell limit (``max_line_bytes``), naming the record
    (1-based) and the column: the one wording for Parquet, Arrow and JSON documents."""
    return DatasetFormatError(
        f"{name}: record {record:,}, column {short_repr(column)}: a cell of "
        f"{fmt_bytes(size)}, over the limit of {fmt_bytes(max_cell)} a cell "
        f"(max_line_bytes={max_cell}); not read")


def check_frame_cells(frame: Any, max_cell: int | None, name: str) -> None:
    """Refuse the first text cell of ``frame`` (a JSON document's records) over ``max_cell``
    bytes in UTF-8, by :func:`cell_error`."""
    if max_cell is None:
        return
    for column in frame.columns:
        values = frame[column]
        if values.dtype != object and str(values.dtype) not in ("string", "str"):
            continue
        for position, value in enumerate(values):
            # a str of n characters is at most 4n and at least n bytes of UTF-8
            if isinstance(value, str) and len(value) * 4 > max_cell:
                size = len(value.encode("utf-8", "surrogatepass"))
                if size > max_cell:
                    raise cell_error(name, position + 1, column, size, max_cell)
