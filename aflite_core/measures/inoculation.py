"""Inoculation by fine-tuning (Liu, Schwartz & Smith, NAACL 2019).

A model trained on the original training data is shown n examples of a challenge set, for
n in {0, 5, 10, 50, 100, 500, 1000} (nested, inclusive subsamples: the 10 examples contain the
5), and evaluated after each on held-out original and held-out challenge data. The two curves
tell why the challenge set is hard:

1. *dataset weakness*: the gap closes and the original accuracy is kept (the original training
   data just lacked such examples);
2. *model weakness*: the gap stays (the model cannot learn the challenge);
3. *distribution difference*: the gap closes but accuracy on the original data drops.

Built-in models, both from :func:`aflite_core.represent._text_models.text_model` (features and
base classifier): ``"tfidf_lr"`` reads texts, ``text_model("full_input")`` when they are
premise-hypothesis pairs (:func:`pair_texts`), ``text_model("hypothesis_only")`` otherwise;
``"linear_phi"`` reads Φ, ``text_model("probe")``. Adding the n examples is done in one of two
documented ways (``mode``), each with a *strength* chosen per n (below):

``"finetune"`` (default)
    Continue training from the original weights W0 on the n examples only, minimising their
    *summed* cross-entropy plus ``anchor / 2 * ||W - W0||^2`` (L-BFGS to convergence; ``anchor``
    is the strength, multiplied by the mean squared norm of an original feature row). The pull
    towards W0 plays the part of the few epochs and small learning rate of neural fine-tuning,
    deterministically; a smaller ``anchor`` lets the model move further (and forget more), and
    because the loss is summed, more examples pull harder against the same anchor.
``"retrain"``
    Fit the model from scratch on the original training rows plus the n examples, each
    challenge example weighted by the strength (``challenge_weight``).

**Choosing the strength per n** (Liu et al. tune fine-tuning on held-out challenge data). A
seeded, label-stratified ``dev_fraction`` of the challenge pool is held out as the *challenge
dev* set (never drawn as one of the n examples, disjoint from the challenge test set), and the
same share of the original training rows as the *original dev* set (not used to fit W0). For
every n and repeat the model is fitted once per strength of the grid (``strengths``, default
:data:`ANCHORS` for ``finetune``, :data:`CHALLENGE_WEIGHTS` for ``retrain``); the chosen
strength maximises the challenge-dev score while keeping the original accuracy: strengths
within ``select_tolerance`` of the best challenge-dev score are tied; of those, the ones
within ``select_tolerance`` of the best original-dev accuracy among them are kept, and the one
with the best challenge-dev score wins (exact ties: the most conservative, largest anchor or
smallest challenge weight). By default ``select_tolerance`` is one standard error of the best
score in each step, ``sqrt(p (1 - p) / n_dev)``, so noise on the dev rows neither buys
forgetting nor blocks learning. Only the chosen model is reported on
the test sets; every candidate's dev and test scores are kept in ``result.selection``.

**Challenge metric.** With k labels in the challenge test set and a majority label holding
``majority_rate`` of its rows, the set is *skewed* when k > 1 and ``majority_rate >=
SKEWED_FACTOR / k`` (1.5/k, the rule of :mod:`aflite_core.measures.ood`). The challenge curve
(``challenge_mean``) and the strength selection then use balanced accuracy (mean per-label
recall), otherwise accuracy; ``challenge_metric``, ``majority_rate`` and ``chance`` (1/k) are
reported beside. The original curve is always accuracy.

**Outcome rule** (:func:`classify_outcome`, thresholds :class:`OutcomeThresholds`, defaults in
brackets), decided from the whole curve. With ``o(n)``, ``c(n)`` the original and challenge
means, ``gap(n) = o(n) - c(n)``, ``gap0 = gap(0)`` and N the largest size:

* outcome 0 (no initial gap) if ``gap0 < min_gap`` [0.03];
* the gap *has closed* when ``gap(N) <= closed_fraction * gap0`` [0.25], ``c(N) - c(0) >=
  min_challenge_gain * gap0`` [0.5] (so forgetting the original alone does not count) and the
  trend is downward: the least-squares slope of ``gap(n) / gap0`` against ``log10(1 + n)`` over
  all sizes is negative;
* closed and ``o(0) - o(N) <= max_original_drop`` [0.02]: outcome 1 (dataset weakness);
* closed and ``o(0) - o(N) > max_original_drop``: outcome 3 (distribution difference);
* otherwise outcome 2 (model weakness).

``closed_at`` is reported for information only: the smallest n from which the first two
conditions hold at every larger size (None if the gap is open at N).

Features are fitted on the original training rows only (TF-IDF vocabulary, scaler), so the
challenge examples change the weights, never the feature space. See ``docs/measures.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from aflite_core._validation import (
    check_callback,
    check_choice,
    check_fraction,
    check_int,
    check_real,
    make_rng,
)
from aflite_core.measures._inoculation_curves import (
    LinearModel,
    compute_curves,
    fit_original,
    summarise,
)
from aflite_core.measures.ood import SKEWED_FACTOR
from aflite_core.measures.registry import (
    Measure,
    MeasureContext,
    MeasureResult,
    Option,
    stored_summary,
)
from aflite_core.represent import PAIR_SEPARATOR
from aflite_core.represent import pair_texts as pair_texts  # re-exported
from aflite_core.splits import group_codes, holdout_mask

#: Challenge-set sizes of Liu et al. (2019).
SIZES: tuple[int, ...] = (0, 5, 10, 50, 100, 500, 1000)
MODELS = ("tfidf_lr", "linear_phi")
MODES = ("finetune", "retrain")
#: Default strength grid of ``mode="finetune"``: the anchor (pull towards W0), strongest last.
ANCHORS: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0)
#: Default strength grid of ``mode="retrain"``: the sample weight of each challenge example.
CHALLENGE_WEIGHTS: tuple[float, ...] = (1.0, 10.0, 100.0)
#: Default share of the challenge pool (and of the original training rows) held out for
#: choosing the strength.
DEV_FRACTION = 0.2

OUTCOME_LABELS = {
    0: "no initial gap",
    1: "dataset weakness",
    2: "model weakness",
    3: "distribution difference",
}

ProgressCallback = Callable[[dict], object]


@dataclass(frozen=True)
class OutcomeThresholds:
    """Thresholds of the outcome rule (accuracies as fractions, gaps relative to the n=0 gap).

    See the module docstring for the rule. ``min_gap``: smallest n=0 gap worth explaining;
    ``closed_fraction``: the gap at the largest n must be at most this share of the n=0 gap;
    ``min_challenge_gain``: the challenge score must rise by at least this share of the n=0
    gap; ``max_original_drop``: largest original-accuracy loss at the largest n that still
    counts as keeping the original accuracy (outcome 1 rather than 3).
    """

    min_gap: float = 0.03
    closed_fraction: float = 0.25
    min_challenge_gain: float = 0.5
    max_original_drop: float = 0.02

    def __post_init__(self) -> None:
        for name in ("min_gap", "closed_fraction", "min_challenge_gain", "max_original_drop"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"{name} must be a number in [0, 1]; got {value!r}")


@dataclass
class InoculationResult:
    """Output of :func:`inoculate`.

    Attributes
    ----------
    curves : DataFrame
        One row per size and repeat: ``n``, ``repeat``, ``strength`` (chosen; NaN at n=0),
        ``accuracy_original``, ``accuracy_challenge``, ``balanced_accuracy_challenge`` and
        ``score_challenge`` (the one of the two named by ``challenge_metric``).
    summary : DataFrame
        One row per size: ``n``, ``original_mean``, ``original_std``, ``challenge_mean``,
        ``challenge_std`` (of ``score_challenge``), ``gap`` (original minus challenge, means),
        ``challenge_accuracy_mean`` (plain accuracy) and ``chosen_strength`` (the strength
        chosen most often over the repeats, ties to the more conservative; NaN at n=0).
    selection : DataFrame
        One row per size (n > 0), repeat and candidate strength: ``dev_original`` (accuracy),
        ``dev_challenge`` (``challenge_metric``), ``chosen``, and for diagnosis only
        ``test_original``, ``test_challenge``.
    outcome : int
        0 (no initial gap), 1 (dataset weakness), 2 (model weakness) or 3 (distribution
        difference).
    outcome_label : str
    explanation : str
        One sentence with the numbers behind the outcome.
    closed_at : int or None
        Smallest n from which the gap stays closed (information only; see the module
        docstring).
    challenge_metric : {"accuracy", "balanced_accuracy"}
    majority_rate : float
        Share of the most frequent label in the challenge test set.
    chance : float
        1 / number of labels in the challenge test set.
    params : dict
    rows : dict
        Positions of ``original_dev`` (in ``original_train``), ``challenge_dev`` and
        ``challenge_pool`` (in ``challenge_train``) and ``orders`` (per repeat, the pool
        positions in draw order: the first n are the n examples). Not part of :meth:`to_dict`.
    """

    curves: pd.DataFrame
    summary: pd.DataFrame
    outcome: int
    outcome_label: str
    explanation: str
    closed_at: int | None
    selection: pd.DataFrame = field(default_factory=pd.DataFrame)
    challenge_metric: str = "accuracy"
    majority_rate: float = float("nan")
    chance: float = float("nan")
    params: dict = field(default_factory=dict)
    rows: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-friendly form (what ``inoculation.json`` holds)."""
        chosen = {str(int(n)): (None if pd.isna(s) else float(s))
                  for n, s in zip(self.summary["n"], self.summary["chosen_strength"],
                                  strict=True) if n > 0}
        return {"outcome": self.outcome, "outcome_label": self.outcome_label,
                "explanation": self.explanation, "closed_at": self.closed_at,
                "challenge_metric": self.challenge_metric,
                "majority_rate": self.majority_rate, "chance": self.chance,
                "chosen_strength": chosen, "params": self.params,
                "summary": _records(self.summary), "curves": _records(self.curves),
                "selection": _records(self.selection)}


