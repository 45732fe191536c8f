"""Out-of-distribution evaluation: does a model trained on the retained rows generalise better?

The adversarial-filtering papers' main utility claim (Le Bras et al. 2020, section 5;
Zellers et al. 2018) is that a model trained on the filtered data does better on challenge
sets (stress tests, counterfactual or adversarial data) than one trained on the same amount
of unfiltered data. This measure checks it on the user's own challenge files:

1. train the chosen text model (:func:`aflite_core.represent._text_models.text_model`) on the
   retained rows;
2. train it on ``n_draws`` random subsets of the filterable rows with the *same size and the
   same label counts* as the retained rows (:func:`aflite_core.splits.label_matched_subsets`),
   so a difference comes from which rows were kept, not from how many or from a label shift;
3. score every model on every challenge set: accuracy, and balanced accuracy (the mean of the
   per-label recalls), which is the headline when the challenge set is skewed (its majority
   label holds at least :data:`SKEWED_FACTOR` times the uniform share 1/k: 0.5 for three
   labels, 0.75 for two; Breaking NLI is 87 % one label, where a constant guess has 0.87
   accuracy but 1/k balanced accuracy). Every row also carries the majority rate and chance,
   and ``below_majority`` flags a retained-model accuracy under the majority rate.

Labels are compared as trimmed, lower-cased text (``ENTAILMENT`` = ``entailment``).
``label_map`` maps training labels to the challenge set's (e.g. ``{"neutral":
"non-entailment", "contradiction": "non-entailment"}`` for a 2-way set such as HANS); it is
applied to the models' predictions. Challenge rows whose label the mapped training labels do
not contain are left out and counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from aflite_core._validation import check_choice
from aflite_core.measures.registry import Measure, MeasureContext, MeasureResult, Option
from aflite_core.represent import pair_texts
from aflite_core.splits import label_matched_subsets

#: The run-folder file.
FILE = "ood.json"
#: A challenge set is skewed when its majority label holds at least this many times the
#: uniform share 1/k of its rows.
SKEWED_FACTOR = 1.5
#: Models OOD evaluation can train (see :func:`aflite_core.represent._text_models.text_model`).
MODELS = ("full_input", "hypothesis_only")


@dataclass
class Challenge:
    """One challenge set: model input texts (``pair_texts``) and gold labels."""

    name: str
    texts: list[str]
    labels: np.ndarray


@dataclass
class OODResult:
    """Per-model scores and the per-challenge summary.

    Attributes
    ----------
    scores : DataFrame
        ``challenge, subset (retained | random), draw, accuracy, balanced_accuracy``.
    summary : DataFrame
        One row per challenge set: ``challenge, n, n_left_out, labels, majority_rate,
        chance, skewed, metric`` (the headline: ``balanced_accuracy`` when skewed, else
        ``accuracy``), ``retained``, ``random_mean``, ``random_std``, ``difference``
        (retained - random mean, in the headline metric), ``n_draws`` and
        ``below_majority``.
    params : dict
    """

    scores: pd.DataFrame
    summary: pd.DataFrame
    params: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-ready form (``ood.json``)."""
        return {"params": self.params, "scores": self.scores.to_dict("records"),
                "summary": self.summary.to_dict("records")}


def normalise_labels(labels: Sequence[Any]) -> np.ndarray:
    """Labels as trimmed, lower-cased text."""
    return np.asarray([str(v).strip().lower() for v in labels], dtype=object)


def _scores(truth: np.ndarray, predicted: np.ndarray) -> tuple[float, float]:
    accuracy = float(np.mean(truth == predicted)) if len(truth) else float("nan")
    recalls = [np.mean(predicted[truth == v] == v) for v in np.unique(truth)]
    return accuracy, float(np.mean(recalls)) if recalls else float("nan")


