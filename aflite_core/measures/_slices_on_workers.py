"""The slices' counts by map-reduce over row chunks whose cue features stay on the workers.

Locally the slices measure extracts the cue features of every row into one indicator matrix
(:class:`~aflite_core.measures._slices_counts.MatrixCounts`). On a Dask cluster, from
:data:`WORKER_MIN_ROWS` rows, :class:`ChunkedCounts` answers the same questions instead
(issue 27: the driver never holds every row's text or feature matrix):

* **extract** (one task per chunk of the included rows, the chunks of the cue measure's
  map-reduce, so each worker's annotation cache already has their tagging): the chunk's cue
  features (:func:`~aflite_core.cues.linguistic.extract_features`, ``min_count=1``) of its
  rows in the slices' scope, and their word counts; the result stays on the worker;
* **summary** (one task per chunk): per feature of the chunk, the rows of the whole chunk
  having it (for ``min_count``), its rows in scope and the sums of the ranking's weights over
  them; the driver merges the chunks' features: the words in order of first appearance over
  all rows (the order the local extraction gives), those present in fewer than ``min_count``
  rows dropped, the other families' fixed columns;
* **pairs**, **cluster words**, **window overlaps**, **stored rows**: one task per chunk
  reads the chunk's resident features (and the label and length columns the driver sends
  for the chunk's rows) and returns a small matrix of counts the driver sums, or the chunk's
  bits of the stored slices' rows.

Every count is an integer, so the table is the local one bit for bit
(``tests/measures/test_slices_on_workers.py``). The driver holds the per-row vectors (removed, label
codes, word counts, cluster codes, the ranking's weights) and the label and length columns,
never a list of every row's text: each chunk's texts are read from the frame when its task is
sent. A worker lost with a chunk's features: Dask extracts them again from the task's own
texts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from aflite_core.cues import FAMILIES, extract_with_annotations
from aflite_core.measures._slices_counts import SliceColumns, SliceSpec
from aflite_core.measures._slices_features import (
    SliceFeatures,
    cluster_names,
    cluster_word_counts,
    cue_descriptions,
    word_counts,
)

__all__ = ["WORKER_MIN_ROWS", "ChunkedCounts", "chunk_bounds"]

#: Rows in the slices' scope from which, on a cluster, their features stay on the workers
#: (below, the matrix of every row is small and one extraction on the driver is quicker).
WORKER_MIN_ROWS = 250_001


@dataclass(frozen=True)
class ExtractOptions:
    """How every chunk's cue features are extracted (the slices measure's options)."""

    features: tuple[str, ...]
    text: str


@dataclass
class _ChunkFeatures:
    """What stays on a worker: one chunk's cue features of its rows in scope."""

    X: sp.csc_matrix          # (rows in scope, the chunk's features) int8
    feature_type: np.ndarray
    feature: np.ndarray
    present: np.ndarray       # rows of the whole chunk having each feature
    methods: dict[str, str]
    unavailable: dict[str, str]
    text: str
    lengths: dict[str, np.ndarray]  # side -> word counts of the rows in scope


@dataclass
class _Summary:
    """What comes back of a chunk first: its features and their counts."""

    feature_type: np.ndarray
    feature: np.ndarray
    present: np.ndarray
    size: np.ndarray          # rows in scope having each feature
    sums: np.ndarray          # (features, 3): the weights summed over them
    methods: dict[str, str]
    unavailable: dict[str, str]
    text: str
    lengths: dict[str, np.ndarray]


def _extract(hypotheses: list[str], premises: list[str] | None, scope: np.ndarray,
             options: ExtractOptions) -> _ChunkFeatures:
    """A chunk's features (runs on a worker; its result stays there)."""
    matrix = extract_with_annotations(
        hypotheses, premises, features=options.features, text=options.text, min_count=1,
        lemma=False, sentiment_lexicon="opinion", cache=True, cache_dir=None, n_jobs=1,
        on_missing="report")[0]
    present = np.asarray(matrix.X.getnnz(axis=0), dtype=np.int64)
    lengths = {"hypothesis": word_counts([hypotheses[i] for i in scope])}
    if premises is not None:
        lengths["premise"] = word_counts([premises[i] for i in scope])
    return _ChunkFeatures(sp.csc_matrix(matrix.X[scope], dtype=np.int8),
                          np.asarray(matrix.feature_type, dtype=object),
                          np.asarray(matrix.feature, dtype=object), present,
                          dict(matrix.methods), dict(matrix.unavailable), matrix.text, lengths)