def _records(frame: pd.DataFrame) -> list[dict]:
    """Records with NaN as None (valid JSON)."""
    return frame.astype(object).where(frame.notna(), None).to_dict(orient="records")


# --------------------------------------------------------------------------------------------
# inputs


def _check_part(part, name: str, model: str):
    if not (isinstance(part, tuple) and len(part) == 2):
        raise ValueError(f"{name} must be a (inputs, labels) tuple; got {type(part).__name__}")
    data, labels = part
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"{name}: labels must be 1-D; got shape {labels.shape}")
    if model == "tfidf_lr":
        if isinstance(data, np.ndarray) and data.ndim != 1:
            raise ValueError(f"{name}: model 'tfidf_lr' needs a list of texts; got an array of "
                             f"shape {data.shape}")
        data = ["" if t is None else str(t) for t in data]
    else:
        data = np.asarray(data)
        if data.ndim != 2 or not np.issubdtype(data.dtype, np.number):
            raise ValueError(f"{name}: model 'linear_phi' needs a 2-D numeric array; got shape "
                             f"{data.shape}, dtype {data.dtype}")
        if not np.isfinite(data).all():
            raise ValueError(f"{name}: inputs must be finite; found NaN or infinite values")
        data = np.asarray(data, dtype=np.float64)
    if len(data) != len(labels):
        raise ValueError(f"{name}: {len(data)} inputs but {len(labels)} labels")
    if len(labels) == 0:
        raise ValueError(f"{name} must not be empty")
    return data, labels


