"""Reports: before/after tables shared by the HTML report and the dashboard, and the HTML report.

Its face: what the rest of ``aflite_core``, ``ui/`` and the pages may import from it
(``from aflite_core.report import NAME``; never from one of its modules). Names are resolved
on first use, so importing the package stays as cheap as importing one of its modules
(the dashboard's first paint and ``python -m aflite_core --help`` import it).
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module of this package that defines it.
_FACE = {
    "add_measure": "updates",
    "build_report": "html",
    "format_value": "compare",
    "side_by_side": "compare",
    "summary_text": "compare",
    "write_card": "card",
    "write_compare_html": "compare_html",
    "write_report": "html",
}
#: Modules whose names are used as a namespace from outside (``views.rows_table``).
_NAMESPACES = ("compare", "compare_html", "html")

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
