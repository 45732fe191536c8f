"""The load's compiled kernels (numba): pandas' text hashes from Arrow's buffers, and the
groups of rows linked by a shared text.

:func:`arrow_hashes` gives for each text of an Arrow string array what
``pandas.util.hash_array(values, categorize=False)`` gives for the same texts as Python
strings: SipHash-2-4 of the UTF-8 bytes under pandas' key, then pandas' mixing of the 64
bits. The bytes are read where Arrow holds them: no Python string a row (1M texts of 60
characters: 0.27 s through ``to_numpy`` and pandas, a few hundredths of a second here).

:func:`normalised_ascii_hashes` does the same for each text normalised as
:func:`aflite_core.io._text_columns.normalised_hashes` normalises it (lower-cased, each run of
punctuation, symbols and whitespace one space, trimmed), for the texts of printable ASCII
(and tab, line feed, form feed, carriage return) in one pass; the others are flagged for
Arrow's Unicode kernels. Tested against both for every ASCII character.

:func:`linked_row_components` numbers the connected components of the graph joining each
row's premise to its hypothesis by union-find, in order of each component's first row:
scipy's ``connected_components`` on the same graph took 0.25 s at 1M SNLI-like rows and held
its edges; this holds one int32 a text.

:func:`first_codes` numbers equal values (the texts' 64-bit hashes) by a hash table, in order
of first appearance, with their counts: what the load asks of its hash columns (which rows
hold the same text, how many distinct texts) took a stable ``argsort`` of 1M hashes each
(about 80 ms; the table about 30 ms).

A module of its own so that the loader does not import numba (0.3 s) for a small file.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from aflite_core.numba_cache import jit

__all__ = ["arrow_hashes", "first_codes", "linked_row_components", "normalised_ascii_hashes",
           "text_facts"]

#: pandas' default ``hash_key`` ("0123456789123456") as SipHash's two key words.
_KEY = b"0123456789123456"
_K0 = np.uint64(int.from_bytes(_KEY[:8], "little"))
_K1 = np.uint64(int.from_bytes(_KEY[8:], "little"))


@jit
def _rotl(x: np.uint64, b: int) -> np.uint64:
    return (x << np.uint64(b)) | (x >> np.uint64(64 - b))


@jit
def _rounds(v0: np.uint64, v1: np.uint64, v2: np.uint64, v3: np.uint64, count: int
            ) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:
    """``count`` SipRounds of the state."""
    for _ in range(count):
        v0 += v1
        v1 = _rotl(v1, 13)
        v1 ^= v0
        v0 = _rotl(v0, 32)
        v2 += v3
        v3 = _rotl(v3, 16)
        v3 ^= v2
        v0 += v3
        v3 = _rotl(v3, 21)
        v3 ^= v0
        v2 += v1
        v1 = _rotl(v1, 17)
        v1 ^= v2
        v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


@jit
def _start() -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:
    """SipHash's state under pandas' key, before any byte."""
    return (_K0 ^ np.uint64(0x736F6D6570736575), _K1 ^ np.uint64(0x646F72616E646F6D),
            _K0 ^ np.uint64(0x6C7967656E657261), _K1 ^ np.uint64(0x7465646279746573))


@jit
def _compress(v0: np.uint64, v1: np.uint64, v2: np.uint64, v3: np.uint64, m: np.uint64
              ) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:
    """One 8-byte word ``m`` into the state (SipHash-2-4: two SipRounds)."""
    v3 ^= m
    v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 2)
    v0 ^= m
    return v0, v1, v2, v3


@jit
def _finish(v0: np.uint64, v1: np.uint64, v2: np.uint64, v3: np.uint64, m: np.uint64
            ) -> np.uint64:
    """The last word ``m`` (the bytes left and the length in its top byte), the four
    finalising SipRounds, then pandas' mixing of the 64 bits (``_hash_ndarray``)."""
    v0, v1, v2, v3 = _compress(v0, v1, v2, v3, m)
    v2 ^= np.uint64(0xFF)
    v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 4)
    h = v0 ^ v1 ^ v2 ^ v3
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return h


