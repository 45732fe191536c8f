"""Filtering: the AFLite estimator, its linear kernels, backends and synthetic workloads.

Its face (``_FACE``, ``_NAMESPACES``) is what the rest of the code may import from it, resolved
on first use (:func:`aflite_core.faces.lazy_face`; ``docs/architecture.md``, *Public faces*).
"""

from __future__ import annotations

from aflite_core.faces import lazy_face

#: Public name -> the module of this package that defines it.
_FACE = {
    "AFLite": "_aflite",
    "FilterPlan": "_policy",
    "INSTANCES": "_policy",
    "MultipleChoiceAFLite": "_multiple_choice",
    "SPLIT_POLICIES": "_policy",
    "WORKER_ENVIRON": "_scheduler",
    "ZFilter": "_zfilter",
    "binary_features": "_zfilter",
    "check_scheduler": "_scheduler",
    "connect": "_scheduler",
    "filter_units": "_policy",
    "plan_filter": "_policy",
    "probe_scheduler": "_scheduler",
    "select_rows": "_rounds",
    "worker_environ": "_scheduler",
}
#: Modules whose names are used as a namespace from outside (``views.rows_table``).
_NAMESPACES = ("synthetic",)

__all__ = sorted([*_FACE, *_NAMESPACES])
__getattr__, __dir__ = lazy_face(__name__, _FACE, _NAMESPACES)
