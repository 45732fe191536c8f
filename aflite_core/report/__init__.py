"""Reports: before/after tables shared by the HTML report and the dashboard, and the HTML report.

Its face (``_FACE``, ``_NAMESPACES``) is what the rest of the code may import from it, resolved
on first use (:func:`aflite_core.faces.lazy_face`; ``docs/architecture.md``, *Public faces*).
"""

from __future__ import annotations

from aflite_core.faces import lazy_face

#: Public name -> the module of this package that defines it.
_FACE = {
    "add_measure": "_updates",
    "build_report": "html",
    "format_value": "compare",
    "side_by_side": "compare",
    "summary_text": "compare",
    "write_card": "_card",
    "write_compare_html": "compare_html",
    "write_report": "html",
}
#: Modules whose names are used as a namespace from outside (``views.rows_table``).
_NAMESPACES = ("compare", "compare_html", "html")

__all__ = sorted([*_FACE, *_NAMESPACES])
__getattr__, __dir__ = lazy_face(__name__, _FACE, _NAMESPACES)