@jit
def _siphash(data: np.ndarray, start: int, end: int) -> np.uint64:
    """SipHash-2-4 of ``data[start:end]`` under pandas' key, then pandas' mixing."""
    v0, v1, v2, v3 = _start()
    length = end - start
    whole = start + (length - length % 8)
    p = start
    while p < whole:
        m = np.uint64(0)
        for k in range(8):
            m |= np.uint64(data[p + k]) << np.uint64(8 * k)
        v0, v1, v2, v3 = _compress(v0, v1, v2, v3, m)
        p += 8
    m = np.uint64(length & 0xFF) << np.uint64(56)  # the bytes left and the length
    for k in range(end - p):
        m |= np.uint64(data[p + k]) << np.uint64(8 * k)
    return _finish(v0, v1, v2, v3, m)


@jit
def _hash_all(offsets: np.ndarray, data: np.ndarray, out: np.ndarray) -> None:
    for i in range(len(out)):
        out[i] = _siphash(data, offsets[i], offsets[i + 1])


# the bytes normalisation keeps (0), makes part of a separator run (1), or leaves to Arrow (2)
_KIND = np.full(256, 2, dtype=np.uint8)
_KIND[0x20:0x7F] = 1
for _byte in b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ":
    _KIND[_byte] = 0
_KIND[[0x09, 0x0A, 0x0C, 0x0D]] = 1  # RE2's \s: [\t\n\f\r ]


# Python's whitespace among the bytes normalised here (a text of only these is blank); its
# others (\x0b, \x1c-\x1f and Unicode's) are left to Arrow with the rest
_BLANK = np.zeros(256, dtype=np.uint8)
_BLANK[[0x09, 0x0A, 0x0C, 0x0D, 0x20]] = 1


@jit
def _normalised_row(data: np.ndarray, start: int, end: int, kind: np.ndarray, left: bool,
                    right: bool) -> tuple[np.uint64, bool, bool]:
    """``(hash, slow, blank)`` of ``data[start:end]`` normalised: its hash (meaningless when
    ``slow``: a byte left to Arrow), and whether it holds only the whitespace of
    :data:`_BLANK`."""
    # each normalised byte goes straight into the hash's next word: no copy of the text to
    # hash afterwards (its byte stores read back as words cost more than the hashing)
    v0, v1, v2, v3 = _start()
    m = np.uint64(0)  # the word being filled, ``shift`` bits of it so far
    shift = np.uint64(0)
    n = 0  # bytes of the normalised text
    pending = False  # a separator run waiting for its one space
    blank = True
    for p in range(start, end):
        c = data[p]
        what = kind[c]
        if what == 2:
            return np.uint64(0), True, False
        if what == 1:
            blank = blank and _BLANK[c] == 1
            pending = pending or n > 0 or not left
            continue
        blank = False
        if pending:
            m |= np.uint64(32) << shift
            shift += np.uint64(8)
            n += 1
            pending = False
            if shift == np.uint64(64):
                v0, v1, v2, v3 = _compress(v0, v1, v2, v3, m)
                m, shift = np.uint64(0), np.uint64(0)
        m |= np.uint64(c + 32 if 65 <= c <= 90 else c) << shift
        shift += np.uint64(8)
        n += 1
        if shift == np.uint64(64):
            v0, v1, v2, v3 = _compress(v0, v1, v2, v3, m)
            m, shift = np.uint64(0), np.uint64(0)
    if pending and not right:
        m |= np.uint64(32) << shift
        shift += np.uint64(8)
        n += 1
        if shift == np.uint64(64):
            v0, v1, v2, v3 = _compress(v0, v1, v2, v3, m)
            m, shift = np.uint64(0), np.uint64(0)
    return _finish(v0, v1, v2, v3, m | np.uint64(n & 0xFF) << np.uint64(56)), False, blank


