"""Comparing two runs: overlap of removed sets, score correlation, and a side-by-side view.

:func:`compare_runs` compares two runs of the *same* input row by row (status cross-tab,
removed-set Jaccard against the Jaccard of random removals of the same sizes, correlation of
predictability, parameter and cue changes). :func:`side_by_side` builds everything the
two-column view needs (the dashboard's Compare page, ``python -m aflite_core compare`` and its
HTML page): one :class:`RunProfile` per run (sizes, per-label and per-split changes, the
headline figures: hypothesis-only accuracy, max |z| of a Z-filter run, label shift), every
registered measure's before/after tables of both runs aligned by title, and the row overlap,
or a note saying why it does not apply (the runs audit different inputs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aflite_core.measures import figure_verdict, registry
from aflite_core.runs import FILTER_NAMES, AuditRun, load_run, to_jsonable, views


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
    from scipy import stats  # lazy: +1060 ms to import

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


#: How ``tfidf_svd`` reduced the TF-IDF in runs that do not say (before represent/_svd.py).
_OLD_SVD = "scikit-learn TruncatedSVD"


def _protocol(run: AuditRun) -> dict[str, Any]:
    """Choices recorded outside ``parameters`` that change the numbers: the SVD of Φ."""
    rep = run.summary.get("representation") or {}
    if rep.get("method") != "tfidf_svd":
        return {}
    return {"representation svd": (rep.get("params") or {}).get("svd", _OLD_SVD)}


def _flatten(params: dict, prefix: str = "") -> dict[str, Any]:
    """Nested parameters as one level, ``measure_params.projection.method`` style, so that
    each option that differs is its own row (a measure's options are not one long string)."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def parameter_changes(a: AuditRun, b: AuditRun) -> dict[str, tuple[Any, Any]]:
    """``{name: (value_a, value_b)}`` for the recorded parameters that differ, by name
    (nested ones such as a measure's options one by one: ``measure_params.projection.method``),
    and for the SVD of Φ (``representation svd``), which changed between versions: a run made
    before ``represent/_svd.py`` used scikit-learn's, so its numbers differ by protocol."""
    params_a = _flatten({**a.parameters, **_protocol(a)})
    params_b = _flatten({**b.parameters, **_protocol(b)})
    return {
        key: (params_a.get(key), params_b.get(key))
        for key in sorted(set(params_a) | set(params_b))
        if params_a.get(key) != params_b.get(key)
    }


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
    param_changes = parameter_changes(run_a, run_b)
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


# --------------------------------------------------------------------------- side by side

#: Headline figures of one run: key, label, kind (how :func:`format_value` shows it).
HEADLINE = (
    ("filter", "Filter", "text"),
    ("audited", "Audited rows (before)", "count"),
    ("retained", "Retained rows (after)", "count"),
    ("removed", "Removed rows", "count"),
    ("share_removed", "Share removed", "percent"),
    ("hyp_only_full", "Hypothesis-only accuracy, full", "percent"),
    ("hyp_only_retained", "Hypothesis-only accuracy, retained", "percent"),
    ("hyp_only_random", "Hypothesis-only accuracy, random subset of that size", "percent"),
    ("bias_removed_pp", "Bias removed beyond size (hypothesis-only)", "pp"),
    ("bias_removed_verdict", "Can it be read as is (hypothesis-only)", "text"),
    ("bias_removed_caveat", "Caveat (hypothesis-only)", "text"),
    ("max_abs_z_before", "Max |z| of a word, before (Z-filter)", "number"),
    ("max_abs_z_after", "Max |z| of a word, after (Z-filter)", "number"),
    ("label_tvd", "Label shift (total variation distance)", "number"),
)



def format_value(value: Any, kind: str = "number") -> str:
    """Show one figure of the comparison as text (the same in the CLI, HTML and dashboard).

    Parameters
    ----------
    value : object
        The figure; None or a non-finite float shows as ``–`` (not available).
    kind : {"count", "percent", "pp", "number", "text"}
        ``count`` with thousands separators, ``percent`` of a share in [0, 1], ``pp`` as
        signed percentage points, ``number`` with three decimals.
    """
    if value is None or (isinstance(value, (float, np.floating)) and not np.isfinite(value)):
        return "–"
    if kind == "count":
        return f"{int(value):,}"
    if kind == "percent":
        return f"{100 * float(value):.1f} %"
    if kind == "pp":
        return f"{float(value):+.1f} pp"
    if kind == "number":
        return f"{float(value):.3f}"
    return str(value)


@dataclass
class RunProfile:
    """One column of the side-by-side view: what one run did, in tables.

    Attributes
    ----------
    name, path, created : str, Path, str
        The run.
    filter : str
        ``AFLite`` or ``Z-filter``.
    input_name, sha256 : str
        The audited input.
    headline : dict
        Key of :data:`HEADLINE` -> value (None when the run has no such figure).
    sizes : DataFrame
        ``quantity, rows, share of audited``: input, excluded, warm-up, audited, retained,
        removed.
    labels : DataFrame
        Per label: ``label, before, after, removed, share_before, share_after, change_pp,
        share_removed`` (label order shared by both runs of a comparison).
    splits : DataFrame or None
        Per split: ``split, before, retained, removed, kept``; None without a split column.
    stop : str or None
        Why the filter stopped, in a sentence.
    states : dict
        ``measure name -> state`` (:meth:`AuditRun.measure_states`).
    """

    name: str
    path: Path
    created: str
    filter: str
    input_name: str
    sha256: str
    headline: dict[str, Any]
    sizes: pd.DataFrame
    labels: pd.DataFrame
    splits: pd.DataFrame | None
    stop: str | None
    states: dict[str, str]

    def headline_table(self) -> pd.DataFrame:
        """``figure, value`` rows of :data:`HEADLINE`, values as text."""
        return pd.DataFrame({
            "figure": [label for _, label, _ in HEADLINE],
            "value": [format_value(self.headline.get(key), kind) for key, _, kind in HEADLINE],
        })


@dataclass
class AlignedTable:
    """One before/after table of a measure in both runs (None where a run lacks it)."""

    title: str
    a: pd.DataFrame | None
    b: pd.DataFrame | None


@dataclass
class MeasureSection:
    """One registered measure in both runs: its state in each and its tables, by title."""

    name: str
    label: str
    description: str
    state_a: str
    state_b: str
    tables: list[AlignedTable] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # side ("a"/"b") -> why unreadable


@dataclass
class SideBySide:
    """Everything the two-column comparison shows; see :func:`side_by_side`.

    Attributes
    ----------
    a, b : RunProfile
        The two columns.
    comparison : RunComparison or None
        The row-level comparison (:func:`compare_runs`); None when it does not apply.
    note : str or None
        Why the row overlap does not apply (different inputs, different row ids).
    parameter_changes : dict
        ``{name: (value_a, value_b)}``.
    cue_changes : DataFrame or None
        Retained-scope cue statistics of both runs with their difference.
    sections : list of MeasureSection
        Every registered measure that has before/after tables, in registry order.
    """

    a: RunProfile
    b: RunProfile
    comparison: RunComparison | None
    note: str | None
    parameter_changes: dict
    cue_changes: pd.DataFrame | None
    sections: list[MeasureSection]

    @property
    def same_input(self) -> bool:
        """Whether the row overlap applies (same input, same row ids)."""
        return self.comparison is not None

    def overlap_table(self) -> pd.DataFrame:
        """``figure, value`` of the row overlap (values as text; ``not applicable`` when
        the runs audit different inputs)."""
        c = self.comparison
        if c is None:
            figures = ["Removed in both", "Removed-set Jaccard", "Jaccard of random removals",
                       "Spearman of predictability", "Pearson of predictability",
                       "Rows whose status differs"]
            return pd.DataFrame({"figure": figures, "value": "not applicable"})
        ratio = (c.removed_jaccard / c.expected_jaccard_random
                 if c.expected_jaccard_random and np.isfinite(c.expected_jaccard_random)
                 else float("nan"))
        return pd.DataFrame({
            "figure": ["Removed in both", "Removed-set Jaccard", "Jaccard of random removals",
                       "Jaccard / random", "Spearman of predictability",
                       "Pearson of predictability", "Rows scored in both",
                       "Rows whose status differs"],
            "value": [format_value(c.n_removed_both, "count"),
                      format_value(c.removed_jaccard), format_value(c.expected_jaccard_random),
                      "–" if not np.isfinite(ratio) else f"{ratio:.2f}×",
                      format_value(c.spearman), format_value(c.pearson),
                      format_value(c.n_scored_both, "count"),
                      format_value(len(c.changed), "count")],
        })

    def parameter_table(self) -> pd.DataFrame:
        """``parameter, a, b`` for the parameters that differ (values as text)."""
        return pd.DataFrame({
            "parameter": list(self.parameter_changes),
            "a": [_plain(v[0]) for v in self.parameter_changes.values()],
            "b": [_plain(v[1]) for v in self.parameter_changes.values()],
        })


def _plain(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_plain(v)}" for k, v in value.items()) or "{}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value)
    return "–" if value is None else str(value)


