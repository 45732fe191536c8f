"""Word tokens of many texts in compiled code: the numbers :func:`_term_counts._word_ids` gives.

Tokenising in Python (``re.findall`` per text, a dictionary lookup per token) was the serial
part of every text model: at 100,000 SNLI rows 0.25-0.4 s a column, run again by the TF-IDF
representation, the text-model baselines and the label issues' premises, on one core however
many the machine has. Here a text of ASCII characters is tokenised by a compiled scanner that
matches exactly what the pattern matches on it (the patterns are below), and every token
is numbered in the same pass by an open-addressing hash table of the words seen so far (its
bytes compared, not only its hash: no two words ever share a number). A text with any other
character is tokenised by the pattern itself in Python and its tokens numbered in their
place, so the numbers are :func:`_word_ids`' whatever the texts hold
(``tests/represent/test_token_kernels.py`` checks each pattern against ``re`` on random and
real texts).

The three patterns, on lower-cased text:

* :data:`DEFAULT`: scikit-learn's ``(?u)\\b\\w+\\b``, on ASCII the maximal runs of
  ``[a-z0-9_]``;
* :data:`WORDS`: :data:`aflite_core.text.WORD_RE` (the cue tables' and text models' word
  tokens), on ASCII, at each position in turn: letters before ``n't`` (``do`` of ``don't``),
  ``n't``, a clitic (``'s 're 've 'll 'd 'm``), a number (``1990s``, ``10:30``, ``3.5``), or
  letters joined by inner hyphens and apostrophes that do not start a clitic (``t-shirt``,
  ``o'clock``); anything else is skipped;
* :data:`TOKENS`: :data:`aflite_core.text.TOKEN_PATTERN` as scikit-learn's vectorizers read
  it (``token_pattern=TOKEN_PATTERN``: the text lower-cased, nothing replaced; the map's
  region words): :data:`WORDS`' tokens, and every other character that is not whitespace
  (``\\s``: on ASCII tab to carriage return, 28-31 and space) a token of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from aflite_core.numba_cache import jit

__all__ = ["DEFAULT", "TOKENS", "WORDS", "compiled_word_ids", "unique_inverse"]

#: scikit-learn's default token pattern on lower-cased text.
DEFAULT = 0
#: :data:`aflite_core.text.WORD_RE` on lower-cased text (:func:`aflite_core.text.word_tokens`).
WORDS = 1
#: :data:`aflite_core.text.TOKEN_PATTERN` on lower-cased text, as scikit-learn reads it.
TOKENS = 2
_PATTERNS = {"default": DEFAULT, "words": WORDS, "tokens": TOKENS}

_APOSTROPHE, _HYPHEN, _UNDERSCORE = 39, 45, 95
_FNV_OFFSET, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)


@jit
def _lower(c: int) -> int:
    return c + 32 if 65 <= c <= 90 else c


@jit
def _is_letter(c: int) -> bool:
    c = _lower(c)
    return 97 <= c <= 122


@jit
def _is_digit(c: int) -> bool:
    return 48 <= c <= 57


@jit
def _is_word(c: int) -> bool:
    return _is_letter(c) or _is_digit(c) or c == _UNDERSCORE


@jit
def _is_space(c: int) -> bool:
    """Python's ``\\s`` on ASCII."""
    return 9 <= c <= 13 or 28 <= c <= 32


@jit
def _boundary(data: np.ndarray, q: int, end: int) -> bool:
    """``\\b`` at ``q`` after a word character."""
    return q >= end or not _is_word(data[q])


@jit
def _letters(data: np.ndarray, q: int, end: int) -> int:
    n = 0
    while q + n < end and _is_letter(data[q + n]):
        n += 1
    return n


@jit
def _clitic(data: np.ndarray, q: int, end: int, with_t: bool) -> int:
    """Length of the clitic word (s, re, ve, ll, d, m; t too with ``with_t``) at ``q``
    followed by ``\\b``, else 0. Their first letters differ: at most one can match."""
    if q >= end:
        return 0
    c = _lower(data[q])
    if c == 115 or c == 100 or c == 109 or (with_t and c == 116):  # s d m t
        return 1 if _boundary(data, q + 1, end) else 0
    if q + 1 < end:
        d = _lower(data[q + 1])
        if (c == 114 and d == 101) or (c == 118 and d == 101) or (c == 108 and d == 108):
            return 2 if _boundary(data, q + 2, end) else 0  # re ve ll
    return 0


