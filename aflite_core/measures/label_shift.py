"""Label shift: how AFLite changed the label distribution (and each split's, when there is one).

A filter that removes rows unevenly across labels changes what a model trained on the
retained rows learns about label priors; this measure makes that visible and quantifies it:
per label, the share before and after, the change in percentage points, and the share of
the label's rows removed; overall, the total variation distance and the Jensen-Shannon
divergence (natural log) between the two distributions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from aflite_core.io import str_codes
from aflite_core.measures.registry import Measure, MeasureContext, MeasureResult

#: The run-folder file: one row per (split, label), split ``all`` for the whole data.
FILE = "label_shift.parquet"


def label_shift_table(labels: np.ndarray, keep: np.ndarray,
                      splits: np.ndarray | None = None) -> pd.DataFrame:
    """Per label (and split): rows and shares before/after, change, share removed.

    Parameters
    ----------
    labels : np.ndarray
        Label of each filtered row.
    keep : np.ndarray of bool
        Retained by the filter.
    splits : np.ndarray, optional
        Split of each row; adds one block per split after the ``all`` block.

    Returns
    -------
    DataFrame
        ``split, label, before, after, share_before, share_after, change_pp,
        share_removed, tvd, jsd`` (``tvd``/``jsd`` are the block's, repeated per row).
    """
    # codes of the label (and split) texts: no fixed-width str copy of every row's label nor
    # a Python str per row (value_counts of a str array made one: 0.3 GB at 5M rows)
    codes, classes = str_codes(labels)
    keep = np.asarray(keep, dtype=bool)
    if codes.shape != keep.shape:
        raise ValueError(f"keep: expected {codes.shape[0]} values (one per label), "
                         f"got {keep.shape[0]}")
    blocks = [("all", np.ones(len(codes), dtype=bool))]
    if splits is not None:
        split_codes, split_names = str_codes(splits)
        blocks += [(str(split_names[c]), split_codes == c) for c in pd.unique(split_codes)]
    order = _most_frequent_first(codes, classes)
    at = pd.Series(np.arange(len(classes)), index=classes)[order].to_numpy()
    frames = []
    for name, rows in blocks:
        before = pd.Series(np.bincount(codes[rows], minlength=len(classes))[at], index=order,
                           name="count")
        after = pd.Series(np.bincount(codes[rows & keep], minlength=len(classes))[at],
                          index=order, name="count")
        p = before / max(before.sum(), 1)
        q = after / max(after.sum(), 1)
        m = (p + q) / 2
        with np.errstate(divide="ignore", invalid="ignore"):
            jsd = 0.5 * float(np.nansum(np.where(p > 0, p * np.log(p / m), 0.0))
                              + np.nansum(np.where(q > 0, q * np.log(q / m), 0.0)))
        frames.append(pd.DataFrame({
            "split": name, "label": order, "before": before.to_numpy(),
            "after": after.to_numpy(), "share_before": p.to_numpy(), "share_after": q.to_numpy(),
            "change_pp": 100 * (q - p).to_numpy(),
            "share_removed": (1 - after / before.where(before > 0)).to_numpy(),
            "tvd": 0.5 * float(np.abs(p - q).sum()), "jsd": jsd,
        }))
    return pd.concat(frames, ignore_index=True)


def _most_frequent_first(codes: np.ndarray, classes: np.ndarray) -> list[str]:
    """The labels as ``pd.Series(classes[codes]).value_counts()`` orders them: by count,
    most first, ties in the order they first appear (its stable sort of the counts of the
    labels in order of appearance)."""
    seen = pd.unique(codes)
    counts = pd.Series(np.bincount(codes, minlength=len(classes))[seen], index=classes[seen])
    return counts.sort_values(ascending=False, kind="stable").index.tolist()


def compute(ctx: MeasureContext) -> MeasureResult:
    """Label shift of the filtered rows, overall and per split."""
    table = label_shift_table(ctx.y, ctx.keep, ctx.splits)
    overall = table[table["split"] == "all"]
    return MeasureResult(tables={FILE: table},
                         info={"tvd": float(overall["tvd"].iloc[0]),
                               "jsd": float(overall["jsd"].iloc[0])})


def tables(run) -> dict[str, pd.DataFrame]:
    """``{"Label shift": ...}`` from ``label_shift.parquet``."""
    table = run.read_parquet(FILE)
    if table is None or table.empty:
        return {}
    return {"Label distribution before vs after": table}


def figures(run) -> list:
    """Each label's share of the filtered rows before and after (all splits together)."""
    import plotly.graph_objects as go  # lazy: +22 ms to import

    from aflite_core.chart_style import SET_COLORS, chart_text  # lazy: +11 ms to import

    table = run.read_parquet(FILE)
    if table is None or table.empty:
        return []
    overall = table[table["split"] == "all"]
    labels = [chart_text(v) for v in overall["label"]]
    chart = go.Figure([
        go.Bar(name=name, x=labels, y=100 * overall[column], marker_color=SET_COLORS[key],
               text=[f"{v:.1f}%" for v in 100 * overall[column]], textposition="outside")
        for name, column, key in (("before", "share_before", "before"),
                                  ("after", "share_after", "after"))])
    tvd = float(overall["tvd"].iloc[0])
    chart.update_layout(barmode="group", yaxis_title="share of the filtered rows (%)",
                        title=f"Label shares before vs after (total variation {tvd:.3f})")
    return [chart]


MEASURE = Measure(
    name="label_shift",
    label="Label shift (before vs after)",
    description="Share of each label before and after filtering (overall and per split), "
                "the change in percentage points, and the total variation distance and "
                "Jensen-Shannon divergence between the two distributions.",
    compute=compute,
    files=(FILE,),
    tables=tables,
    figures=figures,
    exports={"label_shift": FILE},
    order=15,
    cost=0.1,  # seconds per 100k rows (bench_pipeline.py)
)
