"""Writing a run folder atomically: :class:`RunWriter` and :func:`write_run`.

Files go into a hidden temporary folder in the runs root, renamed to the run's name only
when complete; replacing a run swaps the two folders in one step where the system can
(Linux ``renameat2(RENAME_EXCHANGE)``), else by two renames that
:func:`aflite_core.runs.folder.recover_runs` can always undo. See
``docs/run-format.md``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from aflite_core.io import (
    ROW_GROUP,
    TextsFile,
    index_values,
    link_or_copy,
    parquet_safe_table,
    same_ids,
    write_csv,
    write_frame,
)
from aflite_core.json_files import read_json_file
from aflite_core.represent import (
    BASIS_KEY,
    BASIS_SHAPE_KEY,
    COMPACT_FILE,
    TEXT_MODEL_FILE,
    compact_phi,
    save_text_model,
)
from aflite_core.runs._layout import (
    DATASET_FILE,
    FORMAT_VERSION,
    ROW_CSV_FILES,
    SCORES_COLUMNS,
    SCORES_FILE,
    STATUSES,
    SUMMARY_FILE,
)
from aflite_core.runs._names import (
    MAX_NAME_BYTES,
    NEW_PREFIX,
    OLD_PREFIX,
    TEMP_PREFIX,
    check_file_name,
    hidden_name,
    resolve_run_path,
    suffixed_name,
)
from aflite_core.runs._rows import iter_row_chunks
from aflite_core.runs.folder import AuditRun, cleanup_stale, dump_json, to_jsonable, utc_now_iso


def _exchange_supported() -> bool:
    return sys.platform.startswith("linux")


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing folders in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``).

    Returns False, having changed nothing, when the system or the file system cannot do it;
    the caller then falls back to two renames.
    """
    if not _exchange_supported():
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), os.fspath(a), None, os.fspath(b))



def _is_replaceable(path: Path) -> bool:
    """A folder may be overwritten only if it is a run folder or empty."""
    if not path.is_dir() or path.is_symlink():
        return False
    return (path / SUMMARY_FILE).is_file() or not any(path.iterdir())


#: Rows of a Parquet row group: ``pq.write_table``'s default (1024 x 1024), so a table written
#: a row group at a time (:meth:`RunWriter.write_parquet`) is the file the whole table made.
ROW_GROUP_ROWS = 1 << 20


