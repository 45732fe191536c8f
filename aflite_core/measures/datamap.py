"""Data map of every filtered row from AFLite's own held-out predictions (Dataset Cartography).

Swayamdipta et al. (EMNLP 2020) place each example by the *confidence* (mean gold-label
probability) and *variability* (its standard deviation) of a model's predictions, and name three
regions: **easy-to-learn** (high confidence, low variability), **hard-to-learn** (low
confidence, low variability; often mislabelled) and **ambiguous** (high variability). AFLite
already trains many models per round and predicts every held-out row; the estimators record the
gold-label probabilities of those predictions at almost no cost (see
:mod:`aflite_core.filter.datamap` for the definitions). Each row's values come from the round
that decided it, the round of its ``predictability`` (= ``correctness`` here).

Regions (a partition of the scored rows), calibrated to the data: each threshold is a share of
the observed distribution, bounded by chance ``1/K`` (:func:`calibrated_thresholds`); fixed
cut-offs do not travel between datasets (with 0.5 and 0.2, *hard* held 85-93 % of every NLI
set and *ambiguous* none). With the thresholds resolved (:func:`assign_regions`):

* ``ambiguous``: ``variability >= ambiguous_variability`` (default: its 90th percentile, and at
  least :data:`MIN_AMBIGUOUS_VARIABILITY`);
* ``hard``: otherwise, ``confidence <= hard_confidence`` (default: ``min(1/K, its 10th
  percentile)``: at most a tenth of the rows, given their label less than chance);
* ``easy``: otherwise, ``confidence >= easy_confidence`` (default: ``max(1/K, its 67th
  percentile)``);
* ``medium``: otherwise.

The shares (``hard_share``, ``ambiguous_share``, ``easy_share``) are the measure's options;
absolute thresholds passed in ``measure_params`` override the calibrated ones. The summary
stores the shares, chance and the resolved thresholds.

Rows AFLite never held out (a warm-up row, an excluded row) are not in the file.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from aflite_core._validation import check_fraction
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
#: given none (Dataset Cartography's fixed cut-offs; the measure calibrates them instead).
THRESHOLDS = {"ambiguous_variability": 0.2, "easy_confidence": 0.5, "hard_confidence": 0.5}
#: Default shares of the rows the calibrated regions hold (at most, for hard and easy).
SHARES = {"hard_share": 0.10, "ambiguous_share": 0.10, "easy_share": 0.33}
#: Below this variability no row is ambiguous, whatever its quantile: a gold probability that
#: swings by less than ±0.05 between training partitions is not a disagreement.
MIN_AMBIGUOUS_VARIABILITY = 0.05
#: Labels of multiple-choice rows (their confidence is the right choice's share).
CHOICE_LABELS = frozenset({"right", "wrong"})
#: Columns of :data:`FILE`.
COLUMNS = ("row_id", "status", "label", "confidence", "variability", "correctness",
           "n_heldout", "region")


def check_thresholds(ambiguous_variability: float = THRESHOLDS["ambiguous_variability"],
                     easy_confidence: float = THRESHOLDS["easy_confidence"],
                     hard_confidence: float = THRESHOLDS["hard_confidence"]) -> dict:
    """Validated thresholds as a dict (each in [0, 1]; ``hard_confidence <= easy_confidence``).

    Raises
    ------
    TypeError, ValueError
        Naming the threshold.
    """
    out = {"ambiguous_variability": check_fraction("ambiguous_variability",
                                                   ambiguous_variability, closed=True),
           "easy_confidence": check_fraction("easy_confidence", easy_confidence, closed=True),
           "hard_confidence": check_fraction("hard_confidence", hard_confidence, closed=True)}
    if out["hard_confidence"] > out["easy_confidence"]:
        raise ValueError(f"hard_confidence: expected at most easy_confidence="
                         f"{out['easy_confidence']}, got {out['hard_confidence']}")
    return out


def assign_regions(confidence, variability, **thresholds) -> np.ndarray:
    """Region of each row (see the module docstring); ``""`` where a value is NaN.

    Parameters
    ----------
    confidence, variability : array-like of float
    **thresholds
        ``ambiguous_variability``, ``easy_confidence``, ``hard_confidence`` (defaults
        :data:`THRESHOLDS`).

    Returns
    -------
    ndarray of str (object)
    """
    t = check_thresholds(**thresholds)
    c = np.asarray(confidence, dtype=float)
    v = np.asarray(variability, dtype=float)
    if c.shape != v.shape:
        raise ValueError(f"variability: expected shape {c.shape} like confidence, got {v.shape}")
    scored = np.isfinite(c) & np.isfinite(v)
    ambiguous = scored & (v >= t["ambiguous_variability"])
    easy = scored & ~ambiguous & (c >= t["easy_confidence"])
    hard = scored & ~ambiguous & ~easy & (c <= t["hard_confidence"])
    return np.select([ambiguous, easy, hard, scored], ["ambiguous", "easy", "hard", "medium"],
                     default="").astype(object)


def check_shares(hard_share: float = SHARES["hard_share"],
                 ambiguous_share: float = SHARES["ambiguous_share"],
                 easy_share: float = SHARES["easy_share"]) -> dict:
    """Validated region shares as a dict (each in [0, 1]; ``hard_share + easy_share <= 1``).

    Raises
    ------
    TypeError, ValueError
        Naming the share.
    """
    out = {name: check_fraction(name, value, closed=True) for name, value in
           (("hard_share", hard_share), ("ambiguous_share", ambiguous_share),
            ("easy_share", easy_share))}
    if out["hard_share"] + out["easy_share"] > 1:
        raise ValueError(f"easy_share: expected at most 1 - hard_share = "
                         f"{1 - out['hard_share']:g}, got {out['easy_share']}")
    return out


def calibrated_thresholds(confidence, variability, *, n_classes: int, **shares) -> dict:
    """Absolute region thresholds from shares of the observed values, bounded by chance.

    Parameters
    ----------
    confidence, variability : array-like of float
        The scored rows' values (NaN ignored).
    n_classes : int >= 2
        Labels (choices per question for multiple-choice data): chance is ``1 / n_classes``.
    **shares
        ``hard_share``, ``ambiguous_share``, ``easy_share`` (defaults :data:`SHARES`).

    Returns
    -------
    dict
        ``ambiguous_variability`` (the ``1 - ambiguous_share`` quantile of variability, at
        least :data:`MIN_AMBIGUOUS_VARIABILITY`), ``hard_confidence`` (``min(1/K,`` the
        ``hard_share`` quantile of confidence), ``easy_confidence`` (``max(1/K,`` the
        ``1 - easy_share`` quantile); each selects at most its share of the rows (tied values
        are never split); the keys :func:`assign_regions` takes.
    """
    s = check_shares(**shares)
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) \
            or n_classes < 2:
        raise ValueError(f"n_classes: expected an int of at least 2, got {n_classes!r}")
    chance = 1.0 / int(n_classes)
    c = np.asarray(confidence, dtype=float)
    v = np.asarray(variability, dtype=float)
    c, v = c[np.isfinite(c)], v[np.isfinite(v)]
    if not len(c) or not len(v):
        return {"ambiguous_variability": 0.5, "hard_confidence": 0.0, "easy_confidence": 1.0}
    hard = min(chance, _cut(c, s["hard_share"], top=False))
    easy = max(chance, _cut(c, s["easy_share"], top=True))
    ambiguous = max(MIN_AMBIGUOUS_VARIABILITY, _cut(v, s["ambiguous_share"], top=True))
    return check_thresholds(ambiguous_variability=min(ambiguous, 1.0),
                            easy_confidence=easy, hard_confidence=min(hard, easy))


def _cut(values: np.ndarray, share: float, *, top: bool) -> float:
    """The threshold that selects at most ``share`` of ``values`` (the lowest with
    ``<= cut``, the highest with ``>= cut`` when ``top``), ties never splitting: the
    share's quantile, moved inside where tied values straddle it."""
    s = np.sort(values)
    if top:
        s = -s[::-1]
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
    values = pd.unique(np.asarray(labels, dtype=object).astype(str))
    if groups is not None and set(values) <= CHOICE_LABELS:
        sizes = pd.Series(np.asarray(groups)).value_counts().to_numpy()
        return max(int(np.median(sizes)), 2)
    return max(len(values), 2)


def datamap_table(row_ids, status, labels, confidence, variability, correctness, n_heldout,
                  **thresholds) -> pd.DataFrame:
    """The :data:`FILE` table of the scored rows (``n_heldout > 0``), input order kept."""
    frame = pd.DataFrame({
        "row_id": np.asarray(row_ids, dtype=object),
        "status": pd.array(np.asarray(status, dtype=object).astype(str), dtype="string"),
        "label": pd.array(np.asarray(labels, dtype=object).astype(str), dtype="string"),
        "confidence": np.asarray(confidence, dtype=float),
        "variability": np.asarray(variability, dtype=float),
        "correctness": np.asarray(correctness, dtype=float),
        "n_heldout": np.asarray(n_heldout, dtype=np.int64),
    })
    frame = frame[(frame["n_heldout"] > 0).to_numpy()
                  & np.isfinite(frame["confidence"].to_numpy())].reset_index(drop=True)
    frame["region"] = pd.array(assign_regions(frame["confidence"], frame["variability"],
                                              **thresholds), dtype="string")
    return frame


def region_counts(table: pd.DataFrame, by: str) -> pd.DataFrame:
    """Rows per region (columns) for each value of ``by`` (rows), with a total row and column.

    Exact counts over every row of ``table`` (never a sample); ``share`` columns give each
    region's share of the row's total.
    """
    regions = [r for r in REGIONS if (table["region"] == r).any()] or list(REGIONS[:3])
    counts = pd.crosstab(table[by].astype(str), table["region"].astype(str))
    counts = counts.reindex(columns=regions, fill_value=0)
    counts.loc["all"] = counts.sum(axis=0)
    counts["total"] = counts.sum(axis=1)
    for region in regions:
        counts[f"share {region}"] = counts[region] / counts["total"].where(counts["total"] > 0)
    return counts.rename_axis(by).reset_index()


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
    shares = check_shares(**{k: v for k, v in ctx.params.items() if k in SHARES})
    scores = ctx.scores.set_index("row_id")
    row_ids = ctx.row_ids
    own = scores.reindex(pd.Index(row_ids, dtype=scores.index.dtype))
    dm = ctx.datamap
    scored = np.asarray(dm["n_heldout"]) > 0
    n_classes = n_classes_of(np.asarray(ctx.y)[scored],
                             None if ctx.groups is None else np.asarray(ctx.groups)[scored])
    thresholds = calibrated_thresholds(dm["confidence"].to_numpy()[scored],
                                       dm["variability"].to_numpy()[scored],
                                       n_classes=n_classes, **shares)
    fixed = {k: v for k, v in ctx.params.items() if k in THRESHOLDS}
    thresholds = check_thresholds(**{**thresholds, **fixed})
    table = datamap_table(row_ids, own["status"].to_numpy(dtype=object), ctx.y,
                          dm["confidence"].to_numpy(), dm["variability"].to_numpy(),
                          own["predictability"].to_numpy(dtype=float),
                          dm["n_heldout"].to_numpy(), **thresholds)
    counts = table["region"].value_counts()
    warnings = [] if ctx.datamap_grouped else [UNGROUPED]
    n_unscored = int((~scored).sum())
    if n_unscored:
        warnings.append(unscored_warning(n_unscored, len(scored)))
    return MeasureResult(tables={FILE: table},
                         info={"thresholds": thresholds, "shares": shares,
                               "n_unscored": n_unscored,
                               "grouped": bool(ctx.datamap_grouped), "warnings": warnings,
                               "n_classes": n_classes, "chance": 1.0 / n_classes,
                               "fixed_thresholds": sorted(fixed), "n_rows": int(len(table)),
                               "regions": {r: int(counts.get(r, 0)) for r in REGIONS}})


def tables(run) -> dict[str, pd.DataFrame]:
    """Region counts by status and by label, from :data:`FILE`."""
    table = run.read_parquet(FILE)
    if table is None or table.empty:
        return {}
    means = table.groupby(["status", "region"], observed=True, sort=True)[
        ["confidence", "variability", "correctness"]].mean().reset_index()
    return {
        "Rows per data-map region, by status (exact counts)": region_counts(table, "status"),
        "Rows per data-map region, by label (exact counts)": region_counts(table, "label"),
        "Mean confidence, variability and correctness per status and region": means,
        "Region thresholds": threshold_table(run),
    }


def threshold_table(run) -> pd.DataFrame:
    """The resolved thresholds with the rule each came from (share of rows, chance, or a
    fixed value)."""
    t, s, info = thresholds_of(run), shares_of(run), _info(run)
    fixed = set(info.get("fixed_thresholds") or [])
    k = info.get("n_classes")
    chance = f"chance 1/{k} = {1 / k:.3f}" if k else "chance"
    if "shares" not in info:
        rules = dict.fromkeys(t, "fixed (a run from before calibrated regions)")
    else:
        rules = {
            "ambiguous_variability": f"{s['ambiguous_share']:.0%} of rows vary most "
                                     f"(at least {MIN_AMBIGUOUS_VARIABILITY})",
            "hard_confidence": f"lowest {s['hard_share']:.0%} of confidence, at most {chance}",
            "easy_confidence": f"highest {s['easy_share']:.0%} of confidence, at least "
                               f"{chance}",
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


def add_region_lines(fig, thresholds: dict, *, labels: bool = True, x_max: float = 0.5):
    """The region thresholds on a confidence × variability figure: ambiguous (variability,
    dashed), easy (confidence, dashed) and hard (confidence, dotted), and the axes' ranges
    (variability up to ``x_max``, see :func:`variability_axis_max`). The HTML report's map
    and the dashboard's interactive one both use it."""
    from aflite_core.chart_style import REFERENCE_COLOR

    def text(s: str) -> dict:
        return {"annotation_text": s} if labels else {}

    fig.add_vline(x=thresholds["ambiguous_variability"], line_dash="dash",
                  line_color=REFERENCE_COLOR, **text("ambiguous →"))
    fig.add_hline(y=thresholds["easy_confidence"], line_dash="dash",
                  line_color=REFERENCE_COLOR, **text("easy ↑"))
    if thresholds["hard_confidence"] < thresholds["easy_confidence"]:
        fig.add_hline(y=thresholds["hard_confidence"], line_dash="dot",
                      line_color=REFERENCE_COLOR, **text("hard ↓"))
    fig.update_xaxes(title="variability", range=[0, max(x_max, 1.05 * thresholds[
        "ambiguous_variability"])])
    fig.update_yaxes(title="confidence", range=[0, 1.02])
    return fig


def figures(run) -> list:
    """Confidence × variability of the scored rows by status (a seeded sample of at most
    :data:`FIGURE_POINTS`; the region counts in the tables are exact), with the thresholds."""
    import plotly.graph_objects as go

    from aflite_core.chart_style import STATUS_COLORS

    table = run.read_parquet(FILE)
    if table is None or table.empty:
        return []
    points, total = sample_points(table, max_points=FIGURE_POINTS, seed=0)
    chart = go.Figure()
    for status in ("removed", "retained"):
        part = points[points["status"].astype(str) == status]
        chart.add_trace(go.Scattergl(
            x=part["variability"], y=part["confidence"], mode="markers", name=status,
            marker={"color": STATUS_COLORS[status], "size": 4, "opacity": 0.6}))
    add_region_lines(chart, thresholds_of(run),
                     x_max=variability_axis_max(table["variability"]))
    drawn = f" ({len(points):,} of {total:,} rows drawn)" if len(points) < total else ""
    chart.update_layout(title="Data map: confidence × variability of the held-out "
                              f"predictions{drawn}", height=460)
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
                "in the round that decided it; regions easy-to-learn, ambiguous and "
                "hard-to-learn as in Dataset Cartography (Swayamdipta et al., 2020), each a "
                "share of the rows bounded by chance. Costs no extra training.",
    compute=compute,
    files=(FILE,),
    tables=tables,
    figures=figures,
    exports={"datamap": FILE},
    order=12,
    cost=0.1,  # seconds per 100k rows (bench_pipeline.py)
    row_columns=row_columns,
    options=(
        Option("hard_share", "Hard: share of rows at most", SHARES["hard_share"],
               minimum=0.0, maximum=0.5,
               help="Hard-to-learn: the rows of lowest confidence, at most this share of "
                    "them and only below chance (1/K)."),
        Option("ambiguous_share", "Ambiguous: share of rows", SHARES["ambiguous_share"],
               minimum=0.0, maximum=0.5,
               help="Ambiguous: this share of the rows whose gold probability varies most "
                    "across the partitions holding them out (variability at least 0.05)."),
        Option("easy_share", "Easy: share of rows at most", SHARES["easy_share"],
               minimum=0.0, maximum=0.9,
               help="Easy-to-learn: the rows of highest confidence, at most this share of "
                    "them and only above chance (1/K)."),
    ),
)
