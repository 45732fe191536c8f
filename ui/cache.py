"""Cached wrappers over :mod:`aflite_core`: the only place the pages reach the core.

Keys are content hashes and parameters, never session ids, so two sessions that load the same
bytes share the (read-only) result, and two sessions with different data never do.
``st.cache_resource`` is used for objects handed out as is (datasets, runs: treated as
read-only by every caller, and not copied because they can be large); ``st.cache_data`` for
small derived tables. Runs are immutable folders, so a run is cached by its path and the time
stamp of its ``summary.json``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

#: Largest decompressed input accepted from an upload (a gzip bomb stops reading here).
MAX_DATASET_BYTES = 1 << 30
#: Points drawn on the map before it is downsampled (the sampling is stated on the page).
MAX_MAP_POINTS = 100_000

#: Columns the audit adds to the rows shown in Explore.
AUDIT_COLUMNS = ("status", "predictability", "removal_round")


class CoreUnavailable(RuntimeError):
    """A part of :mod:`aflite_core` the page needs is not installed (or failed to import)."""


def core(name: str) -> ModuleType:
    """Import ``aflite_core.<name>`` or raise :class:`CoreUnavailable` with a clear message.

    Parameters
    ----------
    name : str
        Module name inside :mod:`aflite_core`, e.g. ``"pipeline"``.
    """
    try:
        return importlib.import_module(f"aflite_core.{name}")
    except ImportError as exc:
        raise CoreUnavailable(
            f"aflite_core.{name} is not available in this installation ({exc})"
        ) from exc


def has_core(name: str) -> bool:
    """Whether ``aflite_core.<name>`` imports."""
    try:
        core(name)
    except CoreUnavailable:
        return False
    return True


def digest(data: bytes) -> str:
    """SHA-256 hex digest of ``data`` (the cache key of an upload)."""
    return hashlib.sha256(data).hexdigest()


def upload_digest(upload: Any) -> str:
    """SHA-256 of an uploaded file, computed once per upload and session.

    Hashing a large upload takes a moment; the digest is kept in the session under the
    upload's ``file_id`` (unique per upload) instead of being recomputed on every rerun.
    """
    key = f"app:digest:{upload.file_id}"
    known = st.session_state.get(key)
    if known is None:
        for old in [k for k in st.session_state if str(k).startswith("app:digest:")]:
            del st.session_state[old]
        known = st.session_state[key] = digest(upload.getvalue())
    return known


# --------------------------------------------------------------------------- datasets
@st.cache_resource(max_entries=4, show_spinner=False)
def _load_path(path: str, stamp: tuple[int, int], options: str) -> Any:
    return core("datasets").load_dataset(path, **json.loads(options))


def load_path(path: str | Path, **options: Any) -> Any:
    """Load a dataset file from disk (the bundled sample), cached by path, mtime and options.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    DatasetError
        If the core refuses the file.
    """
    path = Path(path)
    stat = path.stat()
    return _load_path(str(path), (stat.st_mtime_ns, stat.st_size),
                      json.dumps(options, sort_keys=True))


@st.cache_resource(max_entries=2, show_spinner=False)
def _read_raw(key: str, name: str, encoding: str | None, _data: bytes) -> Any:
    datasets = core("datasets")
    return datasets.read_table(_data, name=name, max_bytes=MAX_DATASET_BYTES, encoding=encoding)


def read_columns(data: bytes, name: str, *, encoding: str | None = None,
                 key: str | None = None) -> tuple[list[str], pd.DataFrame]:
    """Read an upload's columns and first rows, before any column role is chosen.

    Returns
    -------
    columns : list of str
    preview : DataFrame
        The first 20 rows, original values.

    Raises
    ------
    DatasetError
        If the file cannot be read (empty, bad encoding, bad line, ...).
    """
    frame = read_frame(data, name, encoding=encoding, key=key)
    return [str(c) for c in frame.columns], frame.head(20)


def read_frame(data: bytes, name: str, *, encoding: str | None = None,
               key: str | None = None) -> pd.DataFrame:
    """Every column of an uploaded table, original values (no column role applied).

    Raises
    ------
    DatasetError
        If the file cannot be read.
    """
    return _read_raw(key or digest(data), name, encoding, data).frame


@st.cache_resource(max_entries=3, show_spinner=False)
def _load_bytes(key: str, name: str, options: str, _data: bytes) -> Any:
    return core("datasets").load_dataset(
        _data, name=name, max_bytes=MAX_DATASET_BYTES, **json.loads(options)
    )


def load_upload(data: bytes, name: str, *, key: str | None = None, **options: Any) -> Any:
    """Load uploaded bytes with a column mapping, cached by content hash and options.

    Parameters
    ----------
    data : bytes
        The uploaded file (possibly gzip-compressed).
    name : str
        The file name (used for the format and in messages).
    key : str or None
        SHA-256 of ``data`` when already known (:func:`upload_digest`).
    **options
        Keyword arguments of :func:`aflite_core.datasets.load_dataset` (``premise``,
        ``hypothesis``, ``label``, ``split``, ``id``, ``choices``, ``answer``).
    """
    clean = {k: v for k, v in options.items() if v not in (None, "", [], ())}
    return _load_bytes(key or digest(data), name, json.dumps(clean, sort_keys=True), data)


def guess_roles(columns: Sequence[str]) -> dict[str, str | None]:
    """Guess column roles from names with the core's name lists (for widget defaults)."""
    datasets = core("datasets")

    def norm(value: str) -> str:
        return re.sub(r"[\s_\-.]+", "", str(value).strip().lower())

    normalised = {norm(c): c for c in reversed(list(columns))}
    taken: set[str] = set()
    roles: dict[str, str | None] = {}
    for role, names in (("label", "LABEL_NAMES"), ("hypothesis", "HYPOTHESIS_NAMES"),
                        ("premise", "PREMISE_NAMES"), ("split", "SPLIT_NAMES"),
                        ("id", "ID_NAMES")):  # fmt: skip
        roles[role] = None
        for candidate in getattr(datasets, names, ()):
            col = normalised.get(norm(candidate))
            if col is not None and col not in taken:
                roles[role] = col
                taken.add(col)
                break
    return roles


