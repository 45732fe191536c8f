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
import json
import os
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from aflite_core.cues import linguistic, resources
from aflite_core.filter import synthetic
from aflite_core.io import AuditDataset, datasets, shards
from aflite_core.measures import baselines, datamap, map_regions, registry
from aflite_core.runs import (
    AUDIT_COLUMNS,  # noqa: F401 - re-exported for the pages
    AuditRun,
    RowIndex,
    exports,
    views,
)
from aflite_core.runs import folder as runs
from ui import charts

#: Largest decompressed input accepted from an upload (a gzip bomb stops reading here).
MAX_DATASET_BYTES = 1 << 30
#: Points drawn on the map before it is downsampled (the sampling is stated on the page, a
#: density image of every row lies beneath, and a box, a lasso or a region's name still
#: selects from every row). 12,000: in a browser without a GPU, WebGL is drawn in software
#: and the page waits for it; on a 1M-row run a page switch to Explore took 1.04-1.06 s
#: (median of six) with 30,000 points and 0.87-0.88 s with 12,000 (docs/dashboard.md,
#: "Every row at a million rows"); the density image carries every row either way.
#: ``AFLITE_MAP_MAX_POINTS`` sets it, for a fast browser or a test of the sampled map.
MAX_MAP_POINTS = int(os.environ.get("AFLITE_MAP_MAX_POINTS", "") or 12_000)
#: Bins of the predictability histograms.
HISTOGRAM_BINS = 20


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
    return datasets.load_dataset(path, **json.loads(options))


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


#: Bytes a path on the server may hold (the CLI's default limit).
MAX_PATH_BYTES = 1 << 30


def path_stamp(path: str) -> str:
    """What identifies a server path's content for the caches (its files' names, sizes and
    modification times); raises when the path is not allowed or names no data."""
    return shards.source_stamp(path, roots=shards.allowed_roots())


@st.cache_resource(max_entries=2, show_spinner=False)
def _read_path(path: str, stamp: str) -> Any:
    return datasets.read_table(path, max_bytes=MAX_PATH_BYTES)


def read_path_columns(path: str, stamp: str) -> tuple[list[str], pd.DataFrame]:
    """The columns and first 20 rows of a path on the server (:func:`path_stamp`)."""
    frame = _read_path(path, stamp).frame
    return [str(c) for c in frame.columns], frame.head(20)


@st.cache_resource(max_entries=2, show_spinner=False)
def _load_server_path(path: str, stamp: str, options: str) -> Any:
    # the table read for the column preview, not the files again (data too big to upload)
    return datasets.load_dataset(_read_path(path, stamp), **json.loads(options))


def load_server_path(path: str, stamp: str, **options: Any) -> Any:
    """Load a path on the server with a column mapping (options as :func:`load_upload`)."""
    return _load_server_path(path, stamp, _mapping_key(options))


def _mapping_key(options: dict[str, Any]) -> str:
    """The Data page's mapping as a cache key: unset options left out; ``""`` for
    ``premise``, ``split`` or ``group`` kept (the page's "(none)": none, do not guess)."""
    explicit_none = ("premise", "split", "group")
    return json.dumps({k: v for k, v in options.items()
                       if v not in (None, [], ()) and (v != "" or k in explicit_none)},
                      sort_keys=True)


