"""A set of words as one sorted array of their UTF-8 bytes: :class:`WordList`.

The NER heuristic asks whether a sentence's first word is a common one (about 211,000 words
with NLTK's ``words`` list). As a ``frozenset`` of ``str`` that is about 20 MB in every
tagging process (8 MB of hash table, 12 MB of string objects), 14 copies on 16 cores. As a
sorted fixed-width bytes array saved beside the tagger's weights and mapped by the children
(:func:`aflite_core.cues._tagging.write_context`), it is one file's pages that every child
shares, and a word is found by binary search (one look a sentence at most).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

__all__ = ["WordList"]


class WordList:
    """Membership in a set of words, as ``word in words`` answers it for a ``frozenset``.

    Parameters
    ----------
    words : numpy.ndarray
        Sorted, distinct UTF-8 encodings of the words, a fixed-width bytes array (``S``
        dtype), none empty or holding a NUL byte (a fixed-width array cannot tell those
        apart); :meth:`of` makes it from any words.
    odd : iterable of str, optional
        The words that array cannot hold: the empty word, and words with a NUL character.

    Examples
    --------
    >>> words = WordList.of(["tree", "a", "été", ""])
    >>> "tree" in words, "été" in words, "" in words, "trees" in words, "a\\0" in words
    (True, True, True, False, False)
    >>> len(words)
    4
    """

    def __init__(self, words: np.ndarray, odd: Iterable[str] = ()) -> None:
        if words.dtype.kind != "S" or words.ndim != 1:
            raise ValueError(f"words: expected a 1-D bytes array (S dtype), got {words.dtype} "
                             f"of {words.ndim} dimension(s)")
        self._words = words
        self._odd = frozenset(odd)

    @classmethod
    def of(cls, words: Iterable[str]) -> WordList:
        """The set of ``words`` (any iterable of ``str``, duplicates allowed)."""
        distinct = set(words)
        odd = {w for w in distinct if not w or "\0" in w}
        encoded = sorted(w.encode("utf-8") for w in distinct - odd)
        width = max((len(e) for e in encoded), default=1)
        return cls(np.array(encoded, dtype=f"S{width}"), odd)

    def __contains__(self, word: object) -> bool:
        if not isinstance(word, str):
            return False
        if not word or "\0" in word:
            return word in self._odd
        key = word.encode("utf-8")
        if len(key) > self._words.dtype.itemsize:
            return False
        at = int(np.searchsorted(self._words, key))
        return at < len(self._words) and self._words[at] == key

    def __len__(self) -> int:
        return len(self._words) + len(self._odd)

    def __iter__(self):
        yield from sorted(self._odd)
        for word in self._words:
            yield word.decode("utf-8")

    def save(self, path: Path) -> list[str]:
        """Write the sorted array to ``path`` (``.npy``, no pickle); returns the odd words,
        which the caller keeps (e.g. as JSON) for :meth:`load`."""
        np.save(path, self._words, allow_pickle=False)
        return sorted(self._odd)

    @classmethod
    def load(cls, path: Path, odd: Iterable[str] = ()) -> WordList:
        """The list :meth:`save` wrote to ``path``, its pages mapped read-only (the processes
        that load it share them)."""
        return cls(np.asarray(np.load(path, allow_pickle=False, mmap_mode="r")), odd)