def _summarise(chunk: _ChunkFeatures, weights: np.ndarray) -> _Summary:
    """A chunk's features and their counts (runs on a worker)."""
    Xc = sp.csc_matrix(chunk.X, dtype=np.float64)
    return _Summary(chunk.feature_type, chunk.feature, chunk.present,
                    np.asarray(Xc.sum(axis=0), dtype=np.float64).ravel(),
                    np.asarray(Xc.T @ weights, dtype=np.float64), chunk.methods,
                    chunk.unavailable, chunk.text, chunk.lengths)


def _columns(chunk: _ChunkFeatures, local: np.ndarray, extra: sp.csr_matrix | None,
             from_extra: np.ndarray, dtype=np.float64) -> np.ndarray:
    """Dense ``(rows, len(local))`` (a few hundred columns at most): column ``i`` is the
    chunk's feature ``local[i]`` (none when -1), or, where ``from_extra[i] >= 0``, that
    column of ``extra`` (the label and length columns the driver sent)."""
    S = np.zeros((chunk.X.shape[0], len(local)), dtype=dtype)
    mine = np.flatnonzero(local >= 0)
    if len(mine):
        S[:, mine] = chunk.X[:, local[mine]].toarray()
    theirs = np.flatnonzero(from_extra >= 0)
    if len(theirs) and extra is not None:
        S[:, theirs] = extra[:, from_extra[theirs]].toarray()
    return S


