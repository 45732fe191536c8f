"""A curator's review decisions on a run: ``decisions.parquet`` in the run folder.

Every decision is a row, in the order it was made: ``row_id``, ``decision`` (one of
:data:`DECISIONS`), ``label`` (the new label of a ``relabel``), ``note``, ``reviewer`` and
``decided_at`` (UTC). The latest decision of a row is the one in force; ``revert`` takes a
row's decision back. The file is the one part of a complete run that changes after the run
is written, so it is written with care:

* **atomically**: the whole table is written to a hidden ``.decisions.parquet.part-<token>``
  beside it and renamed over it, so a reader sees the old file or the new one;
* **under a lock** (``.decisions.lock``, ``fcntl.flock``): two sessions deciding on the same
  run at once each read the file inside the lock and append to what is there, so nothing is
  lost; a server restart loses nothing (every decision is on disk when ``decide`` returns);
* **checked**: the file records the SHA-256 of the run's input; a decisions file copied
  from another run is refused, and a file that cannot be read is "damaged", like every
  other run file. Every row id, decision and label of a batch is checked before anything is
  written: a bad one records nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from aflite_core.errors import RunError
from aflite_core.io import short_repr
from aflite_core.json_files import loads_json

#: ``run`` below is an :class:`aflite_core.runs.folder.AuditRun` (not imported: the folder's
#: ``decide``/``decisions`` methods import this module)

__all__ = ["DECISIONS", "DECISIONS_FILE", "COLUMNS", "all_decisions", "check_decisions",
           "decide", "decisions_in_force", "run_labels"]

#: The file, in the run folder.
DECISIONS_FILE = "decisions.parquet"
#: What a reviewer may decide about a row.
DECISIONS = ("keep", "drop", "relabel", "revert")
#: The file's columns, in order.
COLUMNS = ("row_id", "decision", "label", "note", "reviewer", "decided_at")
#: Parquet metadata key: the run's input hash and name.
_METADATA_KEY = b"aflite_decisions"
_LOCK_FILE = ".decisions.lock"
#: Longest note or reviewer name kept (characters).
MAX_TEXT = 2000


def run_labels(run: Any) -> list[str]:
    """The labels a row of the run may be given: those of its audited rows (every status
    but ``excluded``), as text, sorted (from ``summary.json``'s label counts; the scores'
    labels for a summary without them)."""
    counts = run.summary.get("labels") or {}
    named = {str(k) for part in ("before", "unfiltered", "warmup")
             for k in (counts.get(part) or {})} if isinstance(counts, dict) else set()
    if named:
        return sorted(named - {""})
    scores = run.score_columns(["status", "label"])
    audited = scores["status"].astype(str) != "excluded"
    return sorted({str(v) for v in scores["label"][audited].astype(str)} - {""})


def _resolve(ids: pd.Series, rows: Sequence[Any]) -> list[Any]:
    """The run's row id of each of ``rows`` (the id itself, or its text as a CSV holds it),
    None where it is not one: a hash lookup, not a table of every id as text (1M rows)."""
    index = pd.Index(ids)
    numeric = ids.dtype.kind in "iu"
    wanted: list[Any] = []
    for row in rows:
        text = str(row).strip()
        if numeric:
            try:
                wanted.append(int(text))
            except ValueError:
                wanted.append(None)
        else:
            wanted.append(text)
    positions = index.get_indexer([w if w is not None else object() for w in wanted])
    values = ids.to_numpy()
    return [values[p] if p >= 0 else None for p in positions]


def _row_ids(run: Any) -> pd.Series:
    return run.score_columns(["row_id"])["row_id"]


def _empty() -> pd.DataFrame:
    return pd.DataFrame({"row_id": pd.Series([], dtype=object),
                         "decision": pd.Series([], dtype=object),
                         "label": pd.Series([], dtype=object),
                         "note": pd.Series([], dtype=object),
                         "reviewer": pd.Series([], dtype=object),
                         "decided_at": pd.Series([], dtype="datetime64[us, UTC]")})


def all_decisions(run: Any) -> pd.DataFrame:
    """Every decision of the run, in the order made (an empty table when there is none).

    Raises
    ------
    RunError
        The file is damaged, or belongs to another run's input.
    """
    path = Path(run.path) / DECISIONS_FILE
    if not path.is_file():
        return _empty()
    name = f"run {run.path.name}: {DECISIONS_FILE}"
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise RunError(f"{name} is damaged ({type(exc).__name__}); restore it from a "
                       "backup, or remove it to start the review again") from None
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise RunError(f"{name} is damaged: it lacks column(s) {', '.join(missing)}")
    info = _metadata(table)
    expected = str(run.input.get("sha256", ""))
    if info.get("input_sha256") != expected:
        raise RunError(
            f"{name} belongs to another input (sha256 {str(info.get('input_sha256'))[:12]}..., "
            f"this run's is {expected[:12]}...): it was copied from another run; remove it")
    frame = table.select(list(COLUMNS)).to_pandas()
    bad = ~frame["decision"].isin(DECISIONS)
    if bad.any():
        raise RunError(f"{name} is damaged: decision {short_repr(frame['decision'][bad].iloc[0])} "
                       f"is not one of {', '.join(DECISIONS)}")
    return frame


def decisions_in_force(run: Any) -> pd.DataFrame:
    """The decision in force for each decided row: its latest, unless that is a ``revert``
    (then none), in the order the rows were last decided."""
    frame = all_decisions(run)
    if frame.empty:
        return frame.drop(index=frame.index)
    latest = frame.drop_duplicates("row_id", keep="last")
    return latest[latest["decision"] != "revert"].reset_index(drop=True)


def check_decisions(run: Any, row_ids: Sequence[Any], decisions: Sequence[str],
                    labels: Sequence[Any]) -> tuple[list[Any], list[tuple[int, str]]]:
    """The run's row ids for ``row_ids`` (the ids themselves, or their text as a CSV holds
    them) and every problem of the batch as ``(position, what)``: an unknown row id, an
    unknown decision, a ``relabel`` without a label of the run or a label on another
    decision."""
    resolved = _resolve(_row_ids(run), row_ids)
    allowed = set(run_labels(run))
    problems: list[tuple[int, str]] = []
    for i, (row, key, decision, label) in enumerate(zip(row_ids, resolved, decisions, labels,
                                                        strict=True)):
        if key is None:
            problems.append((i, f"row_id {short_repr(row)} is not a row of run "
                                f"{run.path.name}"))
        elif decision not in DECISIONS:
            problems.append((i, f"decision {short_repr(decision)} is not one of "
                                f"{', '.join(DECISIONS)}"))
        elif decision == "relabel" and (label is None or str(label) not in allowed):
            choices = ", ".join(sorted(allowed))
            problems.append((i, f"relabel needs one of the run's labels ({choices}), got "
                                f"{short_repr(label)}"))
        elif decision != "relabel" and label not in (None, ""):
            problems.append((i, f"a label is given only with relabel, got label "
                                f"{short_repr(label)} with {decision}"))
    return resolved, problems


def decide(run: Any, row_ids: Iterable[Any] | Any, decision: str, *,
           label: Any = None, note: str = "", reviewer: str = "",
           notes: Sequence[str] | None = None, decisions: Sequence[str] | None = None,
           labels: Sequence[Any] | None = None, reviewers: Sequence[str] | None = None) -> int:
    """Record decisions on rows of ``run``; returns how many were recorded.

    ``decision`` (and ``label``, ``note``, ``reviewer``) apply to every row of ``row_ids``;
    ``decisions``, ``labels``, ``notes`` and ``reviewers`` give one per row instead (a
    spreadsheet's lines). Everything is checked before anything is written.

    Raises
    ------
    ValueError
        An unknown row id, decision or label (the first named, and how many there are);
        nothing is recorded.
    RunError
        The run folder cannot be written, or its decisions file is damaged or another run's.
    """
    rows = [row_ids] if isinstance(row_ids, (str, int, np.integer)) else list(row_ids)
    n = len(rows)
    decisions = list(decisions) if decisions is not None else [decision] * n
    labels = list(labels) if labels is not None else [label] * n
    notes = list(notes) if notes is not None else [note] * n
    reviewers = list(reviewers) if reviewers is not None else [reviewer] * n
    if not n:
        return 0
    resolved, problems = check_decisions(run, rows, decisions, labels)
    if problems:
        position, what = problems[0]
        more = f" ({len(problems)} rows have problems)" if len(problems) > 1 else ""
        raise ValueError(f"{what} (row {position + 1} of the batch){more}; nothing was "
                         "recorded")
    now = pd.Timestamp.now(tz="UTC").floor("us")
    batch = pd.DataFrame({
        "row_id": resolved,
        "decision": decisions,
        "label": [str(lab) if d == "relabel" else None
                  for d, lab in zip(decisions, labels, strict=True)],
        "note": [str(t or "")[:MAX_TEXT] for t in notes],
        "reviewer": [str(t or "")[:MAX_TEXT] for t in reviewers],
        "decided_at": pd.Series([now] * n, dtype="datetime64[us, UTC]"),
    })
    with _locked(run):
        before = all_decisions(run)
        _write(run, pd.concat([before, batch], ignore_index=True) if len(before) else batch)
    return n


# ------------------------------------------------------------------------------ writing


@contextlib.contextmanager
def _locked(run: Any) -> Iterator[None]:
    """The run's decisions lock, held while the file is read and replaced."""
    lock = Path(run.path) / _LOCK_FILE
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise RunError(f"run {run.path.name}: decisions cannot be recorded: the run folder is "
                       f"not writable ({exc.strerror or type(exc).__name__}); nothing was "
                       "recorded") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write(run: Any, frame: pd.DataFrame) -> None:
    row_type = pq.read_schema(Path(run.path) / "scores.parquet").field("row_id").type
    schema = pa.schema([("row_id", row_type), ("decision", pa.large_string()),
                        ("label", pa.large_string()), ("note", pa.large_string()),
                        ("reviewer", pa.large_string()),
                        ("decided_at", pa.timestamp("us", tz="UTC"))])
    info = {"input_sha256": str(run.input.get("sha256", "")), "run": run.path.name,
            "format": 1}
    table = pa.Table.from_pandas(frame[list(COLUMNS)], schema=schema, preserve_index=False)
    table = table.replace_schema_metadata({_METADATA_KEY: json.dumps(info).encode()})
    target = Path(run.path) / DECISIONS_FILE
    tmp = target.with_name(f".{DECISIONS_FILE}.part-{secrets.token_hex(4)}")
    try:
        pq.write_table(table, tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        raise RunError(f"run {run.path.name}: decisions cannot be recorded "
                       f"({exc.strerror or type(exc).__name__}); nothing was recorded") from None
    finally:
        tmp.unlink(missing_ok=True)


def _metadata(table: pa.Table) -> dict:
    raw = (table.schema.metadata or {}).get(_METADATA_KEY)
    try:
        value = loads_json(raw, name=DECISIONS_FILE) if raw else {}
    except ValueError:
        value = {}
    return value if isinstance(value, dict) else {}
