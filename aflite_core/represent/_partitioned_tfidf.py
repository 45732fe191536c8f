"""The TF-IDF of :func:`~aflite_core.represent._builders.tfidf_blocks`, by partition.

On a cluster (:mod:`aflite_core.represent._partitions`) each partition's texts stay on the
worker that holds them and the matrix is built there, by map-reduce, the same matrix bit for
bit as :func:`~aflite_core.represent._term_counts.tfidf_matrix` builds from all rows at once:

1. **scan** (per partition): each distinct text tokenised once, its words numbered by first
   appearance *within the partition*; back to the driver go the partition's words in that
   order and each word's document and term frequency (integers).
2. **merge** (driver): the global first-appearance numbering (partitions in row order, each
   adding the words it is the first to hold, in its own order), the document frequencies, the
   vocabulary scikit-learn keeps (``min_df``, ``max_features``: the same ``argsort`` on the
   same array) and the IDF (scikit-learn's formula in float32).
3. **build** (per partition): each row's entries sorted by the *global* first-appearance
   number (a row's entries keep that order in scikit-learn's matrix, and the l2 norm and every
   product sum them in it), renumbered to the kept columns, then sublinear TF x IDF and the
   row's l2 normalisation, all row by row.

Term frequencies are summed as integers; scikit-learn sums them in float32, which is exact
while a word occurs fewer than 2^24 (16.7M) times; beyond, only the order among the most
frequent words could differ, never which ``max_features`` words are kept unless the cut falls
among such words. ``tests/represent/test_partitioned_representation.py`` compares the matrices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from aflite_core.represent._term_counts import distinct_word_ids, per_text_counts, word_order

__all__ = ["BlockScan", "BlockVocabulary", "TextPartition", "build_partition", "merge_scans",
           "scan_partition", "summary_of"]


@dataclass(eq=False)
class TextPartition:
    """One partition's texts (rows ``start:start + len(hypotheses)`` of the input).

    Attributes
    ----------
    start : int
        Its first row's position in the input.
    hypotheses : list of str
    premises : list of str or None
    """

    start: int
    hypotheses: list
    premises: list | None


@dataclass(eq=False)
class BlockScan:
    """One text block (hypotheses or premises) of one partition, tokenised.

    Attributes
    ----------
    codes : numpy.ndarray
        Each row's distinct text (``pd.factorize`` order).
    flat, lengths : numpy.ndarray
        The distinct texts' words by local first-appearance number, and their counts.
    words : list of str
        The local words, by local number.
    """

    codes: np.ndarray
    flat: np.ndarray
    lengths: np.ndarray
    words: list

    def frequencies(self) -> tuple[np.ndarray, np.ndarray]:
        """Each local word's document and term frequency over the partition's rows (int64)."""
        n_distinct, n_words = len(self.lengths), len(self.words)
        if n_words == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        rows = np.repeat(np.arange(n_distinct, dtype=np.int64), self.lengths)
        per_text = sp.csr_matrix((np.ones(len(self.flat), dtype=np.int64), (rows, self.flat)),
                                 shape=(n_distinct, n_words))
        per_text.sum_duplicates()
        repeats = np.bincount(self.codes, minlength=n_distinct).astype(np.int64)
        df = np.asarray(per_text.astype(bool).astype(np.int64).T @ repeats).ravel()
        tf = np.asarray(per_text.T @ repeats).ravel()
        return df.astype(np.int64), tf.astype(np.int64)


def _scan_block(texts: list) -> BlockScan:
    try:
        codes, _distinct, flat, lengths, words = distinct_word_ids(texts)
    except ValueError:  # no word in this partition's texts
        codes, distinct = pd.factorize(np.asarray(texts, dtype=object), use_na_sentinel=False)
        flat, lengths, words = (np.zeros(0, dtype=np.int32),
                                np.zeros(len(distinct), dtype=np.int64), [])
    return BlockScan(codes=np.asarray(codes, dtype=np.int64), flat=flat, lengths=lengths,
                     words=words)


def scan_partition(part: TextPartition) -> list[BlockScan]:
    """Step 1 on a worker: the partition's blocks tokenised (kept there for step 3)."""
    blocks = [part.hypotheses] if part.premises is None else [part.hypotheses, part.premises]
    return [_scan_block(list(texts)) for texts in blocks]


def summary_of(scans: list[BlockScan]) -> list[tuple[list, np.ndarray, np.ndarray, int]]:
    """What step 1 sends back: per block, the local words, their document and term
    frequencies, and the partition's rows."""
    return [(scan.words, *scan.frequencies(), len(scan.codes)) for scan in scans]


@dataclass(eq=False)
class BlockVocabulary:
    """The merged vocabulary of one block (step 2).

    Attributes
    ----------
    local_to_global : list of numpy.ndarray
        Per partition, each local word's global first-appearance number.
    column_of : numpy.ndarray
        Each global word's column in the block's matrix, or -1 when not kept.
    idf : numpy.ndarray
        float32 IDF of each column.
    """

    local_to_global: list
    column_of: np.ndarray
    idf: np.ndarray

    @property
    def n_columns(self) -> int:
        return len(self.idf)