def _pair_counts(chunk: _ChunkFeatures, local: np.ndarray, extra: sp.csr_matrix | None,
                 from_extra: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``[S'S, S'diag(w_0)S, S'diag(w_1)S, S'diag(w_2)S]`` of the chunk (integers: exact)."""
    S = _columns(chunk, local, extra, from_extra)
    return np.stack([S.T @ S] + [S.T @ (S * weights[:, [c]]) for c in range(weights.shape[1])])


def _window_matrix(chunk: _ChunkFeatures, local: np.ndarray, extra: sp.csr_matrix | None,
                   from_extra: np.ndarray, specs: list[tuple[str, int, int]],
                   clusters: np.ndarray | None) -> np.ndarray:
    """Dense bool ``(rows, len(specs))``: each slice's rows of the chunk. ``specs`` name
    columns of the gathered ones (``local``/``from_extra``), or a cluster code."""
    S = _columns(chunk, local, extra, from_extra, dtype=bool)
    W = np.zeros((chunk.X.shape[0], len(specs)), dtype=bool)
    for s, (kind, a, b) in enumerate(specs):
        if kind == "cluster":
            W[:, s] = clusters == a
        else:
            W[:, s] = S[:, a] if b < 0 else S[:, a] & S[:, b]
    return W


def _overlaps(chunk: _ChunkFeatures, *args) -> np.ndarray:
    """Rows each two window slices share in the chunk (int64)."""
    W = _window_matrix(chunk, *args).astype(np.float32)  # counts < 2**24: exact
    return np.rint(W.T @ W).astype(np.int64)


def _member_bits(chunk: _ChunkFeatures, *args) -> np.ndarray:
    """The chunk's rows of each slice as bits (``(ceil(rows / 8), slices)`` uint8)."""
    return np.packbits(_window_matrix(chunk, *args), axis=0, bitorder="little")


def _cluster_words(chunk: _ChunkFeatures, local: np.ndarray, extra: sp.csr_matrix | None,
                   from_extra: np.ndarray, codes: np.ndarray, k: int) -> np.ndarray:
    """``(k, len(local))`` rows of each cluster having each word, in the chunk (a sparse
    product: the words are thousands of columns, never made dense)."""
    counts = np.zeros((k, len(local)))
    mine = np.flatnonzero(local >= 0)
    if len(mine):
        counts[:, mine] = cluster_word_counts(codes, k, chunk.X[:, local[mine]])
    return counts


def chunk_bounds(n_rows: int, chunk_rows: int) -> list[tuple[int, int]]:
    """``[(lo, hi), ...]``: the included rows cut into chunks of ``chunk_rows``."""
    return [(lo, min(lo + chunk_rows, n_rows)) for lo in range(0, n_rows, chunk_rows)]


class ChunkedCounts:
    """The slices' counts (:class:`~aflite_core.measures._slices_counts.SliceCounts`) of row
    chunks whose cue features are extracted on a Dask cluster's workers and stay there.

    Parameters
    ----------
    client : dask.distributed.Client
    texts : iterable of (list of str, list of str or None)
        Each chunk's hypotheses and premises (all its included rows), in order; read one at a
        time as its task is sent.
    bounds : list of (int, int)
        The chunks' rows among the included rows (:func:`chunk_bounds`).
    scope : np.ndarray of int
        The rows the slices are made of (sorted positions among the included rows).
    weights : np.ndarray
        ``(len(scope), 3)`` the ranking's weights (removed, two hashes), one row per row in
        scope (:func:`~aflite_core.measures.slices.slice_weights`).
    options : ExtractOptions
    min_count : int
        Words present in fewer of all included rows are dropped (``extract_features``'
        ``min_count``).
    progress : callable, optional
        ``progress(fraction, message)`` as chunks are extracted.
    """

    def __init__(self, client: Any, texts: Iterator[tuple[list[str], list[str] | None]],
                 bounds: list[tuple[int, int]], scope: np.ndarray, weights: np.ndarray,
                 options: ExtractOptions, *, min_count: int, progress=None) -> None:
        from distributed import as_completed  # lazy: +474 ms to import

        self.client = client
        self.tasks = 0
        scope = np.asarray(scope, dtype=np.int64)
        self.n_rows = len(scope)
        self._rows = []  # each chunk's rows in scope: [a, b) of scope
        self._features = []
        summaries = []
        for (lo, hi), (hyps, prems) in zip(bounds, texts, strict=True):
            a, b = np.searchsorted(scope, [lo, hi])
            self._rows.append((int(a), int(b)))
            future = client.submit(_extract, hyps, prems, scope[a:b] - lo, options,
                                   pure=False)
            self._features.append(future)
            summaries.append(client.submit(_summarise, future, weights[a:b], pure=False))
        self.tasks += 2 * len(bounds)
        for done, _ in enumerate(as_completed(summaries), start=1):
            if progress is not None:
                progress(done / len(summaries), f"cue features: chunk {done} of "
                                                f"{len(summaries)} (on the workers)")
        self._merge(client.gather(summaries), min_count)
        self._extra: list[sp.csr_matrix | None] = [None] * len(self._rows)
        self.extra_names = SliceColumns(*(np.empty(0, dtype=object),) * 3)
        self.cluster_columns: SliceColumns | None = None
        self._cluster_codes: np.ndarray | None = None

    # ---------------------------------------------------------------- the merged features

    def _merge(self, parts: list[_Summary], min_count: int) -> None:
        from aflite_core.cues import check_same_extraction  # lazy: +93 ms to import

        check_same_extraction(parts)
        first = parts[0]
        words: dict[str, int] = {}
        word_at = []  # per chunk: the number of each of its words, first met first
        for part in parts:  # first appearance over all rows, chunk after chunk
            is_word = part.feature_type == "word"
            word_at.append(np.fromiter((words.setdefault(v, len(words))
                                        for v in part.feature[is_word]),
                                       dtype=np.int64, count=int(is_word.sum())))
        present = np.zeros(len(words), dtype=np.int64)
        for part, at in zip(parts, word_at, strict=True):
            present[at] += part.present[part.feature_type == "word"]
        kept_words = np.flatnonzero(present >= min_count)
        word_column = np.full(len(words), -1, dtype=np.int64)
        families, values = [], []
        for family in FAMILIES:  # the local matrix's column order: family after family
            if family == "word":
                word_column[kept_words] = len(values) + np.arange(len(kept_words))
                names = np.asarray(list(words), dtype=object)[kept_words]
            else:
                names = next((p.feature[p.feature_type == family] for p in parts
                              if (p.feature_type == family).any()), np.empty(0, dtype=object))
            families.extend([family] * len(names))
            values.extend(names)
        family = np.asarray(families, dtype=object)
        value = np.asarray(values, dtype=object)
        self.cue_names = SliceColumns(family, value, cue_descriptions(family, value))
        self.n_linguistic = len(value)
        self.size = np.zeros(len(value), dtype=np.float64)
        self.sums = np.zeros((len(value), first.sums.shape[1]), dtype=np.float64)
        self._maps = []  # per chunk: the merged column of each of its columns (-1: dropped)
        other = {(f, v): i for i, (f, v) in enumerate(zip(family, value, strict=True))
                 if f != "word"}
        for part, at in zip(parts, word_at, strict=True):
            is_word = part.feature_type == "word"
            column = np.full(len(part.feature), -1, dtype=np.int64)
            column[is_word] = word_column[at]
            for i in np.flatnonzero(~is_word):
                column[i] = other[(part.feature_type[i], part.feature[i])]
            ok = column >= 0
            self.size[column[ok]] += part.size[ok]
            self.sums[column[ok]] += part.sums[ok]
            self._maps.append(column)
        self.methods = dict(first.methods)
        self.unavailable = dict(first.unavailable)
        self.lengths = {side: np.concatenate([p.lengths[side] for p in parts])
                        for side in first.lengths}

    def add_columns(self, parts: list[SliceFeatures], clusters: np.ndarray | None = None,
                    k: int = 0) -> None:
        """The columns made on the driver (label, length buckets and cuts: after the
        linguistic cues, as locally; ``parts`` is emptied as each is cut into the chunks'
        rows) and the cluster of Φ of each row in scope (``k`` clusters, named by their
        words here)."""
        pieces: list[list[sp.csr_matrix]] = [[] for _ in self._rows]
        family, value, description = [], [], []
        while parts:
            part = parts.pop(0)
            if part.X.shape[0] != self.n_rows:
                raise ValueError(f"columns: expected {self.n_rows} rows, got "
                                 f"{part.X.shape[0]}")
            if not part.X.shape[1]:
                continue
            X = sp.csr_matrix(part.X, dtype=np.int8)
            for chunk, (a, b) in zip(pieces, self._rows, strict=True):
                chunk.append(X[a:b])
            family.append(part.family)
            value.append(part.value)
            description.append(part.description)
            del part, X
        self._extra = [sp.hstack(chunk, format="csr", dtype=np.int8) if chunk else None
                       for chunk in pieces]
        self.extra_names = SliceColumns(
            *(np.concatenate(names).astype(object) if names else np.empty(0, dtype=object)
              for names in (family, value, description)))
        self.k = int(k) if clusters is not None else 0
        if clusters is not None:
            self._cluster_codes = np.asarray(clusters, dtype=np.int64)
            values = np.asarray([str(c) for c in range(k)], dtype=object)
            self.cluster_columns = SliceColumns(np.full(k, "cluster", dtype=object), values,
                                                np.asarray(self.cluster_names(k),
                                                           dtype=object))

    # ---------------------------------------------------------------- the passes

    def _per_chunk(self, task, columns: np.ndarray, *args_of, total: bool = False):
        """``task(chunk, local, extra, from_extra, *args)`` on every chunk, results in order
        (with ``total``, their sum, added as each arrives: one chunk's counts at a time
        here): ``columns`` are merged cue columns, found in each chunk or among the
        driver's."""
        columns = np.asarray(columns, dtype=np.int64)
        from_extra = np.where(columns >= self.n_linguistic, columns - self.n_linguistic, -1)
        futures = []
        for c, (future, (a, b)) in enumerate(zip(self._features, self._rows, strict=True)):
            local = _local_columns(self._maps[c], columns)
            extra = self._extra[c] if (from_extra >= 0).any() else None
            args = [arg(c, a, b) if callable(arg) else arg for arg in args_of]
            futures.append(self.client.submit(task, future, local, extra, from_extra, *args,
                                              pure=False))
        self.tasks += len(futures)
        if not total:
            return self.client.gather(futures)
        summed = None
        for future in futures:  # integers: the same sum in any order; this one is fixed
            part = future.result()
            future.release()
            summed = part if summed is None else summed + part
        return summed

    def columns(self, kind: str) -> SliceColumns | None:
        """See :class:`~aflite_core.measures._slices_counts.SliceCounts`."""
        if kind == "cluster":
            return self.cluster_columns
        return SliceColumns(*(np.concatenate([mine, theirs]).astype(object)
                              for mine, theirs in zip(self.cue_names, self.extra_names,
                                                      strict=True)))

    def column_sums(self, kind: str, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """See :class:`~aflite_core.measures._slices_counts.SliceCounts`: the linguistic
        cues' counts came with the chunks' summaries (the same weights); the driver's
        columns and the clusters are summed chunk by chunk here (integers: exact)."""
        if kind == "cluster":
            codes = self._cluster_codes
            return (np.bincount(codes, minlength=self.k).astype(np.float64),
                    np.column_stack([np.bincount(codes, weights=weights[:, c],
                                                 minlength=self.k)
                                     for c in range(weights.shape[1])]))
        n_extra = len(self.extra_names.value)
        size = np.zeros(n_extra, dtype=np.float64)
        sums = np.zeros((n_extra, weights.shape[1]), dtype=np.float64)
        for piece, (a, b) in zip(self._extra, self._rows, strict=True):
            if piece is not None:
                Xc = sp.csc_matrix(piece, dtype=np.float64)
                size += np.asarray(Xc.sum(axis=0)).ravel()
                sums += np.asarray(Xc.T @ weights[a:b])
        return np.concatenate([self.size, size]), np.concatenate([self.sums, sums])

    def cooccurrence(self, top: np.ndarray, weights: np.ndarray
                     ) -> tuple[np.ndarray, list[np.ndarray]]:
        """See :class:`~aflite_core.measures._slices_counts.SliceCounts`."""
        total = self._per_chunk(_pair_counts, top, lambda c, a, b: weights[a:b], total=True)
        return total[0], [total[1 + c] for c in range(weights.shape[1])]

    def window(self, specs: Sequence[SliceSpec]) -> ChunkedWindow:
        """See :class:`~aflite_core.measures._slices_counts.SliceCounts`."""
        return ChunkedWindow(self, list(specs))

    def cluster_names(self, k: int) -> list[str]:
        """The clusters named by their words (as :func:`cluster_features` names them)."""
        word_cols = np.flatnonzero(self.cue_names.family == "word")
        codes = self._cluster_codes
        counts = self._per_chunk(_cluster_words, word_cols, lambda c, a, b: codes[a:b], k,
                                 total=True)
        return cluster_names(counts, np.bincount(codes, minlength=k), self.size[word_cols],
                             self.cue_names.value[word_cols])

    def release(self) -> None:
        """Let the workers drop the chunks' features."""
        for future in self._features:
            future.release()
        self._features = []


class ChunkedWindow:
    """The window of :meth:`ChunkedCounts.window`: overlaps counted on the workers on first
    use, stored slices' rows from their bits."""

    def __init__(self, counts: ChunkedCounts, specs: list[SliceSpec]) -> None:
        self.counts = counts
        self.specs = specs
        self._inter: np.ndarray | None = None

    def _pass(self, task, specs: list[SliceSpec], *, total: bool = False):
        cues = sorted({s.col_a for s in specs if s.kind != "cluster"}
                      | {s.col_b for s in specs if s.col_b >= 0})
        at = {c: i for i, c in enumerate(cues)}
        local_specs = [(s.kind, s.col_a if s.kind == "cluster" else at[s.col_a],
                        at[s.col_b] if s.col_b >= 0 else -1) for s in specs]
        codes = self.counts._cluster_codes
        return self.counts._per_chunk(
            task, np.asarray(cues, dtype=np.int64), local_specs,
            lambda c, a, b: None if codes is None else codes[a:b], total=total)

    def overlap(self, i: int, j: int) -> int:
        """See :class:`~aflite_core.measures._slices_counts.SliceWindow`."""
        if self._inter is None:
            self._inter = self._pass(_overlaps, self.specs, total=True)
        return int(self._inter[i, j])

    def rows(self, positions: Sequence[int]) -> Iterator[np.ndarray]:
        """See :class:`~aflite_core.measures._slices_counts.SliceWindow`: one pass for all
        of them, then each slice's rows from its bits, one at a time."""
        positions = list(positions)
        if not positions:
            return iter(())
        bits = self._pass(_member_bits, [self.specs[p] for p in positions])
        counts = [b - a for a, b in self.counts._rows]

        def each() -> Iterator[np.ndarray]:
            for s in range(len(positions)):
                member = np.concatenate([np.unpackbits(part[:, s], count=n, bitorder="little")
                                         for part, n in zip(bits, counts, strict=True)])
                yield np.flatnonzero(member).astype(np.int64)

        return each()


def _local_columns(column_map: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For each merged column wanted, the chunk's column holding it (-1: none)."""
    order = np.argsort(column_map, kind="stable")
    ranked = column_map[order]
    at = np.searchsorted(ranked, wanted)
    found = (at < len(ranked)) & (ranked[np.minimum(at, len(ranked) - 1)] == wanted)
    return np.where(found & (wanted >= 0), order[np.minimum(at, len(ranked) - 1)], -1)