def _model_kind(model: str, original_train_inputs) -> str:
    """The :func:`~aflite_core.represent._text_models.text_model` kind behind ``model``."""
    if model == "linear_phi":
        return "probe"
    pairs = any(PAIR_SEPARATOR in t for t in original_train_inputs)
    return "full_input" if pairs else "hypothesis_only"


# --------------------------------------------------------------------------------------------
# outcome


def gap_trend(summary: pd.DataFrame) -> float:
    """Least-squares slope of ``gap(n) / gap(0)`` against ``log10(1 + n)`` (negative: closing).

    ``summary`` needs columns ``n``, ``original_mean`` and ``challenge_mean`` with an n = 0 row
    and a non-zero n = 0 gap.
    """
    s = summary.sort_values("n")
    gap = (s["original_mean"] - s["challenge_mean"]).to_numpy(dtype=float)
    x = np.log10(1.0 + s["n"].to_numpy(dtype=float))
    if len(x) < 2 or gap[0] == 0:
        return 0.0
    return float(np.polyfit(x, gap / gap[0], 1)[0])


def classify_outcome(summary: pd.DataFrame, thresholds: OutcomeThresholds | None = None
                     ) -> tuple[int, int | None, str]:
    """Outcome (0-3) decided from the whole curve, ``closed_at`` and a one-sentence explanation.

    ``summary`` needs columns ``n``, ``original_mean`` and ``challenge_mean`` with an n = 0 row.
    The decision uses the n = 0 row, the row of the largest n and the trend of the gap over all
    sizes (:func:`gap_trend`); see the module docstring for the rule and
    :class:`OutcomeThresholds` for the thresholds. ``closed_at`` (the smallest n from which the
    gap stays closed up to the largest n) is information, not part of the decision.
    """
    t = thresholds or OutcomeThresholds()
    s = summary.sort_values("n")
    if s["n"].iloc[0] != 0:
        raise ValueError("summary must contain the n = 0 row (the model before inoculation)")
    if len(s) < 2:
        raise ValueError("summary must contain at least one n > 0 row")
    n_, o_, c_ = (s[k].to_numpy(dtype=float) for k in ("n", "original_mean", "challenge_mean"))
    o0, c0 = o_[0], c_[0]
    gap0 = o0 - c0
    if gap0 < t.min_gap:
        return 0, None, (f"Before inoculation the challenge score ({c0:.3f}) is within "
                         f"{t.min_gap:.3f} of the original accuracy ({o0:.3f}): there is no gap "
                         f"to explain.")
    closed_each = ((o_ - c_) <= t.closed_fraction * gap0) & ((c_ - c0) >= t.min_challenge_gain
                                                             * gap0)
    closed_each[0] = False
    trend = gap_trend(s)
    big_n, oN, cN = int(n_[-1]), o_[-1], c_[-1]
    gapN, drop = oN - cN, o0 - oN
    closed = bool(closed_each[-1]) and trend < 0
    closed_at = None
    if closed_each[-1]:
        first_open_from_end = np.flatnonzero(~closed_each)[-1]
        closed_at = int(n_[first_open_from_end + 1])
    numbers = (f"gap {gap0:.3f} at n=0 -> {gapN:.3f} at n={big_n} (challenge {c0:.3f} -> "
               f"{cN:.3f}, original {o0:.3f} -> {oN:.3f}, gap trend {trend:+.2f} per decade "
               f"of n)")
    if closed:
        numbers += f"; closed from {closed_at} challenge examples on"
    if closed and drop <= t.max_original_drop:
        return 1, closed_at, (f"The gap closed, {numbers}, and original accuracy was kept "
                              f"(drop {drop:.3f} <= {t.max_original_drop:.3f}): the original "
                              f"training data lacked such examples.")
    if closed:
        return 3, closed_at, (f"The gap closed, {numbers}, but original accuracy dropped "
                              f"{drop:.3f} (more than {t.max_original_drop:.3f}): the challenge "
                              f"data follows a different distribution.")
    return 2, None, (f"The gap stayed open, {numbers}: the model cannot learn the challenge "
                     f"from these examples.")


