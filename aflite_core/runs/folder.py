"""The AuditRun folder format: atomic write, list, load, compare.

One run is one folder under a *runs root*. It is written into a hidden temporary
folder ``ROOT/.tmp-<name>-<random>`` and renamed to ``ROOT/<name>`` only when it is
complete, so a run that fails, is cancelled or is killed never appears as a run:
:func:`list_runs` ignores dot-folders, and :func:`cleanup_stale` removes the ones a
killed process left behind once they are old enough. A complete run is never
modified; ``overwrite=True`` replaces it as a whole, atomically: whenever a kill lands,
one complete run of that name is visible, or is made visible again by
:func:`recover_runs` (run by every writer, :func:`cleanup_stale` and :func:`list_runs`).

The files are described in ``docs/run-format.md``; ``FORMAT_VERSION`` is stored in
``summary.json`` and checked on load.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from aflite_core.errors import (
    DamagedFileError,
    RunError,  # noqa: F401 - re-exported: its public home
)
from aflite_core.io import (
    sweep_stale_parts,
)
from aflite_core.json_files import read_json_file
from aflite_core.runs._checks import (
    run_damage,
    scores_problem,
    summary_problem,
    unreadable_table,
)
from aflite_core.runs._column_reads import frame_from_csvs, parquet_rows, read_columns
from aflite_core.runs._layout import (  # noqa: F401 - re-exported: part of the folder API
    BASELINES_FILE,
    CUES_FILE,
    DATASET_FILE,
    DUPLICATES_FILE,
    FORMAT_VERSION,
    INOCULATION_FILE,
    KNN_EXAMPLES_FILE,
    KNN_FILE,
    PROJECTION_FILE,
    REPORT_FILE,
    ROW_CSV_FILES,
    SCORES_COLUMNS,
    SCORES_FILE,
    STATUSES,
    SUMMARY_FILE,
)
from aflite_core.runs._names import (  # noqa: F401 - re-exported: part of the folder API
    MAX_NAME_BYTES,
    NEW_PREFIX,
    OLD_PREFIX,
    SAFE_FILE_NAME,
    STALE_AGE_SECONDS,
    TEMP_PREFIX,
    check_file_name,
    check_run_name,
    default_run_name,
    hidden_name,
    resolve_run_path,
    run_name_problems,
    sanitize_run_name,
    unique_run_name,
)
from aflite_core.runs._owners import abandoned
from aflite_core.runs._search import nearest_rows as search_nearest_rows

# --------------------------------------------------------------------------- json


def to_jsonable(obj: Any) -> Any:
    """Convert numpy/pandas values, paths and non-finite floats into plain JSON values.

    NaN and infinities become ``None`` (JSON has no NaN); mapping keys become strings.
    """
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [to_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, pd.DataFrame):
        return [to_jsonable(r) for r in obj.to_dict(orient="records")]
    if isinstance(obj, pd.Series):
        return to_jsonable(obj.to_dict())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    if isinstance(obj, (os.PathLike, Path)):
        return os.fspath(obj)
    if isinstance(obj, (_dt.datetime, _dt.date, pd.Timestamp)):
        return obj.isoformat()
    if obj is pd.NA or obj is pd.NaT:
        return None
    return str(obj)


def dump_json(obj: Any, path: Path) -> None:
    text = json.dumps(to_jsonable(obj), indent=2, ensure_ascii=False, allow_nan=False)
    path.write_text(text + "\n", encoding="utf-8")


def utc_now_iso() -> str:
    """Current UTC time as ISO 8601 with a ``Z`` suffix, second precision."""
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    return now.isoformat().replace("+00:00", "Z")


# --------------------------------------------------------------------------- recovery


def _hidden_complete_runs(root_path: Path) -> dict[str, list[tuple[tuple, Path]]]:
    """Complete runs hidden by an interrupted swap: ``.new-*`` (about to be swapped in) and
    ``.old-*`` (swapped out) folders with a valid ``summary.json``, by the run name their
    summary records, each with a sort key (newest, and ``.new-`` first, last)."""
    found: dict[str, list[tuple[tuple, Path]]] = {}
    for entry in root_path.iterdir():
        if not entry.name.startswith((NEW_PREFIX, OLD_PREFIX)) or entry.is_symlink():
            continue
        try:
            if not entry.is_dir():
                continue
            summary = _read_summary(entry)
            mtime = (entry / SUMMARY_FILE).stat().st_mtime_ns
        except (RunError, OSError):
            continue
        name = summary.get("name")
        try:
            if not isinstance(name, str) or sanitize_run_name(name) != name:
                continue
        except ValueError:
            continue
        key = (entry.name.startswith(NEW_PREFIX), mtime)
        found.setdefault(name, []).append((key, entry))
    return found


def recover_runs(root: str | os.PathLike) -> list[Path]:
    """Put back a complete run that an interrupted ``overwrite`` swap left hidden.

    A process killed in the middle of replacing run ``NAME`` can leave ``NAME`` missing and
    the complete runs in ``.new-NAME-*`` and/or ``.old-NAME-*``. When ``NAME`` is missing,
    the newest complete one (the new run if it is there) is renamed back to ``NAME``.
    Called by :class:`RunWriter`, :func:`cleanup_stale` and :func:`list_runs`; harmless
    when there is nothing to recover or the runs root is read-only.

    Returns
    -------
    list of Path
        The run folders restored.
    """
    root_path = Path(root)
    if not root_path.is_dir():
        return []
    restored = []
    try:
        hidden = _hidden_complete_runs(root_path)
    except OSError:
        return []
    for name, candidates in hidden.items():
        target = root_path / name
        if target.exists() or target.is_symlink():
            continue
        for _, entry in sorted(candidates, key=lambda c: c[0], reverse=True):
            try:
                os.rename(entry, target)
            except OSError:
                if target.exists():  # restored meanwhile by another process
                    break
                continue
            restored.append(target)
            break
    return restored


def cleanup_stale(
    root: str | os.PathLike, *, max_age: float = STALE_AGE_SECONDS
) -> list[Path]:
    """Recover hidden complete runs, then remove what killed processes left behind.

    First :func:`recover_runs` gives back a run whose visible folder an interrupted swap
    left missing (a complete run is restored, never deleted). Then the folders whose name
    starts with ``.tmp-``, ``.new-`` or ``.old-`` and the export temporary files
    (``.<name>.part-<token>``) whose modification time is older than ``max_age`` seconds
    are removed; a younger one may belong to a run or an export still in progress, unless
    its owner (:func:`aflite_core.runs.claim`: the CLI's texts folder) is a process
    of this host that is gone.

    Returns
    -------
    list of Path
        The folders and files removed.
    """
    root_path = Path(root)
    if not root_path.is_dir():
        return []
    recover_runs(root_path)
    removed = []
    now = time.time()
    for entry in root_path.iterdir():
        if not entry.name.startswith(".") or entry.is_symlink():
            continue
        try:
            age = now - entry.stat().st_mtime
        except OSError:
            continue
        if (entry.name.startswith((TEMP_PREFIX, OLD_PREFIX, NEW_PREFIX)) and entry.is_dir()
                and (age >= max_age or abandoned(entry))):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    removed += sweep_stale_parts(root_path, max_age=max_age)
    return removed


# --------------------------------------------------------------------------- reading


def _read_summary(path: Path) -> dict:
    summary_path = path / SUMMARY_FILE
    if not path.is_dir():
        raise RunError(f"run folder {path.name} does not exist or is not a folder")
    if not summary_path.is_file():
        raise RunError(
            f"{path.name} is not a complete run: {SUMMARY_FILE} is missing "
            "(a run still being written, or one that failed, has no summary)"
        )
    label = f"{path.name}/{SUMMARY_FILE}"
    try:
        summary = read_json_file(summary_path, name=label)
    except DamagedFileError as exc:
        raise RunError(str(exc)) from None
    except OSError as exc:
        raise RunError(f"{label} cannot be read ({exc.strerror or type(exc).__name__})"
                       ) from None
    summary_path = Path(label)  # messages below name the run, not the server's path
    if not isinstance(summary, dict):
        raise RunError(f"{summary_path}: expected a JSON object, found {type(summary).__name__}")
    version = summary.get("format_version")
    if version is None:
        raise RunError(
            f"{summary_path} has no 'format_version'; it was not written by aflite_core "
            f"(this version reads format 1..{FORMAT_VERSION})"
        )
    if not isinstance(version, int) or version < 1:
        raise RunError(
            f"{summary_path}: format_version must be a positive integer, got {repr(version)[:40]}"
        )
    if version > FORMAT_VERSION:
        raise RunError(
            f"{path.name} was written in run format {version} by a newer aflite_core; this version "
            f"reads formats up to {FORMAT_VERSION}; upgrade aflite_core to open it"
        )
    return summary


def is_run_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a complete run folder (a readable ``summary.json``)."""
    try:
        _read_summary(Path(path))
    except RunError:
        return False
    return True


def check_not_in_run(target: str | os.PathLike) -> Path:
    """Refuse a file target inside a complete run folder (runs are never modified).

    Returns the target as a Path; raises ``ValueError`` naming the run otherwise.
    """
    target = Path(target)
    folder = target.resolve().parent
    if is_run_folder(folder):
        raise ValueError(
            f"refusing to write {target.name} into the run folder {folder}: a complete run is "
            "never modified; choose a path outside it"
        )
    return target


#: The per-row tables :class:`AuditRun` keeps once read, by file.
_KEPT_AS = {SCORES_FILE: "scores", PROJECTION_FILE: "projection"}


class AuditRun:
    """A completed run folder, opened read-only.

    ``summary`` is read on construction; the tables are read lazily on first access
    and cached. Use :func:`load_run` to open one.

    Attributes
    ----------
    path : Path
        The run folder.
    summary : dict
        Contents of ``summary.json``.
    """

    def __init__(self, path: str | os.PathLike, summary: dict | None = None) -> None:
        self.path = Path(path)
        self.summary = summary if summary is not None else _read_summary(self.path)

    def __repr__(self) -> str:
        return f"AuditRun({str(self.path)!r})"

    # -- summary fields
    @property
    def name(self) -> str:
        return str(self.summary.get("name") or self.path.name)

    @property
    def format_version(self) -> int:
        return int(self.summary["format_version"])

    @property
    def created(self) -> str:
        return str(self.summary.get("created", ""))

    @property
    def parameters(self) -> dict:
        return dict(self.summary.get("parameters") or {})

    @property
    def sizes(self) -> dict:
        return dict(self.summary.get("sizes") or {})

    @property
    def input(self) -> dict:
        return dict(self.summary.get("input") or {})

    @property
    def columns(self) -> dict:
        """Column mapping used (``hypothesis``, ``label``, ``premise``, ...)."""
        return dict(self.input.get("columns") or {})

    @property
    def history(self) -> pd.DataFrame:
        """Per-round AFLite history (empty frame when absent)."""
        return pd.DataFrame(self.summary.get("history") or [])

    @property
    def measures(self) -> dict:
        """Per-measure outcome, e.g. ``{"knn": {"status": "error", "error": "..."}}``."""
        return dict(self.summary.get("measures") or {})

    def measure_states(self) -> dict[str, str]:
        """State of every registered measure in this run, in run order.

        ``ok`` (recorded as done and every file it declares is present), ``error`` (it
        failed; ``measures[name]["error"]`` says why), ``skipped`` (it does not apply to this
        run; ``measures[name]["reason"]`` says why), ``damaged`` (recorded as done but a
        declared file is missing), or ``not run`` (not chosen, or a run older than the
        measure). The Report page and ``list_runs`` read this instead of naming files.
        """
        from aflite_core.measures import registry  # lazy: +39 ms to import

        recorded = self.measures
        present = set(self.artifacts)
        states: dict[str, str] = {}
        for measure in registry.measures():
            outcome = recorded.get(measure.name) or {}
            status = outcome.get("status")
            written = outcome.get("artifacts") or measure.files
            if status == "ok":
                states[measure.name] = ("ok" if set(written) <= present else "damaged")
            elif status in ("error", "skipped"):
                states[measure.name] = status
            else:
                states[measure.name] = "not run"
        return states

    @property
    def artifacts(self) -> list[str]:
        """Files present in the folder (from disk, not from the summary)."""
        return sorted(p.name for p in self.path.iterdir() if p.is_file())

    def has(self, filename: str) -> bool:
        """Whether the run folder contains ``filename``."""
        return (self.path / check_file_name(filename)).is_file()

    # -- tables
    def read_parquet(self, filename: str, columns: list[str] | None = None, *,
                     categories: tuple[str, ...] | list[str] = ()) -> pd.DataFrame | None:
        """Read a Parquet artifact of the run, or None when absent.

        Parameters
        ----------
        filename : str
            A file of the run folder.
        columns : list of str, optional
            Only these columns (the others are not decoded).
        categories : sequence of str, default ()
            Columns read as pandas categoricals with sorted categories: one small code a
            row instead of a string (a per-row table of millions of rows in the report);
            equal values group, compare and sort as the strings do. A column the file does
            not have is ignored.
        """
        return self._read_parquet(filename, columns, categories)

    def _read_parquet(self, filename: str, columns: list[str] | None = None,
                      categories: tuple[str, ...] | list[str] = ()) -> pd.DataFrame | None:
        if not self.has(filename):
            return None
        return read_columns(self.path / filename, columns, categories)

    def parquet_columns(self, filename: str) -> list[str]:
        """The column names of a Parquet artifact of the run (its schema alone; [] when
        absent)."""
        if not self.has(filename):
            return []

        return list(pq.read_schema(self.path / filename).names)

    def score_columns(self, columns: list[str], *, optional: tuple[str, ...] = (),
                      categories: tuple[str, ...] = ("status", "label")) -> pd.DataFrame:
        """Some columns of :attr:`scores` (and those of ``optional`` it has), the string
        columns of ``categories`` as sorted categoricals when read (:meth:`table_columns`).

        Raises
        ------
        RunError
            If ``scores.parquet`` is missing or lacks one of ``columns``.
        """
        if "scores" not in self.__dict__ and not self.has(SCORES_FILE):
            raise RunError(f"run {self.path} is incomplete: {SCORES_FILE} is missing")
        return self.table_columns(SCORES_FILE, columns, optional=optional,
                                  categories=categories)

    def table_columns(self, filename: str, columns: list[str], *,
                      optional: tuple[str, ...] = (), categories: tuple[str, ...] = ()
                      ) -> pd.DataFrame | None:
        """Some columns of a per-row table (and those of ``optional`` it has): from the table
        when it is read and kept already (:attr:`scores`, :attr:`projection`), else read
        alone with the string columns of ``categories`` as sorted categoricals (the report
        of millions of rows never needs every column at once). None when the file is absent.

        Raises
        ------
        RunError
            If the table lacks one of ``columns``.
        """
        kept = self.__dict__.get(_KEPT_AS.get(filename, ""))
        present = list(kept.columns) if kept is not None else self.parquet_columns(filename)
        if kept is None and not self.has(filename):
            return None
        missing = [c for c in columns if c not in present]
        if missing:
            raise RunError(f"{self.path / filename} lacks column(s) {missing}; "
                           f"found {present}")
        wanted = [*columns, *(c for c in optional if c in present and c not in columns)]
        if kept is not None:
            return kept[wanted]
        return self._read_parquet(filename, wanted, [c for c in categories if c in wanted])

    #: Tables of one row per input row that :meth:`forget_row_tables` drops.
    ROW_TABLES = ("scores", "frame", "projection", "knn_examples")

    def forget_row_tables(self, keep: tuple[str, ...] | set[str] = ()) -> None:
        """Drop the per-row tables read and kept so far (:data:`ROW_TABLES`, but ``keep``):
        the next use reads them again. The report drops what each section read, so that
        at millions of rows no section's tables sit under the next one's."""
        for name in self.ROW_TABLES:
            if name not in keep:
                self.__dict__.pop(name, None)

    @cached_property
    def scores(self) -> pd.DataFrame:
        """``scores.parquet``: one row per input row, in input order."""
        frame = self._read_parquet(SCORES_FILE)
        if frame is None:
            raise RunError(f"run {self.path} is incomplete: {SCORES_FILE} is missing")
        self._check_score_columns(list(frame.columns))
        self._check_statuses(frame["status"])
        return frame

    def _check_score_columns(self, columns: list[str]) -> None:
        """Refuse a ``scores.parquet`` without a column of :data:`SCORES_COLUMNS`."""
        missing = [c for c in SCORES_COLUMNS if c not in columns]
        if missing:
            raise RunError(
                f"{self.path / SCORES_FILE} lacks column(s) {missing}; found {columns}")

    def _check_statuses(self, status: pd.Series) -> None:
        """Refuse a ``scores.parquet`` with a status not among :data:`STATUSES`."""
        bad = sorted(set(map(str, pd.unique(status))) - set(STATUSES))
        if bad:
            raise RunError(f"{self.path / SCORES_FILE}: unknown status value(s) {bad}")

    def check_scores(self) -> pd.DataFrame:
        """Check ``scores.parquet`` (its columns and statuses) from its schema and two
        columns, the statuses as codes (:meth:`score_columns`), without reading and keeping
        the whole table (a run of 5M rows opened for its report).

        Returns
        -------
        pandas.DataFrame
            ``row_id`` and ``status``.
        """
        if "scores" in self.__dict__:
            return self.scores[["row_id", "status"]]
        if not self.has(SCORES_FILE):
            raise RunError(f"run {self.path} is incomplete: {SCORES_FILE} is missing")
        self._check_score_columns(self.parquet_columns(SCORES_FILE))
        scores = self.score_columns(["row_id", "status"])
        self._check_statuses(scores["status"])
        return scores

    @property
    def dataset_row_id_column(self) -> str:
        """Name of the row-id column inside ``dataset.parquet``."""
        return str((self.summary.get("dataset") or {}).get("row_id_column", "row_id"))

    @cached_property
    def frame(self) -> pd.DataFrame:
        """The full original frame (all original columns, index ``row_id``, input order).

        Read from ``dataset.parquet``; a folder without it (older writers) is rebuilt from
        the per-status CSV files, with every value as a string.
        """
        if self.has(DATASET_FILE):
            frame = pd.read_parquet(self.path / DATASET_FILE)
            id_col = self.dataset_row_id_column
            if id_col not in frame.columns:
                raise RunError(f"{self.path / DATASET_FILE} lacks its row-id column {id_col!r}")
            frame = frame.set_index(id_col)
            frame.index.name = "row_id"
            return frame
        return frame_from_csvs(self.path, self.scores)

    def frame_rows(self, positions: np.ndarray, columns: list[str] | None = None
                   ) -> pd.DataFrame:
        """Some rows of :attr:`frame` (positions in input order), some of its columns: read
        from ``dataset.parquet`` alone, without the frame of every row (the report's
        examples at 5M rows), unless :attr:`frame` is read already or the folder has no
        ``dataset.parquet``.

        Raises
        ------
        KeyError
            If a column is not in the frame.
        """
        positions = np.asarray(positions, dtype=np.int64)
        if "frame" in self.__dict__ or not self.has(DATASET_FILE):
            frame = self.frame
            return frame.iloc[positions] if columns is None else frame.iloc[positions][columns]
        return parquet_rows(self.path / DATASET_FILE, positions, columns,
                            self.dataset_row_id_column)

    @cached_property
    def cues(self) -> pd.DataFrame | None:
        """``cues.parquet`` (with a ``scope`` column: full | retained), or None."""
        return self._read_parquet(CUES_FILE)

    @cached_property
    def knn(self) -> pd.DataFrame | None:
        """``knn.parquet``, or None when not computed."""
        return self._read_parquet(KNN_FILE)

    @cached_property
    def knn_examples(self) -> pd.DataFrame | None:
        """``knn_examples.parquet`` (per held-out example and scope), or None."""
        return self._read_parquet(KNN_EXAMPLES_FILE)

    def nearest_rows(self, text: str, k: int = 20) -> pd.DataFrame:
        """The ``k`` rows nearest ``text`` in Φ (``row_id``, ``similarity``): the search by
        meaning of :func:`aflite_core.runs._search.nearest_rows` (its errors say what to do)."""
        return search_nearest_rows(self, text, k=k)

    @cached_property
    def projection(self) -> pd.DataFrame | None:
        """``projection.parquet``, or None when not computed."""
        return self._read_parquet(PROJECTION_FILE)

    def rows_in_polygon(self, xs: Any, ys: Any) -> np.ndarray:
        """Row ids of every row whose map point lies inside the polygon (``xs``, ``ys``, data
        coordinates of ``projection.parquet``): even-odd rule, a point on a left or bottom
        edge inside and on a right or top edge outside (:mod:`aflite_core.runs.map_selection`).

        Raises
        ------
        ValueError
            If the run has no map, or the polygon has fewer than 3 vertices or NaN ones.
        """
        # imported here: it loads numba (0.3 s), which opening a run does not need
        from aflite_core.runs.map_selection import rows_in_polygon

        return rows_in_polygon(self, xs, ys)

    @cached_property
    def baselines(self) -> dict | None:
        """``baselines.json``, or None when not computed."""
        return self.read_json(BASELINES_FILE)

    def read_json(self, filename: str) -> Any | None:
        """Read a JSON artifact of the run, or None when absent.

        Raises
        ------
        RunError
            The file is damaged (over the size or nesting limit of
            :mod:`aflite_core.json_files`, not UTF-8 or not JSON); the message names the run.
        """
        if not self.has(filename):
            return None
        try:
            return read_json_file(self.path / filename, name=f"{self.path.name}/{filename}")
        except DamagedFileError as exc:
            raise RunError(f"run {exc}") from None

    def status_mask(self, status: str) -> np.ndarray:
        """Boolean mask over :attr:`scores` rows with the given status."""
        if status not in STATUSES:
            raise ValueError(f"status: expected one of {STATUSES}, got {status!r}")
        return (self.scores["status"].astype(str) == status).to_numpy()

    def row_ids(self, status: str) -> np.ndarray:
        """Row ids with the given status, in input order."""
        return self.scores["row_id"].to_numpy()[self.status_mask(status)]

    # -- review decisions (decisions.parquet: aflite_core.runs.decisions, which imports
    # this module, hence the imports inside the methods)
    def decisions(self) -> pd.DataFrame:
        """The review decisions in force (the latest per row, reverts taken back):
        ``row_id, decision, label, note, reviewer, decided_at``; read afresh each call."""
        from aflite_core.runs.decisions import decisions_in_force  # lazy: +7 ms to import

        return decisions_in_force(self)

    def decide(self, row_ids: Any, decision: str, *, label: Any = None, note: str = "",
               reviewer: str = "") -> int:
        """Record ``decision`` (keep, drop, relabel, revert) on ``row_ids`` in
        ``decisions.parquet`` (atomically, under a lock); returns how many rows. ``label``:
        the new label of a relabel, one of the run's labels. Nothing is recorded when any
        row id or the label is not the run's (``ValueError``) or the folder cannot be written
        (:class:`RunError`); see :func:`aflite_core.runs.decisions.decide`."""
        from aflite_core.runs.decisions import decide  # lazy: +7 ms to import

        return decide(self, row_ids, decision, label=label, note=note, reviewer=reviewer)


def load_run(path: str | os.PathLike) -> AuditRun:
    """Open a completed run folder.

    Parameters
    ----------
    path : path
        The run folder (the one holding ``summary.json``).

    Returns
    -------
    AuditRun

    Raises
    ------
    RunError
        If the folder is missing, incomplete, written in an unknown format, or damaged
        (``summary.json`` values of the wrong type, sizes that are negative or do not add
        up, scores that disagree with them: :mod:`aflite_core.runs._checks`); the message
        names the run and says what is wrong, e.g. ``run r is damaged: summary.json:
        sizes.retained is -5 (expected a whole number >= 0)``.

    Examples
    --------
    A run written by :func:`aflite_core.run_audit` (or ``python -m aflite_core run``):

    >>> import tempfile
    >>> from aflite_core import AuditConfig, load_dataset, load_run, run_audit
    >>> from aflite_core.data import SAMPLE
    >>> small = load_dataset(load_dataset(SAMPLE).frame.head(600).reset_index(), name="s.csv")
    >>> path = run_audit(small, AuditConfig(target_size=300, n_partitions=8, measures=(),
    ...                                     report=False), runs_root=tempfile.mkdtemp())
    >>> run = load_run(path)
    >>> run.sizes["input"], sorted(run.scores["status"].unique())
    (600, ['removed', 'retained'])
    >>> len(run.row_ids("removed")) == run.sizes["removed"]
    True
    """
    run = AuditRun(path)
    problem = summary_problem(run.summary)
    if problem:
        raise RunError(f"run {run.path.name} is damaged: {SUMMARY_FILE}: {problem}")
    problem = unreadable_table(run.path)  # footers only: a truncated table
    if not problem:
        problem = scores_problem(run.check_scores(), run.summary)  # not kept: read on use
    if problem:
        raise RunError(f"run {run.path.name} is damaged: {problem}")
    return run


@dataclass(frozen=True)
class RunInfo:
    """One entry of :func:`list_runs`."""

    name: str
    path: Path
    created: str
    input_name: str
    sizes: dict = field(default_factory=dict)
    parameters: dict = field(default_factory=dict)
    disk_bytes: int = 0
    format_version: int = FORMAT_VERSION
    #: Why the run cannot be opened as is (e.g. ``scores.parquet is missing``); empty
    #: when it is fine.
    damaged: str = ""

    @property
    def status(self) -> str:
        """``"ok"`` or ``"damaged: <reason>"`` (for a list shown to the user)."""
        return f"damaged: {self.damaged}" if self.damaged else "ok"


def _folder_bytes(path: Path) -> int:
    total = 0
    for entry in path.iterdir():
        try:
            if entry.is_file():
                total += entry.stat().st_size
        except OSError:
            continue
    return total


def _run_info(entry: Path) -> RunInfo | None:
    """The list entry of one folder: None for a folder that is not a run (no summary)."""
    if not (entry / SUMMARY_FILE).is_file():
        return None
    try:
        summary = _read_summary(entry)
    except RunError as exc:  # there, but damaged: listed, so that it can be seen and removed
        return RunInfo(name=entry.name, path=entry, created="", input_name="",
                       disk_bytes=_folder_bytes(entry),
                       damaged=str(exc).replace(f"{entry.name}/", "", 1))
    problem = summary_problem(summary)
    sound = not problem
    created = summary.get("created", "")
    return RunInfo(
        name=entry.name,
        path=entry,
        created=created if isinstance(created, str) else "",
        input_name=str((summary.get("input") or {}).get("name", "")) if sound else "",
        sizes=dict(summary.get("sizes") or {}) if sound else {},
        parameters=dict(summary.get("parameters") or {}) if sound else {},
        disk_bytes=_folder_bytes(entry),
        format_version=int(summary["format_version"]),
        damaged=(f"{SUMMARY_FILE}: {problem}" if problem else run_damage(entry, summary)),
    )


def list_runs(root: str | os.PathLike) -> list[RunInfo]:
    """List the runs in ``root``, newest first.

    A complete run hidden by an interrupted ``overwrite`` is first put back
    (:func:`recover_runs`). Dot-folders (runs being written, or left by killed processes)
    and folders without a ``summary.json`` are ignored; a run whose ``summary.json`` is
    damaged (over the limits of :mod:`aflite_core.json_files`, wrong types), whose
    ``scores.parquet`` is missing or unreadable, whose other Parquet files are truncated, or
    that lost a file it lists, is listed with :attr:`RunInfo.damaged` saying why. No content
    of any folder makes it raise.
    """
    root_path = Path(root)
    if not root_path.is_dir():
        return []
    recover_runs(root_path)
    runs = []
    for entry in root_path.iterdir():
        try:
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            info = _run_info(entry)
        except Exception as exc:  # noqa: BLE001 - no folder's content may break the list
            info = RunInfo(name=entry.name, path=entry, created="", input_name="",
                           damaged=f"it cannot be read ({type(exc).__name__})")
        if info is not None:
            runs.append(info)
    runs.sort(key=lambda r: r.name, reverse=True)
    runs.sort(key=lambda r: r.created, reverse=True)
    return runs
