"""Data map of every filtered row from AFLite's own held-out predictions (Dataset Cartography).

Swayamdipta et al. (EMNLP 2020) place each example by the *confidence* (mean gold-label
probability) and *variability* (its standard deviation) of a model's predictions, and name three
regions: **easy-to-learn** (high confidence, low variability), **hard-to-learn** (low
confidence, low variability; often mislabelled) and **ambiguous** (high variability). AFLite
already trains many models per round and predicts every held-out row; the estimators record the
gold-label probabilities of those predictions at almost no cost (see
:mod:`aflite_core.filter.datamap` for the definitions). Each row's values come from the round
that decided it, the round of its ``predictability`` (= ``correctness`` here).

Regions (a partition of the scored rows; the thresholds are options, stored in the file):

* ``ambiguous``: ``variability >= ambiguous_variability`` (default 0.2: the gold probability
  swings by about ±0.2 between training partitions);
* ``easy``: otherwise, ``confidence >= easy_confidence`` (default 0.5: the gold label is more
  likely than all others together, consistently);
* ``hard``: otherwise, ``confidence <= hard_confidence`` (default 0.5);
* ``medium``: otherwise (only when ``hard_confidence < easy_confidence``).

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

__all__ = ["FILE", "REGIONS", "THRESHOLDS", "assign_regions", "datamap_table",
           "region_counts", "sample_points"]

#: The run-folder file: one row per scored row.
FILE = "datamap.parquet"
#: Region names, in display order.
REGIONS = ("easy", "ambiguous", "hard", "medium")
#: Default region thresholds (see the module docstring).
THRESHOLDS = {"ambiguous_variability": 0.2, "easy_confidence": 0.5, "hard_confidence": 0.5}
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


def thresholds_of(run) -> dict:
    """The thresholds a run's data map was computed with (defaults when not recorded)."""
    info = (run.measures.get("datamap") or {}) if hasattr(run, "measures") else {}
    stored = info.get("thresholds") if isinstance(info, dict) else None
    return {**THRESHOLDS, **(stored or {})}


# --------------------------------------------------------------------------- registry entry


def compute(ctx: MeasureContext) -> MeasureResult:
    """The data map of the filtered rows, from the AFLite run (no model is trained)."""
    if ctx.datamap is None or not (np.asarray(ctx.datamap["n_heldout"]) > 0).any():
        raise MeasureSkipped(
            "this run's filter made no held-out predictions (the Z-filter tests features "
            "against the labels and trains no model), and a data map is drawn from them; "
            "AFLite's runs have one")
    thresholds = check_thresholds(**{k: v for k, v in ctx.params.items() if k in THRESHOLDS})
    scores = ctx.scores.set_index("row_id")
    row_ids = ctx.row_ids
    own = scores.reindex(pd.Index(row_ids, dtype=scores.index.dtype))
    dm = ctx.datamap
    table = datamap_table(row_ids, own["status"].to_numpy(dtype=object), ctx.y,
                          dm["confidence"].to_numpy(), dm["variability"].to_numpy(),
                          own["predictability"].to_numpy(dtype=float),
                          dm["n_heldout"].to_numpy(), **thresholds)
    counts = table["region"].value_counts()
    return MeasureResult(tables={FILE: table},
                         info={"thresholds": thresholds, "n_rows": int(len(table)),
                               "regions": {r: int(counts.get(r, 0)) for r in REGIONS}})


def tables(run) -> dict[str, pd.DataFrame]:
    """Region counts by status and by label, from :data:`FILE`."""
    table = run.read_parquet(FILE)
    if table is None or table.empty:
        return {}
    t = thresholds_of(run)
    means = table.groupby(["status", "region"], observed=True, sort=True)[
        ["confidence", "variability", "correctness"]].mean().reset_index()
    return {
        "Rows per data-map region, by status (exact counts)": region_counts(table, "status"),
        "Rows per data-map region, by label (exact counts)": region_counts(table, "label"),
        "Mean confidence, variability and correctness per status and region": means,
        "Region thresholds": pd.DataFrame({"threshold": list(t), "value": list(t.values())}),
    }


#: Points the static data map draws at most (a seeded uniform sample; counts stay exact).
FIGURE_POINTS = 4000


def add_region_lines(fig, thresholds: dict, *, labels: bool = True):
    """The region thresholds on a confidence × variability figure: ambiguous (variability,
    dashed), easy (confidence, dashed) and hard (confidence, dotted), and the axes' ranges.
    The HTML report's map and the dashboard's interactive one both use it."""
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
    fig.update_xaxes(title="variability", range=[0, 0.5])
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
    add_region_lines(chart, thresholds_of(run))
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
                "hard-to-learn as in Dataset Cartography (Swayamdipta et al., 2020). Costs no "
                "extra training.",
    compute=compute,
    files=(FILE,),
    tables=tables,
    figures=figures,
    exports={"datamap": FILE},
    order=12,
    cost=0.1,  # seconds per 100k rows (bench_pipeline.py)
    row_columns=row_columns,
    options=(
        Option("ambiguous_variability", "Ambiguous: variability at least",
               THRESHOLDS["ambiguous_variability"], minimum=0.0, maximum=0.5,
               help="Rows whose gold probability varies at least this much across the "
                    "partitions holding them out are ambiguous."),
        Option("easy_confidence", "Easy: confidence at least", THRESHOLDS["easy_confidence"],
               minimum=0.0, maximum=1.0,
               help="Among the other rows: easy-to-learn from this mean gold probability."),
        Option("hard_confidence", "Hard: confidence at most", THRESHOLDS["hard_confidence"],
               minimum=0.0, maximum=1.0,
               help="Among the other rows: hard-to-learn up to this mean gold probability "
                    "(below easy's threshold leaves a 'medium' band between)."),
    ),
)
