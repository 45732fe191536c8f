"""Word and n-gram count matrices, bit for bit scikit-learn's, at a fraction of its cost.

scikit-learn's ``CountVectorizer`` counts every token occurrence in a Python dictionary and,
for bigrams, builds a string per occurrence. Here each word gets an integer once, bigrams are
pairs of integers made unique by numpy and never become strings, and the columns are put in
scikit-learn's order from integer keys; :func:`word_counts` also counts each distinct text once
(NLI premises repeat: about three hypotheses a premise in SNLI).
``tests/represent/test_term_counts.py`` checks the matrices (values, index order, dtype) and
the terms against scikit-learn's.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from aflite_core.text import TOKEN_PATTERN, word_tokens

__all__ = ["NgramCounts", "distinct_word_ids", "ngram_columns", "ngram_counts", "per_text_counts",
           "tfidf_matrix", "word_counts", "word_sets"]

#: scikit-learn's default token pattern (words of one or more characters), on lower-cased text.
DEFAULT_TOKEN_RE = re.compile(r"(?u)\b\w+\b")
#: The token patterns :func:`word_counts` reads, compiled as scikit-learn compiles a
#: ``token_pattern`` (no flag) and applied to lower-cased text.
_TOKEN_PATTERNS = {"default": DEFAULT_TOKEN_RE, "tokens": re.compile(TOKEN_PATTERN)}


class NgramCounts(NamedTuple):
    """What :func:`ngram_counts` returns.

    Attributes
    ----------
    counts : scipy.sparse.csr_matrix of shape (n_texts, n_ngrams)
        float64 counts, sorted indices; the columns are the n-grams in scikit-learn's order.
    words : numpy.ndarray of str
        The distinct words, sorted; the word columns are theirs, in this order.
    first, second : numpy.ndarray of int32, shape (n_ngrams,)
        Each column's first and second word (positions in ``words``); ``second`` is -1 for a
        word's own column.
    """

    counts: sp.csr_matrix
    words: np.ndarray
    first: np.ndarray
    second: np.ndarray

    def terms(self) -> list[str]:
        """Each column's n-gram as scikit-learn names it (``"a"``, ``"a b"``)."""
        return [self.words[a] if b < 0 else f"{self.words[a]} {self.words[b]}"
                for a, b in zip(self.first.tolist(), self.second.tolist(), strict=True)]


#: Texts per step of the counts' assembly (bounds its temporary arrays).
CHUNK_TEXTS = 65_536
#: From this many texts on, :func:`_word_ids` tokenises in compiled code (numba's import and
#: its cached code cost about 0.3 s once a process; 2,000 SNLI texts take 8 ms in Python).
COMPILED_MIN_TEXTS = 2_000
#: From this many bigram occurrences on, they are made distinct by a hash table
#: (:func:`_unique_inverse`); below, numpy's sort is as fast.
COMPILED_MIN_KEYS = 100_000


