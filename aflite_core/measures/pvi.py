"""Partial-input information per row: hypothesis-only pointwise V-information (PVI).

Ethayarajh, Choi & Swayamdipta (ICML 2022) measure how much usable information an input holds
about a row's label as

    PVI(x -> y) = log2 p(y | x) - log2 p(y)

where ``p(y | x)`` comes from a model trained on inputs ``x`` and ``p(y)`` from the same model
family trained on empty inputs (which learns the label distribution of its training rows).
Here ``x`` is the **hypothesis alone** (the partial input of Gururangan et al. 2018; Poliak et
al. 2018), so a high PVI marks a row whose label a hypothesis-only model can read off the
hypothesis: an annotation artefact. The mean PVI over rows estimates the hypothesis's
V-information about the label.

Probabilities are out-of-fold: ``k``-fold cross-validation (:func:`aflite_core.splits.cv_folds`:
stratified, and *grouped* when the data has groups, so a row is never scored by a model that saw
another row of its group, e.g. the other hypotheses of its premise). In each fold the model is
:func:`aflite_core.represent._text_models.text_model` ``("hypothesis_only")`` fitted on the
training folds and ``p(y)`` is the label share of those training folds. Probabilities are
floored at :data:`PROB_FLOOR` so a label absent from a fold's training rows stays finite. Units:
bits.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pandas as pd

from aflite_core._validation import check_callback, check_int
from aflite_core.io import str_codes
from aflite_core.measures.registry import Measure, MeasureContext, MeasureResult, Option
from aflite_core.progress_plan import along_points
from aflite_core.represent import (
    counts_evaluator,
    dask_folds,
    evaluator,
    map_folds,
    pair_texts,
    text_model,
)
from aflite_core.splits import cv_folds, group_codes

__all__ = ["FILE", "PROB_FLOOR", "hypothesis_only_pvi", "pvi_summary"]

#: The run-folder file: one row per filtered row.
FILE = "pvi.parquet"
#: Smallest probability used in a logarithm.
PROB_FLOOR = 1e-6
#: On a cluster (``map_folds`` inside ``on_dask``), from this many rows the hypotheses are
#: counted on the workers (``represent.partitioned_counts``) and the folds fit beside the
#: matrix there: the driver sends the texts a chunk at a time and never holds the matrix
#: (below, the matrix of up to 250,000 rows is shared with the baselines and label issues
#: through ``fold_fits``' cache, and travels with the fits as before).
WORKER_COUNTS_MIN_ROWS = 250_001
#: Hypotheses per counting task on the workers.
COUNT_CHUNK_ROWS = 65_536


def hypothesis_only_pvi(hypotheses: Sequence[str], labels, *, n_splits: int = 5,
                        groups: Sequence | None = None, random_state: int | None = 0,
                        C: float = 1.0, callback: Callable[[dict], object] | None = None
                        ) -> pd.DataFrame:
    """Cross-validated hypothesis-only PVI of every row.

    Parameters
    ----------
    hypotheses : sequence of str
        A list, or a lazy sequence with ``chunks(rows)`` (``MeasureContext.hypothesis_texts``).
        Inside ``fold_pool.on_dask`` with at least :data:`WORKER_COUNTS_MIN_ROWS` rows they go
        to the workers :data:`COUNT_CHUNK_ROWS` at a time, are counted there
        (:func:`~aflite_core.represent.ngram_counts_on_workers`) and the
        folds fit there beside the counts: the same probabilities bit for bit.
    labels : array-like of shape (n_rows,)
    n_splits : int >= 2, default 5
        Folds (see :func:`aflite_core.splits.cv_folds`).
    groups : sequence, optional
        Group per row; a group's rows share a test fold.
    random_state : int or None, default 0
        Seeds the folds.
    C : float, default 1.0
        Inverse regularisation of the model.
    callback : callable, optional
        ``callback({"stage": "pvi", "fraction": f, "message": m})`` after each fold.

    Returns
    -------
    DataFrame
        One row per input row: ``pvi`` (bits), ``p_label`` (out-of-fold ``p(y | hypothesis)``),
        ``p_prior`` (the training folds' share of the label), ``predicted`` (the model's most
        probable label, categorical; ``"None"`` for a row in no test fold), ``correct`` and
        ``fold`` (the smallest int type holding -1 .. n_splits).

    Raises
    ------
    ValueError
        On a length mismatch, fewer than two labels or too few groups for the folds.
    """
    # the labels as codes of their sorted texts (np.unique of astype(str), without a
    # fixed-width str copy of every row's label: 0.26 GB at 5M rows)
    codes, classes = str_codes(labels)
    n_splits = check_int("n_splits", n_splits, minimum=2)
    callback = check_callback(callback)
    n = len(codes)
    if len(hypotheses) != n:
        raise ValueError(f"hypotheses: expected {n} texts (one per label), got "
                         f"{len(hypotheses)}")
    if len(classes) < 2:
        raise ValueError(f"labels: expected at least 2 distinct labels, got {len(classes)}")
    model = text_model("hypothesis_only", C=C, random_state=random_state)
    record = dask_folds()
    if record is not None and n >= WORKER_COUNTS_MIN_ROWS:
        # counted on the workers and left there: the folds read the evaluator where it is
        from aflite_core.represent import ngram_counts_on_workers

        chunks = (pair_texts(None, chunk) for chunk in _chunks(hypotheses))
        counts = ngram_counts_on_workers(record.client, chunks)
        # the labels as the smallest integer codes: as a fixed-width str array they made a
        # task graph of 52 bytes a row (248 MB at 5M rows: Dask's "Sending large graph")
        folds_model = record.client.submit(
            _evaluator_of_codes, model, counts, codes.astype(np.min_scalar_type(len(classes))),
            classes, pure=False)
    else:  # vectorised once for all folds, each fold fitted from zero (represent.fold_fits)
        folds_model = evaluator(model, pair_texts(None, hypotheses), classes[codes])
    # the codes stratify as the texts did (cv_folds reads labels through np.unique)
    folds = cv_folds(codes, n_splits=n_splits, groups=group_codes(groups, n),
                     random_state=random_state)
    p_label = np.full(n, np.nan)
    p_prior = np.full(n, np.nan)
    # a class, -1 for a row in no test fold (the smallest int holding them, not 8 bytes a row)
    predicted = np.full(n, -1, dtype=np.min_scalar_type(-len(classes) - 1))
    fold_of = np.full(n, -1, dtype=np.min_scalar_type(-n_splits))  # holds -1 .. n_splits
    fit = functools.partial(_fit_fold, codes=codes, classes=classes)

    def done(f: int, fitted: tuple[np.ndarray, np.ndarray]) -> None:
        test = folds[f][1]
        prior, proba = fitted
        p_label[test] = proba[np.arange(len(test)), codes[test]]
        p_prior[test] = prior[codes[test]]
        predicted[test] = proba.argmax(axis=1)
        fold_of[test] = f
        if callback is not None:
            callback({"stage": "pvi", "fraction": (f + 1) / len(folds),
                      "message": f"hypothesis-only model, fold {f + 1} of {len(folds)}"})

    # the folds side by side (represent.fold_pool), or as tasks beside the evaluator
    map_folds(fit, folds, on_done=done, resident=folds_model)
    pvi = np.log2(np.maximum(p_label, PROB_FLOOR)) - np.log2(np.maximum(p_prior, PROB_FLOOR))
    # copy=False: the columns as made here, not stacked into a (3, n) float copy
    return pd.DataFrame({"pvi": pvi, "p_label": p_label, "p_prior": p_prior,
                         "predicted": _predicted(classes, predicted),
                         "correct": predicted == codes, "fold": fold_of}, copy=False)


def _predicted(classes: np.ndarray, predicted: np.ndarray) -> pd.Categorical | np.ndarray:
    """The predicted labels (``"None"`` for a row in no test fold) as categorical codes: the
    object array of one str per class was 8 bytes a row; the file holds them as before
    (:data:`TABLE_TYPES`)."""
    names = [*classes.tolist(), "None"]
    codes = np.where(predicted < 0, len(classes), predicted)
    if len(set(names)) < len(names):  # a label named "None": the strings, as before
        return np.asarray(names, dtype=object)[codes]
    return pd.Categorical.from_codes(codes.astype(np.min_scalar_type(len(names))),
                                     categories=pd.Index(names, dtype=object))


def _fit_fold(fold: tuple[np.ndarray, np.ndarray], folds_model, *, codes: np.ndarray,
              classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One fold: its training rows' prior p(y) and its test rows' probabilities."""
    train, test = fold
    prior = np.bincount(codes[train], minlength=len(classes)) / len(train)
    proba = np.tile(prior, (len(test), 1))
    if len(np.unique(codes[train])) >= 2:
        fitted_classes, fitted_proba = folds_model.fit_predict_proba(train, test)
        proba = np.zeros((len(test), len(classes)))
        proba[:, np.searchsorted(classes, fitted_classes)] = fitted_proba
    return prior, proba


