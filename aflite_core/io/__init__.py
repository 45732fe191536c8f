"""Loading: readers for every supported format, the dataset model, table writers.

Its face (``_FACE``, ``_NAMESPACES``) is what the rest of the code may import from it, resolved
on first use (:func:`aflite_core.faces.lazy_face`; ``docs/architecture.md``, *Public faces*).
"""

from __future__ import annotations

from aflite_core.faces import lazy_face

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
__getattr__, __dir__ = lazy_face(__name__, _FACE, _NAMESPACES)
