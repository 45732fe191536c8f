"""What the round loops of the filters share: stop reasons, sizes resolved against the input,
the input checks, and the rule that picks a round's removals.

AFLite (:mod:`aflite_core.filter._aflite`) and its multiple-choice form
(:mod:`aflite_core.filter._multiple_choice`) resolve ``target_size``, ``train_size`` and
``slice_size`` the same way and remove rows (or questions) with :func:`_select_removals`, so a
change to the stopping rule is made here once.
"""

from __future__ import annotations

import mmap
import time
from typing import Any

import numpy as np
import pandas as pd

from aflite_core._validation import (
    check_fraction,
    check_size,
    resolve_size,
)
from aflite_core.filter._datamap import DatamapTracker
from aflite_core.represent import is_partitioned

STRATEGIES = ("greedy_slicing", "slice_sampling", "greedy")
#: Default slice size (rows removed per round) as a fraction of the input; the paper's SNLI
#: setting removes k = 10,000 of 550,000 rows (1.8%) per round.
DEFAULT_SLICE_FRACTION = 0.02

STOP_TARGET = "target_size"
STOP_TAU = "too_few_above_tau"
STOP_CALLBACK = "callback"

_BLOCK_BYTES = 32 << 20
_QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
#: Record the data map (confidence, variability) of the held-out predictions. A private
#: switch: ``benchmarks/bench_scale.py`` turns it off to time AFLite without it; masks and
#: predictabilities are the same either way.
_RECORD_DATAMAP = True


# -- parameter validation -------------------------------------------------------------------
def resolve_target_size(value: Any, n: int) -> int:
    target = resolve_size("target_size", value, n)
    if target >= n:
        raise ValueError(
            f"target_size: expected fewer rows than the input's {n}, got {value!r} "
            f"({target} rows): there would be nothing to filter"
        )
    return target


def resolve_train_size(value: Any, n: int, target_size: int) -> int | float:
    train = check_size("train_size", value)
    if isinstance(train, int):
        if train >= n:
            raise ValueError(
                f"train_size: expected fewer rows than the set it partitions (t < |S|), got "
                f"train_size={train} for {n} rows"
            )
        if train > target_size:
            raise ValueError(
                f"train_size: expected at most target_size={target_size} when an int, got "
                f"train_size={train}: t < |S| must hold in every round and the last round may "
                f"have only target_size + 1 rows (pass a float to scale it with |S|)"
            )
    return train


def resolve_slice_size(value: Any, n: int, strategy: str) -> int:
    if strategy == "greedy":
        if value is not None and check_size("slice_size", value, allow_all=True) != 1:
            raise ValueError(
                f"slice_size: expected None or 1 for strategy='greedy' (k = 1), got {value!r}"
            )
        return 1
    if value is None:
        return max(1, round(DEFAULT_SLICE_FRACTION * n))
    return resolve_size("slice_size", value, n, allow_all=True, rounding="nearest")


def heldout_train_size(value: Any, n_retained: int) -> int:
    """Training rows per model of :meth:`AFLite.score_heldout` out of ``n_retained`` rows."""
    train = check_size("train_size", value)
    if isinstance(train, int):
        if train > n_retained:
            raise ValueError(
                f"train_size: expected at most the {n_retained} retained rows, got {train}"
            )
        return train
    return int(min(max(round(train * n_retained), 1), n_retained))


def check_tau(value: Any) -> float:
    return check_fraction("tau", value, closed=True)


