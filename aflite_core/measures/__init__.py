"""Before/after measures of a run: KNN distances, projection, duplicates, baselines, inoculation.

Its face: what the rest of ``aflite_core``, ``ui/`` and the pages may import from it
(``from aflite_core.measures import NAME``; never from one of its modules). Names are resolved
on first use, so importing the package stays as cheap as importing one of its modules
(the dashboard's first paint and ``python -m aflite_core --help`` import it).
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module of this package that defines it.
_FACE = {
    "subset_hardness": "baselines",
    "HARDNESS_TITLE": "label_issues",
    "hardness_table": "label_issues",
    "MAX_REGION_SHARE": "map_regions",
    "NO_REGIONS": "map_regions",
    "region_table": "map_regions",
    "ANCHORS": "inoculation",
    "BASELINE_LABELS": "baselines",
    "CHALLENGE_WEIGHTS": "inoculation",
    "DEV_FRACTION": "inoculation",
    "FIGURE_POINTS": "datamap",
    "MODELS": "inoculation",
    "MODES": "inoculation",
    "Measure": "registry",
    "MeasureContext": "registry",
    "MeasureResult": "registry",
    "OutcomeThresholds": "inoculation",
    "SIZES": "inoculation",
    "UNCERTAINTY_NOTE": "baselines",
    "dataset_challenge": "ood",
    "default_names": "registry",
    "evaluate_ood": "ood",
    "figure_verdict": "baselines",
    "format_figure": "baselines",
    "headline_figures": "baselines",
    "inoculate": "inoculation",
    "interval_chart": "slices_chart",
    "measure_caveats": "registry",
    "member_mask": "slices",
    "names": "registry",
    "stored_summary": "registry",
    "wilson_interval": "slices",
}
#: Modules whose names are used as a namespace from outside (``views.rows_table``).
_NAMESPACES = (
    "baselines", "datamap", "duplicates", "inoculation", "label_issues", "map_regions", "pvi",
    "registry", "slices",
)

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