# --------------------------------------------------------------------------------------------
# main entry


def inoculate(original_train, original_test, challenge_train, challenge_test, *,
              model: str = "tfidf_lr", sizes: Sequence[int] = SIZES, mode: str = "finetune",
              n_repeats: int = 3, strengths: Sequence[float] | None = None,
              dev_fraction: float = DEV_FRACTION, select_tolerance: float | None = None,
              C: float = 1.0, thresholds: OutcomeThresholds | None = None,
              random_state: int | None = 0,
              callback: ProgressCallback | None = None) -> InoculationResult:
    """Inoculation curves on original and challenge data, and their outcome.

    Parameters
    ----------
    original_train, original_test, challenge_train, challenge_test : (inputs, labels) tuples
        Inputs are lists of texts for ``model="tfidf_lr"`` (see :func:`pair_texts` for NLI
        pairs) and 2-D arrays (Φ, same columns everywhere) for ``model="linear_phi"``.
        ``challenge_train`` is split into the challenge dev set (``dev_fraction``) and the pool
        the n examples are drawn from.
    model : {"tfidf_lr", "linear_phi"}, default "tfidf_lr"
        See the module docstring.
    sizes : sequence of int, default (0, 5, 10, 50, 100, 500, 1000)
        Numbers of challenge examples; 0 is always included. Sizes above the pool (after the
        dev rows are held out) are dropped (listed in ``params["skipped_sizes"]``).
    mode : {"finetune", "retrain"}, default "finetune"
        See the module docstring.
    n_repeats : int, default 3
        Independent nested subsample sequences; curves are averaged over them.
    strengths : sequence of float > 0, optional
        Grid the strength is chosen from per n and repeat: anchors for ``finetune`` (default
        :data:`ANCHORS`), challenge weights for ``retrain`` (default :data:`CHALLENGE_WEIGHTS`).
        A single value fixes the strength.
    dev_fraction : float in (0, 1), default 0.2
        Share of ``challenge_train`` and of ``original_train`` held out (seeded, stratified by
        label) for choosing the strength.
    select_tolerance : float in [0, 1], optional
        Width of a tie on the dev scores (see the module docstring). Default: one standard
        error of the best score, ``sqrt(p * (1 - p) / n_dev)``.
    C : float, default 1.0
        Inverse L2 regularisation of the original logistic regression.
    thresholds : OutcomeThresholds, optional
    random_state : int or None, default 0
        Seeds the dev hold-outs and the subsamples.
    callback : callable, optional
        Called with ``{"stage": "inoculation", "fraction": float, "message": str}``.

    Returns
    -------
    InoculationResult
    """
    model = check_choice("model", model, MODELS)
    mode = check_choice("mode", mode, MODES)
    n_repeats = check_int("n_repeats", n_repeats, minimum=1)
    strengths = _check_strengths(strengths, mode)
    dev_fraction = check_fraction("dev_fraction", dev_fraction)
    if select_tolerance is not None:
        select_tolerance = check_real("select_tolerance", select_tolerance, low=0.0, high=1.0)
    C = check_real("C", C, low=0.0, low_open=True)
    callback = check_callback(callback)
    thresholds = thresholds or OutcomeThresholds()
    parts = {name: _check_part(part, name, model) for name, part in (
        ("original_train", original_train), ("original_test", original_test),
        ("challenge_train", challenge_train), ("challenge_test", challenge_test))}
    classes = _check_labels(parts)
    rng = make_rng(random_state)
    rows = {}
    for source, dev_name, keep_name in (("original_train", "original_dev", "original_fit"),
                                        ("challenge_train", "challenge_dev", "challenge_pool")):
        data, labels = parts[source]
        if len(labels) < 2:
            raise ValueError(f"{source} holds {len(labels)} rows; need at least 2 (some are "
                             f"held out to choose the strength)")
        held = holdout_mask(labels, test_size=dev_fraction, random_state=rng, clamp=True)
        rows[dev_name], rows[keep_name] = np.flatnonzero(held), np.flatnonzero(~held)
        parts[dev_name] = _take(data, labels, rows[dev_name])
        parts[keep_name] = _take(data, labels, rows[keep_name])
    if len(np.unique(parts["original_fit"][1])) < 2:
        raise ValueError("original_train must hold at least two classes outside the dev rows")
    sizes, skipped = _check_sizes(sizes, len(rows["challenge_pool"]))
    metric, majority, chance = challenge_metric(parts["challenge_test"][1])

    def emit(fraction: float, message: str) -> None:
        if callback is not None:
            callback({"stage": "inoculation", "fraction": fraction, "message": message})

    emit(0.0, "training on the original data")
    kind = _model_kind(model, parts["original_fit"][0])
    start = fit_original(parts, LinearModel(kind, C, random_state, classes),
                          balanced=metric == "balanced_accuracy")
    curves, selection, orders = compute_curves(
        start, sizes, mode=mode, n_repeats=n_repeats, strengths=strengths,
        tolerance=select_tolerance, rng=rng, emit=emit)
    summary = summarise(curves, conservative=max if mode == "finetune" else min)
    outcome, closed_at, explanation = classify_outcome(summary, thresholds)
    if metric == "balanced_accuracy":
        explanation += (f" The challenge test set is skewed (majority label {majority:.0%}, "
                        f"chance {chance:.3f}), so challenge scores are balanced accuracy.")
    emit(1.0, "done")
    rows["orders"] = orders
    params = {"model": model, "features": kind, "mode": mode, "sizes": [int(s) for s in sizes],
              "skipped_sizes": [int(s) for s in skipped], "n_repeats": n_repeats,
              "strength_name": "anchor" if mode == "finetune" else "challenge_weight",
              "strengths": list(strengths), "dev_fraction": dev_fraction,
              "select_tolerance": select_tolerance, "C": C,
              "random_state": random_state, "thresholds": asdict(thresholds),
              "gap_trend": gap_trend(summary) if summary["gap"].iloc[0] != 0 else 0.0,
              "n_original_train": len(parts["original_train"][1]),
              "n_original_fit": len(rows["original_fit"]),
              "n_original_dev": len(rows["original_dev"]),
              "n_original_test": len(parts["original_test"][1]),
              "n_challenge_pool": len(parts["challenge_train"][1]),
              "n_challenge_dev": len(rows["challenge_dev"]),
              "n_challenge_test": len(parts["challenge_test"][1])}
    return InoculationResult(curves=curves, summary=summary, selection=selection,
                             outcome=outcome, outcome_label=OUTCOME_LABELS[outcome],
                             explanation=explanation, closed_at=closed_at,
                             challenge_metric=metric, majority_rate=majority, chance=chance,
                             params=params, rows=rows)


