"""Numeric and text core of the dataset-bias audit dashboard.

The core never imports streamlit: everything here runs headless, from the CLI
(``python -m aflite_core``), from notebooks, from tests, or behind the dashboard's cached
wrappers. The public API, importable from the package itself::

    from aflite_core import load_dataset, suggest_config, run_audit, load_run, AFLite

Names are resolved on first use, so ``import aflite_core`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: Public name -> module that defines it.
_PUBLIC = {
    "load_dataset": "aflite_core.io.datasets",
    "AuditDataset": "aflite_core.io.datasets",
    "AFLite": "aflite_core.filter._aflite",
    "MultipleChoiceAFLite": "aflite_core.filter._multiple_choice",
    "ZFilter": "aflite_core.filter._zfilter",
    "cue_statistics": "aflite_core.cues.statistics",
    "AuditConfig": "aflite_core.config",
    "suggest_config": "aflite_core.config",
    "run_audit": "aflite_core.pipeline",
    "load_run": "aflite_core.runs.folder",
    "list_runs": "aflite_core.runs.folder",
    "export_run": "aflite_core.runs.exports",
    "build_report": "aflite_core.report.html",
    "compare_runs": "aflite_core.report.compare",
    "sample_path": "aflite_core.data",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'aflite_core' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
