"""Lexical cue statistics (ICQ): linguistic features, NLTK resources, statistics, model probing.

Its face (``_FACE``, ``_NAMESPACES``) is what the rest of the code may import from it, resolved
on first use (:func:`aflite_core.faces.lazy_face`; ``docs/architecture.md``, *Public faces*).
"""

from __future__ import annotations

from aflite_core.faces import lazy_face

#: Public name -> the module of this package that defines it.
_FACE = {
    "BUNDLED_DATA": "resources",
    "annotate_ahead": "_annotations_ahead",
    "ahead_jobs": "_annotations_ahead",
    "discard_spare_child": "_spare_child",
    "start_spare_child": "_spare_child",
    "DEFAULT_SORT": "statistics",
    "DOWNLOAD_COMMAND": "resources",
    "FAMILIES": "linguistic",
    "SORT_KEYS": "statistics",
    "check_same_extraction": "count_tables",
    "chunk_rows_for": "count_tables",
    "cue_table": "statistics",
    "dataset_inputs": "statistics",
    "download": "resources",
    "extract_features": "linguistic",
    "extract_with_annotations": "linguistic",
    "get_resource": "resources",
    "nltk_command": "resources",
    "predictions_by_row_id": "probing",
    "probe_model": "probing",
    "refused_entries": "resources",
    "search_path": "resources",
    "shrunk_shares": "statistics",
    "tags_cached": "linguistic",
    "status": "resources",
    "z_statistic": "statistics",
    "z_threshold": "statistics",
}
#: Modules whose names are used as a namespace from outside (``views.rows_table``).
_NAMESPACES = ("count_tables", "linguistic", "probing", "resources", "statistics")

__all__ = sorted([*_FACE, *_NAMESPACES])
__getattr__, __dir__ = lazy_face(__name__, _FACE, _NAMESPACES)