def _chunks(texts: Sequence[str]) -> Iterator[list[str]]:
    """``texts`` a chunk of :data:`COUNT_CHUNK_ROWS` at a time (a ``RowTexts`` makes them
    from the frame one chunk at a time)."""
    if hasattr(texts, "chunks"):
        yield from texts.chunks(COUNT_CHUNK_ROWS)
        return
    for start in range(0, len(texts), COUNT_CHUNK_ROWS):
        yield list(texts[start:start + COUNT_CHUNK_ROWS])


def pvi_summary(table: pd.DataFrame, by: Sequence[str] = ("label",)) -> pd.DataFrame:
    """Per group of ``by``: rows, mean and median PVI, share of rows with PVI > 0 and < 0, and
    the hypothesis-only accuracy; with a final ``all`` row (mean PVI over all rows = the
    hypothesis's estimated V-information about the label, in bits)."""
    by = list(by)

    def summarise(part: pd.DataFrame) -> dict:
        pvi = part["pvi"].to_numpy(dtype=float)
        return {"rows": len(part), "mean PVI (bits)": float(np.mean(pvi)),
                "median PVI (bits)": float(np.median(pvi)),
                "share PVI > 0": float(np.mean(pvi > 0)), "share PVI < 0": float(np.mean(pvi < 0)),
                "hypothesis-only accuracy": float(part["correct"].astype(bool).mean())}

    rows = [{**dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)),
             **summarise(part)}
            for key, part in table.groupby(by, sort=True, observed=True)]
    rows.append({**{b: "all" for b in by}, **summarise(table)})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- registry entry


