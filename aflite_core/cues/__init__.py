"""Lexical cue statistics (ICQ): linguistic features, NLTK resources, statistics, model probing.

Its face: what the rest of ``aflite_core``, ``ui/`` and the pages may import from it
(``from aflite_core.cues import NAME``; never from one of its modules). Names are resolved
on first use, so importing the package stays as cheap as importing one of its modules
(the dashboard's first paint and ``python -m aflite_core --help`` import it).
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module of this package that defines it.
_FACE = {
    "BUNDLED_DATA": "resources",
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
    "status": "resources",
    "z_statistic": "statistics",
    "z_threshold": "statistics",
}
#: Modules whose names are used as a namespace from outside (``views.rows_table``).
_NAMESPACES = ("count_tables", "linguistic", "probing", "resources", "statistics")

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
