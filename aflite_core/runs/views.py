"""Read-only views of a run that the dashboard and the report draw: no Streamlit here.

Each function takes an opened :class:`~aflite_core.runs.folder.AuditRun` (or a runs root) and
returns a plain table; the dashboard caches them (``ui/cache.py``) and draws them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aflite_core.io import load_dataset
from aflite_core.runs.folder import AuditRun, list_runs, load_run

#: Columns the audit adds to the rows shown in Explore.
AUDIT_COLUMNS = ("status", "predictability", "removal_round")


def rows_table(run: AuditRun) -> pd.DataFrame:
    """All rows of a run: the texts and the label first (premise, hypothesis, label), then
    ``status``, ``predictability``, ``removal_round`` and the measures' per-row columns, then
    every other original column (an original column with one of the audit's names gets
    `` (input)``). ``removal_round`` is empty (``<NA>``) for a row that was not removed.

    Index: ``row_id``, in input order.
    """
    frame = run.frame
    scores = run.scores.set_index("row_id")
    rename = {c: f"{c} (input)" for c in frame.columns if c in AUDIT_COLUMNS}
    table = frame.rename(columns=rename)
    audit = scores.reindex(table.index)[list(AUDIT_COLUMNS)]
    rounds = pd.to_numeric(audit["removal_round"], errors="coerce")
    audit["removal_round"] = rounds.where(rounds >= 0).astype("Int64")
    roles = run.columns
    first = [rename.get(c, c) for c in (roles.get("premise"), roles.get("hypothesis"),
                                         roles.get("label")) if c and c in frame.columns]
    rest = [c for c in table.columns if c not in first]
    table = pd.concat([table[first], audit,
                       measure_row_columns(run, table.index, set(table.columns)), table[rest]],
                      axis=1)
    table["status"] = table["status"].astype(str)
    table.index.name = "row_id"
    return table


def measure_row_columns(run: AuditRun, index: pd.Index, taken: set[str] = frozenset()
                        ) -> pd.DataFrame:
    """The per-row columns of every registered measure with ``row_columns`` whose files the
    run has (e.g. PVI, data-map confidence), aligned to ``index``; a name already ``taken``
    by an input column gets `` (measure)``."""
    from aflite_core.measures import registry  # lazy: +33 ms to import

    parts = []
    for measure in registry.measures():
        if measure.row_columns is None or not all(run.has(f) for f in measure.files):
            continue
        part = measure.row_columns(run)
        part = part.rename(columns={c: f"{c} (measure)" for c in part.columns if c in taken})
        if part.index.dtype != index.dtype:  # e.g. int ids read back as objects: match text
            part.index = part.index.astype(str)
            part = part.reindex(index.astype(str)).set_axis(index)
        else:
            part = part.reindex(index)
        parts.append(part)
    return pd.concat(parts, axis=1) if parts else pd.DataFrame(index=index)


def predictability_bins(run: AuditRun, *, bins: int = 20, by_label: bool = False
                        ) -> pd.DataFrame:
    """Binned predictability counts of retained and removed rows (for the histograms).

    Returns
    -------
    DataFrame
        ``status`` (and ``label`` with ``by_label``), ``left``, ``right``, ``count``: one row
        per group and bin of ``bins`` equal bins over [0, 1]; rows without a score are left
        out.
    """
    scores = run.scores
    scored = scores[scores["status"].astype(str).isin(["retained", "removed"])]
    scored = scored[np.isfinite(scored["predictability"].to_numpy(dtype=float))]
    edges = np.linspace(0.0, 1.0, bins + 1)
    keys = ["status", "label"] if by_label and "label" in scored else ["status"]
    rows = []
    for group, part in scored.groupby(keys, sort=True):
        group = group if isinstance(group, tuple) else (group,)
        counts, _ = np.histogram(part["predictability"].to_numpy(dtype=float), bins=edges)
        for i, count in enumerate(counts):
            rows.append({**dict(zip(keys, map(str, group), strict=True)),
                         "left": edges[i], "right": edges[i + 1], "count": int(count)})
    return pd.DataFrame(rows, columns=[*keys, "left", "right", "count"])


#: A map window: (x0, x1, y0, y1) in the map's coordinates.
Window = tuple[float, float, float, float]


def in_window(x: np.ndarray, y: np.ndarray, window: Window | None) -> np.ndarray | None:
    """Mask of the points inside ``window`` (edges included), or None for no window."""
    if window is None:
        return None
    x0, x1, y0, y1 = (float(v) for v in window)
    if not (x0 < x1 and y0 < y1) or not np.isfinite([x0, x1, y0, y1]).all():
        raise ValueError(f"window: expected finite (x0, x1, y0, y1) with x0 < x1 and y0 < y1; "
                         f"got {window!r}")
    return (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)


def map_points(run: AuditRun, *, max_points: int, seed: int = 0,
               window: Window | None = None) -> tuple[pd.DataFrame, int]:
    """Projected points joined with status/label/predictability, downsampled if needed.

    Parameters
    ----------
    window : (x0, x1, y0, y1), optional
        Only the rows whose map point is in this window (a zoomed view, drawn again from
        every row), before downsampling.

    Returns
    -------
    points : DataFrame
        ``row_id``, ``x``, ``y``, ``status``, ``predictability``, ``label``.
    total : int
        Number of projected rows (in the window) before downsampling (a uniform random
        sample, seeded).
    """
    projection = run.projection
    if projection is None or projection.empty:
        return pd.DataFrame(columns=["row_id", "x", "y"]), 0
    inside = in_window(projection["x"].to_numpy(), projection["y"].to_numpy(), window)
    projection = projection[["row_id", "x", "y"]]
    if inside is not None:
        projection = projection[inside]
    scores = run.scores[["row_id", "status", "predictability", *(
        ["label"] if "label" in run.scores else [])]]
    points = projection.merge(scores, on="row_id", how="left")
    total = len(points)
    if total > max_points:
        rng = np.random.default_rng(seed)
        keep = np.sort(rng.choice(total, size=max_points, replace=False))
        points = points.iloc[keep]
    return points.reset_index(drop=True), total


def map_density(run: AuditRun, *, bins: tuple[int, int] | None = None,
                window: Window | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """How many rows of the map fall in each cell of a ``bins`` grid over its extent (or over
    ``window``): the density layer drawn beneath a sampled map, so that every row shows. By
    default about four rows per cell on average, between 60 x 40 and 480 x 320 cells (3:2).

    Returns
    -------
    (counts, x_centres, y_centres) or None
        ``counts`` of shape (len(y_centres), len(x_centres)) (rows: y, as an image); None when
        the run has no map.
    """
    projection = run.projection
    if projection is None or projection.empty:
        return None
    x = projection["x"].to_numpy(dtype=np.float64)
    y = projection["y"].to_numpy(dtype=np.float64)
    inside = in_window(x, y, window)
    if inside is not None:
        x, y = x[inside], y[inside]
    if bins is None:
        wide = int(np.clip(np.sqrt(len(x) / 4 * 1.5), 60, 480))
        bins = (wide, max(1, wide * 2 // 3))
    extent = None if window is None else [[window[0], window[1]], [window[2], window[3]]]
    counts, x_edges, y_edges = np.histogram2d(x, y, bins=bins, range=extent)
    return (counts.T, (x_edges[:-1] + x_edges[1:]) / 2, (y_edges[:-1] + y_edges[1:]) / 2)


def duplicate_counts(run: AuditRun) -> pd.DataFrame:
    """Exact and normalised duplicate counts before vs after AFLite (the loader's rules).

    Raises
    ------
    ValueError, OSError
        If the run's rows cannot be read back.
    """
    roles = run.columns
    dataset = load_dataset(
        str(Path(run.path) / "dataset.parquet"), premise=roles.get("premise"),
        hypothesis=roles.get("hypothesis"), label=roles.get("label"), split=roles.get("split"),
        id=run.dataset_row_id_column,
    )
    audited = np.concatenate([run.row_ids("retained"), run.row_ids("removed")])
    counts = {
        "before (audited rows)": dataset.subset(audited).report.duplicates,
        "after (retained rows)": dataset.subset(run.row_ids("retained")).report.duplicates,
    }
    return pd.DataFrame(counts).rename_axis("duplicates")


def planted_shares(rows: pd.DataFrame) -> tuple[float, float] | None:
    """Share of rows flagged ``planted_bias`` among audited and among retained rows.

    For the synthetic demo (its rows carry the flag); None when the column is absent.
    """
    if "planted_bias" not in rows:
        return None
    flag = rows["planted_bias"].astype(str).str.lower().isin(["true", "1"])
    audited = rows["status"].isin(["retained", "removed"])
    kept = rows["status"] == "retained"
    before = float(flag[audited].mean()) if audited.any() else float("nan")
    after = float(flag[kept].mean()) if kept.any() else float("nan")
    return before, after


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _runs_of(root: str | os.PathLike, content_hash: str, opener=load_run):
    for info in list_runs(root):
        try:
            run = opener(info.path)
        except (ValueError, OSError):
            continue
        if run.input.get("sha256") == content_hash:
            yield Path(info.path), run


def newest_run_of(root: str | os.PathLike, content_hash: str, *, opener=load_run
                  ) -> Path | None:
    """Newest complete run under ``root`` whose input has this SHA-256, or None.

    ``opener`` opens a run folder (the dashboard passes its cached opener).
    """
    for path, _run in _runs_of(root, content_hash, opener):
        return path
    return None


def find_matching_run(root: str | os.PathLike, content_hash: str, parameters: dict, *,
                      opener=load_run) -> Path | None:
    """Newest run of the same input (SHA-256) with the same parameters, if any.

    This is the audit's cache: identical data and parameters reopen the finished run
    instead of computing it again.
    """
    for path, run in _runs_of(root, content_hash, opener):
        stored = run.parameters
        if all(_canonical(stored.get(k, _ADDED_LATER.get(k))) == _canonical(v)
               for k, v in parameters.items()):
            return path
    return None


#: Parameters added after runs were first written, with the value older runs had.
_ADDED_LATER: dict[str, Any] = {"filter": "aflite", "filter_params": {}}


def stop_explanation(run: Any) -> str | None:
    """One or two sentences on why AFLite stopped, with what to change when it stopped
    before its target; None when the run records no stop reason."""
    aflite = run.summary.get("aflite") or {}
    reason = aflite.get("stop_reason") or run.summary.get("stop_reason")
    if not reason:
        return None
    params = run.parameters
    sizes = run.sizes
    rounds = int(aflite.get("n_rounds") or 0)
    retained = int(sizes.get("retained", 0))
    target = params.get("target_size_rows")
    k = params.get("slice_size_rows")
    tau = params.get("tau")
    plural = "" if rounds == 1 else "s"
    if params.get("filter") == "z":
        return _z_stop_explanation(aflite, reason, retained, rounds)
    if reason == "target_size":
        return f"AFLite reached its target of {retained:,} rows after {rounds} round{plural}."
    if reason == "too_few_above_tau":
        target_text = f" (target {int(target):,})" if target is not None else ""
        return (f"AFLite stopped after {rounds} round{plural} at {retained:,} rows"
                f"{target_text}: fewer than k = {k if k is not None else '?'} rows had "
                f"predictability >= tau = {tau}. The rows left are not predictable from Φ at "
                "that threshold; to filter further, lower tau, use a richer representation, "
                "or lower k.")
    if reason == "callback":
        return f"AFLite was stopped on request after {rounds} round{plural}."
    return f"AFLite stopped after {rounds} round{plural}: {reason}."


def _z_stop_explanation(aflite: dict, reason: str, retained: int, rounds: int) -> str:
    """Why the Z-filter stopped, with its threshold and the largest |z| left."""
    z = aflite.get("zfilter") or {}
    steps = f"{rounds} step{'' if rounds == 1 else 's'}"
    left = (f" The largest |z| left is {z['max_abs_z_after']:.2f} (threshold "
            f"{z['threshold']:.2f}; {int(z.get('n_over_threshold_after', 0)):,} word(s) above "
            "it)." if "max_abs_z_after" in z and "threshold" in z else "")
    if reason == "converged":
        return (f"The Z-filter stopped after {steps} at {retained:,} rows: no hypothesis "
                f"word's |z| passes the Bonferroni threshold any more.{left}")
    if reason == "target_size":
        return f"The Z-filter reached its target of {retained:,} rows after {steps}.{left}"
    if reason == "callback":
        return f"The Z-filter was stopped on request after {steps}.{left}"
    return f"The Z-filter stopped after {steps}: {reason}.{left}"


def split_sizes(run: Any) -> pd.DataFrame | None:
    """Per split: rows before, retained, removed and the share kept, and the rows kept without
    being filtered (``kept, not filtered``: a split AFLite did not filter); None without
    splits."""
    splits = run.summary.get("splits") or {}
    if not splits:
        return None
    table = pd.DataFrame([{"split": name, **counts} for name, counts in splits.items()])
    table["kept"] = table["retained"] / table["before"].where(table["before"] > 0)
    if "unfiltered" in table:
        table["unfiltered"] = table["unfiltered"].fillna(0).astype(int)
        if table["unfiltered"].any():
            table = table.rename(columns={"unfiltered": "kept, not filtered"})
        else:
            table = table.drop(columns="unfiltered")
    return table


#: The filters as a reader knows them, by ``parameters["filter"]``, and what a round is.
FILTER_NAMES = {"aflite": "AFLite", "z": "Z-filter"}
ROUND_NAMES = {"aflite": "AFLite round", "z": "Z-filter step"}


def filter_name(run: Any) -> str:
    """``AFLite`` or ``Z-filter``: the filter the run used."""
    flt = str((run.parameters or {}).get("filter") or "aflite")
    return FILTER_NAMES.get(flt, flt)


def round_name(run: Any) -> str:
    """What one round of the run's filter is called (``AFLite round``, ``Z-filter step``)."""
    flt = str((run.parameters or {}).get("filter") or "aflite")
    return ROUND_NAMES.get(flt, "round")


def filter_description(run: Any) -> str | None:
    """What AFLite filtered (split policy, instance) and what its partitions drew (whole
    groups or rows), as recorded by the run."""
    aflite = run.summary.get("aflite") or {}
    what, drawn = aflite.get("description"), aflite.get("partition_groups")
    if not drawn:
        return what
    return f"{what or ''} Each partition trained on {drawn}.".strip()


def stage_table(run: Any) -> pd.DataFrame | None:
    """Each stage's seconds and where it ran (``dask``: tasks on the audit's scheduler, or
    ``local``), in the run's stage order, with the total last; None for a run that recorded
    no timings. Runs from before ``engines`` existed say ``–`` for where; a stage the run
    places but does not time (reading, which the caller does; the report, which is written
    before its own time is known) has no seconds."""
    timings = dict(run.summary.get("timings") or {})
    if not timings:
        return None
    engines = run.summary.get("engines") or {}
    total = timings.pop("total", None)
    order = [s for s in engines if s == "read" and s not in timings] + list(timings) + [
        s for s in engines if s != "read" and s not in timings]
    rows = [{"stage": stage, "seconds": float(timings[stage]) if stage in timings else None,
             "ran on": engines.get(stage, "–")} for stage in order]
    if total is not None:
        rows.append({"stage": "total (wall)", "seconds": float(total), "ran on": ""})
    return pd.DataFrame(rows, columns=["stage", "seconds", "ran on"])
