"""The curated dataset: the input's rows with a reviewer's decisions applied.

:func:`export_curated` writes the input's rows in the input's order, with every original
column and nothing added: rows decided ``drop`` left out, rows decided ``relabel`` with their
new label in the original label column (in its original type: integer labels stay integers),
and with ``apply_filter`` AFLite's removals left out too (a row a reviewer decided ``keep``
stays). Beside it, ``OUT.changes.csv`` lists every change: ``row_id``, the original id column
when the input had one, ``change`` (``dropped``, ``relabelled``, ``filtered``), ``old_label``,
``new_label`` and ``note``.

The format is the one the target's suffix names, else the input's own as the audit read it
(:func:`curated_format`: CSV, TSV, JSON Lines, a JSON document, Parquet, a Hugging Face
``datasets`` folder for one; else Parquet); ``hf`` writes a ``datasets`` folder (a DatasetDict
keyed by the split column when the run had one), which needs the ``datasets`` package.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from aflite_core.runs._layout import SUMMARY_FILE
from aflite_core.runs._names import TEMP_PREFIX
from aflite_core.runs.decisions import decisions_in_force
from aflite_core.runs.folder import AuditRun, check_not_in_run, dump_json, load_run, utc_now_iso

__all__ = ["CURATED_FORMATS", "CuratedResult", "curated_format", "curated_hardness",
           "export_curated"]

#: Formats the curated dataset can be written in.
CURATED_FORMATS = ("csv", "tsv", "jsonl", "json", "parquet", "hf")
_SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "json",
             ".parquet": "parquet", ".pq": "parquet"}


@dataclass(frozen=True)
class CuratedResult:
    """What :func:`export_curated` wrote."""

    path: Path
    changes: Path
    format: str
    n_rows: int
    dropped: int
    relabelled: int
    filtered: int


def curated_format(run: AuditRun) -> str:
    """The input's own format: as the audit read it (``summary.json``'s ``input.format``: a
    Hugging Face ``datasets`` folder, read as Arrow under a name without a suffix, gives a
    ``datasets`` folder when the ``datasets`` package is there), else from its name (``.gz``
    aside); Parquet when neither says (a folder of shards, a run made before the format was
    recorded)."""
    name = str(run.input.get("name", ""))
    if name.endswith(".gz"):
        name = name[:-3]
    read_as = str(run.input.get("format") or "")
    if read_as == "arrow" and not Path(name).suffix:  # a datasets folder
        return "hf" if importlib.util.find_spec("datasets") is not None else "parquet"
    if read_as in CURATED_FORMATS:
        return read_as
    return _SUFFIXES.get(Path(name).suffix.lower(), "parquet")


def export_curated(run: AuditRun | str | os.PathLike, out: str | os.PathLike, *,
                   format: str | None = None, apply_filter: bool = False,
                   overwrite: bool = False) -> CuratedResult:
    """Write the curated dataset of ``run`` to ``out`` and its changes beside it.

    Parameters
    ----------
    run : AuditRun or path
    out : path
        The file (a folder for ``hf``); ``OUT.changes.csv`` is written beside it.
    format : {"csv", "tsv", "jsonl", "json", "parquet", "hf"}, optional
        Default: the one ``out``'s suffix names, else the input's own
        (:func:`curated_format`; a ``datasets`` folder or a folder of shards: Parquet).
    apply_filter : bool, default False
        Leave AFLite's removed rows out too (a row decided ``keep`` stays).
    overwrite : bool, default False
        Replace ``out`` and its changes file if they exist.

    Raises
    ------
    ValueError
        An unknown format, a target inside a run folder, or an existing target without
        ``overwrite``.
    RunError
        The run or its decisions are damaged.
    """
    run = run if isinstance(run, AuditRun) else load_run(run)
    fmt = format or _SUFFIXES.get(Path(out).suffix.lower()) or curated_format(run)
    if fmt not in CURATED_FORMATS:
        raise ValueError(f"format: expected one of {', '.join(CURATED_FORMATS)}, got {fmt!r}")
    out = check_not_in_run(Path(out))
    changes_path = out.with_name(out.name + ".changes.csv")
    for target in (out, changes_path):
        if target.exists() and not overwrite:
            raise FileExistsError(f"{target.name} already exists; pass overwrite (--overwrite) "
                                  "to replace it")
    frame, changes = curated_rows(run, apply_filter=apply_filter)
    _write(frame, out, fmt, split=run.input.get("columns", {}).get("split"))
    _write_changes(changes, changes_path)
    if apply_filter:  # what the bulk drop gives up, in summary.json for the Report and card
        record_curated_hardness(run, curated_hardness(run))
    counts = changes["change"].value_counts()
    return CuratedResult(path=out, changes=changes_path, format=fmt, n_rows=len(frame),
                         dropped=int(counts.get("dropped", 0)),
                         relabelled=int(counts.get("relabelled", 0)),
                         filtered=int(counts.get("filtered", 0)))


def curated_rows(run: AuditRun, *, apply_filter: bool = False
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The curated rows (original columns, input order) and the table of changes."""
    frame, keep, changes_table = _curated(run, apply_filter=apply_filter)
    out = frame[keep.to_numpy()]
    if run.dataset_row_id_column not in (run.summary.get("dataset") or {}).get("columns", []):
        out = out.reset_index(drop=True)  # the product's row ids are not an input column
    return out, changes_table