def challenge_metric(labels) -> tuple[str, float, float]:
    """``(metric, majority_rate, chance)`` of a challenge set from its labels.

    The metric is ``"balanced_accuracy"`` when the set is skewed (more than one label and the
    majority label holds at least ``SKEWED_FACTOR / k`` of the rows, k labels), else
    ``"accuracy"``; chance is 1/k.
    """
    _, counts = np.unique(np.asarray(labels), return_counts=True)
    k = len(counts)
    majority = float(counts.max() / counts.sum())
    skewed = k > 1 and majority >= SKEWED_FACTOR / k
    return ("balanced_accuracy" if skewed else "accuracy"), majority, 1.0 / k


def _take(data, labels: np.ndarray, idx: np.ndarray):
    """Rows ``idx`` of an (inputs, labels) part (inputs a list of texts or an array)."""
    if isinstance(data, list):
        return [data[i] for i in idx], labels[idx]
    return data[idx], labels[idx]


def _check_strengths(strengths: Sequence[float] | None, mode: str) -> tuple[float, ...]:
    if strengths is None:
        return ANCHORS if mode == "finetune" else CHALLENGE_WEIGHTS
    if isinstance(strengths, (int, float)):
        strengths = (strengths,)
    values = tuple(check_real("strengths", v, low=0.0, low_open=True) for v in strengths)
    if not values:
        raise ValueError("strengths: expected at least one positive number, got none")
    return tuple(sorted(set(values)))


