"""KNN-distance measures on Φ: is the data harder and more diverse after AFLite?

For every held-out example we look up its nearest *training* examples by cosine distance on Φ,
within its own class (``same_class``) and among the other classes (``other_class``), once against
all training rows (scope ``before``) and once against the AFLite-retained rows only (``after``),
as in Table 3 of Le Bras et al. (ICML 2020). Larger same-class distances after filtering mean the
retained set no longer holds near-copies of the held-out examples. See ``docs/measures.md``.

Search is exact by default: rows are L2-normalised, similarities come from a float32 matrix
product over blocks of queries (memory bounded by ``block_size``), and the top-k of each block is
found with a partition pre-filter. Above :data:`APPROX_MIN_PAIRS` query x reference pairs
``method="auto"`` switches to an approximate search (an inverted file of the training rows:
:func:`aflite_core.measures._neighbors.approx_topk`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from aflite_core._validation import available_cores, check_fraction
from aflite_core.chart_style import PALETTE
from aflite_core.measures._neighbors import (  # noqa: F401 - nearest_neighbors: re-exported
    ProgressCallback,
    approx_topk,
    as_labels,
    as_mask,
    as_matrix,
    check_ks,
    emit,
    exact_topk,
    l2_normalize,
    nearest_neighbors,
    query_block_rows,
    resolve_method,
    search_bytes,
)
from aflite_core.measures.registry import Measure, MeasureContext, MeasureResult, Option
from aflite_core.progress_plan import along_points
from aflite_core.represent import dask_folds, is_partitioned, lost_data, map_folds
from aflite_core.splits import TEST_VALUES, holdout_mask, label_matched_subsets, split_masks

#: Neighbour counts reported by default (the paper's 1, 5, 10, 50).
KS: tuple[int, ...] = (1, 5, 10, 50)

#: Masks (retained rows, random controls, other seeds) one similarity pass serves: the training
#: rows are split into up to 2**MASKS_PER_PASS membership patterns per class.
MASKS_PER_PASS: int = 4

#: The measure queries at most this many held-out rows (a seeded sample above it; the
#: bootstrap intervals then include the sampling error). See ``max_queries``.
MAX_QUERIES: int = 10_000

SCOPES = ("before", "after")
RELATIONS = ("same_class", "other_class")


# --------------------------------------------------------------------------------------------
# measures


@dataclass
class KNNResult:
    """Output of :func:`knn_distance_measures`.

    Attributes
    ----------
    table : DataFrame
        One row per ``scope`` (before/after) x ``class`` (each held-out class and ``"all"``) x
        ``relation`` (same_class/other_class) x ``k``, with ``n_queries`` (held-out examples
        with at least k neighbours available), ``n_short`` (examples with fewer, left out of
        the mean), ``mean_sum_distance`` (mean over examples of the summed top-k cosine
        distances), ``mean_distance`` (= mean_sum_distance / k) and ``ci_low``/``ci_high``
        (bootstrap percentile interval of ``mean_sum_distance``).
    per_example : DataFrame
        One row per held-out example and scope: ``row_id``, ``label``, ``scope``,
        ``nearest_same_class`` and ``nearest_other_class`` (cosine distances, NaN when the
        relation has no training rows) and ``nearest_same_class_row_id`` (training row id of
        that neighbour; None when there is none).
    method : str
        ``"exact"`` or ``"approximate"``.
    params : dict
        The parameters used (JSON-friendly).
    controls : list of DataFrame
        One table per ``control_masks`` entry: the ``after`` rows of ``table`` (without
        intervals) with that mask in place of the retained rows.
    """

    table: pd.DataFrame
    per_example: pd.DataFrame
    method: str
    params: dict = field(default_factory=dict)
    controls: list = field(default_factory=list)


def heldout_mask(labels, *, splits=None, fraction: float = 0.1,
                 heldout_splits: Iterable[str] = TEST_VALUES, groups=None,
                 random_state: int | None = 0) -> np.ndarray:
    """Choose the held-out rows for the KNN measures.

    Rows whose split is one of ``heldout_splits`` (case-insensitive; by default the test
    values of :data:`aflite_core.splits.TEST_VALUES`: test, dev, validation, ...) when
    ``splits`` has some but not only such rows; every other row is a training (reference) row.
    Otherwise a seeded, class-stratified ``fraction`` of the rows
    (:func:`aflite_core.splits.holdout_mask` with ``clamp=True``: every class with two rows
    or more has rows on both sides), grouped when ``groups`` is given (rows of one group are
    all held out or all training rows).

    Returns
    -------
    ndarray of bool, True = held out (a query), False = training (a reference row).
    """
    labels = np.asarray(labels)
    n = len(labels)
    fraction = check_fraction("fraction", fraction)
    if splits is not None:
        splits = as_labels(splits, n, "splits")
        _, mask = split_masks(splits, n=n, test_values=heldout_splits)
        if mask.any() and not mask.all():
            return mask
    return holdout_mask(labels, test_size=fraction, groups=groups, random_state=random_state,
                        clamp=True)


def _merge_topk(parts: Iterable[np.ndarray], k: int) -> np.ndarray:
    """Row-wise top-``k`` (descending) of the concatenated similarity arrays; -inf pads. The
    parts are merged one at a time into the top ``k`` so far (all side by side, a merge held
    0.2 GB at 100k rows, fifteen merges at once on 16 cores): the same sorted values."""
    allv = None
    for part in parts:
        allv = part if allv is None else np.concatenate([allv, part], axis=1)
        if allv.shape[1] > k:
            allv = -np.partition(-allv, k - 1, axis=1)[:, :k]
    if allv is None:
        raise AssertionError("no parts")  # callers always pass at least the padding array
    allv = -np.sort(-allv, axis=1)
    if allv.shape[1] < k:
        pad = np.full((allv.shape[0], k - allv.shape[1]), -np.inf, dtype=allv.dtype)
        allv = np.concatenate([allv, pad], axis=1)
    return allv


def _bootstrap_means(values: np.ndarray, n_bootstrap: int, confidence: float,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over rows ignoring NaN, with a percentile bootstrap interval, for every column."""
    valid = ~np.isnan(values)
    filled = np.where(valid, values, 0.0)
    count = valid.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = filled.sum(axis=0) / count
    n = values.shape[0]
    if n_bootstrap == 0 or n == 0:
        nan = np.full(values.shape[1], np.nan)
        return mean, nan, nan
    boots = np.empty((n_bootstrap, values.shape[1]))
    chunk = max(1, min(n_bootstrap, 2_000_000 // max(n, 1)))
    for start in range(0, n_bootstrap, chunk):
        b = min(chunk, n_bootstrap - start)
        draws = rng.integers(0, n, size=(b, n)) + (np.arange(b) * n)[:, None]
        weights = np.bincount(draws.ravel(), minlength=b * n).reshape(b, n).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            boots[start:start + b] = (weights @ filled) / (weights @ valid)
    alpha = (1.0 - confidence) / 2.0
    low = np.full(values.shape[1], np.nan)
    high = np.full(values.shape[1], np.nan)
    ok = count > 0  # columns with no valid example have no interval
    if ok.any():
        low[ok] = np.nanquantile(boots[:, ok], alpha, axis=0)
        high[ok] = np.nanquantile(boots[:, ok], 1.0 - alpha, axis=0)
    return mean, low, high


def knn_distance_measures(X_train, y_train, X_heldout, y_heldout, *, retained_mask=None,
                          control_masks: Sequence | None = None,
                          ks: Sequence[int] = KS, train_row_ids=None, heldout_row_ids=None,
                          method: str = "auto", n_bootstrap: int = 1000,
                          confidence: float = 0.95, block_size: int | None = None,
                          random_state: int | None = 0,
                          callback: ProgressCallback | None = None,
                          train_rows=None, heldout_rows=None) -> KNNResult:
    """KNN-distance measures of held-out examples to training examples, before vs after.

    Parameters
    ----------
    X_train : array of shape (n_train, n_features)
        Φ of the training rows (the rows AFLite filtered).
    y_train : array of shape (n_train,)
        Their labels (any hashable type; compared by equality).
    X_heldout : array of shape (n_heldout, n_features)
        Φ of the held-out rows (dev/test split or a seeded fraction, see :func:`heldout_mask`).
    y_heldout : array of shape (n_heldout,)
    retained_mask : bool array of shape (n_train,), optional
        True for training rows AFLite kept. Without it only the ``before`` scope is computed.
    control_masks : sequence of bool arrays of shape (n_train,), optional
        Other subsets of the training rows (random controls, other AFLite seeds), each
        measured like ``retained_mask`` in the same search (``KNNResult.controls``): one
        similarity product serves every mask (up to :data:`MASKS_PER_PASS` masks per pass).
    ks : sequence of int, default (1, 5, 10, 50)
        Neighbour counts. When a class has fewer than k training rows in a scope, its examples
        are counted in ``n_short`` and left out of that mean (NaN if none is left).
    train_row_ids, heldout_row_ids : array, optional
        Row ids reported in ``per_example`` (default: positions).
    method : {"auto", "exact", "approximate"}, default "auto"
        See :func:`nearest_neighbors`.
    n_bootstrap : int, default 1000
        Bootstrap resamples of the held-out examples for the intervals (0 = no intervals).
    confidence : float, default 0.95
        Coverage of the percentile interval.
    block_size : int, optional
        Query rows per block of the exact search.
    random_state : int or None, default 0
        Seeds the bootstrap and the approximate index.
    callback : callable, optional
        Called with ``{"stage": "knn", "fraction": float, "message": str}`` as work proceeds.
    train_rows, heldout_rows : array of int, optional
        Positions in ``X_train`` / ``X_heldout`` of the rows to measure (default: all rows;
        the labels, masks and row ids then follow these rows). The rows are gathered chunk by
        chunk as they are normalised, never copied whole: an audit passes Φ itself and its
        split's positions (at 1M rows x 256, a 0.9 GB copy fewer), with the same result bit
        for bit as ``X_train[train_rows]``.

    Returns
    -------
    KNNResult
    """
    Xt = as_matrix(X_train, "X_train")
    Xh = Xt if X_heldout is X_train else as_matrix(X_heldout, "X_heldout")
    if Xt.shape[1] != Xh.shape[1]:
        raise ValueError(f"X_train and X_heldout must have the same number of columns; got "
                         f"{Xt.shape[1]} and {Xh.shape[1]}")
    train_rows = _as_positions(train_rows, len(Xt), "train_rows")
    heldout_rows = _as_positions(heldout_rows, len(Xh), "heldout_rows")
    n_train = len(Xt) if train_rows is None else len(train_rows)
    n_held = len(Xh) if heldout_rows is None else len(heldout_rows)
    if n_train == 0 or n_held == 0:
        raise ValueError(f"need at least one training and one held-out row; got {n_train} and "
                         f"{n_held}")
    yt = as_labels(y_train, n_train, "y_train")
    yh = as_labels(y_heldout, n_held, "y_heldout")
    retained = None if retained_mask is None else as_mask(retained_mask, n_train,
                                                            "retained_mask")
    controls = [as_mask(m, n_train, f"control_masks[{i}]")
                for i, m in enumerate(control_masks or [])]
    ks = check_ks(ks)
    if int(n_bootstrap) < 0:
        raise ValueError(f"n_bootstrap must be >= 0; got {n_bootstrap!r}")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")
    train_ids = np.arange(n_train) if train_row_ids is None else as_labels(
        train_row_ids, n_train, "train_row_ids")
    held_ids = np.arange(n_held) if heldout_row_ids is None else as_labels(
        heldout_row_ids, n_held, "heldout_row_ids")
    resolved = resolve_method(method, n_held, n_train)
    folds = dask_folds()
    Qn = l2_normalize(Xh, rows=heldout_rows)
    if (is_partitioned(Xt) and resolved != "approximate" and folds is not None
            and getattr(Xt.runner, "client", None) is folds.client):
        Rn = _UnitRowsThere(Xt if train_rows is None else Xt.select(train_rows), folds)
    else:
        Rn = _UnitRows(Xt, train_rows)
    return _knn_measures(Rn, yt, Qn, yh, retained=retained, controls=controls, ks=ks,
                         train_ids=train_ids,
                         held_ids=held_ids, method=resolved, n_bootstrap=int(n_bootstrap),
                         confidence=float(confidence), block_size=block_size,
                         random_state=random_state, callback=callback)


def _as_positions(rows, n: int, name: str) -> np.ndarray | None:
    """``rows`` as int64 positions in ``0..n-1`` (None stays None)."""
    if rows is None:
        return None
    positions = np.asarray(rows)
    if positions.ndim != 1 or (positions.size and positions.dtype.kind not in "iu"):
        raise ValueError(f"{name} must be a 1-D array of row positions; got "
                         f"{positions.dtype} of shape {positions.shape}")
    positions = positions.astype(np.int64, copy=False)
    if positions.size and (positions.min() < 0 or positions.max() >= n):
        raise ValueError(f"{name} must be positions in 0..{n - 1}; got values from "
                         f"{positions.min()} to {positions.max()}")
    return positions


def _knn_measures(Rn: np.ndarray, yt: np.ndarray, Qn: np.ndarray, yh: np.ndarray, *,
                  retained: np.ndarray | None, controls: list[np.ndarray],
                  ks: tuple[int, ...], train_ids: np.ndarray,
                  held_ids: np.ndarray, method: str, n_bootstrap: int, confidence: float,
                  block_size: int | None, random_state: int | None,
                  callback: ProgressCallback | None) -> KNNResult:
    """:func:`knn_distance_measures` on validated inputs: the unit-length training and
    held-out rows (``Rn``, ``Qn``).

    Search each held-out row against every reference set once (:func:`_search`), merge the
    results into the scopes and relations (:func:`_merge_scopes`), then summarise them
    (:func:`_distance_table`, :func:`_per_example`). The masks (retained, then controls) are
    searched :data:`MASKS_PER_PASS` at a time: one pass splits the training rows by class and
    membership pattern, so its similarity products cover each training row once.
    """
    K = max(ks)
    classes = list(pd.unique(np.concatenate([yt, yh]).astype(object)))
    masks = ([] if retained is None else [retained]) + list(controls)
    chunks = [masks[i:i + MASKS_PER_PASS] for i in range(0, len(masks), MASKS_PER_PASS)]
    scopes = ("before",) if retained is None else SCOPES
    control_values = []
    values = nearest = None
    for p, chunk in enumerate(chunks or [[]]):
        references = _reference_sets(yt, chunk, classes)
        sims, top1 = _search(Qn, Rn, references, K, method=method, block_size=block_size,
                             random_state=random_state,
                             callback=_scaled(callback, p / max(len(chunks), 1),
                                              (p + 1) / max(len(chunks), 1)))
        names = {"before": None} | {f"mask{p * MASKS_PER_PASS + j}": j
                                    for j in range(len(chunk))}
        merged, near = _merge_scopes(yh, references, sims, top1, names, K)
        del sims, top1  # every set's top K (0.38 GB: 48 sets x 40k queries) let go now
        if p == 0:
            values = {"before": merged["before"]}
            nearest = {"before": near["before"]}
            if retained is not None:
                values["after"], nearest["after"] = merged["mask0"], near["mask0"]
        control_values += [merged[name] for name in names
                           if name != "before" and (retained is None or name != "mask0")]
    emit(callback, 0.92, "bootstrap intervals")
    table = _distance_table(values, yh, classes, scopes, ks, n_bootstrap=n_bootstrap,
                            confidence=confidence, random_state=random_state)
    control_tables = [_distance_table({"after": v}, yh, classes, ("after",), ks,
                                      n_bootstrap=0, confidence=confidence,
                                      random_state=random_state)
                      for v in control_values]
    per_example = _per_example(values, nearest, yh, scopes, train_ids, held_ids)
    emit(callback, 1.0, "done")
    params = {"ks": list(ks), "method": method, "n_bootstrap": n_bootstrap,
              "confidence": confidence, "random_state": random_state,
              "n_train": int(len(Rn)), "n_heldout": int(len(Qn)),
              "n_retained": None if retained is None else int(retained.sum())}
    return KNNResult(table=table, per_example=per_example, method=method, params=params,
                     controls=control_tables)


def _scaled(callback: ProgressCallback | None, low: float, high: float
            ) -> ProgressCallback | None:
    if callback is None:
        return None
    return lambda info: callback({**info, "fraction": low + (high - low) * info["fraction"]})


#: A reference set: (class, membership in each mask of the pass, training row positions).
_Reference = tuple[object, tuple[bool, ...], np.ndarray]


def _reference_sets(yt: np.ndarray, masks: list[np.ndarray],
                    classes: list) -> list[_Reference]:
    """Disjoint sets of training rows: one per class and membership pattern that has rows.

    Every query is searched against every set once; every scope (all rows, or one mask's
    rows) and relation (same or other class) is a merge of set results.
    """
    pattern = np.zeros(len(yt), dtype=np.int64)
    for j, mask in enumerate(masks):
        pattern |= mask.astype(np.int64) << j
    references = []
    for c in classes:
        in_class = yt == c
        for code in np.unique(pattern[in_class])[::-1]:  # retained rows first, as before
            rows = np.flatnonzero(in_class & (pattern == code))
            member = tuple(bool((int(code) >> j) & 1) for j in range(len(masks)))
            references.append((c, member, rows))
    return references


def _search(Qn: np.ndarray, Rn: np.ndarray, references: list[_Reference], K: int, *,
            method: str, block_size: int | None, random_state: int | None,
            callback: ProgressCallback | None
            ) -> tuple[list[np.ndarray], list[tuple[np.ndarray, np.ndarray]]]:
    """Top-K similarities of every query in every reference set, and each set's nearest row.

    Returns one ``(n_queries, min(K, set size))`` similarity array per set (descending) and
    one ``(similarity, training row position)`` pair of arrays of the nearest row per set.
    """
    nq = len(Qn)
    total = float(sum(len(r[2]) for r in references) * nq) or 1.0
    done = [0.0]
    block_rows = query_block_rows(max((len(r[2]) for r in references), default=1), block_size)

    def on_block(n_rows: int, n_reference: int) -> None:
        done[0] += n_rows * n_reference
        emit(callback, 0.9 * done[0] / total, "nearest-neighbour search")

    emit(callback, 0.0, "nearest-neighbour search")
    sims_per_set, top1 = [], []
    if isinstance(Rn, _UnitRowsThere):
        return _search_there(Qn, Rn, references, K, block_rows, on_block)
    if method != "approximate":
        # one reference set per task, side by side on the cores this process may use (each
        # product on one BLAS thread: the same sums whatever the core count), or one task per
        # set on a cluster's workers
        def search(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return exact_topk(Qn, Rn[rows], K, block_rows, nearest_only=True)

        def found_in(g: int, found: tuple[np.ndarray, np.ndarray]) -> None:
            rows = references[g][2]
            on_block(nq, len(rows))
            sims_per_set.append(found[0])
            top1.append((found[0][:, 0], rows[found[1][:, 0]]))

        map_folds(search, [rows for _c, _member, rows in references], on_done=found_in,
                  task_bytes=search_bytes(nq, Qn.shape[1], K, block_rows, max(
                      (len(rows) for _c, _member, rows in references), default=0)))
        return sims_per_set, top1
    for _c, _member, rows in references:
        sims, idx = approx_topk(Qn, Rn[rows], K, random_state)
        on_block(nq, len(rows))
        sims_per_set.append(sims)
        top1.append((sims[:, 0], rows[idx[:, 0]]))
    return sims_per_set, top1


class _UnitRows:
    """The unit-length training rows, made a reference set at a time (``Rn[rows]``) from Φ's
    rows ``train_rows``: rows are normalised one by one, so a set's rows are those rows of
    the whole normalised matrix, bit for bit, and the search holds the sets it searches
    (two side by side on two cores), not a normalised copy of every training row beside
    them (0.5 GB at 1M SNLI-like rows)."""

    def __init__(self, X: Any, rows: np.ndarray | None) -> None:
        self.X, self.rows = X, rows

    def __len__(self) -> int:
        return self.X.shape[0] if self.rows is None else len(self.rows)

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        return l2_normalize(self.X, rows=rows if self.rows is None else self.rows[rows])


class _UnitRowsThere:
    """The training rows of Φ left on the workers (``X``, a selection of them), to be made
    unit-length where they are, one reference set at a time (:func:`_search_there`): the
    driver never holds them."""

    def __init__(self, X: Any, folds: Any) -> None:
        self.X, self.folds = X, folds

    def __len__(self) -> int:
        return self.X.shape[0]


def _search_set(pieces: list[np.ndarray], Qn: np.ndarray, K: int, block_rows: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """On a worker: one reference set's rows of Φ (pieces of its partitions, in order) made
    unit-length and searched, as the driver would search ``Rn[rows]``."""
    rows = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
    return exact_topk(Qn, l2_normalize(rows), K, block_rows, nearest_only=True)


def _search_there(Qn: np.ndarray, Rn: _UnitRowsThere, references: list[_Reference], K: int,
                  block_rows: int, on_block: Callable[[int, int], None]
                  ) -> tuple[list[np.ndarray], list[tuple[np.ndarray, np.ndarray]]]:
    """:func:`_search` of training rows left on the workers: one task per reference set, placed
    by the scheduler (a set's rows lie in every partition: pinned to the worker holding most,
    every set went to one of two workers, 3.6 s, not 2.4), which receives them from their
    partitions and normalises them (rows are normalised one by one: a set's unit rows are
    those of the normalised matrix, bit for bit) and searches them as the driver would. A
    worker lost meanwhile has Φ built again (:meth:`PartitionedRows.restore_lost`)."""
    client, X = Rn.folds.client, Rn.X
    while True:
        queries = client.scatter(Qn, broadcast=True, hash=False)
        futures = []
        for _c, _member, rows in references:
            pieces, _holder = X.select(rows).pieces(0, len(rows))
            futures.append(client.submit(_search_set, pieces, queries, K, block_rows,
                                         pure=False))
            X.runner.release(pieces)  # the search task keeps what it needs
        Rn.folds.tasks += len(futures)
        try:
            found = []
            for g, future in enumerate(futures):
                found.append(future.result())
                on_block(len(Qn), len(references[g][2]))
            break
        except Exception as exc:  # noqa: BLE001 - re-raised unless rows of Φ were lost
            if not lost_data(exc) or not X.restore_lost():
                raise
        finally:
            client.cancel([*futures, queries])
    return ([sims for sims, _ in found],
            [(sims[:, 0], rows[idx[:, 0]])
             for (sims, idx), (_c, _m, rows) in zip(found, references, strict=True)])


def _merge_scopes(yh: np.ndarray, references: list[_Reference], sims: list[np.ndarray],
                  top1: list[tuple[np.ndarray, np.ndarray]], scopes: dict[str, int | None],
                  K: int) -> tuple[dict, dict]:
    """Per scope and relation, the top-K similarities of every query; its nearest same-class row.

    ``scopes`` maps a scope name to the position of its mask in the references' membership
    (None: every training row).

    Returns ``values[scope][relation]``: ``(n_queries, K)`` similarities, descending, -inf
    where unavailable; and ``nearest[scope]``: (similarity, training row position or -1) of
    the nearest same-class row of every query. Each (class, scope) is merged on a thread of
    its own on the cores the process may use: it writes only its class's rows of its scope's
    arrays, so the result is the same whatever the count (2.0 s of one thread at 100,000
    rows before, py-spy of the audit's main thread).
    """
    nq = len(yh)
    empty = np.full((nq, 0), -np.inf, dtype=np.float32)
    values = {s: {r: np.full((nq, K), -np.inf, dtype=np.float32) for r in RELATIONS}
              for s in scopes}
    nearest = {s: (np.full(nq, -np.inf, dtype=np.float32), np.full(nq, -1, dtype=np.int64))
               for s in scopes}

    def merge(c: Any, scope: str) -> None:
        """One class's queries in one scope: rows and arrays no other task writes."""
        q = np.flatnonzero(yh == c)
        j = scopes[scope]
        in_scope = [g for g, (_, member, _) in enumerate(references)
                    if j is None or member[j]]
        same = [g for g in in_scope if references[g][0] == c]
        other = [g for g in in_scope if references[g][0] != c]
        for relation, gs in (("same_class", same), ("other_class", other)):
            # each set's rows of these queries made as the merge takes them
            parts = (sims[g][q] for g in gs) if gs else iter([empty[q]])
            values[scope][relation][q] = _merge_topk(parts, K)
        best_sim, best_row = nearest[scope]
        for g in same:
            sim1, row1 = top1[g]
            better = sim1[q] > best_sim[q]
            best_sim[q[better]] = sim1[q][better]
            best_row[q[better]] = row1[q][better]

    tasks = [(c, scope) for c in pd.unique(yh.astype(object)) for scope in scopes]
    threads = min(available_cores(), len(tasks))
    if threads <= 1:
        for task in tasks:
            merge(*task)
    else:  # numpy's partitions and sorts let go of the GIL: the merges side by side
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="knn-merge") as pool:
            list(pool.map(lambda task: merge(*task), tasks))
    return values, nearest


def _distance_table(values: dict, yh: np.ndarray, classes: list, scopes: tuple[str, ...],
                    ks: tuple[int, ...], *, n_bootstrap: int, confidence: float,
                    random_state: int | None) -> pd.DataFrame:
    """The ``table`` of :class:`KNNResult`: mean summed top-k distance with bootstrap CI."""
    nq = len(yh)
    K = max(ks)
    # one column per (scope, relation, k): summed top-k distance, NaN when short
    columns, cells = [], []
    for scope in scopes:
        for relation in RELATIONS:
            dist = 1.0 - values[scope][relation].astype(np.float64)  # +inf where unavailable
            cums = np.cumsum(np.clip(dist, 0.0, None), axis=1)
            for k in ks:
                col = cums[:, k - 1] if k <= K else np.full(nq, np.inf)
                columns.append((scope, relation, k))
                cells.append(np.where(np.isfinite(col), col, np.nan))
    V = np.column_stack(cells)

    rng = np.random.default_rng(random_state)
    populations = [(str(c), np.flatnonzero(yh == c)) for c in classes
                   if np.any(yh == c)] + [("all", np.arange(nq))]
    records = []
    for name, q in populations:
        mean, low, high = _bootstrap_means(V[q], n_bootstrap, confidence, rng)
        n_valid = (~np.isnan(V[q])).sum(axis=0)
        for j, (scope, relation, k) in enumerate(columns):
            records.append({
                "scope": scope, "class": name, "relation": relation, "k": int(k),
                "n_queries": int(n_valid[j]), "n_short": int(len(q) - n_valid[j]),
                "mean_sum_distance": float(mean[j]), "mean_distance": float(mean[j] / k),
                "ci_low": float(low[j]), "ci_high": float(high[j]),
            })
    table = pd.DataFrame.from_records(records)
    order = {s: i for i, s in enumerate(SCOPES)}
    return table.sort_values(["scope", "class", "relation", "k"],
                             key=lambda s: s.map(order) if s.name == "scope" else s,
                             kind="stable").reset_index(drop=True)


def _per_example(values: dict, nearest: dict, yh: np.ndarray, scopes: tuple[str, ...],
                 train_ids: np.ndarray, held_ids: np.ndarray) -> pd.DataFrame:
    """The ``per_example`` frame of :class:`KNNResult`."""
    label_str = np.array([str(v) for v in yh], dtype=object)
    frames = []
    for scope in scopes:
        same_d = 1.0 - values[scope]["same_class"][:, 0].astype(np.float64)
        other_d = 1.0 - values[scope]["other_class"][:, 0].astype(np.float64)
        best_row = nearest[scope][1]
        frames.append(pd.DataFrame({
            "row_id": held_ids,
            "label": label_str,
            "scope": scope,
            "nearest_same_class": np.where(np.isfinite(same_d), np.clip(same_d, 0, 2), np.nan),
            "nearest_other_class": np.where(np.isfinite(other_d), np.clip(other_d, 0, 2),
                                            np.nan),
            "nearest_same_class_row_id": pd.array(
                [train_ids[r] if r >= 0 else None for r in best_row], dtype=object),
        }))
    return pd.concat(frames, ignore_index=True)


# --- registry entry -------------------------------------------------------------------


def random_control(X_train, y_train, X_heldout, y_heldout, retained_mask, *,
                   n_draws: int = 3, random_state: int | None = 0, **kwargs) -> pd.DataFrame:
    """KNN distances after removing random rows instead of AFLite's: the control.

    "After" is a subset of "before", so distances can only grow; the question is whether
    they grow more than when the same number of rows, with the same label counts, is removed
    at random. Each of ``n_draws`` label-matched random subsets of the training rows
    (:func:`aflite_core.splits.label_matched_subsets`) takes the place of the retained rows.

    Returns
    -------
    DataFrame
        The ``after`` rows of :func:`knn_distance_measures` per draw, averaged over the
        draws, with ``scope = "random"``, ``random_std`` (std over draws) and ``n_draws``.
    """
    draws = _control_draws(y_train, retained_mask, n_draws, random_state)
    result = knn_distance_measures(X_train, y_train, X_heldout, y_heldout,
                                   control_masks=draws, n_bootstrap=0,
                                   random_state=random_state, **kwargs)
    return _over_masks(result.controls, "random", "random_std", "n_draws")


def _control_draws(y_train, retained_mask, n_draws: int, random_state) -> list[np.ndarray]:
    return label_matched_subsets(np.asarray(y_train), np.asarray(retained_mask, dtype=bool),
                                 n_draws=n_draws, random_state=random_state)


def _over_masks(tables: list[pd.DataFrame], scope: str, std_name: str,
                count_name: str) -> pd.DataFrame:
    """Mean and std of ``mean_distance`` over the ``after`` tables of several masks."""
    stacked = pd.concat(tables, ignore_index=True)
    out = stacked.groupby(["class", "relation", "k"], sort=False)["mean_distance"].agg(
        ["mean", "std"]).reset_index().rename(columns={"mean": "mean_distance",
                                                        "std": std_name})
    out.insert(0, "scope", scope)
    out[count_name] = len(tables)
    return out


def seeds_spread(X_train, y_train, X_heldout, y_heldout, masks: list[np.ndarray]
                 ) -> pd.DataFrame:
    """The ``after`` distances under several AFLite seeds' retained masks: mean and std.

    Returns rows with ``scope = "after_seeds"``, ``mean_distance`` (mean over seeds),
    ``seeds_std`` and ``n_seeds``.
    """
    result = knn_distance_measures(X_train, y_train, X_heldout, y_heldout,
                                   control_masks=masks, n_bootstrap=0)
    return _over_masks(result.controls, "after_seeds", "seeds_std", "n_seeds")


def query_sample(held: np.ndarray, max_queries: int, random_state: int | None
                 ) -> np.ndarray:
    """The held-out rows the measure queries: all of them, or a seeded sample of
    ``max_queries`` (the other held-out rows stay out of the training rows)."""
    rows = np.flatnonzero(held)
    if len(rows) <= max_queries:
        return held
    rng = np.random.default_rng(random_state)
    sample = np.zeros_like(held)
    sample[rng.choice(rows, size=max_queries, replace=False)] = True
    return sample


def _knn(ctx: MeasureContext) -> MeasureResult:
    X, y, ids = ctx.X, ctx.y, ctx.row_ids
    held = heldout_mask(y, splits=ctx.splits, groups=ctx.groups, random_state=ctx.random_state)
    params = MEASURE.check_params(ctx.params, n_rows=len(y))
    max_queries = int(params["max_queries"])
    queries = query_sample(held, max_queries, ctx.random_state)
    train = ~held
    n_draws = int(params["n_random_draws"])
    n_seeds = int(params["aflite_seeds"])
    draws = _control_draws(y[train], ctx.keep[train], n_draws, ctx.random_state)
    seed_masks = []
    if n_seeds > 1 and ctx.refit is not None:
        ctx.progress(0.0, f"AFLite with {n_seeds - 1} more seeds")
        seed_masks = [ctx.refit(ctx.random_state + s)[train] for s in range(1, n_seeds)]
    result = knn_distance_measures(
        X, y[train], X, y[queries],
        train_rows=np.flatnonzero(train), heldout_rows=np.flatnonzero(queries),
        retained_mask=ctx.keep[train],
        control_masks=draws + [ctx.keep[train]] + seed_masks if seed_masks else draws,
        train_row_ids=ids[train], heldout_row_ids=ids[queries],
        ks=tuple(sorted(set(params["ks"]))), random_state=ctx.random_state,
        callback=ctx.callback(),
    )  # fmt: skip
    parts = [result.table, _over_masks(result.controls[:n_draws], "random", "random_std",
                                       "n_draws")]
    if seed_masks:
        parts.append(_over_masks(result.controls[n_draws:], "after_seeds", "seeds_std",
                                 "n_seeds"))
    table = pd.concat(parts, ignore_index=True)
    params = {**result.params, "n_heldout_total": int(held.sum()),
              "max_queries": max_queries, "queries_sampled": bool(queries.sum() < held.sum())}
    return MeasureResult(
        tables={"knn.parquet": table, "knn_examples.parquet": result.per_example},
        info={"params": params},
    )


def _knn_figures(run) -> list:
    """Mean cosine distance to the k nearest training rows, per relation and scope (all
    classes): before, after, and the random-removal control (dash-dot)."""
    import plotly.graph_objects as go  # lazy: +25 ms to import

    knn = run.read_parquet("knn.parquet")
    if knn is None or knn.empty:
        return []
    rows = knn if "class" not in knn.columns else knn[knn["class"].astype(str) == "all"]
    chart = go.Figure()
    relations = list(pd.unique(rows["relation"]))
    for (scope, relation), part in rows.groupby(["scope", "relation"], sort=False):
        part = part.sort_values("k")
        colour = PALETTE[relations.index(relation) % len(PALETTE)]
        chart.add_trace(go.Scatter(
            x=part["k"], y=part["mean_distance"], mode="lines+markers",
            name=f"{relation} · {scope}",
            line={"dash": {"after": "solid", "random": "dashdot"}.get(scope, "dot"),
                  "color": colour},
            marker={"color": colour}))
    ks = sorted(int(k) for k in pd.unique(rows["k"]))
    chart.update_layout(title="Mean cosine distance of held-out rows to their k nearest "
                        "training rows", xaxis_title="k (log scale)",
                        yaxis_title="mean distance")
    chart.update_xaxes(type="log", tickmode="array", tickvals=ks, ticktext=[str(k) for k in ks])
    return [chart]


def _knn_tables(run) -> dict[str, pd.DataFrame]:
    table = run.read_parquet("knn.parquet")
    if table is None or table.empty:
        return {}
    overall = table[table["class"].astype(str) == "all"] if "class" in table else table
    wide = overall.pivot_table(
        index=["relation", "k"], columns="scope", values="mean_distance", aggfunc="first"
    ).reset_index()
    wide.columns.name = None
    wide = wide[[c for c in ("relation", "k", "before", "after", "random", "after_seeds")
                 if c in wide]]
    if {"before", "after"} <= set(wide.columns):
        wide["change"] = wide["after"] - wide["before"]
    if {"before", "random"} <= set(wide.columns):
        # the control: same number of rows, same label counts, removed at random
        wide["change random"] = wide["random"] - wide["before"]
        wide["AFLite beyond random"] = wide["change"] - wide["change random"]
    return {
        "Mean cosine distance to the k nearest training rows (all classes), AFLite vs "
        "random removal": wide,
        "Per class, with 95% bootstrap intervals (random: mean and std over draws)": table,
    }


#: The measure's seconds up to 100,000 rows (besides the stage's fixed 0.1 s), at the sizes
#: measured on 2026-11-30's VM beside the map (``bench_pipeline.py --sizes
#: 10000,20000,50000``: 0.20-0.24, 0.20-0.46, 2.43 s; 4.19 s at 100k). The parabola before
#: (4.5 s at 100k) planned 1.1 s at 50k rows.
SMALL_SECONDS = ((10_000, 0.12), (20_000, 0.25), (50_000, 2.3), (100_000, 4.15))


MEASURE = Measure(
    name="knn",
    label="KNN distances (before vs after)",
    compute=_knn,
    files=("knn.parquet", "knn_examples.parquet"),
    order=20,
    # seconds per 100k rows (bench_pipeline.py): queries x training rows grow as n**2 up to
    # the query cap (MAX_QUERIES, reached near 100k rows), then as the training rows; 4.3-4.6 s
    # at 100k rows beside the map on two cores (2.25 s in turn; bench_cores.py, 2026-11-30;
    # 6.0 s before, on the previous VM: the ETA on one core at 100k was 1.69x; above,
    # 16.97 s at 1M and 33.36 s at 2M, 6.2-6.5 s at 300k, bench_pipeline.py / bench_cores.py)
    cost=lambda n: (along_points(SMALL_SECONDS, n) * 100_000 / max(n, 1) if n <= 100_000
                    else 1.55 + 2.6 * 100_000 / n),
    tables=_knn_tables,
    figures=_knn_figures,
    exports={"knn": "knn.parquet"},
    options=(Option("n_random_draws", "KNN random-removal draws", 3, minimum=1, maximum=10,
                    help="Random removals of as many rows, with the same label counts, as "
                         "AFLite removed: the control for distances that can only grow."),
             Option("aflite_seeds", "KNN: AFLite seeds (spread)", 1, minimum=1, maximum=10,
                    help="Rerun AFLite with this many seeds and add the mean 'after' "
                         "distance over them (after_seeds) with its spread."),
             Option("max_queries", "KNN: held-out rows queried", MAX_QUERIES, minimum=100,
                    maximum=1_000_000,
                    help="Above this many held-out rows, a seeded sample of them is "
                         "queried; the bootstrap intervals include the sampling error."),
             Option("ks", "KNN: neighbours k", KS, minimum=1, maximum=1_000,
                    help="The numbers of nearest training rows each held-out row's mean "
                         "distance is taken over (comma-separated on the command line)."),),
)