def _word_ids(texts: Sequence[str], tokenize: Callable[[str], list[str]],
              pattern: str | None = None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Each text's words as integers, numbered by first appearance as scikit-learn's first
    pass numbers them: every occurrence's number (int32, all texts in a row), each text's
    number of words (int64), and the words in number order. The numbers go into C arrays,
    not one Python list per text.

    ``pattern`` (``"default"`` or ``"words"``) names ``tokenize``'s pattern for the compiled
    scanner (:mod:`aflite_core.represent._token_kernels`: the same numbers), used from
    :data:`COMPILED_MIN_TEXTS` texts on.

    Raises
    ------
    ValueError
        If no text holds a word (scikit-learn's "empty vocabulary").
    """
    found = None
    if pattern is not None and len(texts) >= COMPILED_MIN_TEXTS:
        from aflite_core.represent._token_kernels import compiled_word_ids  # lazy: numba

        found = compiled_word_ids(texts, pattern, tokenize)
    if found is not None:
        flat_ids, length_array, words = found
    else:
        vocabulary: dict[str, int] = {}
        setdefault = vocabulary.setdefault
        flat, lengths = array("i"), array("q")
        for text in texts:
            ids = [setdefault(token, len(vocabulary)) for token in tokenize(text)]
            flat.extend(ids)
            lengths.append(len(ids))
        flat_ids = np.frombuffer(flat, dtype=np.int32)
        length_array = np.frombuffer(lengths, dtype=np.int64)
        words = list(vocabulary)
    if not words:
        raise ValueError("empty vocabulary; perhaps the documents only contain stop words")
    return flat_ids, length_array, words


def _unique_inverse(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)``, the inverse as int32; from
    :data:`COMPILED_MIN_KEYS` keys by a hash table in compiled code (the distinct keys alone
    sorted: 1M SNLI hypotheses' bigrams 1.2 s -> 0.2 s)."""
    if len(keys) >= COMPILED_MIN_KEYS:
        from aflite_core.represent._token_kernels import unique_inverse  # lazy: numba

        return unique_inverse(keys)
    distinct, inverse = np.unique(keys, return_inverse=True)
    return distinct, inverse.reshape(-1).astype(np.int32)


def word_order(words: list[str], dtype) -> tuple[np.ndarray, np.ndarray]:
    """The words' sorted order (the number of the k-th word, int64) and each number's rank
    in it (``dtype``): scikit-learn's column of each word."""
    order = np.asarray(sorted(range(len(words)), key=words.__getitem__), dtype=np.int64)
    rank = np.empty(len(words), dtype=dtype)
    rank[order] = np.arange(len(words), dtype=dtype)
    return order, rank


def ngram_counts(texts: Sequence[str]) -> NgramCounts:
    """Counts of every word uni- and bigram of ``texts`` (:func:`~aflite_core.text.word_tokens`).

    Bit for bit the matrix of scikit-learn's ``CountVectorizer(tokenizer=word_tokens,
    lowercase=False, ngram_range=(1, 2), dtype=np.float64)`` (the text models' n-grams) with
    sorted indices; its ``get_feature_names_out()`` is :meth:`NgramCounts.terms`. Each word
    gets an integer once and no bigram becomes a string: scikit-learn sorts the n-grams as
    strings, and since a space sorts before any character of a word, that order is the
    words' order, a word before the bigrams it starts, those by their second word. 100k SNLI
    hypotheses 1.44-1.56 -> 0.8 s; at 1M the assembly a chunk of texts at a time keeps the
    temporary memory near the matrix's own size.

    Raises
    ------
    ValueError
        If no text holds a word (scikit-learn's "empty vocabulary").
    """
    flat, lengths, unsorted = _word_ids(texts, word_tokens, "words")
    n_words = len(unsorted)
    order, rank = word_order(unsorted, np.int32)
    words = np.asarray([unsorted[i] for i in order], dtype=object)
    tokens = rank[flat]  # each occurrence's word, by rank
    del flat, unsorted, order
    ends = np.cumsum(lengths)
    # a bigram starts at every token but a text's last
    starts = np.ones(len(tokens), dtype=bool)
    starts[ends[lengths > 0] - 1] = False
    at = np.flatnonzero(starts)
    del starts
    bigrams, bigram_of = _unique_inverse(tokens[at].astype(np.int64) * n_words + tokens[at + 1])
    first_b = (bigrams // n_words).astype(np.int32)
    second_b = (bigrams % n_words).astype(np.int32)
    del bigrams
    word_col, bigram_col, first, second = ngram_columns(n_words, first_b, second_b)
    counts = _assemble(tokens, word_col, at, bigram_of, bigram_col, lengths, ends, len(first))
    return NgramCounts(counts, words, first, second)


def ngram_columns(n_words: int, first_b: np.ndarray, second_b: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's column order of ``n_words`` sorted words and the bigrams
    ``(first_b, second_b)`` (word positions, sorted by first then second word): each word's
    column, each bigram's column, and every column's first and second word (-1 for a word's
    own column)."""
    # a word's column: its rank plus the bigrams of lower-ranked first words; a bigram's:
    # its own rank among bigrams plus the words up to its first word
    word_col = (np.arange(n_words, dtype=np.int64)
                + np.searchsorted(first_b, np.arange(n_words), side="left"))
    bigram_col = np.arange(len(first_b), dtype=np.int64) + first_b + 1
    n_cols = n_words + len(first_b)
    first = np.empty(n_cols, dtype=np.int32)
    second = np.empty(n_cols, dtype=np.int32)
    first[word_col], second[word_col] = np.arange(n_words, dtype=np.int32), -1
    first[bigram_col], second[bigram_col] = first_b, second_b
    return word_col, bigram_col, first, second


def _assemble(tokens: np.ndarray, word_col: np.ndarray, at: np.ndarray, bigram_of: np.ndarray,
              bigram_col: np.ndarray, lengths: np.ndarray, ends: np.ndarray,
              n_cols: int) -> sp.csr_matrix:
    """The counts matrix, :data:`CHUNK_TEXTS` texts at a time, written into arrays sized
    for every occurrence and trimmed to the distinct entries at the end."""
    n = len(lengths)
    bound = len(tokens) + len(at)
    index_dtype = np.int32 if max(n_cols, bound) < 2**31 else np.int64
    indices = np.empty(bound, dtype=index_dtype)
    data = np.empty(bound, dtype=np.float64)
    indptr = np.zeros(n + 1, dtype=index_dtype)
    begins = ends - lengths
    filled = 0
    for lo in range(0, n, CHUNK_TEXTS):
        hi = min(n, lo + CHUNK_TEXTS)
        t0, t1 = int(begins[lo]), int(ends[hi - 1])
        b0, b1 = np.searchsorted(at, [t0, t1])
        rows = np.repeat(np.arange(hi - lo, dtype=np.int32), lengths[lo:hi])
        part = sp.csr_matrix(
            (np.ones(t1 - t0 + b1 - b0),
             (np.concatenate([rows, rows[at[b0:b1] - t0]]),
              np.concatenate([word_col[tokens[t0:t1]], bigram_col[bigram_of[b0:b1]]]))),
            shape=(hi - lo, n_cols))
        part.sum_duplicates()
        part.sort_indices()
        indices[filled:filled + part.nnz] = part.indices
        data[filled:filled + part.nnz] = part.data
        indptr[lo + 1:hi + 1] = filled + part.indptr[1:]
        filled += part.nnz
    indices.resize(filled, refcheck=False)
    data.resize(filled, refcheck=False)
    return sp.csr_matrix((data, indices, indptr), shape=(n, n_cols), copy=False)


def distinct_word_ids(texts: Sequence[str], pattern: str = "default"
                      ) -> tuple[np.ndarray, Sequence, np.ndarray, np.ndarray, list[str]]:
    """``texts``' distinct texts tokenised once, in order of first appearance: each text's
    distinct text (codes), the distinct texts, and :func:`_word_ids` of them (every
    occurrence's word number, each distinct text's number of words, the words by number).

    ``pattern``: ``"default"`` (scikit-learn's default token pattern) or ``"tokens"``
    (``token_pattern=``:data:`aflite_core.text.TOKEN_PATTERN`), on lower-cased text.

    Raises
    ------
    ValueError
        If no text holds a word (scikit-learn's "empty vocabulary").
    """
    codes, distinct = pd.factorize(np.asarray(texts, dtype=object), use_na_sentinel=False)
    findall = _TOKEN_PATTERNS[pattern].findall
    flat, lengths, words = _word_ids(distinct, lambda text: findall(str(text).lower()),
                                   pattern)
    return codes, distinct, flat, lengths, words


def word_sets(texts: Sequence[str], words: Sequence[str]) -> tuple[sp.csr_matrix, np.ndarray]:
    """Which of ``words`` (sorted) each text holds, and its number of distinct words.

    The first is bit for bit ``CountVectorizer(analyzer=word_tokens, binary=True,
    dtype=np.float64, vocabulary=...)`` of the texts over ``words`` (sorted indices, 1.0 for
    each word held; words outside ``words`` are not counted), the second
    ``len(set(word_tokens(text)))``; each text tokenised once, in compiled code from
    :data:`COMPILED_MIN_TEXTS` texts on.
    """
    try:
        flat, lengths, found = _word_ids(texts, word_tokens, "words")
    except ValueError:  # no text holds a word
        return (sp.csr_matrix((len(texts), len(words)), dtype=np.float64),
                np.zeros(len(texts), dtype=np.int64))
    held = per_text_counts(flat, lengths, len(found), np.float64)  # distinct words, by number
    column = {word: j for j, word in enumerate(words)}
    columns = np.fromiter((column.get(word, -1) for word in found), dtype=np.int64,
                          count=len(found))
    rows = np.repeat(np.arange(len(texts), dtype=np.int64), np.diff(held.indptr))
    cols = columns[held.indices]
    kept = cols >= 0
    index_dtype = np.int32 if max(len(words), kept.sum()) < 2**31 else np.int64
    out = sp.csr_matrix((np.ones(int(kept.sum())), (rows[kept], cols[kept].astype(index_dtype))),
                        shape=(len(texts), len(words)))
    out.sort_indices()
    return out, np.diff(held.indptr).astype(np.int64)


def per_text_counts(flat: np.ndarray, lengths: np.ndarray, n_columns: int,
                    dtype: type = np.float32) -> sp.csr_matrix:
    """Each distinct text's word counts as CSR, its entries in word-number order (column =
    the number in ``flat``)."""
    rows = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
    per_text = sp.csr_matrix((np.ones(len(flat), dtype=dtype), (rows, flat)),
                             shape=(len(lengths), n_columns))
    per_text.sum_duplicates()
    per_text.sort_indices()  # by first appearance, as scikit-learn's first pass
    return per_text


def word_counts(texts: Sequence[str], *, min_df: int = 1, max_features: int | None = None,
                dtype: type = np.float32, vocabulary: list | None = None,
                pattern: str = "default", stop_words: frozenset[str] | None = None,
                binary: bool = False) -> sp.csr_matrix:
    """Word counts of ``texts``, bit for bit ``CountVectorizer(lowercase=True,
    token_pattern=r"(?u)\\b\\w+\\b", min_df=min_df, max_features=max_features,
    dtype=dtype).fit_transform(texts)``; with ``pattern="tokens"``,
    ``token_pattern=TOKEN_PATTERN`` (:data:`aflite_core.text.TOKEN_PATTERN`); with
    ``stop_words`` (a set of words, e.g. scikit-learn's ``ENGLISH_STOP_WORDS``) and
    ``binary``, as given to the vectorizer.

    Each distinct text is tokenised once (in order of first appearance, so every word gets
    the number scikit-learn's first pass gives it) and its row repeated; the columns are the
    words in sorted order, each row's entries in the order scikit-learn leaves them (by the
    word's first appearance), then its document-frequency and ``max_features`` pruning. The
    stop words are counted and their columns dropped before the pruning: the same matrix
    as dropping their tokens.

    ``vocabulary``, when given (a list), receives the words of the columns, in order.

    Raises
    ------
    ValueError
        As scikit-learn: no word in any text ("empty vocabulary"), or none left after pruning.
    """
    if pattern not in _TOKEN_PATTERNS:
        raise ValueError(f"pattern must be one of {sorted(_TOKEN_PATTERNS)}, got {pattern!r}")
    codes, _distinct, flat, lengths, words = distinct_word_ids(texts, pattern)
    X = per_text_counts(flat, lengths, len(words), dtype)[codes]
    if binary:
        X.data[:] = 1
    # scikit-learn's _sort_features: columns renumbered in word order, each row's order kept
    order, rank = word_order(words, X.indices.dtype)
    X.indices = rank.take(X.indices)
    X.has_sorted_indices = False
    in_order = [words[i] for i in order] if stop_words or vocabulary is not None else []
    # scikit-learn's _limit_features (max_df=1.0 keeps every word)
    dfs = np.bincount(X.indices, minlength=X.shape[1])
    mask = dfs >= min_df
    if stop_words:
        kept_words = np.asarray([w not in stop_words for w in in_order], dtype=bool)
        if not kept_words.any():
            raise ValueError("empty vocabulary; perhaps the documents only contain stop "
                             "words")
        mask &= kept_words
    if max_features is not None and mask.sum() > max_features:
        tfs = np.asarray(X.sum(axis=0)).ravel()
        keep = (-tfs[mask]).argsort()[:max_features]
        limited = np.zeros(len(dfs), dtype=bool)
        limited[np.where(mask)[0][keep]] = True
        mask = limited
    kept = np.where(mask)[0]
    if len(kept) == 0:
        raise ValueError("After pruning, no terms remain. Try a lower min_df or a higher "
                         "max_df.")
    if vocabulary is not None:
        vocabulary.extend(in_order[i] for i in kept)
    return X[:, kept]


def tfidf_matrix(texts: Sequence[str], *, min_df: int = 1, max_features: int | None = None,
                 model: dict | None = None) -> sp.csr_matrix:
    """``TfidfVectorizer(lowercase=True, token_pattern=r"(?u)\\b\\w+\\b", sublinear_tf=True,
    min_df=min_df, max_features=max_features, dtype=np.float32).fit_transform(texts)`` as CSR,
    bit for bit (:func:`word_counts`, then scikit-learn's own ``TfidfTransformer``).
    ``model``, when given (a dict), receives ``vocabulary`` (the columns' words) and ``idf``:
    what placing a new text in the same columns needs."""
    from sklearn.feature_extraction.text import TfidfTransformer  # lazy: +1347 ms to import

    words: list | None = [] if model is not None else None
    counts = word_counts(texts, min_df=min_df, max_features=max_features, dtype=np.float32,
                         vocabulary=words)
    transformer = TfidfTransformer(sublinear_tf=True).fit(counts)
    if model is not None:
        model.update(vocabulary=words, idf=np.asarray(transformer.idf_, dtype=np.float32))
    return transformer.transform(counts, copy=False).tocsr()