@jit
def _next_token(data: np.ndarray, p: int, end: int, pattern: int) -> tuple[int, int]:
    """The next token at or after ``p`` before ``end`` of an ASCII text: ``(start, stop)``,
    or ``(end, end)`` when none is left."""
    while p < end:
        c = data[p]
        if pattern == DEFAULT:
            if _is_word(c):
                q = p + 1
                while q < end and _is_word(data[q]):
                    q += 1
                return p, q
            p += 1
            continue
        if _is_letter(c):
            r = _letters(data, p, end)
            e = p + r
            if (r >= 2 and _lower(data[e - 1]) == 110 and e + 1 < end
                    and data[e] == _APOSTROPHE and _lower(data[e + 1]) == 116
                    and _boundary(data, e + 2, end)):
                return p, e - 1  # letters before n't
            if (r == 1 and _lower(c) == 110 and p + 2 < end and data[p + 1] == _APOSTROPHE
                    and _lower(data[p + 2]) == 116 and _boundary(data, p + 3, end)):
                return p, p + 3  # n't
            q = e  # letters, inner hyphens and apostrophes
            while q + 1 < end:
                d = data[q]
                if not _is_letter(data[q + 1]):
                    break
                if d == _HYPHEN or (d == _APOSTROPHE and _clitic(data, q + 1, end, True) == 0):
                    q += 1 + _letters(data, q + 1, end)
                else:
                    break
            return p, q
        if _is_digit(c):
            q = p + 1
            while q < end and _is_digit(data[q]):
                q += 1
            while (q + 1 < end and (data[q] == 46 or data[q] == 44 or data[q] == 58)
                   and _is_digit(data[q + 1])):
                q += 2
                while q < end and _is_digit(data[q]):
                    q += 1
            return p, q + _letters(data, q, end)
        if c == _APOSTROPHE:
            n = _clitic(data, p + 1, end, False)
            if n > 0:
                return p, p + 1 + n
        if pattern == TOKENS and not _is_space(c):
            return p, p + 1  # [^\w\s]|_: any other character but whitespace, alone
        p += 1
    return end, end


