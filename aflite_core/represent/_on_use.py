"""The text models and fold evaluators, built on use: scikit-learn is imported by the first
call, not by the modules that import these names (the measures; see
:mod:`aflite_core.represent._pair_inputs`), so that listing the measures, as a dashboard page
does, does not cost its import (0.5 s of the first paint)."""

from __future__ import annotations

from typing import Any

__all__ = ["counts_evaluator", "evaluator", "text_model"]


def text_model(*args: Any, **kwargs: Any) -> Any:
    """:func:`aflite_core.represent._text_models.text_model`, imported on the first call."""
    from aflite_core.represent._text_models import text_model as build  # lazy: +2026 ms to import

    return build(*args, **kwargs)


def evaluator(model: Any, data: Any, labels: Any) -> Any:
    """:func:`aflite_core.represent._fold_fits.evaluator`, imported on the first call."""
    from aflite_core.represent._fold_fits import evaluator as build  # lazy: +2046 ms to import

    return build(model, data, labels)


def counts_evaluator(model: Any, ngrams: Any, labels: Any) -> Any:
    """:func:`aflite_core.represent._fold_fits.counts_evaluator`, imported on the first call."""
    # lazy: +2046 ms to import
    from aflite_core.represent._fold_fits import counts_evaluator as build

    return build(model, ngrams, labels)