def _label_table(summary_labels: dict, order: list[str] | None) -> pd.DataFrame:
    before = pd.Series(summary_labels.get("before") or {}, dtype="int64")
    after = pd.Series(summary_labels.get("after") or {}, dtype="int64")
    index = list(order) if order is not None else before.sort_values(
        ascending=False, kind="stable").index.tolist()
    index += [lab for lab in (*before.index, *after.index) if lab not in index]
    before = before.reindex(index, fill_value=0)
    after = after.reindex(index, fill_value=0)
    p = before / max(int(before.sum()), 1)
    q = after / max(int(after.sum()), 1)
    return pd.DataFrame({
        "label": [str(i) for i in index],
        "before": before.to_numpy(), "after": after.to_numpy(),
        "removed": (before - after).to_numpy(),
        "share_before": p.to_numpy(), "share_after": q.to_numpy(),
        "change_pp": (100 * (q - p)).to_numpy(),
        "share_removed": (1 - after / before.where(before > 0)).to_numpy(),
    })


def _size_table(sizes: dict) -> pd.DataFrame:
    audited = int(sizes.get("filtered", sizes.get("retained", 0) + sizes.get("removed", 0)))
    rows = [("input", sizes.get("input")), ("excluded", sizes.get("excluded")),
            ("warm-up (not filtered)", sizes.get("warmup")), ("audited (before)", audited),
            ("retained (after)", sizes.get("retained")), ("removed", sizes.get("removed"))]
    counts = [int(v or 0) for _, v in rows]
    return pd.DataFrame({
        "quantity": [q for q, _ in rows], "rows": counts,
        "share of audited": [c / audited if audited else float("nan") for c in counts],
    })