#: Rows (a seeded sample) the curated set's hardness is measured on, as the audit measures the
#: retained and retained_clean sets' (``label_issues.HARDNESS_ROWS``).
HARDNESS_ROWS = 5_000


def curated_hardness(run: AuditRun | str | os.PathLike, *, random_state: int = 0) -> dict:
    """What the curated export with ``apply_filter`` gives up: the hypothesis-only accuracy
    beyond a label-matched random subset of its size, beside the retained set's, among the
    filtered rows with the reviewers' labels (issue 62, item 5), on a seeded sample of at
    most :data:`HARDNESS_ROWS` rows (a premise's rows together).

    Returns
    -------
    dict
        ``retained`` and ``curated_apply_filter`` (as
        :func:`~aflite_core.measures.baselines.subset_hardness` gives them) and
        ``n_decisions``; ``{"reason": ...}`` when it cannot be measured.
    """
    from aflite_core.measures import subset_hardness  # lazy: +54 ms to import
    from aflite_core.splits import sample_rows  # lazy: +8 ms to import

    run = run if isinstance(run, AuditRun) else load_run(run)
    columns = run.input.get("columns") or {}
    hyp, label_col, premise = (columns.get("hypothesis"), columns.get("label"),
                               columns.get("premise"))
    frame, keep, _ = _curated(run, apply_filter=True)
    if hyp not in frame or label_col not in frame:
        return {"reason": "the run's input has no hypothesis or label column"}
    status = run.score_columns(["row_id", "status"]).set_index("row_id")["status"]
    status = status.reindex(frame.index).astype(str).to_numpy()
    filtered = np.flatnonzero(np.isin(status, ["retained", "removed"]))
    retained = status[filtered] == "retained"
    if retained.all() or not retained.any():
        return {"reason": "AFLite removed no row" if retained.all() else "AFLite kept no row"}
    groups = (None if premise not in frame else
              pd.factorize(frame[premise].astype(str).to_numpy()[filtered])[0])
    pick = sample_rows(len(filtered), HARDNESS_ROWS, groups=groups, random_state=random_state)
    rows = filtered[pick]
    try:
        figures = subset_hardness(
            frame[hyp].astype(str).to_numpy()[rows].tolist(),
            frame[label_col].astype(str).to_numpy()[rows],
            {"retained": retained[pick], "curated_apply_filter": keep.to_numpy()[rows]},
            groups=None if groups is None else groups[pick], random_state=random_state)
    except ValueError as exc:
        return {"reason": str(exc)}
    return {**figures, "n_decisions": int(len(decisions_in_force(run)))}


def record_curated_hardness(run: AuditRun, figures: dict) -> None:
    """Keep ``figures`` (:func:`curated_hardness`) in the run's ``summary.json`` under
    ``curated_exports.apply_filter`` with the time (replaced atomically: a reader sees the
    old summary or the new one)."""
    summary = dict(run.summary)
    exports = dict(summary.get("curated_exports") or {})
    exports["apply_filter"] = {**figures, "measured_at": utc_now_iso()}
    summary["curated_exports"] = exports
    _replace(Path(run.path) / SUMMARY_FILE, lambda tmp: dump_json(summary, tmp),
             prefix=TEMP_PREFIX)


