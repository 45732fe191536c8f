"""Label issues: rows whose given label is probably wrong, by confident learning.

AFLite answers "which rows are too easy"; a curator also asks "which rows are mislabelled".
Confident learning (Northcutt, Jiang & Chuang, JAIR 2021; the ``cleanlab`` library) answers
it from out-of-sample predicted probabilities: a row whose given label gets a low probability,
while another label clears that label's own confidence threshold, is a probable label issue.

**Which predictions.** Two models score each row out of sample:

- one cross-validated pass of the full-input text model
  (:func:`aflite_core.represent._text_models.text_model` ``("full_input")``: TF-IDF of the
  premise and the hypothesis with their overlap, logistic regression; the text alone on data
  without premises), ``n_splits`` folds (default 2) grouped like every other measure
  (:func:`aflite_core.splits.cv_folds`: a row is never scored by a model that saw a row of its
  group), vectorised once for all folds
  (:mod:`aflite_core.represent._fold_fits`): its probability vectors give the flags and the
  suggested labels;
- AFLite's own held-out linear models on Φ, which the audit already ran: their mean
  probability of the given label (the data map's confidence) is averaged with the full-input
  model's into ``label_quality`` (:func:`blended_quality`), when those models never trained
  on a row's group (``MeasureContext.datamap_grouped``: AFLite's partitions drew whole groups,
  the default on grouped data); else the full-input model's alone, with a warning.

The full-input pass is the one fit beyond what the rest of the default audit makes, on
purpose: measured on planted flips (``benchmarks/bench_label_issues.py``), the audit's own
predictions alone rank the flips below the standard recipe (5-fold logistic regression on
TF-IDF of premise and of hypothesis, grouped by premise) on SNLI (AFLite's confidence: AUROC
0.68 against 0.75 on SNLI dev with 10 % random flips), the full-input pass alone falls below
it on SICK with one label pair swapped (0.84 against 0.92), and their mean is above it on SNLI
(0.79 / 0.77 against 0.75 / 0.72, random / pair flips), SICK with random flips (0.89 against
0.80) and FEVER-Symmetric (0.68 against 0.33), and level with it on SICK with a pair swapped
(0.9241 against 0.9236; precision at k 0.59 against 0.58), at a tenth of its time or less (the
figures of 2026-11-26, with AFLite's partitions drawing whole groups; docs/measures.md).

**Which rows.** Every filtered row (retained and removed) up to ``max_rows``; above it a
seeded sample of whole groups of that many rows (the others get no score, and the summary
says how many were scored).

**The outputs.** ``label_issues.parquet``: ``row_id``, ``status``, ``given_label``,
``suggested_label`` (the full-input model's most probable label), ``label_quality`` (the
probability of the given label, averaged over the two models; where AFLite did not score a
row, the full-input model's alone, as ``cleanlab.rank.get_label_quality_scores(method=
"self_confidence")`` gives it: lower = more likely wrong), ``is_label_issue``
(``cleanlab.filter.find_label_issues`` with ``filter_by="both"``: flagged by the confident
joint's class and noise-rate pruning together, the fewest flags of cleanlab's rules at the
same precision on planted flips). The flag is
only as good as the model: ``model_accuracy`` in the summary is its out-of-fold accuracy, and
below :data:`WEAK_MODEL_ACCURACY` a warning says to read ``label_quality`` as a ranking (on
SNLI dev with 10 % of labels flipped the model agrees with 58 % of the labels and flags 31 %
of the rows, 70 % of the flips among them; the flips are found among the lowest label
qualities all the same).

The summary gives the flagged rows among the retained and the removed rows: AFLite keeps
mislabelled rows (they are unpredictable), so a "harder" retained set is also a noisier one
unless the flagged rows are dropped (``export --what retained_clean``; the flagged rows alone,
for relabelling: ``--what flagged``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from aflite_core._validation import check_callback, check_int
from aflite_core.errors import MeasureSkipped
from aflite_core.measures.registry import Measure, MeasureContext, MeasureResult, Option
from aflite_core.progress_plan import along_points
from aflite_core.represent import (
    dask_folds,
    evaluator,
    lost_on_cluster,
    map_folds,
    pair_texts,
    text_model,
)
from aflite_core.splits import cv_folds, group_codes, sample_rows

__all__ = ["FILE", "MAX_ROWS", "find_label_issues", "issue_summary", "label_pairs"]

#: The run-folder file: one row per scored row.
FILE = "label_issues.parquet"
#: Rows scored at most (a seeded sample of whole groups above), as for the baselines: the
#: full-input pass costs 0.8 s at 10k rows and 8.2 s at 100k (bench_pipeline.py).
MAX_ROWS = 100_000
#: Seconds up to :data:`MAX_ROWS` rows (besides the stage's fixed 0.1 s), at the sizes measured
#: on 2026-11-30's VM (``bench_pipeline.py --sizes 10000,20000,50000``: 0.46-0.78, 0.75-0.80,
#: 1.36 s; 3.24 s at 100k). The rate of 2026-11-26 (0.64 s at 10k, 3.6 s at 100k, a parabola
#: between) planned 1.32 s at 20k and 2.68 s at 50k.
SECONDS = ((10_000, 0.52), (20_000, 0.68), (50_000, 1.26), (100_000, 3.2))
#: Rows (a seeded sample of whole groups) on which the hardness of the bulk export that drops
#: the flagged rows (``retained_clean``) is measured beside the retained set's
#: (:func:`~aflite_core.measures.baselines.subset_hardness`: 0.6 s at 5,000 rows).
HARDNESS_ROWS = 5_000
#: Below this out-of-fold accuracy of the scoring model, the flags are a ranking more than a
#: verdict, and the summary says so.
WEAK_MODEL_ACCURACY = 0.8
#: Said when AFLite's partitions drew rows of grouped data: its held-out probabilities are then
#: left out of ``label_quality`` (a row's must come from models that never saw its group).
UNGROUPED_DATAMAP = (
    "AFLite's partitions drew rows of grouped data (group_partitions='off', or a group too "
    "large for 'auto'), so its held-out models may have trained on a row's group; label "
    "quality is the full-input model's alone (grouped folds), without AFLite's probabilities")
#: cleanlab's Datalab, which its package import loads eagerly and the measure never uses.
_DATALAB = "cleanlab.datalab.datalab"
#: Explore's per-row columns.
QUALITY_COLUMN = "label quality"
ISSUE_COLUMN = "label issue"
SUGGESTED_COLUMN = "suggested label"


def out_of_fold_probabilities(texts: Sequence[str], labels, *, n_splits: int = 2,
                              groups: Sequence | None = None, random_state: int | None = 0,
                              callback: Callable[[dict], object] | None = None
                              ) -> tuple[np.ndarray, np.ndarray]:
    """Cross-validated probabilities of the full-input text model for every row.

    Inside ``fold_pool.on_dask`` the texts are sent to a worker, which makes the folds'
    features there; the fold fits read them where they are (the same fits). A worker lost
    with them has the folds fitted again from features made here.

    Parameters
    ----------
    texts : sequence of str
        :func:`~aflite_core.represent._text_models.pair_texts` of the rows.
    labels : array-like of shape (n_rows,)
    n_splits : int >= 2, default 2
    groups : sequence, optional
        A group's rows share a test fold.
    random_state : int or None, default 0
        Seeds the folds.
    callback : callable, optional
        ``callback({"stage": "label_issues", "fraction": f, "message": m})`` after each fold.

    Returns
    -------
    classes : ndarray of str
        The labels, sorted: the columns of ``proba``.
    proba : ndarray of shape (n_rows, n_classes)
        Each row's probabilities from the model of the fold that held it out.
    """
    y = np.asarray(labels, dtype=object).astype(str)
    n_splits = check_int("n_splits", n_splits, minimum=2)
    callback = check_callback(callback)
    classes = np.unique(y)
    folds = cv_folds(y, n_splits=n_splits, groups=group_codes(groups, len(y)),
                     random_state=random_state)
    proba = np.zeros((len(y), len(classes)))

    def done(f: int, fitted: tuple[np.ndarray, np.ndarray]) -> None:
        test = folds[f][1]
        proba[np.ix_(test, np.searchsorted(classes, fitted[0]))] = fitted[1]
        if callback is not None:
            callback({"stage": "label_issues", "fraction": (f + 1) / len(folds),
                      "message": f"full-input model, fold {f + 1} of {len(folds)}"})

    model = text_model("full_input", random_state=random_state)
    record = dask_folds()
    if record is not None:  # the features made on a worker and left there (see below)
        # one Arrow array, sent out of band: a list's str objects and its pickle were
        # three times the texts' bytes on the driver while they were sent
        texts = pa.array(list(texts), type=pa.large_string())
        try:
            _folds_on_worker(record.client, model, texts, y, folds, done)
            return classes, proba
        except Exception as exc:
            if not lost_on_cluster(exc):
                raise
            # the worker holding them left (Dask cannot make them again from texts scattered
            # to it): the same fits from features made here
    # vectorised once for all folds, the folds side by side (represent.fold_pool)
    map_folds(_fit_proba, folds, on_done=done,
              resident=evaluator(model, _text_list(texts), y))
    return classes, proba


def _text_list(texts) -> list[str]:
    """``texts`` as a list of str (an Arrow array's made Python strings)."""
    return texts.to_pylist() if isinstance(texts, (pa.Array, pa.ChunkedArray)) \
        else list(texts)


def _fit_proba(fold: tuple[np.ndarray, np.ndarray], folds_model) -> tuple:
    """One fold's classes and probabilities of its test rows."""
    return folds_model.fit_predict_proba(*fold)


def _pair_evaluator(model, texts, codes: np.ndarray, classes: np.ndarray):
    """:func:`~aflite_core.represent._fold_fits.evaluator` of ``texts`` (an Arrow array) and
    the labels ``classes[codes]`` (on a worker)."""
    return evaluator(model, _text_list(texts), classes[codes])


def _folds_on_worker(client, model, texts: pa.Array, y: np.ndarray, folds: list,
                     done: Callable) -> None:
    """The folds of :func:`out_of_fold_probabilities` on ``client``'s workers: the texts
    scattered once, the evaluator (the features of every fold: 0.1-0.14 GB at 100k rows,
    and its pickle for each send) made by a task and read by the folds where it is."""
    classes, codes = np.unique(y, return_inverse=True)
    # the labels as the smallest integer codes, not a str per row in the task
    codes = codes.ravel().astype(np.min_scalar_type(len(classes)))
    [held] = client.scatter([texts], hash=False)
    del texts
    folds_model = client.submit(_pair_evaluator, model, held, codes, classes, pure=False)
    try:
        map_folds(_fit_proba, folds, on_done=done, resident=folds_model)
    finally:
        client.cancel([folds_model, held])


def blended_quality(proba: np.ndarray, codes: np.ndarray, confidence: np.ndarray
                    ) -> np.ndarray:
    """Each row's label quality: the full-input model's probability of its given label
    (``proba[row, codes[row]]``), averaged with AFLite's held-out one (``confidence``, the
    data map's) where that is finite."""
    given = np.asarray(proba, dtype=np.float64)[np.arange(len(codes)), codes]
    second = np.clip(confidence, 0.0, 1.0)
    return np.where(np.isfinite(confidence), (given + second) / 2, given)


def find_label_issues(labels, classes: np.ndarray, proba: np.ndarray, *,
                      quality: np.ndarray | None = None) -> pd.DataFrame:
    """Confident learning on out-of-sample probabilities (cleanlab).

    Parameters
    ----------
    labels : array-like of shape (n_rows,)
        The given labels (values of ``classes``).
    classes : ndarray of shape (n_classes,)
        The columns of ``proba``.
    proba : ndarray of shape (n_rows, n_classes)
        Out-of-sample probabilities (rows sum to 1): the flags and the suggested labels.
    quality : ndarray of shape (n_rows,), optional
        The label quality to report instead of ``proba``'s self-confidence (the measure
        passes the mean with AFLite's held-out probability, see :func:`blended_quality`).

    Returns
    -------
    DataFrame
        ``given_label``, ``suggested_label``, ``label_quality``, ``is_label_issue``.
    """
    cleanlab_issues, get_label_quality_scores = _cleanlab()
    y = np.asarray(labels, dtype=object).astype(str)
    codes = np.searchsorted(classes, y)
    if len(y) != len(proba) or not np.array_equal(classes[codes], y):
        raise ValueError("labels: expected one label per row, each one of classes")
    proba = np.clip(proba, 0.0, 1.0)
    proba = proba / np.maximum(proba.sum(axis=1, keepdims=True), 1e-12)
    if quality is None:
        quality = get_label_quality_scores(codes, proba, method="self_confidence")
    elif len(quality) != len(y):
        raise ValueError(f"quality: expected {len(y)} values, got {len(quality)}")
    flagged = cleanlab_issues(codes, proba, filter_by="both", n_jobs=1)
    return pd.DataFrame({
        "given_label": pd.array(y, dtype="string"),
        "suggested_label": pd.array(classes[proba.argmax(axis=1)].astype(str), dtype="string"),
        "label_quality": np.asarray(quality, dtype=np.float64),
        "is_label_issue": np.asarray(flagged, dtype=bool),
    })


def _cleanlab() -> tuple[Callable, Callable]:
    """``cleanlab.filter.find_label_issues`` and ``cleanlab.rank.get_label_quality_scores``,
    imported without cleanlab's Datalab.

    ``import cleanlab`` loads its Datalab eagerly, and Datalab imports Hugging Face
    ``datasets`` when that is installed: 0.25-0.3 s of every audit for a class this measure
    never uses. While cleanlab's package loads, the import of that one module is refused (cleanlab
    expects that: it then keeps a placeholder); afterwards the refusal is lifted and
    ``cleanlab.Datalab`` / ``cleanlab.IssueManager`` are resolved on first access by cleanlab's
    own factories, so code in the same process that uses them gets the real classes.
    """
    if "cleanlab" not in sys.modules and _DATALAB not in sys.modules:
        sys.modules[_DATALAB] = None  # type: ignore[assignment]
        try:
            import cleanlab  # optional dependency
        except ImportError:  # a cleanlab that cannot do without its Datalab
            cleanlab = None
        finally:
            if sys.modules.get(_DATALAB, False) is None:
                del sys.modules[_DATALAB]
        if cleanlab is None:  # load it whole, as a plain import would
            for name in [m for m in sys.modules if m == "cleanlab" or m.startswith("cleanlab.")]:
                del sys.modules[name]
            import cleanlab  # lazy: +2406 ms to import
        lazy = {name: factory for name, factory in (
            ("Datalab", getattr(cleanlab, "_datalab_import_factory", None)),
            ("IssueManager", getattr(cleanlab, "_issue_manager_import_factory", None)))
            if factory is not None and _DATALAB not in sys.modules}
        for name in lazy:
            cleanlab.__dict__.pop(name, None)

        def __getattr__(name: str):  # PEP 562: called for attributes the module lacks
            if name in lazy:
                value = lazy[name]()
                setattr(cleanlab, name, value)
                return value
            raise AttributeError(f"module 'cleanlab' has no attribute {name!r}")

        cleanlab.__getattr__ = __getattr__
    from cleanlab.filter import find_label_issues as cleanlab_issues  # lazy: +2513 ms to import
    from cleanlab.rank import get_label_quality_scores  # lazy: +2714 ms to import

    return cleanlab_issues, get_label_quality_scores


def issue_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Flagged rows per status (retained, removed) and over all scored rows, with how often
    the scoring model's most probable label is the given one (its out-of-fold accuracy: the
    flags are only as good as this)."""
    rows = []
    for status, part in [*table.groupby("status", sort=True, observed=True), ("all", table)]:
        flagged = int(part["is_label_issue"].sum())
        right = part["suggested_label"].astype(str) == part["given_label"].astype(str)
        rows.append({"rows": str(status), "scored": len(part), "label issues": flagged,
                     "share flagged": flagged / len(part) if len(part) else float("nan"),
                     "mean label quality": float(part["label_quality"].mean()),
                     "model agrees with the label": float(right.mean()) if len(part)
                     else float("nan")})
    return pd.DataFrame(rows)


def label_pairs(table: pd.DataFrame) -> pd.DataFrame:
    """Flagged rows per (given label, suggested label), most frequent first, with their
    count per status (retained, removed, then any other status present)."""
    flagged = table[table["is_label_issue"]]
    if flagged.empty:
        return pd.DataFrame(columns=["given label", "suggested label", "label issues",
                                     "retained", "removed"])
    counts = (flagged.groupby(["given_label", "suggested_label", "status"], observed=True)
              .size().unstack("status", fill_value=0))
    for status in ("retained", "removed"):
        if status not in counts:
            counts[status] = 0
    statuses = ["retained", "removed", *sorted(c for c in counts.columns
                                                if c not in ("retained", "removed"))]
    counts["label issues"] = counts.sum(axis=1)
    out = counts.reset_index().rename(columns={"given_label": "given label",
                                               "suggested_label": "suggested label"})
    out = out[["given label", "suggested label", "label issues", *statuses]]
    out.columns.name = None
    return out.sort_values("label issues", ascending=False, kind="stable").reset_index(
        drop=True)


# --------------------------------------------------------------------------- registry entry


def compute(ctx: MeasureContext) -> MeasureResult:
    """Label issues of the filtered rows (see the module docstring)."""
    params = MEASURE.check_params(ctx.params, n_rows=len(ctx.y))
    n_splits = params["n_splits"]
    # codes of the sorted label texts from the scores' label codes (a byte a row): np.unique
    # of astype(str) without a fixed-width copy of every row's label, nor str_codes' two intp
    # arrays (80 MB at 5M rows); only the sample's rows are made texts, below
    codes, classes = ctx.label_codes()
    counts = np.bincount(codes, minlength=len(classes))
    if len(classes) < 2:
        raise MeasureSkipped(f"the filtered rows have a single label ({classes[0]!r}); label "
                             "issues need at least two")
    if counts.min() < n_splits:
        raise MeasureSkipped(f"the label {classes[counts.argmin()]!r} has {counts.min()} "
                             f"row(s), fewer than the {n_splits} cross-validation folds")
    n = len(codes)
    rows = sample_rows(n, int(params["max_rows"]), groups=ctx.groups,
                       random_state=ctx.random_state)
    if len(rows) < n:
        ctx.progress(0.0, f"label issues on a seeded sample of {len(rows):,} of {n:,} rows")
    given = classes[codes[rows]]  # the sample's labels as texts
    # the sample's texts are taken from the frame: no list of every row's
    hypotheses, premises = ctx.hypothesis_texts(), ctx.premise_texts()
    groups = None if ctx.groups is None else np.asarray(ctx.groups)[rows]
    # the texts passed unnamed: on Dask their list is dropped once they are one Arrow array
    classes, proba = out_of_fold_probabilities(
        pair_texts(None if premises is None else premises.take(rows), hypotheses.take(rows)),
        given, n_splits=n_splits, groups=groups, random_state=ctx.random_state,
        callback=ctx.callback())
    confidence, quality = None, None
    warnings = []
    if ctx.datamap is not None and not ctx.datamap_grouped:
        warnings.append(UNGROUPED_DATAMAP)
    elif ctx.datamap is not None:  # AFLite's held-out probability of the given label
        dm = ctx.datamap
        held = np.asarray(dm["n_heldout"])[rows] > 0  # the sample's, not every row as float
        confidence = np.where(held, np.asarray(dm["confidence"], dtype=float)[rows], np.nan)
        quality = blended_quality(proba, np.searchsorted(classes, given), confidence)
    table = find_label_issues(given, classes, proba, quality=quality)
    table.insert(0, "row_id", np.asarray(ctx.row_ids)[rows].astype(object))
    table.insert(1, "status", pd.array(ctx.statuses(rows), dtype="string"))
    summary = issue_summary(table).set_index("rows")
    accuracy = float(np.mean(classes[proba.argmax(axis=1)] == given))
    if accuracy < WEAK_MODEL_ACCURACY:
        warnings.append(
            f"the model that scores the labels is right on {accuracy:.0%} of the rows out of "
            f"fold: with a model this weak many flagged rows are its own errors, not label "
            f"errors; read label quality as a ranking and check the lowest first")
    hardness = bulk_hardness(ctx, rows, given, np.asarray(table["is_label_issue"], bool),
                             hypotheses)
    return MeasureResult(tables={FILE: table}, info={
        "bulk_hardness": hardness,
        "model_accuracy": accuracy, "warnings": warnings,
        "params": {"n_splits": n_splits, "max_rows": int(params["max_rows"])},
        "model": "full_input" if premises is not None else "text (no premises)",
        "aflite_blended": int(np.isfinite(confidence).sum()) if confidence is not None else 0,
        "grouped": ctx.groups is not None, "n_rows_scored": int(len(rows)),
        "n_rows_total": int(n), "n_label_issues": int(table["is_label_issue"].sum()),
        "share_flagged": {str(k): float(v) for k, v in summary["share flagged"].items()}})


def bulk_hardness(ctx: MeasureContext, rows: np.ndarray, given: np.ndarray,
                  flagged: np.ndarray, hypotheses) -> dict:
    """What the bulk export ``retained_clean`` (the retained rows without label issues)
    gives up: the hypothesis-only accuracy beyond a label-matched random subset of its size,
    beside the retained set's, on a seeded sample of at most :data:`HARDNESS_ROWS` of the
    scored rows (issue 62: the rows a weak model calls mislabelled are largely the hard rows
    AFLite kept on purpose). ``{}`` with a ``reason`` when it cannot be measured."""
    from aflite_core.measures.baselines import subset_hardness  # lazy: +15 ms to import

    keep = np.asarray(ctx.keep, dtype=bool)[rows]
    if keep.all() or not keep.any():
        return {"reason": "AFLite removed no row" if keep.all() else "AFLite kept no row"}
    pick = sample_rows(len(rows), HARDNESS_ROWS, groups=None if ctx.groups is None else
                       np.asarray(ctx.groups)[rows], random_state=ctx.random_state)
    masks = {"retained": keep[pick], "retained_clean": keep[pick] & ~flagged[pick]}
    try:
        figures = subset_hardness(
            hypotheses.take(rows[pick]), given[pick], masks,
            groups=None if ctx.groups is None else np.asarray(ctx.groups)[rows][pick],
            random_state=ctx.random_state)
    except ValueError as exc:  # a label with fewer rows than folds, a subset too small
        return {"reason": str(exc)}
    return {**figures, "n_rows_sampled": int(len(pick)),
            "note": "hypothesis-only accuracy of each set against label-matched random "
                    "subsets of its size (2 folds, 3 draws); beyond_random_pp > 0: harder "
                    "than random rows, < 0: easier"}


#: The sets :func:`hardness_table` names, with what each is.
HARDNESS_SETS = {
    "retained": "retained (what AFLite kept)",
    "retained_clean": "retained_clean (export: retained without the flagged rows)",
    "curated_apply_filter": "curated --apply-filter (export: reviewed, AFLite's removals out)",
}
#: Title of the table (the Report, the HTML report, the card).
HARDNESS_TITLE = ("What a bulk export gives up: hypothesis-only accuracy beyond a label-matched "
                  "random subset of its size (pp; > 0 harder than random rows, < 0 easier)")


def hardness_table(*blocks: dict | None) -> pd.DataFrame:
    """The sets of :data:`HARDNESS_SETS` found in ``blocks`` (the summary's
    ``bulk_hardness``, :func:`~aflite_core.runs.curated_hardness`), one row each:
    ``set``, ``rows``, ``accuracy``, ``random``, ``beyond random (pp)``; empty without any."""
    rows = []
    for name, shown in HARDNESS_SETS.items():
        for block in blocks:
            part = (block or {}).get(name) if isinstance(block, dict) else None
            if isinstance(part, dict) and "beyond_random_pp" in part:
                rows.append({"set": shown, "rows": int(part["n_rows"]),
                             "accuracy": round(float(part["accuracy"]), 3),
                             "random": round(float(part["random_accuracy"]), 3),
                             "beyond random (pp)": round(float(part["beyond_random_pp"]), 1)})
                break
    return pd.DataFrame(rows, columns=["set", "rows", "accuracy", "random",
                                       "beyond random (pp)"])


def tables(run) -> dict[str, pd.DataFrame]:
    """Flagged rows per status, per (given, suggested) label pair, and what the bulk export
    of the retained rows without them gives up."""
    table = run.read_parquet(FILE)
    if table is None or table.empty:
        return {}
    out = {"Label issues among the retained and the removed rows": issue_summary(table),
           "Label issues per label pair (given → suggested)": label_pairs(table)}
    summary = getattr(run, "summary", None) or {}
    record = (summary.get("measures") or {}).get("label_issues")
    hardness = hardness_table((record or {}).get("bulk_hardness"),
                              (summary.get("curated_exports") or {}).get("apply_filter"))
    if not hardness.empty:
        out[HARDNESS_TITLE] = hardness
    return out


def row_columns(run) -> pd.DataFrame:
    """Explore's per-row columns: the label quality, whether the row is flagged and the
    suggested label (so Explore, filtered to the flagged rows and sorted by label quality,
    is the label-issues view: given vs suggested label beside the texts)."""
    table = run.read_parquet(FILE).set_index("row_id")
    return pd.DataFrame({QUALITY_COLUMN: table["label_quality"].round(4),
                         ISSUE_COLUMN: np.where(table["is_label_issue"], "flagged", "no"),
                         SUGGESTED_COLUMN: table["suggested_label"].astype(str)},
                        index=table.index)


MEASURE = Measure(
    name="label_issues",
    label="Label issues",
    description="Rows whose given label is probably wrong: confident learning (cleanlab) on "
                "cross-validated, group-aware probabilities of the full-input text model, "
                "the label quality averaged with AFLite's own held-out probability; how "
                "many of them AFLite retained and removed.",
    compute=compute,
    files=(FILE,),
    tables=tables,
    exports={"label_issues": FILE},
    order=42,
    # seconds per 100k rows: SECONDS up to MAX_ROWS; above it only the sample is scored (the
    # sample's seconds and 0.55 s per 100k of every row's bookkeeping, 10.8 s at 1M before
    # the shared pair features; on 2026-11-30's VM 2.85 s at 300k and 6.30 s at 1M,
    # bench_cores.py / bench_pipeline.py, where 3.6 s and 0.55 s per 100k planned 5.25 s and
    # 9.1 s)
    cost=lambda n: (along_points(SECONDS, n) * 100_000 / max(n, 1) if n <= MAX_ROWS
                    else 2.0 * MAX_ROWS / n + 0.45),
    row_columns=row_columns,
    options=(
        Option("n_splits", "Label issues: folds", 2, minimum=2, maximum=10,
               help="Cross-validation folds of the full-input model whose out-of-fold "
                    "probabilities score each row (more folds: each model trains on more "
                    "rows, at more cost)."),
        Option("max_rows", "Label issues: rows scored at most", MAX_ROWS, minimum=100,
               maximum=10_000_000,
               help="Above this many filtered rows, a seeded sample of whole groups of this "
                    "many rows is scored."),
    ),
)
