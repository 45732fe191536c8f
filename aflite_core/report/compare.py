"""Comparing two runs of the same input: overlap of removed sets, score correlation.

The curator's side-by-side view (dashboard and ``python -m aflite_core compare``) builds on
:func:`compare_runs`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from aflite_core.runs.folder import AuditRun, load_run, to_jsonable


@dataclass
class RunComparison:
    """Result of :func:`compare_runs`.

    Attributes
    ----------
    status_table : DataFrame
        Cross-tabulation of status in ``a`` (rows) against status in ``b`` (columns).
    changed : DataFrame
        Rows whose status differs: ``row_id, status_a, status_b, predictability_a,
        predictability_b, removal_round_a, removal_round_b``.
    removed_jaccard : float
        |removed_a ∩ removed_b| / |removed_a ∪ removed_b| (NaN when both are empty).
    expected_jaccard_random : float
        The Jaccard overlap expected if both runs had removed random rows of the same
        sizes from the same pool: a control for ``removed_jaccard``.
    spearman, pearson : float
        Correlation of predictability over rows scored in both runs (NaN if < 3 rows).
    parameter_changes : dict
        ``{name: (value_a, value_b)}`` for parameters that differ.
    cue_changes : DataFrame or None
        Retained-scope cue statistics of both runs side by side with their difference,
        largest absolute change first; None when either run has no cue table.
    """

    a: str
    b: str
    status_table: pd.DataFrame
    changed: pd.DataFrame
    n_removed_a: int
    n_removed_b: int
    n_removed_both: int
    removed_jaccard: float
    expected_jaccard_random: float
    spearman: float
    pearson: float
    n_scored_both: int
    parameter_changes: dict
    cue_changes: pd.DataFrame | None

    def to_dict(self) -> dict:
        """Scalar fields as a JSON-able dict (tables summarised by their sizes)."""
        return to_jsonable(
            {
                "a": self.a,
                "b": self.b,
                "n_changed": len(self.changed),
                "n_removed_a": self.n_removed_a,
                "n_removed_b": self.n_removed_b,
                "n_removed_both": self.n_removed_both,
                "removed_jaccard": self.removed_jaccard,
                "expected_jaccard_random": self.expected_jaccard_random,
                "spearman": self.spearman,
                "pearson": self.pearson,
                "n_scored_both": self.n_scored_both,
                "parameter_changes": {k: list(v) for k, v in self.parameter_changes.items()},
            }
        )


def _as_run(run: AuditRun | str | os.PathLike) -> AuditRun:
    return run if isinstance(run, AuditRun) else load_run(run)


def _correlations(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    from scipy import stats

    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    return float(stats.spearmanr(x, y).statistic), float(stats.pearsonr(x, y).statistic)


#: Columns identifying one cue, and its statistics in order of preference.
CUE_KEYS = ("feature_type", "feature")
CUE_VALUES = ("cueness", "cueness_proportion", "lmi", "pmi", "z", "jsd", "mse")


def cue_key_columns(cues: pd.DataFrame) -> list[str]:
    """Columns identifying one cue: ``feature_type, feature`` when present, else the text
    columns other than ``scope``."""
    if all(c in cues.columns for c in CUE_KEYS):
        return list(CUE_KEYS)
    return [c for c in cues.columns
            if c != "scope" and not pd.api.types.is_numeric_dtype(cues[c])]


def cue_value_columns(cues: pd.DataFrame) -> list[str]:
    """Numeric cue statistics, the preferred ones (``cueness``, ``lmi``, ...) first."""
    numeric = [c for c in cues.columns if pd.api.types.is_float_dtype(cues[c])]
    preferred = [c for c in CUE_VALUES if c in numeric]
    return preferred or numeric


def _cue_changes(cues_a: pd.DataFrame | None, cues_b: pd.DataFrame | None) -> pd.DataFrame | None:
    if cues_a is None or cues_b is None:
        return None

    def retained(frame: pd.DataFrame) -> pd.DataFrame:
        if "scope" in frame.columns:
            frame = frame[frame["scope"].astype(str) == "retained"].drop(columns="scope")
        return frame

    ra, rb = retained(cues_a), retained(cues_b)
    keys = [c for c in cue_key_columns(ra) if c in rb.columns]
    values = [c for c in cue_value_columns(ra) if c in rb.columns]
    if not keys or not values:
        return None
    ra = ra.drop_duplicates(keys)
    rb = rb.drop_duplicates(keys)
    merged = ra[keys + values].merge(rb[keys + values], on=keys, how="outer", suffixes=("_a", "_b"))
    for col in values:
        merged[f"{col}_delta"] = merged[f"{col}_b"] - merged[f"{col}_a"]
    order = merged[f"{values[0]}_delta"].abs().fillna(np.inf)
    return merged.loc[order.sort_values(ascending=False, kind="stable").index].reset_index(
        drop=True
    )


def compare_runs(
    a: AuditRun | str | os.PathLike, b: AuditRun | str | os.PathLike
) -> RunComparison:
    """Compare two runs over the same input.

    Parameters
    ----------
    a, b : AuditRun or path
        The runs to compare.

    Returns
    -------
    RunComparison

    Raises
    ------
    ValueError
        If the runs audit different inputs (their sha256 differ) or their row ids differ.
    """
    run_a, run_b = _as_run(a), _as_run(b)
    hash_a, hash_b = run_a.input.get("sha256"), run_b.input.get("sha256")
    if hash_a != hash_b:
        raise ValueError(
            f"runs {run_a.name!r} and {run_b.name!r} audit different inputs "
            f"(sha256 {str(hash_a)[:12]}... vs {str(hash_b)[:12]}...); "
            "compare runs of the same data"
        )
    sa = run_a.scores.set_index("row_id")
    sb = run_b.scores.set_index("row_id")
    if len(sa) != len(sb) or not sa.index.equals(sb.index):
        only_a = len(sa.index.difference(sb.index))
        only_b = len(sb.index.difference(sa.index))
        raise ValueError(
            f"runs {run_a.name!r} and {run_b.name!r} have different row ids "
            f"({only_a} only in a, {only_b} only in b)"
        )
    status_a = sa["status"].astype(str)
    status_b = sb["status"].astype(str)
    table = pd.crosstab(status_a.rename("a"), status_b.rename("b"))
    differ = (status_a != status_b).to_numpy()
    changed = pd.DataFrame(
        {
            "row_id": sa.index[differ],
            "status_a": status_a.to_numpy()[differ],
            "status_b": status_b.to_numpy()[differ],
            "predictability_a": sa["predictability"].to_numpy()[differ],
            "predictability_b": sb["predictability"].to_numpy()[differ],
            "removal_round_a": sa["removal_round"].to_numpy()[differ],
            "removal_round_b": sb["removal_round"].to_numpy()[differ],
        }
    )
    rem_a = (status_a == "removed").to_numpy()
    rem_b = (status_b == "removed").to_numpy()
    n_a, n_b = int(rem_a.sum()), int(rem_b.sum())
    both = int((rem_a & rem_b).sum())
    union = int((rem_a | rem_b).sum())
    jaccard = both / union if union else float("nan")
    pool = int((status_a.isin(["retained", "removed"]) & status_b.isin(["retained", "removed"]))
               .sum())
    if pool and (n_a or n_b):
        expected_both = n_a * n_b / pool
        expected = expected_both / (n_a + n_b - expected_both)
    else:
        expected = float("nan")
    pa_ = sa["predictability"].to_numpy(dtype=float)
    pb_ = sb["predictability"].to_numpy(dtype=float)
    finite = np.isfinite(pa_) & np.isfinite(pb_)
    spearman, pearson = _correlations(pa_[finite], pb_[finite])
    params_a, params_b = run_a.parameters, run_b.parameters
    param_changes = {
        key: (params_a.get(key), params_b.get(key))
        for key in sorted(set(params_a) | set(params_b))
        if params_a.get(key) != params_b.get(key)
    }
    return RunComparison(
        a=run_a.name,
        b=run_b.name,
        status_table=table,
        changed=changed,
        n_removed_a=n_a,
        n_removed_b=n_b,
        n_removed_both=both,
        removed_jaccard=jaccard,
        expected_jaccard_random=expected,
        spearman=spearman,
        pearson=pearson,
        n_scored_both=int(finite.sum()),
        parameter_changes=param_changes,
        cue_changes=_cue_changes(run_a.cues, run_b.cues),
    )
