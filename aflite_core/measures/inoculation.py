"""Inoculation by fine-tuning (Liu, Schwartz & Smith, NAACL 2019).

A model trained on the original training data is shown n examples of a challenge set, for
n in {0, 5, 10, 50, 100, 500, 1000} (nested, inclusive subsamples: the 10 examples contain the
5), and evaluated after each on held-out original and held-out challenge data. The two curves
tell why the challenge set is hard:

1. *dataset weakness*: the gap closes after a few examples with little loss on the original
   data (the original training data just lacked such examples);
2. *model weakness*: the gap stays (the model cannot learn the challenge);
3. *distribution difference*: the gap closes but accuracy on the original data drops.

Built-in models, both from :func:`aflite_core.represent.text_models.text_model` (features and
base classifier): ``"tfidf_lr"`` reads texts, ``text_model("full_input")`` when they are
premise-hypothesis pairs (:func:`pair_texts`), ``text_model("hypothesis_only")`` otherwise;
``"linear_phi"`` reads Φ, ``text_model("probe")``. Adding the n examples is done in one of two
documented ways (``mode``):

``"finetune"`` (default)
    Continue training from the original weights W0 on the n examples only, minimising their
    mean cross-entropy plus ``anchor / 2 * ||W - W0||^2`` (L-BFGS to convergence). The pull
    towards W0 plays the part of the few epochs and small learning rate of neural fine-tuning,
    deterministically; a smaller ``anchor`` lets the model move further (and forget more).
``"retrain"``
    Fit the model from scratch on the original training rows plus the n examples, each
    challenge example weighted ``challenge_weight``.

Features are fitted on the original training rows only (TF-IDF vocabulary, scaler), so the
challenge examples change the weights, never the feature space. See ``docs/measures.md`` for the
outcome rule and its thresholds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import logsumexp
from sklearn.base import clone

from aflite_core._validation import (
    check_callback,
    check_choice,
    check_fraction,
    check_int,
    check_real,
    make_rng,
)
from aflite_core.measures.registry import Measure, MeasureContext, MeasureResult
from aflite_core.represent.text_models import PAIR_SEPARATOR, single_blas_thread, text_model
from aflite_core.represent.text_models import pair_texts as pair_texts  # re-exported
from aflite_core.splits import group_codes, holdout_mask

#: Challenge-set sizes of Liu et al. (2019).
SIZES: tuple[int, ...] = (0, 5, 10, 50, 100, 500, 1000)
MODELS = ("tfidf_lr", "linear_phi")
MODES = ("finetune", "retrain")

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

    With ``gap0 = acc_original(0) - acc_challenge(0)``, the gap has *closed* at n when
    ``acc_original(n) - acc_challenge(n) <= closed_fraction * gap0`` and the challenge accuracy
    rose by at least ``min_challenge_gain * gap0``. Outcome 0 if ``gap0 < min_gap``; else
    outcome 1 if it closes at some n while ``acc_original(0) - acc_original(n) <=
    max_original_drop``; else 3 if it closes only with a larger drop; else 2.
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
        One row per size and repeat: ``n``, ``repeat``, ``accuracy_original``,
        ``accuracy_challenge``.
    summary : DataFrame
        One row per size: ``n``, ``original_mean``, ``original_std``, ``challenge_mean``,
        ``challenge_std``, ``gap`` (original minus challenge, means).
    outcome : int
        0 (no initial gap), 1 (dataset weakness), 2 (model weakness) or 3 (distribution
        difference).
    outcome_label : str
    explanation : str
        One sentence with the numbers behind the outcome.
    closed_at : int or None
        Smallest n at which the gap closed (see :class:`OutcomeThresholds`).
    params : dict
    """

    curves: pd.DataFrame
    summary: pd.DataFrame
    outcome: int
    outcome_label: str
    explanation: str
    closed_at: int | None
    params: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-friendly form (what ``inoculation.json`` holds)."""
        return {"outcome": self.outcome, "outcome_label": self.outcome_label,
                "explanation": self.explanation, "closed_at": self.closed_at,
                "params": self.params,
                "summary": self.summary.to_dict(orient="records"),
                "curves": self.curves.to_dict(orient="records")}


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
    """The :func:`~aflite_core.represent.text_models.text_model` kind behind ``model``."""
    if model == "linear_phi":
        return "probe"
    pairs = any(PAIR_SEPARATOR in t for t in original_train_inputs)
    return "full_input" if pairs else "hypothesis_only"


# --------------------------------------------------------------------------------------------
# model: text_models features + multinomial logistic regression with explicit weights


class _LinearModel:
    """The features and classifier of ``text_model(kind)``, with the weights (W, b) exposed.

    The features are fitted once, on the original training rows; the classifier is refitted
    (``fit_weights``) or fine-tuned (:func:`_finetune`) on top of them.
    """

    def __init__(self, kind: str, C: float, random_state: int | None, classes: np.ndarray):
        pipeline = text_model(kind, C=C, random_state=random_state)
        self.features = pipeline.named_steps["features"]
        self.classifier = pipeline.named_steps["model"]
        self.classes = classes

    def fit_features(self, data) -> _LinearModel:
        self.features.fit(data)
        return self

    def transform(self, data):
        return self.features.transform(data)

    def fit_weights(self, F, y, sample_weight=None) -> tuple[np.ndarray, np.ndarray]:
        with single_blas_thread():
            lr = clone(self.classifier).fit(F, y, sample_weight=sample_weight)
        W, b = lr.coef_, lr.intercept_
        if W.shape[0] == 1:  # binary: softmax over logits (0, z) is sigmoid(z)
            W, b = np.vstack([np.zeros_like(W), W]), np.concatenate([[0.0], b])
        classes = list(lr.classes_)
        order = [classes.index(c) for c in self.classes]
        return W[order].astype(np.float64), b[order].astype(np.float64)

    def predict(self, F, W, b) -> np.ndarray:
        return self.classes[np.argmax(np.asarray(F @ W.T) + b, axis=1)]


def _finetune(F, codes: np.ndarray, W0: np.ndarray, b0: np.ndarray,
              anchor: float) -> np.ndarray:
    """Weights minimising summed cross-entropy on (F, codes) + anchor/2 * ||W - W0||^2.

    Only weights of features that occur in ``F`` can move (the others sit at the optimum
    W0 already), so the problem is solved over those columns alone. The intercepts stay at
    ``b0``: they touch every example, so a handful of examples of one class would otherwise
    shift every prediction towards it.
    """
    n_classes = W0.shape[0]
    n = F.shape[0]
    if sp.issparse(F):
        F = F.tocsc()
        cols = np.flatnonzero(np.diff(F.indptr))
    else:
        cols = np.flatnonzero(np.any(F != 0, axis=0))
    Fa = F[:, cols]
    Y = np.zeros((n, n_classes))
    Y[np.arange(n), codes] = 1.0
    base = np.asarray(F @ W0.T) + b0

    def objective(delta: np.ndarray) -> tuple[float, np.ndarray]:
        D = delta.reshape(n_classes, len(cols))
        Z = base + np.asarray(Fa @ D.T)
        lse = logsumexp(Z, axis=1)
        loss = float(np.sum(lse - Z[np.arange(n), codes]))
        G = np.exp(Z - lse[:, None]) - Y
        grad = np.asarray(Fa.T @ G).T.ravel() + anchor * delta
        return loss + 0.5 * anchor * float(delta @ delta), grad

    res = minimize(objective, np.zeros(n_classes * len(cols)), jac=True, method="L-BFGS-B",
                   options={"maxiter": 500, "gtol": 1e-5})
    W = W0.copy()
    W[:, cols] += res.x.reshape(n_classes, len(cols))
    return W


# --------------------------------------------------------------------------------------------
# outcome


def classify_outcome(summary: pd.DataFrame, thresholds: OutcomeThresholds | None = None
                     ) -> tuple[int, int | None, str]:
    """Outcome (0-3), the smallest n where the gap closed, and a one-sentence explanation.

    ``summary`` needs columns ``n``, ``original_mean`` and ``challenge_mean`` with an n = 0 row.
    See :class:`OutcomeThresholds` for the rule.
    """
    t = thresholds or OutcomeThresholds()
    s = summary.sort_values("n")
    if s["n"].iloc[0] != 0:
        raise ValueError("summary must contain the n = 0 row (the model before inoculation)")
    o0, c0 = float(s["original_mean"].iloc[0]), float(s["challenge_mean"].iloc[0])
    gap0 = o0 - c0
    if gap0 < t.min_gap:
        return 0, None, (f"Before inoculation the challenge accuracy ({c0:.3f}) is within "
                         f"{t.min_gap:.3f} of the original accuracy ({o0:.3f}): there is no gap "
                         f"to explain.")
    closed, closed_ok = [], []
    for n, o, c in zip(s["n"].iloc[1:], s["original_mean"].iloc[1:],
                       s["challenge_mean"].iloc[1:], strict=True):
        if (o - c) <= t.closed_fraction * gap0 and (c - c0) >= t.min_challenge_gain * gap0:
            closed.append((int(n), o, c))
            if o0 - o <= t.max_original_drop:
                closed_ok.append((int(n), o, c))
    if closed_ok:
        n, o, c = closed_ok[0]
        return 1, n, (f"With {n} challenge examples the gap fell from {gap0:.3f} to {o - c:.3f} "
                      f"(challenge {c0:.3f} -> {c:.3f}) while original accuracy moved "
                      f"{o - o0:+.3f}: the original training data lacked such examples.")
    if closed:
        n, o, c = closed[0]
        return 3, n, (f"With {n} challenge examples the gap fell from {gap0:.3f} to {o - c:.3f}, "
                      f"but original accuracy dropped {o0 - o:.3f} (more than "
                      f"{t.max_original_drop:.3f}): the challenge data follows a different "
                      f"distribution.")
    last = s.iloc[-1]
    return 2, None, (f"The gap stayed: {gap0:.3f} at n=0, "
                     f"{last['original_mean'] - last['challenge_mean']:.3f} at "
                     f"n={int(last['n'])} (challenge {c0:.3f} -> {last['challenge_mean']:.3f}): "
                     f"the model cannot learn the challenge.")


# --------------------------------------------------------------------------------------------
# main entry


def inoculate(original_train, original_test, challenge_train, challenge_test, *,
              model: str = "tfidf_lr", sizes: Sequence[int] = SIZES, mode: str = "finetune",
              n_repeats: int = 3, anchor: float = 1.0, challenge_weight: float = 1.0,
              C: float = 1.0, thresholds: OutcomeThresholds | None = None,
              random_state: int | None = 0,
              callback: ProgressCallback | None = None) -> InoculationResult:
    """Inoculation curves on original and challenge data, and their outcome.

    Parameters
    ----------
    original_train, original_test, challenge_train, challenge_test : (inputs, labels) tuples
        Inputs are lists of texts for ``model="tfidf_lr"`` (see :func:`pair_texts` for NLI
        pairs) and 2-D arrays (Φ, same columns everywhere) for ``model="linear_phi"``.
        ``challenge_train`` is the pool the n examples are drawn from.
    model : {"tfidf_lr", "linear_phi"}, default "tfidf_lr"
        See the module docstring.
    sizes : sequence of int, default (0, 5, 10, 50, 100, 500, 1000)
        Numbers of challenge examples; 0 is always included. Sizes above the pool are dropped
        (listed in ``params["skipped_sizes"]``).
    mode : {"finetune", "retrain"}, default "finetune"
        See the module docstring.
    n_repeats : int, default 3
        Independent nested subsample sequences; curves are averaged over them.
    anchor : float, default 1.0
        ``finetune``: strength of the pull towards the original weights.
    challenge_weight : float, default 1.0
        ``retrain``: sample weight of each challenge example.
    C : float, default 1.0
        Inverse L2 regularisation of the original logistic regression.
    thresholds : OutcomeThresholds, optional
    random_state : int or None, default 0
        Seeds the subsamples.
    callback : callable, optional
        Called with ``{"stage": "inoculation", "fraction": float, "message": str}``.

    Returns
    -------
    InoculationResult
    """
    model = check_choice("model", model, MODELS)
    mode = check_choice("mode", mode, MODES)
    n_repeats = check_int("n_repeats", n_repeats, minimum=1)
    anchor = check_real("anchor", anchor, low=0.0, low_open=True)
    challenge_weight = check_real("challenge_weight", challenge_weight, low=0.0, low_open=True)
    C = check_real("C", C, low=0.0, low_open=True)
    callback = check_callback(callback)
    thresholds = thresholds or OutcomeThresholds()
    parts = {name: _check_part(part, name, model) for name, part in (
        ("original_train", original_train), ("original_test", original_test),
        ("challenge_train", challenge_train), ("challenge_test", challenge_test))}
    classes = _check_labels(parts)
    sizes, skipped = _check_sizes(sizes, len(parts["challenge_train"][1]))

    def emit(fraction: float, message: str) -> None:
        if callback is not None:
            callback({"stage": "inoculation", "fraction": fraction, "message": message})

    emit(0.0, "training on the original data")
    kind = _model_kind(model, parts["original_train"][0])
    start = _fit_original(parts, _LinearModel(kind, C, random_state, classes))
    curves = _curves(start, sizes, mode=mode, n_repeats=n_repeats, anchor=anchor,
                     challenge_weight=challenge_weight, random_state=random_state, emit=emit)
    summary = _summarise(curves)
    outcome, closed_at, explanation = classify_outcome(summary, thresholds)
    emit(1.0, "done")
    params = {"model": model, "features": kind, "mode": mode, "sizes": [int(s) for s in sizes],
              "skipped_sizes": [int(s) for s in skipped], "n_repeats": n_repeats,
              "anchor": anchor, "challenge_weight": challenge_weight, "C": C,
              "random_state": random_state, "thresholds": asdict(thresholds),
              "n_original_train": len(parts["original_train"][1]),
              "n_original_test": len(parts["original_test"][1]),
              "n_challenge_pool": len(parts["challenge_train"][1]),
              "n_challenge_test": len(parts["challenge_test"][1])}
    return InoculationResult(curves=curves, summary=summary, outcome=outcome,
                             outcome_label=OUTCOME_LABELS[outcome], explanation=explanation,
                             closed_at=closed_at, params=params)


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
        raise ValueError(f"challenge_train holds {pool} rows, fewer than the smallest positive "
                         f"size in sizes {sorted(skipped)}; nothing to inoculate with")
    return kept, skipped


@dataclass
class _Start:
    """The model trained on the original data, and every part in its feature space."""

    lm: _LinearModel
    features: dict  # part name -> feature matrix
    labels: dict  # part name -> labels
    W0: np.ndarray
    b0: np.ndarray
    scale: float  # mean squared norm of an original training feature row
    pool_codes: np.ndarray  # class index of every challenge_train row

    def accuracy(self, W: np.ndarray, b: np.ndarray) -> tuple[float, float]:
        """Accuracy on original_test and on challenge_test."""
        def on(part: str) -> float:
            return float(np.mean(self.lm.predict(self.features[part], W, b) == self.labels[part]))

        return on("original_test"), on("challenge_test")


def _fit_original(parts: dict, lm: _LinearModel) -> _Start:
    """Fit the features and the weights W0, b0 on ``original_train``; transform every part."""
    lm.fit_features(parts["original_train"][0])
    features = {name: lm.transform(data) for name, (data, _) in parts.items()}
    labels = {name: y for name, (_, y) in parts.items()}
    F_tr = features["original_train"]
    W0, b0 = lm.fit_weights(F_tr, labels["original_train"])
    # anchor is relative to the mean squared norm of a feature row (about 1 for TF-IDF rows,
    # about d for standardised Φ), so one value means the same pull for every model
    sq = F_tr.multiply(F_tr).sum() if sp.issparse(F_tr) else np.square(F_tr).sum()
    code_of = {c: i for i, c in enumerate(lm.classes)}
    return _Start(lm=lm, features=features, labels=labels, W0=W0, b0=b0,
                  scale=max(float(sq) / F_tr.shape[0], 1e-12),
                  pool_codes=np.array([code_of[v] for v in labels["challenge_train"]]))


def _curves(start: _Start, sizes: list[int], *, mode: str, n_repeats: int, anchor: float,
            challenge_weight: float, random_state: int | None, emit) -> pd.DataFrame:
    """Accuracies after n challenge examples, for every size and repeat (nested subsamples)."""
    acc0 = start.accuracy(start.W0, start.b0)
    F_tr, F_pool = start.features["original_train"], start.features["challenge_train"]
    y_tr, y_pool = start.labels["original_train"], start.labels["challenge_train"]
    rng = np.random.default_rng(random_state)
    records = []
    steps = max(1, n_repeats * (len(sizes) - 1))
    done = 0
    for r in range(n_repeats):
        order = rng.permutation(len(y_pool))
        records.append({"n": 0, "repeat": r, "accuracy_original": acc0[0],
                        "accuracy_challenge": acc0[1]})
        for n in sizes[1:]:
            emit(done / steps, f"repeat {r + 1}: {n} challenge examples")
            idx = order[:n]
            if mode == "finetune":
                W = _finetune(F_pool[idx], start.pool_codes[idx], start.W0, start.b0,
                              start.scale * anchor)
                b = start.b0
            else:
                stack = sp.vstack if sp.issparse(F_tr) else np.vstack
                weights = np.concatenate([np.ones(F_tr.shape[0]),
                                          np.full(n, challenge_weight)])
                W, b = start.lm.fit_weights(stack([F_tr, F_pool[idx]]),
                                            np.concatenate([y_tr, y_pool[idx]]), weights)
            acc = start.accuracy(W, b)
            records.append({"n": n, "repeat": r, "accuracy_original": acc[0],
                            "accuracy_challenge": acc[1]})
            done += 1
    return pd.DataFrame.from_records(records)


def _summarise(curves: pd.DataFrame) -> pd.DataFrame:
    """Mean and spread over the repeats, per size, and the gap between the two curves."""
    grouped = curves.groupby("n", sort=True)
    summary = pd.DataFrame({
        "n": np.array(sorted(curves["n"].unique()), dtype=np.int64),
        "original_mean": grouped["accuracy_original"].mean().to_numpy(),
        "original_std": grouped["accuracy_original"].std(ddof=0).to_numpy(),
        "challenge_mean": grouped["accuracy_challenge"].mean().to_numpy(),
        "challenge_std": grouped["accuracy_challenge"].std(ddof=0).to_numpy(),
    })
    summary["gap"] = summary["original_mean"] - summary["challenge_mean"]
    return summary


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
    params = {"random_state": ctx.random_state, **ctx.params}
    parts = split_for_inoculation(len(labels), ctx.keep, labels=labels, groups=ctx.groups,
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


MEASURE = Measure(
    name="inoculation",
    label="Inoculation curves (slow)",
    compute=_inoculation,
    files=("inoculation.json",),
    default=False,
    order=60,
    tables=_inoculation_tables,
)