def _baseline_figures(run: AuditRun) -> dict[str, float | None]:
    try:
        block = (run.baselines or {}).get("hypothesis_only") or {}
    except (ValueError, OSError):
        block = {}

    def acc(part: str) -> float | None:
        value = (block.get(part) or {}).get("accuracy")
        return float(value) if isinstance(value, (int, float)) else None

    pp = block.get("bias_removed_beyond_size_pp")
    verdict = figure_verdict("hypothesis_only", block) if block else {}
    return {"hyp_only_full": acc("full"), "hyp_only_retained": acc("retained"),
            "hyp_only_random": acc("random"),
            "bias_removed_pp": float(pp) if isinstance(pp, (int, float)) else None,
            "bias_removed_verdict": verdict.get("verdict"),
            "bias_removed_caveat": " ".join(verdict.get("caveats") or []) or None}


def run_profile(run: AuditRun | str | os.PathLike, *, label_order: list[str] | None = None
                ) -> RunProfile:
    """One run's column of the side-by-side view (summary and small files only).

    Parameters
    ----------
    run : AuditRun or path
    label_order : list of str, optional
        Order of the label rows (so that two runs show their labels in the same order);
        labels not in it follow, most frequent first.
    """
    run = _as_run(run)
    sizes = run.sizes
    labels = _label_table(run.summary.get("labels") or {}, label_order)
    zstats = (run.summary.get("aflite") or {}).get("zfilter") or {}
    audited = int(sizes.get("filtered", sizes.get("retained", 0) + sizes.get("removed", 0)))
    tvd = (0.5 * float(np.abs(labels["share_before"] - labels["share_after"]).sum())
           if int(labels["after"].sum()) else None)
    flt = str(run.parameters.get("filter") or "aflite")

    def number(value: Any) -> float | None:
        return float(value) if isinstance(value, (int, float)) else None

    headline = {
        "filter": FILTER_NAMES.get(flt, flt),
        "audited": audited,
        "retained": int(sizes.get("retained", 0)),
        "removed": int(sizes.get("removed", 0)),
        "share_removed": int(sizes.get("removed", 0)) / audited if audited else None,
        **_baseline_figures(run),
        "max_abs_z_before": number(zstats.get("max_abs_z_before")),
        "max_abs_z_after": number(zstats.get("max_abs_z_after")),
        "label_tvd": tvd,
    }
    return RunProfile(
        name=run.name, path=run.path, created=run.created,
        filter=FILTER_NAMES.get(flt, flt),
        input_name=str(run.input.get("name", "")), sha256=str(run.input.get("sha256", "")),
        headline=headline, sizes=_size_table(sizes), labels=labels,
        splits=views.split_sizes(run), stop=views.stop_explanation(run),
        states=run.measure_states(),
    )


def _measure_tables(measure: Any, run: AuditRun) -> tuple[dict[str, pd.DataFrame], str | None]:
    try:
        return measure.before_after(run), None
    except (ValueError, OSError, KeyError, TypeError) as exc:
        return {}, f"{type(exc).__name__}: {exc}"