def _evaluator_of_codes(model, counts, codes: np.ndarray, classes: np.ndarray):
    """:func:`counts_evaluator` of the labels ``classes[codes]`` (on a worker)."""
    return counts_evaluator(model, counts, classes[codes])


#: How :data:`FILE`'s columns held narrower in memory are written (``MeasureResult.astype``):
#: the strings and the int64 folds of the file as it always was.
TABLE_TYPES = {"status": "string", "label": "string", "predicted": "str", "fold": np.int64}


def compute(ctx: MeasureContext) -> MeasureResult:
    """Hypothesis-only PVI of the filtered rows (folds grouped by ``ctx.groups``)."""
    hypotheses = ctx.hypothesis_texts()  # made a chunk at a time (no premises)
    params = MEASURE.check_params(ctx.params, n_rows=len(ctx.y))
    table = hypothesis_only_pvi(hypotheses, ctx.y, groups=ctx.groups,
                                random_state=ctx.random_state, callback=ctx.callback(),
                                **params)
    # the ids as they are, statuses and labels as categorical codes (no Python object per
    # row; written as the strings: TABLE_TYPES)
    table.insert(0, "row_id", np.asarray(ctx.row_ids))
    table.insert(1, "status", pd.Categorical(ctx.statuses()))
    table.insert(2, "label", pd.Categorical(ctx.y))
    return MeasureResult(tables={FILE: table}, astype={FILE: TABLE_TYPES},
                         info={"params": params, "grouped": ctx.groups is not None,
                               "v_information_bits": float(table["pvi"].mean())})