# -- data validation ------------------------------------------------------------------------
class RowSelection:
    """Rows ``rows`` of a float32 C-contiguous ``X``, read through, never copied whole.

    What :class:`~aflite_core.filter.AFLite`'s ``fit`` and ``score_heldout`` accept in
    place of ``X[rows]``: they read their features a block of rows at a time (column means,
    working copies, the covariance downdate, the Dask backend's scattered groups), and each
    read ``selection[i:j]`` is ``X[rows[i:j]]``, the rows ``X[rows][i:j]`` would give: the
    same numbers bit for bit, without the copy of every selected row (at 1M rows x 256 with
    a split column, 0.9 GB of the audit's AFLite stage).

    Parameters
    ----------
    X : numpy.ndarray
        float32, 2-D, C-contiguous (a memory map too).
    rows : array of int
        Positions in ``X``, in the order the selection's rows take.
    """

    ndim = 2

    def __init__(self, X: np.ndarray, rows: Any) -> None:
        if not isinstance(X, np.ndarray) or X.ndim != 2 or X.dtype != np.float32 \
                or not X.flags.c_contiguous:
            raise TypeError("RowSelection: expected a 2-D float32 C-contiguous array, got "
                            f"{type(X).__name__} {getattr(X, 'dtype', '')} of shape "
                            f"{getattr(X, 'shape', None)}")
        rows = np.asarray(rows)
        if rows.ndim != 1 or (rows.size and rows.dtype.kind not in "iu"):
            raise TypeError(f"RowSelection: rows must be a 1-D array of positions, got "
                            f"{rows.dtype} of shape {rows.shape}")
        rows = rows.astype(np.int64, copy=False)
        if rows.size and (rows.min() < 0 or rows.max() >= X.shape[0]):
            raise ValueError(f"RowSelection: rows must be positions in 0..{X.shape[0] - 1}")
        self.base, self.rows = X, rows
        self.shape = (len(rows), X.shape[1])
        self.dtype = X.dtype

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: Any) -> np.ndarray:
        if isinstance(index, tuple):
            raise TypeError("RowSelection: index rows only (selection[rows])")
        return self.base[self.rows[index]]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.base[self.rows], dtype=dtype)


def select_rows(X: Any, rows: np.ndarray) -> Any:
    """``X[rows]`` as AFLite reads it: a :class:`RowSelection` (no copy) of a float32
    C-contiguous array, a selection of Φ's partitions
    (:meth:`~aflite_core.represent._partitioned_rows.PartitionedRows.select`, nothing
    fetched), the copy of anything else."""
    if is_partitioned(X):
        return X.select(rows)
    if isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float32 \
            and X.flags.c_contiguous:
        return RowSelection(X, rows)
    return X[rows]


def check_X(X: Any) -> np.ndarray:
    """2-D real-valued float32 features without NaN/inf; memory maps are kept as they are
    (and a :class:`RowSelection`, validated when it was made, is read through)."""
    if isinstance(X, RowSelection) or is_partitioned(X):
        return X  # type: ignore[return-value]
    if hasattr(X, "toarray") or type(X).__module__.startswith("scipy.sparse"):
        raise TypeError("X must be a dense array; got a sparse matrix (convert with .toarray())")
    if not isinstance(X, np.ndarray):
        try:
            X = np.asarray(X)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"X must be array-like of numbers; could not convert: {exc}") from exc
    if X.ndim != 2:
        raise ValueError(
            f"X must be 2-D (n_samples, n_features); got a {X.ndim}-D array of shape {X.shape}"
        )
    if X.dtype.kind not in "biuf":
        raise TypeError(f"X must hold real numbers (float, int or bool); got dtype {X.dtype}")
    if X.shape[1] == 0:
        raise ValueError(
            f"X must have at least one feature column; got 0 feature(s) (shape={X.shape}) "
            "while a minimum of 1 is required."
        )
    if X.dtype != np.float32 or not X.flags.c_contiguous:
        X = np.ascontiguousarray(X, dtype=np.float32)
    return X


