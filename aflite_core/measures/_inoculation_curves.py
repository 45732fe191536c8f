"""The learning curves of inoculation by fine-tuning: a linear model fitted on the original
training data, then fine-tuned (or retrained) on growing samples of the challenge data, each
size repeated and the strength chosen on a development split; summarised per size.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.special import logsumexp

from aflite_core.represent import pair_texts as pair_texts  # re-exported

# --------------------------------------------------------------------------------------------
# model: text_models features + multinomial logistic regression with explicit weights


class LinearModel:
    """The features and classifier of ``text_model(kind)``, with the weights (W, b) exposed.

    The features are fitted once, on the original training rows; the classifier is refitted
    (``fit_weights``) or fine-tuned (:func:`_finetune`) on top of them.
    """

    def __init__(self, kind: str, C: float, random_state: int | None, classes: np.ndarray):
        from aflite_core.represent import text_model  # scikit-learn, on use

        pipeline = text_model(kind, C=C, random_state=random_state)
        self.features = pipeline.named_steps["features"]
        self.classifier = pipeline.named_steps["model"]
        self.classes = classes

    def fit_features(self, data) -> LinearModel:
        self.features.fit(data)
        return self

    def transform(self, data):
        return self.features.transform(data)

    def fit_weights(self, F, y, sample_weight=None) -> tuple[np.ndarray, np.ndarray]:
        from sklearn.base import clone  # lazy: +1259 ms to import

        from aflite_core.represent import single_blas_thread  # lazy: +1272 ms to import

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
    """Weights minimising the summed (not mean) cross-entropy on (F, codes) plus
    ``anchor / 2 * ||W - W0||^2``.

    Summing means the data term grows with the number of examples, so against a fixed anchor
    more examples move the weights further (as more fine-tuning steps would).

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

    from scipy.optimize import minimize  # on use: 0.16 s to import

    res = minimize(objective, np.zeros(n_classes * len(cols)), jac=True, method="L-BFGS-B",
                   options={"maxiter": 500, "gtol": 1e-5})
    W = W0.copy()
    W[:, cols] += res.x.reshape(n_classes, len(cols))
    return W


def _scores(truth: np.ndarray, predicted: np.ndarray) -> tuple[float, float]:
    """Accuracy and balanced accuracy (mean recall over the labels present in ``truth``)."""
    accuracy = float(np.mean(truth == predicted))
    recalls = [np.mean(predicted[truth == v] == v) for v in np.unique(truth)]
    return accuracy, float(np.mean(recalls))


@dataclass
class _Start:
    """The model trained on the original data, and every part in its feature space."""

    lm: LinearModel
    features: dict  # part name -> feature matrix
    labels: dict  # part name -> labels
    W0: np.ndarray
    b0: np.ndarray
    scale: float  # mean squared norm of an original training feature row
    pool_codes: np.ndarray  # class index of every challenge_pool row
    balanced: bool  # score the challenge parts by balanced accuracy

    def scores(self, W: np.ndarray, b: np.ndarray, split: str) -> dict[str, float]:
        """Original accuracy and challenge scores on the ``"dev"`` or ``"test"`` parts."""
        def predict(part: str) -> np.ndarray:
            return self.lm.predict(self.features[part], W, b)

        original = float(np.mean(predict(f"original_{split}")
                                 == self.labels[f"original_{split}"]))
        accuracy, balanced = _scores(self.labels[f"challenge_{split}"],
                                     predict(f"challenge_{split}"))
        return {"original": original, "accuracy": accuracy, "balanced": balanced,
                "challenge": balanced if self.balanced else accuracy}


def fit_original(parts: dict, lm: LinearModel, *, balanced: bool) -> _Start:
    """Fit the features and the weights W0, b0 on ``original_fit``; transform every part."""
    lm.fit_features(parts["original_fit"][0])
    names = ("original_fit", "original_dev", "original_test", "challenge_pool",
             "challenge_dev", "challenge_test")
    features = {name: lm.transform(parts[name][0]) for name in names}
    labels = {name: parts[name][1] for name in names}
    F_tr = features["original_fit"]
    W0, b0 = lm.fit_weights(F_tr, labels["original_fit"])
    # anchor is relative to the mean squared norm of a feature row (about 1 for TF-IDF rows,
    # about d for standardised Φ), so one value means the same pull for every model
    sq = F_tr.multiply(F_tr).sum() if sp.issparse(F_tr) else np.square(F_tr).sum()
    code_of = {c: i for i, c in enumerate(lm.classes)}
    return _Start(lm=lm, features=features, labels=labels, W0=W0, b0=b0,
                  scale=max(float(sq) / F_tr.shape[0], 1e-12),
                  pool_codes=np.array([code_of[v] for v in labels["challenge_pool"]]),
                  balanced=balanced)


