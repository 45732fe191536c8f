"""Loading: readers for every supported format, the dataset model, table writers.

Its face (``_FACE``, ``_NAMESPACES``) is what the rest of the code may import from it, resolved
on first use (:func:`aflite_core.faces.lazy_face`; ``docs/architecture.md``, *Public faces*).
"""

from __future__ import annotations

from aflite_core.faces import lazy_face

#: Public name -> the module of this package that defines it.
_FACE = {
    "AuditDataset": "datasets",
    "CSV_LINE_TERMINATOR": "_tables",
    "ColumnMapping": "datasets",
    "DEFAULT_CHUNK_ROWS": "_tables",
    "DatasetError": "datasets",
    "FORMULA_PREFIXES": "_tables",
    "LINKED_TEXT": "datasets",
    "NEUTRALIZER": "_tables",
    "NO_COLUMN": "datasets",
    "ROW_GROUP": "_texts_on_disk",
    "RowTexts": "_text_columns",
    "TextsFile": "_texts_on_disk",
    "ValidationReport": "datasets",
    "compact_categorical": "_text_columns",
    "index_values": "_tables",
    "label_factors": "_text_columns",
    "label_objects": "_text_columns",
    "link_or_copy": "_texts_on_disk",
    "load_dataset": "datasets",
    "load_to_disk": "_streamed_load",
    "looks_like_glob": "shards",
    "neutralize_cell": "_tables",
    "neutralize_frame": "_tables",
    "parquet_safe_table": "_tables",
    "read_table": "_readers",
    "row_positions": "_text_columns",
    "same_ids": "_tables",
    "shared_strings": "_text_columns",
    "short_repr": "_table_checks",
    "special_file_kind": "_readers",
    "str_codes": "_text_columns",
    "stream_bytes": "_byte_stream",
    "sweep_stale_parts": "_tables",
    "take_rows": "_texts_on_disk",
    "unique_column_name": "_tables",
    "write_csv": "_tables",
    "write_frame": "_texts_on_disk",
    "write_parquet": "_tables",
}
#: Modules whose names are used as a namespace from outside (``views.rows_table``).
_NAMESPACES = ("datasets", "shards")

__all__ = sorted([*_FACE, *_NAMESPACES])
__getattr__, __dir__ = lazy_face(__name__, _FACE, _NAMESPACES)
