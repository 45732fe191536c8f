"""Model input texts: a premise and a hypothesis joined into one string, and split again.

Kept apart from :mod:`aflite_core.represent._text_models` (which re-exports these names) so that
the measures can build model inputs without importing scikit-learn: a dashboard page that
only lists a run's measures then does not pay for it (0.5 s of the first paint).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["PAIR_SEPARATOR", "pair_text", "pair_texts", "split_pairs"]

#: Joins premise and hypothesis in a model input text (the ASCII unit separator).
PAIR_SEPARATOR = "\x1f"


def _clean(text: Any) -> str:
    return "" if text is None else str(text).replace(PAIR_SEPARATOR, " ")


def pair_text(premise: str | None, hypothesis: str) -> str:
    """The model input of one example: ``premise + PAIR_SEPARATOR + hypothesis``.

    ``premise=None`` (single-text data) gives the hypothesis alone. None texts read as "".

    Examples
    --------
    >>> split_pairs([pair_text("A dog runs.", "An animal moves.")])
    (['A dog runs.'], ['An animal moves.'])
    """
    if premise is None:
        return _clean(hypothesis)
    return _clean(premise) + PAIR_SEPARATOR + _clean(hypothesis)


def pair_texts(premises: Sequence[str] | None, hypotheses: Sequence[str]) -> list[str]:
    """:func:`pair_text` of every example; ``premises=None`` gives the hypotheses alone."""
    if premises is None:
        return [_clean(h) for h in hypotheses]
    if len(premises) != len(hypotheses):
        raise ValueError(f"premises: expected {len(hypotheses)} entries (one per hypothesis), "
                         f"got {len(premises)}")
    return [pair_text(p, h) for p, h in zip(premises, hypotheses, strict=True)]


def split_pairs(texts: Sequence[str]) -> tuple[list[str], list[str]]:
    """Premises ("" where absent) and hypotheses of model input texts (see :func:`pair_text`)."""
    if isinstance(texts, str):
        raise TypeError("texts: expected a sequence of texts, got a single str")
    premises, hypotheses = [], []
    for text in texts:
        premise, sep, hypothesis = ("" if text is None else str(text)).partition(
            PAIR_SEPARATOR)
        if not sep:
            premise, hypothesis = "", premise
        premises.append(premise)
        hypotheses.append(hypothesis)
    return premises, hypotheses
