"""Baselines before vs after AFLite, with a random-subset control (Le Bras et al., Table 3).

Each baseline is k-fold cross-validated on three sets of rows:

* ``full``: every row given;
* ``retained``: the rows AFLite kept;
* ``random``: ``n_random_draws`` seeded random subsets of the full set with as many rows as
  ``retained`` (mean and standard deviation over the draws). By default (``control=
  "label_matched"``) each draw has the retained rows' label counts, so the control differs from
  the retained set in *which* rows it holds, not in size or label distribution: otherwise,
  when filtering shifts the labels (SICK), most of the "bias removed" is label shift.
  ``control="uniform"`` draws uniformly (the earlier behaviour).

A smaller set is harder to learn from whatever its content, so only the gap between ``random``
and ``retained`` measures the bias AFLite removed *beyond size*: ``bias_removed_beyond_size =
accuracy(random) - accuracy(retained)``, also given in percentage points with the spread over
draws. Majority-class accuracy (the most frequent label of each training fold, scored on its
test fold) and chance (1 / number of labels) are reported beside every accuracy; an accuracy
below the majority rate gets a warning naming the likely causes.

Baselines (all built by :func:`aflite_core.represent._text_models.text_model`, which documents
the tokeniser, vectoriser and classifier): ``hypothesis_only`` (partial input: the hypothesis
alone; Gururangan et al. 2018, Poliak et al. 2018), ``full_input`` (the premise-hypothesis pair,
when premises are given) and ``linear_probe`` (standardised Φ). Folds come from
:func:`aflite_core.splits.cv_folds`: stratified, and grouped when ``groups`` are given (rows of
one group, e.g. the pairs of one premise, never straddle a training and a test fold). Results
are plain dicts of JSON types (the run writer stores them as ``baselines.json``). See
``docs/measures.md``.

Cost. A text model is vectorised once for all its folds
(:mod:`aflite_core.represent._fold_fits`; each fold's classifier starts from zero). Above
:data:`MAX_ROWS` audited rows (option ``max_rows``) the measure runs on a seeded sample of that
many rows (whole groups): every result then carries ``sample`` (rows used, of how many, and the
binomial standard error of the retained accuracy in percentage points), shown beside the
figures, so a 550k-row audit is not silently slow. At 100k rows the sampling error of an
accuracy near 0.6 on 40k retained rows is about 0.25 pp, below the spread over random draws.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from aflite_core._validation import check_callback, check_choice, check_int
from aflite_core.chart_style import PALETTE, SET_COLORS, add_reference_lines, chart_text
from aflite_core.measures._baseline_figures import (  # noqa: F401 - re-exported: their home
    BASELINE_LABELS,
    BELOW_MAJORITY_MARGIN,
    HEADLINE_ORDER,
    SEES_FILTER_FEATURES,
    UNCERTAINTY_NOTE,
    VERDICTS,
    figure_verdict,
    format_figure,
    headline_figures,
    sampling_error_pp,
)
from aflite_core.measures.registry import Measure, MeasureContext, MeasureResult, Option
from aflite_core.progress_plan import along_points
from aflite_core.represent import (
    RowsOnWorkers,
    dask_folds,
    evaluator,
    is_partitioned,
    lost_on_cluster,
    map_folds,
    pair_texts,
    text_model,
)
from aflite_core.splits import cv_folds, group_codes, label_matched_subsets, sample_rows

SUBSETS = ("full", "retained", "random")

ProgressCallback = Callable[[dict], object]


def _check_common(labels, retained_mask, n_splits, n_random_draws, groups
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D; got shape {labels.shape}")
    mask = np.asarray(retained_mask)
    if mask.dtype != bool or mask.shape != labels.shape:
        raise ValueError(f"retained_mask must be a boolean array of shape {labels.shape} (one "
                         f"per row); got dtype {mask.dtype}, shape {mask.shape}")
    n_splits = check_int("n_splits", n_splits, minimum=2)
    check_int("n_random_draws", n_random_draws, minimum=1)
    n_kept = int(mask.sum())
    if n_kept < 2 * n_splits:
        raise ValueError(f"retained_mask keeps {n_kept} rows; need at least 2 x n_splits = "
                         f"{2 * n_splits} for {n_splits}-fold cross-validation")
    if n_kept == len(labels):
        raise ValueError("retained_mask keeps every row; nothing to compare against")
    if len(np.unique(labels)) < 2:
        raise ValueError("labels must hold at least two classes")
    return labels, mask, group_codes(groups, len(labels))


def cross_validated_accuracy(model, data, labels, *, n_splits: int = 5,
                             groups: Sequence | None = None,
                             random_state: int | None = 0) -> dict:
    """k-fold accuracy of ``model`` and of the majority class, fold by fold.

    Parameters
    ----------
    model : scikit-learn estimator (cloned per fold)
        A :func:`~aflite_core.represent._text_models.text_model` pipeline is vectorised once
        for all folds (:mod:`aflite_core.represent._fold_fits`).
    data : list of str or array of shape (n_rows, n_features)
    labels : array of shape (n_rows,)
    n_splits : int, default 5
        Stratified when every class has at least ``n_splits`` rows, plain k-fold otherwise.
    groups : sequence, optional
        Group per row; a group's rows are all in one test fold (see
        :func:`aflite_core.splits.cv_folds`).
    random_state : int or None, default 0
        Seeds the fold assignment.

    Returns
    -------
    dict with ``n_rows``, ``accuracy`` (mean over folds), ``accuracy_std`` (std over folds),
    ``fold_accuracies``, ``majority_accuracy`` (mean over folds).
    """
    y = np.asarray(labels)
    return _cv_accuracy(evaluator(model, data, y), np.arange(len(y)),
                        codes=group_codes(groups, len(y)), n_splits=n_splits,
                        random_state=random_state)


def _cv_accuracy(ev, rows: np.ndarray, *, codes: np.ndarray | None,
                 n_splits: int, random_state: int | None) -> dict:
    """:func:`cross_validated_accuracy` of the rows ``rows`` through a fold evaluator."""
    return _cv_accuracies(ev, [rows], codes=codes, n_splits=n_splits,
                          random_state=random_state)[0]


def _cv_accuracies(ev, row_sets: Sequence[np.ndarray], *,
                   codes: np.ndarray | None, n_splits: int, random_state: int | None,
                   on_set: Callable[[int], object] | None = None) -> list[dict]:
    """:func:`cross_validated_accuracy` of each set of rows (positions in the evaluator's
    labels), every fold of every set fitted side by side
    (:func:`~aflite_core.represent.map_folds`); ``on_set(i)`` once the folds of sets
    ``0..i`` are done."""
    # the evaluator's integer labels: np.unique of strings sorts strings, 80 ms a call at 100k
    # rows; the codes keep the labels' sorted order, so the same folds
    y, labels = ev.codes_, ev.classes_
    folds = []  # (set, train rows, test rows) in the order of the sets and their folds
    for s, rows in enumerate(row_sets):
        for train, test in cv_folds(y[rows], n_splits=n_splits,
                                    groups=None if codes is None else codes[rows],
                                    random_state=random_state):
            folds.append((s, rows[train], rows[test]))
    last_fold = {s: i for i, (s, _, _) in enumerate(folds)}

    def fit(fold: tuple, *rows_held: np.ndarray) -> np.ndarray:
        _, train, test = fold
        ytr = y[train]
        if len(np.unique(ytr)) < 2:
            return np.full(len(test), ytr[0])
        return np.searchsorted(labels, ev.fit_predict(train, test, *rows_held))

    def done(i: int, _pred) -> None:
        if on_set is not None and last_fold[folds[i][0]] == i:
            on_set(folds[i][0])

    # the probe's rows held on a cluster's worker: every fit is given them there
    resident = getattr(ev, "resident_", None)
    predictions = map_folds(fit, folds, on_done=done,
                            **({} if resident is None else {"resident": resident}))
    results = []
    for s, rows in enumerate(row_sets):
        accs, majority = [], []
        for (fold_set, train, test), pred in zip(folds, predictions, strict=True):
            if fold_set != s:
                continue
            ytr, yte = y[train], y[test]
            accs.append(float(np.mean(pred == yte)))
            values, counts = np.unique(ytr, return_counts=True)
            majority.append(float(np.mean(yte == values[np.argmax(counts)])))
        results.append({"n_rows": int(len(rows)), "accuracy": float(np.mean(accs)),
                        "accuracy_std": float(np.std(accs)), "fold_accuracies": accs,
                        "majority_accuracy": float(np.mean(majority))})
    return results


CONTROLS = ("label_matched", "uniform")


def compare_subsets(model, data, labels, retained_mask, *, n_splits: int = 5,
                    n_random_draws: int = 5, groups: Sequence | None = None,
                    random_state: int | None = 0, callback: ProgressCallback | None = None,
                    name: str = "model", control: str = "label_matched") -> dict:
    """Cross-validated accuracy on the full, retained and random same-size sets.

    Parameters
    ----------
    model : scikit-learn estimator
        Cloned for every fold.
    data : list of str or array of shape (n_rows, n_features)
    labels : array of shape (n_rows,)
    retained_mask : bool array of shape (n_rows,)
        True for the rows AFLite kept.
    n_splits : int, default 5
    n_random_draws : int, default 5
        Random subsets of size ``retained_mask.sum()`` drawn without replacement from all rows.
    groups : sequence, optional
        Group per row: every cross-validation (full, retained, random) keeps a group's rows
        in one test fold.
    random_state : int or None, default 0
        Seeds the folds and the random subsets.
    callback : callable, optional
        Called with ``{"stage": "baselines", "fraction": float, "message": str}``.
    name : str
        Name reported in the result.
    control : {"label_matched", "uniform"}, default "label_matched"
        How the random subsets are drawn (see the module docstring).

    Returns
    -------
    dict
        ``full`` and ``retained`` (see :func:`cross_validated_accuracy`), ``random`` (``n_rows``,
        ``n_draws``, ``accuracy`` = mean over draws, ``accuracy_std`` = std over draws,
        ``draw_accuracies``, ``majority_accuracy``), ``bias_removed_beyond_size`` (random minus
        retained), ``accuracy_drop`` (full minus retained), ``size_effect`` (full minus random)
        and the parameters.
    """
    labels, mask, codes = _check_common(labels, retained_mask, n_splits, n_random_draws,
                                        groups)
    check_choice("control", control, CONTROLS)
    callback = check_callback(callback)
    if len(data) != len(labels):
        raise ValueError(f"data must have one entry per label ({len(labels)}); got {len(data)}")
    n_splits, draws = int(n_splits), int(n_random_draws)
    total = 2 + draws

    def report(step: int, message: str) -> None:
        if callback is not None:
            callback({"stage": "baselines", "fraction": step / total,
                      "message": f"{name}: {message}"})

    ev = evaluator(model, data, labels)
    kept = np.flatnonzero(mask)
    if control == "label_matched":
        subsets = [np.flatnonzero(m) for m in label_matched_subsets(
            labels, mask, n_draws=draws, random_state=random_state)]
    else:
        rng = np.random.default_rng(random_state)
        subsets = [np.sort(rng.choice(len(labels), size=len(kept), replace=False))
                   for _ in range(draws)]
    steps = ["full set", "retained set",
             *(f"random subset {d + 1} of {draws}" for d in range(draws)), "done"]
    report(0, steps[0])
    full, retained, *drawn = _cv_accuracies(
        ev, [np.arange(len(labels)), kept, *subsets], codes=codes, n_splits=n_splits,
        random_state=random_state, on_set=lambda s: report(s + 1, steps[s + 1]))
    per_draw = [res["accuracy"] for res in drawn]
    majority = [res["majority_accuracy"] for res in drawn]
    random = {"n_rows": int(len(kept)), "n_draws": draws, "accuracy": float(np.mean(per_draw)),
              "accuracy_std": float(np.std(per_draw, ddof=1)) if draws > 1 else 0.0,
              "draw_accuracies": [float(a) for a in per_draw],
              "majority_accuracy": float(np.mean(majority))}
    chance = 1.0 / len(np.unique(labels))
    for part in (full, retained, random):
        part["chance"] = chance
    removed = random["accuracy"] - retained["accuracy"]
    return {
        "baseline": name,
        "n_splits": n_splits,
        "random_state": random_state,
        "grouped": codes is not None,
        "control": control,
        "full": full,
        "retained": retained,
        "random": random,
        "bias_removed_beyond_size": removed,
        "bias_removed_beyond_size_pp": 100 * removed,
        "bias_removed_std_pp": 100 * random["accuracy_std"],
        "accuracy_drop": full["accuracy"] - retained["accuracy"],
        "size_effect": full["accuracy"] - random["accuracy"],
        "warnings": below_majority_warnings(name, {"full": full, "retained": retained,
                                                   "random": random}, grouped=codes is not None),
    }


def subset_hardness(hypotheses: Sequence[str], labels, masks: dict[str, np.ndarray], *,
                    n_splits: int = 2, n_random_draws: int = 3, groups: Sequence | None = None,
                    random_state: int | None = 0) -> dict[str, dict]:
    """How much harder than random rows of its size each subset is for the hypothesis-only
    model: its cross-validated accuracy against label-matched random subsets of its size (the
    headline's protocol), as every bulk export that drops rows states it beside the retained
    set's. The subsets share the evaluator and their folds run side by side.

    Parameters
    ----------
    hypotheses : sequence of str
    labels : array of shape (n_rows,)
    masks : dict of str to bool array of shape (n_rows,)
        The subsets by name (``{"retained": ..., "retained_clean": ...}``).
    n_splits, n_random_draws, groups, random_state
        As :func:`compare_subsets` takes them.

    Returns
    -------
    dict
        Name -> ``n_rows``, ``accuracy``, ``random_accuracy``, ``random_std`` and
        ``beyond_random_pp`` (100 x (random - subset): positive when the subset is harder than
        random rows of its size and labels, negative when it is easier).
    """
    if not masks:
        return {}
    labels, _, codes = _check_common(labels, next(iter(masks.values())), n_splits,
                                     n_random_draws, groups)
    ev = evaluator(text_model("hypothesis_only", random_state=random_state),
                   pair_texts(None, hypotheses), labels)
    row_sets, spans = [], {}
    for name, mask in masks.items():
        mask = np.asarray(mask, dtype=bool)
        drawn = [np.flatnonzero(m) for m in label_matched_subsets(
            labels, mask, n_draws=n_random_draws, random_state=random_state)]
        spans[name] = (len(row_sets), len(drawn))
        row_sets += [np.flatnonzero(mask), *drawn]
    results = _cv_accuracies(ev, row_sets, codes=codes, n_splits=n_splits,
                             random_state=random_state)
    out = {}
    for name, (at, draws) in spans.items():
        own, per_draw = results[at], [r["accuracy"] for r in results[at + 1:at + 1 + draws]]
        random = float(np.mean(per_draw))
        out[name] = {"n_rows": int(own["n_rows"]), "accuracy": float(own["accuracy"]),
                     "random_accuracy": random,
                     "random_std": float(np.std(per_draw, ddof=1)) if draws > 1 else 0.0,
                     "beyond_random_pp": 100 * (random - float(own["accuracy"]))}
    return out


def below_majority_warnings(name: str, parts: dict[str, dict], *, grouped: bool) -> list[str]:
    """One sentence per subset whose accuracy is below its majority-class rate, with the
    likely causes: a cross-validation that splits groups, a tiny subset, or label shift."""
    out = []
    for subset, part in parts.items():
        acc, majority = part.get("accuracy"), part.get("majority_accuracy")
        if acc is None or majority is None or acc >= majority - BELOW_MAJORITY_MARGIN:
            continue
        causes = []
        if not grouped:
            causes.append("rows that belong together (one premise's hypotheses, one "
                          "question's choices) fall on both sides of a fold; load the data "
                          "with a group column")
        if part.get("n_rows", 0) < 200:
            causes.append(f"a tiny subset ({part.get('n_rows')} rows)")
        if subset != "full":
            causes.append("a label distribution unlike the full data's (label shift)")
        causes.append("no signal the model can use in this input")
        chance = part.get("chance")
        also = (f" and chance {chance:.3f}" if isinstance(chance, (int, float))
                and acc < chance - BELOW_MAJORITY_MARGIN else "")
        out.append(f"{name} on the {subset} rows: accuracy {acc:.3f} is below the majority-"
                   f"class rate {majority:.3f}{also}. Likely: " + "; or ".join(causes) + ".")
    return out


def hypothesis_only_baseline(hypotheses: Sequence[str], labels, retained_mask, *,
                             n_splits: int = 5, n_random_draws: int = 5,
                             groups: Sequence | None = None, random_state: int | None = 0,
                             C: float = 1.0, callback: ProgressCallback | None = None,
                             control: str = "label_matched") -> dict:
    """Partial-input baseline: the hypothesis alone, full vs retained vs random.

    The model is ``text_model("hypothesis_only")``. See :func:`compare_subsets` for the
    parameters and the result.
    """
    return compare_subsets(text_model("hypothesis_only", C=C, random_state=random_state),
                           pair_texts(None, hypotheses), labels, retained_mask,
                           n_splits=n_splits, n_random_draws=n_random_draws, groups=groups,
                           random_state=random_state, callback=callback,
                           name="hypothesis_only", control=control)


def full_input_baseline(hypotheses: Sequence[str], labels, retained_mask, *,
                        premises: Sequence[str], n_splits: int = 5, n_random_draws: int = 5,
                        groups: Sequence | None = None, random_state: int | None = 0,
                        C: float = 1.0, callback: ProgressCallback | None = None,
                        control: str = "label_matched") -> dict:
    """Full-input baseline: the premise-hypothesis pair, full vs retained vs random.

    The model is ``text_model("full_input")``. See :func:`compare_subsets` for the parameters
    and the result.
    """
    return compare_subsets(text_model("full_input", C=C, random_state=random_state),
                           pair_texts(premises, hypotheses), labels, retained_mask,
                           n_splits=n_splits, n_random_draws=n_random_draws, groups=groups,
                           random_state=random_state, callback=callback, name="full_input",
                           control=control)


def linear_probe_baseline(X, labels, retained_mask, *, n_splits: int = 5,
                          n_random_draws: int = 5, groups: Sequence | None = None,
                          random_state: int | None = 0, C: float = 1.0,
                          callback: ProgressCallback | None = None,
                          control: str = "label_matched") -> dict:
    """Linear probe on Φ (``text_model("probe")``), full vs retained vs random.

    ``X`` may be :class:`~aflite_core.represent.RowsOnWorkers` (Φ's rows
    stacked on a cluster's worker, inside ``on_dask``): the fold fits then run there, the same
    fits. See :func:`compare_subsets` for the other parameters and the result.
    """
    if isinstance(X, RowsOnWorkers):
        if not X.all_finite():
            raise ValueError("X must be finite; found NaN or infinite values")
    else:
        X = np.asarray(X)
        if X.ndim != 2 or not np.issubdtype(X.dtype, np.number):
            raise ValueError(f"X must be a 2-D numeric array; got shape {X.shape}, "
                             f"dtype {X.dtype}")
        if not np.isfinite(X).all():
            raise ValueError("X must be finite; found NaN or infinite values")
        X = np.ascontiguousarray(X, dtype=np.float32)
    return compare_subsets(text_model("probe", C=C, random_state=random_state),
                           X, labels, retained_mask,
                           n_splits=n_splits, n_random_draws=n_random_draws, groups=groups,
                           random_state=random_state, callback=callback, name="linear_probe",
                           control=control)


def baseline_records(results: Sequence[dict]) -> list[dict]:
    """Flatten baseline results to records: baseline, subset, n_rows, accuracy, spread."""
    records = []
    for res in results:
        for subset in SUBSETS:
            part = res[subset]
            records.append({"baseline": res["baseline"], "subset": subset,
                            "n_rows": part["n_rows"], "accuracy": part["accuracy"],
                            "accuracy_std": part["accuracy_std"],
                            "majority_accuracy": part["majority_accuracy"],
                            "chance": part.get("chance"),
                            "below_majority": bool(part["accuracy"] < part["majority_accuracy"]
                                                   - BELOW_MAJORITY_MARGIN)})
    return records


def run_baselines(labels, retained_mask, *, hypotheses: Sequence[str] | None = None,
                  premises: Sequence[str] | None = None, X=None, n_splits: int = 5,
                  n_random_draws: int = 5, groups: Sequence | None = None,
                  random_state: int | None = 0,
                  callback: ProgressCallback | None = None,
                  control: str = "label_matched") -> dict:
    """Every baseline whose input is given, in the ``baselines.json`` layout.

    Parameters
    ----------
    labels, retained_mask
        See :func:`compare_subsets`.
    hypotheses : sequence of str, optional
        Runs the hypothesis-only baseline.
    premises : sequence of str, optional
        With ``hypotheses``: also runs the full-input baseline.
    X : array of shape (n_rows, n_features), optional
        Runs the linear probe on Φ.
    n_splits, n_random_draws, groups, random_state, callback, control
        See :func:`compare_subsets`.

    Returns
    -------
    dict
        ``{"hypothesis_only": {...}, "full_input": {...}, "linear_probe": {...}, "results":
        [records]}`` (the baselines that ran) where the records come from
        :func:`baseline_records` (one per baseline and subset).
    """
    if hypotheses is None and X is None:
        raise ValueError("give hypotheses (hypothesis-only baseline), X (linear probe) or both")
    if premises is not None and hypotheses is None:
        raise ValueError("premises need hypotheses (the full-input baseline reads both)")
    callback = check_callback(callback)
    jobs: list[tuple[str, Callable[..., dict]]] = []
    if hypotheses is not None:
        jobs.append(("hypothesis_only",
                     lambda **kw: hypothesis_only_baseline(hypotheses, labels, retained_mask,
                                                           **kw)))
        if premises is not None:
            jobs.append(("full_input",
                         lambda **kw: full_input_baseline(hypotheses, labels, retained_mask,
                                                          premises=premises, **kw)))
    if X is not None:
        jobs.append(("linear_probe",
                     lambda **kw: linear_probe_baseline(X, labels, retained_mask, **kw)))
    out: dict = {}
    for i, (key, run) in enumerate(jobs):
        sub = None
        if callback is not None:
            def sub(info, i=i):
                return callback({**info, "fraction": (i + info["fraction"]) / len(jobs)})
        out[key] = run(n_splits=n_splits, n_random_draws=n_random_draws, groups=groups,
                       random_state=random_state, callback=sub, control=control)
    out["results"] = baseline_records([out[key] for key, _ in jobs])
    return out


# --- registry entry -------------------------------------------------------------------


#: Above this many audited rows the baselines run on a seeded sample of this many rows
#: (whole groups), with the sampling error reported (option ``max_rows``).
MAX_ROWS: int = 100_000
#: Seconds above :data:`MAX_ROWS` rows, where the baselines run on a sample of that many: at
#: the sizes measured on 2026-11-30's VM (``bench_cores.py --rows 300000``, ``bench_pipeline.py
#: --sizes 1000000`` and ``2000000``: 4.25, 4.85-5.44 and 13.39 s; the sampled rows' texts and
#: Φ rows are gathered from every row's). 9.1 s flat before (2026-11-26's 1M run): the ETA at
#: 300k rows was 1.50-1.53x.
SAMPLED_SECONDS = ((100_000, 5.5), (300_000, 4.3), (1_000_000, 5.2), (2_000_000, 13.4))
#: Seconds up to :data:`MAX_ROWS` rows (besides the stage's fixed 0.1 s), at the sizes
#: measured on 2026-11-30's VM (``bench_pipeline.py --sizes 10000,20000,50000``: 0.45-0.46,
#: 0.99-1.06, 3.18 s; 5.87 s at 100k). The rate of 2026-11-26 (7.7 s per 100k at 10k rows,
#: 5.5 at 100k) planned 1.59 s at 20k: with the label issues' and PVI's, the ETA at 20k rows
#: was 1.65-1.73x in AFLite.
SECONDS = ((10_000, 0.36), (20_000, 0.92), (50_000, 3.08), (100_000, 5.5))


def _sampling_note(result: dict, n_total: int, rows: np.ndarray) -> None:
    """Record the sample on every baseline: rows used, of how many, and the binomial standard
    error of an accuracy on the sampled retained rows, in percentage points."""
    for block in result.values():
        if not isinstance(block, dict) or "retained" not in block:
            continue
        acc, n_kept = block["retained"]["accuracy"], block["retained"]["n_rows"]
        block["sample"] = {"n_rows_total": int(n_total), "n_rows_sampled": int(len(rows)),
                           "sampled": bool(len(rows) < n_total),
                           "sampling_se_pp": float(100 * np.sqrt(acc * (1 - acc)
                                                                 / max(n_kept, 1)))}


def _baselines(ctx: MeasureContext) -> MeasureResult:
    hypotheses = ctx.hypothesis_texts()  # the sample's are taken; no list of every row's
    params = {"random_state": ctx.random_state,
              **MEASURE.check_params(ctx.params, n_rows=len(ctx.y))}
    n_seeds = int(params.pop("aflite_seeds"))
    max_rows = int(params.pop("max_rows"))
    rows = sample_rows(len(ctx.y), max_rows, groups=ctx.groups,
                       random_state=ctx.random_state)
    if len(rows) < len(ctx.y):
        ctx.progress(0.0, f"baselines on a seeded sample of {len(rows):,} of {len(ctx.y):,} "
                          "rows")
    data = {"y": ctx.y[rows], "hypotheses": hypotheses.take(rows),
            "X": _probe_rows(ctx, rows, n_seeds),
            "groups": None if ctx.groups is None else np.asarray(ctx.groups)[rows]}
    held = data["X"] if isinstance(data["X"], RowsOnWorkers) else None
    try:
        while True:
            try:
                result = run_baselines(
                    data["y"], ctx.keep[rows], hypotheses=data["hypotheses"], X=data["X"],
                    groups=data["groups"], callback=ctx.callback(), **params)
                break
            except Exception as exc:
                if held is None or data["X"] is not held or not lost_on_cluster(exc):
                    raise
                # the worker holding the sample left (Dask cannot compute it again from
                # partitions it took with it): the same fits on the sample fetched here
                ctx.progress(0.0, "a worker holding Φ's sample left the cluster: the "
                                  "baselines again, on the sample fetched to this process")
                data["X"] = ctx.X[rows]
    finally:
        if held is not None:
            held.release()
    _sampling_note(result, len(ctx.y), rows)
    if n_seeds > 1 and ctx.refit is not None:
        ctx.progress(0.95, f"AFLite with {n_seeds - 1} more seeds")
        seeds_spread(result, ctx, n_seeds, data, rows, params)
    return MeasureResult(documents={"baselines.json": result},
                         info={"params": {**params, "aflite_seeds": n_seeds,
                                          "max_rows": max_rows,
                                          "n_rows_sampled": int(len(rows))}})


def _probe_rows(ctx: MeasureContext, rows: np.ndarray, n_seeds: int):
    """Φ's sampled rows for the linear probe: stacked on a worker when Φ's partitions are on
    the cluster the folds run on (one seed: more seeds refit AFLite on the rows here), else
    fetched (None without Φ)."""
    if ctx.X is None:
        return None
    if (is_partitioned(ctx.X) and n_seeds <= 1 and dask_folds() is not None
            and getattr(ctx.X.runner, "client", None) is dask_folds().client):
        return ctx.X.on_workers(rows)
    return ctx.X[rows]


def seeds_spread(result: dict, ctx: MeasureContext, n_seeds: int, data: dict,
                 rows: np.ndarray, params: dict) -> None:
    """Add ``seeds`` to each baseline of ``result``: retained accuracy and bias removed
    beyond size when AFLite runs with ``n_seeds`` seeds (this run's and the next ones),
    each against this run's random control; mean and std over seeds, in percentage points.
    ``data`` holds the (sampled) labels, hypotheses, Φ and groups; ``rows`` the sample.
    """
    seeds = [ctx.random_state + s for s in range(n_seeds)]
    masks = [ctx.keep[rows]] + [ctx.refit(seed)[rows] for seed in seeds[1:]]
    per_seed: dict[str, list[float]] = {}
    for mask in masks[1:]:
        again = run_baselines(data["y"], mask, hypotheses=data["hypotheses"], X=data["X"],
                              groups=data["groups"], **{**params, "n_random_draws": 1})
        for name in ("hypothesis_only", "full_input", "linear_probe"):
            if name in again:
                per_seed.setdefault(name, []).append(again[name]["retained"]["accuracy"])
    for name, accuracies in per_seed.items():
        block = result[name]
        retained = [block["retained"]["accuracy"], *accuracies]
        removed = [100 * (block["random"]["accuracy"] - a) for a in retained]
        block["seeds"] = {"random_states": seeds, "retained_accuracy": retained,
                          "bias_removed_pp": removed,
                          "bias_removed_mean_pp": float(np.mean(removed)),
                          "bias_removed_std_pp": float(np.std(removed, ddof=1))}


_BASELINE_SUMMARY = ("bias_removed_beyond_size", "accuracy_drop", "size_effect")


def _baseline_tables(run) -> dict[str, pd.DataFrame]:
    data = run.read_json("baselines.json")
    if not isinstance(data, dict) or "results" not in data:
        return {}
    out = {"Cross-validated accuracy by subset (majority-class rate and chance beside)":
           pd.DataFrame(data.get("results") or [])}
    summary = []
    for figure in headline_figures(data):
        name = figure["baseline"]
        block = data[name]
        seeds = block.get("seeds") or {}
        sample = block.get("sample") or {}
        summary.append({"baseline": name, "model": figure["label"],
                        "features AFLite filtered on": figure["sees_filter_features"],
                        "bias removed beyond size (pp)": figure["value_pp"],
                        "verdict": figure["verdict"],
                        "caveat": " ".join(figure["caveats"]),
                        "spread over draws (pp)": block.get("bias_removed_std_pp"),
                        "rows used": sample.get("n_rows_sampled"),
                        "of rows": sample.get("n_rows_total"),
                        "sampling s.e. (pp)": sample.get("sampling_se_pp"),
                        "AFLite seeds": len(seeds.get("random_states") or [1]),
                        "mean over seeds (pp)": seeds.get("bias_removed_mean_pp"),
                        "spread over seeds (pp)": seeds.get("bias_removed_std_pp"),
                        "control": block.get("control", "uniform"),
                        "grouped folds": block.get("grouped", False),
                        **{k: block.get(k) for k in _BASELINE_SUMMARY}})
    if summary:
        out["Bias removed beyond size"] = pd.DataFrame(summary)
    warnings = [w for block in data.values() if isinstance(block, dict)
                for w in block.get("warnings") or []]
    if warnings:
        out["Warnings"] = pd.DataFrame({"warning": warnings})
    return out


def _baseline_figures(run) -> list:
    """Accuracy per baseline and subset (full, retained, random control) with the full
    data's majority-class rate and chance as labelled reference lines."""
    import plotly.graph_objects as go  # lazy: +16 ms to import

    tables = _baseline_tables(run)
    records = next(iter(tables.values()), None) if tables else None
    if records is None or records.empty:
        return []
    value = next((c for c in ("accuracy", "score", "mean") if c in records.columns), None)
    group = next((c for c in ("subset", "scope", "data") if c in records.columns), None)
    name = next((c for c in ("baseline", "model", "probe", "name") if c in records.columns),
                None)
    if value is None or group is None or name is None:
        return []
    chart = go.Figure()
    for i, (subset, part) in enumerate(records.groupby(group, sort=False)):
        colour = SET_COLORS.get(str(subset), PALETTE[i % len(PALETTE)])
        error = ({"type": "data", "array": part["accuracy_std"].fillna(0).tolist()}
                 if "accuracy_std" in part else None)
        chart.add_trace(go.Bar(name=chart_text(subset),
                               x=[chart_text(BASELINE_LABELS.get(v, v)) for v in part[name]],
                               y=part[value], marker_color=colour, error_y=error))
    chart.update_layout(barmode="group", title=f"Baselines: {chart_text(value)} by subset",
                        yaxis_title=chart_text(value), yaxis_tickformat=".0%")
    full = records[records[group] == "full"]
    references = {label: float(full[column].iloc[0]) for column, label in
                  (("majority_accuracy", "majority class"), ("chance", "chance"))
                  if column in full and len(full) and pd.notna(full[column].iloc[0])}
    add_reference_lines(chart, references, percent=True)
    return [chart]


MEASURE = Measure(
    name="baselines",
    label="Baselines vs random control",
    compute=_baselines,
    files=("baselines.json",),
    order=40,
    # seconds per 100k rows: SECONDS up to MAX_ROWS, above it samples (SAMPLED_SECONDS)
    cost=lambda n: along_points(SECONDS if n <= MAX_ROWS else SAMPLED_SECONDS,
                                n) * 100_000 / max(n, 1),
    tables=_baseline_tables,
    figures=_baseline_figures,
    options=(
        Option(
            "n_random_draws",
            "Random-subset draws",
            3,
            minimum=1,
            maximum=20,
            help="Random subsets of the retained size: the control.",
        ),
        Option(
            "n_splits",
            "Cross-validation folds",
            2,
            minimum=2,
            maximum=10,
            help="k-fold cross-validated accuracy of each baseline. 2 folds (each model "
                 "trains on half of its set; every row is scored once) cost half of 3 folds; "
                 "the accuracies are 1-2 points lower with less training data, for full, "
                 "retained and random alike, so 'bias removed beyond size' (their "
                 "difference) stays within its spread over draws.",
        ),
        Option(
            "max_rows",
            "Baselines: rows used at most",
            MAX_ROWS,
            minimum=1_000,
            maximum=10_000_000,
            help="Above this many rows the baselines run on a seeded sample of this many "
                 "(whole groups); the table reports the rows used and the sampling error.",
        ),
        Option(
            "aflite_seeds",
            "AFLite seeds (spread)",
            1,
            minimum=1,
            maximum=10,
            help="Rerun AFLite with this many seeds and report the spread of the retained "
                 "accuracy over them (1 = this run's seed only; each seed costs one AFLite "
                 "run and one set of baselines).",
        ),
        Option(
            "control",
            "Random control",
            "label_matched",
            choices=CONTROLS,
            help="label_matched: random subsets with the retained rows' label counts, so "
                 "'bias removed beyond size' is not label shift; uniform: any rows.",
        ),
    ),
)
