"""Named subsets of a run's rows: ``RUN/subsets/NAME.parquet``.

A subset is the rows a filter picked (on the dashboard's Explore page, or any list of row
ids), saved under a name inside the run folder so that it can be exported later from the
command line (``python -m aflite_core export RUN --subset NAME ...``). The Parquet file holds
one row per member: ``row_id``, ``status``, ``predictability``, ``removal_round`` (from the
run's scores, in input order); the filter that made it is stored as JSON in the file's
metadata (key ``aflite_subset``), together with the creation time and the run's name. No
pickle: plain Parquet and JSON.

Subsets are the one thing added to a finished run folder after the fact. Each is written
to a hidden temporary file in ``subsets/`` and renamed, so a reader sees the old subset or
the new one, never half a file; a name is refused unless it is a safe file name (the rules
of run names, :func:`aflite_core.runs.folder.check_run_name`), and an existing subset is
replaced only with ``overwrite=True``. Overwriting the run itself (``run --overwrite``)
replaces the whole folder, subsets included.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from aflite_core.errors import DamagedFileError
from aflite_core.json_files import loads_json
from aflite_core.runs._rows import normalize_row_ids
from aflite_core.runs.folder import (
    MAX_NAME_BYTES,
    SCORES_COLUMNS,
    TEMP_PREFIX,
    AuditRun,
    check_run_name,
    hidden_name,
    load_run,
    to_jsonable,
    utc_now_iso,
)

#: Folder of a run that holds its named subsets.
SUBSETS_DIR = "subsets"
#: Suffix of a subset file.
SUFFIX = ".parquet"
#: Parquet metadata key holding the subset's JSON description.
METADATA_KEY = b"aflite_subset"


@dataclass(frozen=True)
class Subset:
    """One saved subset of a run."""

    name: str
    path: Path
    n_rows: int
    created: str
    #: The filter that made the subset, as saved (JSON values).
    filter: dict[str, Any] = field(default_factory=dict)
    run: str = ""

    def rows(self) -> pd.DataFrame:
        """The members: ``row_id``, ``status``, ``predictability``, ``removal_round``."""
        return pd.read_parquet(self.path)

    @property
    def row_ids(self) -> np.ndarray:
        """The members' row ids, in input order."""
        return pq.read_table(self.path, columns=["row_id"]).column("row_id").to_numpy(
            zero_copy_only=False)


def check_subset_name(name: str) -> str:
    """Return ``name`` (NFC) if it is a safe subset name, else raise ``ValueError``.

    The rules are the run-name rules: letters, digits, ``.``, ``_`` and ``-``; no leading
    ``.``/``-``/``_``; no ``..``; at most 120 characters; and the file it is saved as,
    ``NAME.parquet``, must fit in a file name of :data:`MAX_NAME_BYTES` bytes (120 × ``é``
    is 240 bytes, 248 with the suffix: fine; the temporary name is shortened to fit).
    """
    name = check_run_name(name, what="subset name")
    n_bytes = len(name.encode("utf-8")) + len(SUFFIX.encode("utf-8"))
    if n_bytes > MAX_NAME_BYTES:
        raise ValueError(f"subset name: {name[:40]!r}... is too long: saved as NAME{SUFFIX} "
                         f"its file name would be {n_bytes} bytes in UTF-8, and a file name "
                         f"may have at most {MAX_NAME_BYTES}; choose a shorter name")
    return name


def _run(run: AuditRun | str | os.PathLike) -> AuditRun:
    return run if isinstance(run, AuditRun) else load_run(run)


def subset_path(run: AuditRun | str | os.PathLike, name: str) -> Path:
    """``RUN/subsets/NAME.parquet`` (the name checked; the file need not exist)."""
    path = Path(run.path if isinstance(run, AuditRun) else run)
    return path / SUBSETS_DIR / f"{check_subset_name(name)}{SUFFIX}"