@st.cache_resource(max_entries=2, show_spinner=False)
def _read_raw(key: str, name: str, encoding: str | None, _data: bytes) -> Any:
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
    # the table the column preview read (cached), not the bytes parsed again: the server
    # holds one copy of an upload's rows (two once: 2 GB for 16 cells of 60 MB)
    opts = json.loads(options)
    raw = _read_raw(key, name, opts.pop("encoding", None), _data)
    return datasets.load_dataset(raw, **opts)


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
        Keyword arguments of :func:`aflite_core.io.datasets.load_dataset` (``premise``,
        ``hypothesis``, ``label``, ``split``, ``id``, ``choices``, ``answer``, ``group``).
        ``""`` for ``premise``, ``split`` or ``group`` is kept: it means "none, do not
        guess" (the Data page's "(none)").
    """
    return _load_bytes(key or digest(data), name, _mapping_key(options), data)


def unavailable_fix() -> str:
    """Why cue families are unavailable and the command that fixes it (not cached: after the
    fix, the next rerun must say so)."""
    return resources.unavailable_fix()


def guess_roles(columns: Sequence[str]) -> dict[str, str | None]:
    """Guess column roles from names (for widget defaults): :func:`datasets.guess_roles`."""
    return datasets.guess_roles(columns)


def synthetic_demo(n: int, seed: int, folder: Path) -> tuple[AuditDataset, Path]:
    """The biased-circles demo dataset, its features saved in the session's folder.

    Returns the dataset and the ``.npy`` file the *precomputed* representation reads.
    """
    dataset, X = synthetic.biased_circles_dataset(n, random_state=seed)
    features = Path(folder) / f"biased_circles_n{n}_seed{seed}.npy"
    np.save(features, X, allow_pickle=False)
    return dataset, features


# --------------------------------------------------------------------------- runs
def _stamp(path: Path) -> float:
    summary = path / "summary.json"
    return summary.stat().st_mtime if summary.exists() else 0.0


@st.cache_resource(max_entries=3, show_spinner=False)
def _open_run(path: str, stamp: float) -> AuditRun:
    return runs.load_run(path)


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
    """Complete runs under ``root``, newest first."""
    return runs.list_runs(root)


def _cached_open(path: str | Path) -> AuditRun:
    return open_run(path)


def find_matching_run(root: Path, content_hash: str, parameters: dict) -> Path | None:
    """Newest run of the same input and parameters (:func:`views.find_matching_run`)."""
    return views.find_matching_run(root, content_hash, parameters, opener=_cached_open)


def newest_run_of(root: Path, content_hash: str) -> Path | None:
    """Newest complete run of the input with this SHA-256 (:func:`views.newest_run_of`)."""
    return views.newest_run_of(root, content_hash, opener=_cached_open)


@st.cache_resource(max_entries=2, show_spinner=False)
def _rows_table(path: str, stamp: float) -> pd.DataFrame:
    return views.rows_table(_open_run(path, stamp))


def rows_table(path: str | Path) -> pd.DataFrame:
    """All rows of a run: ``status``, ``predictability``, ``removal_round``, then every
    original column, text and label first (an original column with one of the audit's names
    gets `` (input)``).

    Index: ``row_id``. Cached per run; callers must not modify it.
    """
    path = Path(path)
    return _rows_table(str(path.resolve()), _stamp(path))


@st.cache_resource(max_entries=2, show_spinner=False)
def _row_index(path: str, stamp: float) -> RowIndex:
    index = RowIndex(_rows_table(path, stamp))
    label = _open_run(path, stamp).columns.get("label")
    # What the first filters ask for, decoded while the first page draws the charts.
    threading.Thread(target=index.warm, name="row-index-warm", daemon=True, kwargs={
        "codes": [("status", False), *([(label, True)] if label else [])],
        "orders": [("predictability", False)]}).start()
    return index


def row_index(path: str | Path) -> RowIndex:
    """The decoded columns of :func:`rows_table` (codes, numbers, Arrow texts, sort orders,
    recent search masks), one per run shared by every session: Explore's filters, search
    and sort are one vectorised pass over them (``ui.filters``)."""
    path = Path(path)
    return _row_index(str(path.resolve()), _stamp(path))


@st.cache_data(max_entries=16, show_spinner=False)
def _bins(path: str, stamp: float, bins: int, by_label: bool) -> pd.DataFrame:
    return views.predictability_bins(_open_run(path, stamp), bins=bins, by_label=by_label)


def predictability_bins(path: str | Path, *, bins: int = HISTOGRAM_BINS, by_label: bool = False
                        ) -> pd.DataFrame:
    """Binned predictability counts of retained and removed rows (for the histograms)."""
    path = Path(path)
    return _bins(str(path.resolve()), _stamp(path), bins, by_label)


@st.cache_resource(max_entries=8, show_spinner=False)
def _map_points(path: str, stamp: float, max_points: int, seed: int,
                window: tuple | None) -> tuple[pd.DataFrame, int]:
    return views.map_points(_open_run(path, stamp), max_points=max_points, seed=seed,
                            window=window)


def map_points(path: str | Path, *, max_points: int = MAX_MAP_POINTS, seed: int = 0,
               window: tuple[float, float, float, float] | None = None
               ) -> tuple[pd.DataFrame, int]:
    """Projected points joined with status/label/predictability, downsampled if needed
    (:func:`aflite_core.runs.views.map_points`; ``window``: a zoomed view, from every row).
    Shared by every session (no copy per rerun): callers must not modify it.

    Returns
    -------
    points : DataFrame
        ``row_id``, ``x``, ``y``, ``status``, ``predictability``, ``label``.
    total : int
        Number of projected rows (in the window) before downsampling.
    """
    path = Path(path)
    return _map_points(str(path.resolve()), _stamp(path), max_points, seed,
                       _window_key(window))


def _window_key(window: Sequence[float] | None) -> tuple | None:
    return None if window is None else tuple(float(v) for v in window)


@st.cache_data(max_entries=8, show_spinner=False)
def _density(path: str, stamp: float, window: tuple | None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Rows per cell of the map or its ``window`` (:func:`views.map_density`), once per
    window for the map's three colourings."""
    return views.map_density(_open_run(path, stamp), window=window)