def _curated(run: AuditRun, *, apply_filter: bool = False
             ) -> tuple[pd.DataFrame, pd.Series, pd.DataFrame]:
    """Every input row with the relabels applied, the mask of the rows the curated set keeps,
    and the table of changes."""
    columns = run.input.get("columns") or {}
    label_col, id_col = columns.get("label"), columns.get("id")
    frame = run.frame.copy()
    status = run.score_columns(["row_id", "status"]).set_index("row_id")["status"]
    status = status.reindex(frame.index).astype(str)
    decided = decisions_in_force(run).set_index("row_id")
    decision = decided["decision"].reindex(frame.index)
    notes = decided["note"].reindex(frame.index).fillna("")
    old = frame[label_col] if label_col in frame else pd.Series(None, index=frame.index)
    changes = []

    def change(ids: Any, kind: str, new: Any = None) -> None:
        part = pd.DataFrame({"row_id": ids, "change": kind,
                             "old_label": old.reindex(ids).to_numpy(),
                             "new_label": new if new is not None else None,
                             "note": notes.reindex(ids).to_numpy()})
        if id_col and id_col in frame:
            part.insert(1, id_col, frame[id_col].reindex(ids).to_numpy())
        changes.append(part)

    relabel = decision == "relabel"
    if relabel.any() and label_col in frame:
        new_labels = decided["label"].reindex(frame.index)[relabel]
        typed = _typed_labels(frame[label_col], new_labels)
        change(new_labels.index, "relabelled", typed.to_numpy())
        frame.loc[relabel, label_col] = typed
    dropped = decision == "drop"
    change(frame.index[dropped], "dropped")
    keep = ~dropped
    if apply_filter:
        filtered = (status == "removed") & keep & (decision != "keep")
        change(frame.index[filtered], "filtered")
        keep &= ~filtered
    changes_table = pd.concat(changes, ignore_index=True) if changes else pd.DataFrame(
        columns=["row_id", "change", "old_label", "new_label", "note"])
    order = {k: i for i, k in enumerate(frame.index)}
    changes_table = changes_table.sort_values(
        "row_id", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
    return frame, keep, changes_table


def _typed_labels(original: pd.Series, new: pd.Series) -> pd.Series:
    """New labels (text) in the original column's type: each as the original value that
    reads as it (``"1"`` -> ``1`` for integer labels), else as it is."""
    values = {str(v): v for v in pd.unique(original.dropna())}
    return new.map(lambda text: values.get(str(text), text))


def _write(frame: pd.DataFrame, out: Path, fmt: str, *, split: str | None) -> None:
    """``frame`` to ``out`` through a hidden temporary beside it, renamed at the end."""
    tmp = out.with_name(f".{out.name}.part-{secrets.token_hex(4)}")
    try:
        if fmt in ("csv", "tsv"):
            frame.to_csv(tmp, index=False, sep="," if fmt == "csv" else "\t",
                         lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
        elif fmt == "jsonl":
            frame.to_json(tmp, orient="records", lines=True, force_ascii=False)
        elif fmt == "json":
            frame.to_json(tmp, orient="records", force_ascii=False)
        elif fmt == "parquet":
            pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp)
        else:
            _write_hf(frame, tmp, split)
        if out.is_dir() and fmt == "hf":
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)


def _write_hf(frame: pd.DataFrame, folder: Path, split: str | None) -> None:
    try:
        import datasets  # optional dependency
    except ImportError:
        raise ValueError("format: hf needs the datasets package (python -m pip install "
                         "datasets); or choose parquet") from None
    if split and split in frame and split not in ("", "(none)"):
        parts = {str(key): datasets.Dataset.from_pandas(
            part.drop(columns=split), preserve_index=False)
            for key, part in frame.groupby(frame[split].astype(str), sort=False)}
        datasets.DatasetDict(parts).save_to_disk(str(folder))
    else:
        datasets.Dataset.from_pandas(frame, preserve_index=False).save_to_disk(str(folder))


def _write_changes(changes: pd.DataFrame, path: Path) -> None:
    _replace(path, lambda tmp: changes.to_csv(tmp, index=False, lineterminator="\r\n"))


def _replace(path: Path, write: Any, *, prefix: str = ".") -> None:
    """``write(tmp)`` to a hidden temporary beside ``path`` (``prefix`` + its name), renamed
    over ``path`` at the end: a reader sees the old file or the new one, never half a file."""
    tmp = path.with_name(f"{prefix}{path.name}.part-{secrets.token_hex(4)}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