@jit
def _normalised_all(offsets: np.ndarray, data: np.ndarray, kind: np.ndarray, left: bool,
                    right: bool, out: np.ndarray, slow: np.ndarray) -> None:
    for i in range(len(out)):
        h, bad, _ = _normalised_row(data, offsets[i], offsets[i + 1], kind, left, right)
        out[i] = h
        slow[i] = bad


@jit
def _facts_all(offsets: np.ndarray, data: np.ndarray, kind: np.ndarray, left: bool,
               right: bool, hashes: np.ndarray, normalised: np.ndarray, lengths: np.ndarray,
               blank: np.ndarray, slow: np.ndarray) -> None:
    for i in range(len(hashes)):
        start, end = offsets[i], offsets[i + 1]
        hashes[i] = _siphash(data, start, end)
        tail = 0  # UTF-8 continuation bytes: the characters are the others
        for p in range(start, end):
            tail += (data[p] & 0xC0) == 0x80
        lengths[i] = end - start - tail
        normalised[i], slow[i], blank[i] = _normalised_row(data, start, end, kind, left, right)


def _buffers(chunk: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string array's offsets (int64, from its first row) and bytes, without a copy of the
    bytes."""
    kind = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
    _, offsets, data = chunk.buffers()
    starts = np.frombuffer(offsets, dtype=kind, count=chunk.offset + len(chunk) + 1)
    starts = starts[chunk.offset:].astype(np.int64, copy=False)
    values = (np.frombuffer(data, dtype=np.uint8) if data is not None
              else np.zeros(0, dtype=np.uint8))
    return starts, values


def _chunks(texts: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return list(texts.chunks) if isinstance(texts, pa.ChunkedArray) else [texts]


def arrow_hashes(texts: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``pandas.util.hash_array(texts.to_numpy(zero_copy_only=False), categorize=False)``
    from Arrow's buffers.

    Parameters
    ----------
    texts : pyarrow.Array or pyarrow.ChunkedArray
        ``string`` or ``large_string`` texts, none missing (``pc.fill_null(texts, "")``).

    Returns
    -------
    numpy.ndarray
        One ``uint64`` a text.

    Examples
    --------
    >>> import pandas as pd
    >>> texts = pa.array(["a cat", "", "ünïcode"])
    >>> (arrow_hashes(texts) == pd.util.hash_array(texts.to_numpy(zero_copy_only=False),
    ...                                             categorize=False)).all()
    np.True_
    """
    out = np.empty(len(texts), dtype=np.uint64)
    at = 0
    for chunk in _chunks(texts):
        offsets, data = _buffers(chunk)
        _hash_all(offsets, data, out[at:at + len(chunk)])
        at += len(chunk)
    return out


def normalised_ascii_hashes(texts: pa.Array | pa.ChunkedArray, trim: str
                            ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`arrow_hashes` of each text normalised (lower-cased, each run of punctuation,
    symbols and whitespace one space, trimmed at ``trim``'s ends), for the texts of
    printable ASCII, tab, line feed, form feed and carriage return.

    Parameters
    ----------
    texts : pyarrow.Array or pyarrow.ChunkedArray
        As for :func:`arrow_hashes`.
    trim : {"both", "left", "right"}
        The ends a space is trimmed from.

    Returns
    -------
    hashes : numpy.ndarray
        One ``uint64`` a text; meaningless where ``slow``.
    slow : numpy.ndarray
        True for a text holding another byte: normalise it with Arrow's Unicode kernels.

    Examples
    --------
    >>> hashes, slow = normalised_ascii_hashes(pa.array(["A  cat!", "a cat", "ça"]), "both")
    >>> bool(hashes[0] == hashes[1]), slow.tolist()
    (True, [False, False, True])
    """
    left, right = trim in ("both", "left"), trim in ("both", "right")
    out = np.empty(len(texts), dtype=np.uint64)
    slow = np.zeros(len(texts), dtype=bool)
    at = 0
    for chunk in _chunks(texts):
        offsets, data = _buffers(chunk)
        part = slice(at, at + len(chunk))
        _normalised_all(offsets, data, _KIND, left, right, out[part], slow[part])
        at += len(chunk)
    return out, slow


def text_facts(texts: pa.Array | pa.ChunkedArray, trim: str
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`arrow_hashes`, :func:`normalised_ascii_hashes`, the characters and the blank
    texts of ``texts``, each text's bytes read while they are in the cache (one visit a text
    instead of a pass over the column for each).

    Parameters
    ----------
    texts : pyarrow.Array or pyarrow.ChunkedArray
        As for :func:`arrow_hashes` (valid UTF-8, as Arrow's strings are).
    trim : {"both", "left", "right"}
        As for :func:`normalised_ascii_hashes`.

    Returns
    -------
    hashes : numpy.ndarray
        ``uint64``, :func:`arrow_hashes`'.
    normalised : numpy.ndarray
        ``uint64``, :func:`normalised_ascii_hashes`'; meaningless where ``slow``.
    lengths : numpy.ndarray
        ``int64`` characters (code points) of each text.
    blank : numpy.ndarray
        True for a text of tabs, line feeds, form feeds, carriage returns and spaces only
        (the empty text too); meaningless where ``slow``.
    slow : numpy.ndarray
        :func:`normalised_ascii_hashes`' (a text with another byte: Arrow's Unicode
        kernels normalise it and say whether it is blank).

    Examples
    --------
    >>> hashes, normalised, lengths, blank, slow = text_facts(
    ...     pa.array(["A cat!", " \\t", "ça"]), "both")
    >>> lengths.tolist(), blank.tolist(), slow.tolist()
    ([6, 2, 2], [False, True, False], [False, False, True])
    >>> bool(normalised[0] == normalised_ascii_hashes(pa.array(["a cat"]), "both")[0][0])
    True
    """
    left, right = trim in ("both", "left"), trim in ("both", "right")
    n = len(texts)
    hashes, normalised = np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint64)
    lengths, blank, slow = (np.empty(n, dtype=np.int64), np.empty(n, dtype=bool),
                            np.empty(n, dtype=bool))
    at = 0
    for chunk in _chunks(texts):
        offsets, data = _buffers(chunk)
        part = slice(at, at + len(chunk))
        _facts_all(offsets, data, _KIND, left, right, hashes[part], normalised[part],
                   lengths[part], blank[part], slow[part])
        at += len(chunk)
    return hashes, normalised, lengths, blank, slow


@jit
def _root(parent: np.ndarray, node: int) -> int:
    while parent[node] != node:
        parent[node] = parent[parent[node]]  # path halving
        node = parent[node]
    return node


@jit
def _components(premises: np.ndarray, hypotheses: np.ndarray, n_premises: int,
                size: int) -> np.ndarray:
    parent = np.arange(size).astype(np.int32)
    for i in range(len(hypotheses)):
        if premises[i] >= 0:
            a = _root(parent, premises[i])
            b = _root(parent, n_premises + hypotheses[i])
            if a < b:
                parent[b] = a
            elif b < a:
                parent[a] = b
    label = np.full(size, -1, dtype=np.int32)
    out = np.empty(len(hypotheses), dtype=np.int32)
    count = 0
    for i in range(len(hypotheses)):
        root = _root(parent, n_premises + hypotheses[i])
        if label[root] < 0:
            label[root] = count
            count += 1
        out[i] = label[root]
    return out


def linked_row_components(premises: np.ndarray | None, hypotheses: np.ndarray) -> np.ndarray:
    """What :func:`aflite_core.io._linked_groups.linked_components` gives, by union-find: the
    component of every row (int32, numbered in order of each component's first row) in the
    graph joining each row's premise code to its hypothesis code (premise -1, or None: no
    premise).

    Parameters
    ----------
    premises : numpy.ndarray or None
        A code (0, 1, ...) per row, -1 where the row has none.
    hypotheses : numpy.ndarray
        A code (0, 1, ...) per row.

    Returns
    -------
    numpy.ndarray
        ``int32`` component of every row.

    Examples
    --------
    >>> linked_row_components(np.array([0, 1, 0, -1]), np.array([0, 1, 2, 1])).tolist()
    [0, 1, 0, 1]
    """
    hyp = np.ascontiguousarray(hypotheses, dtype=np.int64)
    if not len(hyp):
        return np.zeros(0, dtype=np.int32)
    prem = (np.full(len(hyp), -1, dtype=np.int64) if premises is None
            else np.ascontiguousarray(premises, dtype=np.int64))
    n_premises = int(prem.max(initial=-1)) + 1
    return _components(prem, hyp, n_premises, n_premises + int(hyp.max()) + 1)


#: Fibonacci hashing's multiplier (2**64 / the golden ratio): spreads sequential integers
#: as well as hashes over the table's slots.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@jit
def _first_codes(values: np.ndarray, slots: np.ndarray, codes: np.ndarray, counts: np.ndarray,
                 firsts: np.ndarray) -> int:
    size = len(slots)  # a power of two; the code held in a slot, -1: empty
    bits = 0
    while (1 << bits) < size:
        bits += 1
    shift = np.uint64(64 - bits)
    distinct = 0
    for i in range(len(values)):
        value = values[i]
        at = np.int64((value * _GOLDEN) >> shift)
        while True:  # linear probing: the table is at most half full
            code = slots[at]
            if code < 0:
                slots[at] = distinct
                firsts[distinct] = i
                codes[i] = distinct
                counts[distinct] = 1
                distinct += 1
                break
            if values[firsts[code]] == value:  # the code's value: its first row's
                codes[i] = code
                counts[code] += 1
                break
            at = (at + 1) & (size - 1)
    return distinct


def first_codes(values: np.ndarray, *, first_rows: bool = False) -> tuple[np.ndarray, ...]:
    """``(codes, counts)``: an int64 code per value, equal for equal values and numbered 0, 1,
    ... in order of each value's first appearance, and how many times each code occurs.

    Parameters
    ----------
    values : numpy.ndarray
        64-bit integers (``uint64`` hashes, or ``int64``).
    first_rows : bool, default False
        Also return each code's first row.

    Returns
    -------
    codes : numpy.ndarray of int64, one per value
    counts : numpy.ndarray of int64, one per distinct value
    firsts : numpy.ndarray of int64, one per distinct value
        Only with ``first_rows``: where each code first occurs (increasing).

    Examples
    --------
    >>> codes, counts = first_codes(np.array([7, 3, 7, 5], dtype=np.uint64))
    >>> codes.tolist(), counts.tolist()
    ([0, 1, 0, 2], [2, 1, 1])
    >>> first_codes(np.array([7, 3, 7, 5], dtype=np.uint64), first_rows=True)[2].tolist()
    [0, 1, 3]
    """
    values = np.ascontiguousarray(values)
    if values.dtype.kind not in "iu" or values.dtype.itemsize != 8:
        raise TypeError(f"values: expected 64-bit integers, got {values.dtype}")
    n = len(values)
    size = 1 << max(1, int(2 * n - 1).bit_length())  # at least 2n slots
    # the table holds codes, each code's value is read at its first row: no table of the
    # values beside it (16 MB at 1M rows, at the load's peak)
    small = np.int32 if n < 2**31 else np.int64  # the table's and the per-code arrays'
    slots = np.full(size, -1, dtype=small)
    codes = np.empty(n, dtype=np.int64)
    counts = np.empty(n, dtype=small)
    firsts = np.empty(n, dtype=small)
    distinct = _first_codes(values.view(np.uint64), slots, codes, counts, firsts)
    del slots
    counts = counts[:distinct].astype(np.int64)
    return (codes, counts, firsts[:distinct].astype(np.int64)) if first_rows else (codes, counts)