@st.cache_resource(max_entries=16, show_spinner=False)
def _map_figure(path: str, stamp: float, color: str, window: tuple | None,
                max_points: int) -> go.Figure:
    points, total = _map_points(path, stamp, max_points, 0, window)
    fig = charts.projection_scatter(points, color=color, continuous=color == "predictability")
    if len(points) < total:  # the sample's points over a density image of every row
        charts.add_density(fig, _density(path, stamp, window), total=total)
    regions = _regions(path, stamp)
    if window is not None:
        regions = charts.regions_in(regions, window)
        fig.update_xaxes(range=[window[0], window[1]])
        fig.update_yaxes(range=[window[2], window[3]])
    return charts.add_regions(fig, regions)


def map_figure(path: str | Path, *, color: str,
               window: tuple[float, float, float, float] | None = None,
               max_points: int = MAX_MAP_POINTS) -> go.Figure:
    """The Explore map of a run (:func:`map_points` coloured by ``color`` over the density
    image of every row, with its named regions; ``window``: a zoomed view), built once per
    run, colour and window and shared by every session: callers must not modify it (a map
    of 12,000-30,000 points costs 0.04-0.1 s to build, on every rerun otherwise)."""
    path = Path(path)
    return _map_figure(str(path.resolve()), _stamp(path), color, _window_key(window),
                       max_points)


@st.cache_resource(max_entries=8, show_spinner=False)
def _found_map_figure(path: str, stamp: float, color: str, window: tuple | None,
                      max_points: int, text: str, k: int) -> go.Figure:
    return charts.with_found_rows(_map_figure(path, stamp, color, window, max_points),
                                  _nearest(path, stamp, text, k))


def found_map_figure(path: str | Path, *, color: str, text: str, k: int,
                     window: tuple[float, float, float, float] | None = None,
                     max_points: int = MAX_MAP_POINTS) -> go.Figure:
    """:func:`map_figure` with the rows a search by meaning found (:func:`nearest_rows` of
    ``text``) starred over it, built once per run, colour, window and search (copying the
    map's figure costs 0.1 s at 12,000 points, on every rerun otherwise); shared: do not
    modify it."""
    path = Path(path)
    return _found_map_figure(str(path.resolve()), _stamp(path), color, _window_key(window),
                             max_points, str(text), int(k))


@st.cache_resource(max_entries=16, show_spinner=False)
def _histogram_figure(path: str, stamp: float, by_label: bool) -> go.Figure | None:
    binned = _bins(path, stamp, HISTOGRAM_BINS, by_label)
    return None if binned.empty else charts.predictability_histogram(
        binned, facet="label" if by_label else None)