def encode_labels(y: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes and sorted classes of ``y``, validated against ``n`` rows."""
    if y is None:
        raise ValueError("AFLite requires y to be passed, but the target y is None")
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (n_samples,); got shape {y.shape}")
    if len(y) != n:
        raise ValueError(f"X and y must have the same length; got {n} rows in X, {len(y)} in y")
    if y.dtype.kind in "fOmM" and pd.isna(y).any():
        first = int(np.flatnonzero(pd.isna(y))[0])
        raise ValueError(
            f"y must not contain missing labels (None/NaN/NA); found {y[first]!r} at row {first}"
        )
    try:
        classes, codes, counts = np.unique(y, return_inverse=True, return_counts=True)
    except TypeError as exc:
        raise TypeError(f"y labels must be mutually comparable (one type); {exc}") from exc
    if len(classes) < 2:
        raise ValueError(
            f"y must contain at least 2 distinct labels; got {len(classes)} "
            f"class{'' if len(classes) == 1 else 'es'} ({classes.tolist()[:5]})"
        )
    single = classes[counts < 2]
    if len(single):
        raise ValueError(
            "y: every label needs at least 2 examples; "
            f"{len(single)} label(s) have one: {single.tolist()[:5]}"
        )
    return codes.astype(np.int64).reshape(-1), classes


def column_mean(X: np.ndarray) -> np.ndarray:
    """Column means (float32) of a finite ``X``; raises ValueError naming the first NaN/inf.

    The float64 column sums are finite exactly when every entry is (an inf or NaN entry makes
    its column's sum inf or NaN, and float32 values cannot overflow a float64 sum), so the
    finiteness check costs nothing extra; the offending cell is only searched for on failure.
    """
    total = np.zeros(X.shape[1])
    step = max(1, _BLOCK_BYTES // (4 * X.shape[1]))
    if is_partitioned(X):  # each chunk summed where its rows are, the sums added in order
        for part in X.chunk_sums(step):
            total += part
    else:
        for start in range(0, X.shape[0], step):
            total += X[start : start + step].sum(axis=0, dtype=np.float64)
            release_pages(X, start, start + step)
    if not np.isfinite(total).all():
        for start in range(0, X.shape[0], step):
            block = X[start : start + step]
            bad = np.argwhere(~np.isfinite(block))
            if len(bad):
                r, c = bad[0]
                raise ValueError(
                    "X must not contain NaN or infinite values; found "
                    f"{block[r, c]} at row {start + r}, column {c}"
                )
    return (total / X.shape[0]).astype(np.float32)


def release_pages(X: np.ndarray, start: int, stop: int) -> None:
    """Drop rows ``start:stop`` of a read-only memory map from this process's resident set.

    A best-effort hint (``madvise(MADV_DONTNEED)``): the pages stay in the OS page cache and
    are read back transparently if touched again, so a memory-mapped input costs the
    working copies, not the working copies plus the whole mapped file. Does nothing for
    ordinary arrays, writable maps, or where the platform lacks ``madvise``.
    """
    mm = getattr(X, "_mmap", None)
    if mm is None or getattr(X, "mode", None) != "r" or not hasattr(mmap, "MADV_DONTNEED"):
        return
    try:
        base = np.frombuffer(mm, dtype=np.uint8).ctypes.data
        row_bytes = X.strides[0]
        first = X.ctypes.data - base + max(start, 0) * row_bytes
        last = X.ctypes.data - base + min(stop, X.shape[0]) * row_bytes
        page = mmap.PAGESIZE
        first = -(-first // page) * page  # only whole pages inside the range
        last = last // page * page
        if last > first:
            mm.madvise(mmap.MADV_DONTNEED, first, last - first)
    except (OSError, ValueError, TypeError, BufferError):
        return


# -- round mechanics ----------------------------------------------------------------------
def round_train_size(train: int | float, n_s: int) -> int:
    if isinstance(train, int):
        return train
    return int(min(max(round(train * n_s), 1), n_s - 1))


def _select_removals(
    scores: np.ndarray,
    priority: np.ndarray,
    cap: int,
    strategy: str,
    rng: np.random.Generator,
) -> np.ndarray:
    """Positions (into ``scores``) of the rows to remove among eligible rows.

    ``scores`` are the predictabilities of the rows scoring at least tau; ``priority`` their
    seeded tie-break rank (lower goes first). Greedy strategies take the ``cap`` highest
    scores, ties by priority; slice sampling draws ``cap`` rows without replacement with
    probability proportional to the score (Gumbel top-k), ties by priority.
    """
    if cap <= 0 or len(scores) == 0:
        return np.zeros(0, dtype=np.int64)
    if strategy == "slice_sampling":
        if len(scores) <= cap:
            return np.arange(len(scores))
        with np.errstate(divide="ignore"):
            keys = np.log(scores) + rng.gumbel(size=len(scores))
    else:
        keys = scores
    # Only rows whose key reaches the cap-th largest key can be among the first cap of the
    # (-key, priority) order, so only those are sorted.
    candidates = np.arange(len(keys))
    if len(keys) > cap:
        threshold = np.partition(keys, len(keys) - cap)[len(keys) - cap]
        candidates = np.flatnonzero(keys >= threshold)
    order = np.lexsort((priority[candidates], -keys[candidates]))
    return candidates[order[:cap]]



def asks_to_stop(answer: Any) -> bool:
    """Whether a progress callback's answer stops the filter: ``True`` (or numpy's), nothing
    else, for every filter (AFLite, its multiple-choice form, the Z-filter)."""
    return answer is True or answer is np.True_


# -- the round loop's state and bookkeeping ----------------------------------------------
class RoundState:
    """What every AFLite round loop keeps and does the same way, over *units* (rows for
    :class:`~aflite_core.filter.AFLite`, questions for its multiple-choice form).

    Subclasses score the units of S their own way, then call :meth:`choose` (which units
    leave: at most ``slice_size`` of those scoring at least tau, never below the target),
    :meth:`remove` (record the round, apply the stop rules), :meth:`history_row` and
    :meth:`notify` (the ``history_`` row and the callback). A change to the stopping rule,
    the history columns or the callback's keys is made here once.

    ``cfg`` needs ``target_size``, ``slice_size``, ``tau``, ``strategy`` and ``callback``.
    The seeded tie-break order is drawn first from ``rng``, as both filters always did.
    """

    def __init__(self, n_units: int, cfg: Any, rng: np.random.Generator) -> None:
        self.cfg = cfg
        self.rng = rng
        # A seeded rank per unit breaks ties between equal scores (the lower rank goes first).
        self.priority = np.empty(n_units, dtype=np.int64)
        self.priority[rng.permutation(n_units)] = np.arange(n_units)
        self.alive = np.ones(n_units, dtype=bool)
        self.predictability = np.full(n_units, np.nan)
        self.removal_round = np.full(n_units, -1, dtype=np.int64)
        self.datamap = DatamapTracker(n_units, on=_RECORD_DATAMAP)
        self.history: list[dict[str, Any]] = []
        self.removed_total = 0
        self.stop_reason: str | None = None

    def choose(self, s_units: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, int]:
        """``(positions in s_units of the units that leave, sorted; units scoring >= tau)``."""
        cfg = self.cfg
        eligible = np.flatnonzero(scores >= cfg.tau)
        cap = min(cfg.slice_size, len(s_units) - cfg.target_size)
        chosen = _select_removals(scores[eligible], self.priority[s_units[eligible]], cap,
                                  cfg.strategy, self.rng)
        return np.sort(eligible[chosen]), len(eligible)

    def remove(self, number: int, s_units: np.ndarray, scores: np.ndarray, gold: Any,
               removed_pos: np.ndarray) -> np.ndarray:
        """Record round ``number``'s scores (and data map), take the chosen units out of S,
        apply the stop rules; return the units removed."""
        removed = s_units[removed_pos]
        self.predictability[s_units] = scores
        self.datamap.record(number, s_units, scores, gold)
        self.alive[removed] = False
        self.removal_round[removed] = number
        self.removed_total += len(removed)
        if len(s_units) - len(removed) <= self.cfg.target_size:
            self.stop_reason = STOP_TARGET
        elif len(removed) < self.cfg.slice_size:
            self.stop_reason = STOP_TAU
        return removed

    @staticmethod
    def history_row(number: int, size: int, train_size: int, removed: int, scores: np.ndarray,
                    n_above_tau: int, seconds: float, *, sizes: dict | None = None,
                    means: dict | None = None) -> dict[str, Any]:
        """The ``history_`` row of a round; ``sizes`` (e.g. ``size_rows``) follow ``size``
        and ``means`` (e.g. ``chance_mean``) follow ``score_mean``."""
        scored = scores[~np.isnan(scores)]
        row: dict[str, Any] = {"round": number, "size": size, **(sizes or {}),
                               "train_size": train_size, "removed": removed,
                               "size_after": size - removed, "n_scored": len(scored),
                               "n_above_tau": n_above_tau,
                               "score_mean": float(scored.mean()) if len(scored) else np.nan,
                               **(means or {})}
        qs = np.quantile(scored, _QUANTILES) if len(scored) else [np.nan] * len(_QUANTILES)
        for q, v in zip(_QUANTILES, qs, strict=True):
            row[f"score_q{round(q * 100):02d}"] = float(v)
        row["seconds"] = seconds
        return row

    def notify(self, number: int, size_before: int, removed: int, n_above_tau: int,
               seconds: float, started: float, n_samples: int, *,
               sizes: dict | None = None) -> None:
        """Tell the callback about the round; ``True`` back stops after it."""
        callback = self.cfg.callback
        if callback is None:
            return
        info = {
            "round": number,
            "size": size_before - removed,
            "size_before": size_before,
            **(sizes or {}),
            "removed": removed,
            "removed_total": self.removed_total,
            "target_size": self.cfg.target_size,
            "n_samples": n_samples,
            "n_above_tau": n_above_tau,
            "seconds": seconds,
            "elapsed": time.perf_counter() - started,
            "stop_reason": self.stop_reason,
        }
        if asks_to_stop(callback(info)) and self.stop_reason is None:
            self.stop_reason = STOP_CALLBACK