def cast_columns(frame: pd.DataFrame, astype: Mapping) -> pd.DataFrame:
    """``frame.astype(astype)``, a categorical column cast through its categories (each cast
    once, then taken by the rows' codes): the same column, without the Python str per row
    that ``Categorical.astype`` makes of Arrow-backed categories (65 MB a million rows)."""
    if not astype:
        return frame
    taken = {}
    for name, target in astype.items():
        column = frame[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            categories = pd.array(column.cat.categories).astype(target)
            if isinstance(categories, pd.api.extensions.ExtensionArray):
                taken[name] = pd.Series(categories.take(column.cat.codes.to_numpy(),
                                                        allow_fill=True),
                                        index=frame.index, name=name, copy=False)
    rest = {name: target for name, target in astype.items() if name not in taken}
    frame = frame.astype(rest) if rest else frame
    return frame.assign(**taken) if taken else frame


def _write_row_groups(path: Path, frame: pd.DataFrame, astype: dict) -> bool:
    """Write ``frame`` to ``path`` a row group at a time; False (nothing left at ``path``)
    when a row group's columns would be typed otherwise than the first's."""
    writer, complete = None, False
    try:
        for start in range(0, len(frame), ROW_GROUP_ROWS):
            part = frame.iloc[start:start + ROW_GROUP_ROWS]
            table, converted = parquet_safe_table(cast_columns(part, astype))
            if converted or (writer is not None
                             and not table.schema.equals(writer.schema, check_metadata=True)):
                return False
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
        complete = True
    finally:
        if writer is not None:
            writer.close()
        if not complete:
            path.unlink(missing_ok=True)
    return True


class RunWriter:
    """Write one run folder atomically.

    Use as a context manager: files are written into :attr:`tmp`, a hidden folder in
    the runs root; on a clean exit :meth:`commit` renames it to :attr:`path`, on any
    exception (including ``KeyboardInterrupt`` and cancellation) the temporary folder
    is removed and nothing is left behind.

    Parameters
    ----------
    root : path
        The runs root; created if missing.
    name : str
        Run name; sanitised with :func:`sanitize_run_name`.
    overwrite : bool, default False
        Replace an existing run of the same name (only a run folder or an empty folder
        is ever replaced). Without it an existing name is an error, raised before any
        work starts and again at commit time.
    unique : bool, default False
        The name was generated, not chosen: if another run took it meanwhile (concurrent
        audits started in the same second), commit under ``name-2``, ``name-3``, ... instead
        of failing after the whole computation. Excludes ``overwrite``.
    """

    def __init__(self, root: str | os.PathLike, name: str, *, overwrite: bool = False,
                 unique: bool = False) -> None:
        if overwrite and unique:
            raise ValueError("overwrite and unique exclude each other")
        self.root = Path(root)
        self.overwrite = overwrite
        self.unique = unique
        self.path = resolve_run_path(self.root, name)
        self.name = self.path.name
        self.tmp: Path | None = None
        self.committed = False
        self._created_root = False
        self._dataset_info: dict | None = None
        self._row_ids: pd.Index | None = None  # the dataset's (a RangeIndex holds no array)
        self._summary_bytes: bytes | None = None

    def _check_target(self) -> None:
        if not self.path.exists() and not self.path.is_symlink():
            return
        if self.unique:  # a free name is picked at commit time
            return
        if not self.overwrite:
            raise FileExistsError(
                f"run folder {self.path} already exists; choose another name or overwrite it"
            )
        if not _is_replaceable(self.path):
            raise FileExistsError(
                f"{self.path} exists and is not a run folder (no {SUMMARY_FILE}) nor empty; "
                "refusing to overwrite it"
            )

    def __enter__(self) -> RunWriter:
        self._created_root = not self.root.exists()
        self.root.mkdir(parents=True, exist_ok=True)
        self.path = resolve_run_path(self.root, self.name)  # root exists now: re-resolve
        self._check_target()
        cleanup_stale(self.root)
        self._check_name_fits()
        self.tmp = self.root.resolve() / hidden_name(TEMP_PREFIX, self.name)
        self.tmp.mkdir()
        return self

    def _check_name_fits(self) -> None:
        """Refuse, before any work, a name longer than the runs root's file system takes
        (the temporary names are shortened to fit; the run's own name never is)."""
        limit = MAX_NAME_BYTES
        with contextlib.suppress(OSError, ValueError, AttributeError):
            limit = min(limit, os.pathconf(self.root, "PC_NAME_MAX"))
        n_bytes = len(self.name.encode("utf-8"))
        if n_bytes > limit:
            raise ValueError(
                f"run name {self.name!r} is {n_bytes} bytes long in UTF-8; the file system "
                f"of {self.root} takes file names of at most {limit} bytes"
            )

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            try:
                self.commit()
            except BaseException:
                self.abort()
                raise
        else:
            self.abort()

    def abort(self) -> None:
        """Remove the temporary folder (idempotent), and the runs root if this writer
        created it and it is empty."""
        if self.tmp is not None and self.tmp.exists():
            shutil.rmtree(self.tmp, ignore_errors=True)
        if self._created_root:
            with contextlib.suppress(OSError):  # not empty (another run) or already gone
                self.root.rmdir()

    def file(self, filename: str) -> Path:
        """Path of ``filename`` inside the temporary folder, for streaming writers."""
        if self.tmp is None:
            raise RuntimeError("RunWriter is not open; use it as a context manager")
        return self.tmp / check_file_name(filename)

    def write_json(self, filename: str, obj: Any) -> Path:
        """Write ``obj`` as UTF-8 JSON (NaN as null)."""
        path = self.file(filename)
        dump_json(obj, path)
        return path

    def write_text(self, filename: str, text: str) -> Path:
        """Write a UTF-8 text file."""
        path = self.file(filename)
        path.write_text(text, encoding="utf-8")
        return path

    def write_parquet(self, filename: str, frame: pd.DataFrame,
                      astype: dict | None = None) -> Path:
        """Write ``frame`` (index dropped; its columns cast by ``astype`` first, if given) as
        Parquet, making it Parquet-safe first.

        Above :data:`ROW_GROUP_ROWS` rows it is written a row group at a time: the file
        ``pq.write_table`` makes of the whole table (its row groups are these), without a
        copy of the whole table and its Arrow table (the scores at 5M rows: +452 -> +134 MB);
        whole when a row group would be typed otherwise than the first (a column all missing
        in it, or stored as text)."""
        path = self.file(filename)
        if len(frame) > ROW_GROUP_ROWS and _write_row_groups(path, frame, astype or {}):
            return path
        table, _ = parquet_safe_table(cast_columns(frame, astype))
        pq.write_table(table, path)
        return path

    def write_dataset(self, frame: pd.DataFrame) -> Path:
        """Write ``dataset.parquet``: the full original frame plus its row-id column.

        The index of ``frame`` is the row id. It is stored in a column ``row_id`` (or
        ``aflite_row_id`` if the data already has a ``row_id`` column); the name is
        recorded under ``summary["dataset"]["row_id_column"]`` by :meth:`write_summary`.
        Columns Parquet cannot type are stored as text and listed there too.
        """
        path = self.file(DATASET_FILE)
        self._dataset_info = write_frame(frame, path, row_group=DATASET_ROW_GROUP)
        self._row_ids = frame.index
        return path

    def link_dataset(self, texts: TextsFile, row_ids: pd.Index) -> Path:
        """``dataset.parquet`` as the file a dataset's texts were moved to
        (:meth:`~aflite_core.io.datasets.AuditDataset.with_texts_on_disk`, written as
        :meth:`write_dataset` writes it): linked, or copied across file systems, not written
        again from a frame that no longer holds the texts. ``row_ids``: the frame's index."""
        path = self.file(DATASET_FILE)
        link_or_copy(texts.path, path)
        self._dataset_info = dict(texts.info)
        self._row_ids = pd.Index(row_ids)
        return path

    def write_scores(self, scores: pd.DataFrame) -> Path:
        """Write ``scores.parquet`` after checking its columns, statuses and row ids.

        ``scores`` must have one row per dataset row, in the dataset's order, with
        ``row_id, status, predictability, removal_round`` (``label`` optional).
        """
        missing = [c for c in SCORES_COLUMNS if c not in scores.columns]
        if missing:
            raise ValueError(f"scores: missing column(s) {missing}; got {list(scores.columns)}")
        # the distinct statuses, not a str per row
        bad = sorted(set(map(str, pd.unique(scores["status"]))) - set(STATUSES))
        if bad:
            raise ValueError(f"scores: status must be one of {STATUSES}, found {bad}")
        row_ids = self._row_ids
        # equal to the dataset's (unique) ids, they are unique: no hash table of them
        if row_ids is None and scores["row_id"].duplicated().any():
            raise ValueError("scores: row_id values must be unique")
        if row_ids is not None and not same_ids(index_values(row_ids),
                                                scores["row_id"].to_numpy()):
            raise ValueError(
                "scores: row_id must list the dataset's row ids in the dataset's order"
            )
        # categorical columns (the audit's table) as the strings they hold: the file's columns
        # are strings whatever the table's dtype
        texts = {c: "string" for c in ("status", "label")
                 if c in scores and isinstance(scores[c].dtype, pd.CategoricalDtype)}
        rounds = scores["removal_round"].dtype
        if rounds.kind in "iu" and rounds != np.int64:  # the audit holds them as int32
            texts["removal_round"] = "int64"
        return self.write_parquet(SCORES_FILE, scores, astype=texts)

    def write_row_csvs(self) -> list[str]:
        """Write ``<status>.csv`` (row_id + original columns, exact values) per non-empty status.

        Requires :meth:`write_dataset` and :meth:`write_scores` first. Returns the names.
        """

        run = AuditRun(self.file(SUMMARY_FILE).parent, summary=self._provisional_summary())
        present = set(map(str, pd.unique(run.score_columns(["status"])["status"])))
        written = []
        for status in STATUSES:
            if status not in present:
                continue
            chunks = iter_row_chunks(run, (status,), with_scores=False)
            write_csv(chunks, self.file(ROW_CSV_FILES[status]), sanitize=False)
            written.append(ROW_CSV_FILES[status])
        return written

    def _provisional_summary(self) -> dict:
        return {
            "format_version": FORMAT_VERSION,
            "name": self.name,
            "dataset": dict(self._dataset_info or {}),
        }

    def open_partial(self, summary: dict | None = None) -> AuditRun:
        """An :class:`AuditRun` over the files written so far (e.g. to build the report)."""
        merged = self._provisional_summary()
        merged.update(summary or {})
        return AuditRun(self.file(SUMMARY_FILE).parent, summary=to_jsonable(merged))

    def write_compact_phi(self, X: Any, row_ids: Any) -> Path:
        """Each row's direction in Φ in 4 bits a dimension (``phi_compact.parquet``, the basis
        of a Φ wider than the codes in its metadata): a reviewed row's nearest rows in Φ
        (:mod:`aflite_core.represent._compact`)."""
        import pyarrow as pa  # on use, as this module's other Arrow writers

        codes, basis = compact_phi(X, random_state=0)
        width = codes.shape[1]
        phi = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(codes),
                                                   [None, pa.py_buffer(codes.tobytes())])
        table = pa.table({"row_id": pa.array(np.asarray(row_ids)), "phi": phi})
        if basis is not None:  # a Φ wider than the codes: what placing a new vector needs
            table = table.replace_schema_metadata({
                BASIS_KEY: basis.astype("<f4").tobytes(),
                BASIS_SHAPE_KEY: f"{basis.shape[0]},{basis.shape[1]}".encode()})
        path = self.file(COMPACT_FILE)
        # no dictionary: the codes seldom repeat, and the pages tried with one were 4 % larger
        pq.write_table(table, path, compression="zstd", use_dictionary=False)
        return path

    def write_text_model(self, model: dict) -> Path:
        """What places a typed text in Φ (``phi_text_model.npz``: the run's search by
        meaning, :mod:`aflite_core.represent._text_search`)."""
        path = self.file(TEXT_MODEL_FILE)
        save_text_model(model, path)
        return path

    def write_summary(self, summary: Mapping[str, Any]) -> Path:
        """Write ``summary.json``; ``format_version``, ``name``, ``created``, ``dataset`` and
        ``artifacts`` (the files present, summary included) are filled in."""
        data = dict(summary)
        data["format_version"] = FORMAT_VERSION
        data["name"] = self.name
        data.setdefault("created", utc_now_iso())
        if self._dataset_info:
            data["dataset"] = {**self._dataset_info, **dict(data.get("dataset") or {})}
        data["artifacts"] = sorted({*self.files(), SUMMARY_FILE})
        path = self.write_json(SUMMARY_FILE, data)
        self._summary_bytes = path.read_bytes()
        return path

    def _recovered_by_other(self) -> bool:
        """Whether another process's :func:`recover_runs` already moved this complete run
        to its visible name (it finished the swap a kill would have left half done)."""
        try:
            return (self.path / SUMMARY_FILE).read_bytes() == self._summary_bytes
        except (OSError, TypeError):
            return False

    def files(self) -> list[str]:
        """Names of the files written so far, sorted."""
        if self.tmp is None:
            return []
        return sorted(p.name for p in self.tmp.iterdir() if p.is_file())

    def commit(self) -> Path:
        """Rename the temporary folder to the run folder; requires ``summary.json``."""
        if self.committed:
            return self.path
        if self.tmp is None:
            raise RuntimeError("RunWriter is not open; use it as a context manager")
        if not (self.tmp / SUMMARY_FILE).is_file():
            raise RuntimeError(f"cannot commit run {self.name}: {SUMMARY_FILE} was not written")
        self._check_target()
        if self.unique:
            return self._commit_unique()
        if not (self.path.exists() or self.path.is_symlink()):
            os.rename(self.tmp, self.path)  # a new name: one atomic step
        else:
            self._swap()
        self.committed = True
        self.tmp = None
        return self.path

    def _swap(self) -> None:
        """Replace the existing run by the new one so that, whatever the moment a kill -9
        lands, one complete run is visible or :func:`recover_runs` makes it visible again.

        The complete new run is first renamed ``.new-NAME-*`` (it is now recoverable, never
        swept as debris), then swapped with ``NAME`` in one atomic step where the system
        can (Linux), else by two renames (``NAME`` -> ``.old-NAME-*``, ``.new-`` -> ``NAME``)
        whose gap recovery closes; the replaced run is removed last.
        """
        root = self.root.resolve()
        new = root / hidden_name(NEW_PREFIX, self.name)
        os.rename(self.tmp, new)
        self.tmp = new
        if _exchange(new, self.path):  # NAME is the new run, `new` holds the old one
            shutil.rmtree(new, ignore_errors=True)
            return
        old = root / hidden_name(OLD_PREFIX, self.name)
        os.rename(self.path, old)
        try:
            os.rename(new, self.path)
        except BaseException:
            if self._recovered_by_other():
                shutil.rmtree(old, ignore_errors=True)
                return
            with contextlib.suppress(OSError):  # put the old run back
                os.rename(old, self.path)
            raise
        shutil.rmtree(old, ignore_errors=True)

    def _commit_unique(self) -> Path:
        """Rename into the first free ``name``, ``name-2``, ...; a rename onto a run that
        appeared in between fails (the target is not empty) and the next suffix is tried."""
        base = self.name
        for k in range(1, 1000):
            name = base if k == 1 else suffixed_name(base, k)
            target = resolve_run_path(self.root, name)
            if target.exists() or target.is_symlink():
                continue
            if name != self.name:  # the summary names the folder it lives in
                self.name, self.path = name, target
                summary = read_json_file(self.file(SUMMARY_FILE))  # written above
                summary["name"] = name
                dump_json(summary, self.file(SUMMARY_FILE))
            try:
                os.rename(self.tmp, target)
            except OSError:
                if target.exists():  # taken between the check and the rename
                    continue
                raise
            self.committed = True
            self.tmp = None
            return target
        raise FileExistsError(f"no free run name like {base!r} in {self.root}")