def histogram_figure(path: str | Path, *, by_label: bool = False) -> go.Figure | None:
    """The predictability histogram of retained vs removed rows (one panel per label with
    ``by_label``), None without scores; shared by every session: do not modify it."""
    path = Path(path)
    return _histogram_figure(str(path.resolve()), _stamp(path), by_label)


@st.cache_resource(max_entries=8, show_spinner=False)
def _rounds_figure(path: str, stamp: float) -> go.Figure | None:
    run = _open_run(path, stamp)
    history = run.history
    if history.empty or "removed" not in history:
        return None
    return charts.removal_per_round(history, step=views.round_name(run))


def rounds_figure(path: str | Path) -> go.Figure | None:
    """Rows removed per round (or step) and the set size, None without a per-round history;
    shared by every session: do not modify it."""
    path = Path(path)
    return _rounds_figure(str(path.resolve()), _stamp(path))


@st.cache_data(max_entries=8, show_spinner=False)
def _regions(path: str, stamp: float) -> pd.DataFrame:
    table = _open_run(path, stamp).read_parquet(map_regions.FILE)
    return map_regions.region_table(table)  # a run's before the shares were columns too


def map_regions_table(path: str | Path) -> pd.DataFrame:
    """The run's named map regions (``map_regions.parquet``; empty when it has none)."""
    path = Path(path)
    return _regions(str(path.resolve()), _stamp(path))


@st.cache_data(max_entries=32, show_spinner=False)
def _region_ids(path: str, stamp: float, region: int) -> list[str]:
    ids = map_regions.region_rows(_open_run(path, stamp), region)
    return [str(i) for i in ids]


def region_row_ids(path: str | Path, region: int) -> list[str]:
    """Row ids (as strings, like a map selection's) of every row of one map region, from the
    whole map, not the drawn sample.

    Raises
    ------
    ValueError
        If the run's map has no such region.
    """
    path = Path(path)
    return _region_ids(str(path.resolve()), _stamp(path), int(region))


@st.cache_data(max_entries=32, show_spinner=False)
def _nearest(path: str, stamp: float, text: str, k: int) -> pd.DataFrame:
    run = _open_run(path, stamp)
    found = run.nearest_rows(text, k=k)
    coords = run.table_columns("projection.parquet", ["row_id", "x", "y"]) \
        if run.has("projection.parquet") else None
    if coords is not None:
        found = found.merge(coords, on="row_id", how="left")
    return found.assign(row_id=found["row_id"].astype(str))


def nearest_rows(path: str | Path, text: str, k: int = 20) -> pd.DataFrame:
    """The ``k`` rows nearest ``text`` in Φ (``row_id`` as strings, like a map selection's,
    ``similarity``, and their map ``x``, ``y`` when the run has a map), once per run, text
    and k.

    Raises
    ------
    ValueError
        What :meth:`~aflite_core.runs.folder.AuditRun.nearest_rows` refuses, saying why.
    """
    path = Path(path)
    return _nearest(str(path.resolve()), _stamp(path), str(text), int(k))


@st.cache_data(max_entries=16, show_spinner=False)
def _shape_ids(path: str, stamp: float, shapes_json: str) -> list[str]:
    from aflite_core.runs import map_selection  # loads numba: only once a shape is drawn

    px, py, ids = map_selection.map_points(_open_run(path, stamp))
    mask = map_selection.points_in_shapes(px, py, json.loads(shapes_json))
    return [str(i) for i in ids[mask]]


def rows_in_shapes(path: str | Path, shapes: Sequence[dict]) -> list[str]:
    """Row ids (as strings) of every row of the run's map inside any of the drawn box or
    lasso ``shapes`` (data coordinates), tested against all rows, not the drawn sample.

    Raises
    ------
    ValueError
        If the run has no map, or a shape is not a polygon (fewer than 3 points, NaN).
    """
    path = Path(path)
    return _shape_ids(str(path.resolve()), _stamp(path),
                      json.dumps([{"x": list(s.get("x") or []), "y": list(s.get("y") or [])}
                                  for s in shapes]))