# --------------------------------------------------------------------------- runs
def _stamp(path: Path) -> float:
    summary = path / "summary.json"
    return summary.stat().st_mtime if summary.exists() else 0.0


@st.cache_resource(max_entries=3, show_spinner=False)
def _open_run(path: str, stamp: float) -> Any:
    return core("runs").load_run(path)


def open_run(path: str | Path) -> Any:
    """Open a completed run folder (cached; runs are immutable).

    Raises
    ------
    RunError
        If the folder is missing or incomplete (the message says what is missing).
    """
    path = Path(path)
    return _open_run(str(path.resolve()), _stamp(path))


def list_runs(root: Path) -> list[Any]:
    """Complete runs under ``root``, newest first (empty when the core is missing)."""
    try:
        return core("runs").list_runs(root)
    except CoreUnavailable:
        return []


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def find_matching_run(root: Path, content_hash: str, parameters: dict) -> Path | None:
    """Newest run of the same input (SHA-256) with the same parameters, if any.

    This is the audit's cache: identical data and parameters reopen the finished run
    instead of computing it again.
    """
    for info in list_runs(root):
        try:
            run = open_run(info.path)
        except (ValueError, OSError):
            continue
        if run.input.get("sha256") != content_hash:
            continue
        stored = run.parameters
        if all(_canonical(stored.get(k)) == _canonical(v) for k, v in parameters.items()):
            return Path(info.path)
    return None


@st.cache_resource(max_entries=2, show_spinner=False)
def _rows_table(path: str, stamp: float) -> pd.DataFrame:
    run = _open_run(path, stamp)
    frame = run.frame
    scores = run.scores.set_index("row_id")
    rename = {c: f"{c} (input)" for c in frame.columns if c in AUDIT_COLUMNS}
    table = frame.rename(columns=rename)
    audit = scores.reindex(table.index)[list(AUDIT_COLUMNS)]
    roles = run.columns
    first = [rename.get(c, c) for c in (roles.get("premise"), roles.get("hypothesis"),
                                         roles.get("label")) if c and c in frame.columns]
    table = table[first + [c for c in table.columns if c not in first]]
    table = pd.concat([audit, table], axis=1)
    table["status"] = table["status"].astype(str)
    table.index.name = "row_id"
    return table


def rows_table(path: str | Path) -> pd.DataFrame:
    """All rows of a run: ``status``, ``predictability``, ``removal_round``, then every
    original column, text and label first (an original column with one of the audit's names
    gets `` (input)``).

    Index: ``row_id``. Cached per run; callers must not modify it.
    """
    path = Path(path)
    return _rows_table(str(path.resolve()), _stamp(path))


@st.cache_data(max_entries=8, show_spinner=False)
def _sort_order(path: str, stamp: float, column: str, ascending: bool) -> np.ndarray:
    from ui import filters

    return filters.sort_order(_rows_table(path, stamp), column, ascending=ascending)


def sort_order(path: str | Path, column: str, *, ascending: bool) -> np.ndarray:
    """Row positions of :func:`rows_table` sorted by ``column`` (stable, missing last).

    Cached per run, column and direction, so paging and filtering a large run does not
    sort it again on every rerun.
    """
    path = Path(path)
    return _sort_order(str(path.resolve()), _stamp(path), column, ascending)


@st.cache_data(max_entries=16, show_spinner=False)
def _bins(path: str, stamp: float, bins: int, by_label: bool) -> pd.DataFrame:
    run = _open_run(path, stamp)
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


def predictability_bins(path: str | Path, *, bins: int = 20, by_label: bool = False
                        ) -> pd.DataFrame:
    """Binned predictability counts of retained and removed rows (for the histograms)."""
    path = Path(path)
    return _bins(str(path.resolve()), _stamp(path), bins, by_label)