def _fit(start: _Start, idx: np.ndarray, mode: str, strength: float
         ) -> tuple[np.ndarray, np.ndarray]:
    """Weights after adding the pool rows ``idx`` with one strength."""
    if mode == "finetune":
        F_pool = start.features["challenge_pool"]
        W = _finetune(F_pool[idx], start.pool_codes[idx], start.W0, start.b0,
                      start.scale * strength)
        return W, start.b0
    F_tr, F_pool = start.features["original_fit"], start.features["challenge_pool"]
    y_tr, y_pool = start.labels["original_fit"], start.labels["challenge_pool"]
    stack = sp.vstack if sp.issparse(F_tr) else np.vstack
    weights = np.concatenate([np.ones(F_tr.shape[0]), np.full(len(idx), strength)])
    return start.lm.fit_weights(stack([F_tr, F_pool[idx]]),
                                np.concatenate([y_tr, y_pool[idx]]), weights)


def _choose(candidates: list[dict], tolerance: float | None, n_dev: tuple[int, int],
            conservative) -> int:
    """Index of the chosen candidate (see the module docstring).

    Candidates within ``tolerance`` of the best challenge-dev score are tied; of those, the
    ones within ``tolerance`` of the best original-dev accuracy among them are kept, and the
    best challenge-dev score among these wins (exact ties: the ``conservative`` strength, max
    or min). ``tolerance=None`` means one standard error of the best score in each step,
    ``sqrt(p * (1 - p) / n)`` with ``n_dev = (n_challenge_dev, n_original_dev)``.
    """
    def within(key: str, pool: list[int], n: int) -> list[int]:
        best = max(candidates[i][key] for i in pool)
        tol = tolerance if tolerance is not None else float(
            np.sqrt(best * (1.0 - best) / max(n, 1)))
        return [i for i in pool if candidates[i][key] >= best - tol - 1e-12]

    tied = within("dev_challenge", list(range(len(candidates))), n_dev[0])
    kept = within("dev_original", tied, n_dev[1])
    top = max(candidates[i]["dev_challenge"] for i in kept)
    best = [i for i in kept if candidates[i]["dev_challenge"] >= top - 1e-12]
    return conservative(best, key=lambda i: candidates[i]["strength"])


def compute_curves(start: _Start, sizes: list[int], *, mode: str, n_repeats: int,
            strengths: tuple[float, ...], tolerance: float | None, rng: np.random.Generator,
            emit
            ) -> tuple[pd.DataFrame, pd.DataFrame, list[np.ndarray]]:
    """Test scores after n challenge examples with the strength chosen on the dev parts, for
    every size and repeat (nested subsamples); the candidates' scores; the draw orders."""
    conservative = max if mode == "finetune" else min
    test0 = start.scores(start.W0, start.b0, "test")
    records, selection, orders = [], [], []
    steps = max(1, n_repeats * (len(sizes) - 1))
    done = 0

    def record(n: int, r: int, strength: float, s: dict) -> dict:
        return {"n": n, "repeat": r, "strength": strength, "accuracy_original": s["original"],
                "accuracy_challenge": s["accuracy"], "balanced_accuracy_challenge": s["balanced"],
                "score_challenge": s["challenge"]}

    for r in range(n_repeats):
        order = rng.permutation(len(start.pool_codes))
        orders.append(order)
        records.append(record(0, r, float("nan"), test0))
        for n in sizes[1:]:
            emit(done / steps, f"repeat {r + 1}: {n} challenge examples, "
                               f"{len(strengths)} strengths")
            candidates = []
            for strength in strengths:
                W, b = _fit(start, order[:n], mode, strength)
                dev, test = start.scores(W, b, "dev"), start.scores(W, b, "test")
                candidates.append({"n": n, "repeat": r, "strength": strength,
                                   "dev_original": dev["original"],
                                   "dev_challenge": dev["challenge"], "chosen": False,
                                   "test_original": test["original"],
                                   "test_challenge": test["challenge"], "_test": test})
            pick = _choose(candidates, tolerance, (len(start.labels["challenge_dev"]),
                                                   len(start.labels["original_dev"])),
                           conservative)
            candidates[pick]["chosen"] = True
            records.append(record(n, r, candidates[pick]["strength"], candidates[pick]["_test"]))
            selection.extend({k: v for k, v in c.items() if k != "_test"} for c in candidates)
            done += 1
    return pd.DataFrame.from_records(records), pd.DataFrame.from_records(selection), orders


def summarise(curves: pd.DataFrame, *, conservative=max) -> pd.DataFrame:
    """Mean and spread over the repeats, per size, the gap between the two curves and the
    strength chosen most often (ties to the ``conservative`` one)."""
    grouped = curves.groupby("n", sort=True)

    def modal(values: pd.Series) -> float:
        counts = Counter(v for v in values if not pd.isna(v))
        if not counts:
            return float("nan")
        top = max(counts.values())
        return float(conservative(v for v, c in counts.items() if c == top))

    summary = pd.DataFrame({
        "n": np.array(sorted(curves["n"].unique()), dtype=np.int64),
        "original_mean": grouped["accuracy_original"].mean().to_numpy(),
        "original_std": grouped["accuracy_original"].std(ddof=0).to_numpy(),
        "challenge_mean": grouped["score_challenge"].mean().to_numpy(),
        "challenge_std": grouped["score_challenge"].std(ddof=0).to_numpy(),
    })
    summary["gap"] = summary["original_mean"] - summary["challenge_mean"]
    summary["challenge_accuracy_mean"] = grouped["accuracy_challenge"].mean().to_numpy()
    summary["chosen_strength"] = grouped["strength"].agg(modal).to_numpy()
    return summary