def _check_labels(parts: dict) -> np.ndarray:
    """The classes of ``original_train`` (sorted); the challenge labels must be among them."""
    known = set(np.unique(parts["original_train"][1]).tolist())
    if len(known) < 2:
        raise ValueError("original_train must hold at least two classes")
    challenge = np.concatenate([parts["challenge_train"][1], parts["challenge_test"][1]])
    unseen = sorted({str(v) for v in np.unique(challenge) if v not in known})
    if unseen:
        raise ValueError(f"challenge labels {unseen} do not occur in original_train; the two "
                         f"sets must share their label set")
    return np.array(sorted(known, key=str), dtype=object)


def _check_sizes(sizes: Sequence[int], pool: int) -> tuple[list[int], list[int]]:
    """Sorted sizes with 0, those the pool can serve and those it cannot."""
    try:
        wanted = sorted({int(s) for s in sizes} | {0})
    except (TypeError, ValueError):
        raise ValueError(f"sizes must be non-negative integers; got {sizes!r}") from None
    if wanted[0] < 0:
        raise ValueError(f"sizes must be non-negative integers; got {sizes!r}")
    skipped = [s for s in wanted if s > pool]
    kept = [s for s in wanted if s <= pool]
    if len(kept) < 2:
        raise ValueError(f"the challenge pool holds {pool} rows (challenge_train without its "
                         f"dev rows), fewer than the smallest positive size in sizes "
                         f"{sorted(skipped)}; nothing to inoculate with")
    return kept, skipped


# --------------------------------------------------------------------------------------------
# splitting one dataset into original and challenge data


