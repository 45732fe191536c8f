"""Data maps from the held-out predictions AFLite makes anyway (Swayamdipta et al., 2020).

Dataset Cartography places every training example by the *confidence* (mean probability of
the gold label) and *variability* (its standard deviation) a model gives it across training
epochs. AFLite's rounds provide the same kind of repeated, independent judgements for free:
each round trains ``m`` linear models on random partitions and predicts every row that a
partition holds out. Here, for each row and round,

* ``confidence`` = mean over the partitions holding the row out of ``p_j(y | x)``, the gold
  label's softmax probability under partition ``j``'s linear class scores (the LDA posterior;
  for multiple-choice AFLite the right choice's softmax over its question's choice scores);
* ``variability`` = population standard deviation of the same probabilities (the
  ``np.std`` of Dataset Cartography);
* ``correctness`` = the share of those partitions predicting the label, i.e. AFLite's
  predictability.

The variation is across training sets (partitions) of one round rather than across epochs of
one training run: a row whose gold probability swings with the training sample is ambiguous to
the linear models in the same sense.

*Overall* values are those of the round that decided the row, exactly like
``predictability_``: its removal round for a removed row, the last round for a retained one
(so ``correctness == predictability_`` bit for bit). Per-round means are kept in
``datamap_history_``. The extra work is a few element-wise passes over the margins AFLite
computes for its predictions (see :func:`aflite_core.filter._linear.heldout_stats`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["RoundDatamap", "DatamapTracker", "DATAMAP_ATTRIBUTES"]

#: The fitted attributes the estimators set from a tracker.
DATAMAP_ATTRIBUTES = ("confidence_", "variability_", "n_heldout_", "datamap_history_")


@dataclass(frozen=True)
class RoundDatamap:
    """One round's data-map statistics of the rows of S (in the round's row order).

    Attributes
    ----------
    n_heldout : ndarray of int64
        Partitions holding the row out.
    confidence, variability : ndarray of float64
        Mean and population standard deviation of the gold-label probability over those
        partitions; NaN when no partition held the row out.
    """

    n_heldout: np.ndarray
    confidence: np.ndarray
    variability: np.ndarray

    @classmethod
    def from_sums(cls, held: np.ndarray, prob_sum: np.ndarray,
                  prob_m2: np.ndarray) -> RoundDatamap:
        """From per-row held-out counts, probability sums and squared-deviation sums."""
        held = np.asarray(held)
        if held.dtype.kind not in "iu":  # counts as they come (int32 from the rounds)
            held = held.astype(np.int64)
        with np.errstate(invalid="ignore", divide="ignore"):
            n = np.where(held > 0, held, np.nan)
            confidence = np.clip(np.asarray(prob_sum, dtype=np.float64) / n, 0.0, 1.0)
            variability = np.sqrt(np.maximum(np.asarray(prob_m2, dtype=np.float64), 0.0) / n)
        return cls(held, confidence, variability)


class DatamapTracker:
    """Per-row data-map values of the deciding round, and per-round means, of one fit.

    ``record`` is called after each round with the rows of S; a row's values are overwritten
    each round it is scored, so at the end they are those of the round that decided it (the
    same rule as ``predictability_``). ``on=False`` records nothing (the estimators' private
    switch, used by the benchmark that times the data map).
    """

    def __init__(self, n: int, *, on: bool = True) -> None:
        self.on = bool(on)
        self.confidence = np.full(n, np.nan)
        self.variability = np.full(n, np.nan)
        self.n_heldout = np.zeros(n, dtype=np.int64)
        self.history: list[dict[str, Any]] = []

    def record(self, round_no: int, rows: np.ndarray, scores: np.ndarray,
               stats: RoundDatamap | None) -> None:
        """Store the round's values for ``rows`` (positions into the fit's rows)."""
        if stats is None:
            return
        self.confidence[rows] = stats.confidence
        self.variability[rows] = stats.variability
        self.n_heldout[rows] = stats.n_heldout
        scored = stats.n_heldout > 0
        self.history.append({
            "round": int(round_no),
            "n_scored": int(scored.sum()),
            "confidence_mean": _mean(stats.confidence[scored]),
            "variability_mean": _mean(stats.variability[scored]),
            "correctness_mean": _mean(np.asarray(scores)[scored]),
        })

    def store(self, estimator: Any, index: np.ndarray | None = None,
              prefix: str = "") -> None:
        """Set ``confidence_``, ``variability_``, ``n_heldout_`` and ``datamap_history_``.

        ``index`` maps the estimator's rows to the tracked units (multiple-choice AFLite
        tracks questions: the per-row values are those of the row's question, and the
        per-question ones are stored with ``prefix="question_"``).
        """
        values = {"confidence_": self.confidence, "variability_": self.variability,
                  "n_heldout_": self.n_heldout}
        for name, array in values.items():
            if prefix:
                setattr(estimator, prefix + name, array)
            setattr(estimator, name, array if index is None else array[index])
        estimator.datamap_history_ = pd.DataFrame(
            self.history, columns=["round", "n_scored", "confidence_mean", "variability_mean",
                                   "correctness_mean"])


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else float("nan")