def stream_export(path: str | Path, what: str, *, row_ids: Sequence[Any] | None = None,
                  fmt: str = "csv") -> Iterator[bytes]:
    """An export of the run as byte chunks, written while they are sent (for
    :func:`ui.downloads.download`): memory bounded whatever the run's size."""
    return exports.stream_export(str(path), what, format=fmt,
                                 row_ids=None if row_ids is None else list(row_ids))


def stream_rows(table: pd.DataFrame, positions: np.ndarray, columns: list[str]
                ) -> Iterator[bytes]:
    """The CSV of the rows at ``positions`` of ``table`` (a :func:`rows_table`), in that
    order, as a table shows them (:func:`aflite_core.runs.exports.stream_view_csv`),
    streamed. The caller passes the table its positions were computed on, so a run folder
    replaced in the meantime cannot shift them onto other rows."""
    return exports.stream_view_csv(table, positions, columns)


def run_signature(path: str | Path, *parts: object) -> str:
    """Identifies a download's content: the run folder, its stamp, and ``parts``."""
    path = Path(path)
    return json.dumps([str(path.resolve()), _stamp(path), *map(str, parts)])


@st.cache_data(max_entries=4, show_spinner=False)
def _report_html(path: str, stamp: float) -> str:
    run = _open_run(path, stamp)
    if run.has("report.html"):
        return (Path(path) / "report.html").read_text(encoding="utf-8")
    # imported here: the HTML report pulls in every measure and scikit-learn, which the
    # first page a session sees does not need (0.6 s of the first paint)
    from aflite_core.report import html as report_html_module

    return report_html_module.build_report(run)


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

    The rows are annotated with :func:`aflite_core.cues.linguistic.extract_features` (the same
    tokenisation as the cue table; cached on disk by the core).
    """
    path = Path(path)
    return _feature_mask(str(path.resolve()), _stamp(path), feature_type, feature, text)


@st.cache_data(max_entries=4, show_spinner="Counting duplicates…")
def _duplicates(path: str, stamp: float) -> pd.DataFrame:
    return views.duplicate_counts(_open_run(path, stamp))


def duplicate_counts(path: str | Path) -> pd.DataFrame:
    """Exact and normalised duplicate counts before vs after AFLite (the loader's rules).

    Raises
    ------
    ValueError, OSError
        If the run's rows cannot be read back.
    """
    path = Path(path)
    return _duplicates(str(path.resolve()), _stamp(path))


# --------------------------------------------------------------------------- data map
@st.cache_data(max_entries=4, show_spinner=False)
def _datamap_table(path: str, stamp: float) -> pd.DataFrame:
    table = _open_run(path, stamp).read_parquet(datamap.FILE)
    return pd.DataFrame(columns=list(datamap.COLUMNS)) if table is None else table


def datamap_table(path: str | Path) -> pd.DataFrame:
    """The run's ``datamap.parquet`` (every scored row; empty when the run has none)."""
    path = Path(path)
    return _datamap_table(str(path.resolve()), _stamp(path))


@st.cache_data(max_entries=16, show_spinner=False)
def _datamap_thresholds(path: str, stamp: float, n_classes: int, axis: str,
                        shares: str) -> dict:
    table = _datamap_table(path, stamp)
    return datamap.calibrated_thresholds(datamap.region_axis(table, axis), table["variability"],
                                         n_classes=n_classes, **json.loads(shares))


def datamap_thresholds(path: str | Path, *, n_classes: int, axis: str = "confidence",
                       **shares: float) -> dict:
    """:func:`aflite_core.measures.datamap.calibrated_thresholds` on the run's data map
    (its ``axis``: :func:`~aflite_core.measures.datamap.axis_of`), for the shares typed on
    Explore (cached: it sorts every scored row's values)."""
    path = Path(path)
    return _datamap_thresholds(str(path.resolve()), _stamp(path), int(n_classes), str(axis),
                               json.dumps(shares, sort_keys=True))


# --------------------------------------------------------------------------- compare
@st.cache_resource(max_entries=2, show_spinner="Comparing the two runs…")
def _side_by_side(path_a: str, stamp_a: float, path_b: str, stamp_b: float) -> Any:
    from aflite_core.report import compare  # lazy: +12 ms to import

    return compare.side_by_side(_open_run(path_a, stamp_a), _open_run(path_b, stamp_b))


def side_by_side(path_a: str | Path, path_b: str | Path) -> Any:
    """Two runs compared for the two-column view (:func:`compare.side_by_side`), cached
    per pair of runs; callers must not modify it.

    Raises
    ------
    RunError
        If either run is missing or damaged.
    """
    a, b = Path(path_a), Path(path_b)
    return _side_by_side(str(a.resolve()), _stamp(a), str(b.resolve()), _stamp(b))


@st.cache_data(max_entries=2, show_spinner=False)
def _compare_html(path_a: str, stamp_a: float, path_b: str, stamp_b: float) -> str:
    from aflite_core.report import compare_html  # lazy: +28 ms to import

    return compare_html.build_compare_html(_side_by_side(path_a, stamp_a, path_b, stamp_b))


def compare_html(path_a: str | Path, path_b: str | Path) -> str:
    """The comparison as a self-contained HTML page (called lazily by a download button)."""
    a, b = Path(path_a), Path(path_b)
    return _compare_html(str(a.resolve()), _stamp(a), str(b.resolve()), _stamp(b))


# --------------------------------------------------------------------------- baselines
@st.cache_data(max_entries=8, show_spinner=False)
def _baseline_headline(path: str, stamp: float) -> list[dict]:
    try:
        data = _open_run(path, stamp).read_json("baselines.json")
    except (ValueError, OSError):
        return []
    return baselines.headline_figures(data)


def baseline_headline(path: str | Path) -> list[dict]:
    """The run's "bias removed beyond size" figures in headline order, each with its
    verdict and caveats (:func:`aflite_core.measures.baselines.headline_figures`)."""
    path = Path(path)
    return _baseline_headline(str(path.resolve()), _stamp(path))


@st.cache_resource(max_entries=64, show_spinner=False)
def _measure_figures(path: str, stamp: float, name: str) -> list:
    return registry.get(name).draw(_open_run(path, stamp))


def measure_figures(path: str | Path, name: str) -> list:
    """The figures measure ``name`` draws for the run (:meth:`Measure.draw`), the same the
    HTML report shows; shared, never modified by the pages (runs are immutable)."""
    path = Path(path)
    return _measure_figures(str(path.resolve()), _stamp(path), name)


@st.cache_data(max_entries=32, show_spinner=False)
def _measure_tables(path: str, stamp: float, name: str) -> dict[str, pd.DataFrame]:
    return registry.get(name).before_after(_open_run(path, stamp))


def measure_tables(path: str | Path, name: str) -> dict[str, pd.DataFrame]:
    """The before/after tables of measure ``name`` for the run (:meth:`Measure.before_after`),
    computed once per run: some join several of the run's files (the slices' map regions read
    every stored slice's rows), which an open Report section would otherwise redo on every
    rerun."""
    path = Path(path)
    return _measure_tables(str(path.resolve()), _stamp(path), name)


# --------------------------------------------------------------------------- review
@st.cache_resource(max_entries=8, show_spinner=False)
def _review_queue(path: str, stamp: float, source: str, key: str | None) -> Any:
    from aflite_core.runs import review_queue as queue  # lazy: +12 ms to import

    return queue(_open_run(path, stamp), source, key)


def review_queue(path: str | Path, source: str, key: str | None = None) -> Any:
    """The row ids of a review queue, in review order (cached: the run's tables do not
    change; the decisions, which do, are read by the page on every rerun)."""
    path = Path(path)
    return _review_queue(str(path.resolve()), _stamp(path), source, key)


def curated_csv(path: str | Path, *, apply_filter: bool = False) -> bytes:
    """The curated dataset as CSV bytes (:func:`aflite_core.runs.export_curated`);
    not cached: it follows the decisions."""
    from aflite_core.runs import export_curated  # lazy: +6 ms to import

    with tempfile.TemporaryDirectory(prefix="aflite-curated-") as tmp:
        out = Path(tmp) / "curated.csv"
        export_curated(open_run(path), out, format="csv", apply_filter=apply_filter)
        return out.read_bytes()