def split_for_inoculation(n_rows: int, challenge_mask, *, test_fraction: float = 0.2,
                          pool_size: int = max(SIZES), labels=None, groups=None,
                          random_state: int | None = 0) -> dict[str, np.ndarray]:
    """Disjoint row positions for inoculating with a subset of one dataset as challenge.

    The default challenge is the AFLite-retained set: ``challenge_test`` is a seeded
    ``test_fraction`` of the challenge rows, ``challenge_train`` (the pool) up to ``pool_size``
    of the others; the remaining rows of the *whole* dataset (retained rows included) are the
    original data, split into ``original_test`` (``test_fraction``) and ``original_train``.
    Both hold-outs come from :func:`aflite_core.splits.holdout_mask` (seeded, stratified by
    ``labels`` when given, at least one row on each side).

    Parameters
    ----------
    n_rows : int
    challenge_mask : bool array of shape (n_rows,)
    test_fraction : float in (0, 1), default 0.2
    pool_size : int >= 1, default 1000
    labels : array of shape (n_rows,), optional
        Stratify both hold-outs by label.
    groups : array of shape (n_rows,), optional
        Group per row: no group has rows on both the training side (``original_train``,
        ``challenge_train``) and the test side (``original_test``, ``challenge_test``). Rows
        of the original data that share a group with a challenge test row are original test
        rows, those sharing one with a pool row original training rows; the hold-out shares
        are then met as closely as whole groups allow.
    random_state : int or None, default 0

    Returns
    -------
    dict with int64 position arrays ``original_train``, ``original_test``, ``challenge_train``,
    ``challenge_test``, each sorted.
    """
    n_rows = check_int("n_rows", n_rows, minimum=1)
    mask = np.asarray(challenge_mask)
    if mask.dtype != bool or mask.shape != (n_rows,):
        raise ValueError(f"challenge_mask must be a boolean array of shape ({n_rows},); got "
                         f"dtype {mask.dtype}, shape {mask.shape}")
    test_fraction = check_fraction("test_fraction", test_fraction)
    pool_size = check_int("pool_size", pool_size, minimum=1)
    strata = np.zeros(n_rows, dtype=np.int64) if labels is None else np.asarray(labels)
    if strata.shape != (n_rows,):
        raise ValueError(f"labels: expected {n_rows} values (one per row), got shape "
                         f"{strata.shape}")
    codes = group_codes(groups, n_rows)
    rng = make_rng(random_state)
    chal = np.flatnonzero(mask)
    if len(chal) < 2:
        raise ValueError(f"challenge_mask selects {len(chal)} rows; need at least 2")
    in_test = holdout_mask(strata[chal], test_size=test_fraction,
                           groups=None if codes is None else codes[chal], random_state=rng,
                           clamp=True)
    challenge_test = chal[in_test]
    challenge_train = np.sort(rng.permutation(chal[~in_test])[:pool_size])
    rest = np.setdiff1d(np.arange(n_rows), np.concatenate([challenge_test, challenge_train]))
    if len(rest) < 2:
        raise ValueError("too few rows left for the original train and test sets")
    held = _original_holdout(rest, strata, codes, challenge_test, challenge_train,
                             test_fraction, rng)
    if held.all() or not held.any():
        raise ValueError("too few rows (or groups) left for the original train and test sets")
    return {"original_train": rest[~held], "original_test": rest[held],
            "challenge_train": challenge_train, "challenge_test": np.sort(challenge_test)}