def save_subset(
    run: AuditRun | str | os.PathLike,
    name: str,
    row_ids: Iterable[Any],
    *,
    filter: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> Subset:
    """Save the rows ``row_ids`` of ``run`` as the subset ``name``.

    Parameters
    ----------
    run : AuditRun or path
        A finished run folder.
    name : str
        Subset name, a safe file name (see :func:`check_subset_name`).
    row_ids : iterable
        Members; every id must be a row of the run (ids are matched as the run stores
        them: integers or strings). Duplicates count once; the file lists the members in
        input order. An empty subset is allowed.
    filter : mapping, optional
        The filter that made the subset (JSON-able: stored in the file's metadata).
    overwrite : bool, default False
        Replace an existing subset of that name.

    Returns
    -------
    Subset

    Raises
    ------
    ValueError
        If the name is unsafe or a row id is not in the run.
    FileExistsError
        If the subset exists and ``overwrite`` is False.
    """
    run = _run(run)
    final = subset_path(run, name)
    if final.exists() and not overwrite:
        raise FileExistsError(f"subset {final.stem!r} already exists in run {run.name}; "
                              "choose another name or overwrite it")
    scores = run.scores
    wanted = normalize_row_ids(row_ids, scores["row_id"])
    members = scores[scores["row_id"].isin(wanted)][list(SCORES_COLUMNS)]
    members = members.reset_index(drop=True)
    created = utc_now_iso()
    description = {"name": final.stem, "run": run.name, "created": created,
                   "n_rows": int(len(members)), "filter": to_jsonable(dict(filter or {}))}
    table = pa.Table.from_pandas(members, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[METADATA_KEY] = json.dumps(description, ensure_ascii=False,
                                    allow_nan=False).encode("utf-8")
    table = table.replace_schema_metadata(meta)
    final.parent.mkdir(exist_ok=True)
    # the temporary name is cut to fit a file name (the final one was checked to fit)
    tmp = final.parent / hidden_name(TEMP_PREFIX, final.stem,
                                     f"{secrets.token_hex(4)}{SUFFIX}")
    try:
        pq.write_table(table, tmp)
        if overwrite:
            os.replace(tmp, final)
        else:
            try:  # no-clobber: another writer may have saved the name meanwhile
                os.link(tmp, final)
            except FileExistsError:
                raise FileExistsError(f"subset {final.stem!r} already exists in run "
                                      f"{run.name}") from None
            except OSError:  # no hard links on this file system
                os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return _read(final)


def _read(path: Path) -> Subset:
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise ValueError(f"subset file {path} is unreadable: {exc}") from None
    raw = (schema.metadata or {}).get(METADATA_KEY)
    try:
        info = loads_json(raw, name=f"{METADATA_KEY.decode()} metadata") if raw else {}
    except DamagedFileError as exc:
        raise ValueError(f"subset file {path.name}: {exc}") from None
    if "row_id" not in schema.names:
        raise ValueError(f"subset file {path} has no row_id column")
    n_rows = pq.ParquetFile(path).metadata.num_rows
    return Subset(name=path.stem, path=path, n_rows=int(n_rows),
                  created=str(info.get("created", "")), filter=dict(info.get("filter") or {}),
                  run=str(info.get("run", "")))


def load_subset(run: AuditRun | str | os.PathLike, name: str) -> Subset:
    """The saved subset ``name`` of ``run``.

    Raises
    ------
    FileNotFoundError
        If there is no such subset (the message lists the saved ones).
    ValueError
        If the name is unsafe or the file is not a subset file.
    """
    path = subset_path(run, name)
    if not path.is_file():
        known = [s.name for s in list_subsets(path.parent.parent)]
        raise FileNotFoundError(
            f"subset {name!r} not found in {path.parent.parent.name}; saved subsets: "
            + (", ".join(known) if known else "none"))
    return _read(path)


def list_subsets(run: AuditRun | str | os.PathLike) -> list[Subset]:
    """The run's saved subsets, by name (unreadable files and temporary files skipped)."""
    folder = Path(run.path if isinstance(run, AuditRun) else run) / SUBSETS_DIR
    if not folder.is_dir():
        return []
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.suffix != SUFFIX or not entry.is_file():
            continue
        try:
            found.append(_read(entry))
        except ValueError:
            continue
    return found


def delete_subset(run: AuditRun | str | os.PathLike, name: str) -> None:
    """Remove the saved subset ``name`` (``FileNotFoundError`` if there is none)."""
    path = subset_path(run, name)
    if not path.is_file():
        raise FileNotFoundError(f"subset {name!r} not found in {path.parent.parent.name}")
    path.unlink()
