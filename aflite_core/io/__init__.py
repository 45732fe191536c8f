"""Loading: readers for every supported format, the dataset model, table writers.

Its face: what the rest of ``aflite_core``, ``ui/`` and the pages may import from it
(``from aflite_core.io import NAME``; never from one of its modules). Names are resolved
on first use, so importing the package stays as cheap as importing one of its modules
(the dashboard's first paint and ``python -m aflite_core --help`` import it).
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module of this package that defines it.
_FACE = {
    "AuditDataset": "datasets",
    "CSV_LINE_TERMINATOR": "tables",
    "ColumnMapping": "datasets",
    "DEFAULT_CHUNK_ROWS": "tables",
    "DatasetError": "datasets",
    "FORMULA_PREFIXES": "tables",
    "LINKED_TEXT": "datasets",
    "NEUTRALIZER": "tables",
    "NO_COLUMN": "datasets",
    "ROW_GROUP": "texts_on_disk",
    "RowTexts": "text_columns",
    "TextsFile": "texts_on_disk",
    "ValidationReport": "datasets",
    "compact_categorical": "text_columns",
    "index_values": "tables",
    "label_factors": "text_columns",
    "label_objects": "text_columns",
    "link_or_copy": "texts_on_disk",
    "load_dataset": "datasets",
    "load_to_disk": "streamed_load",
    "looks_like_glob": "shards",
    "neutralize_cell": "tables",
    "neutralize_frame": "tables",
    "parquet_safe_table": "tables",
    "read_table": "readers",
    "row_positions": "text_columns",
    "same_ids": "tables",
    "shared_strings": "text_columns",
    "short_repr": "table_checks",
    "special_file_kind": "readers",
    "str_codes": "text_columns",
    "stream_bytes": "byte_stream",
    "sweep_stale_parts": "tables",
    "take_rows": "texts_on_disk",
    "unique_column_name": "tables",
    "write_csv": "tables",
    "write_frame": "texts_on_disk",
    "write_parquet": "tables",
}
#: Modules whose names are used as a namespace from outside (``views.rows_table``).
_NAMESPACES = ("datasets", "shards")

__all__ = sorted([*_FACE, *_NAMESPACES])


def __getattr__(name: str) -> Any:
    # not cached in the package: a test that patches the defining module is seen
    if name in _FACE:
        return getattr(importlib.import_module(f"{__name__}.{_FACE[name]}"), name)
    if name in _NAMESPACES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return list(__all__)
