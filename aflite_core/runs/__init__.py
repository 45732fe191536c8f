"""Run folders: the on-disk format, reading and listing runs, exports.

Its face (``_FACE``, ``_NAMESPACES``) is what the rest of the code may import from it, resolved
on first use (:func:`aflite_core.faces.lazy_face`; ``docs/architecture.md``, *Public faces*).
"""

from __future__ import annotations

from aflite_core.faces import lazy_face

#: Public name -> the module of this package that defines it.
_FACE = {
    "AUDIT_COLUMNS": "views",
    "AuditRun": "folder",
    "CURATED_FORMATS": "_curated",
    "DATASET_FILE": "folder",
    "FILTER_NAMES": "views",
    "FORMATS": "exports",
    "LABEL_ISSUE_EXPORTS": "exports",
    "REPORT_FILE": "_layout",
    "ROW_EXPORTS": "exports",
    "RowIndex": "_row_index",
    "RunError": "folder",
    "RunWriter": "_writer",
    "STATUSES": "_layout",
    "STATUS_NAMES": "_layout",
    "SUMMARY_FILE": "_layout",
    "TABLE_EXPORTS": "exports",
    "TEMP_PREFIX": "_names",
    "check_file_name": "_names",
    "check_not_in_run": "folder",
    "check_run_name": "folder",
    "claim": "_owners",
    "cleanup_stale": "folder",
    "curated_hardness": "_curated",
    "curated_rows": "_curated",
    "decide": "decisions",
    "decisions_in_force": "decisions",
    "default_run_name": "folder",
    "dump_json": "folder",
    "export_curated": "_curated",
    "export_run": "exports",
    "filter_description": "views",
    "flag_precision": "review",
    "hidden_name": "_names",
    "is_run_folder": "folder",
    "load_run": "folder",
    "load_subset": "subsets",
    "neutralize_frame": "exports",
    "review_queue": "review",
    "round_name": "views",
    "run_labels": "decisions",
    "split_sizes": "views",
    "stage_table": "views",
    "stop_explanation": "views",
    "to_jsonable": "folder",
    "unique_run_name": "folder",
    "utc_now_iso": "folder",
}
#: Modules whose names are used as a namespace from outside (``views.rows_table``).
_NAMESPACES = (
    "breakdown", "decisions", "exports", "folder", "map_selection", "review", "subsets",
    "views",
)

__all__ = sorted([*_FACE, *_NAMESPACES])
__getattr__, __dir__ = lazy_face(__name__, _FACE, _NAMESPACES)
