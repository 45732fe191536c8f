"""Before/after measures of a run: KNN distances, projection, duplicates, baselines, inoculation.

Its face (``_FACE``, ``_NAMESPACES``) is what the rest of the code may import from it, resolved
on first use (:func:`aflite_core.faces.lazy_face`; ``docs/architecture.md``, *Public faces*).
"""

from __future__ import annotations

from aflite_core.faces import lazy_face

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
    "interval_chart": "_slices_chart",
    "measure_caveats": "registry",
    "member_mask": "slices",
    "names": "registry",
    "stored_summary": "registry",
    "wilson_interval": "slices",
}
#: Modules used as a namespace from outside, and every measure's own module (one that defines
#: ``MEASURE``: the registry finds a measure by its public module's name).
_NAMESPACES = (
    "baselines", "cues", "datamap", "duplicates", "inoculation", "knn", "label_issues",
    "label_shift", "map_regions", "ood", "projection", "pvi", "registry", "slices",
)

__all__ = sorted([*_FACE, *_NAMESPACES])
__getattr__, __dir__ = lazy_face(__name__, _FACE, _NAMESPACES)
