"""AFLite's rounds over rows: the set S, one round's draw, scores and removals, the history.

:class:`FilterRun` is the state of one ``AFLite.fit``; it reads only a :class:`FitConfig`,
never the estimator's raw parameters.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from aflite_core.filter._backends import (
    RowBlocks,
    rows_per_block,
)
from aflite_core.filter._datamap import RoundDatamap
from aflite_core.filter._linear import (
    ScatterStats,
    covariance_factor,
    row_stats,
)
from aflite_core.filter._rounds import (
    RoundState,
    column_mean,
    round_train_size,
)

_COMPACT_BELOW = 0.8
MAX_MODEL_ELEMENTS = 1 << 25


@dataclass(frozen=True)
class FitConfig:
    """AFLite's parameters for one ``fit``, validated and resolved against the input size.

    ``AFLite.fit`` builds it once (``AFLite._fit_config``); the rounds read only this, never
    the estimator's raw parameters.

    Attributes
    ----------
    n_samples : int
        Rows of the input.
    target_size : int
        Rows to keep at least, ``1 <= target_size < n_samples``.
    n_partitions : int
        ``m``: partitions (linear models) per round.
    train_size : int or float
        ``t``: an int (training rows in every round, ``<= target_size``) or a float in
        ``(0, 1)``, the share of S at the start of each round.
    slice_size : int
        ``k``: rows removed per round at most (1 for ``strategy="greedy"``).
    tau : float
        Only rows with predictability ``>= tau`` are removed.
    strategy : str
        One of :data:`STRATEGIES`.
    backend : str
        One of :data:`BACKENDS`.
    scheduler : str, dask.distributed.Client or None
        The Dask scheduler as given (checked; None with the local backend).
    n_workers : int
        Local backend: threads over row blocks. Dask backend: workers of the local cluster
        started when there is neither a scheduler nor a default client.
    callback : callable or None
        Called after every round (see :class:`AFLite`).
    """

    n_samples: int
    target_size: int
    n_partitions: int
    train_size: int | float
    slice_size: int
    tau: float
    strategy: str
    backend: str
    scheduler: Any
    n_workers: int
    callback: Callable[[dict], Any] | None


@dataclass(frozen=True)
class _RoundResult:
    """What one round scored and removed.

    ``s_rows`` are the rows of S at the start of the round in round order (block by block,
    class-ordered within a block) and ``positions`` their working-copy positions per block;
    ``scores``, ``removed_s`` and ``datamap``'s arrays index ``s_rows``.
    """

    number: int
    s_rows: np.ndarray
    positions: list[np.ndarray]
    train_size: int
    scores: np.ndarray
    n_above_tau: int
    removed_s: np.ndarray
    datamap: RoundDatamap | None = None

    @property
    def size_before(self) -> int:
        return len(self.s_rows)

    @property
    def removed(self) -> int:
        return len(self.removed_s)

    @property
    def size_after(self) -> int:
        return self.size_before - self.removed


class FilterRun(RoundState):
    """The state of one ``fit``: the set S of rows, the scores so far and the history (the
    bookkeeping every filter shares is :class:`~aflite_core.filter._rounds.RoundState`'s).

    ``__init__`` prepares what needs no backend (column means, the seeded tie-break order,
    the row blocks); :meth:`run_rounds` then plays rounds on a backend until a stop rule
    holds. A round scores S and chooses the rows to remove (:meth:`_score_and_select`),
    removes them (:meth:`RoundState.remove`), prepares the next round
    (:meth:`_apply_removals`, :meth:`_draw_next`), records its history row and tells the
    callback.
    """

    def __init__(self, X: np.ndarray, codes: np.ndarray, n_classes: int, cfg: FitConfig,
                 rng: np.random.Generator, groups: np.ndarray | None = None) -> None:
        n, d = X.shape
        self.shift = column_mean(X)
        super().__init__(n, cfg, rng)
        self.groups = groups
        self.blocks = RowBlocks(codes, n_classes, rows_per_block(d, cfg.n_partitions, n_classes))

    def run_rounds(self, backend, started: float) -> None:
        """Play rounds until a stop rule holds (``stop_reason`` is then set)."""
        drawn = backend.submit(_draw_round, self.rng, self.blocks, self.alive, self.cfg,
                               self.groups, backend.packed_masks)
        stats = _scatter_stats(backend, self.shift.shape[0])
        # The covariance factor of S needs no labels and no partitions: with a pool, it is
        # computed while the round's class sums are.
        factor = backend.submit(covariance_factor, stats)
        round_no = 0
        while self.stop_reason is None:
            round_no += 1
            t_round = time.perf_counter()
            result = self._score_and_select(round_no, backend, drawn, factor)
            drawn = None  # its train masks are no longer needed
            self.remove(result.number, result.s_rows, result.scores, result.datamap,
                        result.removed_s)
            number, size_before, removed = result.number, result.size_before, result.removed
            n_above_tau = result.n_above_tau
            row = self.history_row(number, size_before, result.train_size, removed,
                                   result.scores, n_above_tau, 0.0)
            factor = self._apply_removals(backend, stats, result)
            # the round's per-row arrays (rows of S, positions, scores, data map: about 50
            # bytes a row) are recorded: not held beside the next round's draw
            del result
            drawn = self._draw_next(backend)
            seconds = time.perf_counter() - t_round
            row["seconds"] = seconds
            self.history.append(row)
            self.notify(number, size_before, removed, n_above_tau, seconds, started,
                        self.cfg.n_samples)

    def _score_and_select(self, round_no: int, backend, drawn, factor) -> _RoundResult:
        """Score S with the round's partitions and choose the rows to remove."""
        cfg = self.cfg
        s_rows, positions, t, scores, gold = _score_round(backend, self.blocks, drawn, factor,
                                                          self.shift, cfg, self.datamap.on)
        removed_s, n_above = self.choose(s_rows, scores)
        return _RoundResult(
            number=round_no,
            s_rows=s_rows,
            positions=positions,
            train_size=t,
            scores=scores,
            n_above_tau=n_above,
            removed_s=removed_s,  # positions in S, i.e. block order
            datamap=gold,
        )

    def _apply_removals(self, backend, stats: ScatterStats, result: _RoundResult):
        """Bring the statistics and working copies up to the new S.

        Returns the next round's covariance ``factor`` (a future when there is a pool), or
        None when the run stops after this round.
        """
        factor = None
        if self.stop_reason is None:  # the next round needs the statistics of S
            removed_x = backend.features(_positions_by_block(result.removed_s, result.positions))
            factor = backend.submit(_downdate_factor, stats, removed_x)
        if result.removed:
            _compact_blocks(backend, self.blocks, self.alive)
        return factor

    def _draw_next(self, backend):
        """The next round's partitions (a future when there is a pool), or None when the run
        stops after this round. They need only the new S (and the random stream, used in the
        same order): with a pool they are drawn, like the covariance factor, while this
        round's bookkeeping goes on."""
        if self.stop_reason is not None:
            return None
        return backend.submit(_draw_round, self.rng, self.blocks, self.alive, self.cfg,
                              self.groups, backend.packed_masks)


def _scatter_stats(backend, n_features: int) -> ScatterStats:
    """Label-free scatter statistics of S, summed group by group in a fixed order."""
    stats = ScatterStats.zeros(n_features)
    for part in backend.group_row_stats():
        stats.add(*part)
    return stats


def _partition_shape(cfg: FitConfig | Mapping[str, Any]) -> tuple[int, int | float]:
    """``(n_partitions, train_size)`` of the configuration a round is drawn with.

    Takes a :class:`FitConfig`, or the mapping ``{"m": n_partitions, "train": train_size}``
    that callers written before FitConfig pass.
    """
    if isinstance(cfg, Mapping):
        return cfg["m"], cfg["train"]
    return cfg.n_partitions, cfg.train_size


def _draw_round(rng: np.random.Generator, blocks: RowBlocks, alive: np.ndarray,
                cfg: FitConfig | Mapping[str, Any], groups: np.ndarray | None = None,
                packed: bool = False) -> dict:
    """The random partitions of a round over the alive rows, as per-block train masks.

    Each of the ``m`` partitions draws ``min(t, |S| - t)`` distinct positions of S uniformly
    (``rng.choice`` without replacement): the training rows, or the held-out rows when those
    are fewer. Returns the alive rows in round order (block by block, class-ordered within a
    block) as ``s_rows``, their working-copy ``positions`` per block, ``t``, the train masks
    ``train_w`` (one ``(m, rows)`` view per block's working copy; rows no longer alive are
    never training rows), the ``(m, C)`` training ``counts`` per class and, per row of S, the
    number of partitions holding it out (``held``).

    With ``groups`` (an int code per input row) each partition's training rows are whole
    groups, drawn in a seeded random order while their total stays within t (at least one
    group).

    With ``packed`` each block's masks are ``np.packbits(mask, axis=1)`` (uint8, 8 rows a
    byte), drawn a partition at a time: the same masks from the same random stream, without
    the ``(m, rows)`` bool array of them all (320 MB for 64 partitions of 5M rows) on the
    driver of a Dask backend, which sends them packed anyway.
    """
    m, train = _partition_shape(cfg)
    n_classes = len(blocks.classes) - 1
    positions = blocks.alive_positions(alive)
    s_rows = np.concatenate([r[p] for r, p in zip(blocks.rows, positions, strict=True)])
    n_s = len(s_rows)
    t = round_train_size(train, n_s)
    small = min(t, n_s - t)
    drawn_train = small == t
    # The masks of all working copies side by side: block b is columns offsets[b]:offsets[b+1].
    offsets = np.cumsum([0, *(len(r) for r in blocks.rows)]).astype(blocks.index_dtype)
    s_cols = np.concatenate([o + p for o, p in zip(offsets, positions, strict=False)])
    if packed:
        return _draw_packed(rng, blocks, offsets, s_rows, s_cols, positions, m, t, small,
                            None if groups is None else groups[s_rows])
    train_all = np.zeros((m, offsets[-1]), dtype=bool)
    if groups is not None:
        _draw_grouped(rng, train_all, s_cols, groups[s_rows], t)
    else:
        if not drawn_train:  # every partition trains on S but for its drawn held-out rows
            train_all[0, s_cols] = True
            train_all[1:] = train_all[0]  # a row copy: 4x cheaper than m scattered writes
        for j in range(m):
            idx = rng.choice(n_s, size=small, replace=False, shuffle=False)
            train_all[j, s_cols[idx]] = drawn_train
    train_w = [train_all[:, offsets[b] : offsets[b + 1]] for b in range(len(blocks))]
    # Training rows per class: sums over each block's class segments (a block has at most
    # _MAX_BLOCK_ROWS < 2**16 rows, so uint16 sums of the uint8 view are exact and fast).
    ones = train_all.view(np.uint8)
    counts = np.zeros((m, n_classes), dtype=np.int64)
    for tw, bounds in zip(train_w, blocks.bounds, strict=True):
        nonempty = np.flatnonzero(bounds[1:] > bounds[:-1])
        if len(nonempty):
            counts[:, nonempty] += np.add.reduceat(tw.view(np.uint8), bounds[nonempty], axis=1,
                                                   dtype=np.uint16)
    times_train = np.add.reduce(ones, axis=0, dtype=np.uint8 if m < 256 else np.int64)
    held = m - times_train[s_cols].astype(np.int32)
    return {"s_rows": s_rows, "positions": positions, "t": t, "train_w": train_w,
            "counts": counts, "held": held}


#: Bytes of bool masks :func:`_draw_packed` fills before it counts and packs them (a batch of
#: partitions: every partition at once up to 500k rows for m = 64; a few at 5M rows).
PACK_BATCH_BYTES = 32 << 20


def _draw_packed(rng: np.random.Generator, blocks: RowBlocks, offsets: np.ndarray,
                 s_rows: np.ndarray, s_cols: np.ndarray, positions: list[np.ndarray], m: int,
                 t: int, small: int, s_groups: np.ndarray | None) -> dict:
    """:func:`_draw_round` with ``packed``: the partitions' masks drawn into a batch of rows
    (the same random calls in the same order), then counted and packed block by block, a
    batch at a time (a block and a partition at a time, the Python loop was 2,000 steps a
    round at 60k rows: the Dask backend's draw took twice the local one's)."""
    n_classes = len(blocks.classes) - 1
    n_cols = int(offsets[-1])
    batch = int(min(m, max(1, PACK_BATCH_BYTES // max(n_cols, 1))))
    rows = np.zeros((batch, n_cols), dtype=bool)
    train_w = [np.zeros((m, (hi - lo + 7) // 8), dtype=np.uint8)
               for lo, hi in zip(offsets[:-1], offsets[1:], strict=True)]
    counts = np.zeros((m, n_classes), dtype=np.int64)
    times_train = np.zeros(n_cols, dtype=np.uint8 if m < 256 else np.int64)
    # every block's class segments with rows, side by side: they tile the columns, so one
    # reduceat counts a batch's training rows per segment (at most MAX_BLOCK_ROWS: uint16)
    seg_starts = np.concatenate([
        [0], *(lo + bounds[np.flatnonzero(bounds[1:] > bounds[:-1])]
               for lo, bounds in zip(offsets[:-1], blocks.bounds, strict=True))])[1:]
    seg_class = np.concatenate([
        [0], *(np.flatnonzero(bounds[1:] > bounds[:-1]) for bounds in blocks.bounds)])[1:]
    edges = offsets.tolist()

    def after_row(j: int) -> None:
        k = j % batch + 1
        if k < batch and j < m - 1:
            return
        j0, done = j + 1 - k, rows[:k]
        if len(seg_starts):
            per_seg = np.add.reduceat(done.view(np.uint8), seg_starts, axis=1, dtype=np.uint16)
            for c in range(n_classes):
                counts[j0 : j + 1, c] += per_seg[:, seg_class == c].sum(axis=1, dtype=np.int64)
        for b, out in enumerate(train_w):
            out[j0 : j + 1] = np.packbits(done[:, edges[b] : edges[b + 1]], axis=1)
        times_train[:] += np.add.reduce(done.view(np.uint8), axis=0, dtype=times_train.dtype)

    if s_groups is not None:
        _draw_grouped(rng, rows, s_cols, s_groups, t, after_row, m)
    else:
        drawn_train = small == t
        for j in range(m):
            row = rows[j % batch]
            row[:] = False
            if not drawn_train:  # every partition trains on S but for its drawn held-out rows
                row[s_cols] = True
            idx = rng.choice(len(s_rows), size=small, replace=False, shuffle=False)
            row[s_cols[idx]] = drawn_train
            after_row(j)
    held = m - times_train[s_cols].astype(np.int32)
    return {"s_rows": s_rows, "positions": positions, "t": t, "train_w": train_w,
            "counts": counts, "held": held}


def _draw_grouped(rng: np.random.Generator, train_all: np.ndarray, s_cols: np.ndarray,
                  s_groups: np.ndarray, t: int,
                  after_row: Callable[[int], None] | None = None, m: int = 0) -> None:
    """Fill each partition's training columns with whole groups of S (see _draw_round).

    The groups come in a seeded random order (as far as needed) and are taken while they fit
    in t; then, in the same order, the groups after the first one that did not fit and no
    larger than the room it left are taken while they fit, so one large group does not end the
    draw short of t (with a group of 14 % of the rows and t = 40 %, a partition stopped as low
    as 26 %).

    With ``after_row``, ``train_all`` is a batch of rows refilled for the ``m`` partitions
    (partition ``j`` in row ``j % len(train_all)``) and ``after_row(j)`` is called once it
    holds partition ``j``'s mask.
    """
    # the codes are dense (0 .. G-1 over the fit's rows): count them instead of sorting S
    sizes = np.bincount(s_groups)
    present = np.flatnonzero(sizes)  # S's groups, in code order
    n_groups = len(present)
    # the order is needed only as far as it fills t: draw that many groups (a tenth more, as
    # group sizes vary) without replacement, 4-5x cheaper than a permutation of every group;
    # when they fall short of t, the partition takes a permutation of all of them
    enough = min(n_groups, int(np.ceil(1.1 * t * n_groups / max(len(s_groups), 1))) + 32)
    # every working-copy column's group (a last, never chosen one for the columns outside S),
    # so a partition's row is one gather written in order, not a scatter over S's columns
    col_group = np.full(train_all.shape[1], len(sizes), dtype=np.intp)
    col_group[s_cols] = s_groups
    chosen = np.zeros(len(sizes) + 1, dtype=bool)
    batch = len(train_all)
    for j in range(train_all.shape[0] if after_row is None else m):
        order = present[rng.choice(n_groups, size=enough, replace=False)]
        total = np.cumsum(sizes[order])
        if enough < n_groups and total[-1] < t:
            order = present[rng.permutation(n_groups)]
            total = np.cumsum(sizes[order])
        taken = max(1, int(np.searchsorted(total, t, side="right")))
        chosen[:] = False
        chosen[order[:taken]] = True
        room = t - int(total[taken - 1])
        if room > 0:
            chosen[_fitting(order[taken:], sizes, room)] = True
        np.take(chosen, col_group, out=train_all[j if after_row is None else j % batch])
        if after_row is not None:
            after_row(j)


def _fitting(rest: np.ndarray, sizes: np.ndarray, room: int, chunk: int = 4096) -> np.ndarray:
    """The groups of ``rest``, in order, no larger than the room left, taken until one does
    not fit (read in chunks: the room is a few rows, so the first chunk usually ends it)."""
    out = []
    for lo in range(0, len(rest), chunk):
        part = rest[lo : lo + chunk]
        candidates = part[sizes[part] <= room]
        total = np.cumsum(sizes[candidates])
        k = int(np.searchsorted(total, room, side="right"))
        out.append(candidates[:k])
        if k < len(candidates) or (k and total[k - 1] == room):
            break
        room -= int(total[k - 1]) if k else 0
    return np.concatenate(out) if out else rest[:0]


def _score_round(backend, blocks: RowBlocks, drawn: dict, factor, shift, cfg: FitConfig,
                 datamap: bool = False):
    """One round's predictabilities from its partitions (see :func:`_draw_round`).

    ``factor`` is the covariance factor of S (see :func:`covariance_factor`); ``drawn`` and
    ``factor`` may be futures. Returns the alive rows in round order, their working-copy
    positions per block, the round's train size and their scores (NaN where a row was never
    held out). With ``datamap``, also the rows' data-map statistics of the round
    (:class:`RoundDatamap`), else None.
    """
    if hasattr(drawn, "result"):
        drawn = drawn.result()
    train_w, positions = drawn["train_w"], drawn["positions"]
    out_w = backend.predict(blocks.bounds, train_w, drawn["counts"], shift, factor, datamap)
    # the rows' results in round order, each block's freed once taken (the blocks' arrays,
    # a list of their pieces and the concatenation were three copies at once)
    if not datamap:
        out_w = [(correct_b,) for correct_b in out_w]
    correct, *sums = _in_round_order(out_w, positions)
    del out_w
    held = drawn["held"]
    with np.errstate(invalid="ignore", divide="ignore"):
        scores = np.where(held > 0, correct / np.maximum(held, 1), np.nan)
    del correct
    gold = RoundDatamap.from_sums(held, *sums) if datamap else None
    return drawn["s_rows"], positions, drawn["t"], scores, gold


def _in_round_order(out_w: list, positions: list[np.ndarray]) -> list[np.ndarray]:
    """``[np.concatenate([out_w[b][i][positions[b]] for b in blocks]) for i in fields]``:
    each block's arrays (``out_w[b]``, a tuple of per-row fields in working-copy order) taken
    into the round's order and dropped from ``out_w`` before the next block's."""
    n_s = sum(len(p) for p in positions)
    fields = [np.empty(n_s, dtype=np.result_type(*(o[i] for o in out_w)))
              for i in range(len(out_w[0]))]
    start = 0
    for b, p in enumerate(positions):
        for field, values in zip(fields, out_w[b], strict=True):
            field[start:start + len(p)] = values[p]
        out_w[b] = None
        start += len(p)
    return fields


def _downdate_factor(stats: ScatterStats, removed_x: np.ndarray) -> tuple:
    """Subtract the removed rows from the statistics of S (in place); the new factor."""
    stats.subtract(*row_stats(removed_x))
    return covariance_factor(stats)


def _positions_by_block(s_index: np.ndarray, positions: list[np.ndarray]) -> list[np.ndarray]:
    """Working-copy positions, per block, of the rows at sorted indices ``s_index`` of S."""
    edges = np.cumsum([0, *(len(p) for p in positions)])
    cuts = np.searchsorted(s_index, edges)
    return [pos[s_index[cuts[b] : cuts[b + 1]] - edges[b]] for b, pos in enumerate(positions)]


def _compact_blocks(backend, blocks: RowBlocks, alive: np.ndarray) -> None:
    """Compact the working copies of blocks with fewer than ``_COMPACT_BELOW`` rows alive."""
    keeps = {}
    for b, rows in enumerate(blocks.rows):
        keep = np.flatnonzero(alive[rows])
        if len(keep) < _COMPACT_BELOW * len(rows):
            keeps[b] = keep
            blocks.compact(b, keep)
    if keeps:
        backend.compact(keeps)
