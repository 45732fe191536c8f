"""Near-duplicate "why removed" slices folded under the strongest one.

One artifact often shows up under several names with nearly the same rows: a planted word,
its typo flag and "typo & label" once took ranks 1-4 of the slices for one artifact. A slice
whose rows overlap a better-ranked slice's with Jaccard similarity >= ``FOLD_JACCARD`` is
folded under it: it leaves the ranking and is listed in the stronger slice's ``folded`` column
with its Jaccard. Exact duplicates are dropped before this (``same_rows``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["FOLD_JACCARD", "fold_by_overlap", "fold_similar"]

#: Slices whose rows overlap this much (Jaccard) with a better-ranked one are folded under it.
FOLD_JACCARD = 0.8


def fold_similar(rows_of: Sequence[np.ndarray], ids: Sequence[str], *,
                 threshold: float = FOLD_JACCARD) -> tuple[list[int], list[str]]:
    """Fold each slice whose rows are nearly those of a better-ranked one under it.

    Parameters
    ----------
    rows_of : sequence of np.ndarray
        Each slice's rows (sorted positions), best-ranked first.
    ids : sequence of str
        Each slice's id.
    threshold : float
        Jaccard similarity |A ∩ B| / |A ∪ B| from which two slices count as one finding (a
        planted word, its typo flag and "typo & label" are the same rows under three names).

    Returns
    -------
    kept : list of int
        Positions of the slices that stay, in rank order.
    folded : list of str
        For each kept slice, the slices folded under it with their Jaccard
        (``"typo=1 (0.93), typo=1 & label=neutral (0.88)"``), or "".
    """
    return fold_by_overlap(
        [len(r) for r in rows_of],
        lambda i, j: len(np.intersect1d(rows_of[i], rows_of[j], assume_unique=True)),
        ids, threshold=threshold)


def fold_by_overlap(sizes: Sequence[int], overlap: Callable[[int, int], int],
                    ids: Sequence[str], *, threshold: float = FOLD_JACCARD
                    ) -> tuple[list[int], list[str]]:
    """:func:`fold_similar` from each slice's size and ``overlap(i, j)``, the rows slices
    ``i`` and ``j`` share (asked only of pairs whose sizes allow the threshold)."""
    kept: list[int] = []
    notes: list[list[str]] = []
    sizes = [int(s) for s in sizes]
    for i in range(len(sizes)):
        home = None
        for slot, j in enumerate(kept):
            small, large = sorted((sizes[i], sizes[j]))
            if not large or small < threshold * large:  # Jaccard <= small / large
                continue
            inter = int(overlap(i, j))
            jaccard = inter / (sizes[i] + sizes[j] - inter)
            if jaccard >= threshold:
                home = slot
                notes[slot].append(f"{ids[i]} ({jaccard:.2f})")
                break
        if home is None:
            kept.append(i)
            notes.append([])
    return kept, [", ".join(n) for n in notes]
