"""Checks every table reader applies to a header, and how messages quote values from data.

Shared by the delimited-text reader (``aflite_core.io.delimited``) and the JSON and Parquet
readers (``aflite_core.io.readers``).
"""

from __future__ import annotations

from typing import Any

from aflite_core.errors import ColumnError, DatasetSizeError

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