#: Rows per row group of ``dataset.parquet`` (:data:`aflite_core.io.ROW_GROUP`).
DATASET_ROW_GROUP = ROW_GROUP


def write_run(
    root: str | os.PathLike,
    name: str,
    *,
    frame: pd.DataFrame,
    scores: pd.DataFrame,
    summary: Mapping[str, Any] | None = None,
    tables: Mapping[str, pd.DataFrame] | None = None,
    json_files: Mapping[str, Any] | None = None,
    row_csvs: bool = True,
    overwrite: bool = False,
) -> Path:
    """Write a complete run folder from ready-made parts (atomically).

    The building block of :func:`aflite_core.pipeline.run_audit`, also handy for tests
    and for importing results computed elsewhere.

    Parameters
    ----------
    root, name : path, str
        Runs root and run name (sanitised).
    frame : DataFrame
        The full original frame, index = row id.
    scores : DataFrame
        ``row_id, status, predictability, removal_round`` (+ ``label``), one row per
        frame row in frame order.
    summary : mapping, optional
        Extra ``summary.json`` content (``format_version``, ``name``, ``created``,
        ``artifacts`` are filled in).
    tables : mapping, optional
        ``{file name: DataFrame}`` written as Parquet (e.g. ``cues.parquet``).
    json_files : mapping, optional
        ``{file name: object}`` written as JSON (e.g. ``baselines.json``).
    row_csvs : bool, default True
        Write ``<status>.csv`` for every non-empty status.
    overwrite : bool, default False
        Replace an existing run of that name.

    Returns
    -------
    Path
        The completed run folder.
    """
    with RunWriter(root, name, overwrite=overwrite) as writer:
        writer.write_dataset(frame)
        writer.write_scores(scores)
        if row_csvs:
            writer.write_row_csvs()
        for filename, table in (tables or {}).items():
            writer.write_parquet(filename, table)
        for filename, obj in (json_files or {}).items():
            writer.write_json(filename, obj)
        writer.write_summary(dict(summary or {}))
    return writer.path


