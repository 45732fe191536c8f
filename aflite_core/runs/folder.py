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

import contextlib
import ctypes
import datetime as _dt
import errno
import json
import math
import os
import re
import secrets
import shutil
import sys
import time
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aflite_core.io.tables import (
    parquet_safe_table,
    sweep_stale_parts,
    unique_column_name,
    write_csv,
)
from aflite_core.runs.checks import scores_problem, summary_problem
from aflite_core.runs.layout import (  # noqa: F401 - re-exported: part of the folder API
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
from aflite_core.runs.rows import iter_row_chunks

#: Prefix of the temporary folder a run is written into.
TEMP_PREFIX = ".tmp-"
#: Prefix of a replaced run while ``overwrite=True`` swaps in the new one.
OLD_PREFIX = ".old-"
#: Prefix of a complete run about to be swapped in over the one it replaces.
NEW_PREFIX = ".new-"
#: Temporary folders older than this (seconds) are treated as left by a killed process.
STALE_AGE_SECONDS = 24 * 3600

_MAX_NAME_LENGTH = 120
#: Longest file name most file systems accept (ext4, APFS, NTFS...), in UTF-8 bytes.
MAX_NAME_BYTES = 255
_SAFE_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class RunError(ValueError):
    """A run folder is missing, incomplete, or written by an incompatible version."""


# --------------------------------------------------------------------------- names


def _cut_bytes(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, never inside a character."""
    return text.encode("utf-8")[: max(limit, 0)].decode("utf-8", errors="ignore")


def sanitize_run_name(name: str) -> str:
    """Turn a user-supplied run name into a safe folder name.

    The policy is to *sanitise*, not refuse, unless nothing usable is left:

    * the name is normalised to Unicode NFC, so a decomposed ``café`` (``e`` + combining
      accent, as macOS file names and some keyboards produce) is the same name as the
      composed one;
    * every run of characters that are not a letter, a digit, ``.``, ``_`` or ``-`` (path
      separators ``/`` and ``\\``, ``:``, spaces, control characters, ...) becomes one
      ``_``; underscores typed by the user are kept (``my__run`` stays ``my__run``);
    * runs of dots collapse to one dot, so ``..`` can never appear;
    * leading ``.``, ``-`` and ``_`` and trailing ``.``, ``_`` and ``-`` are stripped (no
      hidden folders, nothing that looks like a command-line option);
    * the result is cut to 120 characters and to 255 UTF-8 bytes (the file-name limit of
      common file systems; 84 CJK characters are 252 bytes and fit).

    Parameters
    ----------
    name : str
        The name as typed by the user.

    Returns
    -------
    str
        The sanitised name; equal to ``name`` when it was already safe and NFC.

    Raises
    ------
    TypeError
        If ``name`` is not a string.
    ValueError
        If nothing usable is left (e.g. ``"../"`` or ``""``).
    """
    if not isinstance(name, str):
        raise TypeError(f"run name: expected a string, got {type(name).__name__}")
    text = unicodedata.normalize("NFC", name)
    text = "".join(ch if (ch.isalnum() or ch in "._-") else "\0" for ch in text)
    text = re.sub("\0+", "_", text)
    text = re.sub(r"\.{2,}", ".", text)
    text = text.lstrip("._-").rstrip("._-")[:_MAX_NAME_LENGTH].rstrip("._-")
    text = _cut_bytes(text, MAX_NAME_BYTES).rstrip("._-")
    if not text:
        raise ValueError(
            f"run name: {name!r} has no usable characters; use letters, digits, '.', '_' or '-'"
        )
    return text


def _describe_char(ch: str) -> str:
    return f"{ch!r} (U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed character')})"


def run_name_problems(name: str) -> list[str]:
    """Say precisely why ``name`` is not usable as a run folder name as typed.

    The name is compared after NFC normalisation, so a decomposed ``café`` has no
    problem. Returns an empty list when :func:`sanitize_run_name` keeps the name (up to
    normalisation); otherwise one sentence per problem: the offending characters with
    their code points, a leading or trailing character, ``..``, the length in characters
    or UTF-8 bytes.
    """
    if not isinstance(name, str):
        return [f"expected a string, got {type(name).__name__}"]
    text = unicodedata.normalize("NFC", name)
    problems: list[str] = []
    bad = []
    for ch in text:
        if not (ch.isalnum() or ch in "._-") and ch not in bad:
            bad.append(ch)
    if bad:
        shown = ", ".join(_describe_char(ch) for ch in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        problems.append(f"contains {shown}{more}; only letters, digits, '.', '_' and '-' "
                        "are allowed")
    if ".." in text:
        problems.append("contains '..'")
    why = {".": "a hidden folder", "-": "looks like a command-line option",
           "_": "stripped from the start"}
    if text[:1] in why:
        problems.append(f"starts with {text[:1]!r} ({why[text[:1]]})")
    if text[-1:] in (".", "-", "_") and len(text) > 1:
        problems.append(f"ends with {text[-1:]!r}")
    if len(text) > _MAX_NAME_LENGTH:
        problems.append(f"is {len(text)} characters long; at most {_MAX_NAME_LENGTH} are kept")
    n_bytes = len(text.encode("utf-8", errors="surrogatepass"))
    if n_bytes > MAX_NAME_BYTES:
        problems.append(f"is {n_bytes} bytes long in UTF-8; file names hold at most "
                        f"{MAX_NAME_BYTES}")
    if not problems and not text:
        problems.append("is empty")
    return problems


def check_run_name(name: str, *, what: str = "run name") -> str:
    """Return ``name`` in NFC if it is a safe run folder name as typed, else raise.

    Unlike :func:`sanitize_run_name` nothing is changed silently (for a path given on the
    command line): the ``ValueError`` lists what is wrong (see :func:`run_name_problems`)
    and suggests the sanitised name when there is one.
    """
    problems = run_name_problems(name)
    if not problems:
        return unicodedata.normalize("NFC", name)
    try:
        hint = f"; for example {sanitize_run_name(name)!r}"
    except (TypeError, ValueError):
        hint = ""
    raise ValueError(f"{what}: {name!r} is not a safe run folder name: "
                     f"{'; '.join(problems)}{hint}")


def hidden_name(prefix: str, name: str, token: str | None = None) -> str:
    """``<prefix><name>-<token>`` cut (in the name, never the token) to fit in
    :data:`MAX_NAME_BYTES` UTF-8 bytes; the final name is never shortened."""
    token = token or secrets.token_hex(4)
    room = MAX_NAME_BYTES - len(prefix.encode("utf-8")) - 1 - len(token.encode("utf-8"))
    return f"{prefix}{_cut_bytes(name, room)}-{token}"


def _format_param(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def default_run_name(
    data_name: str,
    parameters: Mapping[str, Any] | None = None,
    *,
    created: _dt.datetime | None = None,
) -> str:
    """Derive a run name from the data name, the key parameters and the UTC time.

    Parameters
    ----------
    data_name : str
        Name of the dataset (usually the file name).
    parameters : mapping, optional
        AFLite/representation parameters; the keys ``representation``, ``strategy``,
        ``n_partitions``, ``target_size`` and ``random_state`` are used when present.
    created : datetime, optional
        Creation time (default: now, UTC).

    Returns
    -------
    str
        For example ``snli_dev-tfidf_svd-greedy_slicing-m64-target0.5-seed0-20250101T120000Z``.
    """
    created = created or _dt.datetime.now(_dt.timezone.utc)
    stem = Path(str(data_name)).name
    for suffix in (".gz", ".csv", ".tsv", ".jsonl", ".json", ".parquet", ".txt"):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
    params = dict(parameters or {})
    parts = [stem or "data"]
    if params.get("filter") == "z":  # a Z-filter run: no AFLite strategy or partitions
        params = {**params, "strategy": "zfilter", "n_partitions": None}
    for key, prefix in (
        ("representation", ""),
        ("strategy", ""),
        ("n_partitions", "m"),
        ("target_size", "target"),
        ("random_state", "seed"),
    ):
        if params.get(key) is not None:
            parts.append(prefix + _format_param(params[key]))
    parts.append(created.astimezone(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
    return sanitize_run_name("-".join(parts))


def resolve_run_path(root: str | os.PathLike, name: str) -> Path:
    """Return ``root/<sanitised name>``, guaranteed to lie directly inside ``root``.

    Raises
    ------
    ValueError
        If the name is unusable or would resolve outside ``root`` (e.g. through a
        symbolic link).
    """
    root_path = Path(root).resolve()
    safe = sanitize_run_name(name)
    path = (root_path / safe).resolve()
    if path.parent != root_path:
        raise ValueError(f"run name {name!r} resolves to {path}, outside the runs root {root_path}")
    return root_path / safe


def unique_run_name(root: str | os.PathLike, name: str) -> str:
    """Return ``name`` or ``name-2``, ``name-3``, ... so that no run of that name exists."""
    root_path = Path(root)
    candidate, k = name, 1
    while (root_path / candidate).exists():
        k += 1
        candidate = _suffixed(name, k)
    return candidate


def _suffixed(name: str, k: int) -> str:
    """``name-k``, the name cut (in bytes) so that the whole still fits a file name."""
    suffix = f"-{k}"
    return _cut_bytes(name, MAX_NAME_BYTES - len(suffix)).rstrip("._-") + suffix


def _check_file_name(filename: str) -> str:
    if not isinstance(filename, str) or not _SAFE_FILE.match(filename) or ".." in filename:
        raise ValueError(f"run file name: expected a plain file name, got {filename!r}")
    return filename


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


def _dump_json(obj: Any, path: Path) -> None:
    text = json.dumps(to_jsonable(obj), indent=2, ensure_ascii=False, allow_nan=False)
    path.write_text(text + "\n", encoding="utf-8")


def utc_now_iso() -> str:
    """Current UTC time as ISO 8601 with a ``Z`` suffix, second precision."""
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    return now.isoformat().replace("+00:00", "Z")


# --------------------------------------------------------------------------- writing


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
    are removed; a younger one may belong to a run or an export still in progress.

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
                and age >= max_age):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    removed += sweep_stale_parts(root_path, max_age=max_age)
    return removed


def _is_replaceable(path: Path) -> bool:
    """A folder may be overwritten only if it is a run folder or empty."""
    if not path.is_dir() or path.is_symlink():
        return False
    return (path / SUMMARY_FILE).is_file() or not any(path.iterdir())


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
        self._row_ids: np.ndarray | None = None
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
        return self.tmp / _check_file_name(filename)

    def write_json(self, filename: str, obj: Any) -> Path:
        """Write ``obj`` as UTF-8 JSON (NaN as null)."""
        path = self.file(filename)
        _dump_json(obj, path)
        return path

    def write_text(self, filename: str, text: str) -> Path:
        """Write a UTF-8 text file."""
        path = self.file(filename)
        path.write_text(text, encoding="utf-8")
        return path

    def write_parquet(self, filename: str, frame: pd.DataFrame) -> Path:
        """Write ``frame`` (index dropped) as Parquet, making it Parquet-safe first."""
        import pyarrow.parquet as pq


        table, _ = parquet_safe_table(frame)
        path = self.file(filename)
        pq.write_table(table, path)
        return path

    def write_dataset(self, frame: pd.DataFrame) -> Path:
        """Write ``dataset.parquet``: the full original frame plus its row-id column.

        The index of ``frame`` is the row id. It is stored in a column ``row_id`` (or
        ``aflite_row_id`` if the data already has a ``row_id`` column); the name is
        recorded under ``summary["dataset"]["row_id_column"]`` by :meth:`write_summary`.
        Columns Parquet cannot type are stored as text and listed there too.
        """
        import pyarrow.parquet as pq


        if frame.index.has_duplicates:
            raise ValueError("dataset frame: row ids (the index) must be unique")
        id_col = unique_column_name("row_id", map(str, frame.columns))
        data = frame.copy(deep=False)
        data.columns = [str(c) for c in data.columns]
        data.insert(0, id_col, frame.index.to_numpy())
        table, converted = parquet_safe_table(data)
        path = self.file(DATASET_FILE)
        pq.write_table(table, path)
        self._dataset_info = {
            "row_id_column": id_col,
            "n_rows": int(len(frame)),
            "columns": [str(c) for c in frame.columns],
            "converted_columns": converted,
        }
        self._row_ids = frame.index.to_numpy()
        return path

    def write_scores(self, scores: pd.DataFrame) -> Path:
        """Write ``scores.parquet`` after checking its columns, statuses and row ids.

        ``scores`` must have one row per dataset row, in the dataset's order, with
        ``row_id, status, predictability, removal_round`` (``label`` optional).
        """
        missing = [c for c in SCORES_COLUMNS if c not in scores.columns]
        if missing:
            raise ValueError(f"scores: missing column(s) {missing}; got {list(scores.columns)}")
        bad = sorted(set(scores["status"].astype(str)) - set(STATUSES))
        if bad:
            raise ValueError(f"scores: status must be one of {STATUSES}, found {bad}")
        if scores["row_id"].duplicated().any():
            raise ValueError("scores: row_id values must be unique")
        row_ids = self._row_ids
        if row_ids is not None and not np.array_equal(
            np.asarray(row_ids, dtype=object), scores["row_id"].to_numpy(dtype=object)
        ):
            raise ValueError(
                "scores: row_id must list the dataset's row ids in the dataset's order"
            )
        return self.write_parquet(SCORES_FILE, scores.reset_index(drop=True))

    def write_row_csvs(self) -> list[str]:
        """Write ``<status>.csv`` (row_id + original columns, exact values) per non-empty status.

        Requires :meth:`write_dataset` and :meth:`write_scores` first. Returns the names.
        """

        run = AuditRun(self.file(SUMMARY_FILE).parent, summary=self._provisional_summary())
        present = set(run.scores["status"].astype(str))
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
            name = base if k == 1 else _suffixed(base, k)
            target = resolve_run_path(self.root, name)
            if target.exists() or target.is_symlink():
                continue
            if name != self.name:  # the summary names the folder it lives in
                self.name, self.path = name, target
                summary = json.loads(self.file(SUMMARY_FILE).read_text(encoding="utf-8"))
                summary["name"] = name
                _dump_json(summary, self.file(SUMMARY_FILE))
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


def add_measure(path: str | os.PathLike, name: str, *,
                documents: Mapping[str, Any] | None = None,
                tables: Mapping[str, pd.DataFrame] | None = None,
                info: Mapping[str, Any] | None = None) -> AuditRun:
    """Add one measure's files to a finished run folder (e.g. ``ood`` computed later).

    Each file is written under a hidden temporary name and renamed over its final name, so
    a reader sees the old run or the new file, never half a file; ``summary.json`` is
    updated the same way last (``measures[name]`` and ``artifacts``), then ``report.html``
    is rebuilt if the run has one.

    Returns
    -------
    AuditRun
        The run, re-read.
    """
    import pyarrow.parquet as pq

    run = load_run(path)
    written = []

    def replace_atomically(filename: str, write: Any) -> None:
        final = run.path / _check_file_name(filename)
        tmp = run.path / f"{TEMP_PREFIX}{filename}-{secrets.token_hex(4)}"
        try:
            write(tmp)
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
        written.append(filename)

    for filename, document in (documents or {}).items():
        replace_atomically(filename, lambda p, d=document: _dump_json(d, p))
    for filename, frame in (tables or {}).items():
        replace_atomically(filename,
                           lambda p, f=frame: pq.write_table(parquet_safe_table(f)[0], p))
    summary = dict(run.summary)
    summary.setdefault("measures", {})[name] = {"status": "ok", "artifacts": written,
                                                **dict(info or {})}
    summary["artifacts"] = sorted({*run.artifacts, *written, SUMMARY_FILE})
    replace_atomically(SUMMARY_FILE, lambda p: _dump_json(summary, p))
    run = load_run(path)
    if run.has(REPORT_FILE):
        from aflite_core.report.html import build_report

        text = build_report(run)
        replace_atomically(REPORT_FILE, lambda p: p.write_text(text, encoding="utf-8"))
    return run


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


# --------------------------------------------------------------------------- reading


def _read_summary(path: Path) -> dict:
    summary_path = path / SUMMARY_FILE
    if not path.is_dir():
        raise RunError(f"run folder {path} does not exist or is not a folder")
    if not summary_path.is_file():
        raise RunError(
            f"{path} is not a complete run: {SUMMARY_FILE} is missing "
            "(a run still being written, or one that failed, has no summary)"
        )
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunError(f"{summary_path} is not valid JSON: {exc}") from exc
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
            f"{summary_path}: format_version must be a positive integer, got {version!r}"
        )
    if version > FORMAT_VERSION:
        raise RunError(
            f"{path} was written in run format {version} by a newer aflite_core; this version "
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
        failed; ``measures[name]["error"]`` says why), ``damaged`` (recorded as done but a
        declared file is missing), or ``not run`` (not chosen, or a run older than the
        measure). The Report page and ``list_runs`` read this instead of naming files.
        """
        from aflite_core.measures import registry

        recorded = self.measures
        present = set(self.artifacts)
        states: dict[str, str] = {}
        for measure in registry.measures():
            outcome = recorded.get(measure.name) or {}
            status = outcome.get("status")
            written = outcome.get("artifacts") or measure.files
            if status == "ok":
                states[measure.name] = ("ok" if set(written) <= present else "damaged")
            elif status == "error":
                states[measure.name] = "error"
            else:
                states[measure.name] = "not run"
        return states

    @property
    def artifacts(self) -> list[str]:
        """Files present in the folder (from disk, not from the summary)."""
        return sorted(p.name for p in self.path.iterdir() if p.is_file())

    def has(self, filename: str) -> bool:
        """Whether the run folder contains ``filename``."""
        return (self.path / _check_file_name(filename)).is_file()

    # -- tables
    def read_parquet(self, filename: str) -> pd.DataFrame | None:
        """Read a Parquet artifact of the run, or None when absent."""
        return self._read_parquet(filename)

    def _read_parquet(self, filename: str) -> pd.DataFrame | None:
        if not self.has(filename):
            return None
        return pd.read_parquet(self.path / filename)

    @cached_property
    def scores(self) -> pd.DataFrame:
        """``scores.parquet``: one row per input row, in input order."""
        frame = self._read_parquet(SCORES_FILE)
        if frame is None:
            raise RunError(f"run {self.path} is incomplete: {SCORES_FILE} is missing")
        missing = [c for c in SCORES_COLUMNS if c not in frame.columns]
        if missing:
            raise RunError(
                f"{self.path / SCORES_FILE} lacks column(s) {missing}; "
                f"found {list(frame.columns)}"
            )
        bad = sorted(set(frame["status"].astype(str)) - set(STATUSES))
        if bad:
            raise RunError(f"{self.path / SCORES_FILE}: unknown status value(s) {bad}")
        return frame

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
        return self._frame_from_csvs()

    def _frame_from_csvs(self) -> pd.DataFrame:
        scores = self.scores
        present = set(scores["status"].astype(str))
        parts = []
        missing = []
        for status in STATUSES:
            if status not in present:
                continue
            csv_path = self.path / ROW_CSV_FILES[status]
            if not csv_path.is_file():
                missing.append(ROW_CSV_FILES[status])
                continue
            parts.append(pd.read_csv(csv_path, dtype=str, keep_default_na=False))
        if missing:
            raise RunError(
                f"run {self.path} has neither {DATASET_FILE} nor {', '.join(missing)}; "
                "the original rows cannot be shown"
            )
        frame = pd.concat(parts, ignore_index=True)
        ids = scores["row_id"]
        # the CSVs hold row ids as text: map them back to the typed ids of scores.parquet
        by_text = pd.Series(np.arange(len(ids)), index=ids.astype(str).to_numpy())
        order = by_text.reindex(frame["row_id"].to_numpy()).to_numpy()
        if np.isnan(order.astype(float)).any():
            raise RunError(f"run {self.path}: row ids in the CSV files do not match {SCORES_FILE}")
        frame = frame.iloc[np.argsort(order, kind="stable")].reset_index(drop=True)
        frame.index = pd.Index(ids.to_numpy(), name="row_id")
        return frame.drop(columns="row_id")

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

    @cached_property
    def projection(self) -> pd.DataFrame | None:
        """``projection.parquet``, or None when not computed."""
        return self._read_parquet(PROJECTION_FILE)

    @cached_property
    def baselines(self) -> dict | None:
        """``baselines.json``, or None when not computed."""
        return self.read_json(BASELINES_FILE)

    def read_json(self, filename: str) -> Any | None:
        """Read a JSON artifact of the run, or None when absent."""
        if not self.has(filename):
            return None
        return json.loads((self.path / filename).read_text(encoding="utf-8"))

    def status_mask(self, status: str) -> np.ndarray:
        """Boolean mask over :attr:`scores` rows with the given status."""
        if status not in STATUSES:
            raise ValueError(f"status: expected one of {STATUSES}, got {status!r}")
        return (self.scores["status"].astype(str) == status).to_numpy()

    def row_ids(self, status: str) -> np.ndarray:
        """Row ids with the given status, in input order."""
        return self.scores["row_id"].to_numpy()[self.status_mask(status)]


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
        up, scores that disagree with them: :mod:`aflite_core.runs.checks`); the message
        names the run and says what is wrong, e.g. ``run r is damaged: summary.json:
        sizes.retained is -5 (expected a whole number >= 0)``.
    """
    run = AuditRun(path)
    problem = summary_problem(run.summary)
    if problem:
        raise RunError(f"run {run.path.name} is damaged: {SUMMARY_FILE}: {problem}")
    problem = scores_problem(run.scores, run.summary)
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


def run_damage(path: str | os.PathLike, summary: Mapping[str, Any] | None = None) -> str:
    """Why the run folder ``path`` is damaged, or ``""`` when it looks fine.

    Cheap checks, no table is read in full: ``scores.parquet`` must be present, a
    readable Parquet file (its footer) with the required columns, and every file the
    summary lists under ``artifacts`` must still be there.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    scores = path / SCORES_FILE
    if not scores.is_file():
        return f"{SCORES_FILE} is missing"
    try:
        meta = pq.ParquetFile(scores).metadata
        names = meta.schema.to_arrow_schema().names
    except (OSError, pa.ArrowException, ValueError) as exc:
        return f"{SCORES_FILE} is unreadable ({type(exc).__name__}: {str(exc)[:120]})"
    missing_cols = [c for c in SCORES_COLUMNS if c not in names]
    if missing_cols:
        return f"{SCORES_FILE} lacks column(s) {', '.join(missing_cols)}"
    expected = ((summary or {}).get("sizes") or {}).get("input")
    if isinstance(expected, int) and meta.num_rows != expected:
        return (f"{SCORES_FILE} has {meta.num_rows:,} rows, but {SUMMARY_FILE} says input is "
                f"{expected:,}")
    listed = (summary or {}).get("artifacts") or []
    if isinstance(listed, list):
        gone = sorted(str(f) for f in listed
                      if isinstance(f, str) and _SAFE_FILE.match(f) and ".." not in f
                      and not (path / f).is_file())
        if gone:
            return f"file(s) missing: {', '.join(gone[:5])}" + (" ..." if len(gone) > 5 else "")
    return ""


def list_runs(root: str | os.PathLike) -> list[RunInfo]:
    """List the runs in ``root``, newest first.

    A complete run hidden by an interrupted ``overwrite`` is first put back
    (:func:`recover_runs`). Dot-folders (runs being written, or left by killed processes)
    and folders without a readable ``summary.json`` are ignored; a run whose
    ``scores.parquet`` is missing or unreadable, or that lost a file it lists, is listed
    with :attr:`RunInfo.damaged` saying why.
    """
    root_path = Path(root)
    if not root_path.is_dir():
        return []
    recover_runs(root_path)
    runs = []
    for entry in root_path.iterdir():
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        try:
            summary = _read_summary(entry)
        except RunError:
            continue
        problem = summary_problem(summary)
        sound = not problem
        runs.append(
            RunInfo(
                name=entry.name,
                path=entry,
                created=str(summary.get("created", "")),
                input_name=str((summary.get("input") or {}).get("name", "")) if sound else "",
                sizes=dict(summary.get("sizes") or {}) if sound else {},
                parameters=dict(summary.get("parameters") or {}) if sound else {},
                disk_bytes=_folder_bytes(entry),
                format_version=int(summary["format_version"]),
                damaged=(f"{SUMMARY_FILE}: {problem}" if problem
                         else run_damage(entry, summary)),
            )
        )
    runs.sort(key=lambda r: r.name, reverse=True)
    runs.sort(key=lambda r: r.created, reverse=True)
    return runs