def _original_holdout(rest: np.ndarray, strata: np.ndarray, codes: np.ndarray | None,
                      challenge_test: np.ndarray, challenge_train: np.ndarray,
                      test_fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Test mask over the original rows ``rest`` (see :func:`split_for_inoculation`)."""
    if codes is None:
        return holdout_mask(strata[rest], test_size=test_fraction, random_state=rng,
                            clamp=True)
    held = np.isin(codes[rest], codes[challenge_test])
    free = ~held & ~np.isin(codes[rest], codes[challenge_train])
    share = (test_fraction * len(rest) - held.sum()) / max(int(free.sum()), 1)
    if free.sum() > 1 and 0.0 < share < 1.0:
        held[free] = holdout_mask(strata[rest][free], test_size=share,
                                  groups=codes[rest][free], random_state=rng, clamp=True)
    elif free.any() and share >= 1.0:
        held[free] = True
    return held


# --- registry entry -------------------------------------------------------------------


def _inoculation(ctx: MeasureContext) -> MeasureResult:
    hyps, prems = ctx.texts()
    texts = np.asarray(pair_texts(prems, hyps), dtype=object)
    labels = ctx.y
    params = {"random_state": ctx.random_state,
              **MEASURE.check_params(ctx.params, n_rows=len(labels))}
    # the pool also feeds the challenge dev set (dev_fraction of it), so it is enlarged to
    # leave max(SIZES) rows to inoculate with
    dev_fraction = params["dev_fraction"]
    largest = max([*SIZES, *params["sizes"]])
    pool_size = int(np.ceil(largest / (1.0 - dev_fraction)))
    parts = split_for_inoculation(len(labels), ctx.keep, labels=labels, groups=ctx.groups,
                                  pool_size=max(pool_size, 2),
                                  random_state=params["random_state"])
    data = {k: (list(texts[idx]), labels[idx]) for k, idx in parts.items()}
    result = inoculate(
        data["original_train"],
        data["original_test"],
        data["challenge_train"],
        data["challenge_test"],
        callback=ctx.callback(),
        **params,
    )
    return MeasureResult(
        documents={"inoculation.json": result.to_dict()}, info={"outcome": result.outcome_label}
    )


def _inoculation_tables(run) -> dict[str, pd.DataFrame]:
    data = run.read_json("inoculation.json")
    if not data or not data.get("summary"):
        return {}
    return {"Inoculation curve": pd.DataFrame(data["summary"])}


#: Columns of the ``summary`` records of ``inoculation.json`` the figure and report read.
SUMMARY_COLUMNS = {"n", "original_mean", "challenge_mean"}


def _inoculation_figures(run) -> list:
    """Scores on the original and the challenge test as challenge examples are added, with
    the challenge set's majority rate and chance as reference lines."""
    from aflite_core.chart_style import REFERENCE_COLOR  # lazy: +7 ms to import

    data, table = stored_summary(run, "inoculation", "inoculation.json", SUMMARY_COLUMNS)
    if table is None:
        return []
    metric = str(data.get("challenge_metric") or "accuracy").replace("_", " ")
    chart = go.Figure()
    for column, name in (("original_mean", "original test (accuracy)"),
                         ("challenge_mean", f"challenge test ({metric})")):
        chart.add_trace(go.Scatter(x=table["n"], y=table[column], mode="lines+markers",
                                   name=name))
    for i, key in enumerate(("majority_rate", "chance")):
        if isinstance(data.get(key), (int, float)):
            chart.add_hline(y=float(data[key]), line_dash="dash" if i == 0 else "dot",
                            line_color=REFERENCE_COLOR,
                            annotation_text=f"challenge {key.replace('_', ' ')} "
                                            f"{float(data[key]):.3f}",
                            annotation_position="top left" if i == 0 else "bottom right")
    chart.update_layout(title="Scores after inoculation with n challenge examples",
                        xaxis_title="n challenge examples", yaxis_title="score")
    return [chart]


MEASURE = Measure(
    name="inoculation",
    label="Inoculation curves (slow)",
    compute=_inoculation,
    files=("inoculation.json",),
    default=False,
    order=60,
    tables=_inoculation_tables,
    figures=_inoculation_figures,
    options=(
        Option("sizes", "Inoculation: challenge examples n", SIZES, minimum=0,
               maximum=1_000_000, form=False,
               help="The numbers of challenge examples the curves are drawn at (0 is "
                    "always added)."),
        Option("mode", "Inoculation: mode", "finetune", choices=MODES,
               help="finetune: anchor the original model and fit on the challenge "
                    "examples; retrain: train on both, the challenge examples weighted."),
        Option("n_repeats", "Inoculation: repeats", 3, minimum=1, maximum=20,
               help="Independent nested samples of challenge examples; the curves are "
                    "their mean."),
        Option("dev_fraction", "Inoculation: dev share", DEV_FRACTION, minimum=0.0,
               maximum=1.0, open_bounds=True, form=False,
               help="Share of the challenge and original training rows held out to choose "
                    "the strength."),
        Option("select_tolerance", "Inoculation: tie width", None, kind="float",
               minimum=0.0, maximum=1.0, optional=True, form=False,
               help="Dev scores this close to the best are tied (none: one standard error "
                    "of the best)."),
        Option("C", "Inoculation: inverse regularisation C", 1.0, minimum=1e-6,
               maximum=1e6, form=False,
               help="Inverse L2 regularisation of the original logistic regression."),
    ),
)
