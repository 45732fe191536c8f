"""A card to hand on: a run's findings as GitHub Markdown, for a dataset card or a README.

:func:`markdown_card` says, in at most :data:`MAX_LINES` lines and without HTML or links to
the local machine: what was audited, AFLite's result, the headline figures with their
controls and caveats, the top cues and slices, the label issues, the review decisions and
what the curated export changes. Every warning a measure wrote into ``summary.json`` is
printed beside that measure's figures (:func:`measure_caveats`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from aflite_core.measures import (
    HARDNESS_TITLE,
    UNCERTAINTY_NOTE,
    format_figure,
    hardness_table,
    headline_figures,
    measure_caveats,
)
from aflite_core.runs import (
    AuditRun,
    RunError,
    check_not_in_run,
    curated_hardness,
    curated_rows,
    decisions_in_force,
    flag_precision,
    load_run,
)

__all__ = ["MAX_LINES", "markdown_card", "measure_caveats", "write_card"]

#: The card's length at most.
MAX_LINES = 150
_TOP = 5


def _cell(value: Any) -> str:
    """A table cell: one line, pipes escaped, cut to 80 characters."""
    text = " ".join(str(value).split()).replace("|", "\\|")
    return text if len(text) <= 80 else text[:77] + "..."


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def _caveat_lines(run: AuditRun, name: str) -> list[str]:
    return [f"- Caveat: {' '.join(w.split())[:400]}" for w in measure_caveats(run, name)]


def markdown_card(run: AuditRun | str | os.PathLike) -> str:
    """The card of ``run`` as Markdown text (at most :data:`MAX_LINES` lines)."""
    run = run if isinstance(run, AuditRun) else load_run(run)
    sizes, params = run.sizes, run.parameters
    info = run.input
    lines = [f"# Dataset audit: {_cell(info.get('name', run.name))}", "",
             f"Audited with AFLite (Le Bras et al., ICML 2020) and lexical cue statistics "
             f"on {run.created[:10] or 'an unknown date'}: {sizes.get('input', 0):,} rows, "
             f"{sizes.get('filtered', 0):,} filtered, input SHA-256 "
             f"`{str(info.get('sha256', ''))[:16]}`. Representation "
             f"`{params.get('representation', '?')}`; AFLite with m = "
             f"{params.get('n_partitions', '?')}, t = {params.get('train_size', '?')}, k = "
             f"{params.get('slice_size_rows', params.get('slice_size', '?'))}, tau = "
             f"{params.get('tau', '?')}, target {params.get('target_size_rows', '?')} rows, "
             f"seed {params.get('random_state', '?')}.", ""]
    lines += ["## What AFLite kept", ""]
    labels = (run.summary.get("labels") or {})
    before, after = labels.get("before") or {}, labels.get("after") or {}
    lines += _table(["label", "before", "retained", "removed"],
                    [[k, f"{before[k]:,}", f"{after.get(k, 0):,}",
                      f"{before[k] - after.get(k, 0):,}"] for k in sorted(before)])
    lines += ["", f"{sizes.get('retained', 0):,} rows retained, {sizes.get('removed', 0):,} "
                  "removed as too predictable.", ""]
    lines += _headline(run)
    lines += _cues(run)
    lines += _slices(run)
    lines += _label_issues(run)
    lines += _decisions(run)
    lines += _other_caveats(run, shown=("baselines", "cues", "slices", "label_issues"))
    if len(lines) > MAX_LINES:
        lines = lines[: MAX_LINES - 1] + ["(cut to 150 lines)"]
    return "\n".join(lines).rstrip("\n") + "\n"


def _other_caveats(run: AuditRun, *, shown: tuple[str, ...]) -> list[str]:
    """The caveats of the measures whose figures the card does not print: a reader of the
    card still learns what each measure of the run warned about."""
    lines = [f"- {name}: {w[:400]}" for name in (run.measures or {})
             if name not in shown for w in measure_caveats(run, name)]
    return ["## Other caveats of this run", "", *lines, ""] if lines else []


def _headline(run: AuditRun) -> list[str]:
    figures = headline_figures(run.read_json("baselines.json") if run.has("baselines.json")
                               else None)
    if not figures:
        return []
    lines = ["## Bias removed beyond size", "",
             "Accuracy a model loses on the retained rows, beyond what a label-matched random "
             f"subset of the same size loses (control), in percentage points; {UNCERTAINTY_NOTE}"
             ":", ""]
    lines += _table(["model", "bias removed beyond size", "reading"],
                    [[f["label"], format_figure(f), f.get("verdict", "ok")] for f in figures])
    lines.append("")
    for figure in figures:
        lines += [f"- Caveat ({figure['label']}): {' '.join(str(c).split())[:400]}"
                  for c in figure.get("caveats") or []]
    lines += _caveat_lines(run, "baselines")
    return lines + [""]


def _cues(run: AuditRun) -> list[str]:
    cues = run.cues
    if cues is None or cues.empty:
        return []
    full = cues[cues["scope"] == "full"] if "scope" in cues else cues
    key = "cueness_shrunk" if "cueness_shrunk" in full else "cueness"
    top = full.sort_values(key, ascending=False).head(_TOP)
    lines = ["## Top lexical cues (all rows)", ""]
    lines += _table(["feature", "family", "majority label", "share", key],
                    [[r["feature"], r["feature_type"], r["majority_label"],
                      f"{r['majority_share']:.2f}", f"{r[key]:.3g}"]
                     for _, r in top.iterrows()])
    return lines + [""] + _caveat_lines(run, "cues") + [""]


def _slices(run: AuditRun) -> list[str]:
    if not run.has("slices.parquet"):
        return []
    table = run.read_parquet("slices.parquet").sort_values("rank").head(_TOP)
    lines = ["## Slices AFLite removed most", ""]
    lines += _table(["slice", "rows", "removal rate", "base rate", "z"],
                    [[r["description"], f"{int(r['size']):,}", f"{r['removal_rate']:.2f}",
                      f"{r['base_rate']:.2f}", f"{r['z']:.1f}"] for _, r in table.iterrows()])
    return lines + [""] + _caveat_lines(run, "slices") + [""]


def _label_issues(run: AuditRun) -> list[str]:
    record = (run.measures or {}).get("label_issues") or {}
    if not isinstance(record, dict) or record.get("status") != "ok":
        return []
    share = record.get("share_flagged") or {}
    lines = ["## Label issues", "",
             f"{int(record.get('n_label_issues', 0)):,} rows flagged as possible label errors "
             f"({100 * float(share.get('all', 0)):.1f} % of the rows scored; "
             f"{100 * float(share.get('retained', 0)):.1f} % of the retained rows). The "
             f"scoring model is right on {100 * float(record.get('model_accuracy', 0)):.0f} % "
             "of the rows out of fold.", ""]
    hardness = hardness_table(record.get("bulk_hardness"))
    if not hardness.empty:
        lines += [f"{HARDNESS_TITLE}:", ""]
        lines += _table(list(hardness.columns), hardness.to_numpy().tolist())
        lines += ["", "Dropping every flagged row gives up hardness AFLite kept on purpose "
                      "when its figure is well below the retained set's: review the flags "
                      "row by row instead.", ""]
    return lines + _caveat_lines(run, "label_issues") + [""]


def _decisions(run: AuditRun) -> list[str]:
    try:
        force = decisions_in_force(run)
    except RunError as exc:
        return ["## Review decisions", "", f"The decisions could not be read: {exc}", ""]
    if force.empty:
        return ["## Review decisions", "", "No row has been reviewed yet.", ""]
    counts = force["decision"].value_counts()
    lines = ["## Review decisions", ""]
    lines += _table(["decision", "rows"], [[k, f"{int(counts.get(k, 0)):,}"]
                                           for k in ("keep", "drop", "relabel")])
    reviewers = sorted({r for r in force["reviewer"] if r})
    lines += ["", f"{len(force):,} rows reviewed" + (f" by {', '.join(reviewers[:5])}"
                                                      if reviewers else "") + "."]
    lines += _flag_precision(run, force)
    frame, changes = curated_rows(run)
    kinds = changes["change"].value_counts()
    lines += ["", "## The curated dataset", "",
              f"`python -m aflite_core export RUN --what curated` writes {len(frame):,} rows: "
              f"{int(kinds.get('dropped', 0)):,} dropped and {int(kinds.get('relabelled', 0)):,}"
              " relabelled by review, every original column kept (the changes are listed in "
              "OUT.changes.csv; `--apply-filter` also leaves AFLite's removed rows out).", ""]
    hardness = hardness_table(curated_hardness(run))
    if len(hardness) > 1:
        lines += [f"{HARDNESS_TITLE}, with the reviewers' labels:", ""]
        lines += _table(list(hardness.columns), hardness.to_numpy().tolist()) + [""]
    return lines


def _flag_precision(run: AuditRun, force: pd.DataFrame) -> list[str]:
    """Among reviewed rows the label issues flagged: how many the reviewers relabelled (the
    flags' observed precision, with its 95 % interval) and how often to the suggested label."""
    reviews = flag_precision(run)
    if reviews is None:
        return []
    low, high = reviews["precision_interval"]
    return [f"Of {reviews['reviewed']:,} reviewed rows flagged as label issues, "
            f"{reviews['relabelled']:,} were relabelled (observed precision of the flags "
            f"{reviews['precision']:.2f}, 95 % interval {low:.2f}-{high:.2f}), "
            f"{reviews['to_suggested']:,} of them to the suggested label."]


def write_card(run: AuditRun | str | os.PathLike, out: str | os.PathLike, *,
               overwrite: bool = False) -> Path:
    """Write :func:`markdown_card` to ``out`` (not inside a run folder); returns the path."""
    out = check_not_in_run(Path(out))
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out.name} already exists; pass --overwrite to replace it")
    out.write_text(markdown_card(run), encoding="utf-8")
    return out