@jit
def _ascii_rows(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Whether each text is all ASCII."""
    n = len(offsets) - 1
    out = np.ones(n, dtype=np.bool_)
    for i in range(n):
        for j in range(offsets[i], offsets[i + 1]):
            if data[j] >= 128:
                out[i] = False
                break
    return out


@jit
def _count_tokens(offsets: np.ndarray, data: np.ndarray, ascii_rows: np.ndarray,
                  pattern: int, lengths: np.ndarray) -> None:
    for i in range(len(lengths)):
        if not ascii_rows[i]:
            continue
        p, end, n = offsets[i], offsets[i + 1], 0
        while True:
            start, stop = _next_token(data, p, end, pattern)
            if start >= end:
                break
            n += 1
            p = stop
        lengths[i] = n


@jit
def _hash(data: np.ndarray, start: int, stop: int) -> np.uint64:
    h = _FNV_OFFSET
    for j in range(start, stop):
        h = (h ^ np.uint64(_lower(data[j]))) * _FNV_PRIME
    return h ^ (h >> np.uint64(29))  # FNV's low bits alone cluster in the table


@jit
def _same(data: np.ndarray, start: int, stop: int, words: np.ndarray, at: int, at_stop: int
          ) -> bool:
    """Whether ``data[start:stop]`` lower-cased is the word ``words[at:at_stop]``."""
    if stop - start != at_stop - at:
        return False
    for j in range(stop - start):  # noqa: SIM110 (numba compiles no generator for all())
        if _lower(data[start + j]) != words[at + j]:
            return False
    return True


@jit
def _number_run(offsets: np.ndarray, data: np.ndarray, ascii_rows: np.ndarray, pattern: int,
                aux_first: np.ndarray, aux_offsets: np.ndarray, lengths: np.ndarray,
                flat: np.ndarray, row: int, k: int, table: np.ndarray, w_hash: np.ndarray,
                w_offsets: np.ndarray, w_bytes: np.ndarray, n_words: int
                ) -> tuple[int, int, int]:
    """:func:`_number_tokens` from text ``row`` (its first token at ``flat[k]``) while the
    arrays have room for the next text's words: returns the next text, its first token's
    place, and the number of words. Its arrays are never replaced here (numba keeps a loop
    that replaces them twice as slow: 0.05 -> 0.10 s for 100k premises)."""
    mask = len(table) - 1
    while row < len(lengths):
        n = lengths[row]
        p, end, first = offsets[row], offsets[row + 1], aux_first[row]
        if ascii_rows[row]:
            text_bytes = end - p
        else:
            text_bytes = aux_offsets[first + n] - aux_offsets[first]
        if (2 * (n_words + n) > len(table) or n_words + n + 1 >= len(w_offsets)
                or w_offsets[n_words] + text_bytes > len(w_bytes)):
            break
        for t in range(n):
            if ascii_rows[row]:
                start, stop = _next_token(data, p, end, pattern)
                p = stop
            else:
                start, stop = aux_offsets[first + t], aux_offsets[first + t + 1]
            h = _hash(data, start, stop)
            slot = np.int64(h & np.uint64(mask))
            while True:
                w = table[slot]
                if w < 0 or (w_hash[w] == h and _same(data, start, stop, w_bytes,
                                                      w_offsets[w], w_offsets[w + 1])):
                    break
                slot = (slot + 1) & mask
            if w < 0:
                w = n_words
                at = w_offsets[w]
                for j in range(stop - start):
                    w_bytes[at + j] = _lower(data[start + j])
                w_offsets[w + 1] = at + stop - start
                w_hash[w] = h
                table[slot] = w
                n_words += 1
            flat[k] = w
            k += 1
        row += 1
    return row, k, n_words


@jit
def _rehashed(hashes: np.ndarray, n: int, size: int) -> np.ndarray:
    """The open-addressing table of ``size`` slots of the first ``n`` entries (words or
    keys), by their hashes."""
    mask = size - 1
    table = np.full(size, -1, dtype=np.int64)
    for v in range(n):
        s = np.int64(hashes[v] & np.uint64(mask))
        while table[s] >= 0:
            s = (s + 1) & mask
        table[s] = v
    return table


def _grown(values: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=values.dtype)
    out[:len(values)] = values
    return out


def _number_tokens(offsets: np.ndarray, data: np.ndarray, ascii_rows: np.ndarray, pattern: int,
                   aux_first: np.ndarray, aux_offsets: np.ndarray, lengths: np.ndarray,
                   flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every token's word number, by first appearance, into ``flat``; returns the words'
    lower-cased bytes end to end and their offsets (a text's tokens for the rows that are not
    ASCII are ``aux_offsets[aux_first[i]:...]``: spans in ``data`` past the texts' own
    bytes). The words are compared in a buffer of their own, not at their first occurrence,
    so that a probe stays in the cache; the table is kept at most half full."""
    table = np.full(1 << 12, -1, dtype=np.int64)
    w_hash = np.zeros(1 << 10, dtype=np.uint64)
    w_offsets = np.zeros(1 << 10, dtype=np.int64)
    w_bytes = np.zeros(1 << 14, dtype=np.uint8)
    row = k = n_words = 0
    while True:
        row, k, n_words = _number_run(offsets, data, ascii_rows, pattern, aux_first,
                                      aux_offsets, lengths, flat, row, k, table, w_hash,
                                      w_offsets, w_bytes, n_words)
        if row == len(lengths):
            return w_bytes[:w_offsets[n_words]], w_offsets[:n_words + 1]
        n = int(lengths[row])  # room for the next text's words, twice what is there
        if 2 * (n_words + n) > len(table):
            table = _rehashed(w_hash, n_words, 1 << int(4 * (n_words + n)).bit_length())
        if n_words + n + 1 >= len(w_offsets):
            w_hash = _grown(w_hash, 2 * (n_words + n + 1))
            w_offsets = _grown(w_offsets, 2 * (n_words + n + 1))
        text_bytes = int(offsets[row + 1] - offsets[row]) if ascii_rows[row] else int(
            aux_offsets[aux_first[row] + n] - aux_offsets[aux_first[row]])
        if w_offsets[n_words] + text_bytes > len(w_bytes):
            w_bytes = _grown(w_bytes, 2 * (int(w_offsets[n_words]) + text_bytes))


def compiled_word_ids(texts: Sequence[str], pattern: str, tokenize: Callable[[str], list[str]]
                      ) -> tuple[np.ndarray, np.ndarray, list[str]] | None:
    """:func:`aflite_core.represent._term_counts._word_ids` of ``texts`` with ``pattern``
    (``"default"``, ``"words"`` or ``"tokens"``: :data:`DEFAULT`, :data:`WORDS`,
    :data:`TOKENS`), whose Python form ``tokenize`` reads the texts that
    are not all ASCII: every occurrence's word number (int32), each text's number of words
    (int64), the words in number order. None when a text is not a ``str`` (the caller's own
    way then says what it makes of it)."""
    if pattern not in _PATTERNS:
        raise ValueError(f"pattern must be one of {sorted(_PATTERNS)}, got {pattern!r}")
    # Arrow would take bytes as text; the pattern itself reads only str (1M texts: 40 ms)
    if not len(texts) or not all(isinstance(text, str) for text in texts):
        return None
    try:
        array = pa.array(texts, type=pa.large_string(), from_pandas=False)
    except (pa.ArrowException, TypeError, ValueError, UnicodeError):
        return None
    if array.null_count:
        return None
    _, offset_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offset_buffer, dtype=np.int64, count=len(array) + 1)
    data = (np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None
            else np.zeros(0, dtype=np.uint8))[:offsets[-1]]
    ascii_rows = _ascii_rows(offsets, data)
    lengths = np.zeros(len(array), dtype=np.int64)
    kind = _PATTERNS[pattern]
    _count_tokens(offsets, data, ascii_rows, kind, lengths)
    aux_first = np.zeros(len(array), dtype=np.int64)
    aux_offsets = np.zeros(1, dtype=np.int64)
    others = np.flatnonzero(~ascii_rows)
    if len(others):  # tokenised by the pattern itself; their bytes after the texts'
        tokens = [tokenize(texts[i]) for i in others.tolist()]
        lengths[others] = [len(row) for row in tokens]
        encoded = [token.encode("utf-8", "surrogatepass") for row in tokens for token in row]
        aux_first[others] = np.cumsum([0] + [len(row) for row in tokens[:-1]])
        sizes = np.fromiter((len(token) for token in encoded), dtype=np.int64,
                            count=len(encoded))
        aux_offsets = len(data) + np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        data = np.concatenate([data, np.frombuffer(b"".join(encoded), dtype=np.uint8)])
    flat = np.empty(int(lengths.sum()), dtype=np.int32)
    word_data, word_offsets = _number_tokens(offsets, data, ascii_rows, kind, aux_first,
                                             aux_offsets, lengths, flat)
    words = pa.LargeStringArray.from_buffers(len(word_offsets) - 1, pa.py_buffer(word_offsets),
                                             pa.py_buffer(word_data)).to_pylist()
    return flat, lengths, words