def evaluate_ood(texts: Sequence[str], labels: Sequence[Any], keep: np.ndarray,
                 challenges: Sequence[Challenge], *, model: str = "full_input",
                 n_draws: int = 5, label_map: Mapping[str, str] | None = None,
                 random_state: int | None = 0,
                 callback: Callable[[dict], Any] | None = None) -> OODResult:
    """Retained vs label-matched random training subsets, scored on each challenge set.

    Parameters
    ----------
    texts : sequence of str
        Model input texts of the filterable rows (:func:`~aflite_core.represent._text_models.
        pair_texts`).
    labels : sequence
        Their labels.
    keep : ndarray of bool
        The rows AFLite retained.
    challenges : sequence of Challenge
        The challenge sets.
    model : {"full_input", "hypothesis_only"}
        The text model trained on each subset.
    n_draws : int
        Random subsets (the control's spread).
    label_map : mapping, optional
        Training label -> challenge label, applied to predictions (see the module docstring).
    random_state : int or None
    callback : callable, optional
        ``callback({"fraction": ..., "message": ...})`` after each model.

    Returns
    -------
    OODResult

    Raises
    ------
    ValueError
        For no challenge sets, or a challenge set none of whose labels a model can predict.
    """
    from aflite_core.represent import single_blas_thread, text_model  # lazy: +1202 ms to import

    check_choice("model", model, MODELS)
    if not challenges:
        raise ValueError("challenges: expected at least one challenge set, got none")
    y = normalise_labels(labels)
    keep = np.asarray(keep, dtype=bool)
    mapping = {str(k).strip().lower(): str(v).strip().lower()
               for k, v in (label_map or {}).items()}
    predictable = {mapping.get(v, v) for v in np.unique(y)}
    prepared = [_prepare(ch, predictable) for ch in challenges]
    subsets = [("retained", 0, keep)] + [
        ("random", i + 1, mask) for i, mask in enumerate(
            label_matched_subsets(y, keep, n_draws=n_draws, random_state=random_state))]
    rows = []
    texts = np.asarray(list(texts), dtype=object)
    for step, (subset, draw, mask) in enumerate(subsets):
        fitted = text_model(model, random_state=random_state)
        with single_blas_thread():
            fitted.fit(list(texts[mask]), y[mask])
        for challenge, truth, _left_out in prepared:
            predicted = fitted.predict(challenge.texts)
            predicted = np.asarray([mapping.get(p, p) for p in predicted], dtype=object)
            accuracy, balanced = _scores(truth, predicted)
            rows.append({"challenge": challenge.name, "subset": subset, "draw": draw,
                         "accuracy": accuracy, "balanced_accuracy": balanced})
        if callback is not None:
            callback({"fraction": (step + 1) / len(subsets),
                      "message": f"trained on the {subset} rows"
                                 + (f" (draw {draw})" if draw else "")})
    scores = pd.DataFrame(rows)
    summary = pd.DataFrame([_summary_row(scores, challenge, truth, left_out, len(predictable))
                            for challenge, truth, left_out in prepared])
    params = {"model": model, "n_draws": n_draws, "label_map": mapping,
              "random_state": random_state, "n_train": int(keep.sum())}
    return OODResult(scores=scores, summary=summary, params=params)


def _prepare(challenge: Challenge, predictable: set[str]) -> tuple[Challenge, np.ndarray, int]:
    truth = normalise_labels(challenge.labels)
    usable = np.isin(truth, list(predictable))
    if not usable.any():
        raise ValueError(
            f"challenge {challenge.name!r}: none of its labels {sorted(set(truth))[:6]} is a "
            f"label the models predict {sorted(predictable)}; pass a label map "
            "(e.g. --map-labels neutral=non-entailment,contradiction=non-entailment)")
    kept = Challenge(challenge.name, [t for t, u in zip(challenge.texts, usable, strict=True)
                                      if u], truth[usable])
    return kept, truth[usable], int((~usable).sum())