def _merge_block(summaries: list, n_rows: int, min_df: int, max_features: int | None
                 ) -> BlockVocabulary | None:
    """One block's vocabulary, as ``tfidf_matrix(texts, min_df, max_features)`` keeps it; None
    when it would raise (no word, or none left after pruning)."""
    vocabulary: dict[str, int] = {}
    setdefault = vocabulary.setdefault
    local_to_global = []
    for words, _df, _tf, _rows in summaries:
        local_to_global.append(np.fromiter((setdefault(w, len(vocabulary)) for w in words),
                                           dtype=np.int64, count=len(words)))
    n_words = len(vocabulary)
    if n_words == 0:
        return None
    dfs = np.zeros(n_words, dtype=np.int64)
    tfs = np.zeros(n_words, dtype=np.int64)
    for ids, (_words, df, tf, _rows) in zip(local_to_global, summaries, strict=True):
        np.add.at(dfs, ids, df)
        np.add.at(tfs, ids, tf)
    _order, rank = word_order(list(vocabulary), np.int64)  # each word's sorted column
    dfs_sorted = np.empty(n_words, dtype=np.int64)
    dfs_sorted[rank] = dfs
    tfs_sorted = np.empty(n_words, dtype=np.float32)
    tfs_sorted[rank] = tfs.astype(np.float32)
    # scikit-learn's _limit_features, as term_counts.word_counts runs it
    mask = dfs_sorted >= min_df
    if max_features is not None and mask.sum() > max_features:
        keep = (-tfs_sorted[mask]).argsort()[:max_features]
        limited = np.zeros(n_words, dtype=bool)
        limited[np.where(mask)[0][keep]] = True
        mask = limited
    kept = np.where(mask)[0]
    if len(kept) == 0:
        return None
    column_of_sorted = np.full(n_words, -1, dtype=np.int64)
    column_of_sorted[kept] = np.arange(len(kept))
    # TfidfTransformer(sublinear_tf=True).fit on float32 counts
    df = dfs_sorted[kept].astype(np.float32)
    df += 1.0
    idf = np.full_like(df, fill_value=n_rows + 1, dtype=np.float32)
    idf /= df
    np.log(idf, out=idf)
    idf += 1.0
    return BlockVocabulary(local_to_global=local_to_global,
                           column_of=column_of_sorted[rank], idf=idf)


def merge_scans(summaries: list[list], n_rows: int, *, min_df: int,
                max_features: int | None) -> list[BlockVocabulary | None]:
    """Step 2 on the driver: each block's vocabulary from every partition's summary (in
    partition order), with ``_vectorize``'s fallback to ``min_df=1`` when nothing is left.

    Returns
    -------
    list
        Per block, its :class:`BlockVocabulary`, or None when the block has no usable word.
    """
    n_blocks = len(summaries[0])
    merged = []
    for b in range(n_blocks):
        block = [summary[b] for summary in summaries]
        vocabulary = None
        for df in dict.fromkeys((min_df, 1)):
            vocabulary = _merge_block(block, n_rows, df, max_features)
            if vocabulary is not None:
                break
        merged.append(vocabulary)
    return merged


def _build_block(scan: BlockScan, local_to_global: np.ndarray, column_of: np.ndarray,
                 idf: np.ndarray) -> sp.csr_matrix:
    """One block's TF-IDF rows of a partition (step 3)."""
    from sklearn.preprocessing import normalize  # lazy: +1236 ms to import

    n_rows = len(scan.codes)
    ids = local_to_global[scan.flat] if len(scan.flat) else np.zeros(0, dtype=np.int64)
    # entries sorted by the *global* first-appearance number, as scikit-learn's first pass
    counts = per_text_counts(ids, scan.lengths, max(len(column_of), 1))[scan.codes]
    columns = column_of[counts.indices]
    kept = columns >= 0
    indptr = np.concatenate([[0], np.cumsum(kept, dtype=np.int64)])[counts.indptr]
    index_dtype = np.int32 if len(idf) < 2**31 and indptr[-1] < 2**31 else np.int64
    X = sp.csr_matrix((counts.data[kept].astype(np.float32), columns[kept].astype(index_dtype),
                       indptr.astype(index_dtype)), shape=(n_rows, len(idf)), copy=False)
    np.log(X.data, X.data)
    X.data += 1.0
    X.data *= idf[X.indices]
    return normalize(X, norm="l2", copy=False)


def build_partition(scans: list[BlockScan], ids: list, columns: list) -> sp.csr_matrix:
    """Step 3 on a worker: the partition's rows of the stacked TF-IDF (hypothesis block, then
    the premise block when it has words), float32 CSR.

    Parameters
    ----------
    scans : list of BlockScan
        From :func:`scan_partition`.
    ids : list of numpy.ndarray or None
        Per block, this partition's ``local_to_global`` array.
    columns : list of (column_of, idf) or None
        Per block, :class:`BlockVocabulary`'s ``column_of`` and ``idf`` (the same for every
        partition); None leaves the block out, as ``tfidf_blocks`` leaves out a block with
        no usable word.
    """
    blocks = [_build_block(scan, local, *shared)
              for scan, shared, local in zip(scans, columns, ids, strict=True)
              if shared is not None]
    return sp.hstack(blocks, format="csr", dtype=np.float32)
