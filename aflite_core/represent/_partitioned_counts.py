""":func:`~aflite_core.represent._term_counts.ngram_counts` by map-reduce over chunks of texts.

Each chunk is counted alone (:func:`chunk_ngram_counts`: its own sorted vocabulary, its own
columns). The vocabularies are merged (:func:`merge_ngram_vocabularies`): the global words are
the sorted union of the chunks' words, the global bigrams the union of their bigrams, and the
global columns are numbered exactly as :func:`ngram_counts` numbers them (a word, then the
bigrams it starts, by their second word). A chunk's column then maps to a global column, and
the map is monotone (a chunk's sort order is the global order restricted to its n-grams), so
each row's renumbered entries stay sorted; counts are integers in float64, summed within a row
alike. Stacked in chunk order, the chunks are :func:`ngram_counts` of all texts bit for bit
(values, index order, index dtype; ``tests/represent/test_partitioned_counts.py``).

With a Dask client, :func:`ngram_counts_on_workers` counts each chunk in a task on the
workers and merges their vocabularies and stacks them in one task there: the driver sends
each chunk's texts (one chunk at a time) and receives nothing, neither the matrix nor the
vocabularies (every word and bigram and each chunk's column map, which went to the driver and
back as the stacking task's argument until the fifteenth session). Each task holds its
inputs, so a worker lost with a result is recomputed by Dask from them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from aflite_core.represent._term_counts import NgramCounts, ngram_columns, ngram_counts
from aflite_core.text import word_tokens

__all__ = ["NgramVocabulary", "chunk_ngram_counts", "merge_ngram_vocabularies",
           "ngram_counts_from_chunks", "ngram_counts_on_workers", "stack_ngram_counts"]


class NgramVocabulary(NamedTuple):
    """The global columns of merged chunks (see :func:`merge_ngram_vocabularies`).

    Attributes
    ----------
    words, first, second : numpy.ndarray
        As :class:`~aflite_core.represent._term_counts.NgramCounts` of all texts.
    column_maps : list of numpy.ndarray of int64
        Per chunk, the global column of each of its columns.
    index_dtype : numpy.dtype
        The index dtype :func:`ngram_counts` would give the whole matrix.
    """

    words: np.ndarray
    first: np.ndarray
    second: np.ndarray
    column_maps: list[np.ndarray]
    index_dtype: np.dtype


def chunk_ngram_counts(texts: Sequence[str]) -> NgramCounts:
    """:func:`ngram_counts` of one chunk; a chunk without any word (all texts empty) gets an
    empty vocabulary instead of scikit-learn's "empty vocabulary" error, which is for the
    whole input to raise (:func:`merge_ngram_vocabularies`)."""
    texts = list(texts)
    if any(word_tokens(text) for text in texts):
        return ngram_counts(texts)
    no_columns = np.empty(0, dtype=np.int32)
    return NgramCounts(sp.csr_matrix((len(texts), 0), dtype=np.float64),
                       np.empty(0, dtype=object), no_columns, no_columns.copy())


def _vocabulary_of(part: NgramCounts) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """What the merge needs of a chunk: its words and columns, and its count of occurrences
    (tokens plus bigrams: :func:`ngram_counts`' bound on the entries)."""
    return part.words, part.first, part.second, int(part.counts.data.sum())


def merge_ngram_vocabularies(parts: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, int]]
                             ) -> NgramVocabulary:
    """The global columns of chunks counted by :func:`chunk_ngram_counts`.

    Parameters
    ----------
    parts : sequence of (words, first, second, occurrences)
        Each chunk's sorted words, its columns' first and second word (``second`` -1 for a
        word's own column) and its number of token and bigram occurrences, in chunk order.

    Returns
    -------
    NgramVocabulary

    Raises
    ------
    ValueError
        If no chunk holds a word (scikit-learn's "empty vocabulary").
    """
    words = np.asarray(sorted(set().union(*(p[0].tolist() for p in parts))), dtype=object)
    if len(words) == 0:
        raise ValueError("empty vocabulary; perhaps the documents only contain stop words")
    n_words = len(words)
    rank = {word: i for i, word in enumerate(words.tolist())}
    ranked = [np.asarray([rank[w] for w in p[0].tolist()], dtype=np.int64) for p in parts]
    keys = [g[p[1]] * n_words + g[np.maximum(p[2], 0)] for g, p in zip(ranked, parts,
                                                                         strict=True)]
    bigrams = np.unique(np.concatenate([k[p[2] >= 0] for k, p in zip(keys, parts,
                                                                      strict=True)]))
    first_b = (bigrams // n_words).astype(np.int32)
    second_b = (bigrams % n_words).astype(np.int32)
    # the columns as ngram_counts numbers them: a word's, then the bigrams it starts
    word_col, bigram_col, first, second = ngram_columns(n_words, first_b, second_b)
    n_cols = len(first)
    maps = []
    for g, p, k in zip(ranked, parts, keys, strict=True):
        is_word = p[2] < 0
        column = np.empty(len(p[1]), dtype=np.int64)
        column[is_word] = word_col[g[p[1][is_word]]]
        column[~is_word] = bigram_col[np.searchsorted(bigrams, k[~is_word])]
        maps.append(column)
    occurrences = sum(int(p[3]) for p in parts)
    index_dtype = np.dtype(np.int32 if max(n_cols, occurrences) < 2**31 else np.int64)
    return NgramVocabulary(words, first, second, maps, index_dtype)


def stack_ngram_counts(parts: Sequence[NgramCounts], vocabulary: NgramVocabulary
                       ) -> NgramCounts:
    """The chunks' counts renumbered to the global columns and stacked in chunk order."""
    n_cols = len(vocabulary.first)
    dtype = vocabulary.index_dtype
    sizes = [p.counts.nnz for p in parts]
    data = np.empty(sum(sizes), dtype=np.float64)
    indices = np.empty(sum(sizes), dtype=dtype)
    indptr = np.zeros(sum(p.counts.shape[0] for p in parts) + 1, dtype=dtype)
    at = row = 0
    for part, column, size in zip(parts, vocabulary.column_maps, sizes, strict=True):
        counts = part.counts
        data[at:at + size] = counts.data
        indices[at:at + size] = column[counts.indices]
        indptr[row + 1:row + counts.shape[0] + 1] = at + counts.indptr[1:]
        at += size
        row += counts.shape[0]
    matrix = sp.csr_matrix((data, indices, indptr), shape=(row, n_cols), copy=False)
    return NgramCounts(matrix, vocabulary.words, vocabulary.first, vocabulary.second)


def ngram_counts_from_chunks(chunks: Iterable[Sequence[str]]) -> NgramCounts:
    """:func:`ngram_counts` of the chunks' texts in order, counted chunk by chunk here (the
    map-reduce of :func:`ngram_counts_on_workers` on one process)."""
    parts = [chunk_ngram_counts(chunk) for chunk in chunks]
    return stack_ngram_counts(parts, merge_ngram_vocabularies([_vocabulary_of(p)
                                                                for p in parts]))


def _merge_and_stack(parts: list[NgramCounts]) -> NgramCounts:
    """The chunks' vocabularies merged and the chunks stacked, in one task on a worker: the
    vocabulary (every word and bigram, and each chunk's column map: about 50 MB at 1M rows)
    never travels through the driver."""
    return stack_ngram_counts(parts, merge_ngram_vocabularies([_vocabulary_of(part)
                                                               for part in parts]))


def ngram_counts_on_workers(client: Any, chunks: Iterable[Sequence[str]]) -> Any:
    """:func:`ngram_counts` of the chunks' texts, left on ``client``'s workers.

    Parameters
    ----------
    client : dask.distributed.Client
    chunks : iterable of sequences of str
        The texts in order, a chunk at a time (each is sent with its task, then dropped here).

    Returns
    -------
    dask.distributed.Future
        Of the :class:`~aflite_core.represent._term_counts.NgramCounts`, bit for bit
        :func:`ngram_counts` of all texts; pass it to tasks (``map_folds(resident=...)``).
    """
    counted = [client.submit(chunk_ngram_counts, list(chunk), pure=False) for chunk in chunks]
    return client.submit(_merge_and_stack, counted, pure=False)
