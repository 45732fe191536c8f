"""Data map of every filtered row from AFLite's own held-out predictions (Dataset Cartography).

Swayamdipta et al. (EMNLP 2020) place each example by the *confidence* (mean gold-label
probability) and *variability* (its standard deviation) of a model's predictions, and name three
regions: **easy-to-learn** (high confidence, low variability), **hard-to-learn** (low
confidence, low variability; often mislabelled) and **ambiguous** (high variability). AFLite
already trains many models per round and predicts every held-out row; the estimators record the
gold-label probabilities of those predictions at almost no cost (see
:mod:`aflite_core.filter._datamap` for the definitions). Each row's values come from the round
that decided it, the round of its ``predictability`` (= ``correctness`` here).

Regions (a partition of the scored rows), calibrated to the data: each threshold is a share of
the observed distribution, bounded by chance ``1/K`` (:func:`calibrated_thresholds`); fixed
cut-offs do not travel between datasets (with 0.5 and 0.2, *hard* held 85-93 % of every NLI
set and *ambiguous* none). They are drawn on the run's **label evidence** (its *region axis*,
:func:`region_axis`): the label issues' ``label_quality`` (the mean of AFLite's held-out
probability of the label and the full-input model's out-of-fold one) when that measure scored
every mapped row, else AFLite's ``confidence``. With the thresholds resolved
(:func:`assign_regions`, ``e`` the evidence):

* the **low band**: ``e <= hard_confidence`` (default: ``min(1/K,`` the quantile of
  ``hard_share + ambiguous_share``, 5 % + 5 %)): the rows the audit's models give their label
  least, where mislabelled rows gather;
* ``ambiguous``: the band's rows with ``variability >= ambiguous_variability`` (default: the
  half of the band, ``ambiguous_share / (hard_share + ambiguous_share)``, whose probability
  swings most across AFLite's partitions);
  and, wherever it lies, any row with ``variability >= swing_variability`` (0.25, half the
  most a probability's standard deviation can be: the models disagree outright, Dataset
  Cartography's ambiguous rows; not calibrated, and few NLI rows reach it);
* ``hard``: the band's other rows (low evidence, steady: Dataset Cartography's hard-to-learn);
* ``easy``: outside the band, ``e >= easy_confidence`` (default: ``max(1/K,`` its 67th
  percentile)``);
* ``medium``: otherwise.

High variability alone does not find mislabelled rows on text with linear models (AUROC
0.44-0.49 for planted flips; an *ambiguous* region drawn on it held them at 0.7-1.1x the base
rate), so *ambiguous* is the unsteady half of the low band (``docs/measures.md``, section 6).
The shares (``hard_share``, ``ambiguous_share``, ``easy_share``) are the measure's options;
absolute thresholds passed in ``measure_params`` override the calibrated ones. The summary
stores the shares, chance, the axis and the resolved thresholds.

Rows AFLite never held out (a warm-up row, an excluded row) are not in the file.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from aflite_core._validation import check_fraction
from aflite_core.chart_style import REFERENCE_COLOR, STATUS_COLORS
from aflite_core.io import compact_categorical, str_codes
from aflite_core.measures.registry import (
    Measure,
    MeasureContext,
    MeasureResult,
    MeasureSkipped,
    Option,
)

__all__ = ["FILE", "REGIONS", "SHARES", "THRESHOLDS", "assign_regions",
           "calibrated_thresholds", "datamap_table", "region_counts", "sample_points"]

#: The run-folder file: one row per scored row.
FILE = "datamap.parquet"
#: Region names, in display order.
REGIONS = ("easy", "ambiguous", "hard", "medium")
#: :data:`FILE`'s string columns the report's tables group by, and the values they average.
KEYS = ("status", "label", "region")
VALUES = ("confidence", "variability", "correctness")
#: Said when AFLite's partitions drew rows of grouped data (``MeasureContext.datamap_grouped``).
UNGROUPED = (
    "AFLite's partitions drew rows of grouped data (group_partitions='off', or a group too "
    "large for 'auto'), so a row may be scored by a model that trained on its group (the "
    "same claim with the other label, its premise's other hypotheses): confidence and the "
    "regions then mix memorisation into difficulty. Run with group_partitions='on' for a "
    "grouped data map.")


def unscored_warning(n_unscored: int, n_rows: int) -> str:
    """Said when some filtered rows were never held out in the round that decided them."""
    return (f"{n_unscored:,} of the {n_rows:,} filtered rows are not on the map: no partition "
            "held them out in the round that decided them (their group, or the row, trained "
            "every partition: about t^m of the rows with m partitions each training a share t, "
            "more in large groups), so they have no held-out prediction to place them by.")


#: The absolute thresholds' names, with the values :func:`assign_regions` falls back to when
#: given none (the measure calibrates them instead).
THRESHOLDS = {"ambiguous_variability": 0.2, "easy_confidence": 0.5, "hard_confidence": 0.3,
              "swing_variability": 0.25}
#: A row whose gold probability swings this much (standard deviation across the partitions
#: holding it out; half the 0.5 a probability can reach) is ambiguous wherever it lies: the
#: models disagree outright (Dataset Cartography's ambiguous rows). Not calibrated: on the
#: NLI sets with linear models few rows reach it (none of SNLI dev's; 0.6-3.9 % of SICK's).
SWING_VARIABILITY = THRESHOLDS["swing_variability"]
#: Default shares of the rows the calibrated regions hold (at most, for the band and easy).
SHARES = {"hard_share": 0.05, "ambiguous_share": 0.05, "easy_share": 0.33}
#: The region axes: the label issues' label quality, or AFLite's confidence alone.
AXES = ("label_quality", "confidence")
#: Label issues' file, whose ``label_quality`` the regions are drawn on when it covers the map.
LABEL_ISSUES_FILE = "label_issues.parquet"
#: Labels of multiple-choice rows (their confidence is the right choice's share).
CHOICE_LABELS = frozenset({"right", "wrong"})
#: Columns of :data:`FILE`.
COLUMNS = ("row_id", "status", "label", "confidence", "variability", "correctness",
           "n_heldout", "label_quality", "region")


def check_thresholds(ambiguous_variability: float = THRESHOLDS["ambiguous_variability"],
                     easy_confidence: float = THRESHOLDS["easy_confidence"],
                     hard_confidence: float = THRESHOLDS["hard_confidence"],
                     swing_variability: float = THRESHOLDS["swing_variability"]) -> dict:
    """Validated thresholds as a dict (each in [0, 1]; ``hard_confidence <= easy_confidence``).

    Raises
    ------
    TypeError, ValueError
        Naming the threshold.
    """
    out = {"ambiguous_variability": check_fraction("ambiguous_variability",
                                                   ambiguous_variability, closed=True),
           "easy_confidence": check_fraction("easy_confidence", easy_confidence, closed=True),
           "hard_confidence": check_fraction("hard_confidence", hard_confidence, closed=True),
           "swing_variability": check_fraction("swing_variability", swing_variability,
                                               closed=True)}
    if out["hard_confidence"] > out["easy_confidence"]:
        raise ValueError(f"hard_confidence: expected at most easy_confidence="
                         f"{out['easy_confidence']}, got {out['hard_confidence']}")
    return out


def assign_regions(evidence, variability, **thresholds) -> np.ndarray:
    """Region of each row (see the module docstring); ``""`` where a value is NaN.

    Parameters
    ----------
    evidence, variability : array-like of float
        The region axis' values (:func:`region_axis`: label quality or confidence) and
        AFLite's variability.
    **thresholds
        ``ambiguous_variability``, ``easy_confidence``, ``hard_confidence``,
        ``swing_variability`` (defaults :data:`THRESHOLDS`).

    Returns
    -------
    ndarray of str (object)
    """
    return _REGION_NAMES[region_codes(evidence, variability, **thresholds)]


def region_codes(evidence, variability, **thresholds) -> np.ndarray:
    """:func:`assign_regions` as int8 codes of :data:`_REGION_NAMES` (a byte a row)."""
    t = check_thresholds(**thresholds)
    e = np.asarray(evidence, dtype=float)
    v = np.asarray(variability, dtype=float)
    if e.shape != v.shape:
        raise ValueError(f"variability: expected shape {e.shape} like evidence, got {v.shape}")
    scored = np.isfinite(e) & np.isfinite(v)
    low = scored & (e <= t["hard_confidence"])
    ambiguous = (low & (v >= t["ambiguous_variability"])) \
        | (scored & (v >= t["swing_variability"]))
    easy = scored & ~low & ~ambiguous & (e >= t["easy_confidence"])
    # codes (then one str object per region): np.select of the strings made a fixed-width
    # copy and astype(object) a str per row (0.25 GB at 2.5M rows); np.select's of the codes
    # was 8 bytes a row: the first condition that holds, set last
    codes = np.full(e.shape, 4, dtype=np.int8)
    for code, where in ((3, scored), (2, easy), (1, low), (0, ambiguous)):
        codes[where] = code
    return codes


#: :func:`assign_regions`' values by code ("" for an unscored row).
_REGION_NAMES = np.array(["ambiguous", "hard", "easy", "medium", ""], dtype=object)


def check_shares(hard_share: float = SHARES["hard_share"],
                 ambiguous_share: float = SHARES["ambiguous_share"],
                 easy_share: float = SHARES["easy_share"]) -> dict:
    """Validated region shares as a dict (each in [0, 1], together at most 1).

    Raises
    ------
    TypeError, ValueError
        Naming the share.
    """
    out = {name: check_fraction(name, value, closed=True) for name, value in
           (("hard_share", hard_share), ("ambiguous_share", ambiguous_share),
            ("easy_share", easy_share))}
    band = out["hard_share"] + out["ambiguous_share"]
    if band + out["easy_share"] > 1 + 1e-12:
        raise ValueError(f"easy_share: expected at most 1 - hard_share - ambiguous_share = "
                         f"{1 - band:g}, got {out['easy_share']}")
    return out


def calibrated_thresholds(evidence, variability, *, n_classes: int, **shares) -> dict:
    """Absolute region thresholds from shares of the observed values, bounded by chance.

    Parameters
    ----------
    evidence, variability : array-like of float
        The scored rows' region-axis values (:func:`region_axis`) and variability (rows
        with a NaN in either are ignored).
    n_classes : int >= 2
        Labels (choices per question for multiple-choice data): chance is ``1 / n_classes``.
    **shares
        ``hard_share``, ``ambiguous_share``, ``easy_share`` (defaults :data:`SHARES`).

    Returns
    -------
    dict
        The keys :func:`assign_regions` takes: ``hard_confidence`` (the low band's top:
        ``min(1/K,`` the ``hard_share + ambiguous_share`` quantile of the evidence),
        ``ambiguous_variability`` (the band's rows at or above it, its share
        ``ambiguous_share / (hard_share + ambiguous_share)`` that varies most, are ambiguous;
        1 when none are), ``swing_variability`` (:data:`SWING_VARIABILITY`), ``easy_confidence``
        (``max(1/K,`` the ``1 - easy_share`` quantile)); each selects at most its share of
        the rows (tied values are never split).
    """
    s = check_shares(**shares)
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) \
            or n_classes < 2:
        raise ValueError(f"n_classes: expected an int of at least 2, got {n_classes!r}")
    chance = 1.0 / int(n_classes)
    e = np.asarray(evidence, dtype=float)
    v = np.asarray(variability, dtype=float)
    if e.shape != v.shape:
        raise ValueError(f"variability: expected shape {e.shape} like evidence, got {v.shape}")
    both = np.isfinite(e) & np.isfinite(v)
    if not both.all():  # (no copies of every row's when all are)
        e, v = e[both], v[both]
    if not len(e):
        return {"ambiguous_variability": 1.0, "hard_confidence": 0.0, "easy_confidence": 1.0,
                "swing_variability": SWING_VARIABILITY}
    easy = max(chance, _cut(e, s["easy_share"], top=True))
    band = min(chance, easy, _cut(e, s["hard_share"] + s["ambiguous_share"], top=False))
    low = v[e <= band]
    ambiguous = 1.0
    if len(low) and s["ambiguous_share"] > 0:  # the band split in the shares' proportion
        split = s["ambiguous_share"] / (s["hard_share"] + s["ambiguous_share"])
        ambiguous = _cut(low, split, top=True)
    return check_thresholds(ambiguous_variability=min(ambiguous, 1.0),
                            easy_confidence=easy, hard_confidence=band,
                            swing_variability=SWING_VARIABILITY)


def _cut(values: np.ndarray, share: float, *, top: bool) -> float:
    """The threshold that selects at most ``share`` of ``values`` (the lowest with
    ``<= cut``, the highest with ``>= cut`` when ``top``), ties never splitting: the
    share's quantile, moved inside where tied values straddle it."""
    s = np.sort(values)
    if top:  # descending, negated in the sorted copy (not a second one)
        s = np.negative(s[::-1], out=s[::-1])
    k = int(np.floor(share * len(s) + 1e-9))
    if k == 0:
        cut = -np.inf
    else:
        cut = s[k - 1]
        if k < len(s) and s[k] == cut:  # ties across the boundary: stop before them
            first = int(np.searchsorted(s, cut, side="left"))
            cut = s[first - 1] if first > 0 else -np.inf
    if top:
        return 1.0 if not np.isfinite(cut) else float(-cut)
    return 0.0 if not np.isfinite(cut) else float(cut)


def n_classes_of(labels, groups=None) -> int:
    """K for chance ``1/K``: the number of labels, or for multiple-choice rows (labelled
    ``right`` / ``wrong``, grouped by question) the median number of choices per question."""
    values = str_codes(labels)[1].tolist()  # the distinct labels as texts
    if groups is not None and set(values) <= CHOICE_LABELS:
        sizes = pd.Series(np.asarray(groups)).value_counts().to_numpy()
        return max(int(np.median(sizes)), 2)
    return max(len(values), 2)


#: How :data:`FILE`'s categorical columns are written (``MeasureResult.astype``): as the
#: strings of the file as it always was.
TABLE_TYPES = {"status": "string", "label": "string", "region": "string"}


def datamap_table(row_ids, status, labels, confidence, variability, correctness, n_heldout,
                  label_quality=None, *, axis: str = "confidence", **thresholds
                  ) -> pd.DataFrame:
    """The :data:`FILE` table of the scored rows (``n_heldout > 0``), input order kept.

    ``label_quality`` (NaN where absent; all NaN when None) is stored beside AFLite's values;
    the regions are drawn on ``axis`` (:data:`AXES`, see :func:`region_axis`). ``status``,
    ``label`` and ``region`` are categorical (1 byte a row, not an Arrow string of 12-20),
    written as strings (:data:`TABLE_TYPES`). When every row is scored the table holds the
    arrays given (no copy): give arrays the caller no longer changes.
    """
    # the ids as they are: object only for str ids (a Python int per row otherwise; the same
    # int64 column in the file)
    row_ids = np.asarray(row_ids)
    n_heldout = np.asarray(n_heldout, dtype=np.int64)
    confidence = np.asarray(confidence, dtype=float)
    # the scored rows taken from each column before the table is made (not a table of every
    # filtered row, then its copy: 0.25 GB each at 5M rows)
    rows = np.flatnonzero((n_heldout > 0) & np.isfinite(confidence))
    every = len(rows) == len(n_heldout)  # the caller took them (compute): no second copy

    def pick(values: np.ndarray) -> np.ndarray:
        return values if every else values[rows]

    frame = pd.DataFrame({
        "row_id": pick(row_ids),
        "status": _categorical(status, pick),
        "label": _categorical(labels, pick),
        "confidence": pick(confidence),
        "variability": pick(np.asarray(variability, dtype=float)),
        "correctness": pick(np.asarray(correctness, dtype=float)),
        "n_heldout": pick(n_heldout),
        "label_quality": (np.full(len(rows), np.nan) if label_quality is None
                          else pick(np.asarray(label_quality, dtype=float))),
    }, copy=False)  # the columns taken here as they are: not stacked into copies by dtype
    frame["region"] = compact_categorical(
        region_codes(region_axis(frame, axis), frame["variability"], **thresholds),
        _REGION_NAMES)
    return frame


def _categorical(values, pick) -> pd.Categorical:
    """``pd.Categorical`` of ``pick(values)`` as strings; a categorical is taken as it is
    (its unused categories dropped), not made objects and factorized again."""
    if isinstance(values, pd.Categorical):
        return pd.Categorical(pick(values)).remove_unused_categories()
    return pd.Categorical(pick(np.asarray(values, dtype=object)))


def region_axis(table: pd.DataFrame, axis: str = "confidence") -> np.ndarray:
    """The values the regions are drawn on: ``table``'s ``label_quality`` for ``axis=
    "label_quality"``, else its ``confidence`` (also for a table from before the column)."""
    if axis not in AXES:
        raise ValueError(f"axis: expected one of {AXES}, got {axis!r}")
    column = axis if axis in table else "confidence"
    return table[column].to_numpy(dtype=float)


def axis_of(run) -> str:
    """The region axis of a run's data map (``confidence`` for a run from before it)."""
    axis = _info(run).get("axis")
    return axis if axis in AXES else "confidence"


#: The region axes' names on the map.
AXIS_TITLES = {"label_quality": "label quality (AFLite + full-input model)",
               "confidence": "confidence"}


def region_counts(table: pd.DataFrame, by: str) -> pd.DataFrame:
    """Rows per region (columns) for each value of ``by`` (rows), with a total row and column.

    Exact counts over every row of ``table`` (never a sample); ``share`` columns give each
    region's share of the row's total.
    """
    regions = [r for r in REGIONS if (table["region"] == r).any()] or list(REGIONS[:3])
    counts = _crosstab(table[by], table["region"])
    counts = counts.reindex(columns=regions, fill_value=0)
    counts.loc["all"] = counts.sum(axis=0)
    counts["total"] = counts.sum(axis=1)
    for region in regions:
        counts[f"share {region}"] = counts[region] / counts["total"].where(counts["total"] > 0)
    return counts.rename_axis(by).reset_index()


def _crosstab(rows: pd.Series, columns: pd.Series) -> pd.DataFrame:
    """``pd.crosstab`` of the two columns as strings (sorted names, the pairs seen), counted
    on their codes when both are categoricals (no str per row: a run's 5M rows)."""
    if not all(isinstance(s.dtype, pd.CategoricalDtype) for s in (rows, columns)) or (
            rows.isna().any() or columns.isna().any()):
        return pd.crosstab(rows.astype(str), columns.astype(str))
    counts = pd.crosstab(rows.cat.codes, columns.cat.codes)  # the code pairs seen
    counts.index = pd.Index(rows.cat.categories.astype(str)[counts.index], name=rows.name)
    counts.columns = pd.Index(columns.cat.categories.astype(str)[counts.columns],
                              name=columns.name)
    return counts.sort_index().sort_index(axis=1)


def sample_points(table: pd.DataFrame, *, max_points: int, seed: int = 0
                  ) -> tuple[pd.DataFrame, int]:
    """A seeded uniform sample of at most ``max_points`` rows of ``table`` (for drawing only),
    and the number of rows before sampling."""
    total = len(table)
    if total > max_points:
        rng = np.random.default_rng(seed)
        table = table.iloc[np.sort(rng.choice(total, size=max_points, replace=False))]
    return table.reset_index(drop=True), total


def _info(run) -> dict:
    info = (run.measures.get("datamap") or {}) if hasattr(run, "measures") else {}
    return info if isinstance(info, dict) else {}


def thresholds_of(run) -> dict:
    """The absolute thresholds a run's data map was computed with (the fixed defaults when
    not recorded)."""
    return {**THRESHOLDS, **(_info(run).get("thresholds") or {})}


def shares_of(run) -> dict:
    """The region shares a run's data map was calibrated with (:data:`SHARES` for a run from
    before calibration)."""
    return {**SHARES, **(_info(run).get("shares") or {})}


def chance_of(run, table: pd.DataFrame | None = None) -> int:
    """K of a run's data map (its ``n_classes``; else the labels of ``table``)."""
    stored = _info(run).get("n_classes")
    if stored:
        return int(stored)
    return n_classes_of(table["label"]) if table is not None and len(table) else 2


# --------------------------------------------------------------------------- registry entry


def compute(ctx: MeasureContext) -> MeasureResult:
    """The data map of the filtered rows, from the AFLite run (no model is trained)."""
    if ctx.datamap is None or not (np.asarray(ctx.datamap["n_heldout"]) > 0).any():
        raise MeasureSkipped(
            "this run's filter made no held-out predictions (the Z-filter tests features "
            "against the labels and trains no model), and a data map is drawn from them; "
            "AFLite's runs have one")
    params = MEASURE.check_params(ctx.params, n_rows=len(ctx.keep))
    shares = check_shares(**{k: params[k] for k in SHARES})
    dm = ctx.datamap
    scored = np.flatnonzero(np.asarray(dm["n_heldout"]) > 0)  # positions: the map's rows
    n_filtered = len(dm)
    labels = ctx.label_codes(scored)  # a byte a row, not the labels' objects and codes
    n_classes = _n_classes(labels[1], ctx.groups, scored)
    quality, axis, why = _label_quality(ctx, scored)
    evidence = quality if axis == "label_quality" else dm["confidence"].to_numpy()[scored]
    thresholds = calibrated_thresholds(evidence, dm["variability"].to_numpy()[scored],
                                       n_classes=n_classes, **shares)
    del evidence
    fixed = {k: params[k] for k in THRESHOLDS if params[k] is not None}
    thresholds = check_thresholds(**{**thresholds, **fixed})
    # the table's rows taken from each column first (datamap_table takes the same ones):
    # no column of every filtered row beside the table (5 of them, 40 MB each at 5M rows)
    finite = np.isfinite(dm["confidence"].to_numpy(dtype=float)[scored])
    all_finite = bool(finite.all())
    rows = scored if all_finite else scored[finite]
    label = compact_categorical(labels[0] if all_finite else labels[0][finite], labels[1])
    del labels
    every = len(rows) == n_filtered  # every filtered row on the map: its columns as they are

    def take(values: np.ndarray) -> np.ndarray:
        return values if every else values[rows]

    at = ctx.score_rows(rows)  # positions, not the scores indexed by row id (a copy)
    predictability = ctx.scores["predictability"].to_numpy(dtype=float)[at]
    predictability[at < 0] = np.nan  # a row not in the scores
    del at
    status = ctx.scores_categorical("status", rows)
    table = datamap_table(take(ctx.row_ids), ctx.statuses(rows) if status is None else status,
                          label, take(dm["confidence"].to_numpy()),
                          take(dm["variability"].to_numpy()), predictability,
                          take(dm["n_heldout"].to_numpy()),
                          quality if quality is None or all_finite else quality[finite],
                          axis=axis, **thresholds)
    counts = table["region"].value_counts()
    warnings = [] if ctx.datamap_grouped else [UNGROUPED]
    if why:
        warnings.append(why)
    n_unscored = n_filtered - len(scored)
    if n_unscored:
        warnings.append(unscored_warning(n_unscored, n_filtered))
    return MeasureResult(tables={FILE: table}, astype={FILE: TABLE_TYPES},
                         info={"thresholds": thresholds, "shares": shares,
                               "axis": axis, "n_unscored": n_unscored,
                               "grouped": bool(ctx.datamap_grouped), "warnings": warnings,
                               "n_classes": n_classes, "chance": 1.0 / n_classes,
                               "fixed_thresholds": sorted(fixed), "n_rows": int(len(table)),
                               "regions": {r: int(counts.get(r, 0)) for r in REGIONS}})


def _n_classes(classes: np.ndarray, groups: np.ndarray | None, rows: np.ndarray) -> int:
    """:func:`n_classes_of` of the labels ``classes`` present at ``rows``, whose ``groups``
    count only for multiple-choice rows (taken then)."""
    choice = groups is not None and set(classes.tolist()) <= CHOICE_LABELS
    return n_classes_of(classes, groups[rows] if choice else None)


def _label_quality(ctx: MeasureContext, scored: np.ndarray
                   ) -> tuple[np.ndarray | None, str, str]:
    """The label issues' ``label_quality`` of the filtered rows at ``scored`` (positions;
    NaN where absent), the region axis it allows, and why the axis is ``confidence`` when it
    is (``""`` when it is not, or when the label issues were not asked for)."""
    issues = ctx.earlier.get(LABEL_ISSUES_FILE)
    if issues is None or issues.empty:
        return None, "confidence", ""
    values = issues.set_index("row_id")["label_quality"]
    values = values[~values.index.duplicated()]
    quality = values.reindex(pd.Index(ctx.row_ids[scored], dtype=values.index.dtype)
                             ).to_numpy(dtype=float)
    missing = int((~np.isfinite(quality)).sum())
    if missing:
        return quality, "confidence", (
            f"the label issues scored {len(scored) - missing:,} of the "
            f"{len(scored):,} mapped rows (a sample above their max_rows), so the "
            "regions are drawn on AFLite's confidence alone, which finds mislabelled rows "
            "less well; raise the label issues' max_rows to draw them on label quality")
    return quality, "label_quality", ""


def tables(run) -> dict[str, pd.DataFrame]:
    """Region counts by status and by label, from :data:`FILE`."""
    # the columns used, the strings as sorted codes (a row of 5M is 100 bytes whole)
    present = run.parquet_columns(FILE)
    table = run.read_parquet(FILE, columns=[c for c in (*KEYS, *VALUES, "label_quality")
                                            if c in present], categories=KEYS)
    if table is None or table.empty:
        return {}
    values = list(VALUES)
    if "label_quality" in table and table["label_quality"].notna().any():
        values.insert(0, "label_quality")
    means = table.groupby(["status", "region"], observed=True, sort=True)[
        values].mean().reset_index()
    for key in ("status", "region"):  # the few groups' names as the strings they are
        means[key] = means[key].astype(str)
    return {
        "Rows per data-map region, by status (exact counts)": region_counts(table, "status"),
        "Rows per data-map region, by label (exact counts)": region_counts(table, "label"),
        "Mean values per status and region": means,
        "Region thresholds": threshold_table(run),
    }


def threshold_table(run) -> pd.DataFrame:
    """The resolved thresholds with the rule each came from (share of rows, chance, or a
    fixed value)."""
    t, s, info = thresholds_of(run), shares_of(run), _info(run)
    fixed = set(info.get("fixed_thresholds") or [])
    k = info.get("n_classes")
    chance = f"chance 1/{k} = {1 / k:.3f}" if k else "chance"
    on = "label quality" if axis_of(run) == "label_quality" else "confidence"
    band = s["hard_share"] + s["ambiguous_share"]
    if "shares" not in info:
        rules = dict.fromkeys(t, "fixed (a run from before calibrated regions)")
    elif "axis" not in info:
        rules = dict.fromkeys(t, "a run from before the low band (its ambiguous region was "
                                 "the rows of highest variability, at any confidence)")
    else:
        rules = {
            "ambiguous_variability": f"the band's {s['ambiguous_share'] / band:.0%} that vary "
                                     "most are ambiguous, the rest hard" if band else "-",
            "hard_confidence": f"top of the low band: lowest {band:.0%} of {on}, at most "
                               f"{chance}",
            "easy_confidence": f"highest {s['easy_share']:.0%} of {on}, at least {chance}",
            "swing_variability": "fixed: a swing this large is ambiguous anywhere",
        }
    return pd.DataFrame({"threshold": list(t), "value": [float(v) for v in t.values()],
                         "rule": ["fixed (given)" if name in fixed else rules.get(name, "")
                                  for name in t]})


#: Points the static data map draws at most (a seeded uniform sample; counts stay exact).
FIGURE_POINTS = 4000


def variability_axis_max(variability) -> float:
    """The variability axis' upper end: a little past the largest value (so the points fill
    the figure; SNLI's stay below 0.2), at least 0.1 and at most 0.5 (a probability's
    largest standard deviation)."""
    v = np.asarray(variability, dtype=float)
    v = v[np.isfinite(v)]
    top = float(v.max()) if len(v) else 0.5
    return float(min(max(0.1, round(top * 1.1 + 0.005, 2)), 0.5))


def earlier_rule(run) -> bool:
    """True for a run whose regions came from the rule before the low band (calibrated
    shares, ambiguous = the rows of highest variability at any confidence)."""
    info = _info(run)
    return "shares" in info and "axis" not in info


def add_region_lines(fig, thresholds: dict, *, labels: bool = True, x_max: float = 0.5,
                     y_title: str = "confidence", earlier: bool = False):
    """The region thresholds on an evidence × variability figure: the low band's top
    (dotted, across), the variability splitting it into hard (left) and ambiguous (right;
    dashed, within the band) and easy (dashed), and the axes' ranges (variability up to
    ``x_max``, see :func:`variability_axis_max`; ``y_title`` names the region axis). With
    ``earlier`` (:func:`earlier_rule`), a run's stored thresholds of the rule before: the
    ambiguous line across every confidence, hard below its line. The HTML report's map and
    the dashboard's interactive one both use it."""
    def text(s: str) -> dict:
        return {"annotation_text": s} if labels else {}

    band = thresholds["hard_confidence"]
    split = thresholds["ambiguous_variability"]
    fig.add_hline(y=thresholds["easy_confidence"], line_dash="dash",
                  line_color=REFERENCE_COLOR, **text("easy ↑"))
    x_top = max(x_max, 1.05 * split) if split < 1 or earlier else x_max
    if earlier:  # ambiguous at any confidence, hard below its line
        fig.add_vline(x=split, line_dash="dash", line_color=REFERENCE_COLOR,
                      **text("ambiguous →"))
        if band < thresholds["easy_confidence"]:
            fig.add_hline(y=band, line_dash="dot", line_color=REFERENCE_COLOR,
                          **text("hard ↓"))
    else:
        swing = thresholds.get("swing_variability", 1.0)
        if swing < x_top:
            fig.add_vline(x=swing, line_dash="dashdot", line_color=REFERENCE_COLOR,
                          **text("ambiguous →"))
        if band > 0:
            fig.add_hline(y=band, line_dash="dot", line_color=REFERENCE_COLOR,
                          **text("hard ↙ · ambiguous ↘"))
            if split < 1:
                fig.add_shape(type="line", x0=split, x1=split, y0=0, y1=band,
                              line={"dash": "dash", "color": REFERENCE_COLOR, "width": 1})
    fig.update_xaxes(title="variability", range=[0, x_top])
    fig.update_yaxes(title=y_title, range=[0, 1.02])
    return fig


def figures(run) -> list:
    """The region axis (label quality or confidence) × variability of the scored rows by
    status (a seeded sample of at most :data:`FIGURE_POINTS`; the region counts in the tables
    are exact), with the thresholds."""
    import plotly.graph_objects as go  # lazy: +20 ms to import

    axis = axis_of(run)
    present = run.parquet_columns(FILE)
    table = run.read_parquet(FILE, columns=[c for c in ("status", "variability", *AXES)
                                            if c in present], categories=("status",))
    if table is None or table.empty:
        return []
    points, total = sample_points(table, max_points=FIGURE_POINTS, seed=0)
    y = region_axis(points, axis)
    chart = go.Figure()
    for status in ("removed", "retained"):
        part = (points["status"].astype(str) == status).to_numpy()
        chart.add_trace(go.Scattergl(
            x=points["variability"][part], y=y[part], mode="markers", name=status,
            marker={"color": STATUS_COLORS[status], "size": 4, "opacity": 0.6}))
    add_region_lines(chart, thresholds_of(run), y_title=AXIS_TITLES[axis],
                     x_max=variability_axis_max(table["variability"]), earlier=earlier_rule(run))
    drawn = f" ({len(points):,} of {total:,} rows drawn)" if len(points) < total else ""
    chart.update_layout(title=f"Data map: {AXIS_TITLES[axis].split(' (')[0]} × variability "
                              f"of the held-out predictions{drawn}", height=460)
    return [chart]


def row_columns(run) -> pd.DataFrame:
    """Explore's per-row columns: ``confidence``, ``variability``, ``data-map region``."""
    table = run.read_parquet(FILE)
    out = table.set_index("row_id")[["confidence", "variability", "region"]]
    return out.rename(columns={"region": "data-map region"})


MEASURE = Measure(
    name="datamap",
    label="Data map (confidence × variability)",
    description="Each filtered row placed by the confidence (mean gold-label probability) and "
                "variability (its standard deviation) of the AFLite models that held it out, "
                "in the round that decided it, as in Dataset Cartography (Swayamdipta et al., "
                "2020). Regions are shares of the rows bounded by chance, drawn on the label "
                "evidence (the label issues' label quality when computed, else confidence): "
                "the low band is split into hard (steady) and ambiguous (swinging), where "
                "mislabelled rows gather; easy above. Costs no extra training.",
    compute=compute,
    files=(FILE,),
    tables=tables,
    figures=figures,
    exports={"datamap": FILE},
    order=43,  # after the label issues (42), whose label quality it reads
    reads=(LABEL_ISSUES_FILE,),
    cost=0.1,  # seconds per 100k rows (bench_pipeline.py)
    row_columns=row_columns,
    options=(
        Option("hard_share", "Hard: share of rows at most", SHARES["hard_share"],
               minimum=0.0, maximum=0.5,
               help="Hard-to-learn: the steadier part of the low band (the rows of lowest "
                    "label evidence, only below chance 1/K)."),
        Option("ambiguous_share", "Ambiguous: share of rows", SHARES["ambiguous_share"],
               minimum=0.0, maximum=0.5,
               help="Ambiguous: the part of the low band whose gold probability varies most "
                    "across the partitions holding the rows out. The band holds hard + "
                    "ambiguous shares of the rows."),
        Option("easy_share", "Easy: share of rows at most", SHARES["easy_share"],
               minimum=0.0, maximum=0.9,
               help="Easy-to-learn: the rows of highest label evidence, at most this share "
                    "of them and only above chance (1/K)."),
        *(Option(name, f"Data map: fixed {name.replace('_', ' ')}", None, kind="float",
                 minimum=0.0, maximum=1.0, optional=True, form=False,
                 help=f"A fixed {name.replace('_', ' ')} instead of the calibrated one "
                      "(none: calibrated from the shares above).")
          for name in THRESHOLDS),
    ),
)
