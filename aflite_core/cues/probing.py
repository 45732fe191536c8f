"""Model probing: does a model exploit the cues of :mod:`aflite_core.cues.statistics`?

Two black-box tests of ICQ (Huang & Zhu, Findings of EMNLP 2023), given a model's
predictions on the test rows:

* **accuracy test**: ``delta = acc(S_f) - acc(S_not_f)`` for every qualifying feature
  (vectorised: one sparse product counts the correct predictions per feature);
* **distribution test**: flatten ``S_f`` (replicate, seeded, the examples of every label
  but the most frequent until the labels are balanced), then compare the model's predicted
  label distribution on the flattened set with the label distribution of ``R_f``; both
  distributions and their JSD come back in long form, ready for a grouped bar chart.

When the user has no model, two built-in baselines act as models
(:func:`baseline_predictions`): the hypothesis-only and the full-input model of
:func:`aflite_core.represent._text_models.text_model`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from aflite_core._validation import check_choice
from aflite_core.cues.linguistic import FeatureMatrix, extract_features
from aflite_core.cues.statistics import cue_statistics, dataset_inputs, jensen_shannon
from aflite_core.represent import pair_texts, text_model
from aflite_core.splits import Split

#: Built-in baseline "models".
BASELINES = ("hypothesis_only", "full_input")
_BASELINE_NAMES = {
    "hypothesis_only": "built-in hypothesis-only TF-IDF logistic regression",
    "full_input": "built-in full-input (TF-IDF + premise overlap) logistic regression",
}


@dataclass
class ProbeResult:
    """Outcome of :func:`probe_model`.

    Attributes
    ----------
    accuracy : pandas.DataFrame
        One row per qualifying feature, in cue-table order: ``feature_type, feature,
        n_train, n_test, majority_label, cueness, n_with, acc_with, n_without,
        acc_without, delta, distribution_jsd`` (NaN where the distribution test was not
        run).
    distribution : pandas.DataFrame
        Long form, one row per (feature, label): ``feature_type, feature, label,
        train_share, predicted_share, jsd, n_flattened``.
    model : str
        What made the predictions.
    split : str
        Where the test rows came from.
    overall_accuracy : float
        Accuracy on all test rows.
    labels : list of str
    """

    accuracy: pd.DataFrame
    distribution: pd.DataFrame
    model: str
    split: str
    overall_accuracy: float
    labels: list[str]


# --------------------------------------------------------------------------------------
# the two tests on plain arrays
# --------------------------------------------------------------------------------------


def accuracy_test(X_test: sp.spmatrix, correct: np.ndarray) -> pd.DataFrame:
    """Accuracy with and without each feature on the test rows.

    Parameters
    ----------
    X_test : sparse matrix, shape (n_test, n_features)
        0/1 indicators of the test rows.
    correct : np.ndarray of bool, shape (n_test,)
        Whether the model's prediction is right.

    Returns
    -------
    pandas.DataFrame
        ``n_with, acc_with, n_without, acc_without, delta`` per feature (NaN accuracy for
        an empty side); ``delta`` is ``FORMULAS['accuracy_delta']``.
    """
    correct = np.asarray(correct, dtype=np.int64)
    if X_test.shape[0] != correct.shape[0]:
        raise ValueError(
            f"correct: expected {X_test.shape[0]} entries (one per test row), got "
            f"{correct.shape[0]}"
        )
    X = sp.csr_matrix(X_test, dtype=np.int64)
    n_with = np.asarray(X.sum(axis=0)).ravel()
    right_with = X.T @ correct
    n_without = correct.size - n_with
    right_without = correct.sum() - right_with
    with np.errstate(divide="ignore", invalid="ignore"):
        acc_with = np.where(n_with > 0, right_with / n_with, np.nan)
        acc_without = np.where(n_without > 0, right_without / n_without, np.nan)
    return pd.DataFrame({
        "n_with": n_with, "acc_with": acc_with, "n_without": n_without,
        "acc_without": acc_without, "delta": acc_with - acc_without,
    })


def flatten_indices(label_codes: np.ndarray, *, random_state: int | None = 0) -> np.ndarray:
    """Positions of a label-balanced copy of a set of examples.

    Every label present but the most frequent is replicated up to the most frequent
    label's count: whole copies first, then a seeded sample without replacement for the
    remainder. Labels absent from the set stay absent.
    """
    codes = np.asarray(label_codes)
    if codes.size == 0:
        return np.empty(0, dtype=np.int64)
    rng = np.random.default_rng(random_state)
    present, counts = np.unique(codes, return_counts=True)
    target = counts.max()
    parts = []
    for code, count in zip(present, counts, strict=True):
        members = np.flatnonzero(codes == code)
        copies, remainder = divmod(int(target), int(count))
        parts.append(np.tile(members, copies))
        if remainder:
            parts.append(np.sort(rng.choice(members, size=remainder, replace=False)))
    return np.concatenate(parts)


def distribution_test(
    true_codes: np.ndarray, pred_codes: np.ndarray, train_codes: np.ndarray, n_labels: int,
    *, random_state: int | None = 0,
) -> tuple[np.ndarray, np.ndarray, float, int]:
    """ICQ's distribution test for one feature.

    Parameters
    ----------
    true_codes, pred_codes : np.ndarray of int
        Gold and predicted label codes of the test rows with the feature (``S_f``).
    train_codes : np.ndarray of int
        Gold label codes of the training rows with the feature (``R_f``).
    n_labels : int

    Returns
    -------
    train_share, predicted_share : np.ndarray, shape (n_labels,)
        Label distribution of ``R_f``; the model's predicted label distribution on the
        flattened ``S_f``.
    jsd : float
        Their Jensen-Shannon divergence (natural log).
    n_flattened : int
        Size of the flattened set.
    """
    flat = flatten_indices(true_codes, random_state=random_state)
    predicted = np.bincount(np.asarray(pred_codes)[flat], minlength=n_labels).astype(float)
    train = np.bincount(np.asarray(train_codes), minlength=n_labels).astype(float)
    predicted_share = predicted / max(predicted.sum(), 1.0)
    train_share = train / max(train.sum(), 1.0)
    jsd = float(jensen_shannon(train_share[None, :], predicted_share[None, :])[0])
    return train_share, predicted_share, jsd, int(flat.size)


# --------------------------------------------------------------------------------------
# built-in baselines
# --------------------------------------------------------------------------------------


def baseline_predictions(
    hypotheses: Sequence[str],
    labels: Sequence,
    train_mask: np.ndarray,
    *,
    premises: Sequence[str] | None = None,
    kind: str = "hypothesis_only",
    random_state: int | None = 0,
) -> np.ndarray:
    """Fit a built-in baseline on the training rows and predict every row.

    Parameters
    ----------
    hypotheses : sequence of str
    labels : sequence
        Gold labels (only the training rows are used).
    train_mask : np.ndarray of bool
        Rows to fit on.
    premises : sequence of str, optional
        Needed for ``kind='full_input'``.
    kind : {'hypothesis_only', 'full_input'}
        ``text_model(kind)`` (see :mod:`aflite_core.represent._text_models`):
        ``hypothesis_only`` reads TF-IDF of hypothesis word uni- and bigrams (the tokens of
        the cue features); ``full_input`` adds what the pair says (the hypothesis words the
        premise shares, and overlap statistics).
    random_state : int, optional

    Returns
    -------
    np.ndarray
        Predicted label of every row (training rows included; use the test rows).
    """
    check_choice("kind", kind, BASELINES)
    if kind == "full_input" and premises is None:
        raise ValueError("kind='full_input' needs premises, but none were given")
    train_mask = np.asarray(train_mask, dtype=bool)
    y = np.asarray(labels, dtype=object)
    if len(np.unique(y[train_mask])) < 2:
        raise ValueError("labels: the training rows need at least two different labels")
    from aflite_core.represent import single_blas_thread  # scikit-learn, on use

    texts = pair_texts(premises if kind == "full_input" else None, hypotheses)
    model = text_model(kind, random_state=random_state)
    with single_blas_thread():
        model.fit([t for t, keep in zip(texts, train_mask, strict=True) if keep],
                  y[train_mask])
    return model.predict(texts)


# --------------------------------------------------------------------------------------
# probing
# --------------------------------------------------------------------------------------


def probe_predictions(
    features: FeatureMatrix,
    labels: Sequence,
    predictions: Sequence,
    split: Split,
    *,
    min_count: int = 5,
    n_distribution: int = 20,
    random_state: int | None = 0,
    model: str = "predictions",
    label_order: Sequence | None = None,
) -> ProbeResult:
    """Accuracy and distribution tests on precomputed features (core of :func:`probe_model`).

    Parameters
    ----------
    features : FeatureMatrix
        One row per example (train and test).
    labels : sequence
        Gold labels, one per example.
    predictions : sequence
        The model's label per example; only test rows are read (others may be anything).
    split : Split
    min_count : int
        Qualifying features as in the cue table (support in train and in test).
    n_distribution : int
        Run the distribution test on the top features by cueness (0: none).
    model : str
        Name of the model, for display.
    """
    y = np.asarray(labels, dtype=object).astype(str)
    pred = np.asarray(predictions, dtype=object)
    if len(pred) != len(y):
        raise ValueError(
            f"predictions: expected {len(y)} entries (one per example), got {len(pred)}"
        )
    pred = pred.astype(str)
    if n_distribution < 0:
        raise ValueError(f"n_distribution: expected an integer >= 0, got {n_distribution!r}")
    order = [str(lab) for lab in label_order] if label_order is not None else \
        sorted(pd.unique(y))
    index = {lab: k for k, lab in enumerate(order)}
    test_rows = np.flatnonzero(split.test)
    unknown = sorted(set(pred[test_rows]) - set(order))
    if test_rows.size and len(unknown) == len(set(pred[test_rows])):
        raise ValueError(
            f"predictions: none of the predicted values {unknown[:5]} is a label "
            f"({order})"
        )
    cue = cue_statistics(features, y, split, min_count=min_count, label_order=order)
    codes = np.fromiter((index[v] for v in y), dtype=np.int64, count=len(y))
    pred_codes = np.fromiter((index.get(v, -1) for v in pred), dtype=np.int64,
                             count=len(pred))
    correct = (pred_codes == codes)[test_rows]
    overall = float(correct.mean()) if correct.size else float("nan")

    column = {(t, f): k for k, (t, f) in
              enumerate(zip(features.feature_type, features.feature, strict=True))}
    cols = np.asarray([column[(t, f)] for t, f in zip(cue["feature_type"], cue["feature"],
                                                        strict=True)], dtype=np.int64)
    X_cols = features.X[:, cols].tocsc() if cols.size else sp.csc_matrix((len(y), 0))
    acc = accuracy_test(X_cols[test_rows], correct)
    frame = cue[["feature_type", "feature", "n_train", "n_test", "majority_label",
                 "cueness"]].copy()
    for name in acc.columns:
        frame[name] = acc[name].to_numpy()
    frame["distribution_jsd"] = np.nan

    rows = []
    train_rows = split.train
    for k in range(min(n_distribution, len(frame))):
        present = X_cols[:, k].toarray().ravel() > 0
        in_test = present & split.test
        in_train = present & train_rows
        valid = in_test & (pred_codes >= 0)
        train_share, predicted_share, jsd, n_flat = distribution_test(
            codes[valid], pred_codes[valid], codes[in_train], len(order),
            random_state=random_state,
        )
        frame.loc[k, "distribution_jsd"] = jsd
        for j, lab in enumerate(order):
            rows.append((frame.at[k, "feature_type"], frame.at[k, "feature"], lab,
                         float(train_share[j]), float(predicted_share[j]), jsd, n_flat))
    distribution = pd.DataFrame(rows, columns=["feature_type", "feature", "label",
                                               "train_share", "predicted_share", "jsd",
                                               "n_flattened"])
    return ProbeResult(frame, distribution, model, split.description, overall, order)


def probe_model(
    dataset,
    predictions: str | Sequence | None = None,
    *,
    baseline: str = "hypothesis_only",
    test=None,
    features: Iterable[str] = ("word",),
    min_count: int = 5,
    n_distribution: int = 20,
    text: str = "hypothesis",
    test_size: float = 0.2,
    groups: Sequence | None = None,
    random_state: int | None = 0,
    annotations: FeatureMatrix | None = None,
    cache: bool = True,
    cache_dir: str | os.PathLike | None = None,
    n_jobs: int | None = None,
) -> ProbeResult:
    """Probe a model's predictions (or a built-in baseline) for cue exploitation.

    Parameters
    ----------
    dataset : AuditDataset
    predictions : str or sequence, optional
        The model's predicted labels on the test rows: the name of a column of the test
        rows' file (``test`` when given, else ``dataset``), or a sequence with one value per
        test row (or per example). None: use the built-in ``baseline``.
    baseline : {'hypothesis_only', 'full_input'}
        The built-in model used when ``predictions`` is None; trained on the training
        rows.
    test : AuditDataset, optional
        Second file as the test rows.
    features, min_count, text, cache, cache_dir, n_jobs, annotations
        As in :func:`aflite_core.cues.statistics.cue_table`.
    n_distribution : int
        Run the distribution test on this many top features (by cueness).
    test_size, groups, random_state
        Hold-out parameters (and the seed of the flattening); see
        :func:`aflite_core.cues.statistics.dataset_inputs`.
    """
    inputs = dataset_inputs(dataset, test, test_size=test_size, groups=groups,
                            random_state=random_state)
    n = len(inputs.labels)
    test_rows = np.flatnonzero(inputs.split.test)
    if predictions is None:
        pred = baseline_predictions(inputs.hypotheses, inputs.labels, inputs.split.train,
                                    premises=inputs.premises, kind=baseline,
                                    random_state=random_state)
        model = _BASELINE_NAMES.get(baseline, baseline)
    elif isinstance(predictions, str):
        pred = np.full(n, "", dtype=object)
        pred[test_rows] = _prediction_column(dataset if test is None else test, predictions,
                                             inputs, test is not None)
        model = f"predictions column '{predictions}'"
    else:
        values = np.asarray(predictions, dtype=object)
        if len(values) == n:
            pred = values
        elif len(values) == test_rows.size:
            pred = np.full(n, "", dtype=object)
            pred[test_rows] = values
        else:
            raise ValueError(
                f"predictions: expected {test_rows.size} values (one per test row) or {n} "
                f"(one per example), got {len(values)}"
            )
        model = "predictions"
    if annotations is None:
        annotations = extract_features(inputs.hypotheses, inputs.premises, features=features,
                                       text=text, min_count=min_count, cache=cache,
                                       cache_dir=cache_dir, n_jobs=n_jobs)
    result = probe_predictions(
        annotations, inputs.labels, pred, inputs.split, min_count=min_count,
        n_distribution=n_distribution, random_state=random_state, model=model,
        label_order=sorted(pd.unique(np.asarray(inputs.labels).astype(str))),
    )
    return result


def _prediction_column(source, column: str, inputs, is_test_file: bool) -> np.ndarray:
    frame = source.frame
    if column not in frame.columns:
        raise ValueError(
            f"predictions: column {column!r} not found; columns are {list(frame.columns)}"
        )
    values = frame[column].to_numpy()[np.asarray(source.included_mask)]
    if is_test_file:
        return values
    return values[inputs.split.test[inputs.in_dataset]]


#: Column names read as the row id / the prediction in a predictions file.
ROW_ID_COLUMNS = ("row_id", "id", "rowid")
PREDICTION_COLUMNS = ("prediction", "predicted", "pred", "label_pred", "model")


def predictions_by_row_id(dataset, table: pd.DataFrame, *, name: str = "predictions"
                          ) -> list[str]:
    """A model's predictions from a separate table, in the dataset's row order.

    Parameters
    ----------
    dataset : AuditDataset
    table : DataFrame
        A row id column (one of :data:`ROW_ID_COLUMNS`, case-insensitive) and a prediction
        column (one of :data:`PREDICTION_COLUMNS`).
    name : str
        Source name used in messages.

    Returns
    -------
    list of str
        One prediction per audited row; "" where the table has none for a row.

    Raises
    ------
    ValueError
        If a column is missing, or no row id of the table matches the dataset's.
    """
    columns = [str(c) for c in table.columns]
    id_col = next((c for c in columns if c.lower() in ROW_ID_COLUMNS), None)
    pred_col = next((c for c in columns if c.lower() in PREDICTION_COLUMNS), None)
    if id_col is None or pred_col is None:
        raise ValueError(f"{name}: expected a row id column (one of {list(ROW_ID_COLUMNS)}) "
                         f"and a prediction column (one of {list(PREDICTION_COLUMNS)}); found "
                         f"columns {columns}")
    frame = table.set_axis(columns, axis=1)
    lookup = dict(zip(frame[id_col].astype(str), frame[pred_col].astype(str), strict=True))
    ids = [str(i) for i in dataset.row_ids()]
    if not any(i in lookup for i in ids):
        raise ValueError(f"{name}: none of its row ids matches the dataset's row ids "
                         f"(e.g. {ids[:3]})")
    return [lookup.get(i, "") for i in ids]