def measure_sections(a: AuditRun, b: AuditRun, *, include_absent: bool = False
                     ) -> list[MeasureSection]:
    """Registered measures with before/after tables, their tables of ``a`` and ``b``
    aligned by title (``a``'s order, then titles only ``b`` has).

    A measure that neither run has (not run, nothing written) is left out unless
    ``include_absent``; one that only one run has is kept, so both columns show it.
    """
    states_a, states_b = a.measure_states(), b.measure_states()
    out = []
    for measure in registry.measures():
        if measure.tables is None:
            continue
        tables_a, error_a = _measure_tables(measure, a)
        tables_b, error_b = _measure_tables(measure, b)
        titles = list(dict.fromkeys([*tables_a, *tables_b]))
        errors = {k: v for k, v in (("a", error_a), ("b", error_b)) if v}
        state_a = states_a.get(measure.name, "not run")
        state_b = states_b.get(measure.name, "not run")
        if (not include_absent and not titles and not errors
                and state_a == state_b == "not run"):
            continue
        out.append(MeasureSection(
            name=measure.name, label=measure.label, description=measure.description,
            state_a=state_a, state_b=state_b,
            tables=[AlignedTable(t, tables_a.get(t), tables_b.get(t)) for t in titles],
            errors=errors))
    return out


def side_by_side(a: AuditRun | str | os.PathLike, b: AuditRun | str | os.PathLike
                 ) -> SideBySide:
    """Compare two runs in two columns, the same sections on both sides.

    Unlike :func:`compare_runs`, runs of different inputs are accepted: their row overlap
    is then reported as not applicable (:attr:`SideBySide.note` says why) instead of a
    number that would compare unrelated rows.

    Parameters
    ----------
    a, b : AuditRun or path
        The runs (A is the left column).

    Returns
    -------
    SideBySide

    Raises
    ------
    RunError
        If a run folder is missing or damaged (the message names it).
    """
    run_a, run_b = _as_run(a), _as_run(b)
    hash_a, hash_b = run_a.input.get("sha256"), run_b.input.get("sha256")
    note = None
    comparison = None
    if hash_a != hash_b:
        note = (f"The runs audit different inputs ({run_a.input.get('name', '?')} sha256 "
                f"{str(hash_a)[:12]}… vs {run_b.input.get('name', '?')} sha256 "
                f"{str(hash_b)[:12]}…): their rows are not the same rows, so the removed-set "
                "overlap and the score correlation are not applicable. Sizes, labels and "
                "measures are compared side by side.")
    else:
        try:
            comparison = compare_runs(run_a, run_b)
        except ValueError as exc:
            note = (f"The row overlap is not applicable: {exc}. Sizes, labels and measures "
                    "are compared side by side.")
    profile_a = run_profile(run_a)
    profile_b = run_profile(run_b, label_order=profile_a.labels["label"].tolist())
    if len(profile_b.labels) > len(profile_a.labels):  # labels only B has: A shows them too
        profile_a = run_profile(run_a, label_order=profile_b.labels["label"].tolist())
    return SideBySide(
        a=profile_a, b=profile_b, comparison=comparison, note=note,
        parameter_changes=(comparison.parameter_changes if comparison is not None
                           else parameter_changes(run_a, run_b)),
        cue_changes=(comparison.cue_changes if comparison is not None
                     else _cue_changes(run_a.cues, run_b.cues)),
        sections=measure_sections(run_a, run_b),
    )


def summary_text(side: SideBySide) -> str:
    """The comparison as plain text (what ``python -m aflite_core compare`` prints)."""
    width = max(len(label) for _, label, _ in HEADLINE) + 2
    col = max(12, len(side.a.name), len(side.b.name)) + 2
    lines = [f"{'':<{width}}{'A':<{col}}B", f"{'run':<{width}}{side.a.name:<{col}}{side.b.name}",
             f"{'input':<{width}}{side.a.input_name:<{col}}{side.b.input_name}"]
    for key, label, kind in HEADLINE:
        lines.append(f"{label:<{width}}{format_value(side.a.headline.get(key), kind):<{col}}"
                     f"{format_value(side.b.headline.get(key), kind)}")
    lines.append("")
    lines.append("row overlap (removed sets):")
    if side.note:
        lines.append(f"  {side.note}")
    for figure, value in side.overlap_table().itertuples(index=False, name=None):
        lines.append(f"  {figure:<30}{value}")
    lines.append("")
    if side.parameter_changes:
        lines.append("parameter changes (A -> B):")
        for name, (va, vb) in side.parameter_changes.items():
            lines.append(f"  {name}: {_plain(va)} -> {_plain(vb)}")
    else:
        lines.append("parameter changes: none")
    return "\n".join(lines)
