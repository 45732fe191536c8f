"""A run folder is checked before it is believed: ``summary.json``'s types and sizes, and
the scores against them.

A run folder is written by this package, but it sits on a disk where anything can change
it: a hand edit, a copy cut short, another program. :func:`summary_problem` names the first
thing in a summary that cannot be right (a value of the wrong type, a negative size, sizes
that do not add up); :func:`scores_problem` does the same for ``scores.parquet`` against the
summary. :func:`aflite_core.runs.folder.load_run` refuses such a run with
``run NAME is damaged: summary.json: sizes.retained is -5 (expected >= 0)``, and
:func:`aflite_core.runs.folder.list_runs` lists it as damaged instead of failing.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aflite_core.runs._layout import SCORES_COLUMNS, SCORES_FILE, SUMMARY_FILE
from aflite_core.runs._names import SAFE_FILE_NAME

#: Sizes whose sum is the input's row count (``unfiltered`` since 2026-11-25).
STATUS_SIZES = ("retained", "removed", "unfiltered", "warmup", "excluded")
#: Top-level keys of ``summary.json`` and the JSON type each must have when present.
_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,), "created": (str,), "parameters": (dict,), "representation": (dict,),
    "aflite": (dict,), "splits": (dict,), "versions": (dict,), "input": (dict,),
    "sizes": (dict,), "labels": (dict,), "history": (list,), "timings": (dict,),
    "measures": (dict,), "dataset": (dict,), "artifacts": (list,),
}
_KIND = {str: "a string", dict: "an object", list: "a list"}


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _count(value: Any) -> bool:
    """A JSON whole number >= 0 (not a boolean, not a float)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def summary_problem(summary: Mapping[str, Any]) -> str:
    """The first problem of a run's ``summary.json`` content, or ``""`` when it is sound.

    Examples
    --------
    >>> summary_problem({"sizes": {"input": 4, "retained": -5}})
    'sizes.retained is -5 (expected a whole number >= 0)'
    >>> summary_problem({"parameters": [1, 2]})
    'parameters is a list (expected an object)'
    """
    for key, types in _TYPES.items():
        if key in summary and summary[key] is not None and not isinstance(summary[key], types):
            return f"{key} is {_type_name(summary[key])} (expected {_KIND[types[0]]})"
    sizes = summary.get("sizes") or {}
    for key, value in sizes.items():
        if not _count(value):
            shown = _show(value) if isinstance(value, (int, float)) and not isinstance(
                value, bool) and (not isinstance(value, float) or math.isfinite(value)) \
                else _type_name(value)
            return f"sizes.{key} is {shown} (expected a whole number >= 0)"
    parts = [k for k in STATUS_SIZES if k in sizes]
    if "input" in sizes and {"retained", "removed"} <= set(parts):
        total = sum(sizes[k] for k in parts)
        if total != sizes["input"]:
            return (f"sizes do not add up: {' + '.join(parts)} = {total:,}, but input is "
                    f"{sizes['input']:,}")
    if ("filtered" in sizes and {"retained", "removed"} <= set(sizes)
            and sizes["filtered"] != sizes["retained"] + sizes["removed"]):
        return (f"sizes.filtered is {sizes['filtered']:,} (expected retained + removed = "
                f"{sizes['retained'] + sizes['removed']:,})")
    for scope, counts in (summary.get("labels") or {}).items():
        if not isinstance(counts, dict):
            return f"labels.{scope} is {_type_name(counts)} (expected an object)"
        bad = next((k for k, v in counts.items() if not _count(v)), None)
        if bad is not None:
            return (f"labels.{scope}[{_show(bad)}] is {_show(counts[bad])} (expected a whole "
                    "number >= 0)")
    for i, record in enumerate(summary.get("history") or []):
        if not isinstance(record, dict):
            return f"history[{i}] is {_type_name(record)} (expected an object)"
    for name, outcome in (summary.get("measures") or {}).items():
        if not isinstance(outcome, dict):
            return f"measures.{name} is {_type_name(outcome)} (expected an object)"
    for key in ("columns", "excluded"):
        value = (summary.get("input") or {}).get(key)
        if value is not None and not isinstance(value, dict):
            return f"input.{key} is {_type_name(value)} (expected an object)"
    return ""


def scores_problem(scores: Any, summary: Mapping[str, Any]) -> str:
    """The first disagreement between ``scores.parquet`` and the summary's sizes, or ``""``.

    Every input row has one score row (``sizes.input``), and the number of rows of each
    status is the summary's size of that status.
    """
    sizes = summary.get("sizes") or {}
    n = len(scores)
    if "input" in sizes and n != sizes["input"]:
        return f"scores.parquet has {n:,} rows, but summary.json says input is {sizes['input']:,}"
    if scores["row_id"].duplicated().any():
        return "scores.parquet has duplicate row ids"
    status = scores["status"]  # strings or codes (AuditRun.check_scores): no str per row
    for key in STATUS_SIZES:
        if key in sizes:
            found = int((status == key).to_numpy(dtype=bool, na_value=False).sum())
            if found != sizes[key]:
                return (f"scores.parquet has {found:,} {key} rows, but summary.json says "
                        f"sizes.{key} is {sizes[key]:,}")
    return ""


def run_damage(path: str | os.PathLike, summary: Mapping[str, Any] | None = None) -> str:
    """Why the run folder ``path`` is damaged, or ``""`` when it looks fine.

    Cheap checks, no table is read in full: ``scores.parquet`` must be present, a
    readable Parquet file (its footer) with the required columns, and every file the
    summary lists under ``artifacts`` must still be there.
    """
    import pyarrow as pa  # lazy: +163 ms to import
    import pyarrow.parquet as pq  # lazy: +157 ms to import

    path = Path(path)
    scores = path / SCORES_FILE
    if not scores.is_file():
        return f"{SCORES_FILE} is missing"
    try:
        meta = pq.ParquetFile(scores).metadata
        names = meta.schema.to_arrow_schema().names
    except (OSError, pa.ArrowException, ValueError) as exc:
        return f"{SCORES_FILE} is unreadable ({_short_error(exc, path)})"
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
                      if isinstance(f, str) and SAFE_FILE_NAME.match(f) and ".." not in f
                      and not (path / f).is_file())
        if gone:
            return f"file(s) missing: {', '.join(gone[:5])}" + (" ..." if len(gone) > 5 else "")
    return unreadable_table(path)


def unreadable_table(path: str | os.PathLike) -> str:
    """Why a Parquet file of the run folder ``path`` cannot be read (a truncated one has
    lost its footer; the footers alone are read), or ``""``."""
    import pyarrow as pa  # lazy: +163 ms to import
    import pyarrow.parquet as pq  # lazy: +157 ms to import

    path = Path(path)
    for table in sorted(path.glob("*.parquet")):
        if not table.is_file():
            continue
        try:
            pq.ParquetFile(table).metadata  # noqa: B018 - reading the footer is the check
        except (OSError, pa.ArrowException, ValueError) as exc:
            return f"{table.name} is unreadable ({_short_error(exc, path)})"
    return ""


def _short_error(exc: BaseException, folder: Path) -> str:
    """An exception's type and message cut to 120 characters, the server's paths out."""
    text = str(exc).replace(str(folder.resolve()), folder.name).replace(str(folder), folder.name)
    return f"{type(exc).__name__}: {text[:120]}"