def _summary_row(scores: pd.DataFrame, challenge: Challenge, truth: np.ndarray,
                 left_out: int, n_classes: int) -> dict:
    values, counts = np.unique(truth, return_counts=True)
    majority = float(counts.max() / counts.sum())
    skewed = majority >= SKEWED_FACTOR / max(len(values), 1) and len(values) > 1
    metric = "balanced_accuracy" if skewed else "accuracy"
    mine = scores[scores["challenge"] == challenge.name]
    retained = float(mine.loc[mine["subset"] == "retained", metric].iloc[0])
    random = mine.loc[mine["subset"] == "random", metric].to_numpy(dtype=float)
    return {
        "challenge": challenge.name, "n": int(len(truth)), "n_left_out": left_out,
        "labels": {str(v): int(c) for v, c in zip(values, counts, strict=True)},
        "majority_rate": majority, "chance": 1.0 / max(len(values), 1),
        "skewed": bool(skewed), "metric": metric, "retained": retained,
        "random_mean": float(random.mean()),
        "random_std": float(random.std(ddof=1)) if len(random) > 1 else 0.0,
        "difference": retained - float(random.mean()), "n_draws": int(len(random)),
        "below_majority": bool(metric == "accuracy" and retained < majority),
    }


def dataset_challenge(dataset: Any, name: str | None = None) -> Challenge:
    """A loaded :class:`~aflite_core.io.datasets.AuditDataset` as a challenge set."""
    return Challenge(name or str(dataset.name),
                     pair_texts(dataset.premises(), dataset.hypotheses()),
                     np.asarray(dataset.labels(), dtype=object))


# --- registry entry -------------------------------------------------------------------


def _compute(ctx: MeasureContext) -> MeasureResult:
    from aflite_core.io import load_dataset  # lazy: +174 ms to import

    params = MEASURE.check_params(ctx.params, n_rows=len(ctx.y))
    paths = params.pop("challenges") or ()
    if not paths:
        raise ValueError("no challenge files: pass --challenge FILE to `run`, or use "
                         "`python -m aflite_core ood RUN FILE...` on a finished run")
    ctx.progress(0.0, "reading the challenge sets")
    challenges = [dataset_challenge(load_dataset(p)) for p in paths]
    hyps, prems = ctx.texts()
    result = evaluate_ood(pair_texts(prems, hyps), ctx.y, ctx.keep, challenges,
                          random_state=ctx.random_state, callback=ctx.callback(), **params)
    return MeasureResult(documents={FILE: result.to_dict()},
                         info={"params": result.params})


def tables(run: Any) -> dict[str, pd.DataFrame]:
    """``{"Accuracy on the challenge sets": ...}`` from ``ood.json``."""
    data = run.read_json(FILE)
    if not data or not data.get("summary"):
        return {}
    summary = pd.DataFrame(data["summary"]).drop(columns=["labels"], errors="ignore")
    return {"Challenge sets: model trained on the retained rows vs label-matched random "
            "subsets of the same size": summary}


MEASURE = Measure(
    name="ood",
    label="Out-of-distribution accuracy (challenge sets)",
    description="A model trained on the retained rows vs on random subsets of the same size "
                "and label counts, scored on the challenge files you give (balanced accuracy "
                "when a challenge set is skewed). Needs --challenge FILE or the `ood` "
                "command.",
    compute=_compute,
    files=(FILE,),
    tables=tables,
    default=False,
    order=55,
    cost=15.0,  # seconds per 100k rows, rough: a model per challenge set
    inputs=("challenges",),
    options=(
        Option("challenges", "OOD: challenge files", None, kind="strs", optional=True,
               form=False, cli_syntax="--challenge FILE",
               help="The challenge sets' files (`run --challenge FILE`, one "
                                "flag per file)."),
        Option("model", "OOD: model", "full_input", choices=MODELS,
               help="The text model trained on the retained rows and on each random "
                    "subset: the whole input, or the hypothesis alone."),
        Option("n_draws", "OOD: random subsets", 5, minimum=1, maximum=50,
               help="Random subsets of the retained rows' size and label counts: the "
                    "control's spread."),
    ),
)