@st.cache_data(max_entries=8, show_spinner=False)
def _map_points(path: str, stamp: float, max_points: int, seed: int
                ) -> tuple[pd.DataFrame, int]:
    run = _open_run(path, stamp)
    projection = run.projection
    if projection is None or projection.empty:
        return pd.DataFrame(columns=["row_id", "x", "y"]), 0
    scores = run.scores[["row_id", "status", "predictability", *(
        ["label"] if "label" in run.scores else [])]]
    points = projection[["row_id", "x", "y"]].merge(scores, on="row_id", how="left")
    total = len(points)
    if total > max_points:
        rng = np.random.default_rng(seed)
        keep = np.sort(rng.choice(total, size=max_points, replace=False))
        points = points.iloc[keep]
    return points.reset_index(drop=True), total


def map_points(path: str | Path, *, max_points: int = MAX_MAP_POINTS, seed: int = 0
               ) -> tuple[pd.DataFrame, int]:
    """Projected points joined with status/label/predictability, downsampled if needed.

    Returns
    -------
    points : DataFrame
        ``row_id``, ``x``, ``y``, ``status``, ``predictability``, ``label``.
    total : int
        Number of projected rows before downsampling (a uniform random sample, seeded).
    """
    path = Path(path)
    return _map_points(str(path.resolve()), _stamp(path), max_points, seed)


def export_bytes(path: str | Path, what: str, *, row_ids: Sequence[Any] | None = None,
                 fmt: str = "csv") -> bytes:
    """Bytes of an export of the run (called lazily by a download button)."""
    exports = core("exports")
    return exports.export_bytes(str(path), what, format=fmt,
                                row_ids=None if row_ids is None else list(row_ids))


@st.cache_data(max_entries=4, show_spinner=False)
def _report_html(path: str, stamp: float) -> str:
    run = _open_run(path, stamp)
    if run.has("report.html"):
        return (Path(path) / "report.html").read_text(encoding="utf-8")
    return core("report").build_report(run)


def report_html(path: str | Path) -> str:
    """The run's self-contained HTML report (the stored one, else built and cached)."""
    path = Path(path)
    return _report_html(str(path.resolve()), _stamp(path))


@st.cache_data(max_entries=32, show_spinner="Finding the rows with this cue…")
def _feature_mask(path: str, stamp: float, feature_type: str, feature: str, text: str
                  ) -> np.ndarray:
    run = _open_run(path, stamp)
    frame = run.frame
    columns = run.columns
    hyp_col, prem_col = columns.get("hypothesis"), columns.get("premise")
    if hyp_col not in frame:
        raise ValueError(f"run {run.name}: hypothesis column {hyp_col!r} not in its rows")
    hyps = frame[hyp_col].astype("string").fillna("").tolist()
    prems = frame[prem_col].astype("string").fillna("").tolist() if prem_col in frame else None
    linguistic = core("linguistic")
    matrix = linguistic.extract_features(hyps, prems, features=[feature_type], text=text,
                                         min_count=1)
    if feature_type in matrix.unavailable:
        raise ValueError(matrix.unavailable[feature_type])
    try:
        return matrix.column(feature_type, feature)
    except KeyError:
        return np.zeros(len(frame), dtype=bool)


def feature_mask(path: str | Path, feature_type: str, feature: str, *,
                 text: str = "hypothesis") -> np.ndarray:
    """Boolean mask over the run's rows (input order): rows that have the cue feature.

    The rows are annotated with :func:`aflite_core.linguistic.extract_features` (the same
    tokenisation as the cue table; cached on disk by the core).
    """
    path = Path(path)
    return _feature_mask(str(path.resolve()), _stamp(path), feature_type, feature, text)


@st.cache_data(max_entries=4, show_spinner="Counting duplicates…")
def _duplicates(path: str, stamp: float) -> pd.DataFrame:
    run = _open_run(path, stamp)
    roles = run.columns
    dataset = core("datasets").load_dataset(
        str(Path(path) / "dataset.parquet"), premise=roles.get("premise"),
        hypothesis=roles.get("hypothesis"), label=roles.get("label"), split=roles.get("split"),
        id=run.dataset_row_id_column,
    )
    audited = np.concatenate([run.row_ids("retained"), run.row_ids("removed")])
    counts = {
        "before (audited rows)": dataset.subset(audited).report.duplicates,
        "after (retained rows)": dataset.subset(run.row_ids("retained")).report.duplicates,
    }
    return pd.DataFrame(counts).rename_axis("duplicates")


def duplicate_counts(path: str | Path) -> pd.DataFrame:
    """Exact and normalised duplicate counts before vs after AFLite (the loader's rules).

    Raises
    ------
    ValueError, OSError
        If the run's rows cannot be read back.
    """
    path = Path(path)
    return _duplicates(str(path.resolve()), _stamp(path))
