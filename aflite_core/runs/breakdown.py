"""Removal rate per value of any column the dataset has (MNLI genre, SICK split, a source).

A curator asks "did the filter take more from one genre, one annotator, one source?". For a
column of the run's rows table (:func:`aflite_core.runs.views.rows_table`) with few distinct
values, :func:`removal_breakdown` counts the filtered rows (retained + removed) per value and
gives the removal rate with a 95 % Wilson interval, the base rate (all filtered rows) and a
two-proportion z-score of the value against the other values. Warm-up and excluded rows are
not filtered, so they are left out of the counts.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from aflite_core._validation import check_int
from aflite_core.measures import wilson_interval

__all__ = ["MAX_VALUES", "breakdown_columns", "removal_breakdown"]

#: A column with more distinct values than this among the filtered rows is not offered.
MAX_VALUES: int = 50

#: Columns of the rows table that are the audit's, not the dataset's.
_AUDIT = ("status", "predictability", "removal_round")


def _filtered(table: pd.DataFrame) -> pd.DataFrame:
    if "status" not in table:
        raise ValueError(f"table: expected a rows table with a 'status' column, got columns "
                         f"{list(table.columns)[:10]}")
    return table[table["status"].astype(str).isin(["retained", "removed"])]


def _n_text_values(values: pd.Series, max_values: int) -> int:
    """``values.astype(str).nunique(dropna=False)``, or any number above ``max_values`` when
    that one is, without converting a million values to text when the raw values settle it.

    Converting integers, booleans or (non-object) strings to text neither merges nor splits
    values, so their distinct raw values are converted alone. Numbers never merge as text
    (they may split: ``-0.0`` and ``0.0``), so more than ``max_values`` distinct numbers are
    more as text too. Anything else (floats with few values, mixed objects such as ``1``,
    ``1.0`` and ``"1"``) is converted whole.
    """
    n_raw = int(values.nunique(dropna=False))
    plain = (pd.api.types.is_integer_dtype(values) or pd.api.types.is_bool_dtype(values)
             or (pd.api.types.is_string_dtype(values)
                 and not pd.api.types.is_object_dtype(values)))
    if n_raw <= max_values and plain:
        return int(pd.Series(values.drop_duplicates().to_numpy(dtype=object)).astype(str)
                   .nunique(dropna=False))
    if n_raw > max_values and (plain or pd.api.types.is_numeric_dtype(values)):
        return n_raw
    return int(values.astype(str).nunique(dropna=False))


def breakdown_columns(table: pd.DataFrame, *, max_values: int = MAX_VALUES,
                      exclude: Iterable[str] = ()) -> list[str]:
    """Columns worth a breakdown: 2 to ``max_values`` distinct values among filtered rows.

    Parameters
    ----------
    table : DataFrame
        A run's rows table (``status`` and the dataset's columns).
    max_values : int >= 2, default :data:`MAX_VALUES`
    exclude : iterable of str
        Columns not to offer (e.g. the texts).

    Returns
    -------
    list of str
        In table order.
    """
    max_values = check_int("max_values", max_values, minimum=2)
    rows = _filtered(table)
    skip = set(_AUDIT) | set(exclude)
    out = []
    for column in table.columns:
        if column in skip:
            continue
        n_values = _n_text_values(rows[column], max_values)
        if 2 <= n_values <= max_values:
            out.append(str(column))
    return out


def removal_breakdown(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """Removal rate per value of ``column`` among the filtered rows.

    Parameters
    ----------
    table : DataFrame
        A run's rows table.
    column : str
        One of its columns (values compared as strings; missing values form "(missing)").

    Returns
    -------
    DataFrame
        One row per value, most rows first: ``value``, ``rows``, ``removed``, ``retained``,
        ``removal_rate``, ``ci_low``, ``ci_high`` (95 % Wilson), ``base_rate`` (all filtered
        rows), ``difference_pp`` (rate minus base, percentage points) and ``z`` (two-
        proportion z of this value against the other values; 0 when undefined).

    Examples
    --------
    >>> t = pd.DataFrame({"status": ["removed", "retained", "retained", "removed"],
    ...                   "genre": ["a", "a", "b", "b"]})
    >>> removal_breakdown(t, "genre")[["value", "rows", "removed", "removal_rate"]]
      value  rows  removed  removal_rate
    0     a     2        1           0.5
    1     b     2        1           0.5
    """
    if column not in table:
        raise ValueError(f"column: expected one of the run's columns, got {column!r}")
    rows = _filtered(table)
    values = rows[column].astype(object).where(rows[column].notna(), "(missing)").astype(str)
    removed = (rows["status"].astype(str) == "removed").to_numpy()
    frame = pd.DataFrame({"value": values.to_numpy(), "removed": removed})
    grouped = frame.groupby("value", sort=False)["removed"].agg(["size", "sum"])
    n = grouped["size"].to_numpy(dtype=float)
    k = grouped["sum"].to_numpy(dtype=float)
    total_n, total_k = float(len(frame)), float(removed.sum())
    base = total_k / total_n if total_n else float("nan")
    low, high = wilson_interval(k, n)
    rest_n, rest_k = total_n - n, total_k - k
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = k / n
        pooled = total_k / total_n
        se = np.sqrt(pooled * (1 - pooled) * (1 / n + 1 / rest_n))
        z = np.where((se > 0) & (rest_n > 0), (rate - rest_k / rest_n) / se, 0.0)
    out = pd.DataFrame({
        "value": grouped.index.astype(str), "rows": n.astype(int), "removed": k.astype(int),
        "retained": (n - k).astype(int), "removal_rate": rate, "ci_low": low, "ci_high": high,
        "base_rate": base, "difference_pp": 100 * (rate - base), "z": np.nan_to_num(z),
    })
    return out.sort_values(["rows", "value"], ascending=[False, True],
                           kind="stable").reset_index(drop=True)