def tables(run) -> dict[str, pd.DataFrame]:
    """Per-label PVI summaries (all filtered rows, and retained vs removed)."""
    # the columns they read: not the ids, probabilities and predicted labels of every row
    table = run.read_parquet(FILE, columns=["label", "status", "pvi", "correct"],
                             categories=("label", "status"))  # codes: no string per row
    if table is None or table.empty:
        return {}
    return {
        "Hypothesis-only PVI per label (bits; 'all' = V-information)": pvi_summary(table),
        "Hypothesis-only PVI per label, retained vs removed": pvi_summary(
            table, ("label", "status")),
    }


#: Explore's column name of the PVI.
COLUMN = "hypothesis-only PVI (bits)"


def row_columns(run) -> pd.DataFrame:
    """Explore's per-row column :data:`COLUMN`."""
    table = run.read_parquet(FILE)
    return table.set_index("row_id")[["pvi"]].round(4).rename(columns={"pvi": COLUMN})


#: Seconds per 100k rows above 100,000 rows (3 folds), at the sizes measured: the folds'
#: Newton-CG fits need more iterations on more rows, so the rate grows with the rows
#: (``bench_cores.py --rows 300000``, 2026-11-30: 5.0-5.3 s; ``bench_pipeline.py``,
#: 2026-11-29: 30.6 s at 1M, 76 s at 2M, 475.6 s at 5M). A flat 3.7 planned 11 s at 300k:
#: the ETA at PVI's start was 1.66x the time left once the cues were planned right. At 1M
#: and 2M measured again on 2026-11-30's VM: 21.55 s and 44.21 s; at 5M there 320.1 s
#: (``bench_pipeline.py --sizes 5000000``, forty-second session: 475.6 s planned, the ETA at
#: PVI's start 1.53x the time left).
RATE_PER_100K = ((100_000, 1.5), (300_000, 1.75), (1_000_000, 2.16), (2_000_000, 2.21),
                 (5_000_000, 6.4))


def _cost(n: int) -> float:
    """Seconds per 100k rows: 1.5 up to 100,000 rows (5 folds; on 2026-11-30's VM 0.14-0.24,
    0.35-0.37, 0.83 and 1.64 s at 10k, 20k, 50k and 100k rows with the stage's fixed 0.1 s,
    ``bench_pipeline.py``; 2.4 before, from 2026-11-26), then :data:`RATE_PER_100K`
    interpolated (the last slope beyond 5M rows)."""
    return 1.5 if n <= 100_000 else along_points(RATE_PER_100K, n)


MEASURE = Measure(
    name="pvi",
    label="Hypothesis-only PVI",
    description="Pointwise V-information of the hypothesis alone about each row's label, "
                "log2 p(y | hypothesis) − log2 p(y), from cross-validated (group-aware) "
                "hypothesis-only models (Ethayarajh et al., 2022). High PVI: the label can be "
                "read off the hypothesis.",
    compute=compute,
    files=(FILE,),
    tables=tables,
    exports={"pvi": FILE},
    order=45,
    cost=lambda n: _cost(n),
    row_columns=row_columns,
    options=(
        Option("n_splits", "PVI folds", lambda n: 5 if n <= 100_000 else 3,
               minimum=2, maximum=10, scaled_rule="5 up to 100,000 rows, 3 above",
               help="k-fold cross-validation of the hypothesis-only model; every row's "
                    "probability comes from a model that did not train on it (nor on its "
                    "group). 5 folds up to 100,000 rows, 3 above (each model still trains on "
                    "over 66,000 rows; half the time)."),
    ),
)