@jit
def _mixed(key: np.int64) -> np.uint64:
    """splitmix64's finaliser: every bit of the key in the table's low bits."""
    h = np.uint64(key)
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


@jit
def _distinct_run(keys: np.ndarray, start: int, ids: np.ndarray, table: np.ndarray,
                  distinct: np.ndarray, hashes: np.ndarray, n_distinct: int) -> tuple[int, int]:
    """Number ``keys[start:]`` by first appearance into ``ids`` while the table stays at
    most half full and ``distinct`` has room; returns where it stopped and the count."""
    mask = len(table) - 1
    i = start
    while i < len(keys):
        if 2 * (n_distinct + 1) > len(table) or n_distinct == len(distinct):
            break
        key = keys[i]
        h = _mixed(key)
        slot = np.int64(h & np.uint64(mask))
        while True:
            d = table[slot]
            if d < 0:
                d = n_distinct
                distinct[d] = key
                hashes[d] = h
                table[slot] = d
                n_distinct += 1
                break
            if distinct[d] == key:
                break
            slot = (slot + 1) & mask
        ids[i] = d
        i += 1
    return i, n_distinct


def unique_inverse(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` of int64 ``keys``, the inverse as int32: the
    keys made distinct by a hash table (first appearance), then only the distinct ones
    sorted: 12M keys of 0.4M distinct values 0.22 s against numpy's 1.71 s, which sorts them
    all. (:func:`aflite_core.io._load_kernels.first_codes` numbers values alike, but sizes its
    table for every value to be distinct: 128 MB of slots for these 12M keys, here 4 MB.)"""
    keys = np.ascontiguousarray(keys, dtype=np.int64)
    ids = np.empty(len(keys), dtype=np.int32)
    table = np.full(1 << 12, -1, dtype=np.int64)
    distinct = np.empty(1 << 10, dtype=np.int64)
    hashes = np.empty(1 << 10, dtype=np.uint64)
    i = n = 0
    while True:
        i, n = _distinct_run(keys, i, ids, table, distinct, hashes, n)
        if i == len(keys):
            break
        if 2 * (n + 1) > len(table):
            table = _rehashed(hashes, n, 2 * len(table))
        if n == len(distinct):
            distinct = _grown(distinct, 2 * len(distinct))
            hashes = _grown(hashes, 2 * len(hashes))
    distinct = distinct[:n]
    order = np.argsort(distinct, kind="stable")
    rank = np.empty(n, dtype=np.int32)
    rank[order] = np.arange(n, dtype=np.int32)
    return distinct[order], rank[ids]
